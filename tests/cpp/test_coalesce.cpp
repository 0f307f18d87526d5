// The coalescer (src/core/rnn/coalesce.hpp): several requests of one key run as one batched run
// give each request the bits it gets alone (Layer::runCoalesced, for every cell, both layouts,
// with and without optional inputs, padded or not); the padding rule, the batch axes and the
// key rule; refusals. Threads driving the coalescer: test_concurrency.cpp.
// tests/test_coalesce.py covers the same through Python (float16, modes, fast mode's steps).
#include <doctest/doctest.h>

#include <stdexcept>

#include "rnn/coalesce.hpp"
#include "support.hpp"

using namespace ortops;
using namespace ortops::test;

namespace {

// Requests of `batches` rows each, run coalesced (padded to `padTo`), each checked against the
// same request run alone on the same layer.
void
checkCoalescedEqualsAlone(const Model& m, Layer& layer, const std::vector<uint32_t>& batches, bool optional,
                          uint32_t padTo = 0)
{
    std::vector<Request> requests;
    for (size_t i = 0; i < batches.size(); i++) {
        requests.push_back(makeRequest(m, 3, batches[i], 40 + static_cast<uint32_t>(i), optional, optional));
    }
    std::vector<RunInputs> inputs;
    std::vector<OutputBuffers> outs;
    std::vector<OutputPointers> pointers;
    for (const Request& r : requests) {
        inputs.push_back(r.inputs(m));
        outs.emplace_back(layer.outputShapes(inputs.back()));
    }
    for (OutputBuffers& o : outs) {
        pointers.push_back(o.pointers);
    }
    uint64_t before = coalesceCounters().requests;
    layer.runCoalesced(inputs, pointers, padTo);
    CHECK(coalesceCounters().requests - before == requests.size());
    for (size_t i = 0; i < requests.size(); i++) {
        CAPTURE(i);
        CHECK(sameBits(outs[i].values, runOnce(layer, m, requests[i])));
    }
}

} // namespace

