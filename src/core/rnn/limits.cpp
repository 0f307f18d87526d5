// Limits' checks (limits.hpp).

#include "rnn/limits.hpp"

#include "base/errors.hpp"

namespace ortops {

void
Limits::checkBinding(const std::string& what, uint64_t nbytes) const
{
    if (nbytes > storageRange) {
        throw UnsupportedLayerError(op + ": unsupported layer on " + device + ": " + what + " needs " +
                                    std::to_string(nbytes) + " bytes in one storage binding, above the "
                                    "device's maxStorageBufferRange of " + std::to_string(storageRange) +
                                    " bytes");
    }
}

void
Limits::checkGroups(const std::string& what, std::array<uint64_t, 3> groups) const
{
    for (int i = 0; i < 3; i++) {
        if (groups[i] > workgroupCount[i]) {
            throw UnsupportedLayerError(
              op + ": unsupported layer on " + device + ": " + what + " needs " + std::to_string(groups[0]) +
              " x " + std::to_string(groups[1]) + " x " + std::to_string(groups[2]) +
              " workgroups, above the device's maxComputeWorkGroupCount of " +
              std::to_string(workgroupCount[0]) + " x " + std::to_string(workgroupCount[1]) + " x " +
              std::to_string(workgroupCount[2]));
        }
    }
}

} // namespace ortops
