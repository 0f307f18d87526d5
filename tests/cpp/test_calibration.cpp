// Measuring a calibration (src/core/placement/calibration.hpp) on the first Vulkan device (lavapipe in
// CI), the ORT CPU side a fake runner that counts what it is asked (the EP's real one, through
// ONNX Runtime's C API, runs in tests/test_ep_placement.py); the timing's stopping rule; the
// tables and which a device gets; the notice; and calibrationFor: a cached calibration is used
// as it is, a missing one measured once and cached.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "placement/calibration.hpp"
#include "placement/costcache.hpp"
#include "rnn/variants.hpp"
#include "vk/context.hpp"
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
            owner.steps.push_back(seq);
        }
    };

    std::vector<std::pair<uint32_t, uint32_t>> made;
    std::vector<uint32_t> steps;   // of each run
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
    TEST_CASE("both sides measured at the small points: one LSTM per size, each point timed after a warm-up run")
    {
        CountingRunner cpu;
        const DeviceDescription& device = chooseDevice(std::nullopt);
        Calibration c = measureCalibration(device, cpu, "k", CalibrationShapes::Small, 2);
        CHECK(c.key == "k");
        CHECK(cpu.made == std::vector<std::pair<uint32_t, uint32_t>>{ { 8, 8 }, { 32, 32 } });
        CHECK(cpu.runs == 3 * (1 + 2));
        // ORT CPU ran each point's steps (1 and 64 of the first layer, 2 of the wide one): every
        // point once untimed, while the device layers made their first runs, then each point's timed runs
        CHECK(cpu.steps == std::vector<uint32_t>{ 1, 64, 2, 1, 1, 64, 64, 2, 2 });
        for (double v : { c.device.perRun, c.device.perStep, c.device.perFlop }) {
            CHECK(std::isfinite(v));
            CHECK(v >= 0);
        }
        CHECK(c.device.perRun + c.device.perStep > 0);
    }

    TEST_CASE("the timing stops at its run count, or after 3 runs once the budget is spent")
    {
        int runs = 0;
        medianSeconds([&] { runs++; }, 7, 10.0);
        CHECK(runs == 7);   // quick runs: the count (the untimed first run is the caller's)
        runs = 0;
        double s = medianSeconds([&] { runs++; std::this_thread::sleep_for(std::chrono::milliseconds(20)); }, 20, 0.01);
        CHECK(runs == CALIBRATION_MIN_RUNS);   // slow runs: the budget, after the least count
        CHECK(s >= 0.02);
    }

    TEST_CASE("the tables: a layer's points share its size; the small table's wide layer runs the step kernels")
    {
        for (CalibrationShapes which : { CalibrationShapes::Wide, CalibrationShapes::Small }) {
            const auto& points = calibrationShapes(which);
            CHECK(points[0].steps == 1);
            CHECK((points[1].seq == points[0].seq && points[1].batch == points[0].batch &&
                   points[1].input == points[0].input && points[1].hidden == points[0].hidden));
            CHECK(points[1].steps == points[1].seq);
            CHECK(points[2].steps == points[2].seq);
        }
        CHECK(calibrationShapes(CalibrationShapes::Small)[2].batch > SEQUENCE_CPU_MAX_BATCH);
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

    TEST_CASE("a CPU device is calibrated with the small table, a GPU with the wide one; ORTOPS_COST_SHAPES=small asks for the small")
    {
        ::unsetenv("ORTOPS_COST_SHAPES");
        DeviceDescription gpu, cpu;
        gpu.name = "a GPU";
        gpu.type = "discrete";
        cpu.name = "llvmpipe";
        cpu.type = "cpu";
        CHECK(calibrationShapesFor(gpu) == CalibrationShapes::Wide);
        CHECK(calibrationShapesFor(cpu) == CalibrationShapes::Small);
        ::setenv("ORTOPS_COST_SHAPES", "default", 1);
        CHECK(calibrationShapesFor(gpu) == CalibrationShapes::Wide);
        ::setenv("ORTOPS_COST_SHAPES", "small", 1);
        CHECK(calibrationShapesFor(gpu) == CalibrationShapes::Small);
        ::setenv("ORTOPS_COST_SHAPES", "tiny", 1);
        CHECK_THROWS_WITH(calibrationShapesFor(gpu), "ortops: ORTOPS_COST_SHAPES must be 'default' or 'small', got 'tiny'");
        ::unsetenv("ORTOPS_COST_SHAPES");
    }

    TEST_CASE("the notice names the device, the points and the cache; the report the time and the costs")
    {
        DeviceDescription cpu;
        cpu.name = "llvmpipe";
        cpu.type = "cpu";
        std::string notice = calibrationNotice(cpu, CalibrationShapes::Small, "/tmp/x/costmodel.json");
        CHECK(notice.find("calibrating the cost model for llvmpipe once") != std::string::npos);
        CHECK(notice.find("1x1x8x8, 64x1x8x8, 2x128x32x32") != std::string::npos);
        CHECK(notice.find("cached in /tmp/x/costmodel.json") != std::string::npos);
        Calibration c{ "k", Side{ 1e-3, 1e-5, 1e-12 }, Side{ 1e-5, 1e-6, 1e-10 } };
        CHECK(calibrationReport(c, 4.25) == "ortops: cost model calibrated in 4.2 s: " + c.describe());
    }
}
