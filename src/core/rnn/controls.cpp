// The layer's settings read from the environment and checked (controls.hpp).

#include "rnn/controls.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace ortops {

bool
coopmatRequested()
{
    const char* env = std::getenv("ORTOPS_COOPMAT");
    return !(env && std::string(env) == "0");
}

uint32_t
coalesceSettingFromEnv(const char* variable, uint32_t fallback)
{
    const char* env = std::getenv(variable);
    if (env && *env) {
        char* end = nullptr;
        unsigned long v = std::strtoul(env, &end, 10);
        if (end && *end == 0 && v >= 1 && v <= (1u << 24)) {
            return static_cast<uint32_t>(v);
        }
    }
    return fallback;
}

void
checkSettings(const LayerSettings& s)
{
    uint32_t k = s.variants.batchedKsplit;
    if (k != BATCHED_TABLE && !validSplit(k)) {
        throw std::invalid_argument("ortops.variants.BATCHED_KSPLIT must be 1, 2, 4 or 8, got " + std::to_string(k));
    }
    for (uint32_t rows : { s.variants.batchedRowsFloat32, s.variants.batchedRowsFloat16 }) {
        if (rows != BATCHED_TABLE && !validSplit(rows)) {
            throw std::invalid_argument("ortops.variants.BATCHED_ROWS must be 1, 2, 4 or 8, got " +
                                        std::to_string(rows));
        }
    }
    uint32_t nbt = s.variants.coopmatBlocks;
    if (nbt != BATCHED_TABLE && nbt != 1 && nbt != 2 && nbt != 4) {
        throw std::invalid_argument("ortops.variants.COOPMAT_BLOCKS must be 1, 2 or 4, got " + std::to_string(nbt));
    }
    if (s.maxConcurrent < 1 || s.planCache < 1 || s.variants.maxGroups < 1) {
        throw std::invalid_argument("ortops: max_concurrent and the plan cache must be positive");
    }
    if (s.coalesceRows < 1 || s.coalesceInFlight < 1) {
        throw std::invalid_argument("ortops: coalesce_rows and coalesce_in_flight must be positive, got " +
                                    std::to_string(s.coalesceRows) + " and " + std::to_string(s.coalesceInFlight));
    }
}

} // namespace ortops
