// DynamicQuantizeLSTM's weights (quantized.hpp): the checks and the dequantization, with the
// messages ortops.convert and the EP give alike.
#include "config/quantized.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/errors.hpp"
#include "config/nodeconfig_text.hpp"
#include "config/onnx_types.hpp"

namespace ortops {

namespace {

std::string
shapeText(const std::vector<int64_t>& shape)
{
    std::string out = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        out += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return out + "]";
}

std::string
typed(const QuantTensor& t)
{
    return onnx::elementName(t.element) + " " + shapeText(t.shape);
}

double
integerAt(const QuantTensor& t, size_t i)
{
    return t.element == onnx::INT8 ? static_cast<const int8_t*>(t.data)[i] : static_cast<const uint8_t*>(t.data)[i];
}

[[noreturn]] void
refuse(std::string_view argument, const std::string& what)
{
    throw InputError(std::string(QUANTIZED_OP) + ": " + std::string(argument) + ": " + what);
}

// The distinct values of the first `n` zero points, at most four, as numpy's unique()[:4].
std::string
uniqueValues(const QuantTensor& zero, size_t n)
{
    std::set<int> values;
    for (size_t i = 0; i < n; ++i) {
        values.insert(static_cast<int>(integerAt(zero, i)));
    }
    std::string out = "[";
    size_t k = 0;
    for (int v : values) {
        if (k == 4) {
            break;
        }
        out += (k++ ? ", " : "") + std::to_string(v);
    }
    return out + "]";
}

void
checkValues(std::string_view w, const QuantTensor& q, const QuantTensor& scale, const QuantTensor& zero)
{
    std::string sName = std::string(w) + "_scale", zName = std::string(w) + "_zero_point";
    bool perChannel = scale.shape.size() == 2;
    size_t n = 1;
    for (int64_t d : scale.shape) {
        n *= static_cast<size_t>(d);
    }
    if (perChannel && q.element == onnx::INT8) {
        for (size_t i = 0; i < n; ++i) {
            if (integerAt(zero, i) != 0) {
                refuse(zName, "expected per-channel int8 zero points all 0 (ONNX Runtime's kernel refuses others), got " +
                                uniqueValues(zero, n));
            }
        }
    }
    if (perChannel && q.element == onnx::UINT8) {
        for (size_t i = 0; i < n; ++i) {
            if (integerAt(zero, i) != integerAt(zero, 0)) {
                refuse(zName, "expected per-channel uint8 zero points all equal (ONNX Runtime's kernel refuses "
                              "others), got " + uniqueValues(zero, n));
            }
        }
    }
    std::string bad;
    size_t shown = 0;
    for (size_t i = 0; i < n && shown < 3; ++i) {
        float s = static_cast<const float*>(scale.data)[i];
        if (!std::isfinite(s)) {
            bad += (shown++ ? ", " : "") + configtext::describeNumber(s);
        }
    }
    if (shown > 0) {
        refuse(sName, "expected finite scales, got [" + bad + "]");
    }
}

} // namespace

void
checkQuantizedWeight(std::string_view w, const QuantTensor& q, const QuantTensor& scale, const QuantTensor& zero)
{
    std::string sName = std::string(w) + "_scale";
    if ((q.element != onnx::INT8 && q.element != onnx::UINT8) || q.shape.size() != 3 ||
        std::any_of(q.shape.begin(), q.shape.end(), [](int64_t d) { return d < 0; })) {
        refuse(w, "expected an int8 or uint8 tensor [num_directions, rows, 4*hidden], got " + typed(q));
    }
    int64_t dirs = q.shape[0], gates = q.shape[2];
    std::vector<int64_t> perTensor{ dirs }, perChannel{ dirs, gates };
    if (scale.element != onnx::FLOAT || (scale.shape != perTensor && scale.shape != perChannel)) {
        refuse(sName, "expected float32 [" + std::to_string(dirs) + "] (per tensor) or [" + std::to_string(dirs) + ", " +
                        std::to_string(gates) + "] (per channel), got " + typed(scale));
    }
    if (zero.element != q.element || zero.shape != scale.shape) {
        refuse(std::string(w) + "_zero_point", "expected " + onnx::elementName(q.element) + " " + shapeText(scale.shape) +
                                                 " (the type of " + std::string(w) + ", the shape of " + sName +
                                                 "), got " + typed(zero));
    }
    if (scale.data != nullptr && zero.data != nullptr) {
        checkValues(w, q, scale, zero);
    }
}

std::vector<int64_t>
dequantizedShape(const std::vector<int64_t>& quantized)
{
    if (quantized.size() != 3) {
        return quantized;
    }
    return { quantized[0], quantized[2], quantized[1] };
}

std::vector<float>
dequantizeWeight(std::string_view w, const QuantTensor& q, const QuantTensor& scale, const QuantTensor& zero,
                 std::vector<int64_t>& shape)
{
    checkQuantizedWeight(w, q, scale, zero);
    if (q.data == nullptr || scale.data == nullptr || zero.data == nullptr) {
        throw std::logic_error("dequantizeWeight: the weight, its scale and its zero point need their data");
    }
    int64_t dirs = q.shape[0], rows = q.shape[1], gates = q.shape[2];
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
    shape = dequantizedShape(q.shape);
    return out;
}

std::string
describeQuantized(const QuantTensor& q, const QuantTensor& scale)
{
    return onnx::elementName(q.element) + (scale.shape.size() == 2 ? " per-channel" : " per-tensor");
}

} // namespace ortops
