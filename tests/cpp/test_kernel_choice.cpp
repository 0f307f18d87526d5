// The kernel choice (src/core/rnn/variants.hpp): which step kernel a batch and hidden size get
// (BATCHED_FROM), the batched kernels' tiles (BATCHED_TILES and their clamps), the matrix-unit
// steps' from-batch and blocks, the lanes kernel's split, and that a layer records what they
// choose (its plan pool names the step shader, its scratch holds the batched planes).
// tests/test_plan_pool.py checks the same tables through the Python door.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "vk/devices.hpp"
#include "support.hpp"
#include "rnn/variants.hpp"

using namespace ortops;

namespace {

bool
operator==(const BatchedVariant& v, const BatchedTile& t)
{
    return v.upt == t.upt && v.by == t.by && v.prefetch == t.prefetch && v.ksplit == t.ksplit && v.rows == t.rows;
}

bool
sameTile(const BatchedTile& a, const BatchedTile& b)
{
    return a.upt == b.upt && a.by == b.by && a.prefetch == b.prefetch && a.ksplit == b.ksplit && a.rows == b.rows;
}

// Restores the process-wide variant settings a test changes.
struct KeepVariantSettings
{
    VariantSettings saved = variantSettings();
    ~KeepVariantSettings() { setVariantSettings(saved); }
};

// The step kernel a run of `batch` rows (2 steps) records on this layer.
std::string
recordedSteps(Layer& layer, const test::Model& m, uint32_t batch)
{
    test::runOnce(layer, m, test::makeRequest(m, 2, batch, batch));
    for (const PlanPoolInfo& p : layer.planPools()) {
        if (p.batch == batch) {
            REQUIRE(p.freeSteps.size() == 1);
            return p.freeSteps[0];
        }
    }
    FAIL("no plan of batch " << batch);
    return std::string();
}

} // namespace

