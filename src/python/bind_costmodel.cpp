// Placement "auto"'s cost model (costmodel.hpp, placement_policy.hpp, costcache.hpp) for
// ortops.ort.costmodel and ortops.ort.policy: the Python door predicts, fits, chooses and
// caches with the one model the plugin EP uses, so both doors leave the same nodes to the CPU.
// A side is a (per_run, per_step, per_flop) tuple, a work (steps, flops, assumed). The
// measurement is the core's too (calibration.hpp): the Python door gives the ORT CPU side as a
// callable, as the EP gives it through ORT's C API, so both time the same runs the same way.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "placement/calibration.hpp"
#include "placement/costcache.hpp"
#include "vk/devices.hpp"
#include "placement/costmodel.hpp"
#include "placement/placement_policy.hpp"

namespace py = pybind11;

namespace ortops {

namespace {

using SideTuple = std::tuple<double, double, double>;
using WorkTuple = std::tuple<uint64_t, double, std::string>;

Side
sideOf(const SideTuple& t)
{
    return Side{ std::get<0>(t), std::get<1>(t), std::get<2>(t) };
}

SideTuple
tupleOf(const Side& s)
{
    return { s.perRun, s.perStep, s.perFlop };
}

Work
fromTuple(const WorkTuple& t)
{
    return Work{ std::get<0>(t), std::get<1>(t), std::get<2>(t) };
}

WorkTuple
tupleOf(const Work& w)
{
    return { w.steps, w.flops, w.assumed };
}

// Python's dims (None where dynamic) as the graph's (-1).
GraphDims
graphDims(const std::optional<std::vector<std::optional<int64_t>>>& dims)
{
    if (!dims) {
        return std::nullopt;
    }
    std::vector<int64_t> out;
    for (const auto& d : *dims) {
        out.push_back(d.value_or(-1));
    }
    return out;
}

// "wide" / "small": a table by name; "default": the one `device` is calibrated with.
CalibrationShapes
shapesNamed(const std::string& which, const DeviceDescription* device = nullptr)
{
    if (which == "default" && device != nullptr) {
        return calibrationShapesFor(*device);
    }
    if (which == "wide" || which == "small") {
        return which == "small" ? CalibrationShapes::Small : CalibrationShapes::Wide;
    }
    throw std::invalid_argument("calibration shapes must be " + std::string(device ? "'default', " : "") +
                                "'wide' or 'small', got '" + which + "'");
}

void
bindModel(py::module_& m)
{
    m.def("cost_work", [](uint32_t gates, uint64_t seq, uint64_t batch, uint64_t input, uint64_t hidden,
                          uint32_t dirs, const std::string& assumed) {
        return tupleOf(ortops::workOf(gates, seq, batch, input, hidden, dirs, assumed));
    });
    m.def("cost_predict", [](const SideTuple& side, const WorkTuple& work) { return sideOf(side).predict(fromTuple(work)); });
    m.def("cost_fit", [](const std::vector<std::pair<WorkTuple, double>>& points) {
        std::vector<std::pair<Work, double>> in;
        for (const auto& [w, s] : points) {
            in.emplace_back(fromTuple(w), s);
        }
        return tupleOf(fit(in));
    });
    m.def("cost_describe", [](const std::string& key, const SideTuple& device, const SideTuple& cpu) {
        return Calibration{ key, sideOf(device), sideOf(cpu) }.describe();
    });
    m.def("calibration_key", &calibrationKey);
    m.def("cpu_threads", &cpuThreads);
    m.def("calibration_shapes", [](const std::string& which) {
        std::vector<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>> out;
        for (const auto& s : calibrationShapes(shapesNamed(which))) {
            out.emplace_back(s.seq, s.batch, s.input, s.hidden, s.steps);
        }
        return out;
    });
}

void
bindPolicy(py::module_& m)
{
    m.attr("DEFAULT_SEQ") = DEFAULT_SEQ;
    m.attr("DEFAULT_BATCH") = DEFAULT_BATCH;
    m.def(
      "node_work",
      [](uint32_t gates, std::optional<int64_t> hidden, int64_t layout, uint32_t dirs,
         const std::optional<std::vector<std::optional<int64_t>>>& x, const std::optional<std::vector<std::optional<int64_t>>>& w) {
          return tupleOf(nodeWork(NodeShapeAttrs{ gates, hidden, layout, dirs }, graphDims(x), graphDims(w)));
      },
      py::arg("gates"), py::arg("hidden_size"), py::arg("layout"), py::arg("directions"), py::arg("x_dims"),
      py::arg("w_dims"));
    m.def("choose_placement", [](const WorkTuple& work, const SideTuple& device, const SideTuple& cpu) {
        PlacementChoice c = choosePlacement(fromTuple(work), Calibration{ "", sideOf(device), sideOf(cpu) });
        return std::make_tuple(c.device, c.why);
    });
}

void
bindCache(py::module_& m)
{
    m.attr("COST_CACHE_ENV") = COST_CACHE_ENV;
    m.attr("COST_CACHE_FORMAT") = COST_CACHE_FORMAT;
    m.def("cost_cache_path", &costCachePath);
    m.def("cost_cache_load", [](const std::string& key, const std::string& path) {
        std::string problem;
        std::optional<Calibration> c = loadCalibration(key, path, &problem);
        py::object cal = py::none();
        if (c) {
            cal = py::make_tuple(c->key, tupleOf(c->device), tupleOf(c->cpu));
        }
        return py::make_tuple(cal, problem);
    });
    m.def(
      "cost_cache_store",
      [](const std::string& key, const SideTuple& device, const SideTuple& cpu, const std::string& path) {
          storeCalibration(Calibration{ key, sideOf(device), sideOf(cpu) }, path);
      },
      py::call_guard<py::gil_scoped_release>());
}

// The ORT CPU side a Python callable makes: make(input, hidden, W, R) -> run(x), x a float32
// [seq, batch, input] array (the Python door's ORT session).
class PythonCpuLstm : public CpuLstm
{
  public:
    PythonCpuLstm(py::function run, uint32_t input) : run_(std::move(run)), input_(input) {}
    ~PythonCpuLstm() override
    {
        py::gil_scoped_acquire gil;
        run_ = py::function();
    }
    void run(const std::vector<float>& x, uint32_t seq, uint32_t batch) override
    {
        py::gil_scoped_acquire gil;
        run_(py::array_t<float>({ static_cast<py::ssize_t>(seq), static_cast<py::ssize_t>(batch),
                                  static_cast<py::ssize_t>(input_) },
                                x.data()));
    }

