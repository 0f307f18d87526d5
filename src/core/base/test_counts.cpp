// The test build's event counts (test_counts.hpp).
#include "base/test_counts.hpp"

#ifdef ORTOPS_TESTING

#include <mutex>

namespace ortops {

namespace {

std::mutex g_lock;
std::map<std::string, uint64_t> g_counts;

} // namespace

void
countEvent(const std::string& name, uint64_t n)
{
    std::lock_guard<std::mutex> guard(g_lock);
    g_counts[name] += n;
}

std::map<std::string, uint64_t>
takeEventCounts()
{
    std::lock_guard<std::mutex> guard(g_lock);
    std::map<std::string, uint64_t> out;
    out.swap(g_counts);
    return out;
}

} // namespace ortops

#endif
