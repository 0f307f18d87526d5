// ortops._vk: the Python door to the native core (src/core/). Each binding forwards to the
// class that owns the state (context.hpp, memory.hpp, program.hpp, sequence.hpp, layer.hpp),
// where the checks live; the work done here is converting Python objects (buffers, dicts)
// and releasing the GIL around copies and runs.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "context.hpp"
#include "hostcopy.hpp"
#include "layer.hpp"
#include "memory.hpp"
#include "program.hpp"
#include "sequence.hpp"

namespace ortops {
void bindLayer(pybind11::module_& m);      // bind_layer.cpp
}
void bindNodeConfig(pybind11::module_& m);  // bind_nodeconfig.cpp

namespace py = pybind11;
using namespace ortops;

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

// The dict ortops.device.Device takes.
py::dict
deviceDict(const DeviceDescription& s)
{
    py::dict d;
    d["index"] = s.index;
    d["name"] = s.name;
    d["type"] = s.type;
    d["vendor_id"] = s.vendorId;
    d["device_id"] = s.deviceId;
    d["api_version"] = s.apiVersion;
    d["driver"] = s.driver;
    d["driver_info"] = s.driverInfo;
    d["max_storage_buffer_range"] = s.maxStorageBufferRange;
    d["max_workgroup_size"] =
      py::make_tuple(s.maxWorkgroupSize[0], s.maxWorkgroupSize[1], s.maxWorkgroupSize[2]);
    d["max_workgroup_invocations"] = s.maxWorkgroupInvocations;
    d["max_workgroup_count"] =
      py::make_tuple(s.maxWorkgroupCount[0], s.maxWorkgroupCount[1], s.maxWorkgroupCount[2]);
    d["max_shared_memory"] = s.maxSharedMemory;
    d["max_push_constants_size"] = s.maxPushConstantsSize;
    d["subgroup_size"] = s.subgroupSize;
    d["float16"] = s.float16;
    d["float64"] = s.float64;
    d["nan_preserve_float16"] = s.nanPreserveFloat16;
    d["nan_preserve_float32"] = s.nanPreserveFloat32;
    d["denorm_preserve_float32"] = s.denormPreserveFloat32;
    d["denorm_flush_float32"] = s.denormFlushFloat32;
    d["timestamp_period_ns"] = s.timestampPeriodNs;
    d["timestamps"] = s.timestamps;
    d["portability"] = s.portability;
    d["uuid"] = s.uuid;
    d["luid"] = s.luid ? py::object(py::str(*s.luid)) : py::object(py::none());
    d["pci_bus_id"] = s.pciBusId ? py::object(py::str(*s.pciBusId)) : py::object(py::none());
    py::list coopmat;
    for (const auto& c : s.cooperativeMatrix) {
        py::dict e;
        e["m"] = c.m;
        e["n"] = c.n;
        e["k"] = c.k;
        e["a"] = c.a;
        e["b"] = c.b;
        e["c"] = c.c;
        e["result"] = c.result;
        e["saturating"] = c.saturating;
        e["scope"] = c.scope;
        coopmat.append(e);
    }
    d["cooperative_matrix"] = coopmat;
    d["subgroup_size_range"] = s.subgroupSizeRange
                                 ? py::make_tuple(s.subgroupSizeRange->first, s.subgroupSizeRange->second)
                                 : py::tuple();
    return d;
}

} // namespace

