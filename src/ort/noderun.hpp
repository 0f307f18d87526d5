// One recurrent node's run through ONNX Runtime's kernel context, shared by both ONNX Runtime
// doors: the custom-op kernels (kernel.cpp: ortops::LSTM etc., the context's inputs in ONNX's
// order) and the plugin execution provider (src/ep/: a standard node fused alone, the fused
// node's inputs and outputs in ORT's order, mapped by name).
//
// The weights: constant ones make the layer once, before any run (`layer` set,
// `constantWeights`); otherwise they are inputs fed at run time and run() keeps a host copy of
// the last weights it built a layer from, rebuilding only when the fed bits differ. run() may
// be called from many threads at once (ORT does, on one kernel or compute state): the layer's
// run is thread-safe and the rebuild is under a lock; a run already holding the old layer
// finishes with it (shared_ptr).
#pragma once

#include <onnxruntime_c_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ort/core.hpp"
#include "ort/plain.hpp"   // IN_X ... IN_P, WEIGHT_INPUTS
#include "ort/values.hpp"

namespace ortops::ort {

// A weight fed as an input, kept to compare the next run's with.
struct HeldWeight
{
    bool present = false;
    ElementType type = ElementType::Float32;
    std::vector<int64_t> shape;
    std::vector<unsigned char> bytes;
};

// W R B P (WEIGHT_INPUTS' order; W and R present) as the layer takes them.
Weights
weightsOf(const std::array<std::optional<HostTensor>, 4>& w);

// A weight (W, R, B or P) as a door finds the node's: absent (an optional one), a constant (a
// host tensor on its value's data, or one the door made: a DynamicQuantizeLSTM's dequantized W
// and R), or fed at run time (neither).
struct WeightSource
{
    bool present = false;
    std::optional<HostTensor> constant;
};

// The source of a present weight whose constant value is `value` (nullptr: fed at run time),
// of element type `type` (InputError naming `name` otherwise).
WeightSource
weightSource(const OrtApi* api, const OrtValue* value, std::string_view name, ElementType type);

struct NodeRunner
{
    const OrtApi* api = nullptr;
    const Cell* cell = nullptr;
    ElementType dtype = ElementType::Float32;
    NodeConfig config;
    // The kernel context's index of each of the cell's inputs and outputs; -1: the node has
    // none there. An output the config computes with no index is computed and dropped.
    std::array<int, 8> inputAt{ -1, -1, -1, -1, -1, -1, -1, -1 };
    std::array<int, 3> outputAt{ -1, -1, -1 };

    bool constantWeights = false;
    std::shared_ptr<Layer> layer;           // set before runs when constantWeights
    std::mutex weightsLock;                 // guards layer and held when !constantWeights
    std::array<HeldWeight, 4> held;         // W, R, B, P as last built

    // Both doors' last step before any run: with every present weight constant, the layer is
    // built now from them (uploaded once); otherwise the runs build it from what they are fed.
    // `config`, `cell` and `dtype` are set before.
    void useWeights(const std::array<WeightSource, 4>& weights);

    // Throws (the callers turn it into a status, status.hpp).
    void run(OrtKernelContext* context);

  private:
    std::optional<HostTensor> input(OrtKernelContext* context, size_t count, size_t i, ElementType type) const;
    std::shared_ptr<Layer> layerFor(OrtKernelContext* context, size_t count);
    OutputPointers outputsFor(OrtKernelContext* context, const OutputShapes& shapes,
                              std::array<std::vector<unsigned char>, 3>& dropped) const;
};

} // namespace ortops::ort
