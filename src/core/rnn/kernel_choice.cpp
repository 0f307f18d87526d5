// The kernel choices (kernel_choice.hpp) and why.

#include "rnn/kernel_choice.hpp"

#include "rnn/persistent.hpp"
#include "rnn/variants.hpp"

#include <algorithm>

namespace ortops {

std::optional<std::string>
coopmatReason(const DeviceDescription& d, bool contextEnabled, const std::string& contextOff)
{
    if (std::none_of(d.cooperativeMatrix.begin(), d.cooperativeMatrix.end(),
                     [](const CooperativeMatrixShape& c) { return c.isHalfIntoFloatSubgroup16(); })) {
        return "the device does not list VK_KHR_cooperative_matrix " + coopmatRequired().describe();
    }
    if (!contextEnabled) {
        return "VK_KHR_cooperative_matrix is not enabled: " + (contextOff.empty() ? std::string("not offered") : contextOff);
    }
    if (!d.nanPreserveFloat16) {
        return std::string("no shaderSignedZeroInfNanPreserveFloat16 (the kernel declares it)");
    }
    if (!d.subgroupSizeRange || d.subgroupSizeRange->first != 32 || d.subgroupSizeRange->second != 32) {
        std::string range = d.subgroupSizeRange ? "(" + std::to_string(d.subgroupSizeRange->first) + ", " +
                                                    std::to_string(d.subgroupSizeRange->second) + ")"
                                                : "not reported";
        return "the kernel needs compute subgroups of exactly 32 invocations, the device's range is " + range;
    }
    if (COOPMAT_SHARED_BYTES > d.maxSharedMemory) {
        return "the kernel needs " + std::to_string(COOPMAT_SHARED_BYTES) + " bytes of shared memory";
    }
    return std::nullopt;
}

// On by default: on the H200 the cooperative-matrix projection runs several times as fast as the
// portable kernel at the float16 anchors (docs/modes.md).
bool
useCoopmat(Mode mode, bool float16, const DeviceDescription& d, bool contextEnabled, bool requested)
{
    return requested && mode == Mode::Fast && float16 && !coopmatReason(d, contextEnabled, "");
}

bool
useCoopmat(const Spec& s, const DeviceDescription& d, const Context& ctx, bool requested)
{
    return useCoopmat(s.mode, s.float16, d, ctx.cooperativeMatrix, requested);
}

// R's 64 x 64 slice and h's BT x 64 slice (rows of 36 half pairs), and the sums of the pass's
// gates, BT x 16 floats each.
uint32_t
coopmatStepsShared(uint32_t gatesInPass, uint32_t blocks)
{
    uint32_t bt = 16 * blocks;
    return (64 + bt) * 36 * 4 + gatesInPass * bt * 16 * 4;
}

PersistentShape
persistentShape(const Spec& s, uint32_t batch)
{
    return { s.hidden, s.gates, s.dirs, batch, s.gruTwoPass(), s.cell->op };
}

PersistentDevice
persistentDevice(const DeviceDescription& d)
{
    return { d.type == "cpu", d.computeUnits, d.maxSharedMemory, d.maxWorkgroupInvocations };
}

namespace {

// Coopmat where it runs (below), else, with `persistent`, the persistent kernel where
// persistentSteps says, else the whole-sequence kernel or variants.hpp's stepKernel.
StepKernel
choose(const Spec& s, const DeviceDescription& d, const Context& ctx, const LayerSettings& settings, uint32_t batch,
       bool persistent)
{
    // useCoopmat first: it ends at once outside mode "fast" and float16 (every other layer).
    if (useCoopmat(s, d, ctx, settings.coopmat) && !s.generalActivations) {
        uint32_t from = coopmatStepsFrom(s.hidden, settings.variants);
        uint32_t blocks = coopmatBlocks(s.hidden, batch, s.dirs, settings.variants);
        if (from != 0 && batch >= from && coopmatStepsShared(s.gates, blocks) <= d.maxSharedMemory) {
            return StepKernel::Coopmat;
        }
    }
    // The persistent grid needs the memory model at device scope and 64-bit atomics, and a
    // device whose grid has failed in this process runs the step kernels.
    bool runnable = ctx.memoryModelDeviceScope && ctx.int64Atomics && !persistentOff(d.index);
    if (persistent &&
        persistentSteps(persistentShape(s, batch), persistentDevice(d), s.mode, runnable, settings.variants)) {
        return StepKernel::Persistent;   // every step in one grid holding R (variants.hpp, PERSISTENT_STEPS)
    }
    if (sequenceSteps(s.hidden, batch, s.gruTwoPass(), d.type == "cpu", d.maxSharedMemory, d.maxWorkgroupInvocations,
                      settings.variants)) {
        return StepKernel::Sequence;   // every step in one dispatch (variants.hpp, SEQUENCE_STEPS)
    }
    return stepKernel(batch, s.hidden, settings.variants);
}

} // namespace

// StepKernel::Coopmat (R . h on the matrix units: mode "fast", a float16 layer with the cells'
// default activations, which keep h within float16's range, on a device that runs the
// cooperative-matrix projection, from the batch variants.hpp's COOPMAT_STEPS_FROM gives the
// hidden size), else the persistent kernel (persistent.hpp), else the whole-sequence kernel,
// else variants.hpp's stepKernel: Lanes or Batched (whose shader, v4 or v5,
// BatchedVariant::shader() names).
StepKernel
chooseStepKernel(const Spec& s, const DeviceDescription& d, const Context& ctx, const LayerSettings& settings,
                 uint32_t batch)
{
    return choose(s, d, ctx, settings, batch, true);
}

StepKernel
fallbackStepKernel(const Spec& s, const DeviceDescription& d, const Context& ctx, const LayerSettings& settings,
                   uint32_t batch)
{
    return choose(s, d, ctx, settings, batch, false);
}

} // namespace ortops
