// Placement "auto"'s decision (placement_policy.hpp).
#include "placement/placement_policy.hpp"

#include <cstdio>
#include <stdexcept>

namespace ortops {

namespace {

std::optional<uint64_t>
dim(const GraphDims& dims, size_t axis)
{
    if (!dims || dims->size() <= axis || (*dims)[axis] <= 0) {
        return std::nullopt;
    }
    return static_cast<uint64_t>((*dims)[axis]);
}

std::string
ms(double seconds)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
    return buf;
}

} // namespace

Placement
parsePlacement(const std::string& text, const std::string& what)
{
    for (Placement p : PLACEMENTS) {
        if (text == placementName(p)) {
            return p;
        }
    }
    throw std::invalid_argument(what + " must be 'gpu' or 'auto', got '" + text + "'");
}

Placement
defaultPlacement(const std::string& deviceType)
{
    return deviceType == "cpu" ? Placement::Auto : Placement::Gpu;
}

Work
nodeWork(const NodeShapeAttrs& attrs, const GraphDims& xDims, const GraphDims& wDims)
{
    std::string assumed;
    size_t seqAxis = attrs.layout ? 1 : 0, batchAxis = attrs.layout ? 0 : 1;
    std::optional<uint64_t> seq = dim(xDims, seqAxis), batch = dim(xDims, batchAxis);
    if (!seq) {
        seq = DEFAULT_SEQ;
        assumed = "sequence " + std::to_string(DEFAULT_SEQ);
    }
    if (!batch) {
        batch = DEFAULT_BATCH;
        assumed += (assumed.empty() ? "" : ", ") + std::string("batch ") + std::to_string(DEFAULT_BATCH);
    }
    uint64_t hidden = attrs.hiddenSize && *attrs.hiddenSize > 0 ? static_cast<uint64_t>(*attrs.hiddenSize)
                                                                : dim(wDims, 1).value_or(0) / attrs.gates;
    hidden = hidden ? hidden : 1;
    uint64_t input = dim(wDims, 2).value_or(dim(xDims, 2).value_or(hidden));
    return workOf(attrs.gates, *seq, *batch, input, hidden, attrs.directions, assumed);
}

PlacementChoice
choosePlacement(const Work& work, const Calibration& cal)
{
    PlacementChoice c;
    c.devicePrediction = cal.device.predict(work);
    c.cpuPrediction = cal.cpu.predict(work);
    std::string assumed = work.assumed.empty() ? "" : " (assumed " + work.assumed + ")";
    c.device = !(c.cpuPrediction < c.devicePrediction);
    c.why = c.device ? "predicted " + ms(c.devicePrediction) + " vs ORT CPU " + ms(c.cpuPrediction) + assumed
                     : "ORT CPU: predicted " + ms(c.cpuPrediction) + " vs device " + ms(c.devicePrediction) + assumed;
    return c;
}

} // namespace ortops
