// PlanCache (plan_pool.hpp).

#include "rnn/plan_pool.hpp"

#include <chrono>

namespace ortops {

std::pair<std::shared_ptr<PlanPool>, std::shared_ptr<Plan>>
PlanCache::acquire(const PlanKey& key, const LayerSettings& settings,
                   const std::function<StepKernel(uint32_t)>& chooseStep)
{
    std::unique_lock<std::mutex> guard(lock);
    capacity = settings.planCache;
    while (true) {
        auto& pool = pools[key];
        if (!pool) {
            pool = std::make_shared<PlanPool>();
            // Caller regions may be one arena shared by this layer's shapes: one plan per key.
            pool->limit = key.callerScratch() ? 1 : settings.maxConcurrent;
            pool->settings = settings;
            pool->stepKernel = chooseStep(key.batch);
            evict(key, capacity);
        }
        lru.remove(key);
        lru.push_back(key);
        auto p = pools[key];
        if (!p->free.empty()) {
            auto plan = p->free.back();
            p->free.pop_back();
            return { p, plan };
        }
        if (p->count < p->limit) {
            p->count++;
            return { p, nullptr };
        }
        // wait_for, not wait: libstdc++ 12 versions condition_variable::wait GLIBCXX_3.4.30,
        // which would raise the wheel's manylinux tag from 2_34 to 2_35; the loop re-checks.
        freed.wait_for(guard, std::chrono::milliseconds(50));
    }
}

void
PlanCache::release(const PlanKey& key, const std::shared_ptr<PlanPool>& pool, std::shared_ptr<Plan> plan)
{
    std::lock_guard<std::mutex> guard(lock);
    auto it = pools.find(key);
    if (!plan) {
        pool->count--;
    } else if (it != pools.end() && it->second == pool) {
        pool->free.push_back(std::move(plan));
    }
    // else: the key was evicted while this run held the plan; it is dropped here.
    evict(key, capacity);   // shapes kept beyond the cache while they were busy
    freed.notify_all();
}

// Keep plans for at most `capacity` keys: drop the least recently used idle ones (never
// `keep`, the key being acquired; while runs hold plans of every other key the cache may hold
// more for a while). Called with the lock held.
void
PlanCache::evict(const PlanKey& keep, uint32_t capacity)
{
    for (auto it = lru.begin(); it != lru.end() && pools.size() > capacity;) {
        auto p = pools.find(*it);
        if (!(*it == keep) && p != pools.end() && p->second->free.size() == p->second->count) {
            pools.erase(p);
            it = lru.erase(it);
        } else {
            ++it;
        }
    }
}

void
PlanCache::clear()
{
    std::lock_guard<std::mutex> guard(lock);
    pools.clear();
    lru.clear();
    freed.notify_all();
}

std::vector<PlanPoolInfo>
PlanCache::info() const
{
    std::lock_guard<std::mutex> guard(lock);
    std::vector<PlanPoolInfo> out;
    for (const PlanKey& k : lru) {
        auto it = pools.find(k);
        if (it == pools.end()) {
            continue;
        }
        PlanPoolInfo info{ k.seq, k.batch, k.steps, k.hasLens, k.hasH0, k.hasC0, k.outputs, it->second->count, {}, {} };
        for (const auto& p : it->second->free) {
            info.freeProjections.push_back(p->projection);
            info.freeSteps.push_back(p->steps);
        }
        out.push_back(std::move(info));
    }
    return out;
}

} // namespace ortops
