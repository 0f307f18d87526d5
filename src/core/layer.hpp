// ortops::Layer: one RNN, GRU or LSTM node on a Vulkan device — the native core both doors
// drive (the ONNX Runtime custom-op library, src/ort/, and the Python API through
// src/python/bind_layer.cpp). Fixed lifecycle: create (config checked, activations resolved, device
// chosen, weights checked and uploaded once) -> run (inputs checked, a plan of that shape
// taken from the pool or recorded once, inputs written, one submit, outputs read).
//
// Thread safety: run() may be called from many threads at once. Runs that arrive while one of
// the layer is in flight are coalesced into one batched run (coalesce.hpp); runs that cannot
// be (caller scratch regions, timestamps) use a plan of their own from the plan pool
// (layer.cpp). Either way results equal serial results bit for bit.
//
// Errors: InputError (std::invalid_argument) for a bad weight or input, its message naming
// the operator, the argument, what was expected and what came ("LSTM: X must have rank 3
// ([seq_length, batch_size, input_size]), got rank 2"); UnsupportedLayerError when the
// device cannot run the layer (limits); DeviceLostError (context.hpp) when the device is lost.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "nodeconfig.hpp"
#include "types.hpp"
#include "variants.hpp"

namespace ortops {

struct InputError : std::invalid_argument
{
    using std::invalid_argument::invalid_argument;
};

struct UnsupportedLayerError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

// A C-contiguous host tensor the caller owns (ORT's input buffer, a numpy array).
struct HostTensor
{
    const void* data = nullptr;
    ElementType type = ElementType::Float32;
    std::vector<int64_t> shape;

    size_t elements() const;
};

struct Weights
{
    HostTensor W;
    HostTensor R;
    std::optional<HostTensor> B;
    std::optional<HostTensor> P;
};

struct Buffer;

// Whether mode "fast" may use the cooperative-matrix projection: yes unless ORTOPS_COOPMAT=0.
bool
coopmatRequested();

// A coalescing setting from the environment (ORTOPS_COALESCE_ROWS: the batch rows concurrent
// runs may be coalesced into, 1 switches coalescing off; ORTOPS_COALESCE_IN_FLIGHT), else
// `fallback`.
uint32_t
coalesceSettingFromEnv(const char* variable, uint32_t fallback);

// A caller's scratch region: a device buffer (Context's "storage" buffers) and a byte offset
// (a multiple of 4) from which the region runs.
struct ScratchRegion
{
    std::shared_ptr<Buffer> buffer;
    uint64_t offset = 0;
};

struct RunInputs
{
    HostTensor X;
    std::optional<HostTensor> sequenceLens;
    std::optional<HostTensor> initialH;
    std::optional<HostTensor> initialC;
    // The Python door's extras (the custom-op library leaves them unset):
    // steps to run (max_length, at least every sequence length; default seq_length);
    std::optional<uint32_t> steps;
    // the outputs computed, in the cell's order (default: the config's);
    std::optional<std::array<bool, 3>> outputs;
    // caller scratch regions for Xw and the state (default: the plan's own); runs given
    // regions are serialised, since they may share one arena.
    std::optional<ScratchRegion> xwScratch;
    std::optional<ScratchRegion> stateScratch;
};

// Per-layer settings the Python door may change between runs (tests and benchmarks lower
// them): the variant tunables, the plan cache's capacity, the storage-binding limit checked
// (default: the device's maxStorageBufferRange), runs of one shape in flight at once, and
// whether plans record GPU timestamps.
struct LayerSettings
{
    VariantSettings variants = variantSettings();
    uint32_t planCache = 8;
    std::optional<uint64_t> storageRange;
    std::optional<std::array<uint32_t, 3>> workgroupCount;   // default: the device's maxComputeWorkGroupCount
    uint32_t maxConcurrent = 8;
    bool timestamps = false;
    // Mode "fast" may record the cooperative-matrix projection (default: yes; ORTOPS_COOPMAT=0: no).
    bool coopmat = coopmatRequested();
    // Concurrent runs coalesced into one batched run (coalesce.hpp): at most this many batch
    // rows a run (1: never; default ORTOPS_COALESCE_ROWS, else 32), with at most
    // `coalesceInFlight` runs of the layer in flight while requests wait to be coalesced
    // (default ORTOPS_COALESCE_IN_FLIGHT, else 1).
    uint32_t coalesceRows = coalesceSettingFromEnv("ORTOPS_COALESCE_ROWS", 32);
    uint32_t coalesceInFlight = coalesceSettingFromEnv("ORTOPS_COALESCE_IN_FLIGHT", 1);
};

// One run's GPU time in milliseconds: the whole and its split (projection and state set-up,
// steps, outputs).
struct GpuProfile
{
    double totalMs = 0, projectionMs = 0, stepsMs = 0, outputsMs = 0;
};

// The plans a layer holds for one shape: its key's fields, how many plans exist and which
// projection and step kernels each free one recorded.
struct PlanPoolInfo
{
    uint32_t seq, batch, steps;
    bool hasLens, hasH0, hasC0;
    std::array<bool, 3> outputs;
    uint32_t count;
    std::vector<std::string> freeProjections;
    std::vector<std::string> freeSteps;
};

// Output shapes in the cell's output order (Y, Y_h[, Y_c]); an output not computed has no
// shape (nullopt).
using OutputShapes = std::array<std::optional<std::vector<int64_t>>, 3>;
// Where run() writes each output (nullptr for one not computed), C-contiguous, of the shape
// outputShapes() gave and the layer's element type.
using OutputPointers = std::array<void*, 3>;

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
};
CoreCounters
coreCounters();

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

// Test hook (both doors): every run after this fails ("fail": InputError "failure injected
// by the test") or has its float outputs changed ("scale": times value, "add": plus value),
// so that tests can check how a wrong or failing node is reported. "" switches it off.
void
injectFault(const std::string& kind, double value);

// The checks Layer's constructor makes of a config and its weights' element types and shapes
// (the data is not read; no device is needed): InputError / UnsupportedLayerError as the
// constructor throws them. The ONNX Runtime EP asks it before it claims a node (src/ep/).
void
checkLayerSpec(const NodeConfig& config, const Weights& weights);

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

    // Several requests of one key as one batched run, as concurrent runs are coalesced
    // (coalesce.hpp): tests check that each request gets the bits it gets alone.
    // `padTo`: the run's batch, zero rows past the requests' (at most their rows: none).
    void runCoalesced(const std::vector<RunInputs>& inputs, const std::vector<OutputPointers>& out,
                      uint32_t padTo = 0);

    // The Python door's controls and views.
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
