// A standard recurrent node read through ORT's graph API, and its config checked by the core
// (ep.hpp). The config goes through the core's one decoder as JSON text (what ortops.convert
// writes for the same node, ortops/ort/rewrite.py's _config_attrs and _used_parameters): the
// EP and the custom-op library accept exactly the same nodes, with the same messages.
#include "ep/ep.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "core/activations.hpp"
#include "core/json.hpp"
#include "ort/noderun.hpp"
#include "ort/status.hpp"

namespace ortops::ep {

using ort::check;
using ort::NodeError;

namespace {

// The versions of RNN, GRU and LSTM ORT runs (opsets 7 to 22): Node_GetSinceVersion's.
constexpr int SUPPORTED_VERSIONS[] = { 7, 14, 22 };
// The config's node name is for messages; the decoder takes at most 4096 bytes.
constexpr size_t CONFIG_NAME_BYTES = 4096;

// Each attribute the ops have, with the type ONNX's schemas give it (and the op it is
// restricted to, "" for every op).
struct AttrDef
{
    std::string_view name;
    OrtOpAttrType type;
    std::string_view op;
};
constexpr AttrDef ATTRS[] = {
    { "hidden_size", ORT_OP_ATTR_INT, "" },           { "direction", ORT_OP_ATTR_STRING, "" },
    { "layout", ORT_OP_ATTR_INT, "" },                { "activations", ORT_OP_ATTR_STRINGS, "" },
    { "activation_alpha", ORT_OP_ATTR_FLOATS, "" },   { "activation_beta", ORT_OP_ATTR_FLOATS, "" },
    { "clip", ORT_OP_ATTR_FLOAT, "" },                { "input_forget", ORT_OP_ATTR_INT, "LSTM" },
    { "linear_before_reset", ORT_OP_ATTR_INT, "GRU" },
};

std::string
cStr(const char* s)
{
    return s ? std::string(s) : std::string();
}

// An attribute's bytes: ORT's ReadOpAttr answers a size probe (no buffer) with an error status
// and the size, then fills the buffer.
std::string
attrBytes(const OrtApi* api, const OrtOpAttr* attr, OrtOpAttrType type, const std::string& name)
{
    size_t size = 0;
    if (OrtStatus* s = api->ReadOpAttr(attr, type, nullptr, 0, &size)) {
        api->ReleaseStatus(s);
    }
    std::string bytes(size, '\0');
    if (size > 0) {
        check(api, api->ReadOpAttr(attr, type, bytes.data(), size, &size), ("reading attribute " + name).c_str());
        bytes.resize(std::min(size, bytes.size()));
    }
    return bytes;
}

template <typename T>
std::vector<T>
attrArray(const OrtApi* api, const OrtOpAttr* attr, OrtOpAttrType type, const std::string& name)
{
    std::string bytes = attrBytes(api, attr, type, name);
    std::vector<T> out(bytes.size() / sizeof(T));
    std::copy(bytes.begin(), bytes.begin() + out.size() * sizeof(T), reinterpret_cast<char*>(out.data()));
    return out;
}

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

// The node's attributes, each of the type ONNX's schemas give it (NodeError otherwise).
RawAttrs
readAttrs(const OrtApi* api, const OrtNode* node, const Cell& cell)
{
    size_t count = 0;
    check(api, api->Node_GetNumAttributes(node, &count), "Node_GetNumAttributes");
    std::vector<const OrtOpAttr*> attrs(count);
    if (count > 0) {
        check(api, api->Node_GetAttributes(node, attrs.data(), count), "Node_GetAttributes");
    }
    RawAttrs a;
    for (const OrtOpAttr* attr : attrs) {
        const char* rawName = nullptr;
        check(api, api->OpAttr_GetName(attr, &rawName), "OpAttr_GetName");
        std::string name = cStr(rawName);
        OrtOpAttrType type = ORT_OP_ATTR_UNDEFINED;
        check(api, api->OpAttr_GetType(attr, &type), "OpAttr_GetType");
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
            throw NodeError("attribute " + name + " has attribute type " + std::to_string(type) +
                            ", the schema's is " + std::to_string(def->type));
        }
        auto integer = [&] {
            int64_t v = 0;
            size_t size = 0;
            check(api, api->ReadOpAttr(attr, type, &v, sizeof v, &size), ("reading attribute " + name).c_str());
            return v;
        };
        if (name == "hidden_size") {
            a.hidden = integer();
        } else if (name == "layout") {
            a.layout = integer();
        } else if (name == "input_forget") {
            a.inputForget = integer();
        } else if (name == "linear_before_reset") {
            a.linearBeforeReset = integer();
        } else if (name == "direction") {
            a.direction = attrBytes(api, attr, type, name);
            a.direction.erase(std::find(a.direction.begin(), a.direction.end(), '\0'), a.direction.end());
        } else if (name == "activations") {
            a.activations = splitNul(attrBytes(api, attr, type, name));
        } else if (name == "activation_alpha") {
            a.alpha = attrArray<float>(api, attr, type, name);
        } else if (name == "activation_beta") {
            a.beta = attrArray<float>(api, attr, type, name);
        } else if (name == "clip") {
            float v = 0;
            size_t size = 0;
            check(api, api->ReadOpAttr(attr, type, &v, sizeof v, &size), "reading attribute clip");
            if (!std::isinf(v)) {    // an infinite clip clips nothing (ortops.convert writes none)
                a.clip = v;
            }
        }
    }
    return a;
}

// The config's "attrs" object (what ortops.convert writes for the same attributes).
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

// A tensor value's element type, static shape (when every dimension is known) and dims as
// the graph gives them (-1 where dynamic; placement "auto"'s cost model reads those).
struct TensorType
{
    ONNXTensorElementDataType element;
    std::optional<std::vector<int64_t>> shape;
    std::vector<int64_t> dims;
};

TensorType
tensorType(const OrtApi* api, const OrtValueInfo* info, const std::string& what)
{
    const OrtTypeInfo* type = nullptr;
    check(api, api->GetValueInfoTypeInfo(info, &type), "GetValueInfoTypeInfo");
    const OrtTensorTypeAndShapeInfo* tensor = nullptr;
    if (type == nullptr || api->CastTypeInfoToTensorInfo(type, &tensor) != nullptr || tensor == nullptr) {
        throw NodeError(what + " is not a tensor");
    }
    ONNXTensorElementDataType element = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    check(api, api->GetTensorElementType(tensor, &element), "GetTensorElementType");
    size_t rank = 0;
    check(api, api->GetDimensionsCount(tensor, &rank), "GetDimensionsCount");
    std::vector<int64_t> dims(rank);
    if (rank > 0) {
        check(api, api->GetDimensions(tensor, dims.data(), rank), "GetDimensions");
    }
    bool known = std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 0; });
    return { element, known ? std::optional(dims) : std::nullopt, dims };
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

