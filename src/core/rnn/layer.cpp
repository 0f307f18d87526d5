// ortops::Layer (see layer.hpp): the facade over the layer's pieces — its spec (spec.hpp), its
// weights on the device (weights.hpp), its plans (plan_pool.hpp, recording.hpp) — and the run
// path, which only writes inputs, submits once and reads outputs.

#include "rnn/layer.hpp"

#include <chrono>

#include "rnn/coalesce.hpp"
#include "rnn/device_check.hpp"
#include "vk/devices.hpp"
#include "rnn/kernel_choice.hpp"
#include "rnn/limits.hpp"
#include "rnn/persistent.hpp"
#include "vk/memory.hpp"
#include "rnn/plan_pool.hpp"
#include "rnn/recording.hpp"
#include "vk/sequence.hpp"
#include "rnn/spec.hpp"
#include "rnn/testing.hpp"
#include "rnn/variants.hpp"

#include <atomic>
#include <cstring>
#include <mutex>

namespace ortops {

namespace {

std::atomic<uint64_t> g_layersCreated{ 0 }, g_layersAlive{ 0 }, g_plansRecorded{ 0 }, g_runs{ 0 };
// Where the submitted runs' host time went, in nanoseconds: writing the inputs, submitting and
// waiting for the device, reading the outputs (CoreCounters).
std::atomic<uint64_t> g_writeNs{ 0 }, g_waitNs{ 0 }, g_readNs{ 0 };

uint64_t
nanosSince(std::chrono::steady_clock::time_point t)
{
    return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t).count());
}

// The device a layer runs on: the config's (or ORTOPS_DEVICE's, or the preferred one), if it
// can run the kernels in the config's mode (device_check.hpp).
const DeviceDescription&
layerDevice(const NodeConfig& cfg)
{
    const DeviceDescription& device = chooseDevice(cfg.device);
    requireDevice(device, cfg.mode);
    return device;
}

// The key of a run's plan.
PlanKey
planKey(const RunInputs& in, const OutputShapes& shapes, uint32_t seq, uint32_t batch)
{
    PlanKey key;
    key.seq = seq;
    key.batch = batch;
    key.steps = in.steps.value_or(key.seq);
    key.hasLens = in.sequenceLens.has_value();
    key.hasH0 = in.initialH.has_value();
    key.hasC0 = in.initialC.has_value();
    for (uint32_t i = 0; i < 3; i++) {
        key.outputs[i] = shapes[i].has_value();
    }
    if (in.xwScratch) {
        key.xwBuffer = in.xwScratch->buffer.get();
        key.xwOffset = in.xwScratch->offset;
    }
    if (in.stateScratch) {
        key.stateBuffer = in.stateScratch->buffer.get();
        key.stateOffset = in.stateScratch->offset;
    }
    return key;
}

// A run of no steps or no batch rows: nothing runs. Y is empty or zeros; the final states are
// the initial states or zeros.
void
runEmpty(const RunInputs& in, const OutputShapes& shapes, const OutputPointers& out, size_t item)
{
    for (uint32_t i = 0; i < 3; i++) {
        if (!shapes[i] || !out[i]) {
            continue;
        }
        size_t n = 1;
        for (int64_t d : *shapes[i]) {
            n *= static_cast<size_t>(d);
        }
        const std::optional<HostTensor>* initial = i == 1 ? &in.initialH : (i == 2 ? &in.initialC : nullptr);
        if (initial && *initial) {
            std::memcpy(out[i], (*initial)->data, n * item);
        } else {
            std::memset(out[i], 0, n * item);
        }
    }
}

// The inputs into the plan's mapped buffers: a coalesced run's pieces, else each tensor whole.
void
writeInputs(Plan& plan, const RunInputs& in, const RunCopies* copies, size_t item)
{
    if (copies) {
        plan.x->writePieces(copies->x);
        if (in.sequenceLens) {
            plan.lens->writePieces(copies->lens);
        }
        if (in.initialH) {
            plan.h0->writePieces(copies->h0);
        }
        if (in.initialC) {
            plan.c0->writePieces(copies->c0);
        }
        return;
    }
    plan.x->write(in.X.data, in.X.elements() * item, 0);
    if (in.sequenceLens) {
        plan.lens->write(in.sequenceLens->data, in.sequenceLens->elements() * 4, 0);
    }
    if (in.initialH) {
        plan.h0->write(in.initialH->data, in.initialH->elements() * item, 0);
    }
    if (in.initialC) {
        plan.c0->write(in.initialC->data, in.initialC->elements() * item, 0);
    }
}

