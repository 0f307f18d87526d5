// ortops as an ONNX Runtime plugin execution provider (EP): the standard-domain RNN, GRU and
// LSTM nodes of an unmodified model run on a Vulkan device through the core's Layer, every
// other node on the next provider (CPU). libortops_ort.so exports CreateEpFactories /
// ReleaseEpFactory beside RegisterCustomOps: one library for both ONNX Runtime doors, sharing
// one core, one device context per process and the node's run (src/ort/noderun.hpp).
//
//   factory.cpp  the OrtEpFactory: one OrtEpDevice per usable Vulkan device, attached to the
//                hardware device of its kind: a CPU implementation (lavapipe) to ORT's CPU
//                device; a GPU to the GPU device ORT discovered with its PCI ids, else to one
//                the factory creates with them (ORT's discovery finds no GPU where
//                /sys/class/drm is missing); CreateEp reads the EP options (EP_OPTIONS).
//   node.cpp     a graph node read through ORT's graph API (attributes typed, inputs,
//                outputs, constant initializers) into the core's node config, checked by the
//                core's checkers (the config decoder and the layer's spec checks): the
//                checks that need no ORT are node_check.cpp's (fuzzed on their own).
//   quantized.cpp  com.microsoft DynamicQuantizeLSTM's int8/uint8 weights dequantized.
//   auto_placement.cpp  placement "auto": the core's cost model (placement_policy.hpp) with
//                the device's calibration, cached (costcache.hpp) or measured here;
//                cpu_side.cpp and onnx_model.cpp measure the ORT CPU side through the C API
//                (a one-LSTM model serialized in C++, run in a CPU session).
//   ep.cpp       the OrtEp: GetCapability claims each node the core takes, one fused node per
//                call of EpGraphSupportInfo_AddNodesToFuse (AddSingleNode looks for a kernel
//                at API 23), in the main graph and in every If/Loop/Scan body (ORT asks per
//                body); Compile makes one NodeRunner per node.
//
// API: a fixed OrtApi version, EP_API_VERSION (23, the first with the EP graph API's
// GetCapability/Compile; onnxruntime >= 1.29 is admitted); OrtEpApi::CreateHardwareDevice
// (ORT 1.24) only where the onnxruntime that loaded us has it. Built against headers of API 27
// or later (scripts/ort_headers.sh). No allocator is registered, so inputs and outputs are in
// ORT's CPU memory and no data transfer is needed.
#pragma once

#include <onnxruntime_c_api.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ep/node_check.hpp"   // NodeSpec and the checks that need no ORT
#include "ort/core.hpp"

namespace ortops::ep {

inline constexpr uint32_t EP_API_VERSION = 23;
// The onnxruntime whose OrtEpApi has CreateHardwareDevice ("\\since Version 1.24").
inline constexpr int HARDWARE_DEVICE_ORT_MINOR = 24;
inline constexpr const char* EP_NAME = "OrtopsExecutionProvider";
inline constexpr const char* EP_VENDOR = "ortops";
// Session options arrive as config entries "ep.<lower-case EP name>.<key>".
inline constexpr const char* EP_OPTION_PREFIX = "ep.ortopsexecutionprovider.";
// The OrtEpDevice metadata keys (ORT adds "version" and "library_path" itself).
inline constexpr const char* META_UUID = "vulkan_uuid";
inline constexpr const char* META_NAME = "vulkan_device_name";
inline constexpr const char* META_DRIVER = "vulkan_driver";
inline constexpr const char* META_INDEX = "vulkan_index";
inline constexpr const char* META_PCI_BUS_ID = "pci_bus_id";    // where VK_EXT_pci_bus_info gives it

// The EP's options (EP_OPTION_PREFIX + key; factory.cpp's EP_OPTIONS reads them, one line a
// key, and refuses any other key): device (a UUID, an index or what ortops::chooseDevice
// takes; default: the device of the OrtEpDevice chosen, which the factory lists
// CUDA_VISIBLE_DEVICES' first: visible.hpp), mode (the core's MODES), placement (the core's
// PLACEMENTS: gpu | auto, where the cost model of placement_policy.hpp leaves a node to the
// next provider where ORT CPU is predicted faster; default: the device's, defaultPlacement).
struct EpOptions
{
    std::optional<std::string> device;
    std::string mode = modeName(Mode::Deterministic);
    Placement placement = Placement::Gpu;
    bool placementGiven = false;    // else CreateEp sets the device's default placement
};

// The Vulkan devices an EP may run on: those the core enumerates that preserve NaN/Inf/-0 in
// float32 shaders (the layer refuses the others), the default one first: the device
// CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES assign first (visible.hpp), else the one the
// core prefers (chooseDevice). Empty when there is no Vulkan loader. `assignment` (when
// given) says why the environment's assignment could not be honoured ("" when it was, or
// when nothing was assigned).
std::vector<DeviceDescription>
usableDevices(std::string* assignment = nullptr);

// Whether an onnxruntime version string ("1.24.0") is 1.<minor> or later (false when unreadable).
bool
ortMinorAtLeast(const std::string& version, int minor);

// The device an EP runs on without a `device` option and without an OrtEpDevice's metadata:
// the assigned one, else the preferred one; the assignment's error when it is wrong.
const DeviceDescription&
defaultDevice();

// Whether ORT may hand the node to this EP: a standard-domain LSTM, GRU or RNN.
bool
isRecurrent(const OrtApi* api, const OrtNode* node);

// Read the node; throws ortops::ort::NodeError saying why the EP leaves it (opset version,
// element types, attribute types) or OrtCallError for a failed ORT call.
NodeSpec
readNode(const OrtApi* api, const OrtNode* node);

// The node's config, decoded and checked by the core (node_check.hpp's checkedConfig, with
// the EP's mode and its device's limits). `outputs`: the ONNX outputs computed.
inline NodeConfig
nodeConfig(const NodeSpec& spec, const std::vector<std::string>& outputs, const EpOptions& options,
           const DeviceDescription& device)
{
    return checkedConfig(spec, outputs, options.mode, { device.uuid, device.name, device.maxStorageBufferRange });
}

// A DynamicQuantizeLSTM weight (`which` 0: W, 1: R; [dirs, cols, 4*hidden] int8/uint8) as
// ai.onnx LSTM's float32 [dirs, 4*hidden, cols]: (q - zero_point) * scale in float64, rounded
// once. NodeError naming the argument, what was expected and what came (also for the
// per-channel zero points ORT's kernel refuses).
std::vector<float>
dequantize(const OrtApi* api, const NodeSpec& spec, size_t which, std::vector<int64_t>& shape);

} // namespace ortops::ep