// Input `i` of the node (X first: it sets the element type the others must have).
void
readInput(const OrtApi* api, const OrtValueInfo* info, size_t i, NodeSpec& spec)
{
    const char* text = nullptr;
    check(api, api->GetValueInfoName(info, &text), "GetValueInfoName");
    spec.inputs[i] = cStr(text);
    if (spec.inputs[i].empty()) {
        return;
    }
    spec.inputInfo[i] = info;
    std::string what = "input " + std::string(spec.cell->inputs[i]);
    auto [element, shape, dims] = tensorType(api, info, what);
    spec.shapes[i] = shape;
    spec.dims[i] = dims;
    if (i == ort::IN_X) {
        if (element == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) {
            spec.dtype = ElementType::Float16;
        } else if (element != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
            throw NodeError("X is " + ort::ortTypeName(element) + "; the GPU path takes float32 and float16");
        }
    } else if (!(spec.quantized && (i == ort::IN_W || i == ort::IN_R))) {    // those: dequantize()'s checks
        ElementType want = i == ort::IN_LENS ? ElementType::Int32 : spec.dtype;
        if (element != ort::ortType(want)) {
            throw NodeError(what + " is " + ort::ortTypeName(element) + ", not " + elementTypeName(want));
        }
    }
    bool constant = false;
    check(api, api->ValueInfo_IsConstantInitializer(info, &constant), "ValueInfo_IsConstantInitializer");
    if (constant) {
        const OrtValue* value = nullptr;
        check(api, api->ValueInfo_GetInitializerValue(info, &value), "ValueInfo_GetInitializerValue");
        spec.constants[i] = value;
    }
}

// A DynamicQuantizeLSTM's quantization parameters (constants), and its W and R dequantized
// once here to check them and learn their ai.onnx shapes (Compile dequantizes again).
void
readQuantized(const OrtApi* api, const std::vector<const OrtValueInfo*>& in, NodeSpec& spec)
{
    if (spec.dtype != ElementType::Float32) {
        throw NodeError(std::string(QUANTIZED_OP) + ": X must be float32, got " + elementTypeName(spec.dtype));
    }
    for (size_t k = 0; k < spec.quantParams.size(); ++k) {
        size_t i = ort::IN_P + 1 + k;
        bool constant = false;
        if (i < in.size() && in[i] != nullptr) {
            check(api, api->ValueInfo_IsConstantInitializer(in[i], &constant), "ValueInfo_IsConstantInitializer");
        }
        if (constant) {
            check(api, api->ValueInfo_GetInitializerValue(in[i], &spec.quantParams[k]), "ValueInfo_GetInitializerValue");
        }
    }
    for (size_t i : { ort::IN_B, ort::IN_P }) {
        if (!spec.inputs[i].empty() && spec.constants[i] == nullptr) {
            throw NodeError(std::string(QUANTIZED_OP) + ": " + std::string(spec.cell->inputs[i]) +
                            " not constant (the device path takes a quantized node's weights once)");
        }
    }
    for (size_t which = 0; which < 2; ++which) {
        std::vector<int64_t> shape;
        (void)dequantize(api, spec, which, shape);
        spec.shapes[which == 0 ? ort::IN_W : ort::IN_R] = shape;
        spec.dims[which == 0 ? ort::IN_W : ort::IN_R] = shape;
    }
}

} // namespace

