// The doors' checks of a layer without a device (layer_check.hpp).
#include "rnn/layer_check.hpp"

#include "base/errors.hpp"
#include "rnn/limits.hpp"
#include "rnn/spec.hpp"

namespace ortops {

void
checkLayer(const NodeConfig& config, const Weights& weights, const std::optional<BindingLimit>& limit)
{
    Spec s = makeSpec(config, weights);
    if (!limit) {
        return;
    }
    // The bytes LayerImpl's upload binds (exact mode's R as float32 words: exactR).
    Limits limits{ s.op, limit->device, limit->storageRange, {}, 0 };
    limits.checkBinding("W", static_cast<uint64_t>(weights.W.elements()) * s.item);
    limits.checkBinding("R", static_cast<uint64_t>(weights.R.elements()) * s.rItem());
    if (weights.B) {
        limits.checkBinding("B", static_cast<uint64_t>(weights.B->elements()) * s.item);
    }
    if (weights.P) {
        limits.checkBinding("P", static_cast<uint64_t>(weights.P->elements()) * s.item);
    }
}

} // namespace ortops
