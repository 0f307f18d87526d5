// What a device must offer for ortops's kernels, worded once for every door: the plugin EP's
// factory, the layers of the custom-op library and the EP (layer.cpp) and the Python door
// (ortops.device.require_mode and require_ieee, the session's choice of the EP, through
// _vk.require_device and _vk.device_refusal).
//
// Every float pass declares the SPIR-V execution mode SignedZeroInfNanPreserve for 32-bit
// floats (glsl/common.glsl): without it a compiler may assume no NaN or Inf exists and, for
// one, turn clip's compare-and-select into a NaN-dropping min/max. A shader may declare the
// mode only where the device reports shaderSignedZeroInfNanPreserveFloat32 (Vulkan 1.2 float
// controls); a device without it is refused before anything is compiled, rather than run
// kernels whose NaN and Inf results would be the compiler's choice (docs/special_values.md).
// Mode "exact" (docs/exact.md) gives the same bits on every device only with the same control;
// its denormals it flushes in its own code, so it asks no denormal control of the device.
#pragma once

#include <optional>
#include <string>

#include "config/types.hpp"

namespace ortops {

// Why the device `label` names (deviceLabel's words) cannot run ortops's kernels (in `mode`,
// where given): one sentence naming the device and the missing feature; nothing when it can.
// Needs no Vulkan: the node checker (placement/node_check.cpp) and its fuzz target call it too.
std::optional<std::string>
deviceRefusal(const std::string& label, bool nanPreserveFloat32, std::optional<Mode> mode = std::nullopt);

// UnsupportedDeviceError (errors.hpp) with deviceRefusal's sentence, where there is one.
void
requireDevice(const std::string& label, bool nanPreserveFloat32, std::optional<Mode> mode = std::nullopt);

// The same for a device description (vk/devices.hpp's, found by its deviceLabel where the caller
// includes it): a template, so that this header needs no Vulkan.
template<typename Device>
std::optional<std::string>
deviceRefusal(const Device& device, std::optional<Mode> mode = std::nullopt)
{
    return deviceRefusal(deviceLabel(device), device.nanPreserveFloat32, mode);
}

template<typename Device>
void
requireDevice(const Device& device, std::optional<Mode> mode = std::nullopt)
{
    requireDevice(deviceLabel(device), device.nanPreserveFloat32, mode);
}

} // namespace ortops
