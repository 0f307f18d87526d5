// A recurrent node read through ORT's graph API into the core's typed description (ep.hpp's
// readNode): the one reader GetCapability and Compile share. Each call reads the node afresh
// (ORT may call GetCapability several times and per subgraph, and hands Compile a graph of its
// own, so nothing is kept on node pointers) and reads each attribute once.
#include <algorithm>
#include <cstring>

#include "ep/ep.hpp"
#include "ort/status.hpp"

namespace ortops::ep {

using ort::check;

namespace {

std::string
cStr(const char* s)
{
    return s ? std::string(s) : std::string();
}

// A read of a node counted for the tests (base/test_counts.hpp: "ep.<what>:<node name>"); in a
// shipping build nothing, not even the key's text.
void
tally([[maybe_unused]] const char* what, [[maybe_unused]] const std::string& node, [[maybe_unused]] uint64_t n = 1)
{
#ifdef ORTOPS_TESTING
    countEvent(std::string("ep.") + what + ":" + node, n);
#endif
}

// ORT's attribute types as ONNX's (the description's).
int
onnxAttributeType(OrtOpAttrType type)
{
    switch (type) {
        case ORT_OP_ATTR_INT: return onnx::ATTR_INT;
        case ORT_OP_ATTR_INTS: return onnx::ATTR_INTS;
        case ORT_OP_ATTR_FLOAT: return onnx::ATTR_FLOAT;
        case ORT_OP_ATTR_FLOATS: return onnx::ATTR_FLOATS;
        case ORT_OP_ATTR_STRING: return onnx::ATTR_STRING;
        case ORT_OP_ATTR_STRINGS: return onnx::ATTR_STRINGS;
        case ORT_OP_ATTR_GRAPH: return onnx::ATTR_GRAPH;
        case ORT_OP_ATTR_TENSOR: return onnx::ATTR_TENSOR;
        default: return onnx::ATTR_UNDEFINED;
    }
}

// An attribute's bytes: ORT's ReadOpAttr answers a size probe (no buffer) with an error status
// and the size, then fills the buffer.
std::string
attrBytes(const OrtApi* api, const OrtOpAttr* attr, OrtOpAttrType type, const std::string& name,
          const std::string& node)
{
    size_t size = 0;
    tally("ReadOpAttr", node);
    if (OrtStatus* s = api->ReadOpAttr(attr, type, nullptr, 0, &size)) {
        api->ReleaseStatus(s);
    }
    std::string bytes(size, '\0');
    if (size > 0) {
        tally("ReadOpAttr", node);
        check(api, api->ReadOpAttr(attr, type, bytes.data(), size, &size), ("reading attribute " + name).c_str());
        bytes.resize(std::min(size, bytes.size()));
    }
    return bytes;
}

// A string list comes back NUL-separated.
std::vector<std::string>
splitNul(const std::string& bytes)
{
    std::vector<std::string> out;
    size_t start = 0;
    while (start < bytes.size()) {
        size_t end = bytes.find('\0', start);
        end = end == std::string::npos ? bytes.size() : end;
        out.push_back(bytes.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

template<typename T>
std::vector<T>
elements(const std::string& bytes)
{
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) {
        std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    }
    return out;
}

// One attribute: its name, its type, its value of that type (a graph's or a tensor's is not
// read: no recurrent op has one, and the checker refuses the type).
NodeAttribute
readAttr(const OrtApi* api, const OrtOpAttr* attr, const std::string& node)
{
    NodeAttribute a;
    const char* name = nullptr;
    tally("OpAttr_GetName", node);
    check(api, api->OpAttr_GetName(attr, &name), "OpAttr_GetName");
    a.name = cStr(name);
    OrtOpAttrType type = ORT_OP_ATTR_UNDEFINED;
    tally("OpAttr_GetType", node);
    check(api, api->OpAttr_GetType(attr, &type), "OpAttr_GetType");
    a.type = onnxAttributeType(type);
    size_t size = 0;
    std::string what = "reading attribute " + a.name;
    if (type == ORT_OP_ATTR_INT) {
        tally("ReadOpAttr", node);
        check(api, api->ReadOpAttr(attr, type, &a.i, sizeof a.i, &size), what.c_str());
    } else if (type == ORT_OP_ATTR_FLOAT) {
        tally("ReadOpAttr", node);
        check(api, api->ReadOpAttr(attr, type, &a.f, sizeof a.f, &size), what.c_str());
    } else if (type == ORT_OP_ATTR_STRING) {
        a.s = attrBytes(api, attr, type, a.name, node);
        a.s.erase(std::find(a.s.begin(), a.s.end(), '\0'), a.s.end());
    } else if (type == ORT_OP_ATTR_STRINGS) {
        a.strings = splitNul(attrBytes(api, attr, type, a.name, node));
    } else if (type == ORT_OP_ATTR_FLOATS) {
        a.floats = elements<float>(attrBytes(api, attr, type, a.name, node));
    } else if (type == ORT_OP_ATTR_INTS) {
        a.ints = elements<int64_t>(attrBytes(api, attr, type, a.name, node));
    }
    return a;
}

std::vector<NodeAttribute>
readAttrs(const OrtApi* api, const OrtNode* node, const std::string& name)
{
    size_t count = 0;
    check(api, api->Node_GetNumAttributes(node, &count), "Node_GetNumAttributes");
    std::vector<const OrtOpAttr*> attrs(count);
    if (count > 0) {
        check(api, api->Node_GetAttributes(node, attrs.data(), count), "Node_GetAttributes");
    }
    tally("attributes", name, count);
    std::vector<NodeAttribute> out;
    for (const OrtOpAttr* attr : attrs) {
        out.push_back(readAttr(api, attr, name));
    }
    return out;
}

// An input: its name, element type and dims (a value that is not a tensor has neither: the
// checker refuses an X of unknown type), and for a constant initializer its value.
void
readInput(const OrtApi* api, const OrtValueInfo* info, NodeInput& in, const OrtValue*& constant)
{
    const char* text = nullptr;
    check(api, api->GetValueInfoName(info, &text), "GetValueInfoName");
    in.name = cStr(text);
    if (in.name.empty()) {
        return;
    }
    const OrtTypeInfo* type = nullptr;
    check(api, api->GetValueInfoTypeInfo(info, &type), "GetValueInfoTypeInfo");
    const OrtTensorTypeAndShapeInfo* tensor = nullptr;
    if (type != nullptr && api->CastTypeInfoToTensorInfo(type, &tensor) == nullptr && tensor != nullptr) {
        ONNXTensorElementDataType element = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
        check(api, api->GetTensorElementType(tensor, &element), "GetTensorElementType");
        in.element = static_cast<int>(element);
        size_t rank = 0;
        check(api, api->GetDimensionsCount(tensor, &rank), "GetDimensionsCount");
        in.dims.emplace(rank);
        if (rank > 0) {
            check(api, api->GetDimensions(tensor, in.dims->data(), rank), "GetDimensions");
        }
    }
    check(api, api->ValueInfo_IsConstantInitializer(info, &in.constant), "ValueInfo_IsConstantInitializer");
    if (in.constant) {
        check(api, api->ValueInfo_GetInitializerValue(info, &constant), "ValueInfo_GetInitializerValue");
        void* data = nullptr;
        check(api, api->GetTensorMutableData(const_cast<OrtValue*>(constant), &data), "GetTensorMutableData");
        in.data = data;
    }
}

std::vector<const OrtValueInfo*>
valueInfos(const OrtApi* api, const OrtNode* node, bool inputs)
{
    size_t count = 0;
    check(api, inputs ? api->Node_GetNumInputs(node, &count) : api->Node_GetNumOutputs(node, &count),
          "Node_GetNum(In|Out)puts");
    std::vector<const OrtValueInfo*> infos(count);
    if (count > 0) {
        check(api, inputs ? api->Node_GetInputs(node, infos.data(), count) : api->Node_GetOutputs(node, infos.data(), count),
              "Node_Get(In|Out)puts");
    }
    return infos;
}

// The axes of an ai.onnx Unsqueeze that makes the value (NodeInput::unsqueezed): its second
// input, a constant initializer (opset 13 on; ONNX Runtime makes Constant nodes initializers), or
// its attribute (before). Nothing where another node, or none, makes it.
std::optional<std::vector<int64_t>>
unsqueezedAxes(const OrtApi* api, const OrtValueInfo* info)
{
    const OrtNode* producer = nullptr;
    size_t index = 0;
    check(api, api->ValueInfo_GetValueProducer(info, &producer, &index), "ValueInfo_GetValueProducer");
    if (producer == nullptr) {
        return std::nullopt;
    }
    const char* text = nullptr;
    check(api, api->Node_GetOperatorType(producer, &text), "Node_GetOperatorType");
    std::string op = cStr(text);
    check(api, api->Node_GetDomain(producer, &text), "Node_GetDomain");
    std::string domain = cStr(text);
    if (op != "Unsqueeze" || !(domain.empty() || domain == "ai.onnx")) {
        return std::nullopt;
    }
    std::vector<const OrtValueInfo*> in = valueInfos(api, producer, true);
    if (in.size() >= 2 && in[1] != nullptr) {
        bool constant = false;
        check(api, api->ValueInfo_IsConstantInitializer(in[1], &constant), "ValueInfo_IsConstantInitializer");
        if (!constant) {
            return std::nullopt;
        }
        const OrtValue* value = nullptr;
        check(api, api->ValueInfo_GetInitializerValue(in[1], &value), "ValueInfo_GetInitializerValue");
        OrtTensorTypeAndShapeInfo* shape = nullptr;
        check(api, api->GetTensorTypeAndShape(value, &shape), "GetTensorTypeAndShape");
        ONNXTensorElementDataType element = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
        size_t count = 0;
        OrtStatus* s = api->GetTensorElementType(shape, &element);
        if (s == nullptr) {
            s = api->GetTensorShapeElementCount(shape, &count);
        }
        api->ReleaseTensorTypeAndShapeInfo(shape);
        check(api, s, "the Unsqueeze's axes");
        if (element != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {
            return std::nullopt;
        }
        void* data = nullptr;
        check(api, api->GetTensorMutableData(const_cast<OrtValue*>(value), &data), "GetTensorMutableData");
        const auto* axes = static_cast<const int64_t*>(data);
        return std::vector<int64_t>(axes, axes + count);
    }
    const OrtOpAttr* attr = nullptr;
    if (OrtStatus* s = api->Node_GetAttributeByName(producer, "axes", &attr)) {
        api->ReleaseStatus(s);   // ORT_NOT_FOUND: no axes given
        return std::nullopt;
    }
    return elements<int64_t>(attrBytes(api, attr, ORT_OP_ATTR_INTS, "axes", "Unsqueeze"));
}

} // namespace

std::optional<std::vector<int64_t>>
unsqueezedX(const OrtApi* api, const OrtNode* node)
{
    std::vector<const OrtValueInfo*> in = valueInfos(api, node, true);
    return in.empty() || in[0] == nullptr ? std::nullopt : unsqueezedAxes(api, in[0]);
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
    return isRecurrentOp(cStr(domain), cStr(op));
}

ReadNode
readNode(const OrtApi* api, const OrtNode* node)
{
    ReadNode r;
    NodeDescription& d = r.description;
    const char* text = nullptr;
    check(api, api->Node_GetName(node, &text), "Node_GetName");
    d.name = cStr(text);
    tally("node_reads", d.name);
    check(api, api->Node_GetOperatorType(node, &text), "Node_GetOperatorType");
    d.opType = cStr(text);
    check(api, api->Node_GetDomain(node, &text), "Node_GetDomain");
    d.domain = cStr(text);
    check(api, api->Node_GetSinceVersion(node, &d.sinceVersion), "Node_GetSinceVersion");
    std::vector<const OrtValueInfo*> in = valueInfos(api, node, true), out = valueInfos(api, node, false);
    d.inputs.resize(in.size());
    r.constants.assign(in.size(), nullptr);
    for (size_t i = 0; i < in.size(); ++i) {
        if (in[i] != nullptr) {
            readInput(api, in[i], d.inputs[i], r.constants[i]);
        }
    }
    for (const OrtValueInfo* o : out) {
        text = nullptr;
        if (o != nullptr) {
            check(api, api->GetValueInfoName(o, &text), "GetValueInfoName");
        }
        d.outputs.push_back(cStr(text));
    }
    d.attributes = readAttrs(api, node, d.name);
    return r;
}

std::string
graphPath(const OrtApi* api, const OrtGraph* graph)
{
    const OrtNode* parent = nullptr;
    check(api, api->Graph_GetParentNode(graph, &parent), "Graph_GetParentNode");
    if (parent == nullptr) {
        return "";
    }
    const char* op = nullptr;
    const char* name = nullptr;
    const char* body = nullptr;
    check(api, api->Node_GetOperatorType(parent, &op), "Node_GetOperatorType");
    check(api, api->Node_GetName(parent, &name), "Node_GetName");
    check(api, api->Graph_GetName(graph, &body), "Graph_GetName");
    return pathStep(cStr(op), cStr(name), cStr(body));
}

NodeQuestion
questionOf(const EpOptions& options, const DeviceDescription& device, std::optional<std::vector<std::string>> computed)
{
    NodeQuestion q;
    q.mode = parseMode(options.mode).value_or(Mode::Deterministic);
    q.device = DeviceFacts{ device.name, device.uuid, device.maxStorageBufferRange, device.nanPreserveFloat32 };
    q.computed = std::move(computed);
    return q;
}

} // namespace ortops::ep
