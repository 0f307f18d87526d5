// The kernel choices (kernel_choice.hpp), with the measurements behind them.

#include "rnn/kernel_choice.hpp"

#include "rnn/persistent.hpp"
#include "rnn/variants.hpp"

namespace ortops {

// On the H200 the cooperative-matrix projection's second version projects 5.6 and 6.2 times as
// fast as the portable kernel at the two float16 anchors (docs/modes.md), so it is on by
// default.
bool
useCoopmat(const Spec& s, const DeviceDescription& d, const Context& ctx, bool requested)
{
    if (!requested || s.mode != Mode::Fast || !s.float16) {
        return false;
    }
    bool listed = false;
    for (const auto& c : d.cooperativeMatrix) {
        listed = listed || c.isHalfIntoFloatSubgroup16();
    }
    return listed && ctx.cooperativeMatrix && d.nanPreserveFloat16 && d.subgroupSizeRange &&
           d.subgroupSizeRange->first == 32 && d.subgroupSizeRange->second == 32 &&
           COOPMAT_SHARED_BYTES <= d.maxSharedMemory;
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
    return { s.hidden, s.gates, s.dirs, batch, s.gruTwoPass() };
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
    // The persistent grid needs the memory model at device scope, and a device whose grid has
    // failed in this process runs the step kernels.
    bool runnable = ctx.memoryModelDeviceScope && !persistentOff(d.index);
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