// The outputs from the plan's readback buffers: into a coalesced run's pieces, else whole.
void
readOutputs(const Plan& plan, const OutputShapes& shapes, const OutputPointers& out, const RunCopies* copies,
            const Spec& s)
{
    for (uint32_t i = 0; i < 3; i++) {
        if (!shapes[i] || !plan.readback[i]) {
            continue;
        }
        if (copies) {
            plan.readback[i]->readPieces(copies->outputs[i]);
            for (const Piece& p : copies->outputs[i]) {
                applyFault(const_cast<void*>(p.host), p.bytes / s.item, s.float16);
            }
        } else if (out[i]) {
            plan.readback[i]->read(out[i], plan.readback[i]->bytes, 0);
            applyFault(out[i], plan.readback[i]->bytes / s.item, s.float16);
        }
    }
}

} // namespace

// ---------------------------------------------------------------- the layer's state

struct LayerImpl
{
    NodeConfig config;
    Spec spec;
    DeviceDescription device;
    std::shared_ptr<Context> ctx;
    mutable std::mutex settingsLock;
    LayerSettings settings;
    std::optional<GpuProfile> profile;
    std::mutex scratchLock;        // runs with caller scratch regions, one at a time
    DeviceWeights weights;
    PlanCache plans;
    Coalescer coalescer;

    LayerImpl(const NodeConfig& cfg, const Weights& w, const LayerSettings& s)
      : config(cfg)
      , spec(makeSpec(cfg, w))
      , device(layerDevice(cfg))
      , ctx(sharedContext(device.index, validationRequested(), requestedQueues()))
      , settings(s)
      , weights(ctx, spec, w, currentLimits())
    {
    }

    LayerSettings currentSettings() const
    {
        std::lock_guard<std::mutex> lock(settingsLock);
        return settings;
    }
    Limits currentLimits() const
    {
        std::lock_guard<std::mutex> lock(settingsLock);
        return Limits{ spec.op, device.name, settings.storageRange.value_or(device.maxStorageBufferRange),
                       settings.workgroupCount.value_or(device.maxWorkgroupCount), settings.variants.maxGroups };
    }
    // The step kernel a plan of this batch would record under these settings (the plan cache
    // asks once per key; scratchSizes and coalescing ask for batches without a plan).
    StepKernel stepKernelFor(uint32_t batch, const LayerSettings& s) const
    {
        return chooseStepKernel(spec, device, *ctx, s, batch);
    }

    std::shared_ptr<Plan> record(const PlanKey& key, const RunInputs& in, const PlanPool& pool);
    // One run on a plan of its own (the inputs checked, the output shapes given).
    // `copies`: a coalesced run's pieces (coalesce.hpp), else nullptr (the inputs' and outputs'
    // own addresses, whole).
    void runPlan(const RunInputs& in, const OutputShapes& shapes, const OutputPointers& out,
                 const RunCopies* copies = nullptr);
    void submit(Plan& plan, const RunInputs& in, const OutputShapes& shapes, const OutputPointers& out,
                const RunCopies* copies);
};

std::shared_ptr<Plan>
LayerImpl::record(const PlanKey& key, const RunInputs& in, const PlanPool& pool)
{
    Limits limits = currentLimits();
    // A persistent plan also records its fallback's run (persistent.hpp).
    StepKernel fallback = pool.stepKernel == StepKernel::Persistent
                            ? fallbackStepKernel(spec, device, *ctx, pool.settings, key.batch)
                            : pool.stepKernel;
    for (StepKernel k : { pool.stepKernel, fallback }) {
        if (k == StepKernel::Batched || k == StepKernel::Sequence) {   // R as RB
            weights.uploadBatchedR(limits);
        }
    }
    auto plan = recordPlan(RecordingSource{ spec, device, ctx, weights }, key, in, pool, limits, fallback);
    g_plansRecorded++;
    return plan;
}

