// Kernel-variant heuristics (see variants.hpp).

#include "rnn/variants.hpp"

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>

namespace ortops {

namespace {
std::mutex g_settingsLock;
VariantSettings g_settings;
} // namespace

VariantSettings
variantSettings()
{
    std::lock_guard<std::mutex> lock(g_settingsLock);
    return g_settings;
}

void
setVariantSettings(const VariantSettings& s)
{
    if (s.batchedKsplit != BATCHED_TABLE && !validSplit(s.batchedKsplit)) {
        throw std::invalid_argument("ortops: the batched kernel's ksplit must be 1, 2, 4 or 8, got " +
                                    std::to_string(s.batchedKsplit));
    }
    for (uint32_t rows : { s.batchedRowsFloat32, s.batchedRowsFloat16 }) {
        if (rows != BATCHED_TABLE && !validSplit(rows)) {
            throw std::invalid_argument("ortops: the batched kernel's rows per thread must be 1, 2, 4 or 8, got " +
                                        std::to_string(rows));
        }
    }
    if (s.maxGroups == 0) {
        throw std::invalid_argument("ortops: max_groups must be positive");
    }
    if (s.coopmatBlocks != BATCHED_TABLE && s.coopmatBlocks != 1 && s.coopmatBlocks != 2 && s.coopmatBlocks != 4) {
        throw std::invalid_argument("ortops: coopmat_blocks must be 1, 2 or 4 (or 0, the rule's), got " +
                                    std::to_string(s.coopmatBlocks));
    }
    std::lock_guard<std::mutex> lock(g_settingsLock);
    g_settings = s;
}

uint32_t
gridGroups(uint64_t n, uint32_t maxGroups)
{
    return static_cast<uint32_t>(std::min<uint64_t>(ceilDiv(n, GROUP), maxGroups));
}

uint32_t
projectionTpt(uint64_t outputs, uint64_t large)
{
    return outputs >= large ? 8 : 4;
}

ProjectionSlices
projectionSlices(uint32_t tpt, uint32_t input, uint32_t maxShared, const VariantSettings& s)
{
    ProjectionSlices v{ s.projectionKt == 32 && input % 32 == 0 ? 32u : 16u, s.projectionStages == 2 ? 2u : 1u };
    auto bytes = [&] { return 2ull * projectionTile(tpt) * v.kt * v.stages * 4; };
    if (bytes() > maxShared) {
        v.stages = 1;
    }
    if (bytes() > maxShared) {
        v.kt = 16;
    }
    return v;
}

uint32_t
batchedFromFor(uint32_t hidden, const VariantSettings& s)
{
    return s.batchedFrom != BATCHED_FROM_TABLE ? s.batchedFrom : fromBatchFor(BATCHED_FROM, hidden);
}

uint32_t
coopmatStepsFrom(uint32_t hidden, const VariantSettings& s)
{
    return s.coopmatStepsFrom != COOPMAT_STEPS_TABLE ? s.coopmatStepsFrom : fromBatchFor(COOPMAT_STEPS_FROM, hidden);
}

uint32_t
coopmatBlocks(uint32_t hidden, uint32_t batch, uint32_t dirs, const VariantSettings& s)
{
    if (s.coopmatBlocks != BATCHED_TABLE) {
        return s.coopmatBlocks;
    }
    return ceilDiv(hidden, 16) * dirs * ceilDiv(batch, 32) >= COOPMAT_PAIR_GROUPS ? 2 : 1;
}

StepKernel
stepKernel(uint32_t batch, uint32_t hidden, const VariantSettings& s)
{
    uint32_t from = batchedFromFor(hidden, s);
    return (from != 0 && batch >= from) ? StepKernel::Batched : StepKernel::Lanes;
}

BatchedTile
defaultBatchedTile(uint32_t hidden, uint32_t batch, bool float16)
{
    // The last row of this element type that matches (each type's first row matches every
    // layer: variants.hpp's static_assert).
    const BatchedTile* tile = nullptr;
    for (const auto& r : BATCHED_TILES) {
        if (r.float16 == float16 && r.fromBatch <= batch && r.fromHidden <= hidden && hidden < r.belowHidden) {
            tile = &r.tile;
        }
    }
    return *tile;
}

BatchedVariant
batchedVariant(uint32_t hidden, uint32_t batch, bool float16, const VariantSettings& s)
{
    BatchedTile t = defaultBatchedTile(hidden, batch, float16);
    auto set = [](uint32_t& field, uint32_t override) {
        if (override != BATCHED_TABLE) {
            field = override;
        }
    };
    set(t.upt, float16 ? s.batchedUptFloat16 : s.batchedUptFloat32);
    set(t.by, float16 ? s.batchedByFloat16 : s.batchedByFloat32);
    set(t.prefetch, s.batchedPrefetch);
    set(t.ksplit, s.batchedKsplit);
    set(t.rows, float16 ? s.batchedRowsFloat16 : s.batchedRowsFloat32);
    uint32_t rows = t.rows;
    uint32_t upt = std::max<uint32_t>(1, std::min(t.upt, hidden));
    // At most 1024 threads a workgroup (32 x by x ksplit), and no more unit groups than units.
    uint32_t by = std::min<uint32_t>(
      { t.by, static_cast<uint32_t>(ceilDiv(hidden, upt * rows)), BATCHED_MAX_INVOCATIONS / 32 / t.ksplit });
    if (rows > 1) {
        // step_tiled.comp's shared memory, max(ksplit / 2, 1) slots of by x 32 threads' sums
        // (rows x upt x 4 floats each), within TILED_SHARED_BYTES: rows x upt x by x slots
        // <= 32. Fewer units a thread first (rows x slots <= 32 always fits), then fewer groups.
        // The table's tiles need no clamp here (variants.hpp's static_assert); overrides may.
        uint32_t slots = std::max<uint32_t>(1, t.ksplit / 2);
        uint32_t most = TILED_SHARED_BYTES / (4 * 32 * 4);
        upt = std::max<uint32_t>(1, std::min(upt, most / (rows * slots)));
        by = std::min<uint32_t>({ t.by, static_cast<uint32_t>(ceilDiv(hidden, upt * rows)),
                                  BATCHED_MAX_INVOCATIONS / 32 / t.ksplit, most / (rows * upt * slots) });
    }
    return { upt, std::max<uint32_t>(1, by), std::max<uint32_t>(1, t.prefetch), t.ksplit, rows };
}

StepVariant
stepVariant(uint32_t batch, uint32_t gatesInPass, bool float16, Mode mode)
{
    // Batch rows per workgroup: one for a batch of one, else up to 8 (float32 outside mode
    // exact up to LANES_FLOAT32_NB below 9, variants.hpp).
    uint32_t nb = std::min(batch, MAX_NB);
    uint32_t units, rpt;
    if (batch <= MAX_NB) {
        // Latency-bound: one R row per thread, the most threads and the shortest chain per
        // step (faster on the H200 than a unit's gates per thread).
        units = std::max<uint32_t>(1, MAX_ROWS / gatesInPass);
        rpt = 1;
        if (!float16 && mode != Mode::Exact) {
            nb = std::min(batch, LANES_FLOAT32_NB);
        }
    } else {
        // Throughput-bound: all gates of a unit per thread, so each load feeds NB x gates
        // multiply-adds; 128 threads a workgroup.
        rpt = gatesInPass;
        units = 4;
    }
    return { nb, units, rpt, gatesInPass * units };
}

std::vector<std::pair<uint32_t, uint32_t>>
stepPasses(bool gruTwoPass, uint32_t gates)
{
    // A GRU with linear_before_reset = 0 runs z and r first (r is applied to h before the
    // product with R_h), then h; every other layer one pass of all its gates.
    if (gruTwoPass) {
        return { { 1, 2 }, { 2, 1 } };
    }
    return { { 0, gates } };
}

} // namespace ortops
