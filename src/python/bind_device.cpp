// Devices for Python: their descriptions (the dict ortops.device.Device takes), the core's
// decisions about them (the choice of a device, the device check, mode "fast"'s eligibility:
// ortops.device and ortops.fast only hand them a Device and translate), the Vulkan instance's
// extensions and validation messages, and the objects of a context (context.hpp, program.hpp,
// sequence.hpp) that the tools and tests record commands with.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "vk/devices.hpp"
#include "vk/instance.hpp"
#include "rnn/controls.hpp"
#include "rnn/device_check.hpp"
#include "rnn/kernel_choice.hpp"
#include "vk/memory.hpp"
#include "vk/program.hpp"
#include "vk/sequence.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

// One cooperative-matrix combination as the dict ortops.fast.CoopMatShape takes.
py::dict
shapeDict(const CooperativeMatrixShape& c)
{
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
    return e;
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
        coopmat.append(shapeDict(c));
    }
    d["cooperative_matrix"] = coopmat;
    d["compute_units"] = s.computeUnits;
    d["memory_model_device_scope"] = s.memoryModelDeviceScope;
    d["subgroup_size_range"] = s.subgroupSizeRange
                                 ? py::make_tuple(s.subgroupSizeRange->first, s.subgroupSizeRange->second)
                                 : py::tuple();
    return d;
}

// A DeviceDescription of what the core's decisions read, from an ortops.device.Device (or any
// object with its fields: the tests' made-up devices), by attribute name.
DeviceDescription
describedDevice(py::handle d)
{
    DeviceDescription s;
    s.index = d.attr("index").cast<uint32_t>();
    s.name = d.attr("name").cast<std::string>();
    s.type = d.attr("type").cast<std::string>();
    s.vendorId = d.attr("vendor_id").cast<uint32_t>();
    s.deviceId = d.attr("device_id").cast<uint32_t>();
    s.apiVersion = d.attr("api_version").cast<std::string>();
    s.driver = d.attr("driver").cast<std::string>();
    s.driverInfo = d.attr("driver_info").cast<std::string>();
    s.portability = d.attr("portability").cast<bool>();
    s.uuid = d.attr("uuid").cast<std::string>();
    s.pciBusId = d.attr("pci_bus_id").cast<std::optional<std::string>>();
    s.maxSharedMemory = d.attr("max_shared_memory").cast<uint32_t>();
    s.nanPreserveFloat16 = d.attr("nan_preserve_float16").cast<bool>();
    s.nanPreserveFloat32 = d.attr("nan_preserve_float32").cast<bool>();
    py::tuple range = py::tuple(d.attr("subgroup_size_range"));
    if (range.size() == 2) {
        s.subgroupSizeRange = std::make_pair(range[0].cast<uint32_t>(), range[1].cast<uint32_t>());
    }
    for (py::handle c : d.attr("cooperative_matrix")) {
        s.cooperativeMatrix.push_back(cooperativeMatrixShape(
          c.attr("m").cast<uint32_t>(), c.attr("n").cast<uint32_t>(), c.attr("k").cast<uint32_t>(),
          c.attr("a").cast<std::string>(), c.attr("b").cast<std::string>(), c.attr("c").cast<std::string>(),
          c.attr("result").cast<std::string>(), c.attr("saturating").cast<bool>(), c.attr("scope").cast<std::string>()));
    }
    return s;
}

std::optional<Mode>
modeOf(const std::optional<std::string>& name)
{
    if (!name) {
        return std::nullopt;
    }
    if (std::optional<Mode> m = parseMode(*name)) {
        return m;
    }
    std::string names;
    for (Mode m : MODES) {
        names += (names.empty() ? "" : ", ") + std::string(modeName(m));
    }
    throw std::invalid_argument("ortops: mode must be one of " + names + ", got '" + *name + "'");
}

// The decisions about devices the core makes once for every door.
void
bindDecisions(py::module_& m)
{
    m.def(
      "choose_device",
      [](const py::sequence& found, const std::optional<std::string>& spec) {
          std::vector<DeviceDescription> described;
          for (py::handle d : found) {
              described.push_back(describedDevice(d));
          }
          return chooseAmong(described, DeviceRequest::fromProcess(spec));
      },
      py::arg("devices"), py::arg("spec") = py::none(),
      "The position in `devices` of the device `spec` names, else ORTOPS_DEVICE, else the one "
      "CUDA_VISIBLE_DEVICES assigns, else the preferred (devices.hpp, chooseAmong); ValueError "
      "naming what was asked and listing the devices, NoDeviceError when there are none.");
    m.def(
      "device_refusal",
      [](py::handle device, const std::optional<std::string>& mode) {
          return deviceRefusal(describedDevice(device), modeOf(mode));
      },
      py::arg("device"), py::arg("mode") = py::none(),
      "Why the device cannot run ortops's kernels (in `mode`), or None (device_check.hpp).");
    m.def(
      "require_device",
      [](py::handle device, const std::optional<std::string>& mode) {
          requireDevice(describedDevice(device), modeOf(mode));
      },
      py::arg("device"), py::arg("mode") = py::none(),
      "Raise ortops.device.UnsupportedDeviceError where device_refusal says why.");
    m.def(
      "coopmat_reason",
      [](py::handle device, bool contextEnabled, const std::string& contextOff) {
          return coopmatReason(describedDevice(device), contextEnabled, contextOff);
      },
      py::arg("device"), py::arg("context_enabled"), py::arg("context_off") = "",
      "Why the device (its context with or without VK_KHR_cooperative_matrix) cannot run mode "
      "fast's matrix kernels, or None (kernel_choice.hpp).");
    m.def(
      "use_coopmat",
      [](const std::string& mode, const std::string& dtype, py::handle device, bool contextEnabled, bool requested) {
          return useCoopmat(*modeOf(mode), dtype == elementTypeName(ElementType::Float16), describedDevice(device),
                            contextEnabled, requested);
      },
      py::arg("mode"), py::arg("dtype"), py::arg("device"), py::arg("context_enabled"), py::arg("requested"),
      "Whether a layer of this mode and dtype ('float32', 'float16') projects on matrix hardware.");
    m.def(
      "coopmat_required",
      [] { return shapeDict(coopmatRequired()); },
      "The combination mode fast's matrix kernels are written for.");
    m.def("coopmat_requested", &coopmatRequested, "Whether ORTOPS_COOPMAT leaves mode fast's matrix kernels on.");
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
    py::register_exception<NoDeviceError>(m, "NoDeviceError", PyExc_RuntimeError);
    // The device check's refusal as the Python door's own exception class (a RuntimeError),
    // looked up when raised: ortops.device is importable without this module.
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) {
                std::rethrow_exception(p);
            }
        } catch (const UnsupportedDeviceError& e) {
            py::object cls = py::module_::import("ortops.device").attr("UnsupportedDeviceError");
            PyErr_SetString(cls.ptr(), e.what());
        }
    });
    bindDecisions(m);
    bindContext(m);
    bindSequence(m);
}

} // namespace ortops
