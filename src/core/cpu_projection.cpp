// The CPU projection's choice and split (see variants.hpp, "the CPU projection", and
// glsl/input_projection_cpu.comp).

#include "variants.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ortops {

namespace {

// Xw rows a walk over the input: each W value read feeds this many multiply-adds (8 and 16
// measured alike at 80x1x256, docs/perf.md "CPU Vulkan"; 16 compiles twice as long).
constexpr uint32_t CPU_PROJECTION_ROWS = 8;
// Columns an invocation: each broadcast X value feeds this many sums. 80x1x256 (same process,
// loaded machine): projection 356-513 ms at 1 column, 238 at 2, 180-191 at 4 (8 rows; 304 at
// 4 rows x 4); the first call (its compile) 13-14 s at 1, 14-25 s at 4.
constexpr uint32_t CPU_PROJECTION_COLUMNS = 4;
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
    uint32_t rows = s.cpuProjectionRows != BATCHED_TABLE ? std::max<uint32_t>(1, std::min<uint32_t>(s.cpuProjectionRows, 16))
                                                          : CPU_PROJECTION_ROWS;
    bool wRegs = s.cpuProjectionWRegs != BATCHED_TABLE ? s.cpuProjectionWRegs == 2
                                                        : input <= CPU_PROJECTION_W_REGS_MAX;
    uint32_t columns = s.cpuProjectionColumns != BATCHED_TABLE ? std::min<uint32_t>(s.cpuProjectionColumns, 8)
                                                                : CPU_PROJECTION_COLUMNS;
    return { rows, CPU_PROJECTION_THREADS, wRegs, wRegs ? 1 : columns };
}

} // namespace ortops