PYBIND11_MODULE(_vk, m)
{
    m.doc() = "ortops' native half: Vulkan context, Kompute buffers and pipelines, recorded "
              "sequences with full barriers, range copies and timestamps";

    m.def("enumerate_devices",
          []() {
              std::vector<py::dict> out;
              for (const auto& d : enumerateDevices()) {
                  out.push_back(deviceDict(d));
              }
              return out;
          },
          "Describe every Vulkan device with a compute queue.");
    py::register_exception<DeviceLostError>(m, "DeviceLostError", PyExc_RuntimeError);
    py::register_exception<InputError>(m, "InputError", PyExc_ValueError);
    py::register_exception<UnsupportedLayerError>(m, "UnsupportedLayerError", PyExc_ValueError);
    bindLayer(m);
    bindNodeConfig(m);
    m.def("enabled_instance_extensions", &enabledInstanceExtensions,
          "The instance extensions the last Vulkan instance was created with.");
    m.def("available_instance_extensions", &availableInstanceExtensions,
          "The instance extensions the Vulkan loader offers.");
    m.def("take_messages", &takeMessages, "Validation messages since the last call (and clear them).");

    m.def("host_copy", &hostCopy, py::arg("dst"), py::arg("src"),
          "Copy a C-contiguous array into another of as many bytes, as buffer reads and writes do.");
    m.def("narrow_to_half", &hostNarrowToHalf, py::arg("dst"), py::arg("src"),
          "Narrow a C-contiguous float32 array into a float16 one of as many values (round to "
          "nearest even, as numpy's astype), on the copy threads.");
    m.def("copy_settings",
          [](py::object chunk, py::object threads, py::object pool) {
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
          },
          py::arg("chunk") = py::none(), py::arg("threads") = py::none(), py::arg("pool") = py::none(),
          "Host copy settings (bytes per chunk, threads per copy, persistent pool or a thread "
          "per call); arguments given change them. Returns the settings now in force.");

    py::class_<Context, std::shared_ptr<Context>>(m, "Context")
      .def(py::init<uint32_t, bool, uint32_t>(), py::arg("index"), py::arg("validation") = false,
           py::arg("max_queues") = 1)
      .def_property_readonly("lost", [](const Context& self) { return self.lost.load(); })
      .def_readonly("cooperative_matrix", &Context::cooperativeMatrix,
                    "Whether VK_KHR_cooperative_matrix was enabled on this device.")
      .def_readonly("cooperative_matrix_off", &Context::cooperativeMatrixOff,
                    "Why VK_KHR_cooperative_matrix was not enabled although offered (or '').")
      .def("simulate_loss", &Context::simulateLoss,
           "Test hook: mark the context lost, as a VK_ERROR_DEVICE_LOST would.")
      .def("buffer",
           [](std::shared_ptr<Context> self, uint64_t nbytes, const std::string& kind) {
               return std::make_shared<Buffer>(std::move(self), nbytes, kind);
           },
           py::arg("nbytes"), py::arg("kind") = "device",
           "A storage buffer: \"device\" (with a host-visible staging twin) or \"storage\".")
      .def("program",
           [](std::shared_ptr<Context> self, py::bytes spirv,
              const std::vector<std::shared_ptr<Buffer>>& buffers,
              const std::vector<uint32_t>& specialization, uint32_t pushWords) {
               return std::make_shared<Program>(std::move(self), std::string(spirv), buffers,
                                                specialization, pushWords);
           },
           py::arg("spirv"), py::arg("buffers"),
           py::arg("specialization") = std::vector<uint32_t>{}, py::arg("push_words") = 0)
      .def("host_buffer",
           [](std::shared_ptr<Context> self, uint64_t nbytes) {
               return std::make_shared<HostBuffer>(std::move(self), nbytes, false);
           },
           py::arg("nbytes"),
           "Host-cached memory for reading results back (a transfer target, not bindable).")
      .def("sequence",
           [](std::shared_ptr<Context> self, uint32_t timestamps) {
               return std::make_shared<Sequence>(std::move(self), timestamps);
           },
           py::arg("timestamps") = 0);

    py::class_<Memory, std::shared_ptr<Memory>>(m, "Memory")
      .def_readonly("nbytes", &Memory::bytes)
      .def("write", &memoryWrite, py::arg("data"), py::arg("offset") = 0,
           "Copy C-contiguous data into the mapped memory at a byte offset.")
      .def("read", &memoryRead, py::arg("out"), py::arg("offset") = 0,
           "Copy the mapped memory at a byte offset into a C-contiguous array.");
    py::class_<HostBuffer, Memory, std::shared_ptr<HostBuffer>>(m, "HostBuffer");
    py::class_<Buffer, Memory, std::shared_ptr<Buffer>>(m, "Buffer");
    py::class_<Program, std::shared_ptr<Program>>(m, "Program");

    py::class_<Sequence, std::shared_ptr<Sequence>>(m, "Sequence")
      .def("upload", &Sequence::upload, py::arg("buffers"),
           "Copy each buffer's staging memory to its device memory.")
      .def("download", &Sequence::download, py::arg("buffers"),
           "Copy each buffer's device memory to its staging memory.")
      .def("dispatch", &Sequence::dispatch, py::arg("program"), py::arg("x"), py::arg("y") = 1,
           py::arg("z") = 1, py::arg("push") = std::vector<uint32_t>{})
      .def("barrier", &Sequence::barrier, py::arg("src"), py::arg("dst"))
      .def("copy", &Sequence::copy, py::arg("src"), py::arg("dst"), py::arg("src_offset") = 0,
           py::arg("dst_offset") = 0, py::arg("size"))
      .def("finish", &Sequence::finish,
           "Record the end-of-run marker eval() polls for (lower completion latency).")
      .def("timestamp", &Sequence::timestamp, py::arg("index"))
      .def("timestamps", &Sequence::timestamps, "Timestamps of the last run, in nanoseconds.")
      .def("eval", &Sequence::eval, py::call_guard<py::gil_scoped_release>(),
           "Submit the recorded commands and wait for them.")
      .def("profile_eval", &Sequence::profileEval, py::call_guard<py::gil_scoped_release>(),
           "Run once; return microseconds in submit, until the marker lands, and in the fence wait.");
}
