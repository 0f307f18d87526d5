// Placement "auto" in the EP (ep_impl.hpp): the core's cost model (placement_policy.hpp) with
// this device's calibration, cached on disk by the core (costcache.hpp) and, when missing,
// measured here: the device side through the core's Layer, the ORT CPU side through ONNX
// Runtime's C API (cpu_side.hpp). The key is the one the Python door uses (ortops version,
// onnxruntime version, device, driver, threads), so both doors read one calibration and
// leave the same nodes to the CPU.
#include <chrono>

#include "ep/cpu_side.hpp"
#include "ep/ep_impl.hpp"

#ifndef ORTOPS_VERSION
#define ORTOPS_VERSION "0.0.0"
#endif

namespace ortops::ep {

namespace {

std::string
keyOf(const Ep& ep)
{
    return calibrationKey(ep.device.name, ep.device.driver, ep.device.driverInfo, ORTOPS_VERSION, ep.factory->ortVersion,
                          cpuThreads());
}

} // namespace

const Calibration*
Ep::costModel(std::string& why)
{
    std::lock_guard<std::mutex> lock(costLock_);
    if (!costTried_) {
        costTried_ = true;
        try {
            std::string key = keyOf(*this);
            auto measure = [&] {
                CalibrationShapes shapes = calibrationShapesFor(device);
                warning(calibrationNotice(device, shapes, costCachePath()));
                OrtCpuRunner cpu(api);
                auto start = std::chrono::steady_clock::now();
                Calibration cal = measureCalibration(device, cpu, key, shapes);
                double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                verbose(calibrationReport(cal, s));
                return cal;
            };
            cost_ = calibrationFor(key, measure, [&](const std::string& m) { warning("ortops: " + m); });
        } catch (const std::exception& e) {
            costProblem_ = std::string("no cost model (") + e.what() + ")";
            warning("ortops: placement auto: " + costProblem_ + "; the device takes every node it can run");
        }
    }
    why = costProblem_;
    return cost_ ? &*cost_ : nullptr;
}

void
placeAuto(Ep& ep, const NodeDescription& node, NodeVerdict& verdict)
{
    std::string problem;
    const Calibration* cal = ep.costModel(problem);
    std::string why = ortops::placeAuto(verdict, cal, problem);
    ep.verbose(nodePrefix(node.opType, node.name) +
               (verdict.taken ? "taken under placement auto: " : "left to the next execution provider under placement auto: ") +
               why);
}

} // namespace ortops::ep
