// The pipeline table (src/core/vk/pipelines.hpp): programs of one shader and specialization share
// one pipeline, made once even when threads ask for it at once; the table keeps a bounded
// number of pipelines no program uses; a layer made again compiles nothing and gets the same
// bits; a program whose pipeline is new makes it on a thread of its own (src/core/vk/program.hpp)
// and is waited for where it is used, or dropped.
#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <thread>

#include "vk/devices.hpp"
#include "vk/memory.hpp"
#include "vk/program.hpp"
#include "vk/sequence.hpp"
#include "rnn/shaders.hpp"
#include "support.hpp"

using namespace ortops;
using namespace ortops::test;

namespace {

std::vector<uint32_t>
copyWords()
{
    const std::string& code = spirv("copy_words", false, Mode::Deterministic);
    std::vector<uint32_t> words(code.size() / 4);
    std::memcpy(words.data(), code.data(), code.size());
    return words;
}

std::shared_ptr<Context>
contextOf(const Model& m)
{
    return m.layer()->context();
}

} // namespace

TEST_SUITE("pipelines")
{
    TEST_CASE("a layer made again with the same config compiles no pipeline and gives the same bits")
    {
        LayerSpec spec;
        spec.op = "GRU";
        spec.direction = "bidirectional";
        Model m = makeModel(spec, 7);
        Request r = makeRequest(m, 5, 3, 11);
        auto first = m.layer();
        Outputs a = runOnce(*first, m, r);
        auto ctx = first->context();
        size_t made = ctx->pipelines.size();
        CHECK(made > 0);
        first.reset();   // its pipelines are idle now, kept by the table
        auto second = m.layer();
        Outputs b = runOnce(*second, m, r);
        CHECK(ctx->pipelines.size() == made);
        CHECK(sameBits(a, b));
    }

    TEST_CASE("programs of one shader and specialization share a pipeline; another specialization is another")
    {
        Model m = makeModel({}, 3);
        auto ctx = contextOf(m);
        PipelineTable table;
        const auto words = copyWords();
        const std::vector<uint32_t> specA{ 1, 2 }, specB{ 1, 3 };
        auto a1 = table.get(ctx->device, { words, specA, 2, 1 });
        auto a2 = table.get(ctx->device, { words, specA, 2, 1 });
        auto b = table.get(ctx->device, { words, specB, 2, 1 });
        auto c = table.get(ctx->device, { words, specA, 3, 1 });   // another binding count: another layout
        CHECK(a1 == a2);
        CHECK(a1 != b);
        CHECK(a1 != c);
        CHECK(table.size() == 3);
        CHECK(a1->bindings == 2);
        CHECK(c->bindings == 3);
    }

    TEST_CASE("find gives a made pipeline, and null for a key never made, without making it")
    {
        Model m = makeModel({}, 3);
        auto ctx = contextOf(m);
        PipelineTable table;
        const auto words = copyWords();
        const std::vector<uint32_t> spec{ 7 };
        CHECK(!table.find({ words, spec, 2, 1 }));
        CHECK(table.size() == 0);
        auto made = table.get(ctx->device, { words, spec, 2, 1 });
        CHECK(table.find({ words, spec, 2, 1 }) == made);
        CHECK(!table.find({ words, spec, 3, 1 }));
        CHECK(table.size() == 1);
    }

    TEST_CASE("the table keeps pipelines in use and at most kIdlePipelines idle ones, the oldest dropped")
    {
        Model m = makeModel({}, 3);
        auto ctx = contextOf(m);
        PipelineTable table;
        const auto words = copyWords();
        const uint32_t n = PipelineTable::kIdlePipelines + 8;
        std::vector<std::shared_ptr<const Pipeline>> held;
        for (uint32_t i = 0; i < n; ++i) {
            held.push_back(table.get(ctx->device, { words, { i }, 2, 1 }));
        }
        CHECK(table.size() == n);   // all in use: none dropped
        held.clear();
        for (uint32_t i = n; i < n + 2; ++i) {
            table.get(ctx->device, { words, { i }, 2, 1 });
        }
        // The limit is applied before each new one is added.
        CHECK(table.size() == PipelineTable::kIdlePipelines + 1);
        // The newest idle ones are still there: asking again makes nothing new.
        auto again = table.get(ctx->device, { words, { n }, 2, 1 });
        CHECK(table.size() == PipelineTable::kIdlePipelines + 1);
        table.clear();
        CHECK(table.size() == 0);
        CHECK(again->pipeline);   // a holder keeps its pipeline after the table lets go
    }
}

TEST_SUITE("concurrency")
{
    TEST_CASE("threads asking for one new pipeline at once get one pipeline; other keys are made beside it")
    {
        Model m = makeModel({}, 3);
        auto ctx = contextOf(m);
        PipelineTable table;
        const auto words = copyWords();
        const int threads = 8;
        std::vector<std::shared_ptr<const Pipeline>> got(threads);
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) {
            pool.emplace_back([&, t] {
                // Even threads share key {0}; odd ones each ask for their own.
                uint32_t spec = t % 2 == 0 ? 0 : static_cast<uint32_t>(t);
                got[t] = table.get(ctx->device, { words, { spec }, 2, 1 });
            });
        }
        for (auto& th : pool) {
            th.join();
        }
        std::set<const Pipeline*> distinct;
        for (int t = 0; t < threads; ++t) {
            distinct.insert(got[t].get());
            if (t % 2 == 0) {
                CHECK(got[t] == got[0]);
            }
        }
        CHECK(distinct.size() == 1 + threads / 2);
        CHECK(table.size() == 1 + threads / 2);
    }

    TEST_CASE("a program whose pipeline is new makes it on its own thread: dropped unrecorded, or "
              "dispatched, it is waited for and the dispatch copies")
    {
        // In this suite so that the TSan job runs it: the making thread writes the set, the
        // dispatch reads it.
        Model m = makeModel({}, 3);
        auto ctx = contextOf(m);
        const std::string& code = spirv("copy_words", false, Mode::Deterministic);
        const auto words = copyWords();
        const uint32_t n = 64;
        auto src = std::make_shared<Buffer>(ctx, 4 * n, "device");
        auto dst = std::make_shared<Buffer>(ctx, 4 * n, "device");
        std::vector<float> in = randomFloats(n, 5);
        src->write(in.data(), 4 * n, 0);
        // Specializations no other test asks for (copy_words has no constants: the same code),
        // so the context's table holds neither pipeline yet.
        const std::vector<uint32_t> dropped{ 0xC0FFEE }, used{ 0xC0FFEF };
        CHECK(!ctx->pipelines.find({ words, dropped, 2, 1 }));
        for (int i = 0; i < 4; ++i) {
            Program p(ctx, code, { src, dst }, dropped, 1);   // never recorded: its destructor waits
        }
        CHECK(ctx->pipelines.find({ words, dropped, 2, 1 }));   // made once, idle in the table now
        CHECK(!ctx->pipelines.find({ words, used, 2, 1 }));
        auto program = std::make_shared<Program>(ctx, code, std::vector<std::shared_ptr<Buffer>>{ src, dst }, used, 1);
        Sequence seq(ctx, 0);
        seq.upload({ src });
        seq.barrier("transfer", "compute");
        seq.dispatch(program, 1, 1, 1, { n });
        seq.download({ dst });
        seq.eval();
        std::vector<float> out(n);
        dst->read(out.data(), 4 * n, 0);
        CHECK(std::memcmp(out.data(), in.data(), 4 * n) == 0);
    }
}
