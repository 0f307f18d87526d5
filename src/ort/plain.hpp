// The glue's pieces that need no ONNX Runtime header: the node error, the inputs' positions
// and the element types' ONNX numbers and names. The EP's node checks (src/ep/node_check.hpp)
// build on these alone, so that tests/fuzz/fuzz_ep_node.cpp builds without ORT, Vulkan or
// Kompute; status.hpp, noderun.hpp and values.hpp include this for the rest of the glue.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>

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

// ONNX's number of an element type (TensorProto.DataType; ORT's ONNXTensorElementDataType
// has the same values: values.cpp asserts them).
inline constexpr int
onnxType(ElementType t)
{
    switch (t) {
        case ElementType::Float32:
            return 1;
        case ElementType::Float16:
            return 10;
        case ElementType::Int32:
            return 6;
    }
    return 0;
}

// numpy-style names of ONNX's element types (TensorProto.DataType order).
inline std::string
onnxTypeName(int t)
{
    static const char* const names[] = { "undefined", "float32", "uint8", "int8", "uint16",
                                         "int16", "int32", "int64", "string", "bool",
                                         "float16", "float64", "uint32", "uint64",
                                         "complex64", "complex128", "bfloat16" };
    if (t >= 0 && static_cast<size_t>(t) < sizeof(names) / sizeof(names[0])) {
        return names[t];
    }
    return "element type " + std::to_string(static_cast<size_t>(t));
}

} // namespace ortops::ort
