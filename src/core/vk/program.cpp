// Programs: SPIR-V checked, the context's shared pipeline taken, the buffers bound in a
// descriptor set of the program's own (see program.hpp).

#include "vk/program.hpp"

#include <cstring>
#include <stdexcept>

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
    pipeline = ctx->pipelines.get(ctx->device, { spirv, specialization, count, pushWords });

    vk::Device& device = *ctx->device;
    vk::DescriptorPoolSize sizes(vk::DescriptorType::eStorageBuffer, count);
    mPool = device.createDescriptorPool({ {}, 1, count > 0 ? 1u : 0u, &sizes });
    try {
        mSet = device.allocateDescriptorSets({ mPool, pipeline->setLayout }).front();
        std::vector<vk::DescriptorBufferInfo> infos;
        for (const auto& b : bound) {
            infos.push_back(b->tensor->constructDescriptorBufferInfo());
        }
        std::vector<vk::WriteDescriptorSet> writes;
        for (uint32_t i = 0; i < count; ++i) {
            writes.emplace_back(mSet, i, 0, 1, vk::DescriptorType::eStorageBuffer, nullptr, &infos[i]);
        }
        device.updateDescriptorSets(writes, nullptr);
    } catch (...) {
        device.destroyDescriptorPool(mPool);
        throw;
    }
}

Program::~Program()
{
    // Frees the set with it. The pipeline goes with its last program, or stays in the table.
    ctx->device->destroyDescriptorPool(mPool);
}

void
Program::record(const vk::CommandBuffer& cb, const std::vector<uint32_t>& push, uint32_t x, uint32_t y,
                uint32_t z) const
{
    cb.bindPipeline(vk::PipelineBindPoint::eCompute, pipeline->pipeline);
    cb.bindDescriptorSets(vk::PipelineBindPoint::eCompute, pipeline->layout, 0, mSet, nullptr);
    if (!push.empty()) {
        // Copied into the command buffer now: a sequence recorded once replays each dispatch
        // with its own step values.
        cb.pushConstants<uint32_t>(pipeline->layout, vk::ShaderStageFlagBits::eCompute, 0, push);
    }
    cb.dispatch(x, y, z);
}

} // namespace ortops
