// DeviceWeights and R's layouts (weights.hpp).

#include "rnn/weights.hpp"

#include <cstring>

#include "rnn/limits.hpp"
#include "vk/memory.hpp"
#include "vk/program.hpp"
#include "vk/sequence.hpp"
#include "rnn/shaders.hpp"
#include "rnn/specialization.hpp"
#include "rnn/spec.hpp"
#include "rnn/variants.hpp"

namespace ortops {

namespace {

// The exact kernels' decoding of one element, as integer code (glsl/exact.glsl's
// half_to_float_ and ftz_, rule for rule).
uint32_t
exactHalfBits(uint16_t h)
{
    uint32_t s = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu;
    uint32_t m = h & 0x3FFu;
    if (e == 0x1Fu) {
        return s | 0x7F800000u | (m << 13);   // Inf, NaN: payload and quiet bit kept
    }
    if (e != 0) {
        return s | ((e + 112) << 23) | (m << 13);
    }
    if (m == 0) {
        return s;
    }
    uint32_t p = 31 - static_cast<uint32_t>(__builtin_clz(m));   // findMSB
    return s | ((p + 103) << 23) | ((m << (23 - p)) & 0x7FFFFFu);
}

uint32_t
exactFlushBits(uint32_t u)
{
    return (u & 0x7F800000u) == 0 ? (u & 0x80000000u) : u;
}

} // namespace

std::vector<uint32_t>
exactR(const void* R, size_t n, bool float16)
{
    std::vector<uint32_t> out(n);
    if (float16) {
        const auto* h = static_cast<const uint16_t*>(R);
        for (size_t i = 0; i < n; i++) {
            out[i] = exactHalfBits(h[i]);
        }
    } else {
        const auto* f = static_cast<const uint32_t*>(R);
        for (size_t i = 0; i < n; i++) {
            out[i] = exactFlushBits(f[i]);
        }
    }
    return out;
}

std::vector<uint8_t>
batchedR(const void* R, uint32_t dirs, uint32_t gates, uint32_t hidden, uint32_t item)
{
    const uint32_t NI = classesLength(hidden);
    const auto* r = static_cast<const uint8_t*>(R);
    std::vector<uint8_t> rb(static_cast<size_t>(dirs) * 32 * NI * hidden * gates * item, 0);
    for (uint32_t d = 0; d < dirs; d++) {
        for (uint32_t t = 0; t < 32; t++) {
            uint32_t l = 0;   // t with its five bits reversed
            for (int b = 0; b < 5; b++) {
                l |= ((t >> b) & 1u) << (4 - b);
            }
            for (uint32_t i = 0; i < NI; i++) {
                uint32_t k = l + 32 * i;
                if (k >= hidden) {
                    continue;   // positions past the hidden size hold 0 (never read)
                }
                size_t position = static_cast<size_t>(t) * NI + i;
                for (uint32_t u = 0; u < hidden; u++) {
                    for (uint32_t g = 0; g < gates; g++) {
                        size_t src = ((static_cast<size_t>(d) * gates + g) * hidden + u) * hidden + k;
                        size_t dst = ((static_cast<size_t>(d) * 32 * NI + position) * hidden + u) * gates + g;
                        std::memcpy(&rb[dst * item], &r[src * item], item);
                    }
                }
            }
        }
    }
    return rb;
}

DeviceWeights::DeviceWeights(std::shared_ptr<Context> context, const Spec& s, const Weights& w, const Limits& limits)
  : ctx(std::move(context))
  , spec(s)
{
    Arrays arrays;
    auto add = [&](const char* name, const HostTensor& t) {
        arrays[name] = { t.data, static_cast<uint64_t>(t.elements()) * spec.item };
    };
    add("W", w.W);
    // Exact mode: R as the exact step kernels read it, float32 words prepared once here
    // (exactR; glsl/exact.glsl's LOADR says why the bits are the same).
    std::vector<uint32_t> preparedR;
    if (spec.mode == Mode::Exact) {
        preparedR = exactR(w.R.data, w.R.elements(), spec.float16);
        arrays["R"] = { preparedR.data(), static_cast<uint64_t>(preparedR.size()) * 4 };
    } else {
        add("R", w.R);
    }
    if (w.B) {
        add("B", *w.B);
    }
    if (w.P) {
        add("P", *w.P);
    }
    publish(std::make_shared<const WeightSet>(upload(arrays, limits)));
    const auto* r = static_cast<const uint8_t*>(arrays["R"].first);
    hostR.assign(r, r + arrays["R"].second);
    dummy = std::make_shared<Buffer>(ctx, 4, "storage");
}

// Weights go to device-only memory: staged, then copied by a compute pass (Kompute's
// device-only tensors are storage buffers, not transfer destinations).
WeightSet
DeviceWeights::upload(const Arrays& arrays, const Limits& limits) const
{
    auto seq = std::make_shared<Sequence>(ctx, 0);
    std::vector<std::shared_ptr<Buffer>> staging;
    std::vector<std::pair<std::string, std::shared_ptr<Buffer>>> stored;
    std::vector<std::shared_ptr<Program>> keep;
    for (const auto& [name, a] : arrays) {
        limits.checkBinding(name, a.second);
        auto host = std::make_shared<Buffer>(ctx, a.second, "device");
        if (a.second) {
            host->write(a.first, a.second, 0);
        }
        staging.push_back(host);
        stored.emplace_back(name, std::make_shared<Buffer>(ctx, a.second, "storage"));
    }
    seq->upload(staging);
    seq->barrier("transfer", "compute");
    const std::string& code = spirv("copy_words", false, Mode::Deterministic);
    for (size_t i = 0; i < staging.size(); i++) {
        uint32_t words = static_cast<uint32_t>(ceilDiv(stored[i].second->bytes, 4));
        auto copy = std::make_shared<Program>(ctx, code, std::vector<std::shared_ptr<Buffer>>{ staging[i], stored[i].second },
                                              pack("copy_words", {}), 1);
        keep.push_back(copy);
        seq->dispatch(copy, gridGroups(words, limits.maxGroups), 1, 1, { words });
    }
    seq->barrier("compute", "compute");
    seq->eval();
    return WeightSet(stored.begin(), stored.end());
}

void
DeviceWeights::publish(std::shared_ptr<const WeightSet> set)
{
    std::lock_guard<std::mutex> lock(publishLock);
    current = std::move(set);
}

std::shared_ptr<const WeightSet>
DeviceWeights::snapshot() const
{
    std::lock_guard<std::mutex> lock(publishLock);
    return current;
}

void
DeviceWeights::uploadBatchedR(const Limits& limits)
{
    std::lock_guard<std::mutex> lock(batchedLock);
    std::shared_ptr<const WeightSet> before = snapshot();
    if (before->count("RB")) {
        return;
    }
    std::vector<uint8_t> rb = batchedR(hostR.data(), spec.dirs, spec.gates, spec.hidden, spec.rItem());
    auto after = std::make_shared<WeightSet>(*before);
    after->merge(upload(Arrays{ { "RB", { rb.data(), rb.size() } } }, limits));
    publish(std::move(after));
    hostR.clear();
    hostR.shrink_to_fit();
}

std::vector<std::pair<std::string, uint64_t>>
DeviceWeights::sizes() const
{
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const auto& [name, buf] : *snapshot()) {
        out.emplace_back(name, buf->bytes);
    }
    return out;
}

} // namespace ortops