TEST_SUITE("coalescer")
{
    TEST_CASE("coalesced runs are padded to the next power of two, within maxRows and never below the rows")
    {
        const std::array<uint32_t, 3> cases[] = { { 2, 32, 2 },   { 3, 32, 4 },   { 5, 32, 8 },  { 9, 32, 16 },
                                                  { 17, 32, 32 }, { 32, 32, 32 }, { 20, 24, 24 }, { 24, 24, 24 },
                                                  { 3, 3, 3 },    { 7, 1, 7 } };
        for (const auto& [rows, maxRows, want] : cases) {
            CAPTURE(rows);
            CAPTURE(maxRows);
            CHECK(coalescedRows(rows, maxRows) == want);
        }
    }

    TEST_CASE("the batch axes of each layout")
    {
        BatchAxes zero = BatchAxes::forLayout(0);
        CHECK((zero.x == 1 && zero.lens == 0 && zero.state == 1 && zero.y == 2));
        BatchAxes one = BatchAxes::forLayout(1);
        CHECK((one.x == 0 && one.lens == 0 && one.state == 0 && one.y == 0));
    }

    TEST_CASE("requests share a key when only their batch differs")
    {
        Model m = makeModel(LayerSpec{ "GRU", 8, 4 });
        auto layer = m.layer();
        BatchAxes axes = BatchAxes::forLayout(0);
        auto key = [&](const Request& r, RunInputs& in, OutputShapes& shapes) {
            in = r.inputs(m);
            shapes = layer->outputShapes(in);
            return CoalesceRequest{ &in, &shapes, nullptr, r.batch };
        };
        Request a = makeRequest(m, 4, 2, 1, true, true), b = makeRequest(m, 4, 5, 2, true, true);
        Request longer = makeRequest(m, 5, 2, 3, true, true), bare = makeRequest(m, 4, 2, 4);
        RunInputs ia, ib, il, in0;
        OutputShapes sa, sb, sl, s0;
        CoalesceRequest ra = key(a, ia, sa), rb = key(b, ib, sb), rl = key(longer, il, sl), r0 = key(bare, in0, s0);
        CHECK(sameCoalesceKey(ra, rb, axes));
        CHECK_FALSE(sameCoalesceKey(ra, rl, axes));   // seq differs
        CHECK_FALSE(sameCoalesceKey(ra, r0, axes));   // optional inputs differ
        RunInputs steps = ib;
        steps.steps = 3;
        CoalesceRequest rs{ &steps, &sb, nullptr, 5 };
        CHECK_FALSE(sameCoalesceKey(ra, rs, axes));   // max_length differs
        RunInputs scratch = ib;
        scratch.xwScratch = ScratchRegion{};
        CoalesceRequest rc{ &scratch, &sb, nullptr, 5 };
        CHECK_FALSE(sameCoalesceKey(ra, rc, axes));   // caller scratch: never coalesced
    }

    TEST_CASE("coalesced requests get the bits they get alone, every cell and layout")
    {
        for (const char* op : { "LSTM", "GRU", "RNN" }) {
            for (int layout : { 0, 1 }) {
                CAPTURE(op);
                CAPTURE(layout);
                LayerSpec spec{ op, 8, 4, "bidirectional", "deterministic", layout };
                Model m = makeModel(spec);
                auto layer = m.layer();
                checkCoalescedEqualsAlone(m, *layer, { 2, 1, 3 }, true);
                checkCoalescedEqualsAlone(m, *layer, { 1, 1 }, false, 8);   // six zero rows of padding
            }
        }
    }

    TEST_CASE("coalesced into the batched step kernel, and in exact mode")
    {
        Model m = makeModel(LayerSpec{ "LSTM", 8, 4 });
        auto layer = m.layer();
        checkCoalescedEqualsAlone(m, *layer, { 1, 2, 5 }, true, 32);   // batch 32: step_tiled at hidden 8
        bool batched = false;
        for (const PlanPoolInfo& p : layer->planPools()) {
            batched = batched || (p.batch == 32 && p.freeSteps == std::vector<std::string>{ "step_tiled" });
        }
        CHECK(batched);
        Model exact = makeModel(LayerSpec{ "GRU", 8, 4, "forward", "exact" });
        auto exactLayer = exact.layer();
        checkCoalescedEqualsAlone(exact, *exactLayer, { 3, 1 }, true);
    }

    TEST_CASE("requests that differ in more than their batch are refused")
    {
        Model m = makeModel(LayerSpec{ "GRU", 8, 4 });
        auto layer = m.layer();
        Request a = makeRequest(m, 4, 2, 1, true);
        Request b = makeRequest(m, 5, 2, 2, true);
        Request c = makeRequest(m, 4, 2, 3);
        std::vector<RunInputs> ab{ a.inputs(m), b.inputs(m) }, ac{ a.inputs(m), c.inputs(m) };
        OutputBuffers oa(layer->outputShapes(ab[0])), ob(layer->outputShapes(ab[1])), oc(layer->outputShapes(ac[1]));
        CHECK_THROWS_WITH_AS(layer->runCoalesced(ab, { oa.pointers, ob.pointers }),
                             "ortops: request 1 differs from request 0 in more than its batch size",
                             std::invalid_argument);
        CHECK_THROWS_WITH_AS(layer->runCoalesced(ac, { oa.pointers, oc.pointers }),
                             "ortops: request 1 differs from request 0 in more than its batch size",
                             std::invalid_argument);
        CHECK_THROWS_WITH_AS(layer->runCoalesced(ab, { oa.pointers }), "ortops: runCoalesced takes one output set per request",
                             std::invalid_argument);
        LayerSettings bad = layer->settings();
        bad.coalesceRows = 0;
        CHECK_THROWS_WITH_AS(layer->setSettings(bad),
                             "ortops: coalesce_rows and coalesce_in_flight must be positive, got 0 and 1",
                             std::invalid_argument);
    }
}
