// The fault hooks (testing.hpp): compiled into a test build only (ORTOPS_TESTING).

#include "rnn/testing.hpp"

#ifdef ORTOPS_TESTING

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace ortops {

namespace {

enum class Fault
{
    Off,
    Fail,
    Scale,
    Add,
};

std::mutex g_faultLock;
Fault g_fault = Fault::Off;   // injectFault's kind
std::atomic<bool> g_faultOn{ false };   // read by every run: no lock unless a test set a fault
double g_faultValue = 0;

float
halfToFloat(uint16_t h)
{
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        float f = std::ldexp(static_cast<float>(man), -24);
        return sign ? -f : f;
    }
    bits = exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t
floatToHalf(float f)
{
    // Round to nearest even through the float32 -> float16 steps of IEEE 754 (test use only).
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    float a = std::fabs(f);
    if (std::isnan(f)) {
        return static_cast<uint16_t>(sign | 0x7e00u);
    }
    if (a >= 65520.0f) {
        return static_cast<uint16_t>(sign | 0x7c00u);
    }
    if (a < 6.103515625e-05f) {
        return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
    }
    int e;
    float m = std::frexp(a, &e);   // a = m * 2^e, m in [0.5, 1)
    uint32_t mant = static_cast<uint32_t>(std::nearbyint((m * 2.0f - 1.0f) * 1024.0f));
    uint32_t exp = static_cast<uint32_t>(e - 1 + 15);
    if (mant == 1024) {
        mant = 0;
        exp++;
    }
    return static_cast<uint16_t>(sign | (exp << 10) | mant);
}

} // namespace

void
injectFault(const std::string& kind, double value)
{
    static const std::pair<const char*, Fault> kinds[] = {
        { "", Fault::Off }, { "fail", Fault::Fail }, { "scale", Fault::Scale }, { "add", Fault::Add }
    };
    const Fault* fault = nullptr;
    for (const auto& [name, f] : kinds) {
        fault = kind == name ? &f : fault;
    }
    if (!fault) {
        throw std::invalid_argument("ortops: fault kind must be '', 'fail', 'scale' or 'add', got '" + kind + "'");
    }
    std::lock_guard<std::mutex> lock(g_faultLock);
    g_fault = *fault;
    g_faultOn.store(*fault != Fault::Off);
    g_faultValue = value;
}

void
applyFault(void* out, size_t n, bool float16)
{
    if (!g_faultOn.load(std::memory_order_relaxed)) {
        return;
    }
    Fault kind;
    double value;
    {
        std::lock_guard<std::mutex> lock(g_faultLock);
        kind = g_fault;
        value = g_faultValue;
    }
    if (kind != Fault::Scale && kind != Fault::Add) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float v = float16 ? halfToFloat(static_cast<uint16_t*>(out)[i]) : static_cast<float*>(out)[i];
        v = kind == Fault::Scale ? static_cast<float>(v * value) : static_cast<float>(v + value);
        if (float16) {
            static_cast<uint16_t*>(out)[i] = floatToHalf(v);
        } else {
            static_cast<float*>(out)[i] = v;
        }
    }
}

bool
faultFails()
{
    if (!g_faultOn.load(std::memory_order_relaxed)) {
        return false;
    }
    std::lock_guard<std::mutex> lock(g_faultLock);
    return g_fault == Fault::Fail;
}

} // namespace ortops

#endif // ORTOPS_TESTING
