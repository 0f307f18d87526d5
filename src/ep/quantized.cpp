// DynamicQuantizeLSTM's weights dequantized for the EP (ep.hpp). The rules are
// ortops/ort/quantized.py's (the custom-op door's): W [dirs, input, 4*hidden] and R [dirs,
// hidden, 4*hidden] int8 or uint8, per tensor (scale and zero point [dirs]) or per channel
// ([dirs, 4*hidden]; ORT's kernel then wants int8 zero points all 0, uint8 ones all equal);
// (q - zero_point) * scale computed in float64 (exact: a 9-bit integer times a float32),
// rounded once to float32 and transposed to ai.onnx's [dirs, 4*hidden, cols].
#include <cmath>
#include <string>
#include <vector>

#include "ep/ep.hpp"
#include "ort/noderun.hpp"
#include "ort/status.hpp"

namespace ortops::ep {

using ort::check;
using ort::NodeError;

namespace {

struct Tensor
{
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    std::vector<int64_t> shape;
    const void* data = nullptr;
};

Tensor
tensorOf(const OrtApi* api, const OrtValue* value)
{
    Tensor t;
    OrtTensorTypeAndShapeInfo* info = nullptr;
    check(api, api->GetTensorTypeAndShape(value, &info), "GetTensorTypeAndShape");
    size_t rank = 0;
    OrtStatus* s = api->GetTensorElementType(info, &t.type);
    if (s == nullptr) {
        s = api->GetDimensionsCount(info, &rank);
    }
    t.shape.resize(rank);
    if (s == nullptr && rank > 0) {
        s = api->GetDimensions(info, t.shape.data(), rank);
    }
    api->ReleaseTensorTypeAndShapeInfo(info);
    check(api, s, "reading a quantization parameter");
    void* data = nullptr;
    check(api, api->GetTensorMutableData(const_cast<OrtValue*>(value), &data), "GetTensorMutableData");
    t.data = data;
    return t;
}

double
integerAt(const Tensor& t, size_t i)
{
    return t.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 ? static_cast<const int8_t*>(t.data)[i]
                                                        : static_cast<const uint8_t*>(t.data)[i];
}

// The checks of the scale and the zero point of a weight of `dirs` x `gates` columns.
void
checkParameters(const Tensor& q, const Tensor& scale, const Tensor& zero, const std::string& w, int64_t dirs,
                int64_t gates)
{
    const std::string op = QUANTIZED_OP;
    std::string sName = w + "_scale", zName = w + "_zero_point";
    bool perChannel = scale.shape == std::vector<int64_t>{ dirs, gates };
    if (scale.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT || !(perChannel || scale.shape == std::vector<int64_t>{ dirs })) {
        throw NodeError(op + ": " + sName + ": expected float32 [" + std::to_string(dirs) + "] (per tensor) or [" +
                        std::to_string(dirs) + ", " + std::to_string(gates) + "] (per channel), got " +
                        ort::ortTypeName(scale.type) + " " + ort::shapeText(scale.shape));
    }
    if (zero.type != q.type || zero.shape != scale.shape) {
        throw NodeError(op + ": " + zName + ": expected " + ort::ortTypeName(q.type) + " " + ort::shapeText(scale.shape) +
                        " (the type of " + w + ", the shape of " + sName + "), got " + ort::ortTypeName(zero.type) +
                        " " + ort::shapeText(zero.shape));
    }
    size_t n = static_cast<size_t>(perChannel ? dirs * gates : dirs);
    for (size_t i = 0; i < n; ++i) {
        double z = integerAt(zero, i);
        if (perChannel && q.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 && z != 0) {
            throw NodeError(op + ": " + zName + ": expected per-channel int8 zero points all 0 (ONNX Runtime's "
                            "kernel refuses others), got " + std::to_string(static_cast<int>(z)));
        }
        if (perChannel && q.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8 && z != integerAt(zero, 0)) {
            throw NodeError(op + ": " + zName + ": expected per-channel uint8 zero points all equal (ONNX "
                            "Runtime's kernel refuses others)");
        }
        if (!std::isfinite(static_cast<const float*>(scale.data)[i])) {
            throw NodeError(op + ": " + sName + ": expected finite scales");
        }
    }
}

} // namespace

std::vector<float>
dequantize(const OrtApi* api, const NodeSpec& spec, size_t which, std::vector<int64_t>& shape)
{
    const std::string w = which == 0 ? "W" : "R";
    size_t input = which == 0 ? ort::IN_W : ort::IN_R;
    const OrtValue* qValue = spec.constants[input];
    const OrtValue* sValue = spec.quantParams[2 * which];
    const OrtValue* zValue = spec.quantParams[2 * which + 1];
    if (qValue == nullptr || sValue == nullptr || zValue == nullptr) {
        throw NodeError(std::string(QUANTIZED_OP) + ": " + w + ", " + w + "_scale and " + w +
                        "_zero_point must be constant (the device path dequantizes constant weights once)");
    }
    Tensor q = tensorOf(api, qValue), scale = tensorOf(api, sValue), zero = tensorOf(api, zValue);
    if ((q.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 && q.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8) ||
        q.shape.size() != 3 || q.shape[0] < 0 || q.shape[1] < 0 || q.shape[2] < 0) {
        throw NodeError(std::string(QUANTIZED_OP) + ": " + w + ": expected an int8 or uint8 tensor [num_directions, "
                        "rows, 4*hidden], got " + ort::ortTypeName(q.type) + " " + ort::shapeText(q.shape));
    }
    int64_t dirs = q.shape[0], rows = q.shape[1], gates = q.shape[2];
    checkParameters(q, scale, zero, w, dirs, gates);
    bool perChannel = scale.shape.size() == 2;
    const auto* scales = static_cast<const float*>(scale.data);
    std::vector<float> out(static_cast<size_t>(dirs * gates * rows));
    for (int64_t d = 0; d < dirs; ++d) {
        for (int64_t r = 0; r < rows; ++r) {
            for (int64_t g = 0; g < gates; ++g) {
                size_t p = static_cast<size_t>(perChannel ? d * gates + g : d);
                double v = (integerAt(q, static_cast<size_t>((d * rows + r) * gates + g)) - integerAt(zero, p)) *
                           static_cast<double>(scales[p]);
                out[static_cast<size_t>((d * gates + g) * rows + r)] = static_cast<float>(v);
            }
        }
    }
    shape = { dirs, gates, rows };
    return out;
}

} // namespace ortops::ep
