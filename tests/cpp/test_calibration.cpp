// Measuring a calibration (src/core/placement/calibration.hpp) on the first Vulkan device (lavapipe in
// CI), the ORT CPU side a fake runner that counts what it is asked (the EP's real one, through
// ONNX Runtime's C API, runs in tests/test_ep_placement.py); and calibrationFor: a cached
// calibration is used as it is, a missing one measured once and cached.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "placement/calibration.hpp"
#include "placement/costcache.hpp"
#include "vk/devices.hpp"
#include "support.hpp"

using namespace ortops;

namespace {

// A CPU side whose runs take no time; it records the LSTMs made and the runs asked for.
struct CountingRunner : CpuLstmRunner
{
    struct Lstm : CpuLstm
    {
        CountingRunner& owner;
        uint32_t input;
        explicit Lstm(CountingRunner& o, uint32_t i) : owner(o), input(i) {}
        void run(const std::vector<float>& x, uint32_t seq, uint32_t batch) override
        {
            CHECK(x.size() == size_t(seq) * batch * input);
            owner.runs++;
        }
    };

    std::vector<std::pair<uint32_t, uint32_t>> made;
    int runs = 0;

    std::unique_ptr<CpuLstm> make(uint32_t input, uint32_t hidden, const std::vector<float>& W,
                                  const std::vector<float>& R) override
    {
        CHECK(W.size() == size_t(4) * hidden * input);
        CHECK(R.size() == size_t(4) * hidden * hidden);
        made.emplace_back(input, hidden);
        return std::make_unique<Lstm>(*this, input);
    }
};

} // namespace

TEST_SUITE("calibration")
{
    TEST_CASE("both sides measured at the small shapes: one LSTM per size, each shape timed after a warm-up run")
    {
        CountingRunner cpu;
        const DeviceDescription& device = chooseDevice(std::nullopt);
        Calibration c = measureCalibration(device, cpu, "k", CalibrationShapes::Small, 2);
        CHECK(c.key == "k");
        CHECK(cpu.made == std::vector<std::pair<uint32_t, uint32_t>>{ { 8, 8 }, { 64, 64 } });
        CHECK(cpu.runs == 3 * (1 + 2));
        for (double v : { c.device.perRun, c.device.perStep, c.device.perFlop }) {
            CHECK(std::isfinite(v));
            CHECK(v >= 0);
        }
        CHECK(c.device.perRun + c.device.perStep > 0);
    }

    TEST_CASE("calibrationFor: measured once when missing and cached; read from the cache after")
    {
        auto dir = std::filesystem::temp_directory_path() / ("ortops-calibration-" + std::to_string(::getpid()));
        std::filesystem::remove_all(dir);
        std::string path = (dir / "cost.json").string();
        ::setenv(COST_CACHE_ENV, path.c_str(), 1);
        int measured = 0;
        std::vector<std::string> warnings;
        auto measure = [&] {
            measured++;
            return Calibration{ "key", Side{ 1e-3, 1e-5, 1e-12 }, Side{ 1e-5, 1e-6, 1e-10 } };
        };
        auto warn = [&](const std::string& m) { warnings.push_back(m); };
        Calibration first = calibrationFor("key", measure, warn);
        Calibration second = calibrationFor("key", measure, warn);
        CHECK(measured == 1);
        CHECK(second.device == first.device);
        CHECK(second.cpu == first.cpu);
        CHECK(loadCalibration("key", path).has_value());
        CHECK(warnings.empty());
        ::setenv(COST_CACHE_ENV, "/proc/ortops-no-such-folder/cost.json", 1);    // cannot be written
        Calibration unstored = calibrationFor("key", measure, warn);
        CHECK(measured == 2);
        CHECK(unstored.cpu == first.cpu);
        REQUIRE(warnings.size() == 1);
        CHECK(warnings[0].find("the calibration is used but not cached") != std::string::npos);
        ::unsetenv(COST_CACHE_ENV);
        std::filesystem::remove_all(dir);
    }

    TEST_CASE("ORTOPS_COST_SHAPES chooses the shapes by name")
    {
        ::unsetenv("ORTOPS_COST_SHAPES");
        CHECK(requestedCalibrationShapes() == CalibrationShapes::Default);
        ::setenv("ORTOPS_COST_SHAPES", "small", 1);
        CHECK(requestedCalibrationShapes() == CalibrationShapes::Small);
        CHECK(repeatsFor(CalibrationShapes::Small) == 3);
        ::setenv("ORTOPS_COST_SHAPES", "tiny", 1);
        CHECK_THROWS_WITH(requestedCalibrationShapes(), "ortops: ORTOPS_COST_SHAPES must be 'default' or 'small', got 'tiny'");
        ::unsetenv("ORTOPS_COST_SHAPES");
    }
}