std::string
prefixFor(const std::string& op, const std::string& node)
{
    return "ortops: " + op + " node '" + node + "': ";
}

bool
isRecurrent(const OrtApi* api, const OrtNode* node)
{
    const char* domain = nullptr;
    const char* op = nullptr;
    if (OrtStatus* s = api->Node_GetDomain(node, &domain)) {
        api->ReleaseStatus(s);
        return false;
    }
    if (OrtStatus* s = api->Node_GetOperatorType(node, &op)) {
        api->ReleaseStatus(s);
        return false;
    }
    std::string d = cStr(domain);
    if (d == QUANTIZED_DOMAIN) {
        return cStr(op) == QUANTIZED_OP;
    }
    return (d.empty() || d == "ai.onnx") && findCell(cStr(op)) != nullptr;
}

NodeSpec
readNode(const OrtApi* api, const OrtNode* node)
{
    NodeSpec spec;
    const char* text = nullptr;
    check(api, api->Node_GetName(node, &text), "Node_GetName");
    spec.name = cStr(text);
    check(api, api->Node_GetOperatorType(node, &text), "Node_GetOperatorType");
    spec.opType = cStr(text);
    spec.quantized = spec.opType == QUANTIZED_OP;
    spec.cell = findCell(spec.quantized ? "LSTM" : spec.opType);
    if (spec.cell == nullptr) {
        throw NodeError("not a recurrent op");
    }
    const Cell& cell = *spec.cell;
    int version = 0;
    check(api, api->Node_GetSinceVersion(node, &version), "Node_GetSinceVersion");
    if (!spec.quantized &&
        std::find(std::begin(SUPPORTED_VERSIONS), std::end(SUPPORTED_VERSIONS), version) == std::end(SUPPORTED_VERSIONS)) {
        throw NodeError(spec.opType + "-" + std::to_string(version) + " is not one of the supported versions 7, 14, 22");
    }

    size_t inputs = 0, outputs = 0;
    size_t maxInputs = spec.quantized ? QUANTIZED_INPUTS : cell.inputCount;
    check(api, api->Node_GetNumInputs(node, &inputs), "Node_GetNumInputs");
    check(api, api->Node_GetNumOutputs(node, &outputs), "Node_GetNumOutputs");
    if (inputs > maxInputs || outputs > cell.outputCount) {
        throw NodeError("the node has " + std::to_string(inputs) + " inputs and " + std::to_string(outputs) +
                        " outputs; " + spec.opType + " has at most " + std::to_string(maxInputs) + " and " +
                        std::to_string(cell.outputCount));
    }
    std::vector<const OrtValueInfo*> in(inputs), out(outputs);
    if (inputs > 0) {
        check(api, api->Node_GetInputs(node, in.data(), inputs), "Node_GetInputs");
    }
    if (outputs > 0) {
        check(api, api->Node_GetOutputs(node, out.data(), outputs), "Node_GetOutputs");
    }
    for (size_t i = 0; i < outputs; ++i) {
        if (out[i] != nullptr) {
            check(api, api->GetValueInfoName(out[i], &text), "GetValueInfoName");
            spec.outputs[i] = cStr(text);
        }
    }
    for (size_t i = 0; i < std::min<size_t>(inputs, cell.inputCount); ++i) {
        if (in[i] != nullptr) {
            readInput(api, in[i], i, spec);
        }
    }
    if (spec.quantized) {
        readQuantized(api, in, spec);
    }
    for (size_t i = 0; i < ort::IN_B; ++i) {
        if (spec.inputs[i].empty()) {
            throw NodeError("input " + std::string(cell.inputs[i]) + " is required and the node has none");
        }
    }
    spec.attrsJson = attrsJson(readAttrs(api, node, cell), cell);
    return spec;
}

NodeConfig
nodeConfig(const NodeSpec& spec, const std::vector<std::string>& outputs, const EpOptions& options,
           const DeviceDescription& device)
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
      { "mode", Value::fromString(options.mode) },
      { "node", Value::fromString(configName(spec.name)) },
      { "op", Value::fromString(std::string(cell.name)) },
      { "outputs", Value::array(std::move(computed)) },
      { "v", Value::fromInteger(NODE_CONFIG_VERSION) },
    });
    NodeConfig config = decodeNodeConfig(json::write(root));

    // The layer's spec checks on the weights' types and shapes (their data is not read), when
    // the graph gives the shapes of W and R; else the run checks them.
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
    if (weights[0] && weights[1]) {
        (void)makeSpec(config, ort::weightsOf(weights));    // the layer's own spec checks
        // Each weight is uploaded whole into one storage binding (exact mode's R as float32).
        for (size_t w = 0; w < weights.size(); ++w) {
            if (!weights[w]) {
                continue;
            }
            uint64_t bytes = weights[w]->elements() * elementSize(spec.dtype);
            if (w == 1 && options.mode == "exact") {
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
    return config;
}

} // namespace ortops::ep
