// The EP's node checks that need no ONNX Runtime (node_check.hpp). The config goes through the
// core's one decoder as JSON text (what ortops.convert writes for the same node,
// ortops/ort/rewrite.py's _config_attrs and _used_parameters): the EP and the custom-op
// library accept exactly the same nodes, with the same messages.
#include "ep/node_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#if defined(__GNUC__)
#pragma GCC visibility push(default)    // as in node_check.hpp
#endif
#include "core/config/activations.hpp"
#include "core/base/errors.hpp"
#include "core/config/json.hpp"
#include "core/rnn/spec.hpp"
#include "core/rnn/tensors.hpp"
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

namespace ortops::ep {

using ort::NodeError;

namespace {

// The config's node name is for messages; the decoder takes at most 4096 bytes.
constexpr size_t CONFIG_NAME_BYTES = 4096;

// Each attribute the ops have, with the type ONNX's schemas give it (and the op it is
// restricted to, "" for every op).
struct AttrDef
{
    std::string_view name;
    AttrType type;
    std::string_view op;
};
constexpr AttrDef ATTRS[] = {
    { "hidden_size", ATTR_INT, "" },           { "direction", ATTR_STRING, "" },
    { "layout", ATTR_INT, "" },                { "activations", ATTR_STRINGS, "" },
    { "activation_alpha", ATTR_FLOATS, "" },   { "activation_beta", ATTR_FLOATS, "" },
    { "clip", ATTR_FLOAT, "" },                { "input_forget", ATTR_INT, "LSTM" },
    { "linear_before_reset", ATTR_INT, "GRU" },
};

// A string list comes back NUL-separated.
std::vector<std::string>
splitNul(const std::string& bytes)
{
    std::vector<std::string> out;
    size_t start = 0;
    while (start < bytes.size()) {
        size_t end = bytes.find('\0', start);
        if (end == std::string::npos) {
            end = bytes.size();
        }
        out.push_back(bytes.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

std::vector<float>
floats(const std::string& bytes)
{
    std::vector<float> out(bytes.size() / sizeof(float));
    if (!out.empty()) {
        std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    }
    return out;
}

json::Value
floatList(const std::vector<float>& values, size_t keep)
{
    std::vector<json::Value> items;
    for (size_t i = 0; i < values.size() && i < keep; ++i) {
        items.push_back(json::Value::fromNumber(static_cast<double>(values[i])));
    }
    return json::Value::array(std::move(items));
}

// How many alpha and beta values the activations consume (ORT ignores the rest; the decoder
// takes at most 64): names unknown to the table count nothing (the decoder refuses them).
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

// The layer's spec checks on the weights' types and shapes (their data is not read), when
// the graph gives the shapes of W and R; else the run checks them.
void
checkWeights(const NodeSpec& spec, const NodeConfig& config, const std::string& mode, const DeviceLimits& device)
{
    const Cell& cell = *spec.cell;
    auto shaped = [&](size_t i) -> std::optional<HostTensor> {
        if (spec.inputs[i].empty() || !spec.shapes[i]) {
            return std::nullopt;
        }
        HostTensor t;
        t.type = spec.dtype;
        t.shape = *spec.shapes[i];
        return t;
    };
    std::array<std::optional<HostTensor>, 4> weights;
    for (size_t w = 0; w < ort::WEIGHT_INPUTS.size(); ++w) {
        weights[w] = ort::WEIGHT_INPUTS[w] < cell.inputCount ? shaped(ort::WEIGHT_INPUTS[w]) : std::nullopt;
    }
    if (!weights[0] || !weights[1]) {
        return;
    }
    (void)makeSpec(config, Weights{ *weights[0], *weights[1], weights[2], weights[3] });    // the layer's own spec checks
    // Each weight is uploaded whole into one storage binding (exact mode's R as float32).
    for (size_t w = 0; w < weights.size(); ++w) {
        if (!weights[w]) {
            continue;
        }
        uint64_t bytes = weights[w]->elements() * elementSize(spec.dtype);
        if (w == 1 && mode == "exact") {
            bytes = weights[w]->elements() * 4;
        }
        if (bytes > device.maxStorageBufferRange) {
            throw UnsupportedLayerError(spec.opType + ": unsupported layer on " + device.name + ": " +
                                        std::string(cell.inputs[ort::WEIGHT_INPUTS[w]]) + " needs " +
                                        std::to_string(bytes) + " bytes in one storage binding, above the "
                                        "device's maxStorageBufferRange of " +
                                        std::to_string(device.maxStorageBufferRange) + " bytes");
        }
    }
}

} // namespace

std::string
prefixFor(const std::string& op, const std::string& node)
{
    return "ortops: " + op + " node '" + node + "': ";
}

void
setCell(NodeSpec& spec)
{
    spec.quantized = spec.opType == QUANTIZED_OP;
    spec.cell = findCell(spec.quantized ? "LSTM" : spec.opType);
    if (spec.cell == nullptr) {
        throw NodeError("not a recurrent op");
    }
}

void
checkVersion(const NodeSpec& spec, int version)
{
    if (!spec.quantized &&
        std::find(std::begin(SUPPORTED_VERSIONS), std::end(SUPPORTED_VERSIONS), version) == std::end(SUPPORTED_VERSIONS)) {
        throw NodeError(spec.opType + "-" + std::to_string(version) + " is not one of the supported versions 7, 14, 22");
    }
}

void
checkCounts(const NodeSpec& spec, size_t inputs, size_t outputs)
{
    size_t maxInputs = spec.quantized ? QUANTIZED_INPUTS : spec.cell->inputCount;
    if (inputs > maxInputs || outputs > spec.cell->outputCount) {
        throw NodeError("the node has " + std::to_string(inputs) + " inputs and " + std::to_string(outputs) +
                        " outputs; " + spec.opType + " has at most " + std::to_string(maxInputs) + " and " +
                        std::to_string(spec.cell->outputCount));
    }
}

void
checkElement(NodeSpec& spec, size_t i, int element)
{
    std::string what = "input " + std::string(spec.cell->inputs[i]);
    if (i == ort::IN_X) {
        if (element == ort::onnxType(ElementType::Float16)) {
            spec.dtype = ElementType::Float16;
        } else if (element != ort::onnxType(ElementType::Float32)) {
            throw NodeError("X is " + ort::onnxTypeName(element) + "; the GPU path takes float32 and float16");
        }
    } else if (!(spec.quantized && (i == ort::IN_W || i == ort::IN_R))) {    // those: dequantize()'s checks
        ElementType want = i == ort::IN_LENS ? ElementType::Int32 : spec.dtype;
        if (element != ort::onnxType(want)) {
            throw NodeError(what + " is " + ort::onnxTypeName(element) + ", not " + elementTypeName(want));
        }
    }
}

void
checkRequired(const NodeSpec& spec)
{
    for (size_t i = 0; i < ort::IN_B; ++i) {
        if (spec.inputs[i].empty()) {
            throw NodeError("input " + std::string(spec.cell->inputs[i]) + " is required and the node has none");
        }
    }
}

void
checkAttr(const Cell& cell, const std::string& name, int type)
{
    const AttrDef* def = nullptr;
    for (const AttrDef& d : ATTRS) {
        if (d.name == name && (d.op.empty() || d.op == cell.name)) {
            def = &d;
        }
    }
    if (def == nullptr) {
        throw NodeError("attribute " + name + " is not an attribute of " + std::string(cell.name));
    }
    if (type != def->type) {
        throw NodeError("attribute " + name + " has attribute type " + std::to_string(type) + ", the schema's is " +
                        std::to_string(def->type));
    }
}

void
setAttr(RawAttrs& a, const std::string& name, const AttrValue& value)
{
    if (name == "hidden_size") {
        a.hidden = value.integer;
    } else if (name == "layout") {
        a.layout = value.integer;
    } else if (name == "input_forget") {
        a.inputForget = value.integer;
    } else if (name == "linear_before_reset") {
        a.linearBeforeReset = value.integer;
    } else if (name == "direction") {
        a.direction = value.bytes;
        a.direction.erase(std::find(a.direction.begin(), a.direction.end(), '\0'), a.direction.end());
    } else if (name == "activations") {
        a.activations = splitNul(value.bytes);
    } else if (name == "activation_alpha") {
        a.alpha = floats(value.bytes);
    } else if (name == "activation_beta") {
        a.beta = floats(value.bytes);
    } else if (name == "clip" && !std::isinf(value.real)) {    // an infinite clip clips nothing (convert writes none)
        a.clip = value.real;
    }
}

std::string
attrsJson(const RawAttrs& a, const Cell& cell)
{
    auto [alphas, betas] = parametersUsed(cell, a.activations);
    using json::Value;
    std::vector<Value> names;
    if (a.activations) {
        for (const std::string& n : *a.activations) {
            names.push_back(Value::fromString(n));
        }
    }
    Value object = Value::object({
      { "activation_alpha", a.alpha ? floatList(*a.alpha, alphas) : Value::null() },
      { "activation_beta", a.beta ? floatList(*a.beta, betas) : Value::null() },
      { "activations", a.activations ? Value::array(std::move(names)) : Value::null() },
      { "clip", a.clip ? Value::fromNumber(static_cast<double>(*a.clip)) : Value::null() },
      { "direction", Value::fromString(a.direction) },
      { "hidden_size", a.hidden ? Value::fromInteger(*a.hidden) : Value::null() },
      { "input_forget", Value::fromInteger(a.inputForget) },
      { "layout", Value::fromInteger(a.layout) },
      { "linear_before_reset", Value::fromInteger(a.linearBeforeReset) },
    });
    try {
        return json::write(object);
    } catch (const std::invalid_argument& e) {    // invalid UTF-8 or a non-finite float
        throw NodeError(std::string("attributes not usable: ") + e.what());
    }
}

std::vector<std::string>
namedOutputs(const NodeSpec& spec)
{
    std::vector<std::string> out;
    for (uint32_t i = 0; i < spec.cell->outputCount; ++i) {
        if (!spec.outputs[i].empty()) {
            out.emplace_back(spec.cell->outputs[i]);
        }
    }
    return out;
}

NodeConfig
checkedConfig(const NodeSpec& spec, const std::vector<std::string>& outputs, const std::string& mode,
              const DeviceLimits& device)
{
    const Cell& cell = *spec.cell;
    using json::Value;
    std::vector<Value> absent, computed;
    for (uint32_t i = ort::IN_B; i < cell.inputCount; ++i) {
        if (spec.inputs[i].empty()) {
            absent.push_back(Value::fromString(std::string(cell.inputs[i])));
        }
    }
    for (const std::string& o : outputs) {
        computed.push_back(Value::fromString(o));
    }
    Value root = Value::object({
      { "absent", Value::array(std::move(absent)) },
      { "attrs", json::parse(spec.attrsJson) },
      { "device", device.uuid.empty() ? Value::null() : Value::fromString(device.uuid) },
      { "dtype", Value::fromString(elementTypeName(spec.dtype)) },
      { "mode", Value::fromString(mode) },
      { "node", Value::fromString(configName(spec.name)) },
      { "op", Value::fromString(std::string(cell.name)) },
      { "outputs", Value::array(std::move(computed)) },
      { "v", Value::fromInteger(NODE_CONFIG_VERSION) },
    });
    NodeConfig config = decodeNodeConfig(json::write(root));
    checkWeights(spec, config, mode, device);
    return config;
}

} // namespace ortops::ep
