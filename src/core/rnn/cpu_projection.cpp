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
// inside the row loop is one too (Mesa 22.3 looks for an active lane first). 16 x 8 ran nearly
// as fast as the fastest split measured (20 x 8) and compiles in about half its time; larger
// splits compile for much longer and run no faster (docs/perf.md, "Kernel choices").
constexpr uint32_t CPU_PROJECTION_ROWS = 16;
constexpr uint32_t CPU_PROJECTION_COLUMNS = 8;
// Invocations a workgroup: 8 lanes x 8 (lavapipe runs a workgroup on one core; 1024 columns of a
// direction make 16 workgroups, enough to share 2 cores).
constexpr uint32_t CPU_PROJECTION_THREADS = 64;
// The largest input whose W row an invocation holds (the k loop unrolled: MR x K
// multiply-adds of code): none by default. Lavapipe compiles the unrolled walk for tens of
// seconds to minutes, for no faster run (docs/perf.md, "Kernel choices");
// VariantSettings::cpuProjectionWRegs still forces it for measurements.
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

// The table: every CPU device, where it is several times faster than the tiled kernel (whose
// loads lavapipe compiles as loops over the lanes). GPUs: unmeasured, the tiled kernel.
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
