// Recording one plan (recordPlan): its buffers, its programs with named specialization
// constants and its one command sequence, in four stages (glsl/ has each pass):
//   1. projection: Xw = X . W^T for every step and direction (one batched Gemm), and the state
//      set-up: state slot 0 and the cell state from initial_h / initial_c or zeros;
//   2. steps: the step kernel once per time step (twice for a GRU with linear_before_reset =
//      0), each followed by a compute-to-compute barrier, since step s + 1 reads the hidden
//      state step s wrote (the whole-sequence and the persistent kernels: one dispatch);
//   3. outputs: output_sequence (Y) and output_state (Y_h, Y_c), for the requested outputs
//      only; then copies into host-cached memory and the end-of-run marker.
// The step kernel is the plan pool's (kernel_choice.hpp); each has its program in stepProgram.
#pragma once

#include <cstdint>
#include <memory>

#include "vk/devices.hpp"
#include "rnn/limits.hpp"
#include "rnn/plan_pool.hpp"
#include "rnn/spec.hpp"
#include "rnn/tensors.hpp"
#include "rnn/weights.hpp"

namespace ortops {

struct ScratchSizes
{
    uint64_t xw, state;
};

// The two scratch regions a run needs (docs/design.md, "Scratch"): the input projection of
// every step and direction, float32 [dirs, seq, batch, gates * hidden]; every step's hidden
// state [seq + 1, dirs, batch, hidden], then the cell's extra planes, then (the batched step
// kernel) the transposed planes.
ScratchSizes
scratchSizes(const Spec& s, uint32_t seq, uint32_t batch, StepKernel kernel);

// What a recording reads of its layer.
struct RecordingSource
{
    const Spec& spec;
    const DeviceDescription& device;
    std::shared_ptr<Context> ctx;
    const DeviceWeights& weights;
};

// A plan of `key` for the pool's settings and step kernel, checked against `limits`; the
// inputs give the caller scratch regions, if any. A persistent plan also records the run on
// `fallback` (kernel_choice.hpp's fallbackStepKernel) as Plan::fallback.
std::shared_ptr<Plan>
recordPlan(const RecordingSource& layer, const PlanKey& key, const RunInputs& in, const PlanPool& pool,
           const Limits& limits, StepKernel fallback);

} // namespace ortops