  private:
    py::function run_;
    uint32_t input_;
};

class PythonCpuRunner : public CpuLstmRunner
{
  public:
    explicit PythonCpuRunner(py::function make) : make_(std::move(make)) {}
    std::unique_ptr<CpuLstm> make(uint32_t input, uint32_t hidden, const std::vector<float>& W,
                                  const std::vector<float>& R) override
    {
        py::gil_scoped_acquire gil;
        py::ssize_t rows = 4 * static_cast<py::ssize_t>(hidden);
        py::array_t<float> w({ py::ssize_t(1), rows, static_cast<py::ssize_t>(input) }, W.data());
        py::array_t<float> r({ py::ssize_t(1), rows, static_cast<py::ssize_t>(hidden) }, R.data());
        return std::make_unique<PythonCpuLstm>(make_(input, hidden, w, r).cast<py::function>(), input);
    }

  private:
    py::function make_;
};

void
bindMeasure(py::module_& m)
{
    m.def(
      "measure_calibration",
      [](const std::string& deviceUuid, const std::string& key, const std::string& shapes, py::function makeCpu,
         int maxRuns) {
          const DeviceDescription& device = chooseDevice(deviceUuid);
          CalibrationShapes which = shapesNamed(shapes, &device);
          PythonCpuRunner cpu(std::move(makeCpu));
          Calibration c;
          {
              py::gil_scoped_release release;    // the device runs need no GIL; the CPU side takes it
              c = measureCalibration(device, cpu, key, which, maxRuns);
          }
          return py::make_tuple(c.key, tupleOf(c.device), tupleOf(c.cpu));
      },
      py::arg("device_uuid"), py::arg("key"), py::arg("shapes"), py::arg("make_cpu"),
      py::arg("max_runs") = CALIBRATION_MAX_RUNS,
      "Measure a calibration with the core (calibration.hpp): the device side through Layer, the "
      "ORT CPU side through make_cpu(input, hidden, W, R) -> run(x); shapes 'default' (the device's "
      "table), 'wide' or 'small'.");
    m.def(
      "calibration_notice",
      [](const std::string& deviceUuid, const std::string& cachePath) {
          const DeviceDescription& device = chooseDevice(deviceUuid);
          return calibrationNotice(device, calibrationShapesFor(device), cachePath);
      },
      py::arg("device_uuid"), py::arg("cache_path"));
    m.def("calibration_report", [](const std::string& key, const SideTuple& device, const SideTuple& cpu, double seconds) {
        return calibrationReport(Calibration{ key, sideOf(device), sideOf(cpu) }, seconds);
    });
    m.def("calibration_table", [](const std::string& deviceUuid) {
        return calibrationShapesFor(chooseDevice(deviceUuid)) == CalibrationShapes::Small ? "small" : "wide";
    });
}

} // namespace

void
bindCostModel(py::module_& m)
{
    bindModel(m);
    bindPolicy(m);
    bindCache(m);
    bindMeasure(m);
}

} // namespace ortops
