// The host copies' ranges (src/core/vk/hostcopy.hpp, copyRanges): a coalesced run's pieces split
// over the copy threads in claims of a few ranges give the bytes one thread gives, every range
// copied exactly once, from several callers at once (ThreadSanitizer: scripts/cpp_tests.sh tsan).
// The single-range copies are tests/test_host_copy.py's.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "vk/hostcopy.hpp"

using namespace ortops;

namespace {

// Restores the copy settings a case changed.
struct SettingsGuard
{
    hostcopy::Settings before = hostcopy::settings();
    ~SettingsGuard() { hostcopy::configure(before); }
};

// `count` ranges of 1..`most` bytes each (a seeded walk), packed one after another.
std::vector<std::pair<size_t, size_t>>
makeRanges(size_t count, size_t most, uint32_t seed)
{
    std::vector<std::pair<size_t, size_t>> ranges;
    size_t at = 0;
    uint32_t x = seed;
    for (size_t i = 0; i < count; i++) {
        x = x * 1664525u + 1013904223u;
        size_t n = 1 + (x >> 8) % most;
        ranges.emplace_back(at, n);
        at += n;
    }
    return ranges;
}

// Copies `ranges` of `src` into a fresh target through copyRanges; counts each range's copies.
std::vector<uint8_t>
copyThrough(const std::vector<uint8_t>& src, const std::vector<std::pair<size_t, size_t>>& ranges,
            std::vector<std::atomic<int>>& copies)
{
    std::vector<uint8_t> dst(src.size(), 0);
    size_t bytes = src.size();
    hostcopy::copyRanges(ranges.size(), bytes, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; i++) {
            std::memcpy(dst.data() + ranges[i].first, src.data() + ranges[i].first, ranges[i].second);
            copies[i]++;
        }
    });
    return dst;
}

} // namespace

TEST_SUITE("hostcopy")
{
    TEST_CASE("copyRanges: every range copied once, the same bytes, alone and on the threads")
    {
        SettingsGuard guard;
        for (size_t from : { SIZE_MAX, size_t(0) }) {         // one thread, then the threads
            for (size_t chunk : { size_t(97), size_t(4099) }) {   // claims of ~6 and ~256 bytes
                CAPTURE(from);
                CAPTURE(chunk);
                hostcopy::Settings s = guard.before;
                s.chunk = chunk;
                s.threads = 4;
                s.rangesFrom = from;
                hostcopy::configure(s);
                for (size_t count : { size_t(0), size_t(1), size_t(2), size_t(37), size_t(1000) }) {
                    auto ranges = makeRanges(count, 300, static_cast<uint32_t>(count + chunk));
                    size_t total = count ? ranges.back().first + ranges.back().second : 0;
                    std::vector<uint8_t> src(total);
                    for (size_t i = 0; i < total; i++) {
                        src[i] = static_cast<uint8_t>(i * 131 + 7);
                    }
                    std::vector<std::atomic<int>> copies(count);
                    CHECK(copyThrough(src, ranges, copies) == src);
                    for (size_t i = 0; i < count; i++) {
                        CHECK(copies[i].load() == 1);
                    }
                }
            }
        }
    }

    TEST_CASE("copyRanges from several threads at once")
    {
        SettingsGuard guard;
        hostcopy::Settings s = guard.before;
        s.chunk = 97;
        s.threads = 4;
        s.rangesFrom = 0;
        hostcopy::configure(s);
        auto ranges = makeRanges(500, 200, 11);
        size_t total = ranges.back().first + ranges.back().second;
        std::vector<uint8_t> src(total);
        for (size_t i = 0; i < total; i++) {
            src[i] = static_cast<uint8_t>(i ^ (i >> 8));
        }
        std::atomic<int> wrong{ 0 };
        std::vector<std::thread> callers;
        for (int t = 0; t < 6; t++) {
            callers.emplace_back([&] {
                for (int round = 0; round < 20; round++) {
                    std::vector<std::atomic<int>> copies(ranges.size());
                    if (copyThrough(src, ranges, copies) != src) {
                        wrong++;
                    }
                    for (auto& c : copies) {
                        wrong += c.load() != 1;
                    }
                }
            });
        }
        for (auto& c : callers) {
            c.join();
        }
        CHECK(wrong.load() == 0);
    }
}
