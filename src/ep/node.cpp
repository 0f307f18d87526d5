// A standard recurrent node read through ORT's graph API (ep.hpp): what ORT gives of the node
// (its op, version, inputs, outputs, constant initializers, attributes) goes to the checks
// that need no ORT (node_check.hpp, which tests/fuzz/fuzz_ep_node.cpp fuzzes), in the order
// they are read.
#include "ep/ep.hpp"

#include <algorithm>
#include <string_view>

#include "ort/noderun.hpp"
#include "ort/status.hpp"

namespace ortops::ep {

using ort::check;
using ort::NodeError;

namespace {

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

static_assert(ORT_OP_ATTR_INT == ATTR_INT && ORT_OP_ATTR_FLOAT == ATTR_FLOAT && ORT_OP_ATTR_STRINGS == ATTR_STRINGS &&
                  ORT_OP_ATTR_TENSOR == ATTR_TENSOR,
              "node_check.hpp's AttrType is ORT's OrtOpAttrType");

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
        checkAttr(cell, name, type);
        // The type is the schema's (checked): INT for the integers, FLOAT for clip, bytes else.
        AttrValue value;
        size_t size = 0;
        if (type == ORT_OP_ATTR_INT) {
            check(api, api->ReadOpAttr(attr, type, &value.integer, sizeof value.integer, &size),
                  ("reading attribute " + name).c_str());
        } else if (type == ORT_OP_ATTR_FLOAT) {
            check(api, api->ReadOpAttr(attr, type, &value.real, sizeof value.real, &size),
                  ("reading attribute " + name).c_str());
        } else {
            value.bytes = attrBytes(api, attr, type, name);
        }
        setAttr(a, name, value);
    }
    return a;
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
    auto [element, shape, dims] = tensorType(api, info, "input " + std::string(spec.cell->inputs[i]));
    spec.shapes[i] = shape;
    spec.dims[i] = dims;
    checkElement(spec, i, element);
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
    setCell(spec);
    const Cell& cell = *spec.cell;
    int version = 0;
    check(api, api->Node_GetSinceVersion(node, &version), "Node_GetSinceVersion");
    checkVersion(spec, version);

    size_t inputs = 0, outputs = 0;
    check(api, api->Node_GetNumInputs(node, &inputs), "Node_GetNumInputs");
    check(api, api->Node_GetNumOutputs(node, &outputs), "Node_GetNumOutputs");
    checkCounts(spec, inputs, outputs);
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
    checkRequired(spec);
    spec.attrsJson = attrsJson(readAttrs(api, node, cell), cell);
    return spec;
}

} // namespace ortops::ep
