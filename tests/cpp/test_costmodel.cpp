// Placement "auto"'s cost model (src/core/placement/costmodel.hpp, placement_policy.hpp, costcache.hpp):
// predictions from a stub calibration (each side wins where it should), the node's work with
// dynamic dims, the fit, and the cache file (relocated, corrupt, several writers at once).
// tests/test_policy.py checks the same through the Python door's binding.
#include <doctest/doctest.h>

#include <cstdlib>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "placement/costcache.hpp"
#include "placement/costmodel.hpp"
#include "placement/placement_policy.hpp"

using namespace ortops;

namespace {

// A device with a high fixed cost and a high throughput against a CPU with a low fixed cost
// and a low throughput: the shape decides (the same stub as tests/test_policy.py).
Calibration
stub(const std::string& key = "stub")
{
    return Calibration{ key, Side{ 1e-3, 1e-5, 1e-12 }, Side{ 1e-5, 1e-6, 1e-10 } };
}

// A fresh folder under the system's temporary one.
std::filesystem::path
scratch(const std::string& name)
{
    auto dir = std::filesystem::temp_directory_path() / ("ortops-costmodel-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    return dir;
}

} // namespace

TEST_SUITE("costmodel")
{
    TEST_CASE("a small node stays on the CPU, a large one goes to the device, and the reason says both")
    {
        // one step of an RNN of hidden 8: 1 ms of device fixed cost against 11 us
        PlacementChoice small = choosePlacement(nodeWork({ 1, 8, 0, 1 }, std::vector<int64_t>{ 1, 1, 8 },
                                                         std::vector<int64_t>{ 1, 8, 8 }), stub());
        CHECK_FALSE(small.device);
        CHECK(small.why == "ORT CPU: predicted 0.011 ms vs device 1.01 ms");
        // 50 steps of a GRU of hidden 128, batch 4: 29.5 MFLOP, 3 ms on the CPU, 1.5 ms on the device
        PlacementChoice large = choosePlacement(nodeWork({ 3, 128, 0, 1 }, std::vector<int64_t>{ 50, 4, 64 },
                                                         std::vector<int64_t>{ 1, 384, 64 }), stub());
        CHECK(large.device);
        CHECK(large.why == "predicted 1.53 ms vs ORT CPU 3.01 ms");
    }

    TEST_CASE("dynamic dimensions take the stated defaults; layout 1 reads X as [batch, seq, input]")
    {
        Work w = nodeWork({ 4, 4, 0, 2 }, std::vector<int64_t>{ -1, -1, 3 }, std::nullopt);
        CHECK(w.steps == 2 * DEFAULT_SEQ);
        CHECK(w.assumed == "sequence 64, batch 1");
        CHECK(w.flops == 2.0 * 2 * DEFAULT_SEQ * DEFAULT_BATCH * 4 * 4 * (3 + 4));
        PlacementChoice c = choosePlacement(nodeWork({ 4, 4, 0, 1 }, std::vector<int64_t>{ -1, 2, 3 }, std::nullopt), stub());
        const std::string suffix = " (assumed sequence 64)";
        REQUIRE(c.why.size() > suffix.size());
        CHECK(c.why.substr(c.why.size() - suffix.size()) == suffix);
        Work w1 = nodeWork({ 3, 5, 1, 1 }, std::vector<int64_t>{ 7, 11, 2 }, std::vector<int64_t>{ 1, 15, 2 });
        CHECK(w1.steps == 11);
        CHECK(w1.flops == 2.0 * 11 * 7 * 3 * 5 * (2 + 5));
        CHECK(w1.assumed.empty());
        // hidden from W when the attribute is absent; nothing known: hidden 1, input = hidden
        CHECK(nodeWork({ 4, std::nullopt, 0, 1 }, std::nullopt, std::vector<int64_t>{ 1, 32, 5 }).flops ==
              2.0 * DEFAULT_SEQ * 4 * 8 * (5 + 8));
        CHECK(nodeWork({ 1, std::nullopt, 0, 1 }, std::nullopt, std::nullopt).flops == 2.0 * DEFAULT_SEQ * 1 * 1 * 2);
    }

    TEST_CASE("the fit recovers the three costs; a negative term is dropped and the rest refitted")
    {
        Side side{ 2e-4, 3e-6, 5e-11 };
        std::vector<std::pair<Work, double>> points;
        for (const CalibrationShape& s : calibrationShapes(CalibrationShapes::Wide)) {
            Work w = workOf(4, s.steps, s.batch, s.input, s.hidden, 1);
            points.emplace_back(w, side.predict(w));
        }
        Side got = fit(points);
        CHECK(got.perRun == doctest::Approx(side.perRun).epsilon(1e-6));
        CHECK(got.perStep == doctest::Approx(side.perStep).epsilon(1e-6));
        CHECK(got.perFlop == doctest::Approx(side.perFlop).epsilon(1e-6));
        Side flat{ 1e-5, 0.0, 2e-11 };
        const double noise[] = { 1.02, 0.99, 1.0 };
        for (size_t i = 0; i < points.size(); ++i) {
            points[i].second = flat.predict(points[i].first) * noise[i];
        }
        got = fit(points);
        CHECK(got.perStep == 0.0);
        CHECK(got.perRun > 0);
        CHECK(got.perFlop == doctest::Approx(2e-11).epsilon(0.05));
        CHECK_THROWS_AS(fit({}), std::invalid_argument);
    }

    TEST_CASE("the key names device, driver, versions and threads; placement parses by name; a CPU device defaults to auto")
    {
        CHECK(calibrationKey("NVIDIA H200", "NVIDIA", "580", "0.1.0", "1.30.0", 16) ==
              "NVIDIA H200 | NVIDIA 580 | ortops 0.1.0 | onnxruntime 1.30.0 | 16 CPU threads");
        CHECK(cpuThreads() >= 1);
        CHECK(parsePlacement("auto") == Placement::Auto);
        CHECK_THROWS_WITH(parsePlacement("cpu", "EP option placement"), "EP option placement must be 'gpu' or 'auto', got 'cpu'");
        // Without a placement option: auto on a CPU implementation of Vulkan, gpu on any GPU.
        CHECK(defaultPlacement("cpu") == Placement::Auto);
        for (const char* type : { "discrete", "integrated", "virtual", "other" }) {
            CHECK(defaultPlacement(type) == Placement::Gpu);
        }
        CHECK(stub().describe() == "stub\n  device:  1.000 ms per run, 10.0 us per step, 1000.0 GFLOP/s\n"
                                   "  ORT CPU: 0.010 ms per run, 1.0 us per step, 10.0 GFLOP/s");
    }

    TEST_CASE("the cache round-trips exactly, is relocated by ORTOPS_COST_CACHE, and survives corruption")
    {
        auto dir = scratch("cache");
        std::string path = (dir / "sub" / "cost.json").string();
        ::setenv(COST_CACHE_ENV, path.c_str(), 1);
        CHECK(costCachePath() == path);
        ::unsetenv(COST_CACHE_ENV);
        CHECK_FALSE(loadCalibration("stub", path).has_value());
        Calibration odd{ "stub", Side{ 0.1, 1.0 / 3.0, 7.25e-13 }, Side{ 0.0, 1e-300, 5e-5 } };
        storeCalibration(odd, path);
        storeCalibration(stub("other"), path);
        auto back = loadCalibration("stub", path);
        REQUIRE(back.has_value());
        CHECK(back->key == "stub");
        CHECK(back->device == odd.device);
        CHECK(back->cpu == odd.cpu);
        std::ofstream(path) << "{not json";
        std::string problem;
        CHECK_FALSE(loadCalibration("stub", path, &problem).has_value());
        CHECK(problem.find("cost model cache " + path + " unreadable (") == 0);
        storeCalibration(stub(), path);    // replaces the corrupt file
        CHECK(loadCalibration("stub", path)->cpu == stub().cpu);
        std::filesystem::remove_all(dir);
    }

    TEST_CASE("writers at once leave every entry (the lock and the atomic replace)")
    {
        auto dir = scratch("writers");
        std::string path = (dir / "cost.json").string();
        std::vector<std::thread> writers;
        for (int w = 0; w < 4; ++w) {
            writers.emplace_back([&, w] {
                for (int i = 0; i < 10; ++i) {
                    storeCalibration(stub("w" + std::to_string(w) + "-" + std::to_string(i)), path);
                }
            });
        }
        for (auto& t : writers) {
            t.join();
        }
        for (int w = 0; w < 4; ++w) {
            for (int i = 0; i < 10; ++i) {
                CHECK(loadCalibration("w" + std::to_string(w) + "-" + std::to_string(i), path).has_value());
            }
        }
        std::filesystem::remove_all(dir);
    }
}
