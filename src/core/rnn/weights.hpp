// A layer's weights on the device (DeviceWeights): W, R (exact mode: exactR's words), B, P,
// uploaded once at creation, and RB, the batched step kernels' layout of R (batchedR), uploaded
// when the first plan that records a batched step kernel is recorded. Also the two host-side
// layouts of R, which the Python door binds for the tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rnn/tensors.hpp"

namespace ortops {

// R [dirs, gates * hidden, hidden] in the batched step kernels' layout
// RB[dir][position][unit][gate] (glsl/batched.glsl): position p = t * NI + i holds
// k = l + 32 i of the class l at tree position t (l = t with its five bits reversed), so a
// thread reads its sums' terms in order; positions past the hidden size hold 0.
std::vector<uint8_t>
batchedR(const void* R, uint32_t dirs, uint32_t gates, uint32_t hidden, uint32_t item);

// Exact mode's R on the device (glsl/exact.glsl's LOADR): the n elements of R (float16 or
// float32, the layer's dtype) as the float32 words the exact kernels' LOADT makes of them,
// done once at upload instead of at every load of every step: a half widened by
// half_to_float_'s integer rule (exact; Inf and NaN keep their payload), a float32 with its
// denormals flushed to a zero of their sign (ftz_). The batched layout (batchedR) is made
// from these words, item 4.
std::vector<uint32_t>
exactR(const void* R, size_t n, bool float16);

struct Context;
struct Limits;
struct Spec;

// The weights on the device by name ("W", "R", "B", "P", "RB").
using WeightSet = std::map<std::string, std::shared_ptr<Buffer>>;

// Thread safety: plans of different keys are recorded at once (outside the plan cache's
// lock), and one of them may upload RB while another reads the weights. So the set is
// published as an immutable snapshot: readers take a copy of the pointer (snapshot()) and
// read that set, which no one changes; uploadBatchedR makes a new set holding RB and swaps
// the pointer under `publishLock`.
class DeviceWeights
{
  public:
    // Uploads W, R, B, P (checked against `limits`' storage binding).
    DeviceWeights(std::shared_ptr<Context> ctx, const Spec& spec, const Weights& w, const Limits& limits);

    // The weights uploaded so far: an immutable set (a later upload publishes a new one).
    std::shared_ptr<const WeightSet> snapshot() const;
    // A 4-byte buffer bound for a weight the layer lacks (a binding must hold a buffer; the
    // kernels read none of it).
    const std::shared_ptr<Buffer>& placeholder() const { return dummy; }
    // Upload RB once (batchedR of the R uploaded), and forget the host copy of R.
    void uploadBatchedR(const Limits& limits);
    // Each weight's name and bytes on the device, by name.
    std::vector<std::pair<std::string, uint64_t>> sizes() const;

  private:
    using Arrays = std::map<std::string, std::pair<const void*, uint64_t>>;
    // The arrays on the device, by name (the caller publishes them).
    WeightSet upload(const Arrays& arrays, const Limits& limits) const;
    void publish(std::shared_ptr<const WeightSet> set);

    std::shared_ptr<Context> ctx;
    const Spec& spec;
    mutable std::mutex publishLock;             // guards `current` (the pointer, not the set)
    std::shared_ptr<const WeightSet> current;
    std::mutex batchedLock;                     // one RB upload; guards hostR
    std::vector<uint8_t> hostR;                 // R kept until the batched kernel's layout is uploaded
    std::shared_ptr<Buffer> dummy;
};

} // namespace ortops
