// Devices for Python: their descriptions (the dict ortops.device.Device takes), the Vulkan
// instance's extensions and validation messages, and the objects of a context (context.hpp,
// program.hpp, sequence.hpp) that the tools and tests record commands with.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "vk/context.hpp"
#include "vk/memory.hpp"
#include "vk/program.hpp"
#include "vk/sequence.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

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
    d["compute_units"] = s.computeUnits;
    d["memory_model_device_scope"] = s.memoryModelDeviceScope;
    d["subgroup_size_range"] = s.subgroupSizeRange
                                 ? py::make_tuple(s.subgroupSizeRange->first, s.subgroupSizeRange->second)
                                 : py::tuple();
    return d;
}

std::vector<py::dict>
deviceDicts()
{
    std::vector<py::dict> out;
    for (const auto& d : enumerateDevices()) {
        out.push_back(deviceDict(d));
    }
    return out;
}

void
bindContext(py::module_& m)
{
    py::class_<Context, std::shared_ptr<Context>>(m, "Context")
      .def(py::init<uint32_t, bool, uint32_t>(), py::arg("index"), py::arg("validation") = false,
           py::arg("max_queues") = 1)
      .def_property_readonly("lost", [](const Context& self) { return self.lost.load(); })
      .def_readonly("cooperative_matrix", &Context::cooperativeMatrix,
                    "Whether VK_KHR_cooperative_matrix was enabled on this device.")
      .def_readonly("cooperative_matrix_off", &Context::cooperativeMatrixOff,
                    "Why VK_KHR_cooperative_matrix was not enabled although offered (or '').")
      .def("buffer",
           [](std::shared_ptr<Context> self, uint64_t nbytes, const std::string& kind) {
               return std::make_shared<Buffer>(std::move(self), nbytes, kind);
           },
           py::arg("nbytes"), py::arg("kind") = "device",
           "A storage buffer: \"device\" (with a host-visible staging twin) or \"storage\".")
      .def("program",
           [](std::shared_ptr<Context> self, py::bytes spirv, const std::vector<std::shared_ptr<Buffer>>& buffers,
              const std::vector<uint32_t>& specialization, uint32_t pushWords) {
               return std::make_shared<Program>(std::move(self), std::string(spirv), buffers, specialization,
                                                pushWords);
           },
           py::arg("spirv"), py::arg("buffers"), py::arg("specialization") = std::vector<uint32_t>{},
           py::arg("push_words") = 0)
      .def("host_buffer",
           [](std::shared_ptr<Context> self, uint64_t nbytes) {
               return std::make_shared<HostBuffer>(std::move(self), nbytes, false);
           },
           py::arg("nbytes"), "Host-cached memory for reading results back (a transfer target, not bindable).")
      .def("sequence",
           [](std::shared_ptr<Context> self, uint32_t timestamps) {
               return std::make_shared<Sequence>(std::move(self), timestamps);
           },
           py::arg("timestamps") = 0);
}

void
bindSequence(py::module_& m)
{
    py::class_<Program, std::shared_ptr<Program>>(m, "Program");
    py::class_<Sequence, std::shared_ptr<Sequence>>(m, "Sequence")
      .def("upload", &Sequence::upload, py::arg("buffers"), "Copy each buffer's staging memory to its device memory.")
      .def("download", &Sequence::download, py::arg("buffers"),
           "Copy each buffer's device memory to its staging memory.")
      .def("dispatch", &Sequence::dispatch, py::arg("program"), py::arg("x"), py::arg("y") = 1, py::arg("z") = 1,
           py::arg("push") = std::vector<uint32_t>{})
      .def("barrier", &Sequence::barrier, py::arg("src"), py::arg("dst"))
      .def("copy", &Sequence::copy, py::arg("src"), py::arg("dst"), py::arg("src_offset") = 0,
           py::arg("dst_offset") = 0, py::arg("size"))
      .def("finish", &Sequence::finish, "Record the end-of-run marker eval() polls for (lower completion latency).")
      .def("timestamp", &Sequence::timestamp, py::arg("index"))
      .def("timestamps", &Sequence::timestamps, "Timestamps of the last run, in nanoseconds.")
      .def("eval", &Sequence::eval, py::call_guard<py::gil_scoped_release>(),
           "Submit the recorded commands and wait for them.")
      .def("profile_eval", &Sequence::profileEval, py::call_guard<py::gil_scoped_release>(),
           "Run once; return microseconds in submit, until the marker lands, and in the fence wait.");
}

} // namespace

void
bindDevice(py::module_& m)
{
    m.def("enumerate_devices", &deviceDicts, "Describe every Vulkan device with a compute queue.");
    m.def("enabled_instance_extensions", &enabledInstanceExtensions,
          "The instance extensions the last Vulkan instance was created with.");
    m.def("available_instance_extensions", &availableInstanceExtensions,
          "The instance extensions the Vulkan loader offers.");
    m.def("take_messages", &takeMessages, "Validation messages since the last call (and clear them).");
    bindContext(m);
    bindSequence(m);
}

} // namespace ortops
