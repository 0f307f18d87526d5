// The plan pool (src/core/rnn/layer.cpp): a layer records one plan per shape (key) on first need
// and reuses it; its pool info (Layer::planPools) names each key's fields, how many plans it
// holds and what each free one recorded; the cache keeps at most `planCache` idle keys, least
// recently used first out; and every batch row's bits are the same whatever the batch it runs
// in. tests/test_concurrency.py and tests/test_layer_api.py cover the pool through Python.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "support.hpp"

using namespace ortops;
using namespace ortops::test;

namespace {

const PlanPoolInfo*
poolOf(const std::vector<PlanPoolInfo>& pools, uint32_t seq, uint32_t batch)
{
    for (const PlanPoolInfo& p : pools) {
        if (p.seq == seq && p.batch == batch) {
            return &p;
        }
    }
    return nullptr;
}

// tanh(W x + R h + Wb + Rb) in double, ONNX's RNN forward with its default activation: an
// independent reference for one batch row (row `b` of a layout-0 request).
std::vector<double>
rnnReference(const Model& m, const Request& r, uint32_t b)
{
    uint32_t H = m.spec.hidden, I = m.spec.input;
    std::vector<double> h(H, 0.0), y;
    for (uint32_t t = 0; t < r.seq; t++) {
        std::vector<double> next(H);
        for (uint32_t u = 0; u < H; u++) {
            double sum = double(m.B[u]) + double(m.B[H + u]);
            for (uint32_t k = 0; k < I; k++) {
                sum += double(m.W[u * I + k]) * double(r.X[(t * r.batch + b) * I + k]);
            }
            for (uint32_t k = 0; k < H; k++) {
                sum += double(m.R[u * H + k]) * h[k];
            }
            next[u] = std::tanh(sum);
        }
        h = next;
        y.insert(y.end(), h.begin(), h.end());
    }
    return y;
}

} // namespace

