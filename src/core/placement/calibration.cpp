// Measuring a calibration (calibration.hpp).
#include "placement/calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <stdexcept>

#include "vk/devices.hpp"
#include "placement/costcache.hpp"
#include "rnn/layer.hpp"
#include "config/nodeconfig.hpp"

namespace ortops {

namespace {

// Deterministic uniform values in [-bound, bound) (the values do not matter for timing; a
// fixed LCG keeps runs reproducible).
std::vector<float>
uniform(size_t n, float bound, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 12345u;
    std::vector<float> v(n);
    for (float& f : v) {
        x = x * 1664525u + 1013904223u;
        f = bound * (2.0f * static_cast<float>(x >> 8) / static_cast<float>(1u << 24) - 1.0f);
    }
    return v;
}

// The calibration LSTM's node config on `device`, output Y only.
NodeConfig
lstmConfig(const DeviceDescription& device, uint32_t hidden)
{
    return decodeNodeConfig(
      R"({"absent":["B"],"attrs":{"activation_alpha":null,"activation_beta":null,"activations":null,)"
      R"("clip":null,"direction":"forward","hidden_size":)" +
      std::to_string(hidden) +
      R"(,"input_forget":0,"layout":0,"linear_before_reset":0},"device":")" + device.uuid +
      R"(","dtype":"float32","mode":"deterministic","node":"calibration","op":"LSTM","outputs":["Y"],"v":4})");
}

// The device side of one (input, hidden): a Layer of those weights, run on x.
struct DeviceLstm
{
    std::unique_ptr<Layer> layer;

    DeviceLstm(const DeviceDescription& device, uint32_t input, uint32_t hidden, const std::vector<float>& W,
               const std::vector<float>& R)
    {
        Weights w;
        int64_t rows = 4 * static_cast<int64_t>(hidden);
        w.W = HostTensor{ W.data(), ElementType::Float32, { 1, rows, input } };
        w.R = HostTensor{ R.data(), ElementType::Float32, { 1, rows, hidden } };
        layer = std::make_unique<Layer>(lstmConfig(device, hidden), w);
    }

    // Run the first `steps` of x ([seq, batch, input]): every sequence length and max_length
    // `steps`, so that the runs of one seq share the layer's kernels whatever their steps.
    void run(const std::vector<float>& x, uint32_t seq, uint32_t batch, uint32_t input, uint32_t steps,
             std::vector<float>& y)
    {
        lens.assign(batch, static_cast<int32_t>(steps));
        RunInputs in;
        in.X = HostTensor{ x.data(), ElementType::Float32, { seq, batch, input } };
        in.sequenceLens = HostTensor{ lens.data(), ElementType::Int32, { batch } };
        in.steps = steps;
        OutputShapes shapes = layer->outputShapes(in);
        size_t n = 1;
        for (int64_t d : *shapes[0]) {
            n *= static_cast<size_t>(d);
        }
        y.resize(n);
        layer->run(in, shapes, OutputPointers{ y.data(), nullptr, nullptr });
    }

    std::vector<int32_t> lens;
};

} // namespace

double
medianSeconds(const std::function<void()>& run, int maxRuns, double budget)
{
    std::vector<double> times;
    double spent = 0.0;
    while (static_cast<int>(times.size()) < std::max(maxRuns, 1) &&
           (static_cast<int>(times.size()) < CALIBRATION_MIN_RUNS || spent < budget)) {
        auto start = std::chrono::steady_clock::now();
        run();
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        spent += times.back();
    }
    std::sort(times.begin(), times.end());
    size_t m = times.size();
    return m % 2 ? times[m / 2] : 0.5 * (times[m / 2 - 1] + times[m / 2]);
}

