// Kernel variants and the heuristics that choose them, with the measurements behind them
// (the H200 figures are in docs/perf.md). Every choice here changes only how work is split
// over threads and workgroups, never the order in which a sum is taken, so every variant
// gives the same bits (tests/test_determinism.py, tests/test_step_kernels.py).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ortops {

inline constexpr uint32_t GROUP = 64;           // local size of the state and output passes
inline constexpr uint32_t MAX_GROUPS = 65535;   // workgroups per dispatch dimension every device accepts
inline constexpr uint32_t MAX_ROWS = 8;         // R rows per step workgroup (x 32 lanes)
inline constexpr uint32_t MAX_NB = 8;           // batch rows per step workgroup
inline constexpr uint64_t LARGE_PROJECTION = 1ull << 22;   // outputs from which the 128 x 128 tile is used

// The tunables a plan reads when it is recorded (tests and benchmarks may change them).
// The batched step kernel (glsl/step_batched.comp) runs from batch `batchedFrom` (0: never)
// with `batchedUpt` units per thread (float32 / float16), `batchedBy` groups of them per
// workgroup, `batchedPrefetch` positions loaded at once and `batchedKsplit` threads sharing a
// sum's class walk. On the H200 (2026-11-30, GPU ms of a BiLSTM, float32 / float16) the walk
// split over 8 threads beats step.comp from batch 32 up — 200x64x512 7.86 / 8.77 against
// 12.51 / 13.35, 100x64x1024 17.0 / 17.8 against 24.7 / 23.3 — and ties or loses at 16; two
// units per thread gain 5-11 % in float16 and nothing reliable in float32.
// `batchedRows` (float32 / float16) batch rows per thread: 1 runs glsl/step_batched.comp (v4,
// a lane per batch row); 2, 4 or 8 run glsl/step_tiled.comp (v5, a register tile of rows x
// units x gates a thread, so one read of h and of R feeds several multiply-adds). v5 stays
// off by default until the H200 has measured it (docs/perf.md, "Batched steps").
struct VariantSettings
{
    uint32_t batchedFrom = 32;
    uint32_t batchedUptFloat32 = 1;
    uint32_t batchedUptFloat16 = 2;
    uint32_t batchedBy = 2;
    uint32_t batchedPrefetch = 1;
    uint32_t batchedKsplit = 8;
    uint32_t batchedRowsFloat32 = 1;
    uint32_t batchedRowsFloat16 = 1;
    uint64_t largeProjection = LARGE_PROJECTION;
    uint32_t maxGroups = MAX_GROUPS;
};

VariantSettings
variantSettings();
void
setVariantSettings(const VariantSettings& s);

inline uint64_t
ceilDiv(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

// Workgroups of a grid-stride pass over n items (copy, state and output passes).
uint32_t
gridGroups(uint64_t n, uint32_t maxGroups);

// Outputs per thread in each dimension of the input projection (TPT): the 128 x 128 tile for
// large products, the 64 x 64 tile (four times as many workgroups) for small ones.
uint32_t
projectionTpt(uint64_t outputs, uint64_t large);
inline uint32_t
projectionTile(uint32_t tpt)
{
    return 16 * tpt;
}

struct StepVariant
{
    uint32_t nb, units, rpt, rows;
    uint32_t ty() const { return rows / rpt; }
};

// The batched kernels' split: 32 batch rows per workgroup, `by` groups of `rows` x `upt`
// units (rows: batch rows per thread, and so lanes along the units), `ksplit` threads a walk.
struct BatchedVariant
{
    uint32_t upt, by, prefetch, ksplit, rows;
    uint32_t units() const { return upt * by * rows; }
    // The shader: the register tile (v5) for more than one row a thread.
    std::string_view shader() const { return rows > 1 ? "step_tiled" : "step_batched"; }
};

// The shared memory glsl/step_tiled.comp may use: Vulkan's guaranteed minimum of
// maxComputeSharedMemorySize (its tiles are clamped to fit on every device).
inline constexpr uint32_t TILED_SHARED_BYTES = 16384;

// Whether `k` is a valid batchedKsplit (1, 2, 4, 8) / batchedRows (1, 2, 4, 8) value.
bool
validSplit(uint32_t k);

// "step" (lanes split each product; latency-bound small batches) or "step_batched" (the
// batched layouts: R as RB, h in transposed planes; the shader is BatchedVariant::shader()).
std::string_view
stepKernel(uint32_t batch, const VariantSettings& s);

BatchedVariant
batchedVariant(uint32_t hidden, bool float16, const VariantSettings& s);

// Positions per class in the batched kernel's layouts: ceil(hidden / 32).
inline uint32_t
classesLength(uint32_t hidden)
{
    return static_cast<uint32_t>(ceilDiv(hidden, 32));
}
// Batch rows of a transposed state plane: the batch rounded up to the 32 lanes.
inline uint32_t
paddedBatch(uint32_t batch)
{
    return 32 * static_cast<uint32_t>(ceilDiv(batch, 32));
}
// Transposed state planes the batched kernel keeps (h of this step and the next; a GRU
// with linear_before_reset = 0 also its r * h).
inline uint32_t
transposedPlanes(bool gruTwoPass)
{
    return gruTwoPass ? 3 : 2;
}

StepVariant
stepVariant(uint32_t batch, uint32_t gatesInPass);

// (PASS constant, gates computed) of each step pass of one time step.
std::vector<std::pair<uint32_t, uint32_t>>
stepPasses(bool gruTwoPass, uint32_t gates);

} // namespace ortops
