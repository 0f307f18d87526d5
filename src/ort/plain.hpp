// The glue's pieces that need no ONNX Runtime header: the node error, the inputs' positions
// and the element types' ONNX numbers and names; status.hpp, noderun.hpp and values.hpp include
// this for the rest of the glue.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "core/config/onnx_types.hpp"
#include "core/config/types.hpp"

namespace ortops::ort {

// The node and its config disagree, or the config does not fit the op.
struct NodeError : std::invalid_argument
{
    using std::invalid_argument::invalid_argument;
};

// Input positions in ONNX's order (cells.hpp): X W R B sequence_lens initial_h initial_c P.
inline constexpr size_t IN_X = 0, IN_W = 1, IN_R = 2, IN_B = 3, IN_LENS = 4, IN_H = 5, IN_C = 6, IN_P = 7;
// The weights in NodeRunner::held's order, as input positions.
inline constexpr std::array<size_t, 4> WEIGHT_INPUTS = { IN_W, IN_R, IN_B, IN_P };

// ONNX's number of an element type and the numpy-style name of one (the core's table,
// config/onnx_types.hpp; ORT's ONNXTensorElementDataType has the same values: values.cpp
// asserts them).
inline constexpr int
onnxType(ElementType t)
{
    return onnx::elementOf(t);
}

inline std::string
onnxTypeName(int t)
{
    return onnx::elementName(t);
}

} // namespace ortops::ort
