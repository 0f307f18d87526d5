// numpy arrays as the native core takes them (HostTensor, layer.hpp): the one conversion of the
// Python door's arrays, shared by its bindings (bind_layer.cpp, bind_testing.cpp).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "rnn/layer.hpp"

namespace ortops::door {

namespace py = pybind11;

inline ElementType
elementType(const py::array& a)
{
    if (a.dtype().is(py::dtype::of<float>())) {
        return ElementType::Float32;
    }
    if (a.dtype().is(py::dtype::of<int32_t>())) {
        return ElementType::Int32;
    }
    if (a.dtype().kind() == 'f' && a.itemsize() == 2) {
        return ElementType::Float16;
    }
    throw std::invalid_argument("ortops: arrays must be float32, float16 or int32, got " +
                                std::string(py::str(a.dtype())));
}

// A C-contiguous array (ortops.validation converted it) viewed, not copied.
inline HostTensor
tensor(const py::array& a)
{
    if (!(a.flags() & py::array::c_style)) {
        throw std::invalid_argument("ortops: arrays must be C-contiguous");
    }
    HostTensor t;
    t.data = a.data();
    t.type = elementType(a);
    for (py::ssize_t i = 0; i < a.ndim(); i++) {
        t.shape.push_back(a.shape(i));
    }
    return t;
}

inline std::optional<HostTensor>
optionalTensor(const py::object& o)
{
    if (o.is_none()) {
        return std::nullopt;
    }
    return tensor(o.cast<py::array>());
}

} // namespace ortops::door
