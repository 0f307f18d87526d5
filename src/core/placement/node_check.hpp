// The one answer to "does the device take this recurrent node, and why not", for every door:
// the plugin EP (src/ep/, in GetCapability and again in Compile), ortops.convert and the
// placement report of ortops.InferenceSession (through ortops._vk.check_node). A door describes
// the node as it reads it (NodeDescription: typed values, no JSON), says what it asks
// (NodeQuestion: the mode, the device) and gets a NodeVerdict: taken, with the checked
// NodeConfig the layer is built from, or refused with the reason. Every refusal is worded here
// or in the core's checkers it calls: the op and its operator version (SUPPORTED_VERSIONS), the
// input and output counts, each attribute's name, ONNX attribute type and value (the values by
// validateNodeConfig, the rules the JSON decoder applies too), the inputs' element types, the
// quantized op's inputs (config/quantized.hpp), the device's capability, the layer's spec and
// each weight's storage binding (checkLayer). Needs no Vulkan, no ONNX Runtime: the EP's fuzz
// target (tests/fuzz/fuzz_ep_node.cpp) runs it on fuzzed descriptions.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/cells.hpp"
#include "config/nodeconfig.hpp"
#include "config/onnx_types.hpp"
#include "config/types.hpp"
#include "placement/placement_policy.hpp"

namespace ortops {

// A node input by its ONNX position, as the graph gives it.
struct NodeInput
{
    std::string name;                // "" absent
    int element = onnx::UNDEFINED;   // TensorProto.DataType; UNDEFINED: unknown
    GraphDims dims;                  // as the graph gives them (< 0 dynamic); nullopt: rank unknown
    bool constant = false;           // a constant initializer (its value known when the model loads)
    const void* data = nullptr;      // a constant's elements where the door has them (not owned;
                                     // read for a quantized node's scales and zero points only)
    // Where an ai.onnx Unsqueeze with constant axes makes the input: those axes (negative from
    // the end), each a dimension of 1 whatever the graph's shapes say (a streaming export's one
    // frame, seq 1, often inside a subgraph whose shapes ONNX Runtime does not infer). X's only.
    std::optional<std::vector<int64_t>> unsqueezed;

    bool present() const { return !name.empty(); }
    // The shape, where every dimension is known.
    std::optional<std::vector<int64_t>> shape() const;
};

// An attribute with its ONNX attribute type and the value of that type.
struct NodeAttribute
{
    std::string name;
    int type = onnx::ATTR_UNDEFINED;    // AttributeProto.AttributeType
    int64_t i = 0;                      // ATTR_INT
    float f = 0.0f;                     // ATTR_FLOAT
    std::string s;                      // ATTR_STRING
    std::vector<int64_t> ints;          // ATTR_INTS
    std::vector<float> floats;          // ATTR_FLOATS
    std::vector<std::string> strings;   // ATTR_STRINGS
};

// A node as a door reads it.
struct NodeDescription
{
    std::string name;
    std::string opType;
    std::string domain;               // "" or "ai.onnx" for the standard ops
    int sinceVersion = 0;             // the operator version the model's opset gives the op
    std::vector<NodeInput> inputs;    // by ONNX position
    std::vector<std::string> outputs; // by ONNX position; "" not named
    std::vector<NodeAttribute> attributes;
};

// What the checks need of the device.
struct DeviceFacts
{
    std::string name;
    std::string uuid;
    uint64_t maxStorageBufferRange = 0;
    bool nanPreserveFloat32 = false;
};

// What the door asks with the node.
struct NodeQuestion
{
    Mode mode = Mode::Deterministic;
    std::optional<DeviceFacts> device;    // nullopt: the door has none (`noDevice` says why)
    std::string noDevice;
    bool writeDevice = true;              // the config names the device by its UUID
    // The outputs to compute (the cell's names, in ONNX's order); nullopt: every named one.
    std::optional<std::vector<std::string>> computed;
};

// A refusal of the node itself (its op, version, counts, attributes' names and types, inputs).
struct NodeRefusal : std::invalid_argument
{
    using std::invalid_argument::invalid_argument;
};

struct NodeVerdict
{
    bool taken = false;
    // Taken: the device's name (placement "auto" adds the cost model's prediction); refused:
    // why, in the words every door reports.
    std::string reason;
    // What the reports show of the node, from the description whatever the verdict.
    const Cell* cell = nullptr;           // nullptr: not a recurrent op
    bool quantized = false;               // DynamicQuantizeLSTM (cell: LSTM)
    std::string dtype;                    // X's element type when float32, float16 or float64, else ""
    std::string direction = "forward";
    int64_t layout = 0;
    std::optional<int64_t> hiddenSize;
    // Taken: the checked config, whether every weight is constant (the layer is built once),
    // what the report says of the weights, and the dims the cost model reads (W in ai.onnx's
    // layout).
    NodeConfig config;
    bool constantWeights = false;
    std::string weights;
    GraphDims xDims, wDims;
};

// Whether (domain, op type) is a node this checker answers for: an ai.onnx LSTM, GRU or RNN, or
// com.microsoft DynamicQuantizeLSTM.
bool
isRecurrentOp(const std::string& domain, const std::string& opType);

// The cell of such a node (DynamicQuantizeLSTM: LSTM's), else nullptr.
const Cell*
recurrentCell(const std::string& domain, const std::string& opType);

// The verdict on a node. Throws only what is not a refusal (out of memory, a logic error).
NodeVerdict
checkNode(const NodeDescription& node, const NodeQuestion& question);

// Placement "auto" on a verdict (placement_policy.hpp): a taken node stays taken where the
// calibration predicts the device at least as fast (its reason gains the prediction), else is
// refused with the cost model's reason. Without a calibration (`cal` nullptr) the node stays
// taken and its reason says `problem`. Returns the cost model's words alone (its prediction,
// or `problem`) for a log; "" for a verdict that was not taken.
std::string
placeAuto(NodeVerdict& verdict, const Calibration* cal, const std::string& problem);

// "ortops: LSTM node 'name': ", how the EP's messages name a node.
std::string
nodePrefix(const std::string& opType, const std::string& name);

} // namespace ortops
