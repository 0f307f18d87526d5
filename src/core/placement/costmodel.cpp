// The cost model's arithmetic: work, fit, key (costmodel.hpp).
#include "placement/costmodel.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <thread>

#include "rnn/variants.hpp"

#if defined(__linux__)
#include <sched.h>
#endif

namespace ortops {

namespace {

std::string
describeSide(const Side& s)
{
    double gflops = s.perFlop > 0 ? 1e-9 / s.perFlop : std::numeric_limits<double>::infinity();
    char buf[160];
    std::snprintf(buf, sizeof buf, "%.3f ms per run, %.1f us per step, %.1f GFLOP/s", s.perRun * 1e3, s.perStep * 1e6,
                  gflops);
    return buf;
}

// Least squares over the columns `free` of a (rows x 3): the columns scaled to unit largest
// magnitude (flops dwarf the others), then modified Gram-Schmidt QR and back substitution.
std::array<double, 3>
leastSquares(const std::vector<std::array<double, 3>>& a, const std::vector<double>& t, const std::vector<int>& free)
{
    size_t m = a.size(), k = free.size();
    std::vector<std::vector<double>> q(k, std::vector<double>(m));
    std::vector<double> scale(k, 1.0);
    for (size_t j = 0; j < k; ++j) {
        double big = 0.0;
        for (size_t i = 0; i < m; ++i) {
            big = std::max(big, std::fabs(a[i][free[j]]));
        }
        scale[j] = big > 0 ? big : 1.0;
        for (size_t i = 0; i < m; ++i) {
            q[j][i] = a[i][free[j]] / scale[j];
        }
    }
    std::vector<std::vector<double>> r(k, std::vector<double>(k, 0.0));
    for (size_t j = 0; j < k; ++j) {
        for (size_t p = 0; p < j; ++p) {
            double dot = 0.0;
            for (size_t i = 0; i < m; ++i) {
                dot += q[p][i] * q[j][i];
            }
            r[p][j] = dot;
            for (size_t i = 0; i < m; ++i) {
                q[j][i] -= dot * q[p][i];
            }
        }
        double norm = 0.0;
        for (size_t i = 0; i < m; ++i) {
            norm += q[j][i] * q[j][i];
        }
        r[j][j] = std::sqrt(norm);
        for (size_t i = 0; i < m; ++i) {
            q[j][i] = r[j][j] > 0 ? q[j][i] / r[j][j] : 0.0;
        }
    }
    std::vector<double> y(k, 0.0);
    for (size_t j = 0; j < k; ++j) {
        for (size_t i = 0; i < m; ++i) {
            y[j] += q[j][i] * t[i];
        }
    }
    std::array<double, 3> x{};
    for (size_t j = k; j-- > 0;) {
        double v = y[j];
        for (size_t p = j + 1; p < k; ++p) {
            v -= r[j][p] * x[free[p]] * scale[p];
        }
        x[free[j]] = r[j][j] > 0 ? v / r[j][j] / scale[j] : 0.0;    // a zero column: no term
    }
    return x;
}

} // namespace

std::string
Calibration::describe() const
{
    return key + "\n  device:  " + describeSide(device) + "\n  ORT CPU: " + describeSide(cpu);
}

Work
workOf(uint32_t gates, uint64_t seq, uint64_t batch, uint64_t input, uint64_t hidden, uint32_t directions,
       std::string assumed)
{
    double flops = 2.0 * directions * static_cast<double>(seq) * static_cast<double>(batch) * gates *
                   static_cast<double>(hidden) * static_cast<double>(input + hidden);
    return Work{ seq * directions, flops, std::move(assumed) };
}

// Wide (GPUs): 1 and 64 steps of a 64-step layer of batch 1, hidden 32; 8 steps of batch 16,
// hidden 512 (the sizes of the H200's calibration in docs/onnxruntime.md). Small (CPU devices,
// tests): the same at hidden 8; 2 steps of batch 128, hidden 32, a batch beyond what the
// whole-sequence kernel takes on a CPU device, so that this layer compiles the step kernels. On
// lavapipe each new layer's first run compiles its kernels for seconds, most of a calibration's
// time, and the wide layer's whole-sequence kernel unrolls hidden 512 (the figures:
// docs/onnxruntime.md, "Placement policy").
const std::array<CalibrationShape, 3>&
calibrationShapes(CalibrationShapes which)
{
    static const std::array<CalibrationShape, 3> wide = { { { 64, 1, 32, 32, 1 }, { 64, 1, 32, 32, 64 }, { 8, 16, 512, 512, 8 } } };
    static const std::array<CalibrationShape, 3> small = { { { 64, 1, 8, 8, 1 }, { 64, 1, 8, 8, 64 }, { 2, 128, 32, 32, 2 } } };
    static_assert(128 > SEQUENCE_CPU_MAX_BATCH, "the small table's wide layer must run the step kernels on a CPU device");
    return which == CalibrationShapes::Small ? small : wide;
}

Side
fit(const std::vector<std::pair<Work, double>>& points)
{
    if (points.empty()) {
        throw std::invalid_argument("ortops: cost model fit: no measurement given");
    }
    std::vector<std::array<double, 3>> a;
    std::vector<double> t;
    for (const auto& [w, seconds] : points) {
        a.push_back({ 1.0, static_cast<double>(w.steps), w.flops });
        t.push_back(seconds);
    }
    std::vector<int> free = { 0, 1, 2 };
    while (true) {
        std::array<double, 3> x = leastSquares(a, t, free);
        bool nonNegative = std::all_of(x.begin(), x.end(), [](double v) { return v >= 0; });
        if (nonNegative || free.size() == 1) {
            return Side{ std::max(x[0], 0.0), std::max(x[1], 0.0), std::max(x[2], 0.0) };
        }
        // Drop the most negative free term and fit the others again.
        auto worst = std::min_element(free.begin(), free.end(), [&](int p, int q) { return x[p] < x[q]; });
        free.erase(worst);
    }
}

std::string
calibrationKey(const std::string& deviceName, const std::string& driver, const std::string& driverInfo,
               const std::string& ortopsVersion, const std::string& onnxruntimeVersion, unsigned cpuThreads)
{
    return deviceName + " | " + driver + " " + driverInfo + " | ortops " + ortopsVersion + " | onnxruntime " +
           onnxruntimeVersion + " | " + std::to_string(cpuThreads) + " CPU threads";
}

unsigned
cpuThreads()
{
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        return static_cast<unsigned>(CPU_COUNT(&set));
    }
#endif
    unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? n : 1;
}

} // namespace ortops
