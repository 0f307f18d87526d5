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
//   read.cpp     a graph node read through ORT's graph API, once per GetCapability or
//                Compile call, into the core's typed description (its op, version, inputs with
//                their element types, dims and constant values, outputs, attributes with their
//                types and values: core/placement/node_check.hpp), which the core's one node
//                checker answers (checkNode: taken with the checked config, or the reason).
//   auto_placement.cpp  placement "auto": the core's cost model (placement_policy.hpp) with
//                the device's calibration, cached (costcache.hpp) or measured here;
//                cpu_side.cpp and onnx_model.cpp measure the ORT CPU side through the C API
//                (a one-LSTM model serialized in C++, run in a CPU session).
//   ep.cpp       the OrtEp: GetCapability claims each node the core takes, one fused node per
//                call of EpGraphSupportInfo_AddNodesToFuse (AddSingleNode looks for a kernel
//                at API 23), in the main graph and in every If/Loop/Scan body (ORT asks per
//                body), and records each decision under the session's report_id
//                (core/placement/decisions.hpp, keyed by the node's path, name and op type);
//                Compile reads and checks the node again (ORT hands it a graph of its own;
//                nothing is kept on node pointers between calls),
//                dequantizes a DynamicQuantizeLSTM's weights (config/quantized.hpp) and makes
//                one NodeRunner per node.
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
// next provider where ORT CPU is predicted faster; default: the device's, defaultPlacement),
// report_id (a key of the caller's: the EP records its decision on each recurrent node under
// it, decisions.hpp; ortops.InferenceSession builds its placement report from them).
struct EpOptions
{
    std::optional<std::string> device;
    std::string mode = modeName(Mode::Deterministic);
    Placement placement = Placement::Gpu;
    bool placementGiven = false;    // else CreateEp sets the device's default placement
    std::string reportId;
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

// Whether the node is one the core's checker answers for (an ai.onnx LSTM, GRU or RNN, a
// com.microsoft DynamicQuantizeLSTM).
bool
isRecurrent(const OrtApi* api, const OrtNode* node);

// A node as read through ORT's graph API: the core's description and, by input position, the
// value of each constant initializer (nullptr: not one), which Compile builds the layer from.
struct ReadNode
{
    NodeDescription description;
    std::vector<const OrtValue*> constants;
};

// Read the node once: every attribute through OpAttr_GetName, OpAttr_GetType and ReadOpAttr
// once (counted under ORTOPS_TESTING: base/test_counts.hpp), every input's type, dims and
// constness. OrtCallError for a failed ORT call.
ReadNode
readNode(const OrtApi* api, const OrtNode* node);

// The axes of the ai.onnx Unsqueeze that makes the node's X, where one with constant axes does
// (NodeInput::unsqueezed: placement auto's cost model reads them). Asked in GetCapability only:
// the graph Compile gets holds the node alone, and ORT logs a warning for a producer outside it.
std::optional<std::vector<int64_t>>
unsqueezedX(const OrtApi* api, const OrtNode* node);

// Where a graph ORT hands GetCapability is (decisions.hpp's path: the If/Loop/Scan node and
// body graph holding it; "" for the main graph). Only the innermost: the graph ORT hands for
// a body's own If/Loop node knows no parent of its own (onnxruntime 1.32).
std::string
graphPath(const OrtApi* api, const OrtGraph* graph);

// What the EP asks the checker with a node: its mode and device; `computed`: the outputs the
// fused node has (Compile), else every named one.
NodeQuestion
questionOf(const EpOptions& options, const DeviceDescription& device,
           std::optional<std::vector<std::string>> computed = std::nullopt);

} // namespace ortops::ep
