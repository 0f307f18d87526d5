// The Python door to ortops::Layer (src/core/layer.hpp) and the shared contexts: numpy arrays
// in, numpy arrays out, the GIL released around the run.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "devices.hpp"
#include "layer.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

template<typename T>
std::optional<T>
optionalItem(const py::dict& d, const char* key)
{
    if (!d.contains(key) || d[key].is_none()) {
        return std::nullopt;
    }
    return d[key].cast<T>();
}

// A NodeConfig from the dict form ortops.ort.nodeconfig writes (already checked there).
NodeConfig
configFromDict(const py::dict& d)
{
    NodeConfig c;
    std::string op = d["op"].cast<std::string>();
    c.cell = findCell(op);
    if (!c.cell) {
        throw std::invalid_argument("ortops: op must be one of LSTM, GRU, RNN, got '" + op + "'");
    }
    c.node = d.contains("node") ? d["node"].cast<std::string>() : std::string();
    c.dtype = d["dtype"].cast<std::string>();
    c.mode = d.contains("mode") && !d["mode"].is_none() ? d["mode"].cast<std::string>() : "deterministic";
    c.device = optionalItem<std::string>(d, "device");
    c.absent = d.contains("absent") ? d["absent"].cast<std::vector<std::string>>() : std::vector<std::string>{};
    c.outputs = d["outputs"].cast<std::vector<std::string>>();
    py::dict a = d["attrs"].cast<py::dict>();
    c.attrs.hiddenSize = optionalItem<int64_t>(a, "hidden_size");
    c.attrs.direction = optionalItem<std::string>(a, "direction").value_or("forward");
    c.attrs.layout = optionalItem<int64_t>(a, "layout").value_or(0);
    c.attrs.activations = optionalItem<std::vector<std::string>>(a, "activations");
    c.attrs.activationAlpha = optionalItem<std::vector<double>>(a, "activation_alpha");
    c.attrs.activationBeta = optionalItem<std::vector<double>>(a, "activation_beta");
    c.attrs.clip = optionalItem<double>(a, "clip");
    c.attrs.inputForget = optionalItem<int64_t>(a, "input_forget").value_or(0);
    c.attrs.linearBeforeReset = optionalItem<int64_t>(a, "linear_before_reset").value_or(0);
    return c;
}

ElementType
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

HostTensor
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

std::optional<HostTensor>
optionalTensor(const py::object& o)
{
    if (o.is_none()) {
        return std::nullopt;
    }
    return tensor(o.cast<py::array>());
}

} // namespace

void
bindLayer(py::module_& m)
{
    m.def("shared_context", &sharedContext, py::arg("index"), py::arg("validation") = false,
          py::arg("max_queues") = 1,
          "The process's context on a device, shared with the custom-op library (devices.hpp).");

    py::class_<Layer>(m, "Layer")
      .def(py::init([](const py::dict& config, py::array W, py::array R, py::object B, py::object P) {
               Weights w{ tensor(W), tensor(R), optionalTensor(B), optionalTensor(P) };
               NodeConfig c = configFromDict(config);
               py::gil_scoped_release release;
               return std::make_unique<Layer>(c, w);
           }),
           py::arg("config"), py::arg("W"), py::arg("R"), py::arg("B") = py::none(), py::arg("P") = py::none(),
           "A layer of the native core from a node config (dict form) and its weights.")
      .def_property_readonly("device_name", &Layer::deviceName)
      .def_property_readonly("device_uuid", &Layer::deviceUuid)
      .def(
        "__call__",
        [](Layer& self, py::array X, py::object lens, py::object h0, py::object c0) {
            RunInputs in{ tensor(X), optionalTensor(lens), optionalTensor(h0), optionalTensor(c0) };
            OutputShapes shapes = self.outputShapes(in);
            py::dtype dt = X.dtype();
            py::list result;
            OutputPointers ptrs{ nullptr, nullptr, nullptr };
            std::vector<py::array> arrays;
            for (int i = 0; i < 3; i++) {
                if (shapes[i]) {
                    py::array a(dt, *shapes[i]);
                    ptrs[i] = a.mutable_data();
                    arrays.push_back(a);
                    result.append(a);
                } else {
                    result.append(py::none());
                }
            }
            {
                py::gil_scoped_release release;
                self.run(in, ptrs);
            }
            return py::tuple(result);
        },
        py::arg("X"), py::arg("sequence_lens") = py::none(), py::arg("initial_h") = py::none(),
        py::arg("initial_c") = py::none(),
        "Run: (Y, Y_h, Y_c), None for outputs not computed (and Y_c for GRU and RNN).");
}

} // namespace ortops
