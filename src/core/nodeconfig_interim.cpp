// Interim: NodeConfig's lookups until the strict decoder (nodeconfig.cpp) lands.
#include "nodeconfig.hpp"

namespace ortops {

bool
NodeConfig::isAbsent(std::string_view input) const
{
    for (const auto& a : absent) {
        if (a == input) {
            return true;
        }
    }
    return false;
}

bool
NodeConfig::wants(std::string_view output) const
{
    for (const auto& o : outputs) {
        if (o == output) {
            return true;
        }
    }
    return false;
}

} // namespace ortops