void
LayerImpl::submit(Plan& plan, const RunInputs& in, const OutputShapes& shapes, const OutputPointers& out,
                  const RunCopies* copies)
{
    auto t0 = std::chrono::steady_clock::now();
    writeInputs(plan, in, copies, spec.item);
    g_writeNs += nanosSince(t0);
    auto t1 = std::chrono::steady_clock::now();
    // A persistent plan runs under its device's gate, and on the step kernels if its grid fails.
    Sequence& ran = plan.fallback ? runPersistent(plan, device.index) : *plan.sequence;
    if (!plan.fallback) {
        plan.sequence->eval();
    }
    g_waitNs += nanosSince(t1);
    g_runs++;
    if (plan.timestamps) {
        std::vector<double> t = ran.timestamps();
        GpuProfile p{ (t[3] - t[0]) * 1e-6, (t[1] - t[0]) * 1e-6, (t[2] - t[1]) * 1e-6, (t[3] - t[2]) * 1e-6 };
        std::lock_guard<std::mutex> lock(settingsLock);
        profile = p;
    }
    auto t2 = std::chrono::steady_clock::now();
    readOutputs(plan, shapes, out, copies, spec);
    g_readNs += nanosSince(t2);
}

void
LayerImpl::runPlan(const RunInputs& in, const OutputShapes& shapes, const OutputPointers& out, const RunCopies* copies)
{
    const Spec& s = spec;
    if (faultFails()) {
        throw InputError(s.op + ": failure injected by the test");
    }
    int64_t seq = s.layout == 0 ? in.X.shape[0] : in.X.shape[1];
    int64_t batch = s.layout == 0 ? in.X.shape[1] : in.X.shape[0];
    if (seq == 0 || batch == 0) {
        runEmpty(in, shapes, out, s.item);
        return;
    }
    PlanKey key = planKey(in, shapes, static_cast<uint32_t>(seq), static_cast<uint32_t>(batch));
    std::unique_lock<std::mutex> scratch(scratchLock, std::defer_lock);
    if (key.callerScratch()) {
        scratch.lock();
    }
    LayerSettings current = currentSettings();
    auto [pool, plan] = plans.acquire(key, current, [&](uint32_t b) { return stepKernelFor(b, current); });
    try {
        if (!plan) {
            plan = record(key, in, *pool);
        }
        submit(*plan, in, shapes, out, copies);
    } catch (...) {
        plans.release(key, pool, plan);
        throw;
    }
    plans.release(key, pool, plan);
}

// ---------------------------------------------------------------- Layer

Layer::Layer(const NodeConfig& config, const Weights& weights, const LayerSettings& settings)
  : impl(std::make_unique<LayerImpl>(config, weights, settings))
{
    g_layersCreated++;
    g_layersAlive++;
}

Layer::~Layer()
{
    g_layersAlive--;
}

CoreCounters
coreCounters()
{
    CoalesceCounters c = coalesceCounters();
    return { g_layersCreated.load(), g_layersAlive.load(), g_plansRecorded.load(), g_runs.load(), c.runs, c.requests,
             g_writeNs.load(), g_waitNs.load(), g_readNs.load(), c.slotRuns, c.slotNs };
}

const NodeConfig&
Layer::config() const
{
    return impl->config;
}

ElementType
Layer::elementType() const
{
    return impl->spec.type();
}

std::string
Layer::deviceName() const
{
    return impl->device.name;
}

std::string
Layer::deviceUuid() const
{
    return impl->device.uuid;
}

OutputShapes
Layer::outputShapes(const RunInputs& in) const
{
    return checkInputs(impl->spec, impl->config, in);
}

void
Layer::run(const RunInputs& in, const OutputPointers& out)
{
    run(in, outputShapes(in), out);
}

