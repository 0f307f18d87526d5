// The device check (device_check.hpp).

#include "rnn/device_check.hpp"

#include "base/errors.hpp"

namespace ortops {

std::optional<std::string>
deviceRefusal(const std::string& label, bool nanPreserveFloat32, std::optional<Mode> mode)
{
    if (nanPreserveFloat32) {
        return std::nullopt;
    }
    const std::string missing = "it does not report shaderSignedZeroInfNanPreserveFloat32 (Vulkan 1.2 float controls)";
    if (mode == Mode::Exact) {
        return "ortops: mode='exact' cannot give device-independent results on the Vulkan device " +
               label + ": " + missing +
               ", so its compiler may rewrite NaN, +-Inf and -0 (docs/exact.md). Choose another device "
               "(device=, --device or ORTOPS_DEVICE).";
    }
    return "ortops: the Vulkan device " + label + " cannot run ortops's kernels: " + missing +
           ", so its shaders may not preserve NaN, +-Inf and -0, which the kernels declare they rely on "
           "(SignedZeroInfNanPreserve, docs/special_values.md). Choose another device (device=, --device or "
           "ORTOPS_DEVICE; lavapipe, Mesa's Vulkan on the CPU, supports it).";
}

void
requireDevice(const std::string& label, bool nanPreserveFloat32, std::optional<Mode> mode)
{
    if (std::optional<std::string> why = deviceRefusal(label, nanPreserveFloat32, mode)) {
        throw UnsupportedDeviceError(*why);
    }
}

} // namespace ortops
