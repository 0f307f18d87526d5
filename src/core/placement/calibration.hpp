// Measuring a calibration (costmodel.hpp): the device side with the core's Layer, the ORT CPU
// side through a CpuLstmRunner the door provides (the plugin EP: an ORT CPU session through
// ONNX Runtime's C API, src/ep/cpu_side.cpp; the Python door keeps its own measurement in
// ortops/ort/costmodel.py). Both sides run the same one-direction LSTM (random weights, no
// bias) at each calibration shape; each time is the median of `repeat` runs after one
// untimed run, fitted per side (fit). Also the one place that says which calibration a door
// uses: cached under the key, else measured and cached (calibrationFor).
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

// The median wall-clock seconds of `run` over `repeat` runs after one untimed run.
double
medianSeconds(const std::function<void()>& run, int repeat);

// Measure both sides on `device` at `shapes`; `key` names the result (calibrationKey).
Calibration
measureCalibration(const DeviceDescription& device, CpuLstmRunner& cpu, const std::string& key,
                   CalibrationShapes shapes = CalibrationShapes::Default, int repeat = 20);

// ORTOPS_COST_SHAPES: "small" asks for the small calibration shapes and 3 runs each (tests,
// slow devices such as lavapipe); unset or "default", the default ones and 20 runs.
// std::invalid_argument naming the variable otherwise.
CalibrationShapes
requestedCalibrationShapes();
int
repeatsFor(CalibrationShapes shapes);

// The calibration of `key`: from the cache at costCachePath() when there, else measured by
// `measure` and stored (a store that fails is reported through `warn` and the calibration
// still used). A cache that cannot be read is reported through `warn` too.
Calibration
calibrationFor(const std::string& key, const std::function<Calibration()>& measure,
               const std::function<void(const std::string&)>& warn);

} // namespace ortops
