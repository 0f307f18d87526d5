// ORT values as host tensors (values.hpp).
#include "ort/values.hpp"

#include <limits>
#include <utility>

#include "ort/core.hpp"   // the core's headers, with the visibility they need

namespace ortops::ort {

namespace {

struct TypeShape
{
    ONNXTensorElementDataType type;
    std::vector<int64_t> shape;
};

TypeShape
typeShape(const OrtApi* api, const OrtValue* value, const char* what)
{
    OrtTensorTypeAndShapeInfo* info = nullptr;
    check(api, api->GetTensorTypeAndShape(value, &info), what);
    struct Release
    {
        const OrtApi* api;
        OrtTensorTypeAndShapeInfo* info;
        ~Release() { api->ReleaseTensorTypeAndShapeInfo(info); }
    } release{ api, info };
    TypeShape ts{};
    check(api, api->GetTensorElementType(info, &ts.type), what);
    size_t rank = 0;
    check(api, api->GetDimensionsCount(info, &rank), what);
    ts.shape.resize(rank);
    if (rank > 0) {
        check(api, api->GetDimensions(info, ts.shape.data(), rank), what);
    }
    return ts;
}

} // namespace

static_assert(ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT == onnxType(ElementType::Float32) &&
                  ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 == onnxType(ElementType::Float16) &&
                  ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 == onnxType(ElementType::Int32) &&
                  ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16 == 16,
              "ORT's element types are ONNX's numbers (plain.hpp)");

ONNXTensorElementDataType
ortType(ElementType t)
{
    return static_cast<ONNXTensorElementDataType>(onnxType(t));
}

std::string
ortTypeName(ONNXTensorElementDataType t)
{
    return onnxTypeName(static_cast<int>(t));
}

std::string
shapeText(const std::vector<int64_t>& shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        s += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return s + "]";
}

HostTensor
hostTensor(const OrtApi* api, const OrtValue* value, std::string_view name, ElementType want)
{
    std::string what = "reading input " + std::string(name);
    TypeShape ts = typeShape(api, value, what.c_str());
    if (ts.type != ortType(want)) {
        throw InputError(std::string(name) + " must be a " + elementTypeName(want) + " tensor, got " +
                         ortTypeName(ts.type) + " " + shapeText(ts.shape));
    }
    void* data = nullptr;
    // ORT's C API has no const accessor before 1.23; the buffer is only read.
    check(api, api->GetTensorMutableData(const_cast<OrtValue*>(value), &data), what.c_str());
    HostTensor t;
    t.data = data;
    t.type = want;
    t.shape = std::move(ts.shape);
    return t;
}

size_t
byteSize(const HostTensor& t)
{
    size_t n = 1;
    for (int64_t d : t.shape) {
        if (d < 0) {
            throw InputError("negative dimension in " + shapeText(t.shape));
        }
        auto u = static_cast<size_t>(d);
        if (u != 0 && n > std::numeric_limits<size_t>::max() / u) {
            throw InputError("tensor of shape " + shapeText(t.shape) + " is too large");
        }
        n *= u;
    }
    size_t e = elementSize(t.type);
    if (n > std::numeric_limits<size_t>::max() / e) {
        throw InputError("tensor of shape " + shapeText(t.shape) + " is too large");
    }
    return n * e;
}

} // namespace ortops::ort
