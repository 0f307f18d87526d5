// The pipeline table (see pipelines.hpp).

#include "vk/pipelines.hpp"

#include <cstring>

namespace ortops {

Pipeline::~Pipeline()
{
    if (!device) {
        return;
    }
    // Null handles are ignored by vkDestroy*: a pipeline whose making threw part way is undone.
    device->destroyPipeline(pipeline);
    device->destroyPipelineLayout(layout);
    device->destroyDescriptorSetLayout(setLayout);
    device->destroyShaderModule(module);
}

namespace {

// The key as bytes: binding count, push words, the specialization's count and words, the SPIR-V.
std::string
keyBytes(const PipelineKey& key)
{
    const uint32_t head[3] = { key.bindings, key.pushWords, static_cast<uint32_t>(key.specialization.size()) };
    std::string bytes(sizeof head + 4 * (key.specialization.size() + key.spirv.size()), '\0');
    char* out = bytes.data();
    std::memcpy(out, head, sizeof head);
    out += sizeof head;
    // An empty vector's data() may be null, which memcpy may not be given even for 0 bytes.
    if (!key.specialization.empty()) {
        std::memcpy(out, key.specialization.data(), 4 * key.specialization.size());
        out += 4 * key.specialization.size();
    }
    std::memcpy(out, key.spirv.data(), 4 * key.spirv.size());   // never empty (Program checks)
    return bytes;
}

// The layouts and the pipeline, as Kompute's kp::Algorithm made them (storage buffers at
// bindings 0..n-1, one push-constant range from 0, specialization constant i at constant_id i),
// without its per-algorithm pipeline cache.
std::shared_ptr<const Pipeline>
make(const std::shared_ptr<vk::Device>& device, const PipelineKey& key)
{
    auto p = std::make_shared<Pipeline>();
    p->device = device;
    p->bindings = key.bindings;
    p->pushWords = key.pushWords;
    p->module = device->createShaderModule({ {}, 4 * key.spirv.size(), key.spirv.data() });

    std::vector<vk::DescriptorSetLayoutBinding> bindings;
    for (uint32_t i = 0; i < key.bindings; ++i) {
        bindings.emplace_back(i, vk::DescriptorType::eStorageBuffer, 1, vk::ShaderStageFlagBits::eCompute);
    }
    p->setLayout = device->createDescriptorSetLayout({ {}, bindings });

    vk::PushConstantRange push(vk::ShaderStageFlagBits::eCompute, 0, 4 * key.pushWords);
    vk::PipelineLayoutCreateInfo layoutInfo({}, p->setLayout);
    if (key.pushWords > 0) {
        layoutInfo.setPushConstantRanges(push);
    }
    p->layout = device->createPipelineLayout(layoutInfo);

    std::vector<vk::SpecializationMapEntry> entries;
    for (uint32_t i = 0; i < key.specialization.size(); ++i) {
        entries.emplace_back(i, 4 * i, 4);
    }
    vk::SpecializationInfo specialization(static_cast<uint32_t>(entries.size()), entries.data(),
                                          4 * key.specialization.size(), key.specialization.data());
    vk::PipelineShaderStageCreateInfo stage({}, vk::ShaderStageFlagBits::eCompute, p->module, "main",
                                            &specialization);
    auto made = device->createComputePipeline(nullptr, vk::ComputePipelineCreateInfo({}, stage, p->layout));
    if (made.result != vk::Result::eSuccess) {
        throw std::runtime_error("ortops: vkCreateComputePipelines failed: " + vk::to_string(made.result));
    }
    p->pipeline = made.value;
    return p;
}

} // namespace

std::shared_ptr<const Pipeline>
PipelineTable::get(const std::shared_ptr<vk::Device>& device, const PipelineKey& key)
{
    std::string bytes = keyBytes(key);
    std::shared_ptr<Slot> slot;
    {
        std::lock_guard<std::mutex> guard(mLock);
        auto found = mSlots.find(std::string_view(bytes));
        if (found != mSlots.end()) {
            mLru.splice(mLru.end(), mLru, found->second);   // now the most recently asked for
            slot = found->second->second;
        } else {
            dropIdle();
            slot = std::make_shared<Slot>();
            mLru.emplace_back(std::move(bytes), slot);
            auto added = std::prev(mLru.end());
            mSlots.emplace(added->first, added);
        }
    }
    std::lock_guard<std::mutex> making(slot->make);
    if (!slot->pipeline) {
        slot->pipeline = make(device, key);   // a throw leaves it empty: the next asker tries again
    }
    return slot->pipeline;
}

std::shared_ptr<const Pipeline>
PipelineTable::find(const PipelineKey& key)
{
    std::string bytes = keyBytes(key);
    std::lock_guard<std::mutex> guard(mLock);
    auto found = mSlots.find(std::string_view(bytes));
    if (found == mSlots.end()) {
        return nullptr;
    }
    // Held while a pipeline is made: then not made yet, and this does not wait for it.
    std::unique_lock<std::mutex> making(found->second->second->make, std::try_to_lock);
    if (!making.owns_lock() || !found->second->second->pipeline) {
        return nullptr;
    }
    mLru.splice(mLru.end(), mLru, found->second);   // now the most recently asked for
    return found->second->second->pipeline;
}

void
PipelineTable::dropIdle()
{
    size_t idle = 0;
    // Newest first, so that the oldest idle ones are those beyond the limit.
    for (auto it = mLru.end(); it != mLru.begin();) {
        --it;
        std::unique_lock<std::mutex> making(it->second->make, std::try_to_lock);
        // Being made (locked), or made and held by a program: not idle. An empty slot (its
        // making threw) counts as idle.
        if (!making.owns_lock() || it->second->pipeline.use_count() > 1) {
            continue;
        }
        if (++idle > kIdlePipelines) {
            making.unlock();
            mSlots.erase(it->first);
            it = mLru.erase(it);
        }
    }
}

void
PipelineTable::clear()
{
    std::lock_guard<std::mutex> guard(mLock);
    mSlots.clear();
    mLru.clear();
}

size_t
PipelineTable::size() const
{
    std::lock_guard<std::mutex> guard(mLock);
    return mLru.size();
}

} // namespace ortops
