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

#include "tensors.hpp"

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

class DeviceWeights
{
  public:
    // Uploads W, R, B, P (checked against `limits`' storage binding).
    DeviceWeights(std::shared_ptr<Context> ctx, const Spec& spec, const Weights& w, const Limits& limits);

    // The weight `name` ("W", "R", "B", "P", "RB"), or a 4-byte placeholder for one the layer
    // lacks (a binding must hold a buffer; the kernels read none of it).
    std::shared_ptr<Buffer> get(const char* name) const;
    // The placeholder.
    const std::shared_ptr<Buffer>& placeholder() const { return dummy; }
    // Upload RB once (batchedR of the R uploaded), and forget the host copy of R.
    void uploadBatchedR(const Limits& limits);
    // Each weight's name and bytes on the device, by name.
    std::vector<std::pair<std::string, uint64_t>> sizes() const;

  private:
    using Arrays = std::map<std::string, std::pair<const void*, uint64_t>>;
    void upload(const Arrays& arrays, const Limits& limits);

    std::shared_ptr<Context> ctx;
    const Spec& spec;
    std::map<std::string, std::shared_ptr<Buffer>> buffers;
    std::vector<uint8_t> hostR;   // R kept until the batched kernel's layout is uploaded
    mutable std::mutex batchedLock;
    std::shared_ptr<Buffer> dummy;
};

} // namespace ortops
