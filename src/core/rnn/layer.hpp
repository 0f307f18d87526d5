// ortops::Layer: one RNN, GRU or LSTM node on a Vulkan device — the native core both doors
// drive (the ONNX Runtime custom-op library, src/ort/, and the Python API through
// src/python/bind_layer.cpp). Fixed lifecycle: create (config checked, activations resolved, device
// chosen, weights checked and uploaded once) -> run (inputs checked, a plan of that shape
// taken from the pool or recorded once, inputs written, one submit, outputs read).
//
// Thread safety: run() may be called from many threads at once. Runs that arrive while one of
// the layer is in flight are coalesced into one batched run (coalesce.hpp); runs that cannot
// be (caller scratch regions, timestamps) use a plan of their own from the plan pool
// (plan_pool.hpp). Either way results equal serial results bit for bit.
//
// Errors (errors.hpp): InputError (std::invalid_argument) for a bad weight or input, its
// message naming the operator, the argument, what was expected and what came ("LSTM: X must
// have rank 3 ([seq_length, batch_size, input_size]), got rank 2"); UnsupportedLayerError when
// the device cannot run the layer (limits); DeviceLostError when the device is lost.
//
// The pieces behind it, one concept a file: spec (the checked configuration), kernel_choice,
// weights (on the device), recording (one plan), plan_pool (plans and their cache), limits.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rnn/controls.hpp"
#include "base/errors.hpp"
#include "config/nodeconfig.hpp"
#include "rnn/layer_check.hpp"    // checkLayer: the doors' check before they build a layer
#include "rnn/tensors.hpp"
#include "config/types.hpp"
#include "rnn/weights.hpp"

namespace ortops {

struct LayerImpl;
struct DeviceDescription;
struct Context;

// What the core has done in this process, for tests and tools: layers created and alive
// (their weights uploaded), plans recorded, runs submitted.
struct CoreCounters
{
    uint64_t layersCreated = 0;
    uint64_t layersAlive = 0;
    uint64_t plansRecorded = 0;
    uint64_t runs = 0;
    // Runs that carried several concurrent requests (coalesce.hpp), and those requests.
    uint64_t coalescedRuns = 0;
    uint64_t coalescedRequests = 0;
    // The submitted runs' host time in nanoseconds: writing inputs, submitting and waiting for
    // the device, reading outputs; and the runs that went through a coalescer and the time
    // they held its in-flight slot (coalesce.hpp).
    uint64_t writeNs = 0;
    uint64_t waitNs = 0;
    uint64_t readNs = 0;
    uint64_t slotRuns = 0;
    uint64_t slotNs = 0;
};
CoreCounters
coreCounters();

class Layer
{
  public:
    // config: the decoded node config (its op, dtype, attrs, absent inputs, outputs wanted,
    // device, mode). Weights must have the config's dtype.
    Layer(const NodeConfig& config, const Weights& weights, const LayerSettings& settings = LayerSettings{});
    ~Layer();
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;

    const NodeConfig& config() const;
    ElementType elementType() const;
    // The Vulkan device's name and UUID.
    std::string deviceName() const;
    std::string deviceUuid() const;

    // Check the inputs (shapes, dtypes, sequence_lens range) and return the output shapes.
    OutputShapes outputShapes(const RunInputs& inputs) const;
    // Run: check the inputs, write them, submit once, read the outputs into out.
    void run(const RunInputs& inputs, const OutputPointers& out);
    // The same for inputs already checked: `shapes` is what outputShapes(inputs) returned
    // (both doors ask for it first, to allocate the outputs; the checks run once a run).
    void run(const RunInputs& inputs, const OutputShapes& shapes, const OutputPointers& out);

#ifdef ORTOPS_TESTING
    // Several requests of one key as one batched run, as concurrent runs are coalesced
    // (coalesce.hpp): tests check that each request gets the bits it gets alone. A test
    // hook: only in the testing build (ORTOPS_TESTING), bound as Layer.run_coalesced.
    // `padTo`: the run's batch, zero rows past the requests' (at most their rows: none).
    void runCoalesced(const std::vector<RunInputs>& inputs, const std::vector<OutputPointers>& out,
                      uint32_t padTo = 0);
#endif

    // The Python door's controls and views (controls.hpp).
    LayerSettings settings() const;
    void setSettings(const LayerSettings& s);
    std::optional<GpuProfile> lastProfile() const;
    std::vector<PlanPoolInfo> planPools() const;
    // The weights on the device by name (W, R, B, P; RB once the batched kernel's layout of R
    // is uploaded).
    std::vector<std::string> weightNames() const;
    // Their sizes on the device in bytes, by name (exact mode's R and RB hold float32 words
    // in both precisions: exactR).
    std::vector<std::pair<std::string, uint64_t>> weightBytes() const;
    // Bytes of the two scratch regions (Xw, state) a run of this shape needs.
    std::pair<uint64_t, uint64_t> scratchSizes(uint32_t seq, uint32_t batch) const;
    const DeviceDescription& device() const;
    std::shared_ptr<Context> context() const;

  private:
    std::unique_ptr<LayerImpl> impl;
};

} // namespace ortops
