// Recording, submission, waiting and timestamps of a sequence (see sequence.hpp).

#include "vk/sequence.hpp"

#include "vk/operations.hpp"

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace ortops {

namespace {

std::vector<std::shared_ptr<kp::Tensor>>
tensorsOf(const std::vector<std::shared_ptr<Buffer>>& buffers)
{
    std::vector<std::shared_ptr<kp::Tensor>> tensors;
    for (const auto& b : buffers) {
        tensors.push_back(b->tensor);
    }
    return tensors;
}

} // namespace

Sequence::Sequence(std::shared_ptr<Context> c, uint32_t timestamps)
  : ctx(std::move(c))
  , queue(&ctx->pickQueue())
  , timestampCount(timestamps)
{
    auto& dev = *ctx->device;
    pool = dev.createCommandPool(
      vk::CommandPoolCreateInfo(vk::CommandPoolCreateFlagBits::eResetCommandBuffer, ctx->family));
    cb = dev.allocateCommandBuffers(
              vk::CommandBufferAllocateInfo(pool, vk::CommandBufferLevel::ePrimary, 1))
           .front();
    fence = dev.createFence(vk::FenceCreateInfo());
    if (timestamps) {
        queries =
          dev.createQueryPool(vk::QueryPoolCreateInfo({}, vk::QueryType::eTimestamp, timestamps));
    }
}

Sequence::~Sequence()
{
    auto& dev = *ctx->device;
    if (pending && !ctx->lost) {
        try {
            (void)dev.waitForFences(fence, VK_TRUE, UINT64_MAX);
        } catch (const std::exception&) {
            // A lost device: nothing to wait for; never throw from a destructor.
        }
    }
    ops.clear();
    dev.destroyFence(fence);
    dev.freeCommandBuffers(pool, cb);
    dev.destroyCommandPool(pool);
    if (queries) {
        dev.destroyQueryPool(queries);
    }
}

// ---------------------------------------------------------------- recording

void
Sequence::record(std::shared_ptr<kp::OpBase> op)
{
    if (pending) {
        wait();
    }
    if (!recording) {
        if (recorded) {
            throw std::runtime_error(
              "ortops: sequence already submitted; record a new sequence instead");
        }
        cb.begin(vk::CommandBufferBeginInfo());
        recording = true;
    }
    op->record(cb);
    ops.push_back(std::move(op));
}

void
Sequence::end()
{
    if (recording) {
        cb.end();
        recording = false;
        recorded = true;
    }
}

void
Sequence::upload(const std::vector<std::shared_ptr<Buffer>>& buffers)
{
    record(std::make_shared<kp::OpTensorSyncDevice>(tensorsOf(buffers)));
}

void
Sequence::download(const std::vector<std::shared_ptr<Buffer>>& buffers)
{
    record(std::make_shared<kp::OpTensorSyncLocal>(tensorsOf(buffers)));
}

void
Sequence::dispatch(std::shared_ptr<Program> program,
                   uint32_t x,
                   uint32_t y,
                   uint32_t z,
                   std::vector<uint32_t> push)
{
    // A pipeline still being made is waited for here, its error raised here, first, as the
    // program's constructor raised it before pipelines were made on their own thread
    // (program.hpp), and for an empty dispatch too.
    program->wait();
    if (push.size() != program->pushWords) {
        throw std::invalid_argument("ortops: program takes " + std::to_string(program->pushWords) +
                                    " push-constant words, got " + std::to_string(push.size()));
    }
    if (program->ctx != ctx) {
        throw std::invalid_argument("ortops: program and sequence contexts differ");
    }
    if (x == 0 || y == 0 || z == 0) {
        return; // an empty dispatch records nothing
    }
    // A count above the limit is invalid Vulkan that some drivers run anyway (lavapipe did):
    // refuse it here so no caller records one. The limits were read when the context was made.
    const auto& limit = ctx->limits.maxComputeWorkGroupCount;
    if (x > limit[0] || y > limit[1] || z > limit[2]) {
        throw std::invalid_argument(
          "ortops: dispatch of " + std::to_string(x) + " x " + std::to_string(y) + " x " +
          std::to_string(z) + " workgroups exceeds the device's maxComputeWorkGroupCount of " +
          std::to_string(limit[0]) + " x " + std::to_string(limit[1]) + " x " +
          std::to_string(limit[2]));
    }
    record(std::make_shared<OpDispatch>(std::move(program), std::move(push), x, y, z));
}

void
Sequence::barrier(const std::string& src, const std::string& dst)
{
    record(std::make_shared<OpBarrier>(src, dst));
}

void
Sequence::copy(std::shared_ptr<Memory> src,
               std::shared_ptr<Memory> dst,
               uint64_t srcOffset,
               uint64_t dstOffset,
               uint64_t size)
{
    if (srcOffset + size > src->bytes || dstOffset + size > dst->bytes) {
        throw std::out_of_range("ortops: copy range outside its buffers");
    }
    if (size) {
        record(std::make_shared<OpCopy>(
          std::move(src), std::move(dst), vk::BufferCopy(srcOffset, dstOffset, size)));
    }
}

void
Sequence::finish()
{
    if (!doneFlag) {
        doneFlag = std::make_shared<HostBuffer>(ctx, 4, true);
    }
    record(std::make_shared<OpFinish>(doneFlag));
    finishRecorded = true;
}

void
Sequence::timestamp(uint32_t index)
{
    if (index >= timestampCount) {
        throw std::out_of_range("ortops: timestamp index " + std::to_string(index) +
                                " but the sequence has " + std::to_string(timestampCount));
    }
    // The first timestamp of a recording resets the whole pool, so a recorded sequence can
    // be replayed and read again.
    uint32_t reset = timestampsWritten == 0 ? timestampCount : 0;
    record(std::make_shared<OpTimestamp>(queries, index, reset));
    timestampsWritten++;
}

// ---------------------------------------------------------------- running

void
Sequence::submit()
{
    if (pending) {
        throw std::runtime_error("ortops: sequence submitted again before its wait");
    }
    ctx->checkAlive();
    end();
    if (!recorded) {
        return;
    }
    for (auto& op : ops) {
        op->preEval(cb);
    }
    if (finishRecorded) {
        doneFlag->setWord(0);
    }
    try {
        ctx->device->resetFences(fence);
        vk::SubmitInfo info({}, {}, cb);
        std::lock_guard<std::mutex> guard(queue->lock);
        queue->queue.submit(info, fence);
    } catch (const vk::DeviceLostError& e) {
        ctx->fail(std::string("vkQueueSubmit: ") + e.what());
    }
    pending = true;
}

void
Sequence::wait()
{
    if (!pending) {
        return;
    }
    if (finishRecorded && ctx->pollCompletion) {
        // Poll for at most a second, then fall back on the fence wait alone.
        auto start = std::chrono::steady_clock::now();
        uint64_t spins = 0;
        while (doneFlag->word() == 0) {
            if ((++spins & 1023u) == 0) {
                if (std::chrono::steady_clock::now() - start > std::chrono::seconds(1)) {
                    break;
                }
                std::this_thread::yield();
            }
        }
    }
    // Whatever happens below, this submission is over: the next run may submit again.
    pending = false;
    vk::Result result;
    try {
        result = ctx->device->waitForFences(fence, VK_TRUE, fenceTimeoutNs);
    } catch (const vk::DeviceLostError& e) {
        ctx->fail(std::string("vkWaitForFences: ") + e.what());
    }
    if (result != vk::Result::eSuccess) {
        ctx->fail("waiting for the device returned " + vk::to_string(result));
    }
    for (auto& op : ops) {
        op->postEval(cb);
    }
}

void
Sequence::eval()
{
    std::lock_guard<std::mutex> guard(runLock);
    submit();
    wait();
}

// Where a run's host time goes, in microseconds: fence reset and submit, until the
// completion marker lands, and the fence wait after it.
std::vector<double>
Sequence::profileEval()
{
    using clock = std::chrono::steady_clock;
    auto us = [](clock::duration d) {
        return std::chrono::duration<double, std::micro>(d).count();
    };
    if (!finishRecorded) {
        finish();
    }
    auto t0 = clock::now();
    submit();
    auto t1 = clock::now();
    while (doneFlag->word() == 0) {
        if (clock::now() - t1 > std::chrono::seconds(1)) {
            break;
        }
    }
    auto t2 = clock::now();
    wait();
    auto t3 = clock::now();
    return { us(t1 - t0), us(t2 - t1), us(t3 - t2) };
}

std::vector<double>
Sequence::timestamps()
{
    if (!queries) {
        throw std::runtime_error("ortops: sequence was created without timestamps");
    }
    std::vector<uint64_t> ticks(timestampCount, 0);
    auto result = ctx->device->getQueryPoolResults(
      queries, 0, timestampCount, ticks.size() * sizeof(uint64_t), ticks.data(),
      sizeof(uint64_t), vk::QueryResultFlagBits::e64 | vk::QueryResultFlagBits::eWait);
    if (result != vk::Result::eSuccess) {
        throw std::runtime_error("ortops: timestamps not available");
    }
    std::vector<double> ns;
    for (auto t : ticks) {
        ns.push_back(static_cast<double>(t) * ctx->timestampPeriod);
    }
    return ns;
}

} // namespace ortops
