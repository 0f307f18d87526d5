// Concurrency (src/core/rnn/layer.hpp: run() may be called from many threads at once): threads
// sharing one layer get the serial results bit for bit; fresh layers recorded at several
// shapes at once (among them the batched shape, whose plan uploads R's batched layout "RB"
// into the layer's weights while the other shape's recording reads them: issue 31's race);
// the coalescer's group commit under threads. scripts/test_sanitizers.sh runs this suite
// under ThreadSanitizer (doctest -ts=concurrency); ORTOPS_TEST_ROUNDS sets the rounds.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "rnn/coalesce.hpp"
#include "support.hpp"

using namespace ortops;
using namespace ortops::test;

namespace {

uint32_t
rounds(uint32_t fallback)
{
    const char* v = std::getenv("ORTOPS_TEST_ROUNDS");
    return v && std::atoi(v) > 0 ? static_cast<uint32_t>(std::atoi(v)) : fallback;
}

// Runs `work(i)` on `n` threads that start together (each waits until all have started) and
// returns the first exception any of them threw as a message ("" if none).
template<typename Work>
std::string
together(uint32_t n, const Work& work)
{
    std::atomic<uint32_t> ready{ 0 };
    std::mutex lock;
    std::string error;
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < n; i++) {
        threads.emplace_back([&, i] {
            ready++;
            while (ready.load() < n) {
                std::this_thread::yield();
            }
            try {
                work(i);
            } catch (const std::exception& e) {
                std::lock_guard<std::mutex> guard(lock);
                error = error.empty() ? e.what() : error;
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    return error;
}

} // namespace

TEST_SUITE("concurrency")
{
    TEST_CASE("threads sharing one layer get the serial results bit for bit, at several shapes")
    {
        Model m = makeModel(LayerSpec{ "LSTM", 8, 4, "bidirectional" });
        const uint32_t batches[] = { 1, 2, 3, 32 };   // 32: the batched kernel at hidden 8
        const uint32_t threads = 6, each = 4;
        std::vector<Request> requests;
        for (uint32_t i = 0; i < threads * each; i++) {
            requests.push_back(makeRequest(m, 3, batches[i % 4], 200 + i, i % 3 == 0, i % 2 == 0));
        }
        std::vector<Outputs> serial;
        {
            auto reference = m.layer();
            for (const Request& r : requests) {
                serial.push_back(runOnce(*reference, m, r));
            }
        }
        // A fresh layer: its plans are recorded by the threads, several at once.
        auto layer = m.layer();
        std::vector<Outputs> got(requests.size());
        std::string error = together(threads, [&](uint32_t t) {
            for (uint32_t k = 0; k < each; k++) {
                size_t i = t * each + k;
                got[i] = runOnce(*layer, m, requests[i]);
            }
        });
        CHECK(error == "");
        for (size_t i = 0; i < requests.size(); i++) {
            CAPTURE(i);
            CHECK(sameBits(got[i], serial[i]));
        }
    }

    TEST_CASE("fresh layers recorded at the batched shape and another at once (RB uploaded while read)")
    {
        // Hidden 8, float32, deterministic: batch 32 runs the batched step kernel
        // (variants.hpp BATCHED_FROM: from 32 below hidden 384), so its plan uploads "RB" into
        // the layer's weights (LayerImpl::uploadBatchedR) while the batch-1 plan, recorded at
        // the same time by another thread, looks up W, R, B and P in them (Recording::weight).
        // Coalescing is off so that the two runs record at once instead of queueing.
        //
        // What ThreadSanitizer can see of it, and so this layer and the sweep of start
        // offsets. Every Buffer and Program either thread creates copies the layer's
        // shared_ptr<Context> and the device's (atomic read-modify-writes: happens-before
        // edges between the threads), a few microseconds from every lookup and from the
        // insertion, so TSan reports the race when a lookup falls in the one stretch of the
        // upload with no such copy: from the upload's copy program created to "RB" inserted
        // (the submit and the fence wait; then the insertion writes the root and links the
        // lookup read). std::map's insertion is compiled in libstdc++.so, uninstrumented: the
        // TSan build links tsan_rbtree.cpp's instrumented one. A GRU without bias: "RB" becomes
        // the root (a write every lookup's read conflicts with), and a GRU with
        // linear_before_reset 0 records two step passes, so the reader looks up W, then R, B
        // and P twice, at three points of its recording. The two threads start apart by an
        // offset swept round by round from the reader 1 upload ahead to the uploader 2 uploads
        // ahead, t the time a fresh layer's upload takes here (the same copy program and
        // submit: about 50 ms under TSan on the 2-core machine), in steps of 3t / rounds, so
        // that some rounds land there whatever this machine's speed.
        LayerSpec spec{ "GRU", 8, 4 };
        spec.bias = false;
        Model m = makeModel(spec);
        Request small = makeRequest(m, 3, 1, 1, true, true);
        Request big = makeRequest(m, 3, 32, 2, true, true);
        Outputs wantSmall, wantBig;
        {
            auto reference = m.layer();
            wantSmall = runOnce(*reference, m, small);
            wantBig = runOnce(*reference, m, big);
        }
        LayerSettings settings = stepKernelSettings();
        settings.coalesceRows = 1;
        uint32_t n = rounds(32);
        for (uint32_t round = 0; round < n; round++) {
            CAPTURE(round);
            auto start = std::chrono::steady_clock::now();
            auto layer = m.layer(settings);
            auto upload = std::chrono::steady_clock::now() - start;
            // From -t (the uploader starts t later) to +2t (the reader does).
            auto offset = upload * (3 * static_cast<int64_t>(round) - static_cast<int64_t>(n)) / n;
            Outputs gotSmall, gotBig;
            std::string error = together(2, [&](uint32_t t) {
                if (t == 0) {
                    std::this_thread::sleep_for(-offset);   // nothing when the offset is positive
                    gotBig = runOnce(*layer, m, big);
                } else {
                    std::this_thread::sleep_for(offset);
                    gotSmall = runOnce(*layer, m, small);
                }
            });
            REQUIRE(error == "");
            CHECK(sameBits(gotBig, wantBig));
            CHECK(sameBits(gotSmall, wantSmall));
            CHECK(layer->weightNames() == std::vector<std::string>{ "R", "RB", "W" });
        }
    }

    TEST_CASE("concurrent runs of one shape use plans of their own, at most maxConcurrent")
    {
        Model m = makeModel(LayerSpec{ "RNN", 8, 4 });
        LayerSettings settings = stepKernelSettings();
        settings.coalesceRows = 1;
        settings.maxConcurrent = 3;
        auto layer = m.layer(settings);
        std::vector<Request> requests;
        std::vector<Outputs> serial;
        {
            auto reference = m.layer();
            for (uint32_t i = 0; i < 8; i++) {
                requests.push_back(makeRequest(m, 4, 2, 300 + i));
                serial.push_back(runOnce(*reference, m, requests.back()));
            }
        }
        std::vector<Outputs> got(requests.size());
        std::string error = together(8, [&](uint32_t i) { got[i] = runOnce(*layer, m, requests[i]); });
        CHECK(error == "");
        for (size_t i = 0; i < requests.size(); i++) {
            CHECK(sameBits(got[i], serial[i]));
        }
        auto pools = layer->planPools();
        REQUIRE(pools.size() == 1);
        CHECK(pools[0].count >= 1);
        CHECK(pools[0].count <= 3);
        CHECK(pools[0].freeSteps.size() == pools[0].count);
    }

    TEST_CASE("threads' batch-1 runs through the coalescer get the serial results bit for bit")
    {
        Model m = makeModel(LayerSpec{ "LSTM", 8, 4 });
        const uint32_t threads = 8, each = 3;
        std::vector<Request> requests;
        std::vector<Outputs> serial;
        {
            auto reference = m.layer();
            for (uint32_t i = 0; i < threads * each; i++) {
                requests.push_back(makeRequest(m, 4, 1, 400 + i, true, true));
                serial.push_back(runOnce(*reference, m, requests.back()));
            }
        }
        LayerSettings settings = stepKernelSettings();
        settings.coalesceRows = 32;
        settings.coalesceInFlight = 1;
        auto layer = m.layer(settings);
        CoalesceCounters before = coalesceCounters();
        std::vector<Outputs> got(requests.size());
        std::string error = together(threads, [&](uint32_t t) {
            for (uint32_t k = 0; k < each; k++) {
                got[t * each + k] = runOnce(*layer, m, requests[t * each + k]);
            }
        });
        CHECK(error == "");
        for (size_t i = 0; i < requests.size(); i++) {
            CAPTURE(i);
            CHECK(sameBits(got[i], serial[i]));
        }
        // How many were coalesced depends on timing; the group commit itself is checked below.
        MESSAGE("coalesced " << coalesceCounters().requests - before.requests << " of " << requests.size()
                             << " requests into " << coalesceCounters().runs - before.runs << " runs");
    }

    TEST_CASE("the group commit: requests arriving while a run is in flight go together in the next run")
    {
        // A Coalescer over a stand-in run (no device): the output is the input, copied through
        // the pieces a coalesced run gets (layout 1: the batch is every tensor's first axis).
        Coalescer coalescer;
        BatchAxes axes = BatchAxes::forLayout(1);
        std::atomic<bool> firstRunning{ false }, release{ false };
        std::atomic<uint32_t> calls{ 0 }, arrived{ 0 };
        std::mutex lock;
        std::vector<std::pair<int64_t, bool>> runs;   // (batch, coalesced)
        RunOne run = [&](const RunInputs& in, const OutputShapes&, const OutputPointers& out, const RunCopies* c) {
            if (calls++ == 0) {
                firstRunning = true;
                while (!release) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                }
            }
            {
                std::lock_guard<std::mutex> guard(lock);
                runs.emplace_back(in.X.shape[0], c != nullptr);
            }
            size_t bytes = in.X.elements() * 4;
            if (!c) {
                std::vector<uint8_t> staged(bytes);
                std::memcpy(staged.data(), in.X.data, bytes);
                std::memcpy(out[0], staged.data(), bytes);
                return;
            }
            std::vector<uint8_t> staged(bytes);
            for (const Piece& p : c->x) {
                if (p.host) {
                    std::memcpy(staged.data() + p.offset, p.host, p.bytes);
                } else {
                    std::memset(staged.data() + p.offset, 0, p.bytes);
                }
            }
            for (const Piece& p : c->outputs[0]) {
                std::memcpy(const_cast<void*>(p.host), staged.data() + p.offset, p.bytes);
            }
        };
        const uint32_t n = 8;
        std::vector<std::vector<float>> xs(n), ys(n);
        std::vector<RunInputs> inputs(n);
        std::vector<OutputShapes> shapes(n);
        std::vector<OutputPointers> outs(n);
        for (uint32_t i = 0; i < n; i++) {
            uint32_t rows = 1 + i % 2;
            xs[i] = randomFloats(rows * 2 * 3, 500 + i);
            ys[i].assign(xs[i].size(), -1.0f);
            inputs[i].X = HostTensor{ xs[i].data(), ElementType::Float32, { rows, 2, 3 } };
            shapes[i][0] = std::vector<int64_t>{ rows, 2, 3 };
            outs[i] = OutputPointers{ ys[i].data(), nullptr, nullptr };
        }
        auto submit = [&](uint32_t i) {
            CoalesceRequest r{ &inputs[i], &shapes[i], &outs[i], static_cast<uint32_t>(inputs[i].X.shape[0]) };
            coalescer.run(r, axes, 4, 32, 1, run);
        };
        std::thread first(submit, 0);
        while (!firstRunning) {
            std::this_thread::yield();
        }
        std::vector<std::thread> others;
        for (uint32_t i = 1; i < n; i++) {
            others.emplace_back([&, i] {
                arrived++;
                submit(i);
            });
        }
        while (arrived < n - 1) {
            std::this_thread::yield();
        }
        // The seven are in Coalescer::run, about to queue; a few microseconds of work each:
        // 200 ms is ample even on a loaded machine or under ThreadSanitizer.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        release = true;
        first.join();
        for (auto& t : others) {
            t.join();
        }
        for (uint32_t i = 0; i < n; i++) {
            CAPTURE(i);
            CHECK(ys[i] == xs[i]);
        }
        // The first alone (batch 1), then the other seven (11 rows) in one run padded to 16.
        REQUIRE(runs.size() == 2);
        CHECK(runs[0] == std::pair<int64_t, bool>{ 1, false });
        CHECK(runs[1] == std::pair<int64_t, bool>{ 16, true });
    }
    TEST_CASE("two layers' coalescers: one layer's run in flight does not hold the other's requests")
    {
        // Layer A's run holds its "device" until released; three requests of layer B arrive
        // meanwhile and run beside it (alone or in groups, as they happen to arrive): a layer
        // waits only for its own runs.
        Coalescer a, b;
        BatchAxes axes = BatchAxes::forLayout(1);
        std::atomic<bool> aRunning{ false }, releaseA{ false };
        std::mutex lock;
        std::vector<std::pair<char, int64_t>> runs;   // (layer, batch) in start order
        auto runOf = [&](char layer) {
            return RunOne([&, layer](const RunInputs& in, const OutputShapes&, const OutputPointers& out,
                                     const RunCopies* c) {
                {
                    std::lock_guard<std::mutex> guard(lock);
                    runs.emplace_back(layer, in.X.shape[0]);
                }
                if (layer == 'A') {
                    aRunning = true;
                    while (!releaseA) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    }
                }
                if (!c) {
                    std::memcpy(out[0], in.X.data, in.X.elements() * 4);
                    return;
                }
                for (const Piece& p : c->outputs[0]) {   // stand-in outputs: zeros
                    std::memset(const_cast<void*>(p.host), 0, p.bytes);
                }
            });
        };
        RunOne runA = runOf('A'), runB = runOf('B');
        std::vector<std::vector<float>> xs(4, std::vector<float>(6, 1.0f)), ys(4, std::vector<float>(6));
        std::vector<RunInputs> inputs(4);
        std::vector<OutputPointers> outs(4);
        OutputShapes shapes;
        shapes[0] = std::vector<int64_t>{ 1, 2, 3 };
        for (size_t i = 0; i < 4; i++) {
            inputs[i].X = HostTensor{ xs[i].data(), ElementType::Float32, { 1, 2, 3 } };
            outs[i] = OutputPointers{ ys[i].data(), nullptr, nullptr };
        }
        std::thread first([&] { a.run({ &inputs[0], &shapes, &outs[0], 1 }, axes, 4, 32, 1, runA); });
        while (!aRunning) {
            std::this_thread::yield();
        }
        std::vector<std::thread> others;
        for (size_t i = 1; i < 4; i++) {
            others.emplace_back([&, i] { b.run({ &inputs[i], &shapes, &outs[i], 1 }, axes, 4, 32, 1, runB); });
        }
        // B's requests run while A's is held (up to 10 s even under ThreadSanitizer).
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        for (;;) {
            {
                std::lock_guard<std::mutex> guard(lock);
                if (runs.size() >= 2 || std::chrono::steady_clock::now() > until) {
                    break;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        {
            std::lock_guard<std::mutex> guard(lock);
            CHECK(runs.size() >= 2);   // B ran while A's run was in flight
        }
        releaseA = true;
        first.join();
        for (auto& t : others) {
            t.join();
        }
        REQUIRE(!runs.empty());
        CHECK(runs[0] == std::pair<char, int64_t>{ 'A', 1 });
        for (size_t i = 1; i < runs.size(); i++) {
            CHECK(runs[i].first == 'B');
        }
    }
}
