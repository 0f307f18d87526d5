// The Python door to ortops::Layer (src/core/rnn/layer.hpp): the layer built from a node config
// the native decoder reads (the config ortops.layer writes, as the custom-op library reads a
// node's), numpy arrays in and out, the GIL released around the run; and the door's one check
// of a layer before it is built (check_layer: the decoder and the core's spec checks).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <string_view>

#include "config/activations.hpp"
#include "arrays.hpp"
#include "vk/devices.hpp"
#include "config/json.hpp"
#include "rnn/layer.hpp"
#include "vk/memory.hpp"
#include "config/nodeconfig.hpp"

namespace py = pybind11;

namespace ortops {

using door::optionalTensor;
using door::tensor;

namespace {

// The op of a config this door wrote (valid JSON), for its messages ("ortops" if it names none).
std::string
doorOp(const std::string& text)
{
    try {
        json::Value root = json::parse(text, json::ParseOptions{});
        const json::Value* op = root.find("op");
        if (op && op->type == json::Type::String && findCell(op->string)) {
            return op->string;
        }
    } catch (const json::Error&) {
    }
    return "ortops";
}

// A config this door wrote (node ""), decoded by the one decoder; a refusal worded as the
// door's other errors, "<op>: <argument> ...": the argument is the keyword of the same name
// ("attrs.clip" -> "clip"), the decoder's prefix and the empty node name are dropped.
NodeConfig
decodeDoorConfig(const std::string& text)
{
    try {
        return decodeNodeConfig(text);
    } catch (const ConfigError& e) {
        std::string what = e.what();
        for (std::string_view p : { "ortops node config: ", "node '': ", "attrs." }) {
            if (what.compare(0, p.size(), p) == 0) {
                what.erase(0, p.size());
            }
        }
        std::string op = doorOp(text);
        throw InputError(what.compare(0, op.size() + 2, op + ": ") == 0 ? what : op + ": " + what);
    }
}

// Weights described by their shapes only (check_layer reads no data), of the config's type.
HostTensor
shaped(const NodeConfig& c, const py::handle& shape)
{
    HostTensor t;
    t.type = c.dtype;
    t.shape = shape.cast<std::vector<int64_t>>();
    return t;
}

// check_layer: what the door needs of a checked layer (the rest is its own config's).
py::dict
checkLayerShapes(const std::string& config, const py::dict& shapes, std::optional<std::string> device,
                 std::optional<uint64_t> storageRange)
{
    NodeConfig c = decodeDoorConfig(config);
    auto optional = [&](const char* name) -> std::optional<HostTensor> {
        return shapes.contains(name) ? std::optional<HostTensor>(shaped(c, shapes[name])) : std::nullopt;
    };
    Weights w{ shaped(c, shapes["W"]), shaped(c, shapes["R"]), optional("B"), optional("P") };
    std::optional<BindingLimit> limit;
    if (storageRange) {
        limit = BindingLimit{ device.value_or("the device"), *storageRange };
    }
    checkLayer(c, w, limit);
    const NodeAttrs& a = c.attrs;
    py::list directions;
    for (const auto& slots : resolveActivations(*c.cell, a.directions(), a.activations, a.activationAlpha,
                                                a.activationBeta)) {
        py::list d;
        for (const Activation& act : slots) {
            d.append(py::make_tuple(std::string(ACTIVATIONS[act.code].name), static_cast<double>(act.alpha),
                                    static_cast<double>(act.beta)));
        }
        directions.append(py::tuple(d));
    }
    py::dict out;
    out["hidden_size"] = a.hiddenSize.value_or(w.R.shape[2]);
    out["input_size"] = w.W.shape[2];
    out["num_directions"] = a.directions();
    out["direction"] = std::string(directionName(a.direction));
    out["activations"] = py::tuple(directions);
    return out;
}

// The outputs of a run: the caller's `out` arrays where given (ortops.validation checked their
// shape, dtype and layout), else fresh ones; None for an output not computed.
py::list
outputArrays(const OutputShapes& shapes, const py::dtype& dt, const py::object& out, OutputPointers& ptrs)
{
    py::list given = out.is_none() ? py::list() : out.cast<py::list>();
    py::list result;
    for (size_t i = 0; i < 3; i++) {
        ptrs[i] = nullptr;
        if (!shapes[i]) {
            result.append(py::none());
            continue;
        }
        py::array a;
        if (i < given.size() && !given[i].is_none()) {
            a = given[i].cast<py::array>();
            size_t want = HostTensor{ nullptr, {}, *shapes[i] }.elements() * static_cast<size_t>(dt.itemsize());
            if (!(a.flags() & py::array::c_style) || !a.writeable() || static_cast<size_t>(a.nbytes()) != want) {
                throw std::invalid_argument("ortops: an out array must be C-contiguous, writeable and of the "
                                            "output's size");
            }
        } else {
            a = py::array(dt, *shapes[i]);
        }
        ptrs[i] = a.mutable_data();
        result.append(a);
    }
    return result;
}

std::optional<ScratchRegion>
region(const py::object& o)
{
    if (o.is_none()) {
        return std::nullopt;
    }
    auto t = o.cast<py::tuple>();
    return ScratchRegion{ t[0].cast<std::shared_ptr<Buffer>>(), t[1].cast<uint64_t>() };
}

py::tuple
runLayer(Layer& self, const py::array& X, const py::object& lens, const py::object& h0, const py::object& c0,
         const py::object& steps, const py::object& outputs, const py::object& xwScratch,
         const py::object& stateScratch, const py::object& out)
{
    RunInputs in{ tensor(X), optionalTensor(lens), optionalTensor(h0), optionalTensor(c0) };
    if (!steps.is_none()) {
        in.steps = steps.cast<uint32_t>();
    }
    if (!outputs.is_none()) {
        auto v = outputs.cast<std::vector<bool>>();
        std::array<bool, 3> mask{ false, false, false };
        for (size_t i = 0; i < v.size() && i < 3; i++) {
            mask[i] = v[i];
        }
        in.outputs = mask;
    }
    in.xwScratch = region(xwScratch);
    in.stateScratch = region(stateScratch);
    OutputShapes shapes = self.outputShapes(in);
    OutputPointers ptrs{ nullptr, nullptr, nullptr };
    py::list result = outputArrays(shapes, X.dtype(), out, ptrs);
    {
        py::gil_scoped_release release;
        self.run(in, shapes, ptrs);
    }
    return py::tuple(result);
}

py::list
planPools(const Layer& self)
{
    py::list out;
    for (const auto& p : self.planPools()) {
        py::dict d;
        d["seq"] = p.seq;
        d["batch"] = p.batch;
        d["steps"] = p.steps;
        d["has_lens"] = p.hasLens;
        d["has_h0"] = p.hasH0;
        d["has_c0"] = p.hasC0;
        d["outputs"] = py::make_tuple(p.outputs[0], p.outputs[1], p.outputs[2]);
        d["count"] = p.count;
        d["free"] = p.freeProjections;
        d["free_steps"] = p.freeSteps;
        out.append(d);
    }
    return out;
}

py::object
lastProfile(const Layer& self)
{
    auto p = self.lastProfile();
    if (!p) {
        return py::none();
    }
    py::dict d;
    d["total_ms"] = p->totalMs;
    d["projection_ms"] = p->projectionMs;
    d["steps_ms"] = p->stepsMs;
    d["outputs_ms"] = p->outputsMs;
    return std::move(d);
}

py::dict
counters()
{
    CoreCounters c = coreCounters();
    py::dict d;
    d["layers_created"] = c.layersCreated;
    d["layers_alive"] = c.layersAlive;
    d["plans_recorded"] = c.plansRecorded;
    d["runs"] = c.runs;
    d["coalesced_runs"] = c.coalescedRuns;
    d["coalesced_requests"] = c.coalescedRequests;
    d["write_ns"] = c.writeNs;
    d["wait_ns"] = c.waitNs;
    d["read_ns"] = c.readNs;
    d["slot_runs"] = c.slotRuns;
    d["slot_ns"] = c.slotNs;
    return d;
}

void
bindLayerClass(py::module_& m)
{
    py::class_<Layer>(m, "Layer")
      .def(py::init([](const std::string& config, py::array W, py::array R, py::object B, py::object P,
                       std::optional<LayerSettings> settings) {
               Weights w{ tensor(W), tensor(R), optionalTensor(B), optionalTensor(P) };
               NodeConfig c = decodeDoorConfig(config);
               py::gil_scoped_release release;
               return std::make_unique<Layer>(c, w, settings.value_or(LayerSettings{}));
           }),
           py::arg("config"), py::arg("W"), py::arg("R"), py::arg("B") = py::none(), py::arg("P") = py::none(),
           py::arg("settings") = py::none(),
           "A layer of the native core from a node config (its JSON text, read by the native decoder) and "
           "its weights.")
      .def_property_readonly("device_name", &Layer::deviceName)
      .def_property_readonly("device_uuid", &Layer::deviceUuid)
      .def_property("settings", &Layer::settings, &Layer::setSettings,
                    "The layer's LayerSettings (a copy); setting them drops idle plans.")
      .def_property_readonly("last_profile", &lastProfile)
      .def("plan_pools", &planPools,
           "The plans held per shape (least recently used first): key fields, count, free plans' projection "
           "and step kernels.")
      .def("weight_names", &Layer::weightNames)
      .def("weight_bytes", &Layer::weightBytes, "[(name, bytes on the device)] of the weights (W, R, B, P, RB).")
      .def("scratch_sizes", &Layer::scratchSizes, py::arg("seq"), py::arg("batch"))
      .def("__call__", &runLayer, py::arg("X"), py::arg("sequence_lens") = py::none(),
           py::arg("initial_h") = py::none(), py::arg("initial_c") = py::none(), py::kw_only(),
           py::arg("steps") = py::none(), py::arg("outputs") = py::none(), py::arg("xw_scratch") = py::none(),
           py::arg("state_scratch") = py::none(), py::arg("out") = py::none(),
           "Run: (Y, Y_h, Y_c), None for outputs not computed (and Y_c for GRU and RNN).");
}

} // namespace

void
bindLayer(py::module_& m)
{
    m.def("shared_context", &sharedContext, py::arg("index"), py::arg("validation") = false,
          py::arg("max_queues") = 1,
          "The process's context on a device, shared with the custom-op library (devices.hpp).");
    m.def("core_counters", &counters,
          "What the native core did in this process (both doors): layers created and alive, plans "
          "recorded, runs.");
    m.def("check_layer", &checkLayerShapes, py::arg("config"), py::arg("shapes"), py::arg("device") = py::none(),
          py::arg("storage_range") = py::none(),
          "The core's one check of a layer (the config by the native decoder, the weights' shapes by the "
          "layer's spec; with storage_range, each weight's binding): hidden_size, input_size, "
          "num_directions, direction and the resolved activations, or InputError / "
          "UnsupportedLayerError saying what is wrong.");
    bindLayerClass(m);
}

} // namespace ortops
