// Parallel host copies (see hostcopy.hpp).

#include "vk/hostcopy.hpp"

#include <chrono>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <unistd.h>

#include <new>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ORTOPS_X86 1
#endif

namespace ortops {
namespace hostcopy {

namespace {

// 2 MiB chunks over up to 8 threads: a 26 MB input is 13 chunks, each long enough (~0.4 ms at
// one thread's 5 GB/s) that claiming it (one atomic add) and waking a helper (~10-50 us) are
// small beside it. More than 8 threads did not raise the H200 host's copy bandwidth further
// (the copies are memory-bound; docs/perf.md, "Kernel choices").
constexpr size_t DEFAULT_CHUNK = size_t(2) << 20;
constexpr unsigned DEFAULT_MAX_THREADS = 8;

unsigned
defaultThreads()
{
    unsigned hw = std::thread::hardware_concurrency();
    return std::max(1u, std::min(DEFAULT_MAX_THREADS, hw ? hw : 1u));
}

std::atomic<size_t> g_chunk{ DEFAULT_CHUNK };
std::atomic<unsigned> g_threads{ defaultThreads() };
std::atomic<bool> g_pool{ true };

// One copy (or conversion) of [0, n): its chunks are claimed by index; the caller waits until
// all are done.
struct Job
{
    std::function<void(size_t, size_t)> body;   // does [begin, end)
    size_t n;
    size_t chunk;
    size_t chunks;
    std::atomic<size_t> next{ 0 };
    std::atomic<size_t> done{ 0 };
    std::mutex m;
    std::condition_variable cv;

    // Copy chunks until none is left; true if this call finished the last one.
    void work()
    {
        size_t finished = 0;
        for (size_t i = next.fetch_add(1); i < chunks; i = next.fetch_add(1)) {
            size_t begin = i * chunk;
            body(begin, begin + std::min(chunk, n - begin));
            finished++;
        }
        if (finished && done.fetch_add(finished) + finished == chunks) {
            std::lock_guard<std::mutex> lock(m);
            cv.notify_all();
        }
    }

    void wait()
    {
        std::unique_lock<std::mutex> lock(m);
        // wait_for: libstdc++ 12's condition_variable::wait is GLIBCXX_3.4.30, which would
        // raise the wheel's manylinux tag (layer.cpp's plan pool says the same).
        while (!cv.wait_for(lock, std::chrono::milliseconds(50), [this] { return done.load() == chunks; })) {
        }
    }
};

// Helpers that sleep until a job is posted. Each posting is one helper's ticket: a helper
// takes a ticket and works on that job until its chunks run out (a late helper finds none).
class Pool
{
  public:
    explicit Pool(unsigned helpers)
      : pid(getpid())
    {
        for (unsigned i = 0; i < helpers; i++) {
            std::thread(&Pool::loop, this).detach();
        }
        size = helpers;
    }

    void post(const std::shared_ptr<Job>& job, unsigned helpers)
    {
        {
            std::lock_guard<std::mutex> lock(m);
            for (unsigned i = 0; i < helpers; i++) {
                tickets.push_back(job);
            }
        }
        if (helpers == 1) {
            cv.notify_one();
        } else {
            cv.notify_all();
        }
    }

    const pid_t pid;
    unsigned size = 0;

  private:
    void loop()
    {
        for (;;) {
            std::shared_ptr<Job> job;
            {
                std::unique_lock<std::mutex> lock(m);
                while (!cv.wait_for(lock, std::chrono::milliseconds(50), [this] { return !tickets.empty(); })) {
                }
                job = std::move(tickets.front());
                tickets.pop_front();
            }
            job->work();
        }
    }

