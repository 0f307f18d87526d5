// The node checker (node_check.hpp). The checks run in the order a door reads a node: the op,
// its version and counts, the attributes' names and types, the inputs' element types and
// presence, a quantized node's inputs, the outputs computed; then the config (the typed
// attributes straight into validateNodeConfig's draft), the device, the layer's spec and its
// storage bindings (checkLayer).
#include "placement/node_check.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <string_view>

#include "base/errors.hpp"
#include "config/activations.hpp"
#include "config/json.hpp"
#include "config/nodeconfig_text.hpp"
#include "config/quantized.hpp"
#include "rnn/device_check.hpp"
#include "rnn/layer_check.hpp"

namespace ortops {

namespace {

// X's dims with those an Unsqueeze makes 1 (NodeInput::unsqueezed). A recurrent op's X has rank
// 3: other dims (ONNX Runtime gives rank 0 for a shape it does not know) say nothing.
GraphDims
withUnsqueezed(const GraphDims& dims, const std::optional<std::vector<int64_t>>& axes)
{
    if (!axes) {
        return dims;
    }
    std::vector<int64_t> d = dims && dims->size() == 3 ? *dims : std::vector<int64_t>(3, -1);
    auto rank = static_cast<int64_t>(d.size());
    for (int64_t a : *axes) {
        int64_t at = a < 0 ? a + rank : a;
        if (at >= 0 && at < rank && d[at] < 0) {
            d[at] = 1;
        }
    }
    return d;
}

// Input positions in ONNX's order (cells.hpp): X W R B sequence_lens initial_h initial_c P.
constexpr size_t IN_X = 0, IN_W = 1, IN_R = 2, IN_B = 3, IN_LENS = 4, IN_P = 7;
constexpr std::array<size_t, 4> WEIGHT_INPUTS = { IN_W, IN_R, IN_B, IN_P };

// The config's node name is for messages; validateNodeConfig takes at most 4096 bytes.
constexpr size_t CONFIG_NAME_BYTES = 4096;

// Each attribute the ops have, with the type ONNX's schemas give it (and the op it is
// restricted to, "" for every op).
struct AttrDef
{
    std::string_view name;
    int type;
    std::string_view op;
};
constexpr AttrDef ATTRS[] = {
    { "hidden_size", onnx::ATTR_INT, "" },           { "direction", onnx::ATTR_STRING, "" },
    { "layout", onnx::ATTR_INT, "" },                { "activations", onnx::ATTR_STRINGS, "" },
    { "activation_alpha", onnx::ATTR_FLOATS, "" },   { "activation_beta", onnx::ATTR_FLOATS, "" },
    { "clip", onnx::ATTR_FLOAT, "" },                { "input_forget", onnx::ATTR_INT, "LSTM" },
    { "linear_before_reset", onnx::ATTR_INT, "GRU" },
};

[[noreturn]] void
refuse(const std::string& why)
{
    throw NodeRefusal(why);
}

std::string
versionList()
{
    std::string out;
    for (size_t i = 0; i < std::size(SUPPORTED_VERSIONS); ++i) {
        out += (i ? ", " : "") + std::to_string(SUPPORTED_VERSIONS[i]);
    }
    return out;
}

// The node's name as the config holds it: valid UTF-8 (other bytes as '?'), at most 4096 bytes.
std::string
configName(const std::string& name)
{
    std::string out = name;
    if (!json::isValidUtf8(out)) {
        for (char& c : out) {
            c = (static_cast<unsigned char>(c) < 0x80) ? c : '?';
        }
    }
    if (out.size() > CONFIG_NAME_BYTES) {
        size_t cut = CONFIG_NAME_BYTES;
        while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) {
            --cut;    // not inside a character
        }
        out.resize(cut);
    }
    return out;
}

const NodeInput*
inputAt(const NodeDescription& node, size_t i)
{
    return i < node.inputs.size() && node.inputs[i].present() ? &node.inputs[i] : nullptr;
}

const NodeAttribute*
attribute(const NodeDescription& node, std::string_view name)
{
    for (const NodeAttribute& a : node.attributes) {
        if (a.name == name) {
            return &a;
        }
    }
    return nullptr;
}

// What the reports show: the op's cell, the element type of X, the shape attributes.
void
summarize(const NodeDescription& node, NodeVerdict& v)
{
    v.quantized = node.domain == QUANTIZED_DOMAIN && node.opType == QUANTIZED_OP;
    v.cell = recurrentCell(node.domain, node.opType);
    const NodeInput* x = inputAt(node, IN_X);
    int element = x ? x->element : onnx::UNDEFINED;
    const NodeInput* w = inputAt(node, IN_W);
    if (element == onnx::UNDEFINED && w != nullptr && !v.quantized) {
        element = w->element;    // X's type unknown to the graph (e.g. an untyped body value): W's
    }
    if (element == onnx::FLOAT || element == onnx::FLOAT16 || element == onnx::DOUBLE) {
        v.dtype = onnx::elementName(element);
    }
    if (const NodeAttribute* a = attribute(node, "direction"); a && a->type == onnx::ATTR_STRING) {
        v.direction = a->s;
    }
    if (const NodeAttribute* a = attribute(node, "layout"); a && a->type == onnx::ATTR_INT) {
        v.layout = a->i;
    }
    if (const NodeAttribute* a = attribute(node, "hidden_size"); a && a->type == onnx::ATTR_INT) {
        v.hiddenSize = a->i;
    }
}

void
checkOp(const NodeDescription& node, const NodeVerdict& v)
{
    const Cell& cell = *v.cell;
    if (!v.quantized &&
        std::find(std::begin(SUPPORTED_VERSIONS), std::end(SUPPORTED_VERSIONS), node.sinceVersion) ==
          std::end(SUPPORTED_VERSIONS)) {
        refuse(node.opType + "-" + std::to_string(node.sinceVersion) + " is not one of the supported versions " +
               versionList());
    }
    size_t maxInputs = v.quantized ? QUANTIZED_INPUTS : cell.inputCount;
    if (node.inputs.size() > maxInputs || node.outputs.size() > cell.outputCount) {
        refuse("the node has " + std::to_string(node.inputs.size()) + " inputs and " +
               std::to_string(node.outputs.size()) + " outputs; " + node.opType + " has at most " +
               std::to_string(maxInputs) + " and " + std::to_string(cell.outputCount));
    }
    for (const NodeAttribute& a : node.attributes) {
        const AttrDef* def = nullptr;
        for (const AttrDef& d : ATTRS) {
            def = d.name == a.name && (d.op.empty() || d.op == cell.name) ? &d : def;
        }
        if (def == nullptr) {
            refuse("attribute " + a.name + " is not an attribute of " + std::string(cell.name));
        }
        if (a.type != def->type) {
            refuse("attribute " + a.name + " has type " + onnx::attributeName(a.type) + ", the " + node.opType +
                   " schema says " + onnx::attributeName(def->type));
        }
    }
}

// X sets the element type (float32 or float16) the other inputs must have (sequence_lens
// int32; a quantized node's W and R are the quantized rule's). Returns it.
ElementType
checkElements(const NodeDescription& node, const NodeVerdict& v)
{
    const Cell& cell = *v.cell;
    ElementType dtype = v.dtype == "float16" ? ElementType::Float16 : ElementType::Float32;
    if (v.dtype != "float32" && v.dtype != "float16") {
        const NodeInput* x = inputAt(node, IN_X);
        std::string got = x && x->element != onnx::UNDEFINED ? onnx::elementName(x->element) : "of an unknown type";
        refuse("X is " + got + "; the GPU path takes float32 and float16");
    }
    if (v.quantized && dtype != ElementType::Float32) {
        refuse(std::string(QUANTIZED_OP) + ": X must be float32, got " + elementTypeName(dtype));
    }
    for (size_t i = IN_X + 1; i < cell.inputCount; ++i) {
        const NodeInput* in = inputAt(node, i);
        if (in == nullptr || in->element == onnx::UNDEFINED || (v.quantized && (i == IN_W || i == IN_R))) {
            continue;
        }
        ElementType want = i == IN_LENS ? ElementType::Int32 : dtype;
        if (in->element != onnx::elementOf(want)) {
            refuse("input " + std::string(cell.inputs[i]) + " is " + onnx::elementName(in->element) + ", not " +
                   elementTypeName(want));
        }
    }
    for (size_t i = 0; i < IN_B; ++i) {
        if (inputAt(node, i) == nullptr) {
            refuse("input " + std::string(cell.inputs[i]) + " is required and the node has none");
        }
    }
    return dtype;
}

QuantTensor
quantTensor(const NodeInput& in)
{
    return QuantTensor{ in.element, in.shape().value_or(std::vector<int64_t>{}), in.data };
}

// A DynamicQuantizeLSTM's W and R with their scales and zero points: present, constant, of
// the quantized rule's types, shapes and values (their data is not dequantized here). Returns
// what the report says of the weights.
std::string
checkQuantized(const NodeDescription& node)
{
    const std::array<std::string_view, 6> names = { "W", "W_scale", "W_zero_point", "R", "R_scale", "R_zero_point" };
    const std::array<size_t, 6> at = { IN_W, 8, 9, IN_R, 10, 11 };
    std::string missing;
    for (size_t k = 0; k < names.size(); ++k) {
        missing += inputAt(node, at[k]) ? "" : (missing.empty() ? "" : ", ") + std::string(names[k]);
    }
    if (!missing.empty()) {
        refuse(std::string(QUANTIZED_OP) + " without " + missing + " (ONNX Runtime's own kernel reports it)");
    }
    for (size_t w = 0; w < 2; ++w) {
        std::string varying;
        for (size_t k = 3 * w; k < 3 * w + 3; ++k) {
            const NodeInput& in = *inputAt(node, at[k]);
            varying += in.constant ? "" : (varying.empty() ? "" : ", ") + std::string(names[k]) + " " +
                                            configtext::quoted(in.name);
        }
        if (!varying.empty()) {
            refuse(std::string(QUANTIZED_OP) + ": " + varying + " not constant (the device path dequantizes constant "
                   "weights once)");
        }
    }
    for (size_t i : { IN_B, IN_P }) {
        const NodeInput* in = inputAt(node, i);
        if (in != nullptr && !in->constant) {
            refuse(std::string(QUANTIZED_OP) + ": " + (i == IN_B ? "B " : "P ") + configtext::quoted(in->name) +
                   " not constant (the device path takes a quantized node's weights once)");
        }
    }
    for (size_t w = 0; w < 2; ++w) {
        checkQuantizedWeight(names[3 * w], quantTensor(*inputAt(node, at[3 * w])),
                             quantTensor(*inputAt(node, at[3 * w + 1])), quantTensor(*inputAt(node, at[3 * w + 2])));
    }
    return describeQuantized(quantTensor(*inputAt(node, IN_W)), quantTensor(*inputAt(node, 8))) +
           ", dequantized to float32 and uploaded once";
}

// The outputs computed: the question's, else every named one.
std::vector<std::string>
computedOutputs(const NodeDescription& node, const Cell& cell, const NodeQuestion& q)
{
    if (q.computed) {
        return *q.computed;
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < cell.outputCount && i < node.outputs.size(); ++i) {
        if (!node.outputs[i].empty()) {
            out.emplace_back(cell.outputs[i]);
        }
    }
    if (out.empty()) {
        refuse("the node names no output");
    }
    return out;
}

// How many alpha and beta values the activations consume (ORT ignores the rest; the config
// takes at most 64): names unknown to the table count nothing (the rules refuse them).
std::pair<size_t, size_t>
parametersUsed(const Cell& cell, const std::optional<std::vector<std::string>>& names)
{
    std::vector<std::string> list;
    if (names) {
        list = *names;
    } else {
        for (uint32_t k = 0; k < cell.slotCount; ++k) {
            list.emplace_back(cell.defaultActivations[k]);
        }
    }
    size_t alphas = 0, betas = 0;
    for (const std::string& n : list) {
        if (auto code = activationCode(n)) {
            alphas += ACTIVATIONS[*code].takesAlpha ? 1 : 0;
            betas += ACTIVATIONS[*code].takesBeta ? 1 : 0;
        }
    }
    return { alphas, betas };
}

std::vector<double>
parameters(const std::vector<float>& values, size_t keep)
{
    return std::vector<double>(values.begin(), values.begin() + static_cast<long>(std::min(keep, values.size())));
}

// The draft's attributes from the typed ones (types checked by checkOp).
void
draftAttrs(const NodeDescription& node, const Cell& cell, NodeConfigDraft::Attrs& a)
{
    for (const NodeAttribute& at : node.attributes) {
        if (at.name == "hidden_size") {
            a.hiddenSize = at.i;
        } else if (at.name == "direction") {
            a.direction = at.s;
        } else if (at.name == "layout") {
            a.layout = at.i;
        } else if (at.name == "input_forget") {
            a.inputForget = at.i;
        } else if (at.name == "linear_before_reset") {
            a.linearBeforeReset = at.i;
        } else if (at.name == "activations") {
            a.activations = at.strings;
        } else if (at.name == "clip" && !(std::isinf(at.f) && at.f > 0)) {    // +inf clips nothing
            a.clip = static_cast<double>(at.f);
        }
    }
    auto [alphas, betas] = parametersUsed(cell, a.activations);
    if (const NodeAttribute* at = attribute(node, "activation_alpha")) {
        a.activationAlpha = parameters(at->floats, alphas);
    }
    if (const NodeAttribute* at = attribute(node, "activation_beta")) {
        a.activationBeta = parameters(at->floats, betas);
    }
}

NodeConfig
config(const NodeDescription& node, const NodeVerdict& v, ElementType dtype, const std::vector<std::string>& outputs,
       const NodeQuestion& q)
{
    const Cell& cell = *v.cell;
    NodeConfigDraft d;
    d.node = configName(node.name);
    d.op = std::string(cell.name);
    d.dtype = elementTypeName(dtype);
    draftAttrs(node, cell, d.attrs);
    for (uint32_t i = IN_B; i < cell.inputCount; ++i) {
        if (inputAt(node, i) == nullptr) {
            d.absent.emplace_back(cell.inputs[i]);
        }
    }
    d.outputs = outputs;
    if (q.writeDevice && q.device && !q.device->uuid.empty()) {
        d.device = q.device->uuid;
    }
    d.mode = modeName(q.mode);
    return validateNodeConfig(d);
}

// The layer's spec and storage bindings, where the graph gives the shapes of W and R (else the
// run checks them): the weights as shapes of the node's element type, their data not read.
void
checkShapes(const NodeDescription& node, const NodeVerdict& v, const DeviceFacts& device)
{
    std::array<std::optional<HostTensor>, 4> weights;
    for (size_t w = 0; w < WEIGHT_INPUTS.size(); ++w) {
        const NodeInput* in = inputAt(node, WEIGHT_INPUTS[w]);
        std::optional<std::vector<int64_t>> shape = in ? in->shape() : std::nullopt;
        if (shape && WEIGHT_INPUTS[w] < v.cell->inputCount) {
            weights[w] = HostTensor{};
            weights[w]->type = v.config.dtype;
            weights[w]->shape = v.quantized && w < 2 ? dequantizedShape(*shape) : *shape;
        }
    }
    if (weights[0] && weights[1]) {
        checkLayer(v.config, Weights{ *weights[0], *weights[1], weights[2], weights[3] },
                   BindingLimit{ device.name, device.maxStorageBufferRange });
    }
}

bool
allWeightsConstant(const NodeDescription& node, const Cell& cell)
{
    for (size_t i : WEIGHT_INPUTS) {
        const NodeInput* in = i < cell.inputCount ? inputAt(node, i) : nullptr;
        if (in != nullptr && !in->constant) {
            return false;
        }
    }
    return true;
}

void
decide(const NodeDescription& node, const NodeQuestion& q, NodeVerdict& v)
{
    if (v.cell == nullptr) {
        refuse("not a recurrent op");
    }
    checkOp(node, v);
    ElementType dtype = checkElements(node, v);
    std::string quantized = v.quantized ? checkQuantized(node) : "";
    std::vector<std::string> outputs = computedOutputs(node, *v.cell, q);
    v.config = config(node, v, dtype, outputs, q);
    if (!q.device) {
        refuse(q.noDevice.empty() ? "no Vulkan device" : q.noDevice);
    }
    requireDevice(q.device->name, q.device->nanPreserveFloat32, q.mode);
    checkShapes(node, v, *q.device);
    v.constantWeights = allWeightsConstant(node, *v.cell);
    v.weights = v.quantized ? quantized : v.constantWeights ? "constant, uploaded once" : "inputs, compared each run";
    if (const NodeInput* x = inputAt(node, IN_X)) {
        v.xDims = withUnsqueezed(x->dims, x->unsqueezed);
    }
    if (const NodeInput* w = inputAt(node, IN_W)) {
        v.wDims = w->dims && v.quantized ? GraphDims(dequantizedShape(*w->dims)) : w->dims;
    }
    v.taken = true;
    v.reason = q.device->name;
}

} // namespace

