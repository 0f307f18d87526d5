// Kernel variants and the rules that choose them. Every choice here changes only how work is
// split over threads and workgroups, never the order in which a sum is taken, so every variant
// gives the same bits (tests/test_determinism.py, tests/test_step_kernels.py). The figures
// behind each rule: docs/perf.md, "Kernel choices".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "config/types.hpp"

namespace ortops {

inline constexpr uint32_t GROUP = 64;           // local size of the state and output passes
inline constexpr uint32_t MAX_GROUPS = 65535;   // workgroups per dispatch dimension every device accepts
inline constexpr uint32_t MAX_ROWS = 8;         // R rows per step workgroup (x 32 lanes)
inline constexpr uint32_t MAX_NB = 8;           // batch rows per step workgroup
// Batch rows a lanes-kernel workgroup (glsl/step.comp) of a float32 layer at batch 2-8, where
// float16 keeps up to MAX_NB. Why: two rows a workgroup make twice the workgroups, each lane's
// walk shorter; float32's loads of h set the step's chain, so it gains, while float16's fewer
// bytes do not and the extra workgroups cost (one row a workgroup lost in both). Not in mode
// exact, whose flushes after each multiply and add make the chain arithmetic: there more
// workgroups only repeat R's loads, so exact keeps up to MAX_NB. GRU and RNN follow LSTM's
// measurement. The figures: docs/perf.md, "Kernel choices".
inline constexpr uint32_t LANES_FLOAT32_NB = 2;
inline constexpr uint64_t LARGE_PROJECTION = 1ull << 22;   // outputs from which the 128 x 128 tile is used

// ---------------------------------------------------------------- the batched step kernels
//
// A tile of the batched kernels (glsl/step_batched.comp, v4; glsl/step_tiled.comp, v5): `upt`
// units a thread, `by` groups of rows x upt units a workgroup, `prefetch` positions loaded at
// once, `ksplit` threads sharing a sum's class walk (1, 2, 4, 8), `rows` batch rows a thread
// (1: v4, a lane per batch row; 2, 4 or 8: v5's register tile of rows x units x gates sums).
// Written UPTxBYxPREFETCHxKSPLITxROWS in docs/perf.md and bench/step_kernels.py.
struct BatchedTile
{
    uint32_t upt, by, prefetch, ksplit, rows;
};

// One row of the table of default tiles: for `float16` (or float32) layers from batch
// `fromBatch` up, at hidden sizes in [fromHidden, belowHidden). The last row of the element
// type that matches a layer gives its tile; each type's first row matches every layer.
inline constexpr uint32_t ANY_HIDDEN = 0xFFFFFFFFu;
struct BatchedTileRule
{
    bool float16;
    uint32_t fromBatch;
    uint32_t fromHidden;
    uint32_t belowHidden;
    BatchedTile tile;
};

// The step kernel from batch BATCHED_FROM up is a batched one (below it, glsl/step.comp, the
// lanes kernel), and its tile is the table's (issue 22: chosen by measured heuristics per
// device; measured on the H200 only so far). Every tile gives step.comp's bits (the same
// class sums and halving tree, tests/test_step_kernels.py), so this table chooses speed only.
//
// The rule as measured (docs/perf.md, "Kernel choices"; every output bit-equal to step.comp's):
// - float32, hidden about 512 (384-767, halfway to the measured neighbours 256 and 1024), from
//   batch 33 (two 32-row groups, as at 48): 2x2x1x8x2 (2 rows x 2 units x 4 gates = 16 sums a
//   thread, 512 threads a workgroup), ahead at batch 48, 64, 128 and 256; batch 96 measured the
//   other way, one shape between wins on both sides, not made a rule.
// - float32 everywhere else, and float16 at every batch and hidden: 2x1x1x8x4 (4 rows x 2
//   units, 32 sums a thread, 256 threads), ahead at every other shape measured, and ahead of
//   step.comp from batch 16 at hidden 512 (hence BATCHED_FROM 16 there).
// Why, as far as the figures say (a reading, not a model fitted to them): a tile of TB rows x
// UPT units feeds TB x UPT x 4 multiply-adds with one read of h and UPT of R, so more sums a
// thread cut the loads that set v4's time; 32 sums need about 100 registers, and their
// workgroup has half the threads of the 16-sum tile's (both cover 32 batch rows x 8 units, so
// both make the same number of workgroups). The 16-sum tile's twice as many threads in flight
// hide R's float32 loads better, which paid at hidden 512 only; the workgroup count (256 at
// 200x48x512 and 200x64x512, 512 at 200x128x512, but also 512 at 100x64x1024, where 32 sums
// won) does not separate the shapes, so the rule is by hidden size and batch, as measured.
// Float16 R is half the bytes a load, and the 32-sum tile won at every shape.
//
// Portability. Every tile here is checked below (static_assert) against what batchedVariant
// keeps on every device: step_tiled.comp's shared memory, max(ksplit / 2, 1) slots of by x 32
// threads' rows x upt x 4 float sums, within TILED_SHARED_BYTES, Vulkan's guaranteed 16 KiB
// (both tiles use exactly 16 KiB: rows x upt x by x ksplit / 2 = 32), and at most 1024
// invocations a workgroup (256 and 512 here; v4's 1x2x1x8 default used 512 already). Vulkan
// guarantees only 128 invocations: every desktop driver and lavapipe give 1024, and
// batchedVariant does not yet clamp to a device's own maxComputeWorkGroupInvocations. The
// kernels use no subgroup operations: a "warp" is the workgroup's x dimension of 32 lanes,
// so on a device whose subgroups are 64 wide (AMD wave64) or narrower than 32 (Intel's 8-32,
// lavapipe's 8, where the tests run) the bits are the same and only the speed differs (two
// 32-lane rows a wave64 subgroup, or a row over several narrow ones; the h and R reads of one
// row stay contiguous either way). Those tiles' speed there is
// unmeasured: a device other than the H200 runs the H200's choice until it is measured
// (bench/step_kernels.py, `STAGE=steps`), and any tile can be set by hand (the overrides in
// VariantSettings, ortops.variants.BATCHED_* from Python).
// The batch from which the step runs a batched kernel, by hidden size: the last row whose
// fromHidden is at most the layer's. At hidden 512 and 1024 the 4-row tile beats step.comp
// from batch 16; at hidden 128 and 256 it loses there (a 32-row tile half empty, the lanes
// kernel latency-bound but cheap), so below hidden 384 (halfway to 512) it starts at batch 32.
// The figures: docs/perf.md, "Kernel choices".
// One row of a table of from-batches by hidden size (BATCHED_FROM, COOPMAT_STEPS_FROM): from
// hidden `fromHidden` up, the kernel runs from `batch`; the last row whose fromHidden is at most
// the layer's applies, and each table's first row covers every hidden size (fromBatchFor).
struct FromBatchRule
{
    uint32_t fromHidden;
    uint32_t batch;
};
inline constexpr FromBatchRule BATCHED_FROM[] = { { 0, 32 }, { 384, 16 } };
// VariantSettings::batchedFrom's default: the table above (0: never; any other value: from
// that batch at every hidden size).
inline constexpr uint32_t BATCHED_FROM_TABLE = 0xFFFFFFFFu;
static_assert(BATCHED_FROM[0].fromHidden == 0, "BATCHED_FROM: the first row covers every hidden size");
inline constexpr BatchedTileRule BATCHED_TILES[] = {
    { false, 0, 0, ANY_HIDDEN, { 2, 1, 1, 8, 4 } },   // float32: 4 rows x 2 units
    { false, 33, 384, 768, { 2, 2, 1, 8, 2 } },       // float32, hidden about 512, from batch 33:
                                                      // 2 rows x 2 units, 2 groups
    { true, 0, 0, ANY_HIDDEN, { 2, 1, 1, 8, 4 } },    // float16: 4 rows x 2 units
};

// The shared memory glsl/step_tiled.comp may use: Vulkan's guaranteed minimum of
// maxComputeSharedMemorySize (its tiles are clamped to fit on every device).
inline constexpr uint32_t TILED_SHARED_BYTES = 16384;
// Invocations a batched-kernel workgroup (32 x by x ksplit) may have.
inline constexpr uint32_t BATCHED_MAX_INVOCATIONS = 1024;

// Whether `k` is a valid batchedKsplit (1, 2, 4, 8) / batchedRows (1, 2, 4, 8) value.
constexpr bool
validSplit(uint32_t k)
{
    return k == 1 || k == 2 || k == 4 || k == 8;
}

// Whether a tile is valid and runs as it is written: batchedVariant clamps nothing of it at a
// hidden size of at least rows x upt x by.
constexpr bool
tileFits(const BatchedTile& t)
{
    uint32_t slots = t.ksplit > 1 ? t.ksplit / 2 : 1;
    bool shared = t.rows == 1 || t.rows * t.upt * 4 * t.by * 32 * slots * 4 <= TILED_SHARED_BYTES;
    return validSplit(t.ksplit) && validSplit(t.rows) && t.upt >= 1 && t.by >= 1 && t.prefetch >= 1 && shared &&
           32 * t.by * t.ksplit <= BATCHED_MAX_INVOCATIONS;
}

constexpr bool
tableIsWellFormed()
{
    // Each element type's first row matches every layer, every row's hidden range is not
    // empty, and every tile fits.
    bool seen[2] = { false, false };
    for (const auto& r : BATCHED_TILES) {
        int i = r.float16 ? 1 : 0;
        bool everything = r.fromBatch == 0 && r.fromHidden == 0 && r.belowHidden == ANY_HIDDEN;
        if (!tileFits(r.tile) || r.fromHidden >= r.belowHidden || (!seen[i] && !everything)) {
            return false;
        }
        seen[i] = true;
    }
    return seen[0] && seen[1];
}
static_assert(tableIsWellFormed(), "BATCHED_TILES: each element type's first row matches every layer, hidden "
                                   "ranges not empty, every tile valid and within 16 KiB and 1024 invocations");

// The table's tile for a layer of this hidden size and element type at this batch.
BatchedTile
defaultBatchedTile(uint32_t hidden, uint32_t batch, bool float16);

// ---------------------------------------------------------------- matrix-unit steps
//
// Mode "fast", float16 layers, a device with VK_KHR_cooperative_matrix (the projection's
// conditions, src/core/rnn/layer.cpp useCoopmat) and the cells' default activations: from the
// batch of COOPMAT_STEPS_FROM the step runs glsl/step_coopmat.comp, R . h on the matrix units
// (16 units x the pass's gates x 16 NBT batch rows a workgroup) instead of the portable step
// kernels above. Why from these batches (the figures: docs/modes.md, "Fast mode"): from batch 4
// the matrix units win at every hidden size measured; a step of one row is latency-bound, and
// the matrix kernel's k loop of 64-wide slices (two barriers each) is longer than step.comp's
// lane walk until hidden 1024 (so batch 1 from 896, halfway from 768); batch 2 wins from hidden
// 512 and is unmeasured below (so from 384, halfway from 256).
// Coalescing (Layer::run) does not carry a request below the table's batch into a run at or
// above it: from batch 2, lone batch-1 requests of such a layer are not coalesced at all.
inline constexpr FromBatchRule COOPMAT_STEPS_FROM[] = { { 0, 4 }, { 384, 2 }, { 896, 1 } };
static_assert(COOPMAT_STEPS_FROM[0].fromHidden == 0, "COOPMAT_STEPS_FROM: the first row covers every hidden size");
// VariantSettings::coopmatStepsFrom's default: the table above (0: never; any other value:
// from that batch at every hidden size).
inline constexpr uint32_t COOPMAT_STEPS_TABLE = 0xFFFFFFFFu;
// The batch blocks a workgroup (NBT): two where that still leaves COOPMAT_PAIR_GROUPS
// workgroups in the step's grid, else one. One block wins up to 256 workgroups of one block;
// from 512, where one block's workgroups each re-read R from L2 for only 16 rows, two win.
// Four blocks won nowhere; COOPMAT_BLOCKS = 4 still runs them (docs/perf.md, "Kernel choices").
inline constexpr uint32_t COOPMAT_PAIR_GROUPS = 256;

// ---------------------------------------------------------------- the whole-sequence kernel
//
// glsl/step_sequence.comp: one dispatch walks every time step (a workgroup per direction and
// NB batch rows, a barrier per step, R read from the batched layout RB), with the step
// kernels' bits (the same class sums and tree, cell.glsl's update). It replaces key.steps
// dispatches (and host barriers) by one, but puts each direction's R through one workgroup, so
// it wins where the per-dispatch cost dominates: everywhere measured on a CPU implementation
// of Vulkan, and on a GPU only where R of a direction fits one compute unit's cache and the
// batch is small. The rules by device class: the last row of the device's class (`cpu`:
// DeviceDescription::type "cpu", else a GPU) whose limits the layer is within chooses it.
// On a GPU it loses from hidden 128 (on the H200): R of a direction is 147 KB at hidden 96, held
// in a compute unit's L1 (256 KB on Hopper), and 256 KB at 128, streamed from L2 through one
// unit every step. Hence hidden up to 96 and batch up to 32, the largest measured (a workgroup a
// batch row and direction: 64 workgroups on 132 units). On lavapipe it wins at every hidden size
// measured, up to 512 (R_REGS; 1024 unmeasured), and every batch measured, up to 64; beyond,
// the step kernels. The figures: docs/perf.md, "Kernel choices". The first run of a shape
// compiles its fully unrolled walk, seconds on lavapipe (Mesa's disk cache keeps it after).
inline constexpr uint32_t SEQUENCE_CPU_MAX_HIDDEN = 512;
inline constexpr uint32_t SEQUENCE_CPU_MAX_BATCH = 64;
inline constexpr uint32_t SEQUENCE_GPU_MAX_HIDDEN = 96;
inline constexpr uint32_t SEQUENCE_GPU_MAX_BATCH = 32;
struct SequenceRule
{
    bool cpu;
    uint32_t maxHidden;
    uint32_t maxBatch;
};
inline constexpr SequenceRule SEQUENCE_STEPS[] = {
    { true, SEQUENCE_CPU_MAX_HIDDEN, SEQUENCE_CPU_MAX_BATCH },   // lavapipe, measured
    { false, SEQUENCE_GPU_MAX_HIDDEN, SEQUENCE_GPU_MAX_BATCH },   // GPUs, measured on the H200
};
// The largest hidden size whose rows of R a thread holds (R_REGS: gates x hidden floats a
// thread; lavapipe's JIT unrolls the product fully, 32 K multiply-adds a step at 4 x 1024).
inline constexpr uint32_t SEQUENCE_R_REGS_MAX = 1024;
// With R in registers on a CPU device, the units a thread owns (glsl/step_sequence.comp's UPT):
// each broadcast of h then feeds more multiply-adds; four units ran a little faster than two
// but took over twice as long to compile (docs/perf.md, "Kernel choices").
inline constexpr uint32_t SEQUENCE_CPU_UNITS = 2;
// VariantSettings::sequenceSteps: SEQUENCE_STEPS_TABLE (the rules above, or the environment's
// ORTOPS_SEQUENCE_STEPS=0/1 where set), 0 never, 1 wherever it fits (shared memory, threads).
inline constexpr uint32_t SEQUENCE_STEPS_TABLE = 0xFFFFFFFFu;

// ---------------------------------------------------------------- the persistent kernel
//
// glsl/step_persistent.comp (issue 45; rnn/persistent.hpp has its split and its run): every step
// of a layer run in one grid of at most one workgroup per compute unit, each holding a slice of
// R in shared memory for the whole run, a grid barrier a step; h goes through device memory. The
// step kernels' bits (glsl/step.comp's sums, cell.glsl's update), so a grid that fails (too few
// workgroups at once, a barrier not met) is run again on them with the same result. For the
// latency regime, where a layer is a chain of dependent dispatches: on the H200 the
// recognizer's layer (bidirectional 80x1x256 float32) took 0.369 ms, about 4.6 us a step
// against well under a microsecond of arithmetic.
// The rules: the first row of the device's class whose cells and hidden range hold a layer
// decides it, chosen up to batch `maxBatch` (0: never; no row: never) where its R fits the
// shared memory of one workgroup per compute unit (the device must report its compute units:
// VK_NV_shader_sm_builtins), with the shader's DESIGN `design` where that split fits, else
// design 0 (one grid barrier a step). GPUs: the exchange (DESIGN 28: h and its step in one
// 64-bit word, no grid barrier; prefetched rows, a shuffle tree), for LSTMs from hidden 64 the
// batches of the rows below, where it beat the whole-sequence and step kernels (each row ends
// where the whole-sequence kernel won: hidden 64 at batch 3, 79 at 5, 80 at 7), every other
// layer from above the whole-sequence kernel's hidden sizes at batches 1-4 (at batch 8 the step
// kernels won for hidden 384 and a GRU). The figures: docs/perf.md, "Kernel choices"
// (bench/persistent_rule.py).
// CPU implementations never: lavapipe runs a workgroup a thread to its end, so a grid needs as
// many threads as workgroups and each wait a trip through the scheduler.
struct PersistentRule
{
    bool cpu;
    bool lstmOnly;   // LSTM layers only, else every cell
    uint32_t fromHidden, toHidden;
    uint32_t maxBatch;
    uint32_t design;
};
inline constexpr PersistentRule PERSISTENT_STEPS[] = {
    { true, false, 0, ANY_HIDDEN, 0, 0 },                               // CPU implementations: never
    { false, true, 64, 67, 2, 28 },                                     // GPU LSTMs of 64-67: batches 1-2
    { false, true, 68, 79, 4, 28 },                                     // 68-79: 1-4
    { false, true, 80, 87, 6, 28 },                                     // 80-87: 1-6
    { false, true, 88, 256, 8, 28 },                                    // GPU LSTMs to hidden 256
    { false, false, SEQUENCE_GPU_MAX_HIDDEN + 1, ANY_HIDDEN, 4, 28 },   // other GPU layers
};
// VariantSettings::persistentSteps: PERSISTENT_STEPS_TABLE (the rules above; the environment's
// ORTOPS_PERSISTENT_STEPS=0 switches the kernel off), 0 never, 1 wherever it can run.
inline constexpr uint32_t PERSISTENT_STEPS_TABLE = 0xFFFFFFFFu;

// ---------------------------------------------------------------- the CPU projection
//
// glsl/input_projection_cpu.comp: the input projection for CPU implementations of Vulkan, an
// invocation 4 columns of Xw walking every row 8 at a time, X shared across the subgroup by
// broadcast; the tiled kernel's sums, so the same bits (tests/test_cpu_projection.py).
// Chosen by device class (DeviceDescription::type "cpu"; GPUs keep the tiled kernel: their
// rows unmeasured). Why each constant: src/core/rnn/cpu_projection.cpp; the figures:
// docs/perf.md, "Kernel choices".
inline constexpr uint32_t CPU_PROJECTION_TABLE = 0xFFFFFFFFu;
// VariantSettings::cpuProjection: CPU_PROJECTION_TABLE (CPU devices, or ORTOPS_CPU_PROJECTION
// = 0 / 1 where set), 0 never, 1 on every device.
struct CpuProjection
{
    uint32_t rows;      // MR: Xw rows a walk over the input
    uint32_t threads;   // columns a workgroup
    bool wRegs;         // W's row in a private array (the k loop unrolled)
    uint32_t columns;   // NC: columns an invocation (1 with wRegs)
};
struct VariantSettings;
// Whether a layer's projection runs the CPU kernel on a device of this class, and its split
// for an input of this size (the settings' cpuProjectionRows overriding the rows).
// (It shares X across a subgroup: a device whose subgroups are 4 to 64 lanes.)
bool
cpuProjection(bool cpu, uint32_t subgroupSize, const VariantSettings& s);
CpuProjection
cpuProjectionVariant(uint32_t input, const VariantSettings& s);

struct VariantSettings;
// The whole-sequence kernel's split: `nb` batch rows a workgroup, `threads` invocations (each
// owns cells u + hidden * j, j < nb, strided by threads), `sharedBytes` of h planes, and
// `rRegs`: each thread holds its unit's rows of R in a private array (glsl/step_sequence.comp's
// R_REGS; CPU devices, one batch row and one unit a thread, hidden up to SEQUENCE_R_REGS_MAX).
// `lanes`: with rRegs, the subgroup size whose lanes share h by broadcast (the shader's LANES;
// threads then ceil(hidden / units) rounded up to it), or 0.
struct SequenceVariant
{
    uint32_t nb, threads, sharedBytes;
    bool rRegs;
    uint32_t lanes = 0;
    uint32_t units = 1;   // with lanes: units a thread (the shader's UPT)
};
// The split for a layer of this hidden size at this batch (nb: the settings' sequenceRows or 1)
// on a device of this class within its limits (maxInvocations threads a workgroup), whose
// subgroups have subgroupSize lanes (0: unknown, no broadcast).
SequenceVariant
sequenceVariant(uint32_t hidden, uint32_t batch, bool gruTwoPass, bool cpu, uint32_t maxInvocations,
                const VariantSettings& s, uint32_t subgroupSize = 0);
// Whether a layer runs the whole-sequence kernel on a device of this class (`cpu`) whose
// workgroups have maxShared bytes of shared memory and maxInvocations threads: the settings,
// else ORTOPS_SEQUENCE_STEPS, else the table; never where its h planes do not fit.
bool
sequenceSteps(uint32_t hidden, uint32_t batch, bool gruTwoPass, bool cpu, uint32_t maxShared, uint32_t maxInvocations,
              const VariantSettings& s);

// The tunables a plan reads when it is recorded (tests and benchmarks may change them; the
// Python door sends ortops.variants' values with every call). `batchedFrom`: the batch from
// which the step runs a batched kernel (BATCHED_FROM_TABLE: by hidden size; 0: never). The tile fields override the table above
// field by field, 0 (BATCHED_TABLE) leaving the table's value for the run's element type and
// batch: `batchedUpt` and `batchedBy` and `batchedRows` by element type, `batchedPrefetch` and
// `batchedKsplit` for both; `batchedRows` 1 is v4 (glsl/step_batched.comp), 2, 4 or 8 v5.
inline constexpr uint32_t BATCHED_TABLE = 0;
struct VariantSettings
{
    uint32_t batchedFrom = BATCHED_FROM_TABLE;
    uint32_t batchedUptFloat32 = BATCHED_TABLE;
    uint32_t batchedUptFloat16 = BATCHED_TABLE;
    uint32_t batchedByFloat32 = BATCHED_TABLE;
    uint32_t batchedByFloat16 = BATCHED_TABLE;
    uint32_t batchedPrefetch = BATCHED_TABLE;
    uint32_t batchedKsplit = BATCHED_TABLE;
    uint32_t batchedRowsFloat32 = BATCHED_TABLE;
    uint32_t batchedRowsFloat16 = BATCHED_TABLE;
    uint64_t largeProjection = LARGE_PROJECTION;
    uint32_t maxGroups = MAX_GROUPS;
    // Matrix-unit steps (above): from this batch (COOPMAT_STEPS_TABLE: by COOPMAT_STEPS_FROM;
    // 0: never), with this many 16-row batch blocks a workgroup (0: by COOPMAT_PAIR_GROUPS; 1,
    // 2, 4).
    uint32_t coopmatStepsFrom = COOPMAT_STEPS_TABLE;
    uint32_t coopmatBlocks = BATCHED_TABLE;
    // The whole-sequence kernel (above): whether (SEQUENCE_STEPS_TABLE: by SEQUENCE_STEPS; 0
    // never; 1 wherever it fits), with this many batch rows a workgroup (0: one).
    uint32_t sequenceSteps = SEQUENCE_STEPS_TABLE;
    uint32_t sequenceRows = BATCHED_TABLE;
    // With R in registers, h shared by subgroup broadcast (0: where the subgroup size allows;
    // 1 never; 2 the same as 0, named for symmetry with cpuProjectionWRegs).
    uint32_t sequenceBroadcast = BATCHED_TABLE;
    uint32_t sequenceUnits = BATCHED_TABLE;   // with the broadcast, units a thread (0: the rule's)
    // The persistent kernel (above): whether (PERSISTENT_STEPS_TABLE: by PERSISTENT_STEPS; 0
    // never; 1 wherever it can run), and the overrides of its split for tests and measurements
    // (0: the rule's): workgroups dispatched, units a workgroup can hold, polls before a wait
    // gives up, occupancy discovery (1 off: every dispatched workgroup takes part; 2 on), and
    // the piece run (1: the barriers only, no arithmetic: a profile, wrong results).
    uint32_t persistentSteps = PERSISTENT_STEPS_TABLE;
    uint32_t persistentGroups = BATCHED_TABLE;
    uint32_t persistentUnits = BATCHED_TABLE;
    uint32_t persistentSpins = BATCHED_TABLE;
    uint32_t persistentDiscovery = BATCHED_TABLE;
    uint32_t persistentPiece = BATCHED_TABLE;
    uint32_t persistentDesign = BATCHED_TABLE;   // the shader's DESIGN bits + 1 (0: the rule's)
    // The CPU projection (above): whether (CPU_PROJECTION_TABLE: CPU devices; 0 never; 1
    // always), with this many Xw rows a walk (0: the rule's) and W in registers (0: the
    // rule's, 1 never, 2 always).
    uint32_t cpuProjection = CPU_PROJECTION_TABLE;
    uint32_t cpuProjectionRows = BATCHED_TABLE;
    uint32_t cpuProjectionWRegs = BATCHED_TABLE;
    uint32_t cpuProjectionColumns = BATCHED_TABLE;   // NC (0: the rule's)
    // The portable projection's staged slices (projectionSlices below; issue 32, item 5, measured
    // attempts, off by default): k a slice (0: 16; 16; 32) and slices in shared memory (0: 1; 1; 2).
    uint32_t projectionKt = BATCHED_TABLE;
    uint32_t projectionStages = BATCHED_TABLE;
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

// The portable projection's staged slices (glsl/input_projection.comp's KT and STAGES): `kt` k a
// slice, `stages` slices in shared memory (2: the next staged while this one is read, one
// barrier a slice). What ships: 16 x 1. The settings ask for more; kt 32 is kept only where the input size K is a
// multiple of 32 (so that no slice pads past K where a 16-wide one would not: the same terms,
// the same bits), and each is dropped (stages first) where the two operands' slices,
// 2 x 16 tpt x kt x stages floats, exceed the device's shared memory (maxShared bytes). Every
// choice sums each output in increasing k from +0: the same bits (tests/test_projection_slices.py).
struct ProjectionSlices
{
    uint32_t kt, stages;
};
ProjectionSlices
projectionSlices(uint32_t tpt, uint32_t input, uint32_t maxShared, const VariantSettings& s);

struct StepVariant
{
    uint32_t nb, units, rpt, rows;
    uint32_t ty() const { return rows / rpt; }
};

// The batched kernels' split as a plan records it (the table's tile or the overrides, clamped
// to the layer): 32 batch rows per workgroup, `by` groups of `rows` x `upt` units (rows: batch
// rows per thread, and so lanes along the units), `ksplit` threads a walk.
struct BatchedVariant
{
    uint32_t upt, by, prefetch, ksplit, rows;
    uint32_t units() const { return upt * by * rows; }
    // The shader: the register tile (v5) for more than one row a thread.
    std::string_view shader() const { return rows > 1 ? "step_tiled" : "step_batched"; }
};

// StepKernel::Lanes ("step": lanes split each product; latency-bound small batches) or
// StepKernel::Batched ("step_batched": the batched layouts, R as RB, h in transposed planes;
// the shader is BatchedVariant::shader()). (The matrix-unit steps are the layer's choice.)
StepKernel
stepKernel(uint32_t batch, uint32_t hidden, const VariantSettings& s);
// The batch from which a layer of this hidden size runs a batched kernel (0: never).
uint32_t
batchedFromFor(uint32_t hidden, const VariantSettings& s);

// The tile of a layer of this hidden size and element type at this batch: the table's
// (defaultBatchedTile), each field the settings override replaced, clamped to what the layer
// and every device allow (no more units than the layer has, at most 1024 invocations, the
// register tile's shared memory within TILED_SHARED_BYTES).
BatchedVariant
batchedVariant(uint32_t hidden, uint32_t batch, bool float16, const VariantSettings& s);

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

// The lanes kernel's split (glsl/step.comp) for a pass computing gatesInPass gates at this
// batch, of float16 or float32 layers in a mode.
StepVariant
stepVariant(uint32_t batch, uint32_t gatesInPass, bool float16, Mode mode);

// The batch from which a float16 layer in mode "fast" runs glsl/step_coopmat.comp where the
// device can (0: never), and that kernel's 16-row batch blocks a workgroup for a grid of
// ceil(hidden / 16) x dirs x ceil(batch / (16 blocks)) workgroups.
uint32_t
coopmatStepsFrom(uint32_t hidden, const VariantSettings& s);
// A from-batch table's batch for this hidden size (its last row whose fromHidden is at most
// `hidden`).
template<size_t N>
constexpr uint32_t
fromBatchFor(const FromBatchRule (&rules)[N], uint32_t hidden)
{
    uint32_t from = rules[0].batch;
    for (const auto& r : rules) {
        if (r.fromHidden <= hidden) {
            from = r.batch;
        }
    }
    return from;
}
uint32_t
coopmatBlocks(uint32_t hidden, uint32_t batch, uint32_t dirs, const VariantSettings& s);

// (PASS constant, gates computed) of each step pass of one time step.
std::vector<std::pair<uint32_t, uint32_t>>
stepPasses(bool gruTwoPass, uint32_t gates);

} // namespace ortops