void
Layer::run(const RunInputs& in, const OutputShapes& shapes, const OutputPointers& out)
{
    LayerImpl& L = *impl;
    const Spec& s = L.spec;
    LayerSettings settings = L.currentSettings();
    uint32_t rows = settings.coalesceRows;
    int64_t batch = s.layout == 0 ? in.X.shape[1] : in.X.shape[0];
    // Mode "fast"'s matrix-unit steps have their own bits (h rounded to float16): a request
    // below the batch they run from is coalesced only into runs below it, so that it gets the
    // bits it gets alone. (From that batch on, every run takes them, and their sums of a batch
    // row do not depend on the other rows.)
    uint32_t coopmatFrom = coopmatStepsFrom(s.hidden, settings.variants);
    if (coopmatFrom > 1 && batch > 0 && batch < coopmatFrom && rows >= coopmatFrom &&
        L.stepKernelFor(coopmatFrom, settings) == StepKernel::Coopmat) {
        rows = coopmatFrom - 1;
    }
    // Runs with caller scratch regions share an arena and are serialised anyway; a profile
    // belongs to one run. Neither is coalesced.
    if (rows <= 1 || settings.timestamps || in.xwScratch || in.stateScratch || batch <= 0 || batch >= rows ||
        in.X.elements() == 0) {
        L.runPlan(in, shapes, out);
        return;
    }
    CoalesceRequest request{ &in, &shapes, &out, static_cast<uint32_t>(batch) };
    L.coalescer.run(request, BatchAxes::forLayout(s.layout), s.item, rows, settings.coalesceInFlight,
                    [&L](const RunInputs& i, const OutputShapes& sh, const OutputPointers& o, const RunCopies* c) {
                        L.runPlan(i, sh, o, c);
                    });
}

#ifdef ORTOPS_TESTING
void
Layer::runCoalesced(const std::vector<RunInputs>& inputs, const std::vector<OutputPointers>& out, uint32_t padTo)
{
    const Spec& s = impl->spec;
    if (inputs.empty() || inputs.size() != out.size()) {
        throw std::invalid_argument("ortops: runCoalesced takes one output set per request");
    }
    std::vector<OutputShapes> shapes;
    for (const RunInputs& in : inputs) {
        shapes.push_back(outputShapes(in));
    }
    std::vector<CoalesceRequest> requests;
    BatchAxes axes = BatchAxes::forLayout(s.layout);
    for (size_t r = 0; r < inputs.size(); r++) {
        int64_t batch = inputs[r].X.shape[axes.x];
        if (batch <= 0) {
            throw std::invalid_argument("ortops: runCoalesced takes requests of batch at least 1");
        }
        requests.push_back(CoalesceRequest{ &inputs[r], &shapes[r], &out[r], static_cast<uint32_t>(batch) });
        if (!sameCoalesceKey(requests[0], requests[r], axes)) {
            throw std::invalid_argument("ortops: request " + std::to_string(r) +
                                        " differs from request 0 in more than its batch size");
        }
    }
    LayerImpl& L = *impl;
    ortops::runCoalesced(requests, axes, s.item, padTo,
                         [&L](const RunInputs& i, const OutputShapes& sh, const OutputPointers& o,
                              const RunCopies* c) { L.runPlan(i, sh, o, c); });
}
#endif // ORTOPS_TESTING

LayerSettings
Layer::settings() const
{
    return impl->currentSettings();
}

void
Layer::setSettings(const LayerSettings& s)
{
    checkSettings(s);
    {
        std::lock_guard<std::mutex> lock(impl->settingsLock);
        impl->settings = s;
    }
    // Plans recorded under other settings go (the next run of each shape records anew): a
    // pool holds the settings its plans record, so busy pools go too (their plans are dropped
    // when released).
    impl->plans.clear();
}

std::optional<GpuProfile>
Layer::lastProfile() const
{
    std::lock_guard<std::mutex> lock(impl->settingsLock);
    return impl->profile;
}

std::vector<PlanPoolInfo>
Layer::planPools() const
{
    return impl->plans.info();
}

std::vector<std::string>
Layer::weightNames() const
{
    std::vector<std::string> out;
    for (const auto& [name, bytes] : impl->weights.sizes()) {
        out.push_back(name);
    }
    return out;
}

std::vector<std::pair<std::string, uint64_t>>
Layer::weightBytes() const
{
    return impl->weights.sizes();
}

std::pair<uint64_t, uint64_t>
Layer::scratchSizes(uint32_t seq, uint32_t batch) const
{
    StepKernel kernel = impl->stepKernelFor(batch, settings());
    ScratchSizes s = ortops::scratchSizes(impl->spec, seq, batch, kernel);
    return { s.xw, s.state };
}

const DeviceDescription&
Layer::device() const
{
    return impl->device;
}

std::shared_ptr<Context>
Layer::context() const
{
    return impl->ctx;
}

} // namespace ortops
