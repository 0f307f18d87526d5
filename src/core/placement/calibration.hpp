// Measuring a calibration (costmodel.hpp): the device side with the core's Layer, the ORT CPU
// side through a CpuLstmRunner the door provides (the plugin EP: an ORT CPU session through
// ONNX Runtime's C API, src/ep/cpu_side.cpp; the Python door: its onnxruntime module, through
// ortops/ort/costmodel.py). Both sides run the same one-direction LSTM (random weights, no
// bias) at each calibration point, the device's with sequence_lens and max_length set to the
// point's steps (so the points of one layer share its kernels), the CPU's on that many steps;
// every point runs once untimed first (the device layers' first runs, which compile their
// kernels, each on its own thread), then each time is the median of its timed runs
// (medianSeconds' stopping rule), fitted per side (fit). Also the one place that says which
// calibration a door uses: cached under the key, else measured and cached (calibrationFor),
// and what a door says meanwhile (calibrationNotice).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "placement/costmodel.hpp"

namespace ortops {

struct DeviceDescription;

// One LSTM on ORT CPU: run it once on x ([seq, batch, input] float32).
class CpuLstm
{
  public:
    virtual ~CpuLstm() = default;
    virtual void run(const std::vector<float>& x, uint32_t seq, uint32_t batch) = 0;
};

// Makes the CPU side's LSTM of a calibration shape: W [1, 4*hidden, input], R [1, 4*hidden,
// hidden], float32, no bias, output Y.
class CpuLstmRunner
{
  public:
    virtual ~CpuLstmRunner() = default;
    virtual std::unique_ptr<CpuLstm> make(uint32_t input, uint32_t hidden, const std::vector<float>& W,
                                          const std::vector<float>& R) = 0;
};

// The median wall-clock seconds of `run` over its timed runs (the caller makes the untimed
// first run: the compile, the first allocations): runs until `maxRuns`, or until at least 3
// and `budget` seconds of timed runs, whichever comes first. A GPU's runs take microseconds to a few
// milliseconds (every run fits the budget: 20), lavapipe's widest tens of milliseconds (3-6).
inline constexpr int CALIBRATION_MAX_RUNS = 20;
inline constexpr int CALIBRATION_MIN_RUNS = 3;
inline constexpr double CALIBRATION_BUDGET_S = 0.1;
double
medianSeconds(const std::function<void()>& run, int maxRuns = CALIBRATION_MAX_RUNS,
              double budget = CALIBRATION_BUDGET_S);

// Measure both sides on `device` at the points of `shapes`; `key` names the result
// (calibrationKey).
Calibration
measureCalibration(const DeviceDescription& device, CpuLstmRunner& cpu, const std::string& key,
                   CalibrationShapes shapes, int maxRuns = CALIBRATION_MAX_RUNS);

// The table a device is calibrated with: Small on a CPU implementation of Vulkan
// (DeviceDescription::type "cpu"), Wide on the others; ORTOPS_COST_SHAPES=small asks for
// Small on any device (tests, quick tools), "default" or unset for the device's own.
// std::invalid_argument naming the variable otherwise.
CalibrationShapes
calibrationShapesFor(const DeviceDescription& device);

// What a door says (as a warning: ONNX Runtime's and Python's loggers show warnings by default)
// before it measures, since the first placement "auto" session waits for it: the device, what
// is timed and where the result is cached.
std::string
calibrationNotice(const DeviceDescription& device, CalibrationShapes shapes, const std::string& cachePath);

// What a door says once measured (at its verbose / info level): "ortops: cost model calibrated
// in 4.2 s: " and the calibration's description.
std::string
calibrationReport(const Calibration& cal, double seconds);

// The calibration of `key`: from the cache at costCachePath() when there, else measured by
// `measure` and stored (a store that fails is reported through `warn` and the calibration
// still used). A cache that cannot be read is reported through `warn` too.
Calibration
calibrationFor(const std::string& key, const std::function<Calibration()>& measure,
               const std::function<void(const std::string&)>& warn);

} // namespace ortops
