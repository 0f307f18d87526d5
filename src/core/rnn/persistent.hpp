// The persistent step kernel (glsl/step_persistent.comp; variants.hpp, PERSISTENT_STEPS): its
// choice, its split, and its run, which is where its safety lives:
//   - at most one workgroup per compute unit where the device reports them, and only those
//     found running at once take part (the shader's occupancy discovery);
//   - every wait in the shader is bounded; a grid that fails leaves a status in its sync words,
//     the host reads it after the run, runs the layer again on the step kernels (recorded into
//     the same plan, same bits) and marks the device: no more persistent grids on it in this
//     process;
//   - one persistent grid per device at a time (a gate held from submit to completion, whatever
//     thread, coalescer or queue submits it), and a finite fence timeout.
#pragma once

#include <cstdint>
#include <string>

#include "config/cells.hpp"
#include "config/types.hpp"
#include "rnn/variants.hpp"

namespace ortops {

struct Plan;
class Sequence;

// What the split depends on: the layer, and the device (its class, its compute units, 0 where
// it does not say, and its workgroup limits).
struct PersistentShape
{
    uint32_t hidden, gates, dirs, batch;
    bool gruTwoPass;
    Op op;
};
struct PersistentDevice
{
    bool cpu;
    uint32_t computeUnits, maxShared, maxInvocations;
};

// The split: `groups` workgroups dispatched of `threads` invocations (32 lanes x rows), each
// able to hold `unitsMax` units' rows of R (`sharedBytes` of shared memory); `fits` where the
// dispatched groups hold the layer's R. The shader's bounds: `spins` polls a wait, `window`
// polls the occupancy poll stays open, `pollDelay` sines a poll (lavapipe); `discovery` off is a test
// hook; `piece` 1 the barriers only (a profile).
struct PersistentVariant
{
    uint32_t groups = 0, threads = 0, unitsMax = 0, sharedBytes = 0;
    uint32_t spins = 0, window = 0, pollDelay = 0;
    bool discovery = true;
    uint32_t piece = 0;
    uint32_t design = 0;   // the shader's DESIGN bits
    uint32_t perInvocation = 1;   // its PER_INVOCATION
    bool fits = false;

    // DESIGN's exchange: h and its step in 64-bit words instead of the grid barrier (the shader's
    // binding 7, zeroed every run).
    bool exchanges() const { return (design & DESIGN_EXCHANGE) != 0; }
    static constexpr uint32_t DESIGN_EXCHANGE = 16;
};
PersistentVariant
persistentVariant(const PersistentShape& shape, const PersistentDevice& device, const VariantSettings& s);

// Whether a layer in `mode` runs the persistent kernel at this batch: never in mode exact, above
// batch MAX_NB, where the step kernel would be a batched one (a persistent plan's fallback is
// the lanes or the whole-sequence kernel), where R does not fit, or where `runnable` is false
// (the device's memory model, or a device marked for the process); else the settings, then
// ORTOPS_PERSISTENT_STEPS=0, then the table (which also needs the device's compute units).
bool
persistentSteps(const PersistentShape& shape, const PersistentDevice& device, Mode mode, bool runnable,
                const VariantSettings& s);

// glsl/step_persistent.comp's sync buffer: its status words, and its arrival counters at words
// 32 and 64 (each on a 128-byte line of its own).
inline constexpr uint32_t PERSISTENT_SYNC_WORDS = 96;
inline constexpr uint32_t PERSISTENT_STATUS = 3;   // 0, or the failures' bits
inline constexpr uint32_t PERSISTENT_TAKEN = 4;    // workgroups that took part
// How long the host waits for a persistent run before the device counts as lost: its waits are
// bounded, so a run still going by then is not going to end. A CPU implementation gets longer:
// lavapipe compiles a pipeline when it is first dispatched, inside that wait (the persistent
// kernel took over 30 s on 2 cores under a load of 12).
inline constexpr uint64_t PERSISTENT_FENCE_NS = 30'000'000'000ull;
inline constexpr uint64_t PERSISTENT_CPU_FENCE_NS = 600'000'000'000ull;

// What this process has seen of persistent grids on a device.
struct PersistentState
{
    bool off = false;      // marked: no more persistent grids on it
    std::string why;       // the failure that marked it
    uint64_t runs = 0;     // grids run
    uint64_t fallbacks = 0;   // runs that ran on the step kernels instead (after a failure, or marked)
    uint32_t lastTaken = 0;   // workgroups that took part in the last grid
};
PersistentState
persistentState(uint32_t device);
// Whether the device is marked.
bool
persistentOff(uint32_t device);

// Runs a plan recorded with the persistent kernel (its `fallback` the same run on the step
// kernels), as the header says; returns the sequence that gave the results (for its timestamps).
Sequence&
runPersistent(Plan& plan, uint32_t device);

} // namespace ortops
