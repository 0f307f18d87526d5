// The commands a sequence records that Kompute's own operations do not offer, as kp::OpBase
// subclasses so that they sit in one list with Kompute's tensor syncs.
//
// Why our own: kp 0.9.0's OpAlgoDispatch records a transfer-write -> shader-read barrier per
// tensor on every dispatch and nothing else, and its Python module does not expose
// OpMemoryBarrier. One step's dispatch is then not ordered before the next step's (a write-
// after-write / read-after-write hazard that lavapipe hides because it runs dispatches one at a
// time). So ordering is recorded explicitly here:
//   * OpDispatch: bind, push constants, dispatch; no per-tensor barriers, so a step costs one
//     dispatch plus one barrier and nothing else;
//   * OpBarrier: execution+memory barriers with full access masks, one global VkMemoryBarrier
//     rather than one buffer barrier per tensor (the recurrent loop orders every buffer at
//     once, and a global barrier is what the Vulkan spec recommends for that);
//   * OpCopy: byte-range copies (Kompute copies whole tensors only);
//   * OpFinish: the completion word a run's end is polled for;
//   * OpTimestamp: GPU timestamps exactly where we want them, not after every op.
// Each records the same commands on every recording; none does anything before or after a
// submission (preEval/postEval are empty).
#pragma once

#include <kompute/Kompute.hpp>

#include <memory>
#include <string>
#include <vector>

#include "vk/memory.hpp"
#include "vk/program.hpp"

namespace ortops {

// One dispatch with its own push constants and group counts. Kompute's OpAlgoDispatch also
// records a transfer->shader barrier per tensor on every dispatch; ordering is ours to record
// (OpBarrier), so this records the bind, the push and the dispatch only.
class OpDispatch : public kp::OpBase
{
  public:
    OpDispatch(std::shared_ptr<Program> program,
               std::vector<uint32_t> push,
               uint32_t x,
               uint32_t y,
               uint32_t z);
    void record(const vk::CommandBuffer& cb) override;
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    std::shared_ptr<Program> mProgram;
    std::vector<uint32_t> mPush;
    uint32_t mX, mY, mZ;
};

// A pipeline stage with the accesses a barrier makes available (writes) or visible (access).
struct Scope
{
    vk::PipelineStageFlags stage;
    vk::AccessFlags writes;
    vk::AccessFlags access;
};

// A global execution and memory dependency: every write of the source stage made available
// and visible to every read and write of the destination stage. Reads in the source stage
// are ordered too (execution dependency), which covers write-after-read. Scopes are named
// "compute" or "transfer".
class OpBarrier : public kp::OpBase
{
  public:
    OpBarrier(const std::string& src, const std::string& dst);
    void record(const vk::CommandBuffer& cb) override;
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    Scope mSrc, mDst;
};

// Byte-range copy between two buffers' device memory (Kompute's recordCopyFrom copies whole
// tensors only; a planner's regions are buffer-plus-offset).
class OpCopy : public kp::OpBase
{
  public:
    OpCopy(std::shared_ptr<Memory> src, std::shared_ptr<Memory> dst, vk::BufferCopy region);
    void record(const vk::CommandBuffer& cb) override;
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    std::shared_ptr<Memory> mSrc, mDst;
    vk::BufferCopy mRegion;
};

// The last command of a run: once everything before it has completed, write 1 into a
// host-coherent word the host polls. NVIDIA's vkWaitForFences sleeps and wakes about half a
// millisecond late; polling the word first, then waiting on the (by then signalled) fence, cuts that latency
// without changing what the fence guarantees.
class OpFinish : public kp::OpBase
{
  public:
    explicit OpFinish(std::shared_ptr<HostBuffer> flag);
    void record(const vk::CommandBuffer& cb) override;
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    std::shared_ptr<HostBuffer> mFlag;
};

// A bottom-of-pipe timestamp into one query of a pool; resetCount > 0 first resets that many
// queries from the start of the pool (the first timestamp of a recording resets them all).
class OpTimestamp : public kp::OpBase
{
  public:
    OpTimestamp(vk::QueryPool pool, uint32_t index, uint32_t resetCount);
    void record(const vk::CommandBuffer& cb) override;
    void preEval(const vk::CommandBuffer&) override {}
    void postEval(const vk::CommandBuffer&) override {}

  private:
    vk::QueryPool mPool;
    uint32_t mIndex, mReset;
};

} // namespace ortops
