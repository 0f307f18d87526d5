// A one-LSTM ONNX model written as protobuf wire format by hand (cpu_side.hpp): the EP has no
// protobuf library, and the model is fixed but for its sizes and weights. Field numbers from
// onnx/onnx.proto.
#include <cstring>

#include "ep/cpu_side.hpp"

namespace ortops::ep {

namespace {

void
varint(std::string& out, uint64_t v)
{
    while (v >= 0x80) {
        out += static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    out += static_cast<char>(v);
}

// A varint field (wire type 0).
void
number(std::string& out, uint32_t field, uint64_t v)
{
    varint(out, uint64_t(field) << 3);
    varint(out, v);
}

// A length-delimited field (wire type 2): a string, bytes or a message.
void
bytes(std::string& out, uint32_t field, const std::string& v)
{
    varint(out, (uint64_t(field) << 3) | 2);
    varint(out, v.size());
    out += v;
}

constexpr uint64_t FLOAT = 1;    // TensorProto.DataType.FLOAT

// TypeProto of a float tensor; dims: "" a symbolic dim named by the next entry of params,
// else its value (none given: no shape).
std::string
floatTensorType(const std::vector<std::pair<std::string, uint64_t>>& dims)
{
    std::string tensor;
    number(tensor, 1, FLOAT);                                  // elem_type
    if (!dims.empty()) {
        std::string shape;
        for (const auto& [param, value] : dims) {
            std::string dim;
            param.empty() ? number(dim, 1, value) : bytes(dim, 2, param);    // dim_value | dim_param
            bytes(shape, 1, dim);
        }
        bytes(tensor, 2, shape);                               // shape
    }
    std::string type;
    bytes(type, 1, tensor);                                    // tensor_type
    return type;
}

std::string
valueInfo(const std::string& name, const std::string& type)
{
    std::string v;
    bytes(v, 1, name);
    bytes(v, 2, type);
    return v;
}

std::string
initializer(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& data)
{
    std::string t;
    for (int64_t d : dims) {
        number(t, 1, static_cast<uint64_t>(d));                // dims
    }
    number(t, 2, FLOAT);                                       // data_type
    bytes(t, 8, name);                                         // name
    std::string raw(data.size() * sizeof(float), '\0');        // little-endian, as ONNX's raw_data
    std::memcpy(raw.data(), data.data(), raw.size());
    bytes(t, 9, raw);                                          // raw_data
    return t;
}

std::string
lstmNode(uint32_t hidden)
{
    std::string node;
    for (const char* in : { "X", "W", "R" }) {
        bytes(node, 1, in);                                    // input
    }
    bytes(node, 2, "Y");                                       // output
    bytes(node, 3, "calibration");                             // name
    bytes(node, 4, "LSTM");                                    // op_type
    std::string attr;
    bytes(attr, 1, "hidden_size");                             // name
    number(attr, 3, hidden);                                   // i
    number(attr, 20, 2);                                       // type INT
    bytes(node, 5, attr);                                      // attribute
    return node;
}

} // namespace

std::string
lstmModelBytes(uint32_t input, uint32_t hidden, const std::vector<float>& W, const std::vector<float>& R)
{
    int64_t rows = 4 * static_cast<int64_t>(hidden);
    std::string graph;
    bytes(graph, 1, lstmNode(hidden));                         // node
    bytes(graph, 2, "calibration");                            // name
    bytes(graph, 5, initializer("W", { 1, rows, input }, W));  // initializer
    bytes(graph, 5, initializer("R", { 1, rows, hidden }, R));
    bytes(graph, 11, valueInfo("X", floatTensorType({ { "seq", 0 }, { "batch", 0 }, { "", input } })));    // input
    bytes(graph, 12, valueInfo("Y", floatTensorType({})));     // output
    std::string opset;
    bytes(opset, 1, "");                                       // domain
    number(opset, 2, 14);                                      // version
    std::string model;
    number(model, 1, 8);                                       // ir_version
    bytes(model, 8, opset);                                    // opset_import
    bytes(model, 7, graph);                                    // graph
    return model;
}

} // namespace ortops::ep
