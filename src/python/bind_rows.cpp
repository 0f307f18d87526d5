// Requests' rows stacked along a batch axis and split back (ortops.serve's stack and split): one
// native copy a tensor, keeping the GIL, with the pieces the coalescer copies a run's requests
// with (coalesce.hpp batchPieces, memory.hpp copyPieces).
//
// Why native, and why keep the GIL: a replica's batch runs on a worker thread while the
// replica's event loop, under many clients, wants the GIL nearly all the time. numpy releases
// the GIL around each copy of more than a few hundred elements (np.concatenate: once for each
// request's rows; np.take: once for each request's part of each output), and each time the
// worker must wait for the loop to be made to let go, a switch interval each: beside a busy
// event loop that made stacking and splitting a batch take milliseconds where the copies
// themselves take microseconds (docs/serving.md). So they run holding the GIL; only copies of
// kReleaseGilFromBytes or more, whose own time is that of a hand-off or longer, let it go.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "rnn/coalesce.hpp"
#include "vk/memory.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

// 4 MiB: about 0.4 ms of copying on the H200 machine's host, the replica's switch interval.
constexpr size_t kReleaseGilFromBytes = size_t{4} << 20;

std::string
shapeText(const py::array& a)
{
    std::string s = "[";
    for (py::ssize_t i = 0; i < a.ndim(); i++) {
        s += (i ? ", " : "") + std::to_string(a.shape(i));
    }
    return s + "]";
}

std::vector<int64_t>
shapeOf(const py::array& a)
{
    return std::vector<int64_t>(a.shape(), a.shape() + a.ndim());
}

// The array's rows along `axis`, after the checks every array here meets: C-contiguous
// (ortops.serve.check_feed makes feeds so; ONNX Runtime's outputs are) and plain numbers
// (no Python objects, whose references a byte copy would not count).
uint32_t
rowsAlong(const py::array& a, py::ssize_t axis, const char* what)
{
    if (!(a.flags() & py::array::c_style)) {
        throw std::invalid_argument(std::string("ortops.serve: ") + what + " must be C-contiguous");
    }
    if (a.dtype().kind() == 'O' || a.dtype().kind() == 'V') {
        throw std::invalid_argument(std::string("ortops.serve: ") + what + " must hold numbers, got " +
                                    std::string(py::str(a.dtype())));
    }
    if (axis < 0 || axis >= a.ndim()) {
        throw std::invalid_argument(std::string("ortops.serve: ") + what + ": batch axis " + std::to_string(axis) +
                                    " is outside its shape " + shapeText(a));
    }
    return static_cast<uint32_t>(a.shape(axis));
}

// Copies the pieces between the whole tensor at `whole` and its parts (toWhole: stacking),
// letting the GIL go only for a copy of kReleaseGilFromBytes or more.
void
copyHoldingGil(const std::vector<Piece>& pieces, char* whole, size_t bytes, bool toWhole)
{
    std::optional<py::gil_scoped_release> release;
    if (bytes >= kReleaseGilFromBytes) {
        release.emplace();
    }
    copyPieces(pieces, whole, toWhole);
}

py::array
stackRows(const std::vector<py::array>& arrays, py::ssize_t axis)
{
    if (arrays.empty()) {
        throw std::invalid_argument("ortops.serve: stack_rows needs at least one array");
    }
    const py::array& first = arrays.front();
    std::vector<const void*> parts;
    std::vector<uint32_t> rows;
    uint32_t total = 0;
    for (const py::array& a : arrays) {
        rows.push_back(rowsAlong(a, axis, "a stacked input"));
        bool same = a.ndim() == first.ndim() && a.dtype().equal(first.dtype());
        for (py::ssize_t i = 0; same && i < a.ndim(); i++) {
            same = i == axis || a.shape(i) == first.shape(i);
        }
        if (!same) {
            throw std::invalid_argument("ortops.serve: stacked inputs must match but along axis " +
                                        std::to_string(axis) + ": " + std::string(py::str(first.dtype())) +
                                        " " + shapeText(first) + " against " + std::string(py::str(a.dtype())) +
                                        " " + shapeText(a));
        }
        parts.push_back(a.data());
        total += rows.back();
    }
    std::vector<int64_t> shape = shapeOf(first);
    shape[static_cast<size_t>(axis)] = total;
    py::array out(first.dtype(), std::vector<py::ssize_t>(shape.begin(), shape.end()));
    std::vector<Piece> pieces =
      batchPieces(parts, rows, total, shape, static_cast<size_t>(axis), static_cast<size_t>(first.itemsize()), false);
    copyHoldingGil(pieces, static_cast<char*>(out.mutable_data()), static_cast<size_t>(out.nbytes()), true);
    return out;
}

std::vector<py::array>
splitRows(const py::array& whole, py::ssize_t axis, const std::vector<uint32_t>& sizes)
{
    uint32_t total = rowsAlong(whole, axis, "a stacked output");
    uint64_t sum = 0;
    for (uint32_t s : sizes) {
        sum += s;
    }
    if (sum != total) {
        throw std::invalid_argument("ortops.serve: the requests' rows add up to " + std::to_string(sum) +
                                    ", the stacked output " + shapeText(whole) + " has " + std::to_string(total) +
                                    " along axis " + std::to_string(axis));
    }
    std::vector<py::array> out;
    std::vector<const void*> parts;
    std::vector<int64_t> shape = shapeOf(whole);
    for (uint32_t s : sizes) {
        std::vector<py::ssize_t> part(shape.begin(), shape.end());
        part[static_cast<size_t>(axis)] = s;
        out.emplace_back(whole.dtype(), part);
        parts.push_back(out.back().mutable_data());
    }
    std::vector<Piece> pieces =
      batchPieces(parts, sizes, total, shape, static_cast<size_t>(axis), static_cast<size_t>(whole.itemsize()), false);
    copyHoldingGil(pieces, static_cast<char*>(const_cast<void*>(whole.data())), static_cast<size_t>(whole.nbytes()),
                   false);
    return out;
}

} // namespace

void
bindRows(py::module_& m)
{
    m.def("stack_rows", &stackRows, py::arg("arrays"), py::arg("axis"),
          "The arrays (C-contiguous, one dtype, equal shapes but along axis) concatenated along axis: "
          "np.concatenate's result, copied holding the GIL (ortops.serve; src/python/bind_rows.cpp says why)");
    m.def("split_rows", &splitRows, py::arg("array"), py::arg("axis"), py::arg("sizes"),
          "The array (C-contiguous) cut along axis into parts of the given sizes, each a new C-contiguous array, "
          "copied holding the GIL");
}

} // namespace ortops
