// Compute pipelines shared by the programs of one device: one per (SPIR-V, specialization,
// binding count, push words), so that two layers of the same shape and options, or a layer
// made again, compile their shaders once.
//
// Why: a pipeline's creation is the driver compiling the shader with its specialization
// constants, and nothing below ortops shared it between programs: Kompute's kp::Algorithm
// makes its own pipeline, layout and even pipeline cache per algorithm, and on lavapipe the
// same pipeline compiled again costs as much as the first time (most programs the test suite
// creates repeat one already built in their process: docs/ci.md). So ortops builds the
// pipeline itself here and keeps only Kompute's buffers (program.hpp).
//
// Lifetime: a Program holds its pipeline (shared_ptr), so a pipeline in use lives as long as
// its programs. The table also keeps up to kIdlePipelines pipelines no program uses, the least
// recently asked for dropped first: on the test suite's trace 32 keep nearly all an unbounded
// table would share, and memory stays bounded for a service that makes and drops sessions.
// The context clears the table before destroying its device (Context::~Context).
#pragma once

#include <kompute/Kompute.hpp>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ortops {

// One compute pipeline and the layouts it was made with. Immutable once made; destroyed with
// its last holder.
struct Pipeline
{
    std::shared_ptr<vk::Device> device;
    vk::ShaderModule module;
    vk::DescriptorSetLayout setLayout;   // `bindings` storage buffers, bindings 0..n-1
    vk::PipelineLayout layout;           // that set and pushWords * 4 bytes of push constants
    vk::Pipeline pipeline;
    uint32_t bindings = 0;
    uint32_t pushWords = 0;

    Pipeline() = default;
    Pipeline(const Pipeline&) = delete;
    Pipeline& operator=(const Pipeline&) = delete;
    ~Pipeline();
};

// What identifies a pipeline: the shader and everything its layout and specialization take.
struct PipelineKey
{
    const std::vector<uint32_t>& spirv;
    const std::vector<uint32_t>& specialization;   // constant i at constant_id i, 4 bytes each
    uint32_t bindings;
    uint32_t pushWords;
};

class PipelineTable
{
  public:
    // Pipelines no program uses that the table keeps for the next program asking for them.
    static constexpr size_t kIdlePipelines = 32;

    // The pipeline for key on device: the one made before if the table still has it, else a
    // new one. Thread-safe; two threads asking for a new key at once make it once (the second
    // waits for the first), different keys are made at the same time.
    std::shared_ptr<const Pipeline> get(const std::shared_ptr<vk::Device>& device, const PipelineKey& key);

    // The pipeline for key if the table holds it made, else null (none, or one still being
    // made: get() waits for that one). Never makes nor waits: a Program asks first, and makes
    // on a thread of its own only what this does not give (program.hpp). Thread-safe.
    std::shared_ptr<const Pipeline> find(const PipelineKey& key);

    // Drop every pipeline the table keeps (programs keep theirs). Before the device goes.
    void clear();

    // Pipelines the table holds (in use or idle), for the tests.
    size_t size() const;

  private:
    struct Slot
    {
        std::mutex make;   // held while the pipeline is made
        std::shared_ptr<const Pipeline> pipeline;
    };
    // Oldest first; each entry's key bytes (SPIR-V included) are held once, here.
    using Lru = std::list<std::pair<std::string, std::shared_ptr<Slot>>>;

    void dropIdle();   // with mLock held, before a new slot is added

    mutable std::mutex mLock;
    Lru mLru;
    std::unordered_map<std::string_view, Lru::iterator> mSlots;   // views of mLru's keys
};

} // namespace ortops
