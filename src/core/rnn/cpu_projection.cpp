// The CPU projection's choice and split (see variants.hpp, "the CPU projection", and
// glsl/input_projection_cpu.comp).

#include "rnn/variants.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ortops {

namespace {

// Xw rows a walk over the input (each W value read feeds this many multiply-adds) and columns
// an invocation (each broadcast X value feeds this many sums). Both loads cost far more than
// the multiply-adds they feed on lavapipe: a W load is a loop over the lanes, and a broadcast
// inside the row loop is one too (Mesa 22.3 looks for an active lane first). 80x1, hidden 256,
// bidirectional, on the idle machine (2026-12-02 22:22-22:24 UTC, same process, same bits;
// docs/perf.md "CPU Vulkan: the loads"): input 256 27.3 ms at 8 rows x 4 columns, 25.7 at
// 16 x 4, 29.9 at 8 x 8, 15.0 at 16 x 8, 13.5 at 20 x 8, 14.7 at 16 x 16, 16.0 at 40 x 4;
// input 512 58.4 at 8 x 4, 29.1-31.1 at 16 x 8. First calls (the compile, with the steps')
// 3-6 s at 16 x 8, 7-8 s at 20 x 8, 15-21 s at 16 x 16 or 40 x 4. (Under load, at 1 column,
// 8 and 16 rows had measured alike.)
constexpr uint32_t CPU_PROJECTION_ROWS = 16;
constexpr uint32_t CPU_PROJECTION_COLUMNS = 8;
// Invocations a workgroup: 8 lanes x 8 (lavapipe runs a workgroup on one core; 1024 columns of a
// direction make 16 workgroups, enough to share 2 cores).
constexpr uint32_t CPU_PROJECTION_THREADS = 64;
// The largest input whose W row an invocation holds (the k loop unrolled: MR x K
// multiply-adds of code): none by default. Lavapipe's compile of the unrolled walk took 23 s
// (K 256, MR 4) and 65 s (K 512) without the subgroup broadcast, and over 11 minutes with it
// (killed), for no faster run (docs/perf.md, "CPU Vulkan"); VariantSettings::cpuProjectionWRegs
// still forces it for measurements.
constexpr uint32_t CPU_PROJECTION_W_REGS_MAX = 0;

// ORTOPS_CPU_PROJECTION=0 or 1 (read at each plan's recording): force it off or on.
uint32_t
cpuProjectionFromEnv()
{
    const char* env = std::getenv("ORTOPS_CPU_PROJECTION");
    if (env && std::string(env) == "0") {
        return 0;
    }
    if (env && std::string(env) == "1") {
        return 1;
    }
    return CPU_PROJECTION_TABLE;
}

} // namespace

// The table: every CPU device. Lavapipe (2 cores, loaded, alternated in one process; same
// bits): the projection of 80x1 bidirectional LSTMs, hidden 256, 937-979 ms tiled against
// 315-328 (input 256) and 1,215-1,302 against 409-423 (input 512); the recognizer 2,032-2,402
// ms against 1,002-1,366. GPUs: unmeasured, the tiled kernel.
bool
cpuProjection(bool cpu, uint32_t subgroupSize, const VariantSettings& s)
{
    bool lanes = subgroupSize >= 4 && subgroupSize <= CPU_PROJECTION_THREADS && (subgroupSize & (subgroupSize - 1)) == 0;
    if (!lanes) {
        return false;
    }
    uint32_t choice = s.cpuProjection != CPU_PROJECTION_TABLE ? s.cpuProjection : cpuProjectionFromEnv();
    return choice == CPU_PROJECTION_TABLE ? cpu : choice != 0;
}

CpuProjection
cpuProjectionVariant(uint32_t input, const VariantSettings& s)
{
    uint32_t rows = s.cpuProjectionRows != BATCHED_TABLE ? std::max<uint32_t>(1, std::min<uint32_t>(s.cpuProjectionRows, 64))
                                                          : CPU_PROJECTION_ROWS;
    bool wRegs = s.cpuProjectionWRegs != BATCHED_TABLE ? s.cpuProjectionWRegs == 2
                                                        : input <= CPU_PROJECTION_W_REGS_MAX;
    uint32_t columns = s.cpuProjectionColumns != BATCHED_TABLE ? std::min<uint32_t>(s.cpuProjectionColumns, 16)
                                                                : CPU_PROJECTION_COLUMNS;
    return { rows, CPU_PROJECTION_THREADS, wRegs, wRegs ? 1 : columns };
}

} // namespace ortops
