// The whole-sequence kernel's choice and split (see variants.hpp, "the whole-sequence kernel",
// and glsl/step_sequence.comp).

#include "rnn/variants.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ortops {

namespace {

// ORTOPS_SEQUENCE_STEPS=0 or 1 (read at each plan's recording; plans are recorded once per
// shape): the lead's switch for measuring the kernel against the step kernels on any device.
// Anything else, or unset: the table.
uint32_t
sequenceStepsFromEnv()
{
    const char* env = std::getenv("ORTOPS_SEQUENCE_STEPS");
    if (env && std::string(env) == "0") {
        return 0;
    }
    if (env && std::string(env) == "1") {
        return 1;
    }
    return SEQUENCE_STEPS_TABLE;
}

bool
tableChooses(uint32_t hidden, uint32_t batch, bool cpu)
{
    bool chosen = false;
    for (const auto& r : SEQUENCE_STEPS) {
        if (r.cpu == cpu) {
            chosen = hidden <= r.maxHidden && batch <= r.maxBatch;
        }
    }
    return chosen;
}

} // namespace

SequenceVariant
sequenceVariant(uint32_t hidden, uint32_t batch, bool gruTwoPass, bool cpu, uint32_t maxInvocations,
                const VariantSettings& s, uint32_t subgroupSize)
{
    uint32_t nb = std::max<uint32_t>(1, std::min(s.sequenceRows != BATCHED_TABLE ? s.sequenceRows : 1, batch));
    uint64_t cells = static_cast<uint64_t>(nb) * hidden;
    uint64_t most = std::min<uint32_t>(std::max<uint32_t>(maxInvocations, 32), BATCHED_MAX_INVOCATIONS);
    // glsl/step_sequence.comp's h planes: a batch row is 32 classes of ceil(hidden / 32)
    // positions rounded up to 4 (so that a class's terms are read four at a time).
    uint64_t row = 32 * 4 * ceilDiv(classesLength(hidden), 4);
    uint64_t shared = (gruTwoPass ? 3 : 2) * nb * row * 4;
    uint32_t sharedBytes = static_cast<uint32_t>(std::min<uint64_t>(shared, 0xFFFFFFFFu));
    if (cpu && nb == 1 && hidden <= std::min<uint64_t>(SEQUENCE_R_REGS_MAX, most)) {
        // A thread a unit, R in its private array; h by broadcast where every subgroup can be
        // whole (a power of two from 4 to 32 lanes that divides a row's quads, and the rounded
        // threads within the device's limit).
        bool pow2 = subgroupSize >= 4 && subgroupSize <= 32 && (subgroupSize & (subgroupSize - 1)) == 0;
        uint32_t units = s.sequenceUnits != BATCHED_TABLE ? std::clamp<uint32_t>(s.sequenceUnits, 1, 8)
                                                          : SEQUENCE_CPU_UNITS;
        uint64_t rounded = pow2 ? subgroupSize * ceilDiv(ceilDiv(hidden, units), subgroupSize) : 0;
        if (pow2 && rounded <= most && s.sequenceBroadcast != 1) {
            return { nb, static_cast<uint32_t>(rounded), sharedBytes, true, subgroupSize, units };
        }
        return { nb, hidden, sharedBytes, true };
    }
    // A thread a cell, in whole 32-lane rows (a GPU's warp), up to the device's (and 1024).
    uint32_t threads = static_cast<uint32_t>(std::min<uint64_t>(32 * ceilDiv(cells, 32), most));
    return { nb, threads, sharedBytes, false };
}

bool
sequenceSteps(uint32_t hidden, uint32_t batch, bool gruTwoPass, bool cpu, uint32_t maxShared, uint32_t maxInvocations,
              const VariantSettings& s)
{
    uint32_t choice = s.sequenceSteps != SEQUENCE_STEPS_TABLE ? s.sequenceSteps : sequenceStepsFromEnv();
    if (choice == 0 || batch == 0) {
        return false;
    }
    if (sequenceVariant(hidden, batch, gruTwoPass, cpu, maxInvocations, s).sharedBytes > maxShared) {
        return false;
    }
    return choice != SEQUENCE_STEPS_TABLE || tableChooses(hidden, batch, cpu);
}

} // namespace ortops
