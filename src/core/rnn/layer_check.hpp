// The doors' checks of a layer before they build one, with no device opened (so that the EP's
// GetCapability, ortops.convert's placement and the fuzz targets run them without Vulkan):
// checkLayer, the config and the weights' shapes as the Layer constructor checks them, each
// weight's storage binding as the upload checks it (the device's capabilities:
// device_check.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/nodeconfig.hpp"
#include "rnn/tensors.hpp"

namespace ortops {

// The config and the weights' shapes checked as the Layer constructor checks them (the spec:
// dtypes, ranks, shapes, hidden_size from R, activations), and, with `limit`, each weight's
// storage binding as the upload checks it (the core's one UnsupportedLayerError message). The
// weights' data is not read (it may be null), so nothing is copied or uploaded. Throws
// InputError / UnsupportedLayerError.
struct BindingLimit
{
    std::string device;          // its name, for the message
    uint64_t storageRange = 0;   // the device's maxStorageBufferRange
};
void
checkLayer(const NodeConfig& config, const Weights& weights, const std::optional<BindingLimit>& limit = std::nullopt);

} // namespace ortops
