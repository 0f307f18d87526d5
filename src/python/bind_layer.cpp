// The Python door to ortops::Layer (src/core/layer.hpp) and the shared contexts: numpy arrays
// in, numpy arrays out, the GIL released around the run.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "activations.hpp"
#include "cells.hpp"
#include "coalesce.hpp"
#include "devices.hpp"
#include "specialization.hpp"
#include "layer.hpp"
#include "memory.hpp"
#include "testing.hpp"

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

// A name parsed once into its typed decision (types.hpp); ValueError naming key and choices.
template<typename T>
T
parsedName(std::optional<T> (*parse)(std::string_view), const char* key, const std::string& name,
           const char* choices)
{
    std::optional<T> v = parse(name);
    if (!v) {
        throw std::invalid_argument(std::string("ortops: ") + key + " must be " + choices + ", got '" + name + "'");
    }
    return *v;
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
    c.dtype = parsedName(parseElementType, "dtype", d["dtype"].cast<std::string>(), "'float32' or 'float16'");
    if (c.dtype == ElementType::Int32) {
        throw std::invalid_argument("ortops: dtype must be 'float32' or 'float16', got 'int32'");
    }
    if (d.contains("mode") && !d["mode"].is_none()) {
        c.mode = parsedName(parseMode, "mode", d["mode"].cast<std::string>(), "'deterministic', 'exact' or 'fast'");
    }
    c.device = optionalItem<std::string>(d, "device");
    c.absent = d.contains("absent") ? d["absent"].cast<std::vector<std::string>>() : std::vector<std::string>{};
    c.outputs = d["outputs"].cast<std::vector<std::string>>();
    py::dict a = d["attrs"].cast<py::dict>();
    c.attrs.hiddenSize = optionalItem<int64_t>(a, "hidden_size");
    c.attrs.direction = parsedName(parseDirection, "attrs.direction",
                                   optionalItem<std::string>(a, "direction").value_or("forward"),
                                   "'forward', 'reverse' or 'bidirectional'");
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

LayerSettings
settingsFromDict(const py::dict& d, LayerSettings s)
{
    auto get = [&](const char* key, auto& field) {
        if (d.contains(key) && !d[key].is_none()) {
            field = d[key].cast<std::remove_reference_t<decltype(field)>>();
        }
    };
    get("batched_from", s.variants.batchedFrom);
    get("batched_upt_float32", s.variants.batchedUptFloat32);
    get("batched_upt_float16", s.variants.batchedUptFloat16);
    get("batched_by_float32", s.variants.batchedByFloat32);
    get("batched_by_float16", s.variants.batchedByFloat16);
    get("batched_prefetch", s.variants.batchedPrefetch);
    get("batched_ksplit", s.variants.batchedKsplit);
    get("batched_rows_float32", s.variants.batchedRowsFloat32);
    get("batched_rows_float16", s.variants.batchedRowsFloat16);
    get("coopmat_steps_from", s.variants.coopmatStepsFrom);
    get("coopmat_blocks", s.variants.coopmatBlocks);
    get("large_projection", s.variants.largeProjection);
    get("max_groups", s.variants.maxGroups);
    get("plan_cache", s.planCache);
    get("max_concurrent", s.maxConcurrent);
    get("timestamps", s.timestamps);
    get("coopmat", s.coopmat);
    get("coalesce_rows", s.coalesceRows);
    get("coalesce_in_flight", s.coalesceInFlight);
    if (d.contains("workgroup_count")) {
        s.workgroupCount = d["workgroup_count"].is_none()
                             ? std::nullopt
                             : std::optional<std::array<uint32_t, 3>>(d["workgroup_count"].cast<std::array<uint32_t, 3>>());
    }
    if (d.contains("storage_range")) {
        s.storageRange = d["storage_range"].is_none() ? std::nullopt
                                                       : std::optional<uint64_t>(d["storage_range"].cast<uint64_t>());
    }
    return s;
}

py::dict
settingsDict(const LayerSettings& s)
{
    py::dict d;
    d["batched_from"] = s.variants.batchedFrom;
    d["batched_upt_float32"] = s.variants.batchedUptFloat32;
    d["batched_upt_float16"] = s.variants.batchedUptFloat16;
    d["batched_by_float32"] = s.variants.batchedByFloat32;
    d["batched_by_float16"] = s.variants.batchedByFloat16;
    d["batched_prefetch"] = s.variants.batchedPrefetch;
    d["batched_ksplit"] = s.variants.batchedKsplit;
    d["batched_rows_float32"] = s.variants.batchedRowsFloat32;
    d["batched_rows_float16"] = s.variants.batchedRowsFloat16;
    d["coopmat_steps_from"] = s.variants.coopmatStepsFrom;
    d["coopmat_blocks"] = s.variants.coopmatBlocks;
    d["large_projection"] = s.variants.largeProjection;
    d["max_groups"] = s.variants.maxGroups;
    d["plan_cache"] = s.planCache;
    d["max_concurrent"] = s.maxConcurrent;
    d["timestamps"] = s.timestamps;
    d["coopmat"] = s.coopmat;
    d["coalesce_rows"] = s.coalesceRows;
    d["coalesce_in_flight"] = s.coalesceInFlight;
    d["storage_range"] = s.storageRange ? py::object(py::int_(*s.storageRange)) : py::object(py::none());
    d["workgroup_count"] = s.workgroupCount ? py::object(py::cast(*s.workgroupCount)) : py::object(py::none());
    return d;
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

} // namespace

void
bindLayer(py::module_& m)
{
    m.def("shared_context", &sharedContext, py::arg("index"), py::arg("validation") = false,
          py::arg("max_queues") = 1,
          "The process's context on a device, shared with the custom-op library (devices.hpp).");

    m.def(
      "core_counters",
      []() {
          CoreCounters c = coreCounters();
          py::dict d;
          d["layers_created"] = c.layersCreated;
          d["layers_alive"] = c.layersAlive;
          d["plans_recorded"] = c.plansRecorded;
          d["runs"] = c.runs;
          d["coalesced_runs"] = c.coalescedRuns;
          d["coalesced_requests"] = c.coalescedRequests;
          return d;
      },
      "What the native core did in this process (both doors): layers created and alive, plans "
      "recorded, runs.");

    m.def(
      "tables",
      []() {
          py::list cells;
          for (const Cell& c : CELLS) {
              py::dict d;
              d["name"] = std::string(c.name);
              d["code"] = c.code;
              py::list gates, inputs, outputs, slots, defaults;
              for (uint32_t i = 0; i < c.gates; i++) {
                  gates.append(std::string(c.gateOrder[i]));
              }
              for (uint32_t i = 0; i < c.inputCount; i++) {
                  inputs.append(std::string(c.inputs[i]));
              }
              for (uint32_t i = 0; i < c.outputCount; i++) {
                  outputs.append(std::string(c.outputs[i]));
              }
              for (uint32_t i = 0; i < c.slotCount; i++) {
                  slots.append(std::string(c.slots[i]));
                  defaults.append(std::string(c.defaultActivations[i]));
              }
              d["gate_order"] = py::tuple(gates);
              d["inputs"] = py::tuple(inputs);
              d["outputs"] = py::tuple(outputs);
              d["slots"] = py::tuple(slots);
              d["default_activations"] = py::tuple(defaults);
              d["input_forget"] = c.inputForget;
              d["linear_before_reset"] = c.linearBeforeReset;
              d["extra_state_planes"] = py::make_tuple(c.extraStatePlanes(false), c.extraStatePlanes(true));
              cells.append(d);
          }
          py::list activations;
          for (const auto& a : ACTIVATIONS) {
              activations.append(py::make_tuple(std::string(a.name), a.takesAlpha, a.takesBeta, a.defaultAlpha,
                                                a.defaultBeta));
          }
          py::dict layouts;
          for (const auto& l : shaderLayouts()) {
              py::dict constants, local;
              for (const auto& c : l.constants) {
                  constants[py::str(std::string(c.name))] = py::make_tuple(c.id, c.defaultValue);
              }
              for (const auto& [dim, name] : l.localSize) {
                  local[py::str(std::string(dim))] = std::string(name);
              }
              layouts[py::str(std::string(l.shader))] = py::make_tuple(constants, local);
          }
          py::dict out;
          out["cells"] = cells;
          out["activations"] = activations;
          out["specialization"] = layouts;
          return out;
      },
      "The native core's tables (cells.hpp, activations.hpp, specialization.cpp), for the tests "
      "that hold ortops.cells, ortops.activations and ortops.specialization to them.");
    m.def(
      "batched_r",
      [](py::array R) {
          HostTensor t = tensor(R);
          if (t.shape.size() != 3 || t.shape[2] <= 0 || t.shape[1] % t.shape[2]) {
              throw std::invalid_argument("ortops: R must be [dirs, gates * hidden, hidden]");
          }
          auto dirs = static_cast<uint32_t>(t.shape[0]), hidden = static_cast<uint32_t>(t.shape[2]);
          auto gates = static_cast<uint32_t>(t.shape[1] / t.shape[2]);
          std::vector<uint8_t> rb = batchedR(t.data, dirs, gates, hidden, static_cast<uint32_t>(R.itemsize()));
          py::array out(R.dtype(), std::vector<py::ssize_t>{ dirs, 32 * classesLength(hidden), hidden, gates });
          std::memcpy(out.mutable_data(), rb.data(), rb.size());
          return out;
      },
      py::arg("R"), "R in the batched step kernel's layout (layer.hpp's batchedR).");
    m.def(
      "exact_r",
      [](py::array R) {
          HostTensor t = tensor(R);
          if (t.type != ElementType::Float16 && t.type != ElementType::Float32) {
              throw std::invalid_argument("ortops: exact_r takes float16 or float32");
          }
          std::vector<uint32_t> words = exactR(t.data, t.elements(), t.type == ElementType::Float16);
          std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
          py::array_t<uint32_t> out(shape);
          std::memcpy(out.mutable_data(), words.data(), words.size() * 4);
          return out;
      },
      py::arg("R"), "R as exact mode uploads it (layer.hpp's exactR): the float32 bits, as uint32.");
    // Kernel-variant heuristics (variants.hpp), for ortops.variants and the tools.
    m.def("step_variant",
          [](uint32_t batch, uint32_t gates) {
              StepVariant v = stepVariant(batch, gates);
              return py::make_tuple(v.nb, v.units, v.rpt, v.rows);
          },
          py::arg("batch"), py::arg("gates_in_pass"));
    m.def("batched_variant",
          [](uint32_t hidden, uint32_t batch, bool float16, const py::dict& settings) {
              LayerSettings s = settingsFromDict(settings, LayerSettings{});
              BatchedVariant v = batchedVariant(hidden, batch, float16, s.variants);
              return py::make_tuple(v.upt, v.by, v.prefetch, v.ksplit, v.rows);
          },
          py::arg("hidden"), py::arg("batch"), py::arg("float16"), py::arg("settings"));
    m.def(
      "batched_tiles",
      []() {
          py::list rows;
          for (const auto& r : BATCHED_TILES) {
              const BatchedTile& t = r.tile;
              py::object below = r.belowHidden == ANY_HIDDEN ? py::object(py::none()) : py::int_(r.belowHidden);
              rows.append(py::make_tuple(r.float16 ? "float16" : "float32", r.fromBatch, r.fromHidden, below,
                                         py::make_tuple(t.upt, t.by, t.prefetch, t.ksplit, t.rows)));
          }
          py::dict d;
          py::list from;
          for (const auto& r : BATCHED_FROM) {
              from.append(py::make_tuple(r.fromHidden, r.batch));
          }
          d["batched_from"] = from;
          d["batched_from_table"] = BATCHED_FROM_TABLE;
          py::list cfrom;
          for (const auto& r : COOPMAT_STEPS_FROM) {
              cfrom.append(py::make_tuple(r.fromHidden, r.batch));
          }
          d["coopmat_steps_from"] = cfrom;
          d["coopmat_steps_table"] = COOPMAT_STEPS_TABLE;
          d["coopmat_pair_groups"] = COOPMAT_PAIR_GROUPS;
          d["tiles"] = rows;
          d["shared_bytes"] = TILED_SHARED_BYTES;
          d["max_invocations"] = BATCHED_MAX_INVOCATIONS;
          return d;
      },
      "The batched step kernels' defaults (variants.hpp): the batch they run from and the table "
      "of tiles, rows (element type, from batch, from hidden, below hidden or None, (upt, by, prefetch, "
      "ksplit, rows)).");
    m.def(
      "coopmat_steps_from",
      [](uint32_t hidden, const py::dict& settings) {
          return coopmatStepsFrom(hidden, settingsFromDict(settings, LayerSettings{}).variants);
      },
      py::arg("hidden"), py::arg("settings"));
    m.def(
      "coopmat_blocks",
      [](uint32_t hidden, uint32_t batch, uint32_t dirs, const py::dict& settings) {
          return coopmatBlocks(hidden, batch, dirs, settingsFromDict(settings, LayerSettings{}).variants);
      },
      py::arg("hidden"), py::arg("batch"), py::arg("dirs"), py::arg("settings"));
    m.def("step_kernel",
          [](uint32_t batch, uint32_t hidden, const py::dict& settings) {
              return std::string(
                stepKernelName(stepKernel(batch, hidden, settingsFromDict(settings, LayerSettings{}).variants)));
          },
          py::arg("batch"), py::arg("hidden"), py::arg("settings"));
    m.def("batched_from",
          [](uint32_t hidden, const py::dict& settings) {
              return batchedFromFor(hidden, settingsFromDict(settings, LayerSettings{}).variants);
          },
          py::arg("hidden"), py::arg("settings"));
    m.def("projection_tpt", &projectionTpt, py::arg("outputs"), py::arg("large"));
    m.def("step_passes", &stepPasses, py::arg("gru_two_pass"), py::arg("gates"));
    m.def("grid_groups", &gridGroups, py::arg("n"), py::arg("max_groups"));

#ifdef ORTOPS_TESTING
    // A test build only (the CMake option ORTOPS_TESTING; scripts/setup.sh builds one).
    m.def("inject_fault", &injectFault, py::arg("kind"), py::arg("value") = 0.0,
          "Test hook: make every run fail ('fail') or change its float outputs ('scale', 'add' "
          "by value); '' switches it off.");
#endif

    py::class_<Layer>(m, "Layer")
      .def(py::init([](const py::dict& config, py::array W, py::array R, py::object B, py::object P,
                       py::object settings) {
               Weights w{ tensor(W), tensor(R), optionalTensor(B), optionalTensor(P) };
               NodeConfig c = configFromDict(config);
               LayerSettings s = settings.is_none() ? LayerSettings{}
                                                    : settingsFromDict(settings.cast<py::dict>(), LayerSettings{});
               py::gil_scoped_release release;
               return std::make_unique<Layer>(c, w, s);
           }),
           py::arg("config"), py::arg("W"), py::arg("R"), py::arg("B") = py::none(), py::arg("P") = py::none(),
           py::arg("settings") = py::none(),
           "A layer of the native core from a node config (dict form) and its weights.")
      .def_property_readonly("device_name", &Layer::deviceName)
      .def_property_readonly("device_uuid", &Layer::deviceUuid)
      .def_property(
        "settings", [](const Layer& self) { return settingsDict(self.settings()); },
        [](Layer& self, const py::dict& d) { self.setSettings(settingsFromDict(d, self.settings())); },
        "The layer's tunables (variants, plan cache, storage limit, timestamps); setting drops idle plans.")
      .def_property_readonly("last_profile",
                             [](const Layer& self) -> py::object {
                                 auto p = self.lastProfile();
                                 if (!p) {
                                     return py::none();
                                 }
                                 py::dict d;
                                 d["total_ms"] = p->totalMs;
                                 d["projection_ms"] = p->projectionMs;
                                 d["steps_ms"] = p->stepsMs;
                                 d["outputs_ms"] = p->outputsMs;
                                 return d;
                             })
      .def("plan_pools",
           [](const Layer& self) {
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
           },
           "The plans held per shape (least recently used first): key fields, count, free plans' projection "
           "and step kernels.")
      .def("weight_names", &Layer::weightNames)
      .def("weight_bytes", &Layer::weightBytes, "[(name, bytes on the device)] of the weights (W, R, B, P, RB).")
      .def("scratch_sizes", &Layer::scratchSizes, py::arg("seq"), py::arg("batch"))
      .def(
        "__call__",
        [](Layer& self, py::array X, py::object lens, py::object h0, py::object c0, py::object steps,
           py::object outputs, py::object xwScratch, py::object stateScratch, py::object out) {
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
            py::list given = out.is_none() ? py::list() : out.cast<py::list>();
            py::dtype dt = X.dtype();
            py::list result;
            OutputPointers ptrs{ nullptr, nullptr, nullptr };
            for (int i = 0; i < 3; i++) {
                if (!shapes[i]) {
                    result.append(py::none());
                    continue;
                }
                py::array a;
                if (static_cast<size_t>(i) < given.size() && !given[i].is_none()) {
                    a = given[i].cast<py::array>();   // checked by the Python door (shape, dtype, layout)
                    if (!(a.flags() & py::array::c_style) || !a.writeable() ||
                        static_cast<size_t>(a.nbytes()) != static_cast<size_t>(HostTensor{ nullptr, {}, *shapes[i] }.elements()) * dt.itemsize()) {
                        throw std::invalid_argument("ortops: an out array must be C-contiguous, writeable and of the output's size");
                    }
                } else {
                    a = py::array(dt, *shapes[i]);
                }
                ptrs[i] = a.mutable_data();
                result.append(a);
            }
            {
                py::gil_scoped_release release;
                self.run(in, shapes, ptrs);
            }
            return py::tuple(result);
        },
        py::arg("X"), py::arg("sequence_lens") = py::none(), py::arg("initial_h") = py::none(),
        py::arg("initial_c") = py::none(), py::kw_only(), py::arg("steps") = py::none(),
        py::arg("outputs") = py::none(), py::arg("xw_scratch") = py::none(),
        py::arg("state_scratch") = py::none(), py::arg("out") = py::none(),
        "Run: (Y, Y_h, Y_c), None for outputs not computed (and Y_c for GRU and RNN).")
      .def(
        "run_coalesced",
        [](Layer& self, const py::list& requests, uint32_t padTo) {
            // Each request a tuple (X, sequence_lens, initial_h, initial_c), None where absent.
            std::vector<RunInputs> ins;
            for (const auto& item : requests) {
                auto t = item.cast<py::tuple>();
                ins.push_back(RunInputs{ tensor(t[0].cast<py::array>()), optionalTensor(t[1]), optionalTensor(t[2]),
                                         optionalTensor(t[3]) });
            }
            py::list result;
            std::vector<OutputPointers> ptrs;
            for (const RunInputs& in : ins) {
                OutputShapes shapes = self.outputShapes(in);
                py::list outs;
                OutputPointers p{ nullptr, nullptr, nullptr };
                py::dtype dt = self.elementType() == ElementType::Float16 ? py::dtype("float16") : py::dtype::of<float>();
                for (int i = 0; i < 3; i++) {
                    if (!shapes[i]) {
                        outs.append(py::none());
                        continue;
                    }
                    py::array a(dt, *shapes[i]);
                    p[i] = a.mutable_data();
                    outs.append(a);
                }
                ptrs.push_back(p);
                result.append(py::tuple(outs));
            }
            {
                py::gil_scoped_release release;
                self.runCoalesced(ins, ptrs, padTo);
            }
            return result;
        },
        py::arg("requests"), py::arg("pad_to") = 0,
        "Test hook: run requests [(X, sequence_lens, initial_h, initial_c), ...] of one key as one "
        "batched run of at least pad_to rows (zero rows past theirs), as concurrent runs are "
        "coalesced; one (Y, Y_h, Y_c) per request.");
    m.def("coalesced_rows", &coalescedRows, py::arg("rows"), py::arg("max_rows"),
          "The batch a coalesced run of `rows` request rows runs at (src/core/coalesce.hpp).");
}

} // namespace ortops
