// Placement policies: which recurrent nodes the device takes.
//   Gpu   every node the device path can run goes to the device (the default);
//   Auto  a node the device could run stays on ONNX Runtime CPU where the calibrated cost model
//         (costmodel.hpp) predicts ORT CPU faster for the node's shape; the reason says both
//         predictions either way. A dynamic dimension is assumed DEFAULT_SEQ steps and a batch
//         of DEFAULT_BATCH (and the reason says so).
// The plugin EP's GetCapability and the Python door's ortops.ort.policy (through _vk) decide
// here, so both leave the same nodes to the CPU for one calibration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/types.hpp"
#include "placement/costmodel.hpp"

namespace ortops {

// "gpu" | "auto"; std::invalid_argument "<what> must be 'gpu' or 'auto', got '<text>'".
Placement
parsePlacement(const std::string& text, const std::string& what = "placement");

// The placement of a device no placement option names: Auto on a CPU implementation of Vulkan
// (lavapipe; Vulkan's device type "cpu"), where ONNX Runtime's own CPU kernels are usually the
// faster (the recognizer at batch 1 on 2 cores: 32 ms on ORT CPU, 266 ms with its LSTMs on
// lavapipe), else Gpu. The plugin EP applies it: ONNX Runtime's automatic device selection
// gives a lavapipe EP device to every policy, since it sits on the CPU hardware device.
Placement
defaultPlacement(const std::string& deviceType);

// What "auto" assumes for a dynamic sequence length (a sentence, a second of audio frames;
// streaming models have a static 1) and for a dynamic batch (one request).
inline constexpr uint64_t DEFAULT_SEQ = 64;
inline constexpr uint64_t DEFAULT_BATCH = 1;

// A tensor's dims as the graph gives them: nullopt when the rank is unknown, a dim <= 0 where
// it is dynamic (ORT's -1, Python's None).
using GraphDims = std::optional<std::vector<int64_t>>;

// The node's attributes the work depends on.
struct NodeShapeAttrs
{
    uint32_t gates = 4;                      // the cell's: LSTM 4, GRU 3, RNN 1
    std::optional<int64_t> hiddenSize;       // hidden_size, when given
    int64_t layout = 0;
    uint32_t directions = 1;
};

// The Work of one run of a node: X's dims and W's ([dirs, gates*hidden, input]); hidden from
// the attribute, else W, else 1; input from W, else X, else hidden.
Work
nodeWork(const NodeShapeAttrs& attrs, const GraphDims& xDims, const GraphDims& wDims);

struct PlacementChoice
{
    bool device = true;          // the device wins (or ties)
    double devicePrediction = 0.0;   // seconds
    double cpuPrediction = 0.0;
    // "predicted 1.53 ms vs ORT CPU 3.01 ms" / "ORT CPU: predicted 0.011 ms vs device
    // 1.01 ms", then " (assumed sequence 64, batch 1)" where dims were dynamic.
    std::string why;
};

// The choice for a node of this work under `cal`.
PlacementChoice
choosePlacement(const Work& work, const Calibration& cal);

} // namespace ortops
