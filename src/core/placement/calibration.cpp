// Measuring a calibration (calibration.hpp).
#include "placement/calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
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

    void run(const std::vector<float>& x, uint32_t seq, uint32_t batch, uint32_t input, std::vector<float>& y)
    {
        RunInputs in;
        in.X = HostTensor{ x.data(), ElementType::Float32, { seq, batch, input } };
        OutputShapes shapes = layer->outputShapes(in);
        size_t n = 1;
        for (int64_t d : *shapes[0]) {
            n *= static_cast<size_t>(d);
        }
        y.resize(n);
        layer->run(in, shapes, OutputPointers{ y.data(), nullptr, nullptr });
    }
};

} // namespace

double
medianSeconds(const std::function<void()>& run, int repeat)
{
    run();
    std::vector<double> times;
    for (int i = 0; i < std::max(repeat, 1); ++i) {
        auto start = std::chrono::steady_clock::now();
        run();
        times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    size_t m = times.size();
    return m % 2 ? times[m / 2] : 0.5 * (times[m / 2 - 1] + times[m / 2]);
}

Calibration
measureCalibration(const DeviceDescription& device, CpuLstmRunner& cpu, const std::string& key,
                   CalibrationShapes shapes, int repeat)
{
    std::vector<std::pair<Work, double>> onDevice, onCpu;
    std::map<std::pair<uint32_t, uint32_t>, std::pair<std::unique_ptr<DeviceLstm>, std::unique_ptr<CpuLstm>>> runners;
    std::vector<float> y;
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
        std::vector<float> x = uniform(size_t(s.seq) * s.batch * s.input, 1.0f, seed++);
        Work w = workOf(4, s.seq, s.batch, s.input, s.hidden, 1);
        onDevice.emplace_back(w, medianSeconds([&] { r.first->run(x, s.seq, s.batch, s.input, y); }, repeat));
        onCpu.emplace_back(w, medianSeconds([&] { r.second->run(x, s.seq, s.batch); }, repeat));
    }
    return Calibration{ key, fit(onDevice), fit(onCpu) };
}

CalibrationShapes
requestedCalibrationShapes()
{
    const char* env = std::getenv("ORTOPS_COST_SHAPES");
    std::string v = env ? env : "";
    if (v.empty() || v == "default") {
        return CalibrationShapes::Default;
    }
    if (v == "small") {
        return CalibrationShapes::Small;
    }
    throw std::invalid_argument("ortops: ORTOPS_COST_SHAPES must be 'default' or 'small', got '" + v + "'");
}

int
repeatsFor(CalibrationShapes shapes)
{
    return shapes == CalibrationShapes::Small ? 3 : 20;
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
