// The commands each operation records (see operations.hpp).

#include "vk/operations.hpp"

#include <stdexcept>

namespace ortops {

// ---------------------------------------------------------------- OpDispatch

OpDispatch::OpDispatch(std::shared_ptr<Program> program,
                       std::vector<uint32_t> push,
                       uint32_t x,
                       uint32_t y,
                       uint32_t z)
  : mProgram(std::move(program))
  , mPush(std::move(push))
  , mX(x)
  , mY(y)
  , mZ(z)
{
}

void
OpDispatch::record(const vk::CommandBuffer& cb)
{
    mProgram->record(cb, mPush, mX, mY, mZ);
}

// ---------------------------------------------------------------- OpBarrier

namespace {

Scope
scopeOf(const std::string& name)
{
    using S = vk::PipelineStageFlagBits;
    using A = vk::AccessFlagBits;
    if (name == "compute") {
        return { S::eComputeShader, A::eShaderWrite, A::eShaderRead | A::eShaderWrite };
    }
    if (name == "transfer") {
        return { S::eTransfer, A::eTransferWrite, A::eTransferRead | A::eTransferWrite };
    }
    throw std::invalid_argument("ortops: barrier scope must be compute or transfer, got " + name);
}

} // namespace

OpBarrier::OpBarrier(const std::string& src, const std::string& dst)
  : mSrc(scopeOf(src))
  , mDst(scopeOf(dst))
{
}

void
OpBarrier::record(const vk::CommandBuffer& cb)
{
    vk::MemoryBarrier barrier(mSrc.writes, mDst.access);
    cb.pipelineBarrier(mSrc.stage, mDst.stage, {}, barrier, {}, {});
}

// ---------------------------------------------------------------- OpCopy

OpCopy::OpCopy(std::shared_ptr<Memory> src, std::shared_ptr<Memory> dst, vk::BufferCopy region)
  : mSrc(std::move(src))
  , mDst(std::move(dst))
  , mRegion(region)
{
}

void
OpCopy::record(const vk::CommandBuffer& cb)
{
    cb.copyBuffer(mSrc->handle(), mDst->handle(), mRegion);
}

// ---------------------------------------------------------------- OpFinish

OpFinish::OpFinish(std::shared_ptr<HostBuffer> flag)
  : mFlag(std::move(flag))
{
}

void
OpFinish::record(const vk::CommandBuffer& cb)
{
    vk::MemoryBarrier before(vk::AccessFlagBits::eMemoryWrite, vk::AccessFlagBits::eTransferWrite);
    cb.pipelineBarrier(vk::PipelineStageFlagBits::eAllCommands,
                       vk::PipelineStageFlagBits::eTransfer, {}, before, {}, {});
    cb.fillBuffer(mFlag->handle(), 0, 4, 1);
    vk::MemoryBarrier after(vk::AccessFlagBits::eTransferWrite, vk::AccessFlagBits::eHostRead);
    cb.pipelineBarrier(vk::PipelineStageFlagBits::eTransfer,
                       vk::PipelineStageFlagBits::eHost, {}, after, {}, {});
}

// ---------------------------------------------------------------- OpTimestamp

OpTimestamp::OpTimestamp(vk::QueryPool pool, uint32_t index, uint32_t resetCount)
  : mPool(pool)
  , mIndex(index)
  , mReset(resetCount)
{
}

void
OpTimestamp::record(const vk::CommandBuffer& cb)
{
    if (mReset) {
        cb.resetQueryPool(mPool, 0, mReset);
    }
    cb.writeTimestamp(vk::PipelineStageFlagBits::eBottomOfPipe, mPool, mIndex);
}

} // namespace ortops
