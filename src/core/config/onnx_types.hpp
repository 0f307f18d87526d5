// ONNX's numbers a door reads a node with, named once: the element types of tensors
// (TensorProto.DataType; ONNX Runtime's ONNXTensorElementDataType has the same values) and the
// types of attributes (AttributeProto.AttributeType; ORT's OrtOpAttrType has other values,
// which the EP maps onto these).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "config/types.hpp"

namespace ortops::onnx {

// TensorProto.DataType.
enum Element : int
{
    UNDEFINED = 0, FLOAT = 1, UINT8 = 2, INT8 = 3, UINT16 = 4, INT16 = 5, INT32 = 6, INT64 = 7, STRING = 8,
    BOOL = 9, FLOAT16 = 10, DOUBLE = 11, UINT32 = 12, UINT64 = 13, COMPLEX64 = 14, COMPLEX128 = 15, BFLOAT16 = 16,
};

// ONNX's number of a core element type.
inline constexpr int
elementOf(ElementType t)
{
    switch (t) {
        case ElementType::Float32:
            return FLOAT;
        case ElementType::Float16:
            return FLOAT16;
        case ElementType::Int32:
            return INT32;
    }
    return UNDEFINED;
}

// numpy-style names of ONNX's element types ("float32", "int8", ...).
inline std::string
elementName(int t)
{
    static const char* const names[] = { "undefined", "float32", "uint8", "int8", "uint16",
                                         "int16", "int32", "int64", "string", "bool",
                                         "float16", "float64", "uint32", "uint64",
                                         "complex64", "complex128", "bfloat16" };
    if (t >= 0 && static_cast<size_t>(t) < sizeof(names) / sizeof(names[0])) {
        return names[t];
    }
    return "element type " + std::to_string(static_cast<long long>(t));
}

// AttributeProto.AttributeType.
enum Attribute : int
{
    ATTR_UNDEFINED = 0, ATTR_FLOAT = 1, ATTR_INT = 2, ATTR_STRING = 3, ATTR_TENSOR = 4, ATTR_GRAPH = 5,
    ATTR_FLOATS = 6, ATTR_INTS = 7, ATTR_STRINGS = 8, ATTR_TENSORS = 9, ATTR_GRAPHS = 10,
    ATTR_SPARSE_TENSOR = 11, ATTR_SPARSE_TENSORS = 12, ATTR_TYPE_PROTO = 13, ATTR_TYPE_PROTOS = 14,
};

// An attribute type's name as ONNX spells it ("INT", "FLOATS", ...).
inline std::string
attributeName(int t)
{
    static const char* const names[] = { "UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS",
                                         "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS",
                                         "TYPE_PROTO", "TYPE_PROTOS" };
    if (t >= 0 && static_cast<size_t>(t) < sizeof(names) / sizeof(names[0])) {
        return names[t];
    }
    return "attribute type " + std::to_string(static_cast<long long>(t));
}

} // namespace ortops::onnx
