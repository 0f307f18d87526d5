// Requests' rows stacked along a batch axis and split back (ortops.serve's stack and split): one
// native copy a tensor, keeping the GIL.
//
// Why native, and why keep the GIL: a replica's batch runs on a worker thread while the
// replica's event loop, under many clients, wants the GIL nearly all the time. numpy releases
// the GIL around each copy of more than a few hundred elements (np.concatenate: once for each
// request's rows; np.take: once for each request's part of each output), and each time the
// worker must wait for the loop to be made to let go, a switch interval each. On the H200 a
// batch of 8 recognizer rows beside a busy Python thread spent 4.7-5.1 ms stacking and 1.4-1.9
// ms splitting at a 0.5 ms interval (41 ms each at 5 ms) against under 0.13 ms each beside an
// idle one; with these copies 0.07-0.10 ms each (docs/serving.md, "Where the H200 lost it").
// These copies are microseconds, so they run
// holding the GIL; only copies of kReleaseGilFromBytes or more, whose own time is that of a
// hand-off or longer, let it go.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace ortops {

namespace {

// 4 MiB: about 0.4 ms of copying on the H200 machine's host, the replica's switch interval.
constexpr size_t kReleaseGilFromBytes = size_t{4} << 20;

// A tensor of rows along `axis`: `outer` blocks (the dimensions before the axis), each of
// rows x rowBytes (the dimensions after it, in bytes).
struct RowLayout {
    size_t outer = 1;
    size_t rows = 0;
    size_t rowBytes = 0;
};

std::string
shapeText(const py::array& a)
{
    std::string s = "[";
    for (py::ssize_t i = 0; i < a.ndim(); i++) {
        s += (i ? ", " : "") + std::to_string(a.shape(i));
    }
    return s + "]";
}

// The array's layout along `axis`, after the checks every array here meets: C-contiguous
// (ortops.serve.check_feed makes feeds so; ONNX Runtime's outputs are) and plain numbers
// (no Python objects, whose references a byte copy would not count).
RowLayout
layout(const py::array& a, py::ssize_t axis, const char* what)
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
    RowLayout l;
    l.rowBytes = static_cast<size_t>(a.itemsize());
    for (py::ssize_t i = 0; i < a.ndim(); i++) {
        size_t d = static_cast<size_t>(a.shape(i));
        if (i < axis) {
            l.outer *= d;
        } else if (i == axis) {
            l.rows = d;
        } else {
            l.rowBytes *= d;
        }
    }
    return l;
}

// Copies each outer block's rows: parts[k] holds partRows[k] rows of every block of `whole`,
// at row offset partStart[k]. toWhole: parts -> whole (stack), else whole -> parts (split).
void
copyBlocks(char* whole, size_t wholeRows, const std::vector<char*>& parts, const std::vector<size_t>& partRows,
           size_t outer, size_t rowBytes, bool toWhole)
{
    std::optional<py::gil_scoped_release> release;
    if (outer * wholeRows * rowBytes >= kReleaseGilFromBytes) {
        release.emplace();
    }
    for (size_t o = 0; o < outer; o++) {
        size_t start = 0;
        for (size_t k = 0; k < parts.size(); k++) {
            size_t bytes = partRows[k] * rowBytes;
            char* w = whole + (o * wholeRows + start) * rowBytes;
            char* p = parts[k] + o * bytes;
            if (toWhole) {
                std::memcpy(w, p, bytes);
            } else {
                std::memcpy(p, w, bytes);
            }
            start += partRows[k];
        }
    }
}

py::array
stackRows(const std::vector<py::array>& arrays, py::ssize_t axis)
{
    if (arrays.empty()) {
        throw std::invalid_argument("ortops.serve: stack_rows needs at least one array");
    }
    const py::array& first = arrays.front();
    RowLayout base = layout(first, axis, "a stacked input");
    std::vector<char*> parts;
    std::vector<size_t> rows;
    size_t total = 0;
    for (const py::array& a : arrays) {
        RowLayout l = layout(a, axis, "a stacked input");
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
        parts.push_back(static_cast<char*>(const_cast<void*>(a.data())));
        rows.push_back(l.rows);
        total += l.rows;
    }
    std::vector<py::ssize_t> shape(first.shape(), first.shape() + first.ndim());
    shape[static_cast<size_t>(axis)] = static_cast<py::ssize_t>(total);
    py::array out(first.dtype(), shape);
    copyBlocks(static_cast<char*>(out.mutable_data()), total, parts, rows, base.outer, base.rowBytes, true);
    return out;
}

std::vector<py::array>
splitRows(const py::array& whole, py::ssize_t axis, const std::vector<size_t>& sizes)
{
    RowLayout l = layout(whole, axis, "a stacked output");
    size_t sum = 0;
    for (size_t s : sizes) {
        sum += s;
    }
    if (sum != l.rows) {
        throw std::invalid_argument("ortops.serve: the requests' rows add up to " + std::to_string(sum) +
                                    ", the stacked output " + shapeText(whole) + " has " + std::to_string(l.rows) +
                                    " along axis " + std::to_string(axis));
    }
    std::vector<py::array> out;
    std::vector<char*> parts;
    std::vector<py::ssize_t> shape(whole.shape(), whole.shape() + whole.ndim());
    for (size_t s : sizes) {
        shape[static_cast<size_t>(axis)] = static_cast<py::ssize_t>(s);
        out.emplace_back(whole.dtype(), shape);
        parts.push_back(static_cast<char*>(out.back().mutable_data()));
    }
    copyBlocks(static_cast<char*>(const_cast<void*>(whole.data())), l.rows, parts, sizes, l.outer, l.rowBytes,
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