    std::mutex m;
    std::condition_variable cv;
    std::deque<std::shared_ptr<Job>> tickets;
};

// The pool, made on the first parallel copy and again after a fork (the child has none of the
// parent's threads; the parent's pool is left alone, never destroyed: its threads may still
// be waiting in it). Sized for the largest thread count asked so far.
std::mutex g_poolLock;
Pool* g_poolPtr = nullptr;

// A fork while another thread holds the lock would leave the child's copy locked for good.
void
forkChild()
{
    new (&g_poolLock) std::mutex();
}

Pool*
pool(unsigned helpers)
{
    static const int registered = pthread_atfork(nullptr, nullptr, forkChild);
    (void)registered;
    std::lock_guard<std::mutex> lock(g_poolLock);
    if (g_poolPtr == nullptr || g_poolPtr->pid != getpid() || g_poolPtr->size < helpers) {
        g_poolPtr = new Pool(helpers);
    }
    return g_poolPtr;
}

} // namespace

Settings
settings()
{
    return Settings{ g_chunk.load(), g_threads.load(), g_pool.load() };
}

void
configure(const Settings& s)
{
    g_chunk = std::max<size_t>(1, s.chunk);
    g_threads = std::max(1u, std::min(64u, s.threads));
    g_pool = s.pool;
}

namespace {

// Run body over [0, n) in chunks of `chunk` on up to `threads` threads, the caller included.
void
parallelFor(size_t n, size_t chunk, unsigned threads, std::function<void(size_t, size_t)> body)
{
    auto job = std::make_shared<Job>();
    job->body = std::move(body);
    job->n = n;
    job->chunk = chunk;
    job->chunks = (n + chunk - 1) / chunk;
    unsigned helpers = static_cast<unsigned>(std::min<size_t>(threads, job->chunks)) - 1;
    if (g_pool.load()) {
        pool(threads - 1)->post(job, helpers);
        job->work();
        job->wait();
        return;
    }
    std::vector<std::thread> spawned;
    spawned.reserve(helpers);
    for (unsigned i = 0; i < helpers; i++) {
        spawned.emplace_back([job] { job->work(); });
    }
    job->work();
    for (auto& t : spawned) {
        t.join();
    }
}

// Round to nearest even, as F16C does (F. Giesen's float_to_half_fast3_rtne, and NaN quieted
// as the instruction does).
uint16_t
narrowOne(float value)
{
    uint32_t x;
    std::memcpy(&x, &value, 4);
    uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) {                       // Inf, NaN
        return a == 0x7f800000u ? (sign | 0x7c00u) : (sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    }
    if (a >= 0x477ff000u) {                       // rounds to 65536 or more: Inf
        return sign | 0x7c00u;
    }
    if (a < 0x38800000u) {                        // a half subnormal or zero
        // Adding 0.5 puts the 10 bits of the result at the bottom of the mantissa, rounded to
        // nearest even by the addition itself.
        float f;
        std::memcpy(&f, &a, 4);
        f += 0.5f;
        uint32_t b;
        std::memcpy(&b, &f, 4);
        return sign | static_cast<uint16_t>(b - 0x3f000000u);
    }
    a += 0xc8000fffu + ((a >> 13) & 1u);          // rebias (-112 << 23) and round on bit 13
    return sign | static_cast<uint16_t>(a >> 13);
}

void
narrowScalar(uint16_t* dst, const float* src, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] = narrowOne(src[i]);
    }
}

#ifdef ORTOPS_X86
__attribute__((target("avx,f16c"))) void
narrowF16C(uint16_t* dst, const float* src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
    narrowScalar(dst + i, src + i, n - i);
}

bool
hasF16C()
{
    static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
    return has;
}
#endif

void
narrowRange(uint16_t* dst, const float* src, size_t n)
{
#ifdef ORTOPS_X86
    if (hasF16C()) {
        narrowF16C(dst, src, n);
        return;
    }
#endif
    narrowScalar(dst, src, n);
}

} // namespace

void
copy(void* dst, const void* src, size_t n)
{
    size_t chunk = g_chunk.load();
    unsigned threads = g_threads.load();
    if (threads <= 1 || n < 2 * chunk) {
        std::memcpy(dst, src, n);
        return;
    }
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    parallelFor(n, chunk, threads, [d, s](size_t begin, size_t end) {
        std::memcpy(d + begin, s + begin, end - begin);
    });
}

void
narrowToHalf(uint16_t* dst, const float* src, size_t n)
{
    size_t chunk = std::max<size_t>(1, g_chunk.load() / sizeof(float));
    unsigned threads = g_threads.load();
    if (threads <= 1 || n < 2 * chunk) {
        narrowRange(dst, src, n);
        return;
    }
    parallelFor(n, chunk, threads, [dst, src](size_t begin, size_t end) {
        narrowRange(dst + begin, src + begin, end - begin);
    });
}

} // namespace hostcopy
} // namespace ortops
