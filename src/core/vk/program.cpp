// Programs: SPIR-V checked, the context's shared pipeline taken (or made on a thread of the
// program's own), the buffers bound in a descriptor set of the program's own (see program.hpp).

#include "vk/program.hpp"

#include <cstring>
#include <stdexcept>
#include <system_error>

namespace ortops {

Program::Program(std::shared_ptr<Context> c,
                 const std::string& code,
                 const std::vector<std::shared_ptr<Buffer>>& bound,
                 const std::vector<uint32_t>& specialization,
                 uint32_t push)
  : ctx(std::move(c))
  , pushWords(push)
{
    if (code.empty() || code.size() % 4 != 0) {
        throw std::invalid_argument("ortops: SPIR-V must be a non-empty multiple of 4 bytes");
    }
    for (const auto& b : bound) {
        if (b->ctx != ctx) {
            throw std::invalid_argument("ortops: a program's buffers must come from its context");
        }
    }
    buffers = bound;
    std::vector<uint32_t> spirv(code.size() / 4);
    std::memcpy(spirv.data(), code.data(), code.size());
    const auto count = static_cast<uint32_t>(bound.size());
    const PipelineKey key{ spirv, specialization, count, pushWords };

    vk::DescriptorPoolSize sizes(vk::DescriptorType::eStorageBuffer, count);
    mPool = ctx->device->createDescriptorPool({ {}, 1, count > 0 ? 1u : 0u, &sizes });
    std::shared_ptr<const Pipeline> made = ctx->pipelines.find(key);
    if (!made) {
        // Not made yet (or being made for another program): made on a thread of its own, so
        // that the caller goes on to its next program meanwhile (program.hpp). The thread
        // reads only what it captured and the context, which this program holds and outlives
        // it (the destructor waits).
        try {
            mMaking = std::async(std::launch::async, [this, spirv, specialization, count] {
                          bind(ctx->pipelines.get(ctx->device, { spirv, specialization, count, pushWords }));
                      }).share();
            return;
        } catch (const std::system_error&) {
            // No thread to be had: made here, as it was before.
        }
    }
    try {
        bind(made ? std::move(made) : ctx->pipelines.get(ctx->device, key));
    } catch (...) {
        ctx->device->destroyDescriptorPool(mPool);
        throw;
    }
}

void
Program::bind(std::shared_ptr<const Pipeline> made)
{
    mPipeline = std::move(made);
    const auto count = static_cast<uint32_t>(buffers.size());
    vk::Device& device = *ctx->device;
    mSet = device.allocateDescriptorSets({ mPool, mPipeline->setLayout }).front();
    std::vector<vk::DescriptorBufferInfo> infos;
    for (const auto& b : buffers) {
        infos.push_back(b->tensor->constructDescriptorBufferInfo());
    }
    std::vector<vk::WriteDescriptorSet> writes;
    for (uint32_t i = 0; i < count; ++i) {
        writes.emplace_back(mSet, i, 0, 1, vk::DescriptorType::eStorageBuffer, nullptr, &infos[i]);
    }
    device.updateDescriptorSets(writes, nullptr);
}

Program::~Program()
{
    // The making thread uses the pool: it ends first (its error, if any, was the caller's to
    // take through wait()).
    if (mMaking.valid()) {
        mMaking.wait();
    }
    // Frees the set with it. The pipeline goes with its last program, or stays in the table.
    ctx->device->destroyDescriptorPool(mPool);
}

void
Program::wait() const
{
    if (mMaking.valid()) {
        mMaking.get();   // the making's exception, rethrown on every call
    }
}

void
Program::record(const vk::CommandBuffer& cb, const std::vector<uint32_t>& push, uint32_t x, uint32_t y,
                uint32_t z) const
{
    wait();
    cb.bindPipeline(vk::PipelineBindPoint::eCompute, mPipeline->pipeline);
    cb.bindDescriptorSets(vk::PipelineBindPoint::eCompute, mPipeline->layout, 0, mSet, nullptr);
    if (!push.empty()) {
        // Copied into the command buffer now: a sequence recorded once replays each dispatch
        // with its own step values.
        cb.pushConstants<uint32_t>(mPipeline->layout, vk::ShaderStageFlagBits::eCompute, 0, push);
    }
    cb.dispatch(x, y, z);
}

} // namespace ortops