TEST_SUITE("kernel choice")
{
    TEST_CASE("the step kernel is batched from BATCHED_FROM's batch for the hidden size")
    {
        VariantSettings s;
        // Below hidden 384 from batch 32, from 384 up from batch 16 (variants.hpp's measurements).
        CHECK(batchedFromFor(8, s) == 32);
        CHECK(batchedFromFor(383, s) == 32);
        CHECK(batchedFromFor(384, s) == 16);
        CHECK(batchedFromFor(4096, s) == 16);
        CHECK(stepKernel(31, 8, s) == StepKernel::Lanes);
        CHECK(stepKernel(32, 8, s) == StepKernel::Batched);
        CHECK(stepKernel(16, 383, s) == StepKernel::Lanes);
        CHECK(stepKernel(15, 384, s) == StepKernel::Lanes);
        CHECK(stepKernel(16, 384, s) == StepKernel::Batched);
        CHECK(stepKernel(1, 4096, s) == StepKernel::Lanes);
    }

    TEST_CASE("the batchedFrom setting replaces the table: 0 never, any other batch at every hidden size")
    {
        VariantSettings never;
        never.batchedFrom = 0;
        CHECK(batchedFromFor(512, never) == 0);
        CHECK(stepKernel(100000, 512, never) == StepKernel::Lanes);
        VariantSettings from2;
        from2.batchedFrom = 2;
        CHECK(stepKernel(1, 8, from2) == StepKernel::Lanes);
        CHECK(stepKernel(2, 8, from2) == StepKernel::Batched);
        CHECK(stepKernel(2, 1024, from2) == StepKernel::Batched);
    }

    TEST_CASE("from-batch tables: the last row whose fromHidden is at most the hidden size")
    {
        CHECK(fromBatchFor(BATCHED_FROM, 0) == 32);
        CHECK(fromBatchFor(COOPMAT_STEPS_FROM, 383) == 4);
        CHECK(fromBatchFor(COOPMAT_STEPS_FROM, 384) == 2);
        CHECK(fromBatchFor(COOPMAT_STEPS_FROM, 895) == 2);
        CHECK(fromBatchFor(COOPMAT_STEPS_FROM, 896) == 1);
        VariantSettings s;
        CHECK(coopmatStepsFrom(256, s) == 4);
        CHECK(coopmatStepsFrom(1024, s) == 1);
        s.coopmatStepsFrom = 0;
        CHECK(coopmatStepsFrom(1024, s) == 0);
    }

    TEST_CASE("the default tiles are the table's rows the H200 measured")
    {
        const BatchedTile f32{ 2, 1, 1, 8, 4 }, f32h512{ 2, 2, 1, 8, 2 }, f16{ 2, 1, 1, 8, 4 };
        CHECK(sameTile(defaultBatchedTile(512, 32, false), f32));
        CHECK(sameTile(defaultBatchedTile(512, 33, false), f32h512));
        CHECK(sameTile(defaultBatchedTile(383, 64, false), f32));
        CHECK(sameTile(defaultBatchedTile(384, 64, false), f32h512));
        CHECK(sameTile(defaultBatchedTile(767, 256, false), f32h512));
        CHECK(sameTile(defaultBatchedTile(768, 64, false), f32));
        CHECK(sameTile(defaultBatchedTile(512, 64, true), f16));
        CHECK(sameTile(defaultBatchedTile(8, 32, true), f16));
        for (const auto& rule : BATCHED_TILES) {
            CHECK(tileFits(rule.tile));
        }
    }

    TEST_CASE("batchedVariant takes the table's tile at large hidden sizes and clamps it to small ones")
    {
        VariantSettings s;
        CHECK(batchedVariant(512, 64, false, s) == BatchedTile{ 2, 2, 1, 8, 2 });
        CHECK(batchedVariant(1024, 64, true, s) == BatchedTile{ 2, 1, 1, 8, 4 });
        CHECK(batchedVariant(512, 64, false, s).shader() == "step_tiled");
        // Hidden 1: one unit a thread, one group.
        BatchedVariant one = batchedVariant(1, 32, false, s);
        CHECK(one.upt == 1);
        CHECK(one.by == 1);
        // v4 (one row a thread) when the rows override says 1.
        s.batchedRowsFloat32 = 1;
        CHECK(batchedVariant(512, 64, false, s).shader() == "step_batched");
    }

    TEST_CASE("overrides are clamped to 1024 invocations and 16 KiB of shared memory")
    {
        VariantSettings s;
        s.batchedRowsFloat32 = 8;
        s.batchedUptFloat32 = 4;
        s.batchedByFloat32 = 16;
        s.batchedKsplit = 8;
        BatchedVariant v = batchedVariant(4096, 256, false, s);
        uint32_t slots = v.ksplit > 1 ? v.ksplit / 2 : 1;
        CHECK(v.rows * v.upt * 4 * v.by * 32 * slots * 4 <= TILED_SHARED_BYTES);
        CHECK(32 * v.by * v.ksplit <= BATCHED_MAX_INVOCATIONS);
        CHECK(v.upt == 1);   // 8 rows x 4 slots = 32 sums a slot row already: one unit a thread
        CHECK(v.by == 1);
        CHECK(v.rows == 8);
    }

    TEST_CASE("the lanes kernel's split, the projection tile, the passes and the grid")
    {
        auto split = [](uint32_t batch, uint32_t gates, bool float16, Mode mode = Mode::Deterministic) {
            StepVariant v = stepVariant(batch, gates, float16, mode);
            CHECK(v.ty() * v.rpt == v.rows);
            return std::array<uint32_t, 4>{ v.nb, v.units, v.rpt, v.rows };
        };
        CHECK(split(1, 4, false) == std::array<uint32_t, 4>{ 1, 2, 1, 8 });
        CHECK(split(8, 3, true) == std::array<uint32_t, 4>{ 8, 2, 1, 6 });
        CHECK(split(5, 1, true) == std::array<uint32_t, 4>{ 5, 8, 1, 8 });
        // float32 at batch 2-8: LANES_FLOAT32_NB rows a workgroup
        CHECK(split(8, 4, false) == std::array<uint32_t, 4>{ LANES_FLOAT32_NB, 2, 1, 8 });
        CHECK(split(5, 1, false) == std::array<uint32_t, 4>{ LANES_FLOAT32_NB, 8, 1, 8 });
        CHECK(split(8, 4, false, Mode::Fast) == std::array<uint32_t, 4>{ LANES_FLOAT32_NB, 2, 1, 8 });
        // mode exact keeps up to 8 (its flushes make the chain arithmetic, variants.hpp)
        CHECK(split(8, 4, false, Mode::Exact) == std::array<uint32_t, 4>{ 8, 2, 1, 8 });
        CHECK(split(5, 1, false, Mode::Exact) == std::array<uint32_t, 4>{ 5, 8, 1, 8 });
        CHECK(split(9, 4, false) == std::array<uint32_t, 4>{ 8, 4, 4, 16 });
        CHECK(split(9, 4, true) == std::array<uint32_t, 4>{ 8, 4, 4, 16 });
        CHECK(split(64, 2, false) == std::array<uint32_t, 4>{ 8, 4, 2, 8 });
        CHECK(projectionTpt(LARGE_PROJECTION - 1, LARGE_PROJECTION) == 4);
        CHECK(projectionTpt(LARGE_PROJECTION, LARGE_PROJECTION) == 8);
        CHECK(projectionTile(8) == 128);
        CHECK(stepPasses(true, 3) == std::vector<std::pair<uint32_t, uint32_t>>{ { 1, 2 }, { 2, 1 } });
        CHECK(stepPasses(false, 4) == std::vector<std::pair<uint32_t, uint32_t>>{ { 0, 4 } });
        CHECK(gridGroups(64ull * 70000, MAX_GROUPS) == MAX_GROUPS);
        CHECK(gridGroups(65, 2) == 2);
        CHECK(gridGroups(1, MAX_GROUPS) == 1);
    }

    TEST_CASE("the matrix-unit steps take two batch blocks a workgroup from COOPMAT_PAIR_GROUPS workgroups")
    {
        VariantSettings s;
        // ceil(hidden / 16) x dirs x ceil(batch / 32) workgroups of two blocks.
        CHECK(coopmatBlocks(512, 64, 2, s) == 1);    // 32 x 2 x 2 = 128
        CHECK(coopmatBlocks(1024, 64, 2, s) == 2);   // 64 x 2 x 2 = 256
        s.coopmatBlocks = 4;
        CHECK(coopmatBlocks(16, 1, 1, s) == 4);
    }

    TEST_CASE("setVariantSettings refuses invalid tunables and keeps the settings it had")
    {
        KeepVariantSettings keep;
        VariantSettings bad;
        bad.batchedKsplit = 3;
        CHECK_THROWS_WITH_AS(setVariantSettings(bad), "ortops: the batched kernel's ksplit must be 1, 2, 4 or 8, got 3",
                             std::invalid_argument);
        bad = VariantSettings{};
        bad.batchedRowsFloat16 = 16;
        CHECK_THROWS_WITH_AS(setVariantSettings(bad),
                             "ortops: the batched kernel's rows per thread must be 1, 2, 4 or 8, got 16",
                             std::invalid_argument);
        bad = VariantSettings{};
        bad.coopmatBlocks = 3;
        CHECK_THROWS_WITH_AS(setVariantSettings(bad), "ortops: coopmat_blocks must be 1, 2 or 4 (or 0, the rule's), got 3",
                             std::invalid_argument);
        bad = VariantSettings{};
        bad.maxGroups = 0;
        CHECK_THROWS_WITH_AS(setVariantSettings(bad), "ortops: max_groups must be positive", std::invalid_argument);
        CHECK(variantSettings().batchedKsplit == keep.saved.batchedKsplit);
    }

    TEST_CASE("the table's whole-sequence kernel: up to its class's largest batch (64 on a CPU device, 32 on a GPU)")
    {
        test::Model m = test::makeModel(test::LayerSpec{ "LSTM", 8, 4 });
        // The table's step kernel; the tiled projection, which the choice does not depend on
        // (the CPU projection compiles for seconds a shape on lavapipe: support.hpp).
        LayerSettings table;
        table.variants.cpuProjection = 0;
        auto layer = m.layer(table);
        auto stepsOf = [&](uint32_t batch) { return recordedSteps(*layer, m, batch); };
        bool cpu = layer->device().type == "cpu";
        uint32_t most = cpu ? SEQUENCE_CPU_MAX_BATCH : SEQUENCE_GPU_MAX_BATCH;
        CHECK(stepsOf(1) == "step_sequence");
        CHECK(stepsOf(most) == "step_sequence");
        CHECK(stepsOf(most + 1) == "step_tiled");
    }

    TEST_CASE("a layer records the step kernel the heuristics choose, and the batched layouts with it")
    {
        test::Model m = test::makeModel(test::LayerSpec{ "LSTM", 8, 4 });
        auto layer = m.layer();
        auto stepsOf = [&](uint32_t batch) { return recordedSteps(*layer, m, batch); };
        CHECK(stepsOf(31) == "step");
        CHECK(layer->weightNames() == std::vector<std::string>{ "B", "R", "W" });
        // Batch 32 at hidden 8: the 4-row tile, clamped to hidden 8 (step_tiled), with R's
        // batched layout uploaded on the way.
        CHECK(stepsOf(32) == "step_tiled");
        CHECK(layer->weightNames() == std::vector<std::string>{ "B", "R", "RB", "W" });
        // The batched kernel's scratch holds the transposed planes: 2 for an LSTM, 32 x
        // ceil(8 / 32) positions of 32 padded batch rows, over the lanes kernel's state.
        auto lanes = layer->scratchSizes(2, 31);
        auto batched = layer->scratchSizes(2, 32);
        CHECK(lanes.first == 4ull * 2 * 31 * 4 * 8);
        CHECK(batched.first == 4ull * 2 * 32 * 4 * 8);
        CHECK(batched.second == 4ull * ((2 + 1) * 32 * 8 + 32 * 8 + 2 * 32 * 1 * 32));
        // The settings' batchedFrom moves the choice.
        LayerSettings s = layer->settings();
        s.variants.batchedFrom = 2;
        layer->setSettings(s);
        CHECK(stepsOf(2) == "step_tiled");
    }
}
