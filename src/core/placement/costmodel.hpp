// The cost model behind placement "auto": one recurrent node's run on the Vulkan device
// against ONNX Runtime's CPU kernel. Each side is
//     per_run + per_step * steps + per_flop * flops     (seconds)
//   per_run   what a run costs whatever its size (the device: a submission, its fence, the
//             copies; the CPU: ORT's kernel set-up);
//   per_step  what each sequential step costs beyond its arithmetic (the device: a dispatch
//             and a barrier; the CPU: the per-step GEMM call); steps = seq_length * directions;
//   per_flop  the inverse of the throughput; flops = 2 * directions * seq * batch * gates *
//             hidden * (input + hidden), the two matrix products.
// Both sides are measured once per device at calibrationShapes' points (calibration.hpp) and cached
// on disk (costcache.hpp) under calibrationKey. The one copy of the model: the plugin EP and
// the Python door (ortops/ort/costmodel.py, through _vk) decide with it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ortops {

struct Cell;

// What one run of a node costs in the model's terms; `assumed` says which dimensions were
// dynamic and what was assumed for them ("sequence 64, batch 1"; empty when none).
struct Work
{
    uint64_t steps = 0;
    double flops = 0.0;
    std::string assumed;
};

// One side's costs, in seconds.
struct Side
{
    double perRun = 0.0;
    double perStep = 0.0;
    double perFlop = 0.0;

    double predict(const Work& work) const { return perRun + perStep * static_cast<double>(work.steps) + perFlop * work.flops; }
    bool operator==(const Side& o) const { return perRun == o.perRun && perStep == o.perStep && perFlop == o.perFlop; }
};

// Both sides' costs on one device; `key`: what they were measured for (calibrationKey).
struct Calibration
{
    std::string key;
    Side device;
    Side cpu;

    // "<key>\n  device:  0.123 ms per run, 4.5 us per step, 67.8 GFLOP/s\n  ORT CPU: ..."
    std::string describe() const;
};

// The Work of one run of a node of `gates` gates (LSTM 4, GRU 3, RNN 1) and these sizes.
Work
workOf(uint32_t gates, uint64_t seq, uint64_t batch, uint64_t input, uint64_t hidden, uint32_t directions,
       std::string assumed = "");

// One calibration point: an LSTM of one direction, `seq` steps long, run for its first `steps`
// (max_length, every sequence length `steps`). Points of one layer share its compiled kernels:
// the device's specialization constants are the layer's shape, not the steps run.
struct CalibrationShape
{
    uint32_t seq, batch, input, hidden, steps;
};

// Which table of points: Wide, for GPUs (their kernels compile in milliseconds, and their
// throughput shows only on a wide layer), or Small, for CPU implementations of Vulkan such as
// lavapipe (each new shape's kernels compile for seconds there, and they reach their throughput
// on small layers) and for tests on any device.
enum class CalibrationShapes
{
    Wide,
    Small,
};

// One step of a small LSTM (cost per run) and all its steps (cost per step), then a wide one
// (throughput): the three terms isolated with two compiled layers.
const std::array<CalibrationShape, 3>&
calibrationShapes(CalibrationShapes which);

// The Side through measurements (Work, seconds) taken at the calibration shapes: the linear
// system solved by least squares (exactly for three points), a term that comes out negative
// (timing noise on a side where it is negligible) set to 0 and the others fitted again
// without it. std::invalid_argument for fewer than one point.
Side
fit(const std::vector<std::pair<Work, double>>& points);

// What a calibration is valid for: the device and its driver, the versions of ortops and
// onnxruntime, and the CPU threads ORT's sessions use.
std::string
calibrationKey(const std::string& deviceName, const std::string& driver, const std::string& driverInfo,
               const std::string& ortopsVersion, const std::string& onnxruntimeVersion, unsigned cpuThreads);

// The thread count ORT CPU's sessions use here by default: one per core this process may run on.
unsigned
cpuThreads();

} // namespace ortops
