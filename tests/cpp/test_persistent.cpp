// The persistent step kernel's choice and split (src/core/rnn/persistent.hpp; variants.hpp,
// PERSISTENT_STEPS), and a layer that records it: one workgroup here (lavapipe runs a workgroup
// a thread; tests/test_persistent_kernel.py runs larger grids with the threads they need).
#include <doctest/doctest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rnn/persistent.hpp"
#include "vk/devices.hpp"
#include "support.hpp"

using namespace ortops;

namespace {

// The recognizer's layer (bidirectional LSTM, hidden 256, batch 1) on an H200 (132 compute
// units, 48 KB of shared memory a workgroup).
PersistentShape
recognizer(uint32_t batch = 1, uint32_t hidden = 256)
{
    return { hidden, 4, 2, batch, false, Op::LSTM };
}

constexpr PersistentDevice H200{ false, 132, 49152, 1024 };

VariantSettings
table()
{
    VariantSettings s;
    s.persistentSteps = PERSISTENT_STEPS_TABLE;
    s.sequenceSteps = SEQUENCE_STEPS_TABLE;
    return s;
}

// Sets an environment variable for a scope, restoring what was there.
struct ScopedEnv
{
    std::string name;
    std::string saved;
    bool had;
    ScopedEnv(const char* n, const char* value)
      : name(n)
    {
        const char* old = std::getenv(n);
        had = old != nullptr;
        saved = had ? old : "";
        setenv(n, value, 1);
    }
    ~ScopedEnv()
    {
        if (had) {
            setenv(name.c_str(), saved.c_str(), 1);
        } else {
            unsetenv(name.c_str());
        }
    }
};

// The settings that force the exchange's design 16.
VariantSettings
exchangeOnly()
{
    VariantSettings s = table();
    s.persistentDesign = 16 + 1;
    return s;
}

} // namespace

