// The kernel choices (kernel_choice.hpp) and why.

#include "rnn/kernel_choice.hpp"

#include "rnn/variants.hpp"

namespace ortops {

// On by default: on the H200 the cooperative-matrix projection runs several times as fast as the
// portable kernel at the float16 anchors (docs/modes.md).
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

// StepKernel::Coopmat (R . h on the matrix units: mode "fast", a float16 layer with the cells'
// default activations, which keep h within float16's range, on a device that runs the
// cooperative-matrix projection, from the batch variants.hpp's COOPMAT_STEPS_FROM gives the
// hidden size), else variants.hpp's stepKernel: Lanes or Batched (whose shader, v4 or v5,
// BatchedVariant::shader() names).
StepKernel
chooseStepKernel(const Spec& s, const DeviceDescription& d, const Context& ctx, const LayerSettings& settings,
                 uint32_t batch)
{
    // useCoopmat first: it ends at once outside mode "fast" and float16 (every other layer).
    if (useCoopmat(s, d, ctx, settings.coopmat) && !s.generalActivations) {
        uint32_t from = coopmatStepsFrom(s.hidden, settings.variants);
        uint32_t blocks = coopmatBlocks(s.hidden, batch, s.dirs, settings.variants);
        if (from != 0 && batch >= from && coopmatStepsShared(s.gates, blocks) <= d.maxSharedMemory) {
            return StepKernel::Coopmat;
        }
    }
    if (sequenceSteps(s.hidden, batch, s.gruTwoPass(), d.type == "cpu", d.maxSharedMemory, d.maxWorkgroupInvocations,
                      settings.variants)) {
        return StepKernel::Sequence;   // every step in one dispatch (variants.hpp, SEQUENCE_STEPS)
    }
    return stepKernel(batch, s.hidden, settings.variants);
}

} // namespace ortops