std::optional<std::vector<int64_t>>
NodeInput::shape() const
{
    if (!dims || std::any_of(dims->begin(), dims->end(), [](int64_t d) { return d < 0; })) {
        return std::nullopt;
    }
    return dims;
}

bool
isRecurrentOp(const std::string& domain, const std::string& opType)
{
    if (domain == QUANTIZED_DOMAIN) {
        return opType == QUANTIZED_OP;
    }
    return (domain.empty() || domain == "ai.onnx") && findCell(opType) != nullptr;
}

const Cell*
recurrentCell(const std::string& domain, const std::string& opType)
{
    if (!isRecurrentOp(domain, opType)) {
        return nullptr;
    }
    return findCell(domain == QUANTIZED_DOMAIN ? "LSTM" : opType);
}

NodeVerdict
checkNode(const NodeDescription& node, const NodeQuestion& question)
{
    NodeVerdict v;
    summarize(node, v);
    try {
        decide(node, question, v);
    } catch (const std::invalid_argument& e) {    // NodeRefusal, ConfigError, InputError
        v.taken = false;
        v.reason = e.what();
    } catch (const UnsupportedLayerError& e) {
        v.taken = false;
        v.reason = e.what();
    }
    if (!v.taken) {
        v.config = NodeConfig{};
        v.weights.clear();
        v.constantWeights = false;
    }
    return v;
}

std::string
placeAuto(NodeVerdict& v, const Calibration* cal, const std::string& problem)
{
    if (!v.taken) {
        return "";
    }
    if (cal == nullptr) {
        v.reason += "; " + problem;
        return problem;
    }
    const NodeAttrs& a = v.config.attrs;
    NodeShapeAttrs attrs{ v.cell->gates, a.hiddenSize, a.layout, a.directions() };
    PlacementChoice choice = choosePlacement(nodeWork(attrs, v.xDims, v.wDims), *cal);
    if (choice.device) {
        v.reason += "; " + choice.why;
        return choice.why;
    }
    v.taken = false;
    v.reason = choice.why;
    v.config = NodeConfig{};
    v.weights.clear();
    v.constantWeights = false;
    return choice.why;
}

std::string
nodePrefix(const std::string& opType, const std::string& name)
{
    return "ortops: " + opType + " node '" + name + "': ";
}

} // namespace ortops
