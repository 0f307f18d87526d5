// com.microsoft DynamicQuantizeLSTM (onnxruntime.quantization.quantize_dynamic's LSTM) as the
// ai.onnx LSTM it computes: the one rule for its quantized weights, which the EP applies to
// ORT's constant initializers and ortops.convert to numpy arrays (through ortops._vk).
//
// W [num_directions, input_size, 4*hidden] and R [num_directions, hidden, 4*hidden] (transposed
// relative to ai.onnx LSTM, gates in the same i, o, f, c order along the last axis) are int8 or
// uint8, with W_scale / W_zero_point and R_scale / R_zero_point per tensor ([num_directions]) or
// per channel ([num_directions, 4*hidden]); ORT's kernel then wants int8 zero points all 0 and
// uint8 ones all equal, and refuses others, so ortops leaves such a node to it. Dequantized:
// (q - zero_point) * scale in float64 (exact: an integer of at most 9 bits times a float32),
// rounded once to float32 and transposed to ai.onnx's [num_directions, 4*hidden, cols].
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ortops {

inline constexpr const char* QUANTIZED_OP = "DynamicQuantizeLSTM";
inline constexpr const char* QUANTIZED_DOMAIN = "com.microsoft";
// Its inputs: LSTM's eight, then these four (positions 8 to 11).
inline constexpr size_t QUANTIZED_INPUTS = 12;
inline constexpr std::array<std::string_view, 4> QUANTIZATION_INPUTS = { "W_scale", "W_zero_point", "R_scale",
                                                                         "R_zero_point" };

// One tensor of a quantized weight as a door holds it: its ONNX element type, its shape and,
// where the door has read it, its elements (row-major; nullptr: not read).
struct QuantTensor
{
    int element = 0;
    std::vector<int64_t> shape;
    const void* data = nullptr;
};

// Checks of the quantized weight `w` ("W" or "R") with its scale and zero point: their types
// and shapes, and where their data is given, their values (finite scales; the per-channel zero
// points ORT's kernel admits). InputError "DynamicQuantizeLSTM: <argument>: expected ..., got
// ..." otherwise. The weight's own data is not read.
void
checkQuantizedWeight(std::string_view w, const QuantTensor& q, const QuantTensor& scale, const QuantTensor& zero);

// The ai.onnx LSTM weight [num_directions, 4*hidden, cols] (float32) of a checked quantized
// weight whose data, scale and zero point are all given; `shape` is set to its shape.
std::vector<float>
dequantizeWeight(std::string_view w, const QuantTensor& q, const QuantTensor& scale, const QuantTensor& zero,
                 std::vector<int64_t>& shape);

// The ai.onnx shape of a quantized weight's shape ([dirs, cols, gates] -> [dirs, gates, cols]).
std::vector<int64_t>
dequantizedShape(const std::vector<int64_t>& quantized);

// "int8 per-channel" / "uint8 per-tensor", for the placement report.
std::string
describeQuantized(const QuantTensor& q, const QuantTensor& scale);

} // namespace ortops