TEST_SUITE("plan pool")
{
    TEST_CASE("a plan is recorded once per shape and reused; the pool info names each key")
    {
        Model m = makeModel(LayerSpec{ "GRU", 8, 4 });
        auto layer = m.layer();
        uint64_t before = coreCounters().plansRecorded;
        for (uint32_t batch : { 1u, 3u, 5u }) {
            runOnce(*layer, m, makeRequest(m, 4, batch, batch));
        }
        CHECK(coreCounters().plansRecorded - before == 3);
        // The same shapes again, other values: no new plan.
        for (uint32_t batch : { 5u, 1u, 3u }) {
            runOnce(*layer, m, makeRequest(m, 4, batch, 100 + batch));
        }
        CHECK(coreCounters().plansRecorded - before == 3);
        auto pools = layer->planPools();
        REQUIRE(pools.size() == 3);
        // Least recently used first: the order of the second round.
        CHECK(pools[0].batch == 5);
        CHECK(pools[1].batch == 1);
        CHECK(pools[2].batch == 3);
        for (const PlanPoolInfo& p : pools) {
            CAPTURE(p.batch);
            CHECK(p.seq == 4);
            CHECK(p.steps == 4);
            CHECK_FALSE(p.hasLens);
            CHECK_FALSE(p.hasH0);
            CHECK(p.outputs == std::array<bool, 3>{ true, true, false });
            CHECK(p.count == 1);
            // The tiled projection, or on a CPU device the CPU one (the same sums).
            REQUIRE(p.freeProjections.size() == 1);
            CHECK((p.freeProjections[0] == "input_projection" || p.freeProjections[0] == "input_projection_cpu"));
            CHECK(p.freeSteps == std::vector<std::string>{ "step" });
        }
    }

    TEST_CASE("optional inputs and other outputs are other keys")
    {
        Model m = makeModel(LayerSpec{ "LSTM", 8, 4 });
        auto layer = m.layer();
        Request plain = makeRequest(m, 3, 2, 1);
        Request full = makeRequest(m, 3, 2, 1, true, true);
        runOnce(*layer, m, plain);
        runOnce(*layer, m, full);
        RunInputs onlyY = plain.inputs(m);
        onlyY.outputs = std::array<bool, 3>{ true, false, false };
        OutputShapes shapes = layer->outputShapes(onlyY);
        CHECK_FALSE(shapes[1].has_value());
        OutputBuffers out(shapes);
        layer->run(onlyY, shapes, out.pointers);
        auto pools = layer->planPools();
        REQUIRE(pools.size() == 3);
        CHECK_FALSE(pools[0].hasLens);
        CHECK((pools[1].hasLens && pools[1].hasH0 && pools[1].hasC0));
        CHECK(pools[2].outputs == std::array<bool, 3>{ true, false, false });
        // The Y of the run without Y_h and Y_c is the full run's Y.
        CHECK(sameBits(out.values[0], runOnce(*layer, m, plain)[0]));
    }

    TEST_CASE("the cache keeps at most planCache idle shapes, the least recently used dropped first")
    {
        Model m = makeModel(LayerSpec{ "RNN", 8, 4 });
        LayerSettings settings = stepKernelSettings();
        settings.planCache = 2;
        auto layer = m.layer(settings);
        for (uint32_t seq : { 1u, 2u, 3u }) {
            runOnce(*layer, m, makeRequest(m, seq, 1, seq));
        }
        auto pools = layer->planPools();
        REQUIRE(pools.size() == 2);
        CHECK(pools[0].seq == 2);
        CHECK(pools[1].seq == 3);
        uint64_t before = coreCounters().plansRecorded;
        runOnce(*layer, m, makeRequest(m, 1, 1, 9));   // dropped: recorded again
        CHECK(coreCounters().plansRecorded - before == 1);
        CHECK(poolOf(layer->planPools(), 2, 1) == nullptr);
    }

    TEST_CASE("new settings drop the idle plans: the next run records under them")
    {
        Model m = makeModel(LayerSpec{ "RNN", 8, 4 });
        auto layer = m.layer();
        runOnce(*layer, m, makeRequest(m, 2, 1, 1));
        REQUIRE(layer->planPools().size() == 1);
        layer->setSettings(layer->settings());
        CHECK(layer->planPools().empty());
        LayerSettings bad = layer->settings();
        bad.planCache = 0;
        CHECK_THROWS_WITH_AS(layer->setSettings(bad), "ortops: max_concurrent and the plan cache must be positive",
                             std::invalid_argument);
    }

    TEST_CASE("every batch row gets the same bits at every batch, lanes and batched kernels alike")
    {
        for (const char* op : { "LSTM", "GRU", "RNN" }) {
            CAPTURE(op);
            Model m = makeModel(LayerSpec{ op, 8, 4 });
            auto layer = m.layer();
            Request big = makeRequest(m, 3, 32, 5, true, true);   // 32: the batched kernel (hidden 8)
            Outputs all = runOnce(*layer, m, big);
            for (uint32_t from : { 0u, 7u, 31u }) {
                Request one = rowsOf(m, big, from, 1);
                CHECK(sameBits(runOnce(*layer, m, one), rowsOf(m, big, all, from, 1)));
            }
            Request five = rowsOf(m, big, 10, 5);
            CHECK(sameBits(runOnce(*layer, m, five), rowsOf(m, big, all, 10, 5)));
            auto pools = layer->planPools();
            const PlanPoolInfo* batched = poolOf(pools, 3, 32);
            REQUIRE(batched != nullptr);
            CHECK(batched->freeSteps == std::vector<std::string>{ "step_tiled" });
        }
    }

    TEST_CASE("the outputs are the recurrence's: an RNN against a float64 reference")
    {
        Model m = makeModel(LayerSpec{ "RNN", 8, 4 });
        auto layer = m.layer();
        Request r = makeRequest(m, 5, 3, 2);
        Outputs o = runOnce(*layer, m, r);
        // The project's float32 contract (ortops/compare.py, docs/design.md "Tolerances"): the
        // largest error scaled by the largest reference value at most 1e-5.
        double worst = 0, largest = 0;
        for (uint32_t b = 0; b < 3; b++) {
            std::vector<double> want = rnnReference(m, r, b);
            for (uint32_t t = 0; t < r.seq; t++) {
                for (uint32_t u = 0; u < m.spec.hidden; u++) {
                    double w = want[t * m.spec.hidden + u];
                    worst = std::max(worst, std::fabs(double(o[0][(t * 3 + b) * m.spec.hidden + u]) - w));
                    largest = std::max(largest, std::fabs(w));
                }
            }
        }
        REQUIRE(largest > 0.1);   // the outputs are not all near zero
        CHECK(worst / largest <= 1e-5);
    }
}
