// A layer's plans (Plan: one recorded sequence of one key, its buffers and programs) and the
// cache of their pools (PlanCache): a plan serves one run at a time; a second concurrent run of
// the same key gets a second plan, recorded on first need, up to the pool's limit, beyond
// which it waits. The cache keeps the pools of at most LayerSettings::planCache keys, least
// recently used idle ones going first. The settings and the step kernel a key's plans record
// are chosen once, when its pool is made, and kept in it.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "rnn/controls.hpp"
#include "config/types.hpp"

namespace ortops {

struct Buffer;
struct HostBuffer;
struct Sequence;

// What a plan is recorded for: a run of another key needs another plan. Caller scratch
// regions enter by their buffer and byte offset.
struct PlanKey
{
    uint32_t seq = 0, batch = 0, steps = 0;
    bool hasLens = false, hasH0 = false, hasC0 = false;
    std::array<bool, 3> outputs{};
    const void* xwBuffer = nullptr;
    uint64_t xwOffset = 0;
    const void* stateBuffer = nullptr;
    uint64_t stateOffset = 0;

    auto tie() const
    {
        return std::tie(seq, batch, steps, hasLens, hasH0, hasC0, outputs, xwBuffer, xwOffset, stateBuffer,
                        stateOffset);
    }
    bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
    bool operator==(const PlanKey& o) const { return tie() == o.tie(); }
    bool callerScratch() const { return xwBuffer || stateBuffer; }
};

struct Plan
{
    std::shared_ptr<Sequence> sequence;
    std::shared_ptr<Buffer> x, lens, h0, c0;
    std::array<std::shared_ptr<HostBuffer>, 3> readback;
    std::vector<std::shared_ptr<void>> keep;   // buffers and programs the sequence refers to
    bool timestamps = false;
    std::string projection;                    // the input projection shader recorded
    std::string steps;                         // and the step kernel's shader
    // The persistent step kernel (persistent.hpp): its sync words, the copy of them the host
    // reads after a run, and the same run recorded on the step kernels (`fallbackSteps`), on the
    // same buffers, for a grid that fails.
    std::shared_ptr<Buffer> sync;
    std::shared_ptr<Buffer> exchange;   // the grid's exchange words (glsl/step_persistent.comp)
    std::shared_ptr<HostBuffer> syncStatus;
    std::shared_ptr<Sequence> fallback;
    std::string fallbackSteps;
};

// The plans of one key.
struct PlanPool
{
    uint32_t limit;
    uint32_t count = 0;
    std::vector<std::shared_ptr<Plan>> free;
    LayerSettings settings;                    // what its plans record
    StepKernel stepKernel = StepKernel::Lanes;
};

class PlanCache
{
  public:
    // A free plan of `key`, or (plan nullptr) the right to record one; waits while the key's
    // pool is at its limit. A new pool takes `settings` and `chooseStep(key.batch)`.
    std::pair<std::shared_ptr<PlanPool>, std::shared_ptr<Plan>>
    acquire(const PlanKey& key, const LayerSettings& settings, const std::function<StepKernel(uint32_t)>& chooseStep);
    // Give back what acquire gave (the plan recorded, or nullptr when recording failed).
    void release(const PlanKey& key, const std::shared_ptr<PlanPool>& pool, std::shared_ptr<Plan> plan);
    // Forget every pool (new settings): plans still running are dropped when released.
    void clear();
    // The pools, least recently used first.
    std::vector<PlanPoolInfo> info() const;

  private:
    void evict(const PlanKey& keep, uint32_t capacity);

    mutable std::mutex lock;
    std::condition_variable freed;
    std::list<PlanKey> lru;   // least recently used first
    std::map<PlanKey, std::shared_ptr<PlanPool>> pools;
    uint32_t capacity = 8;    // the planCache of the latest acquire's settings
};

} // namespace ortops
