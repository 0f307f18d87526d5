// The ONNX Runtime custom ops ortops::LSTM / GRU / RNN (float32) and LSTM_f16 / GRU_f16 /
// RNN_f16 (float16) of libortops_ort.so, through ONNX Runtime's C API only: no Python, no
// onnxruntime-extensions, no link against libonnxruntime (the API comes from the OrtApiBase
// the loading onnxruntime hands to RegisterCustomOps, library.cpp).
//
// The node (written by ortops.convert): one string attribute `config` (v4, nodeconfig.hpp);
// inputs exactly ONNX's for the op, in ONNX's order (LSTM: X, W, R, B, sequence_lens,
// initial_h, initial_c, P; GRU and RNN: X, W, R, B, sequence_lens, initial_h), B onward
// optional (absent: an empty name, or left off the end), sequence_lens int32, the rest of the
// op's element type; outputs exactly ONNX's (Y, Y_h[, Y_c]), all optional. config["absent"]
// must list exactly the absent optional inputs, config["outputs"] exactly the outputs the node
// names.
//
// One Kernel per node and session (ORT creates it once and calls compute from any number of
// threads at once). Creation decodes and checks the config against the node, and builds the
// ortops::Layer (uploading the weights once) when W, R, B and P are constant initializers.
// Otherwise the weights are inputs fed at run time: compute keeps a host copy of the last
// weights it built a layer from and rebuilds only when the fed bits differ.
//
// Errors never cross the C boundary: every entry point returns an OrtStatus whose message is
// "ortops: <op> node '<name>': <what>" (the words "device lost" for a lost Vulkan device;
// status.hpp maps each error). The OrtCustomOp callbacks are op.cpp's, the values and strings
// of ORT's API values.hpp's.
#pragma once

#include <onnxruntime_c_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ort/core.hpp"   // the core's headers, with the visibility they need (core.hpp says why)
#include "ort/noderun.hpp"

namespace ortops::ort {

// The OrtCustomOp version these ops declare, and the OrtApi version ORT hands their kernels
// (it calls CreateKernelV2 with GetApi(op.version)). 16: the first version whose
// OrtCustomOp has CreateKernelV2/KernelComputeV2 (ORT's custom_ops.cc,
// min_ort_version_with_compute_v2_support); everything else used is older (KernelInfo names,
// counts and type info 1.14, KernelInfoGetConstantInput_tensor and KernelInfo_GetNodeName
// 1.15). So the library loads into onnxruntime >= 1.16 (ortops admits >= 1.29).
inline constexpr uint32_t ORT_API_REQUIRED = 16;

// One of the six ops: an OrtCustomOp (first, so ORT's pointer converts back) plus what it is.
struct OpDef : OrtCustomOp
{
    const Cell* cell = nullptr;
    ElementType dtype = ElementType::Float32;
    std::string name;    // "LSTM", "LSTM_f16", ...
};

// Fill `op` for cell `cell` and element type `dtype` (the name, the callbacks; op.cpp).
void
defineOp(OpDef& op, const Cell& cell, ElementType dtype);

// "ortops: LSTM node 'name': "
std::string
prefixFor(const OpDef* op, const std::string& node);

struct Kernel
{
    const OrtApi* api = nullptr;
    const OpDef* op = nullptr;
    std::string nodeName;
    NodeConfig config;
    // Which of the cell's inputs/outputs the node has (a non-empty name at that index).
    std::array<bool, 8> hasInput{};
    std::array<bool, 3> hasOutput{};
    size_t nodeInputs = 0;
    size_t nodeOutputs = 0;

    // The run (noderun.hpp, shared with the execution provider): the context's inputs and
    // outputs are the node's, in ONNX's order; its layer built at creation when the weights
    // are constant, else built and replaced by the runs.
    NodeRunner runner;

    // Throws (caught by the C entry points, which turn it into a status).
    Kernel(const OrtApi* api, const OpDef* op, const OrtKernelInfo* info);
    void compute(OrtKernelContext* context);

    // "ortops: LSTM node 'name': "
    std::string prefix() const;

  private:
    // Creation: the node's name and config (checked against the op), the node's inputs and
    // outputs (checked against the cell and the config), the layer when the weights are
    // constant initializers.
    void readConfig(const OrtKernelInfo* info);
    void readNodeIO(const OrtKernelInfo* info);
    void checkNodeIO() const;
    void buildConstantLayer(const OrtKernelInfo* info);
};

} // namespace ortops::ort