Calibration
measureCalibration(const DeviceDescription& device, CpuLstmRunner& cpu, const std::string& key,
                   CalibrationShapes shapes, int maxRuns)
{
    using Runners = std::pair<std::unique_ptr<DeviceLstm>, std::unique_ptr<CpuLstm>>;
    struct Point
    {
        CalibrationShape s;
        Runners* r;
        std::vector<float> x, xSteps;
    };
    std::map<std::pair<uint32_t, uint32_t>, Runners> runners;
    std::vector<Point> points;
    uint32_t seed = 1;
    for (const CalibrationShape& s : calibrationShapes(shapes)) {
        auto& r = runners[{ s.input, s.hidden }];
        if (!r.first) {
            float bound = 1.0f / std::sqrt(static_cast<float>(s.hidden));
            std::vector<float> W = uniform(size_t(4) * s.hidden * s.input, bound, 2 * s.hidden);
            std::vector<float> R = uniform(size_t(4) * s.hidden * s.hidden, bound, 2 * s.hidden + 1);
            r.first = std::make_unique<DeviceLstm>(device, s.input, s.hidden, W, R);
            r.second = cpu.make(s.input, s.hidden, W, R);
        }
        // The device gets all `seq` steps and runs the first `steps`; ORT CPU gets those steps.
        std::vector<float> x = uniform(size_t(s.seq) * s.batch * s.input, 1.0f, seed++);
        std::vector<float> xSteps(x.begin(), x.begin() + size_t(s.steps) * s.batch * s.input);
        points.push_back(Point{ s, &r, std::move(x), std::move(xSteps) });
    }
    // The first run of each point before any is timed, each device layer's on its own thread:
    // a first run compiles the layer's kernels (most of a calibration's time), and the pipeline
    // table makes different pipelines at once, so the layers' compiles overlap; ORT CPU's first
    // runs go meanwhile on this thread. Nothing is timed until every compile is done.
    std::vector<std::future<void>> firstRuns;
    for (auto& [shape, r] : runners) {
        firstRuns.push_back(std::async(std::launch::async, [layer = &r, &points] {
            std::vector<float> y;
            for (Point& p : points) {
                if (p.r == layer) {
                    p.r->first->run(p.x, p.s.seq, p.s.batch, p.s.input, p.s.steps, y);
                }
            }
        }));
    }
    for (Point& p : points) {
        p.r->second->run(p.xSteps, p.s.steps, p.s.batch);
    }
    for (auto& done : firstRuns) {
        done.get();   // a first run's error, rethrown here
    }
    std::vector<std::pair<Work, double>> onDevice, onCpu;
    std::vector<float> y;
    for (Point& p : points) {
        const CalibrationShape& s = p.s;
        Work w = workOf(4, s.steps, s.batch, s.input, s.hidden, 1);
        onDevice.emplace_back(w, medianSeconds([&] { p.r->first->run(p.x, s.seq, s.batch, s.input, s.steps, y); }, maxRuns));
        onCpu.emplace_back(w, medianSeconds([&] { p.r->second->run(p.xSteps, s.steps, s.batch); }, maxRuns));
    }
    return Calibration{ key, fit(onDevice), fit(onCpu) };
}

CalibrationShapes
calibrationShapesFor(const DeviceDescription& device)
{
    const char* env = std::getenv("ORTOPS_COST_SHAPES");
    std::string v = env ? env : "";
    if (v == "small") {
        return CalibrationShapes::Small;
    }
    if (!v.empty() && v != "default") {
        throw std::invalid_argument("ortops: ORTOPS_COST_SHAPES must be 'default' or 'small', got '" + v + "'");
    }
    return device.type == "cpu" ? CalibrationShapes::Small : CalibrationShapes::Wide;
}

std::string
calibrationNotice(const DeviceDescription& device, CalibrationShapes shapes, const std::string& cachePath)
{
    std::string sizes;
    for (const CalibrationShape& s : calibrationShapes(shapes)) {
        sizes += (sizes.empty() ? "" : ", ") + std::to_string(s.steps) + "x" + std::to_string(s.batch) + "x" +
                 std::to_string(s.input) + "x" + std::to_string(s.hidden);
    }
    return "ortops: placement auto: calibrating the cost model for " + device.name +
           " once (an LSTM timed on the device and on ONNX Runtime CPU at steps x batch x input x hidden " + sizes +
           (device.type == "cpu" ? "; about 8 s on lavapipe with 2 cores, most of it compiling" : "") +
           "); the result is cached in " + cachePath + " for later sessions and processes";
}

std::string
calibrationReport(const Calibration& cal, double seconds)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", seconds);
    return std::string("ortops: cost model calibrated in ") + buf + " s: " + cal.describe();
}

Calibration
calibrationFor(const std::string& key, const std::function<Calibration()>& measure,
               const std::function<void(const std::string&)>& warn)
{
    std::string path = costCachePath();
    std::string problem;
    std::optional<Calibration> cached = loadCalibration(key, path, &problem);
    if (!problem.empty()) {
        warn(problem);
    }
    if (cached) {
        return *cached;
    }
    Calibration cal = measure();
    try {
        storeCalibration(cal, path);
    } catch (const std::exception& e) {
        warn(std::string(e.what()) + "; the calibration is used but not cached");
    }
    return cal;
}

} // namespace ortops
