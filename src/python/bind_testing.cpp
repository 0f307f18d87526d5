// What only the tests use, bound only in the testing build (ORTOPS_TESTING, which
// scripts/setup.sh's build defines and the wheel's does not): fault injection, coalesced runs
// of chosen requests and their padded batch, a simulated device loss, the weight layouts the
// kernels read, the native tables, the node-config encoder and activation resolution
// (bind_nodeconfig.cpp), and the host copies on their own with their settings and host-cached
// memory (bind_memory.cpp; bench/host_path.py uses them on the GPU machine's testing build).
// TEST_HOOKS names every one of them: tests/conftest.py refuses to run without them, and
// scripts/ci/check_wheel.py refuses a wheel whose module has any.
#ifdef ORTOPS_TESTING

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "base/test_counts.hpp"

#include <cstring>

#include "config/activations.hpp"
#include "arrays.hpp"
#include "config/cells.hpp"
#include "vk/context.hpp"
#include "vk/memory.hpp"
#include "rnn/coalesce.hpp"
#include "rnn/layer.hpp"
#include "rnn/specialization.hpp"
#include "rnn/testing.hpp"
#include "rnn/variants.hpp"
#include "rnn/weights.hpp"

namespace py = pybind11;

namespace ortops {

void bindNodeConfigTesting(py::module_& m);   // bind_nodeconfig.cpp
void bindMemoryTesting(py::module_& m);       // bind_memory.cpp

using door::optionalTensor;
using door::tensor;

namespace {

constexpr const char* TEST_HOOKS[] = { "inject_fault",        "batched_r",          "exact_r",
                                       "tables",              "encode_node_config", "resolve_activations",
                                       "Layer.run_coalesced", "coalesced_rows",     "Context.simulate_loss",
                                       "Context.host_buffer", "host_copy",          "narrow_to_half",
                                       "copy_settings",       "take_test_counts" };

py::array
batchedRArray(const py::array& R)
{
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
}

py::array
exactRArray(const py::array& R)
{
    HostTensor t = tensor(R);
    if (t.type != ElementType::Float16 && t.type != ElementType::Float32) {
        throw std::invalid_argument("ortops: exact_r takes float16 or float32");
    }
    std::vector<uint32_t> words = exactR(t.data, t.elements(), t.type == ElementType::Float16);
    std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
    py::array_t<uint32_t> out(shape);
    std::memcpy(out.mutable_data(), words.data(), words.size() * 4);
    return out;
}

py::dict
cellDict(const Cell& c)
{
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
    py::dict d;
    d["name"] = std::string(c.name);
    d["code"] = c.code;
    d["gate_order"] = py::tuple(gates);
    d["inputs"] = py::tuple(inputs);
    d["outputs"] = py::tuple(outputs);
    d["slots"] = py::tuple(slots);
    d["default_activations"] = py::tuple(defaults);
    d["input_forget"] = c.inputForget;
    d["linear_before_reset"] = c.linearBeforeReset;
    d["extra_state_planes"] = py::make_tuple(c.extraStatePlanes(false), c.extraStatePlanes(true));
    return d;
}

// The native core's tables (cells.hpp, activations.hpp, specialization.cpp), for the tests that
// hold ortops.cells, ortops.activations and ortops.specialization to them.
py::dict
tables()
{
    py::list cells;
    for (const Cell& c : CELLS) {
        cells.append(cellDict(c));
    }
    py::list activations;
    for (const auto& a : ACTIVATIONS) {
        activations.append(
          py::make_tuple(std::string(a.name), a.takesAlpha, a.takesBeta, a.defaultAlpha, a.defaultBeta));
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
}

// Requests [(X, sequence_lens, initial_h, initial_c), ...] of one key as one batched run of at
// least padTo rows, as concurrent runs are coalesced; one (Y, Y_h, Y_c) per request.
py::list
layerRunCoalesced(Layer& self, const py::list& requests, uint32_t padTo)
{
    std::vector<RunInputs> ins;
    for (const auto& item : requests) {
        auto t = item.cast<py::tuple>();
        ins.push_back(RunInputs{ tensor(t[0].cast<py::array>()), optionalTensor(t[1]), optionalTensor(t[2]),
                                 optionalTensor(t[3]) });
    }
    py::dtype dt = self.elementType() == ElementType::Float16 ? py::dtype("float16") : py::dtype::of<float>();
    py::list result;
    std::vector<OutputPointers> ptrs;
    for (const RunInputs& in : ins) {
        OutputShapes shapes = self.outputShapes(in);
        py::list outs;
        OutputPointers p{ nullptr, nullptr, nullptr };
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
}

} // namespace

void
bindTesting(py::module_& m)
{
    m.def("inject_fault", &injectFault, py::arg("kind"), py::arg("value") = 0.0,
          "Test hook: make every run fail ('fail') or change its float outputs ('scale', 'add' "
          "by value); '' switches it off.");
    m.def("batched_r", &batchedRArray, py::arg("R"),
          "Test hook: R in the batched step kernel's layout (layer.hpp's batchedR).");
    m.def("exact_r", &exactRArray, py::arg("R"),
          "Test hook: R as exact mode uploads it (layer.hpp's exactR): the float32 bits, as uint32.");
    m.def("tables", &tables, "Test hook: the native core's tables (cells, activations, specialization).");
    m.def("take_test_counts", &takeEventCounts,
          "Test hook: the events the doors counted since the last call (base/test_counts.hpp: the EP's "
          "reads of each node and of its attributes through ONNX Runtime's getters), and clear them.");
    bindNodeConfigTesting(m);
    bindMemoryTesting(m);
    m.def("coalesced_rows", &coalescedRows, py::arg("rows"), py::arg("max_rows"),
          "Test hook: the batch a coalesced run of `rows` request rows runs at (src/core/rnn/coalesce.hpp).");
    auto layer = py::reinterpret_borrow<py::class_<Layer>>(m.attr("Layer"));
    layer.def("run_coalesced", &layerRunCoalesced, py::arg("requests"), py::arg("pad_to") = 0,
              "Test hook: run requests [(X, sequence_lens, initial_h, initial_c), ...] of one key as one "
              "batched run of at least pad_to rows (zero rows past theirs), as concurrent runs are "
              "coalesced; one (Y, Y_h, Y_c) per request.");
    auto context = py::reinterpret_borrow<py::class_<Context, std::shared_ptr<Context>>>(m.attr("Context"));
    context.def("simulate_loss", &Context::simulateLoss,
                "Test hook: mark the context lost, as a VK_ERROR_DEVICE_LOST would.");
    context.def(
      "host_buffer",
      [](std::shared_ptr<Context> self, uint64_t nbytes) {
          return std::make_shared<HostBuffer>(std::move(self), nbytes, false);
      },
      py::arg("nbytes"), "Test hook: host-cached memory for reading results back (a transfer target, not bindable).");
    m.attr("TEST_HOOKS") = py::tuple(py::cast(std::vector<std::string>(std::begin(TEST_HOOKS), std::end(TEST_HOOKS))));
}

} // namespace ortops

#endif // ORTOPS_TESTING
