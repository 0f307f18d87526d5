// The device limits a layer is recorded against (the device's, or lower ones the Python door
// sets in LayerSettings to test the refusals): one storage binding's bytes, workgroups a
// dispatch, workgroups of a grid-stride pass. A plan beyond them is refused with an
// UnsupportedLayerError naming the operator, the device, the need and the limit.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ortops {

struct Limits
{
    std::string op;
    std::string device;
    uint64_t storageRange;
    std::array<uint32_t, 3> workgroupCount;
    uint32_t maxGroups;

    void checkBinding(const std::string& what, uint64_t nbytes) const;
    void checkGroups(const std::string& what, std::array<uint64_t, 3> groups) const;
};

} // namespace ortops
