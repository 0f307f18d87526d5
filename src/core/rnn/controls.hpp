// What the Python door may set on a layer between runs and what it may see of it: the
// settings (LayerSettings), the last run's GPU profile and the plan pools' contents. Tests and
// benchmarks lower the settings; the custom-op library keeps the defaults.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rnn/variants.hpp"

namespace ortops {

// Whether mode "fast" may use the cooperative-matrix projection: yes unless ORTOPS_COOPMAT=0.
bool
coopmatRequested();

// A coalescing setting from the environment (ORTOPS_COALESCE_ROWS: the batch rows concurrent
// runs may be coalesced into, 1 switches coalescing off; ORTOPS_COALESCE_IN_FLIGHT), else
// `fallback`.
uint32_t
coalesceSettingFromEnv(const char* variable, uint32_t fallback);

// Per-layer settings the Python door may change between runs (tests and benchmarks lower
// them): the variant tunables, the plan cache's capacity, the storage-binding limit checked
// (default: the device's maxStorageBufferRange), runs of one shape in flight at once, and
// whether plans record GPU timestamps.
struct LayerSettings
{
    VariantSettings variants = variantSettings();
    uint32_t planCache = 8;
    std::optional<uint64_t> storageRange;
    std::optional<std::array<uint32_t, 3>> workgroupCount;   // default: the device's maxComputeWorkGroupCount
    uint32_t maxConcurrent = 8;
    bool timestamps = false;
    // Mode "fast" may record the cooperative-matrix projection (default: yes; ORTOPS_COOPMAT=0: no).
    bool coopmat = coopmatRequested();
    // Concurrent runs coalesced into one batched run (coalesce.hpp): at most this many batch
    // rows a run (1: never; default ORTOPS_COALESCE_ROWS, else 32), with at most
    // `coalesceInFlight` runs of the layer in flight while requests wait to be coalesced
    // (default ORTOPS_COALESCE_IN_FLIGHT, else 1).
    uint32_t coalesceRows = coalesceSettingFromEnv("ORTOPS_COALESCE_ROWS", 32);
    uint32_t coalesceInFlight = coalesceSettingFromEnv("ORTOPS_COALESCE_IN_FLIGHT", 1);
};

// std::invalid_argument naming the setting when `s` holds a value no layer accepts.
void
checkSettings(const LayerSettings& s);

// One run's GPU time in milliseconds: the whole and its split (projection and state set-up,
// steps, outputs).
struct GpuProfile
{
    double totalMs = 0, projectionMs = 0, stepsMs = 0, outputsMs = 0;
};

// The plans a layer holds for one shape: its key's fields, how many plans exist and which
// projection and step kernels each free one recorded.
struct PlanPoolInfo
{
    uint32_t seq, batch, steps;
    bool hasLens, hasH0, hasC0;
    std::array<bool, 3> outputs;
    uint32_t count;
    std::vector<std::string> freeProjections;
    std::vector<std::string> freeSteps;
};

} // namespace ortops
