// The EP's node checks that need no ONNX Runtime (node.cpp reads the node through ORT's graph
// API, then hands what it read to these): the op and its version, the input and output counts,
// the inputs' element types, the attributes' names, types and values, the config's "attrs" JSON,
// and the config decoded and checked by the core (the decoder, the layer's spec, the device's
// storage-binding limit). Kept apart from ORT's headers so that tests/fuzz/fuzz_ep_node.cpp
// runs exactly these on fuzzed nodes with no ORT, Vulkan or Kompute (scripts/ci/fuzz.sh).
// Every refusal is an ort::NodeError, the core's ConfigError / InputError /
// UnsupportedLayerError; the EP's GetCapability prefixes it with prefixFor (naming the node).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#if defined(__GNUC__)
#pragma GCC visibility push(default)    // the core's types, as ort/core.hpp includes them (it says why)
#endif
#include "core/config/cells.hpp"
#include "core/config/nodeconfig.hpp"
#include "core/placement/placement_policy.hpp"
#include "core/config/types.hpp"
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#include "ort/plain.hpp"

// ONNX Runtime's opaque types, declared as onnxruntime_c_api.h declares them.
struct OrtValue;
struct OrtValueInfo;

namespace ortops::ep {

// com.microsoft DynamicQuantizeLSTM (onnxruntime.quantization.quantize_dynamic's LSTM): taken
// as an LSTM whose constant int8/uint8 W and R are dequantized once at Compile
// (quantized.cpp; ortops/ort/quantized.py holds the same rules for the custom-op door).
inline constexpr const char* QUANTIZED_OP = "DynamicQuantizeLSTM";
inline constexpr const char* QUANTIZED_DOMAIN = "com.microsoft";
// Its inputs past LSTM's eight: W_scale, W_zero_point, R_scale, R_zero_point.
inline constexpr size_t QUANTIZED_INPUTS = 12;

// ORT's OrtOpAttrType values (node.cpp asserts them).
enum AttrType : int
{
    ATTR_UNDEFINED = 0, ATTR_INT, ATTR_INTS, ATTR_FLOAT, ATTR_FLOATS, ATTR_STRING, ATTR_STRINGS, ATTR_GRAPH, ATTR_TENSOR
};

// One standard recurrent node as read from the graph (node.cpp).
struct NodeSpec
{
    std::string name;
    std::string opType;     // LSTM, GRU, RNN, DynamicQuantizeLSTM (for messages)
    const Cell* cell = nullptr;
    bool quantized = false;                        // DynamicQuantizeLSTM (cell: LSTM)
    std::array<const OrtValue*, 4> quantParams{};  // W_scale, W_zero_point, R_scale, R_zero_point
    ElementType dtype = ElementType::Float32;
    std::array<std::string, 8> inputs;     // by ONNX position; "" absent
    std::array<std::string, 3> outputs;    // by ONNX position; "" absent
    std::array<const OrtValueInfo*, 8> inputInfo{};
    // Static shapes where the graph gives every dimension.
    std::array<std::optional<std::vector<int64_t>>, 8> shapes;
    // Dims as the graph gives them (-1 where dynamic; nullopt: rank unknown).
    std::array<GraphDims, 8> dims;
    // The constant initializers among the inputs (nullptr: not constant).
    std::array<const OrtValue*, 8> constants{};
    std::string attrsJson;   // the config's "attrs" object
};

// A node's attributes as read (ONNX's defaults where absent; ORT fills some in itself).
struct RawAttrs
{
    std::optional<int64_t> hidden;
    std::string direction = "forward";
    int64_t layout = 0, inputForget = 0, linearBeforeReset = 0;
    std::optional<std::vector<std::string>> activations;
    std::optional<std::vector<float>> alpha, beta;
    std::optional<float> clip;
};

// An attribute's value as ORT's ReadOpAttr gives it: an INT's integer, a FLOAT's real, else
// the bytes (a string; strings NUL-separated; floats in native order).
struct AttrValue
{
    int64_t integer = 0;
    float real = 0;
    std::string bytes;
};

// "ortops: LSTM node 'name': "
std::string
prefixFor(const std::string& op, const std::string& node);

// spec.opType's cell (DynamicQuantizeLSTM: LSTM's) and spec.quantized; NodeError for any other op.
void
setCell(NodeSpec& spec);

// NodeError unless `version` is one ORT runs (not asked of DynamicQuantizeLSTM).
void
checkVersion(const NodeSpec& spec, int version);

// NodeError when the node has more inputs or outputs than its op.
void
checkCounts(const NodeSpec& spec, size_t inputs, size_t outputs);

// Input i's ONNX element type: X sets spec.dtype (float32 or float16), the others must have it
// (sequence_lens int32; a DynamicQuantizeLSTM's W and R are dequantize()'s to check).
void
checkElement(NodeSpec& spec, size_t i, int element);

// NodeError when X, W or R is absent.
void
checkRequired(const NodeSpec& spec);

// NodeError unless `name` is an attribute of the op with the type ONNX's schemas give it.
void
checkAttr(const Cell& cell, const std::string& name, int type);

// Record attribute `name` (checked by checkAttr) in `a`.
void
setAttr(RawAttrs& a, const std::string& name, const AttrValue& value);

// The config's "attrs" object (what ortops.convert writes for the same attributes).
std::string
attrsJson(const RawAttrs& a, const Cell& cell);

// The node's named outputs in ONNX's order.
std::vector<std::string>
namedOutputs(const NodeSpec& spec);

// What the config check needs of the device (the core's DeviceDescription has more).
struct DeviceLimits
{
    std::string uuid;    // "": none written into the config
    std::string name;
    uint64_t maxStorageBufferRange = 0;
};

// The node's config, decoded and checked by the core (decodeNodeConfig: attributes,
// activations; makeSpec, spec.hpp: weight shapes and types where the graph gives them; the
// device's storage-binding limit). `outputs`: the ONNX outputs computed.
NodeConfig
checkedConfig(const NodeSpec& spec, const std::vector<std::string>& outputs, const std::string& mode,
              const DeviceLimits& device);

} // namespace ortops::ep
