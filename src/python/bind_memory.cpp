// Host memory for Python: the mapped memory of buffers (reads and writes at a byte offset),
// and in the testing build the host copies on the copy threads (hostcopy.hpp) on their own,
// each with the GIL released.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "vk/hostcopy.hpp"
#include "vk/memory.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

bool
contiguous(const py::buffer_info& info)
{
    py::ssize_t expected = info.itemsize;
    for (py::ssize_t i = info.ndim - 1; i >= 0; i--) {
        if (info.shape[i] != 1 && info.strides[i] != expected) {
            return false;
        }
        expected *= info.shape[i];
    }
    return true;
}

uint64_t
byteSize(const py::buffer_info& info)
{
    return static_cast<uint64_t>(info.size) * info.itemsize;
}

void
memoryWrite(Memory& self, py::buffer data, uint64_t offset)
{
    py::buffer_info info = data.request();
    if (!contiguous(info)) {
        throw std::invalid_argument("ortops: buffer write needs C-contiguous data");
    }
    py::gil_scoped_release release;
    self.write(info.ptr, byteSize(info), offset);
}

void
memoryRead(Memory& self, py::buffer out, uint64_t offset)
{
    py::buffer_info info = out.request(true);
    if (!contiguous(info)) {
        throw std::invalid_argument("ortops: buffer read needs a C-contiguous target");
    }
    py::gil_scoped_release release;
    self.read(info.ptr, byteSize(info), offset);
}

} // namespace

void
bindMemory(py::module_& m)
{
    py::class_<Memory, std::shared_ptr<Memory>>(m, "Memory")
      .def_readonly("nbytes", &Memory::bytes)
      .def("write", &memoryWrite, py::arg("data"), py::arg("offset") = 0,
           "Copy C-contiguous data into the mapped memory at a byte offset.")
      .def("read", &memoryRead, py::arg("out"), py::arg("offset") = 0,
           "Copy the mapped memory at a byte offset into a C-contiguous array.");
    py::class_<HostBuffer, Memory, std::shared_ptr<HostBuffer>>(m, "HostBuffer");
    py::class_<Buffer, Memory, std::shared_ptr<Buffer>>(m, "Buffer");
}

#ifdef ORTOPS_TESTING
namespace {

void
hostCopy(py::buffer dst, py::buffer src)
{
    py::buffer_info to = dst.request(true);
    py::buffer_info from = src.request();
    uint64_t n = byteSize(from);
    uint64_t m = byteSize(to);
    if (n != m) {
        throw std::invalid_argument("ortops: host_copy needs equal sizes, got " + std::to_string(n) +
                                    " bytes into " + std::to_string(m));
    }
    if (!contiguous(to) || !contiguous(from)) {
        throw std::invalid_argument("ortops: host_copy needs C-contiguous source and target");
    }
    py::gil_scoped_release release;
    hostcopy::copy(to.ptr, from.ptr, n);
}

void
hostNarrowToHalf(py::buffer dst, py::buffer src)
{
    py::buffer_info to = dst.request(true);
    py::buffer_info from = src.request();
    if (from.itemsize != 4 || from.format != "f" || to.itemsize != 2 || to.format != "e") {
        throw std::invalid_argument("ortops: narrow_to_half needs a float32 source and a float16 "
                                    "target, got " + from.format + " into " + to.format);
    }
    if (from.size != to.size) {
        throw std::invalid_argument("ortops: narrow_to_half needs as many values in the target, got " +
                                    std::to_string(from.size) + " into " + std::to_string(to.size));
    }
    if (!contiguous(to) || !contiguous(from)) {
        throw std::invalid_argument("ortops: narrow_to_half needs C-contiguous source and target");
    }
    py::gil_scoped_release release;
    hostcopy::narrowToHalf(static_cast<uint16_t*>(to.ptr), static_cast<const float*>(from.ptr),
                           static_cast<size_t>(from.size));
}

// Host copy settings: arguments given change them; the settings now in force come back.
py::dict
copySettings(py::object chunk, py::object threads, py::object pool)
{
    hostcopy::Settings s = hostcopy::settings();
    if (!chunk.is_none()) {
        s.chunk = chunk.cast<size_t>();
    }
    if (!threads.is_none()) {
        s.threads = threads.cast<unsigned>();
    }
    if (!pool.is_none()) {
        s.pool = pool.cast<bool>();
    }
    hostcopy::configure(s);
    s = hostcopy::settings();
    py::dict d;
    d["chunk"] = s.chunk;
    d["threads"] = s.threads;
    d["pool"] = s.pool;
    return d;
}

} // namespace

// The host copies on their own, for tests/test_host_copy.py and bench/host_path.py (the
// testing build): bound by bindTesting (bind_testing.cpp), named in its TEST_HOOKS.
void
bindMemoryTesting(py::module_& m)
{
    m.def("host_copy", &hostCopy, py::arg("dst"), py::arg("src"),
          "Test hook: copy a C-contiguous array into another of as many bytes, as buffer reads and writes do.");
    m.def("narrow_to_half", &hostNarrowToHalf, py::arg("dst"), py::arg("src"),
          "Test hook: narrow a C-contiguous float32 array into a float16 one of as many values (round to "
          "nearest even, as numpy's astype), on the copy threads.");
    m.def("copy_settings", &copySettings, py::arg("chunk") = py::none(), py::arg("threads") = py::none(),
          py::arg("pool") = py::none(),
          "Test hook: host copy settings (bytes per chunk, threads per copy, persistent pool or a thread "
          "per call); arguments given change them. Returns the settings now in force.");
}
#endif // ORTOPS_TESTING

} // namespace ortops