TEST_SUITE("persistent kernel")
{
    TEST_CASE("the table chooses it on GPUs that report their compute units, by cell, hidden and batch, where R fits")
    {
        VariantSettings s = table();
        CHECK(persistentSteps(recognizer(), H200, Mode::Deterministic, true, s));
        CHECK(persistentSteps(recognizer(1), H200, Mode::Fast, true, s));
        CHECK(persistentSteps(recognizer(2), H200, Mode::Deterministic, true, s));
        // LSTMs from hidden 88 to 256: batches 1-8 (the kernel's most); above: 1-4.
        CHECK(persistentSteps(recognizer(8), H200, Mode::Deterministic, true, s));
        CHECK(persistentSteps(recognizer(8, 96), H200, Mode::Deterministic, true, s));
        CHECK(persistentSteps(recognizer(8, 88), H200, Mode::Deterministic, true, s));
        // LSTMs of hidden 64 to 67: batches 1-2; 68 to 79: 1-4; 80 to 87: 1-6; below 64 never.
        CHECK(persistentSteps(recognizer(1, 64), H200, Mode::Deterministic, true, s));
        CHECK(persistentSteps(recognizer(2, 67), H200, Mode::Deterministic, true, s));
        CHECK_FALSE(persistentSteps(recognizer(3, 64), H200, Mode::Deterministic, true, s));
        CHECK_FALSE(persistentSteps(recognizer(3, 67), H200, Mode::Deterministic, true, s));
        CHECK(persistentSteps(recognizer(4, 68), H200, Mode::Deterministic, true, s));
        CHECK(persistentSteps(recognizer(4, 79), H200, Mode::Deterministic, true, s));
        CHECK_FALSE(persistentSteps(recognizer(5, 68), H200, Mode::Deterministic, true, s));
        CHECK_FALSE(persistentSteps(recognizer(5, 79), H200, Mode::Deterministic, true, s));
        CHECK(persistentSteps(recognizer(6, 80), H200, Mode::Deterministic, true, s));
        CHECK(persistentSteps(recognizer(6, 87), H200, Mode::Deterministic, true, s));
        CHECK_FALSE(persistentSteps(recognizer(7, 87), H200, Mode::Deterministic, true, s));
        CHECK_FALSE(persistentSteps(recognizer(8, 80), H200, Mode::Deterministic, true, s));
        CHECK_FALSE(persistentSteps(recognizer(1, 63), H200, Mode::Deterministic, true, s));
        CHECK(persistentSteps(recognizer(4, 384), H200, Mode::Deterministic, true, s));
        CHECK_FALSE(persistentSteps(recognizer(5, 384), H200, Mode::Deterministic, true, s));
        // Other cells from above the whole-sequence kernel's hidden sizes: batches 1-4.
        PersistentShape gru{ 256, 3, 2, 4, false, Op::GRU };
        CHECK(persistentSteps(gru, H200, Mode::Deterministic, true, s));
        gru.batch = 5;
        CHECK_FALSE(persistentSteps(gru, H200, Mode::Deterministic, true, s));
        gru.batch = 1;
        gru.hidden = SEQUENCE_GPU_MAX_HIDDEN;
        CHECK_FALSE(persistentSteps(gru, H200, Mode::Deterministic, true, s));
        gru.hidden = SEQUENCE_GPU_MAX_HIDDEN + 1;
        CHECK(persistentSteps(gru, H200, Mode::Deterministic, true, s));
        CHECK_FALSE(persistentSteps(recognizer(), H200, Mode::Exact, true, s));
        CHECK_FALSE(persistentSteps(recognizer(), H200, Mode::Deterministic, false, s));   // not runnable
        // R of hidden 512 (8 MB) does not fit 132 x 48 KB.
        CHECK_FALSE(persistentSteps(recognizer(1, 512), H200, Mode::Deterministic, true, s));
        // A device that does not say its compute units, and CPU devices, never by the table.
        PersistentDevice unknown = H200;
        unknown.computeUnits = 0;
        CHECK_FALSE(persistentSteps(recognizer(), unknown, Mode::Deterministic, true, s));
        PersistentDevice cpu{ true, 0, 32768, 1024 };
        CHECK_FALSE(persistentSteps({ 16, 4, 1, 1, false, Op::LSTM }, cpu, Mode::Deterministic, true, s));
    }

    TEST_CASE("forced on it runs wherever it can; off, the switch and the whole-sequence kernel forced win")
    {
        VariantSettings on = table();
        on.persistentSteps = 1;
        PersistentDevice cpu{ true, 0, 32768, 1024 };
        CHECK(persistentSteps({ 16, 4, 1, 1, false, Op::LSTM }, cpu, Mode::Deterministic, true, on));
        CHECK_FALSE(persistentSteps({ 16, 4, 1, 9, false, Op::LSTM }, cpu, Mode::Deterministic, true, on));
        CHECK_FALSE(persistentSteps({ 16, 4, 1, 1, false, Op::LSTM }, cpu, Mode::Exact, true, on));
        // Never where the fallback would be a batched kernel (its scratch is another's).
        on.batchedFrom = 1;
        CHECK_FALSE(persistentSteps({ 16, 4, 1, 1, false, Op::LSTM }, cpu, Mode::Deterministic, true, on));
        VariantSettings off = table();
        off.persistentSteps = 0;
        CHECK_FALSE(persistentSteps(recognizer(), H200, Mode::Deterministic, true, off));
        VariantSettings sequence = table();
        sequence.sequenceSteps = 1;
        CHECK_FALSE(persistentSteps(recognizer(), H200, Mode::Deterministic, true, sequence));
        ScopedEnv env("ORTOPS_PERSISTENT_STEPS", "0");
        CHECK_FALSE(persistentSteps(recognizer(), H200, Mode::Deterministic, true, table()));
        VariantSettings forced = table();
        forced.persistentSteps = 1;
        CHECK(persistentSteps(recognizer(), H200, Mode::Deterministic, true, forced));
    }

    TEST_CASE("the split: a workgroup a compute unit at most, R's slices within its shared memory")
    {
        VariantSettings s = table();
        PersistentVariant v = persistentVariant(recognizer(), H200, s);
        CHECK(v.groups == 132);
        CHECK(v.threads == 32 * 16);   // 4 units x 4 gates a workgroup, a row thread each
        CHECK(v.fits);
        CHECK(v.unitsMax >= 4);
        CHECK(v.sharedBytes <= 49152);
        CHECK(v.pollDelay == 0);
        CHECK(v.discovery);
        CHECK(v.design == 28);   // the GPU rule: the exchange, prefetched rows, a shuffle tree
        CHECK(v.exchanges());
        CHECK(v.perInvocation == 1);   // 512 values of h over 512 invocations
        // Where h beside the slice of R leaves too little shared memory, the rule's grid barrier
        // (design 0), which fits: hidden 400, batch 4 (12.8 KB of h).
        PersistentShape wide{ 400, 4, 2, 4, false, Op::LSTM };
        CHECK_FALSE(persistentVariant(wide, H200, exchangeOnly()).fits);
        PersistentVariant w = persistentVariant(wide, H200, s);
        CHECK(w.fits);
        CHECK(w.design == 0);
        CHECK_FALSE(w.exchanges());
        // Design 16 alone (h exchanged with its step: every value of h read a step).
        PersistentVariant x = persistentVariant(recognizer(), H200, exchangeOnly());
        CHECK(x.fits);
        CHECK(x.perInvocation == 1);   // 512 values of h over 512 invocations
        CHECK(x.unitsMax >= 4);   // the slice's R beside h of both directions (2 KB)
        CHECK(x.sharedBytes <= 49152);
        // Asked for more workgroups than compute units: no more than the units.
        s.persistentGroups = 500;
        CHECK(persistentVariant(recognizer(), H200, s).groups == 132);
        // Where the device does not say: the fewest whose shared memory holds R.
        PersistentDevice cpu{ true, 0, 32768, 1024 };
        PersistentVariant c = persistentVariant({ 64, 4, 2, 3, false, Op::LSTM }, cpu, table());
        CHECK(c.fits);
        CHECK(c.groups * c.unitsMax >= 128);
        CHECK(c.pollDelay > 0);
        // Batch 8 in 32 KB: fewer row threads leave room for the slice.
        PersistentVariant b8 = persistentVariant({ 20, 4, 1, 8, false, Op::LSTM }, cpu, table());
        CHECK(b8.fits);
        CHECK(b8.threads < 32 * 32);
        CHECK(b8.sharedBytes <= 32768);
    }

    TEST_CASE("a layer forced onto it (one workgroup) records it and gives the step kernels' bits")
    {
        test::Model m = test::makeModel(test::LayerSpec{ "LSTM", 8, 4, "bidirectional" });
        LayerSettings steps = test::stepKernelSettings();
        LayerSettings persistent = steps;
        persistent.variants.persistentSteps = 1;
        persistent.variants.persistentGroups = 1;
        auto want = m.layer(steps);
        auto got = m.layer(persistent);
        test::Request r = test::makeRequest(m, 4, 3, 7, true, true);
        test::Outputs a = test::runOnce(*want, m, r);
        test::Outputs b = test::runOnce(*got, m, r);
        CHECK(test::sameBits(a, b));
        bool recorded = false;
        for (const PlanPoolInfo& p : got->planPools()) {
            recorded = recorded || (p.freeSteps.size() == 1 && p.freeSteps[0] == "step_persistent");
        }
        CHECK(recorded == (got->context()->memoryModelDeviceScope && !persistentOff(got->device().index)));
        if (recorded) {
            CHECK(persistentState(got->device().index).runs >= 1);
        }
    }

    TEST_CASE("runs from several threads at once give their serial bits (one grid a device at a time)")
    {
        LayerSettings persistent = test::stepKernelSettings();
        persistent.variants.persistentSteps = 1;
        persistent.variants.persistentGroups = 1;
        std::vector<test::Model> models;
        std::vector<test::Request> requests;
        std::vector<test::Outputs> want;
        std::vector<std::unique_ptr<Layer>> layers;
        for (uint32_t i = 0; i < 3; i++) {
            models.push_back(test::makeModel(test::LayerSpec{ i == 1 ? "GRU" : "LSTM", 8, 4 }, 10 + i));
        }
        for (uint32_t i = 0; i < 3; i++) {
            requests.push_back(test::makeRequest(models[i], 3, 2, 20 + i));
            auto serial = models[i].layer();
            want.push_back(test::runOnce(*serial, models[i], requests[i]));
            layers.push_back(models[i].layer(persistent));
        }
        std::vector<test::Outputs> got(6);
        std::vector<std::thread> threads;
        for (uint32_t t = 0; t < 6; t++) {
            threads.emplace_back([&, t] { got[t] = test::runOnce(*layers[t % 3], models[t % 3], requests[t % 3]); });
        }
        for (auto& t : threads) {
            t.join();
        }
        for (uint32_t t = 0; t < 6; t++) {
            CHECK(test::sameBits(got[t], want[t % 3]));
        }
    }
}
