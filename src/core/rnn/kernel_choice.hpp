// Which kernels a plan records: the input projection (the portable one, or on matrix hardware
// in mode "fast") and the step kernel (StepKernel, types.hpp). The choice is made once per plan
// key (plan_pool.hpp keeps it); adding a step kernel means a StepKernel value, its rule in
// chooseStepKernel and its recording (recording.cpp's stepProgram).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vk/devices.hpp"
#include "rnn/controls.hpp"
#include "rnn/persistent.hpp"
#include "rnn/spec.hpp"
#include "config/types.hpp"

namespace ortops {

// glsl/input_projection_coopmat.comp: a 128 x 128 tile of Xw a workgroup of eight subgroups;
// shared memory: X's and W's 128 x 32 slices (rows of 40 halves) and eight 16 x 20 float
// staging blocks.
inline constexpr uint32_t COOPMAT_TILE = 128;
inline constexpr uint32_t COOPMAT_SHARED_BYTES = 2 * COOPMAT_TILE * 40 * 2 + 8 * 16 * 20 * 4;

// Why the device `d` (whose context was created with VK_KHR_cooperative_matrix's features where
// `contextEnabled`, else not, `contextOff` saying why) cannot run the cooperative-matrix kernels
// of mode "fast": it does not list the combination they are written for (coopmatRequired), its
// context lacks the extension, no 16-bit SignedZeroInfNanPreserve, compute subgroups other than
// exactly 32 wide, or too little shared memory. Nothing when it can. ortops.fast.coopmat_reason
// reads it through _vk.
std::optional<std::string>
coopmatReason(const DeviceDescription& d, bool contextEnabled, const std::string& contextOff);

// Mode "fast" (docs/modes.md): whether a float16 layer projects its inputs on matrix hardware
// (glsl/input_projection_coopmat.comp): in mode "fast", for a float16 layer, where the device
// can run it (coopmatReason) and `requested` (LayerSettings::coopmat; ORTOPS_COOPMAT=0
// switches it off).
bool
useCoopmat(Mode mode, bool float16, const DeviceDescription& d, bool contextEnabled, bool requested);
bool
useCoopmat(const Spec& s, const DeviceDescription& d, const Context& ctx, bool requested);

// glsl/step_coopmat.comp's shared memory in bytes for a pass of `gatesInPass` gates and
// `blocks` 16-row batch blocks a workgroup.
uint32_t
coopmatStepsShared(uint32_t gatesInPass, uint32_t blocks);

// The step kernel a plan of this batch records.
StepKernel
chooseStepKernel(const Spec& s, const DeviceDescription& d, const Context& ctx, const LayerSettings& settings,
                 uint32_t batch);
// The step kernel a persistent plan records as its fallback (persistent.hpp): the choice without
// the persistent kernel (the lanes or the whole-sequence kernel: persistentSteps says so).
StepKernel
fallbackStepKernel(const Spec& s, const DeviceDescription& d, const Context& ctx, const LayerSettings& settings,
                   uint32_t batch);

// The persistent kernel's view of a layer at a batch, and of a device (persistent.hpp).
PersistentShape
persistentShape(const Spec& s, uint32_t batch);
PersistentDevice
persistentDevice(const DeviceDescription& d);

} // namespace ortops
