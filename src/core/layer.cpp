// ortops::Layer (see layer.hpp): the layer's spec, its weights on the device, its plans —
// buffers, programs with named specialization constants and one recorded sequence per input
// shape — and the hot path, which only writes inputs, submits once and reads outputs.
//
// How a run is recorded (glsl/ has each pass):
//   1. input_projection: Xw = X . W^T for every step and direction (one batched Gemm);
//   2. state_init: state slot 0 and the cell state from initial_h / initial_c or zeros;
//   3. step, once per time step (twice for a GRU with linear_before_reset = 0), each followed
//      by a compute-to-compute barrier, since step s + 1 reads the hidden state step s wrote;
//   4. output_sequence (Y) and output_state (Y_h, Y_c), for the requested outputs only;
//   then copies into host-cached memory and the end-of-run marker.

#include "layer.hpp"

#include "activations.hpp"
#include "coalesce.hpp"
#include "devices.hpp"
#include "memory.hpp"
#include "program.hpp"
#include "sequence.hpp"
#include "shaders.hpp"
#include "specialization.hpp"
#include "variants.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <sstream>

namespace ortops {

namespace {

// ---------------------------------------------------------------- messages

std::string
dims(const std::vector<int64_t>& shape)
{
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        s += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return s + "]";
}

std::string
gateText(const Cell& c)
{
    return c.gates > 1 ? std::to_string(c.gates) + "*hidden_size" : "hidden_size";
}

// ---------------------------------------------------------------- the spec

// Everything about the layer that does not depend on X.
struct Spec
{
    const Cell* cell = nullptr;
    std::string op;
    bool float16 = false;
    uint32_t item = 4;
    uint32_t dirs = 1;
    uint32_t hidden = 0;
    uint32_t input = 0;
    uint32_t gates = 1;
    uint32_t layout = 0;
    bool reverse = false;
    std::vector<std::vector<Activation>> activations;
    std::optional<float> clip;
    bool inputForget = false;
    bool lbr = false;
    bool hasBias = false;
    bool hasPeepholes = false;
    bool generalActivations = false;   // activations other than the cell's defaults (GENERAL)
    Mode mode = Mode::Deterministic;

    bool gruTwoPass() const { return cell->op == Op::GRU && !lbr; }
    // Bytes per element of R (and RB) on the device: exact mode's step kernels read float32
    // words in both precisions (exactR).
    uint32_t rItem() const { return mode == Mode::Exact ? 4 : item; }
    ElementType type() const { return float16 ? ElementType::Float16 : ElementType::Float32; }
};

[[noreturn]] void
fail(const std::string& text)
{
    throw InputError(text);
}

void
requireType(const Spec& s, const char* name, const HostTensor& t, ElementType want, const char* wantText)
{
    if (t.type != want) {
        fail(s.op + ": " + name + " must have " + wantText + ", got " + elementTypeName(t.type));
    }
}

void
requireRank(const Spec& s, const char* name, const HostTensor& t, size_t rank, const std::string& meaning)
{
    if (t.shape.size() != rank) {
        fail(s.op + ": " + name + " must have rank " + std::to_string(rank) + " [" + meaning + "], got shape " +
             dims(t.shape));
    }
    for (int64_t d : t.shape) {
        if (d < 0) {
            fail(s.op + ": " + name + " has a negative dimension: shape " + dims(t.shape));
        }
    }
}

void
requireShape(const Spec& s, const char* name, const HostTensor& t, const std::vector<int64_t>& want,
             const std::string& meaning)
{
    if (t.shape != want) {
        fail(s.op + ": " + name + " must have shape " + dims(want) + " (" + meaning + "), got " + dims(t.shape));
    }
}

Spec
makeSpec(const NodeConfig& cfg, const Weights& w)
{
    Spec s;
    s.cell = cfg.cell;
    if (!s.cell) {
        throw InputError("ortops: the layer's config names no cell");
    }
    s.op = std::string(s.cell->name);
    s.float16 = cfg.dtype == ElementType::Float16;
    s.item = s.float16 ? 2 : 4;
    s.gates = s.cell->gates;
    const NodeAttrs& a = cfg.attrs;
    s.dirs = a.directions();
    s.reverse = a.direction == Direction::Reverse;
    s.layout = static_cast<uint32_t>(a.layout);
    s.inputForget = a.inputForget != 0;
    s.lbr = a.linearBeforeReset != 0;
    if (a.clip) {
        s.clip = static_cast<float>(*a.clip);
    }
    s.mode = cfg.mode;
    const char* want = s.float16 ? "dtype float16 (the node's)" : "dtype float32 (the node's)";
    std::string gt = gateText(*s.cell);
    requireType(s, "W", w.W, s.type(), want);
    requireType(s, "R", w.R, s.type(), want);
    requireRank(s, "W", w.W, 3, "num_directions, " + gt + ", input_size");
    requireRank(s, "R", w.R, 3, "num_directions, " + gt + ", hidden_size");
    std::string source;
    int64_t H;
    if (a.hiddenSize) {
        H = *a.hiddenSize;
    } else {
        H = w.R.shape[2];
        if (H <= 0) {
            fail(s.op + ": hidden_size (R's last dimension) must be > 0, R has shape " + dims(w.R.shape));
        }
        source = "; hidden_size = " + std::to_string(H) + " from R's last dimension";
    }
    if (H > (1 << 20) || w.W.shape[2] > (int64_t(1) << 24)) {
        throw UnsupportedLayerError(s.op + ": unsupported layer: hidden_size " + std::to_string(H) +
                                    " and input_size " + std::to_string(w.W.shape[2]) +
                                    " must be at most 2^20 and 2^24");
    }
    s.hidden = static_cast<uint32_t>(H);
    s.input = static_cast<uint32_t>(w.W.shape[2]);
    int64_t D = s.dirs, G = s.gates;
    requireShape(s, "W", w.W, { D, G * H, s.input }, "num_directions, " + gt + ", input_size" + source);
    requireShape(s, "R", w.R, { D, G * H, H }, "num_directions, " + gt + ", hidden_size");
    if (w.B) {
        requireType(s, "B", *w.B, s.type(), want);
        requireShape(s, "B", *w.B, { D, 2 * G * H }, "num_directions, 2*" + gt + source);
        s.hasBias = true;
    }
    if (w.P) {
        if (!s.cell->hasInput("P")) {
            fail(s.op + ": P (peepholes) is only defined for LSTM, got shape " + dims(w.P->shape));
        }
        requireType(s, "P", *w.P, s.type(), want);
        requireShape(s, "P", *w.P, { D, 3 * H }, "num_directions, 3*hidden_size" + source);
        s.hasPeepholes = true;
    }
    try {
        s.activations = resolveActivations(*s.cell, s.dirs, a.activations, a.activationAlpha, a.activationBeta);
    } catch (const std::invalid_argument& e) {
        throw InputError(e.what());
    }
    for (const auto& dir : s.activations) {
        for (uint32_t k = 0; k < dir.size(); k++) {
            auto code = activationCode(s.cell->defaultActivations[k]);
            s.generalActivations = s.generalActivations || !code || dir[k].code != *code;
        }
    }
    return s;
}

// The GENERAL flag and the step shaders' ACT/ALPHA/BETA constants: per direction the f, g, h
// slots (a cell with fewer slots repeats its last; one direction's list serves both).
bool
activationConstants(const Spec& s, Constants& out)
{
    static const char* act[2][3] = { { "ACT0_F", "ACT0_G", "ACT0_H" }, { "ACT1_F", "ACT1_G", "ACT1_H" } };
    static const char* alpha[2][3] = { { "ALPHA0_F", "ALPHA0_G", "ALPHA0_H" }, { "ALPHA1_F", "ALPHA1_G", "ALPHA1_H" } };
    static const char* beta[2][3] = { { "BETA0_F", "BETA0_G", "BETA0_H" }, { "BETA1_F", "BETA1_G", "BETA1_H" } };
    bool general = s.generalActivations;
    for (int d = 0; d < 2; d++) {
        const auto& slots = s.activations[std::min<size_t>(d, s.activations.size() - 1)];
        for (int k = 0; k < 3; k++) {
            const Activation& a = slots[std::min<size_t>(k, slots.size() - 1)];
            out.push_back({ act[d][k], a.code });
            out.push_back({ alpha[d][k], floatBits(a.alpha) });
            out.push_back({ beta[d][k], floatBits(a.beta) });
        }
    }
    return general;
}

// ---------------------------------------------------------------- device limits

struct Limits
{
    std::string op;
    std::string device;
    uint64_t storageRange;
    std::array<uint32_t, 3> workgroupCount;
    uint32_t maxGroups;

    void checkBinding(const std::string& what, uint64_t nbytes) const
    {
        if (nbytes > storageRange) {
            throw UnsupportedLayerError(op + ": unsupported layer on " + device + ": " + what + " needs " +
                                        std::to_string(nbytes) + " bytes in one storage binding, above the "
                                        "device's maxStorageBufferRange of " + std::to_string(storageRange) +
                                        " bytes");
        }
    }
    void checkGroups(const std::string& what, std::array<uint64_t, 3> groups) const
    {
        for (int i = 0; i < 3; i++) {
            if (groups[i] > workgroupCount[i]) {
                throw UnsupportedLayerError(
                  op + ": unsupported layer on " + device + ": " + what + " needs " + std::to_string(groups[0]) +
                  " x " + std::to_string(groups[1]) + " x " + std::to_string(groups[2]) +
                  " workgroups, above the device's maxComputeWorkGroupCount of " +
                  std::to_string(workgroupCount[0]) + " x " + std::to_string(workgroupCount[1]) + " x " +
                  std::to_string(workgroupCount[2]));
            }
        }
    }
};

// ---------------------------------------------------------------- fast mode

// Mode "fast" (docs/modes.md): a float16 layer projects its inputs on matrix hardware
// (glsl/input_projection_coopmat.comp) where the device can run it, unless ORTOPS_COOPMAT=0.
// On the H200 its second version projects 5.6 and 6.2 times as fast as the portable kernel at
// the two float16 anchors (docs/modes.md), so it is on by default.
// glsl/input_projection_coopmat.comp: a 128 x 128 tile of Xw a workgroup of eight subgroups;
// shared memory: X's and W's 128 x 32 slices (rows of 40 halves) and eight 16 x 20 float
// staging blocks (ortops/fast.py holds the same figures for the Python side).
constexpr uint32_t COOPMAT_TILE = 128;
constexpr uint32_t COOPMAT_SHARED_BYTES = 2 * COOPMAT_TILE * 40 * 2 + 8 * 16 * 20 * 4;

bool
useCoopmat(const Spec& s, const DeviceDescription& d, const Context& ctx, bool requested)
{
    if (!requested || s.mode != Mode::Fast || !s.float16) {
        return false;
    }
    bool listed = false;
    for (const auto& c : d.cooperativeMatrix) {
        listed = listed || (c.m == 16 && c.n == 16 && c.k == 16 && c.a == "float16" && c.b == "float16" &&
                            c.c == "float32" && c.result == "float32" && !c.saturating && c.scope == "subgroup");
    }
    return listed && ctx.cooperativeMatrix && d.nanPreserveFloat16 && d.subgroupSizeRange &&
           d.subgroupSizeRange->first == 32 && d.subgroupSizeRange->second == 32 &&
           COOPMAT_SHARED_BYTES <= d.maxSharedMemory;
}

// glsl/step_coopmat.comp's shared memory: R's 64 x 64 slice and h's BT x 64 slice (rows of 36
// half pairs), and the sums of the pass's gates, BT x 16 floats each.
uint32_t
coopmatStepsShared(uint32_t gatesInPass, uint32_t blocks)
{
    uint32_t bt = 16 * blocks;
    return (64 + bt) * 36 * 4 + gatesInPass * bt * 16 * 4;
}

// The step kernel a plan of this batch records: StepKernel::Coopmat (R . h on the matrix
// units: mode "fast", a float16 layer with the cells' default activations, which keep h within
// float16's range, on a device that runs the cooperative-matrix projection, from the batch
// variants.hpp's COOPMAT_STEPS_FROM gives the hidden size), else variants.hpp's stepKernel:
// Lanes or Batched (whose shader, v4 or v5, BatchedVariant::shader() names).
StepKernel
chooseStepKernel(const Spec& s, const DeviceDescription& d, const Context& ctx, const LayerSettings& settings,
                 uint32_t batch)
{
    // useCoopmat first: it ends at once outside mode "fast" and float16 (every other layer).
    if (useCoopmat(s, d, ctx, settings.coopmat) && !s.generalActivations) {
        uint32_t from = coopmatStepsFrom(s.hidden, settings.variants);
        uint32_t blocks = coopmatBlocks(s.hidden, batch, s.dirs, settings.variants);
        if (from != 0 && batch >= from && coopmatStepsShared(s.gates, blocks) <= d.maxSharedMemory) {
            return StepKernel::Coopmat;
        }
    }
    return stepKernel(batch, s.hidden, settings.variants);
}

// ---------------------------------------------------------------- plans

// What a plan is recorded for: a run of another key needs another plan. Caller scratch
// regions enter by their buffer and byte offset.
struct PlanKey
{
    uint32_t seq = 0, batch = 0, steps = 0;
    bool hasLens = false, hasH0 = false, hasC0 = false;
    std::array<bool, 3> outputs{};
    const void* xwBuffer = nullptr;
    uint64_t xwOffset = 0;
    const void* stateBuffer = nullptr;
    uint64_t stateOffset = 0;

    auto tie() const
    {
        return std::tie(seq, batch, steps, hasLens, hasH0, hasC0, outputs, xwBuffer, xwOffset, stateBuffer,
                        stateOffset);
    }
    bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
    bool operator==(const PlanKey& o) const { return tie() == o.tie(); }
    bool callerScratch() const { return xwBuffer || stateBuffer; }
};

struct Plan
{
    std::shared_ptr<Sequence> sequence;
    std::shared_ptr<Buffer> x, lens, h0, c0;
    std::array<std::shared_ptr<HostBuffer>, 3> readback;
    std::vector<std::shared_ptr<void>> keep;   // buffers and programs the sequence refers to
    bool timestamps = false;
    std::string projection;                    // the input projection shader recorded
    std::string steps;                         // and the step kernel's shader
};

// The plans of one key: each serves one run at a time; a second concurrent run of the same
// shape gets a second plan, built on first need, up to `limit`; beyond that it waits. The
// settings and the step kernel are chosen once, when the pool is made: every plan of the key
// records them.
struct PlanPool
{
    uint32_t limit;
    uint32_t count = 0;
    std::vector<std::shared_ptr<Plan>> free;
    LayerSettings settings;
    StepKernel stepKernel = StepKernel::Lanes;
};

std::atomic<uint64_t> g_layersCreated{ 0 }, g_layersAlive{ 0 }, g_plansRecorded{ 0 }, g_runs{ 0 };

std::mutex g_faultLock;
std::string g_faultKind;   // "", "fail", "scale", "add" (injectFault)
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

void
applyFault(void* out, size_t n, bool float16)
{
    if (!g_faultOn.load(std::memory_order_relaxed)) {
        return;
    }
    std::string kind;
    double value;
    {
        std::lock_guard<std::mutex> lock(g_faultLock);
        kind = g_faultKind;
        value = g_faultValue;
    }
    if (kind != "scale" && kind != "add") {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float v = float16 ? halfToFloat(static_cast<uint16_t*>(out)[i]) : static_cast<float*>(out)[i];
        v = kind == "scale" ? static_cast<float>(v * value) : static_cast<float>(v + value);
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
    return g_faultKind == "fail";
}


} // namespace

bool
coopmatRequested()
{
    const char* env = std::getenv("ORTOPS_COOPMAT");
    return !(env && std::string(env) == "0");
}

uint32_t
coalesceSettingFromEnv(const char* variable, uint32_t fallback)
{
    const char* env = std::getenv(variable);
    if (env && *env) {
        char* end = nullptr;
        unsigned long v = std::strtoul(env, &end, 10);
        if (end && *end == 0 && v >= 1 && v <= (1u << 24)) {
            return static_cast<uint32_t>(v);
        }
    }
    return fallback;
}

size_t
HostTensor::elements() const
{
    size_t n = 1;
    for (int64_t d : shape) {
        n *= static_cast<size_t>(d);
    }
    return n;
}

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
    std::map<std::string, std::shared_ptr<Buffer>> weights;
    std::vector<uint8_t> hostR;   // R kept until the batched kernel's layout is uploaded
    std::mutex batchedLock;
    std::shared_ptr<Buffer> dummy;

    std::mutex cacheLock;
    std::condition_variable cacheFree;
    std::list<PlanKey> lru;   // least recently used first
    std::map<PlanKey, std::shared_ptr<PlanPool>> pools;

    Coalescer coalescer;

    LayerImpl(const NodeConfig& cfg, const Weights& w, const LayerSettings& settings);

    std::shared_ptr<Buffer> upload(const std::map<std::string, std::pair<const void*, uint64_t>>& arrays);
    void uploadBatchedR();
    std::shared_ptr<Plan> record(const PlanKey& key, const RunInputs& in, const PlanPool& pool);
    LayerSettings currentSettings() const;
    // The step kernel a plan of this batch would record under these settings (the plan pool
    // asks once per key; scratchSizes and coalescing ask for batches without a plan).
    StepKernel stepKernelFor(uint32_t batch, const LayerSettings& s) const;
    std::pair<std::shared_ptr<PlanPool>, std::shared_ptr<Plan>> acquire(const PlanKey& key);
    void release(const PlanKey& key, const std::shared_ptr<PlanPool>& pool, std::shared_ptr<Plan> plan);
    void evict(const PlanKey& keep);
    Limits currentLimits() const;
    // One run on a plan of its own (the inputs checked, the output shapes given).
    // `copies`: a coalesced run's pieces (coalesce.hpp), else nullptr (the inputs' and outputs'
    // own addresses, whole).
    void runPlan(const RunInputs& in, const OutputShapes& shapes, const OutputPointers& out,
                 const RunCopies* copies = nullptr);
};

LayerImpl::LayerImpl(const NodeConfig& cfg, const Weights& w, const LayerSettings& s)
  : config(cfg)
  , spec(makeSpec(cfg, w))
  , settings(s)
{
    device = chooseDevice(cfg.device);
    if (!device.nanPreserveFloat32) {
        throw UnsupportedLayerError(
          "ortops: the Vulkan device " + device.name + " cannot run ortops's kernels: it does not report "
          "shaderSignedZeroInfNanPreserveFloat32 (Vulkan 1.2 float controls), so its shaders may not "
          "preserve NaN, +-Inf and -0, which the kernels declare they rely on (SignedZeroInfNanPreserve, "
          "docs/special_values.md). Choose another device with ORTOPS_DEVICE.");
    }
    ctx = sharedContext(device.index, validationRequested(), requestedQueues());
    std::map<std::string, std::pair<const void*, uint64_t>> arrays;
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
    upload(arrays);
    const auto* r = static_cast<const uint8_t*>(arrays["R"].first);
    hostR.assign(r, r + arrays["R"].second);
    dummy = std::make_shared<Buffer>(ctx, 4, "storage");
}

LayerSettings
LayerImpl::currentSettings() const
{
    std::lock_guard<std::mutex> lock(settingsLock);
    return settings;
}

StepKernel
LayerImpl::stepKernelFor(uint32_t batch, const LayerSettings& s) const
{
    return chooseStepKernel(spec, device, *ctx, s, batch);
}

Limits
LayerImpl::currentLimits() const
{
    std::lock_guard<std::mutex> lock(settingsLock);
    return Limits{ spec.op, device.name, settings.storageRange.value_or(device.maxStorageBufferRange),
                   settings.workgroupCount.value_or(device.maxWorkgroupCount), settings.variants.maxGroups };
}

// Weights go to device-only memory: staged, then copied by a compute pass (Kompute's
// device-only tensors are storage buffers, not transfer destinations).
std::shared_ptr<Buffer>
LayerImpl::upload(const std::map<std::string, std::pair<const void*, uint64_t>>& arrays)
{
    Limits limits = currentLimits();
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
    for (auto& [name, buf] : stored) {
        weights[name] = buf;
    }
    return stored.empty() ? nullptr : stored.back().second;
}

// The exact kernels' decoding of one element, as integer code (glsl/exact.glsl's
// half_to_float_ and ftz_, rule for rule).
static uint32_t
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

static uint32_t
exactFlushBits(uint32_t u)
{
    return (u & 0x7F800000u) == 0 ? (u & 0x80000000u) : u;
}

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

// R [dirs, gates * hidden, hidden] in the batched step kernels' layout
// RB[dir][position][unit][gate] (glsl/batched.glsl): position p = t * NI + i holds
// k = l + 32 i of the class l at tree position t (l = t with its five bits reversed), so a
// thread reads its sums' terms in order; positions past the hidden size hold 0.
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

void
LayerImpl::uploadBatchedR()
{
    std::lock_guard<std::mutex> lock(batchedLock);
    if (weights.count("RB")) {
        return;
    }
    std::vector<uint8_t> rb = batchedR(hostR.data(), spec.dirs, spec.gates, spec.hidden, spec.rItem());
    std::map<std::string, std::pair<const void*, uint64_t>> arrays{ { "RB", { rb.data(), rb.size() } } };
    upload(arrays);
    hostR.clear();
    hostR.shrink_to_fit();
}

// ---------------------------------------------------------------- recording a plan

namespace {

struct ScratchSizes
{
    uint64_t xw, state;
};

// The two scratch regions a run needs (docs/design.md, "Scratch"): the input projection of
// every step and direction, float32 [dirs, seq, batch, gates * hidden]; every step's hidden
// state [seq + 1, dirs, batch, hidden], then the cell's extra planes, then (batched step
// kernel: `batched`) the transposed planes.
ScratchSizes
scratchSizes(const Spec& s, uint32_t seq, uint32_t batch, bool batched)
{
    uint64_t plane = static_cast<uint64_t>(s.dirs) * batch * s.hidden;
    uint64_t extra = s.cell->extraStatePlanes(s.lbr) * plane;
    uint64_t transposed = batched
                            ? static_cast<uint64_t>(transposedPlanes(s.gruTwoPass())) * s.dirs * 32 *
                                classesLength(s.hidden) * paddedBatch(batch)
                            : 0;
    return { 4ull * s.dirs * seq * batch * s.gates * s.hidden, 4 * ((seq + 1) * plane + extra + transposed) };
}

struct Recording
{
    LayerImpl& L;
    const Spec& s;
    PlanKey key;
    const RunInputs& in;
    LayerSettings settings;
    Limits limits;
    std::shared_ptr<Plan> plan = std::make_shared<Plan>();
    std::shared_ptr<Buffer> xw, st;
    uint32_t xwOff = 0, stOff = 0;   // in floats
    std::array<std::shared_ptr<Buffer>, 3> outs;
    StepKernel stepKernel;         // the pool's (chooseStepKernel's, once per key)
    bool batched;                  // the batched layouts (RB, transposed planes)
    bool coopmat;

    Recording(LayerImpl& layer, const PlanKey& k, const RunInputs& inputs, const PlanPool& pool)
      : L(layer)
      , s(layer.spec)
      , key(k)
      , in(inputs)
      , settings(pool.settings)
      , stepKernel(pool.stepKernel)
    {
        limits = L.currentLimits();
        batched = stepKernel == StepKernel::Batched;
        coopmat = useCoopmat(s, L.device, *L.ctx, settings.coopmat);
    }

    std::shared_ptr<Buffer> storage(const std::string& what, uint64_t nbytes)
    {
        limits.checkBinding(what, nbytes);
        auto b = std::make_shared<Buffer>(L.ctx, nbytes, "storage");
        plan->keep.push_back(b);
        return b;
    }
    // A scratch region: the caller's (checked: a non-negative multiple of 4 bytes, inside its
    // buffer, whose whole size is bound) or one the plan owns.
    std::shared_ptr<Buffer> scratch(const std::string& what, const std::optional<ScratchRegion>& region,
                                    uint64_t nbytes, uint32_t& offsetFloats)
    {
        if (!region) {
            offsetFloats = 0;
            return storage(what, nbytes);
        }
        const ScratchRegion& r = *region;
        if (!r.buffer) {
            throw InputError(s.op + ": " + what + " region has no buffer");
        }
        if (r.offset % 4) {
            throw InputError(s.op + ": " + what + " offset must be a non-negative multiple of 4 bytes, got " +
                             std::to_string(r.offset));
        }
        if (r.offset + nbytes > r.buffer->bytes) {
            throw InputError(s.op + ": " + what + " needs " + std::to_string(nbytes) + " bytes at offset " +
                             std::to_string(r.offset) + ", but its buffer holds " + std::to_string(r.buffer->bytes));
        }
        if (r.buffer->ctx != L.ctx) {
            throw InputError(s.op + ": " + what + " buffer belongs to another device's context");
        }
        limits.checkBinding(what + " (its whole buffer is bound)", r.buffer->bytes);
        if (r.offset / 4 > 0xFFFFFFFFull) {
            throw UnsupportedLayerError(s.op + ": " + what + " offset is beyond 2^32 floats");
        }
        offsetFloats = static_cast<uint32_t>(r.offset / 4);
        plan->keep.push_back(r.buffer);
        return r.buffer;
    }
    std::shared_ptr<Buffer> io(const std::string& name, uint64_t elements)
    {
        uint64_t nbytes = elements * s.item;
        limits.checkBinding(name, nbytes);
        auto b = std::make_shared<Buffer>(L.ctx, nbytes, "device");
        plan->keep.push_back(b);
        return b;
    }
    std::shared_ptr<Program> program(const std::string& shader, std::vector<std::shared_ptr<Buffer>> buffers,
                                     uint32_t pushWords, const Constants& constants)
    {
        auto p = std::make_shared<Program>(L.ctx, spirv(shader, s.float16, s.mode), buffers,
                                           pack(shader, constants), pushWords);
        plan->keep.push_back(p);
        return p;
    }
    std::shared_ptr<Buffer> weight(const char* name)
    {
        auto it = L.weights.find(name);
        return it == L.weights.end() ? L.dummy : it->second;
    }

    uint64_t plane() const { return static_cast<uint64_t>(s.dirs) * key.batch * s.hidden; }

    Constants shape() const
    {
        return { { "DIRS", s.dirs }, { "BATCH", key.batch }, { "HIDDEN", s.hidden }, { "SEQ", key.seq },
                 { "LAYOUT", s.layout } };
    }
    Constants transposed() const
    {
        uint32_t extra = s.cell->extraStatePlanes(s.lbr);
        return { { "NI", classesLength(s.hidden) }, { "B32", paddedBatch(key.batch) },
                 { "HT_OFFSET", static_cast<uint32_t>(stOff + (key.seq + 1 + extra) * plane()) } };
    }
    static Constants join(Constants a, const Constants& b)
    {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    }

    std::shared_ptr<Plan> run()
    {
        const uint32_t D = s.dirs, H = s.hidden, G = s.gates, batch = key.batch;
        ScratchSizes sizes = scratchSizes(s, key.seq, batch, batched);
        xw = scratch("the input projection scratch", in.xwScratch, sizes.xw, xwOff);
        st = scratch("the state scratch", in.stateScratch, sizes.state, stOff);
        plan->x = io("X", static_cast<uint64_t>(key.seq) * batch * s.input);
        if (key.hasLens) {
            plan->lens = std::make_shared<Buffer>(L.ctx, 4ull * batch, "device");
            plan->keep.push_back(plan->lens);
        }
        if (key.hasH0) {
            plan->h0 = io("initial_h", plane());
        }
        if (key.hasC0) {
            plan->c0 = io("initial_c", plane());
        }
        for (uint32_t i = 0; i < s.cell->outputCount; i++) {
            if (!key.outputs[i]) {
                continue;
            }
            uint64_t n = i == 0 ? static_cast<uint64_t>(key.seq) * plane() : plane();
            outs[i] = io(std::string(s.cell->outputs[i]), n);
            plan->readback[i] = std::make_shared<HostBuffer>(L.ctx, outs[i]->bytes, false);
            plan->keep.push_back(plan->readback[i]);
        }
        auto lensB = plan->lens ? plan->lens : L.dummy;

        // -- programs
        std::shared_ptr<Program> gemm;
        uint32_t tile;
        Constants gemmConstants = { { "N", G * H }, { "K", s.input }, { "SEQ", key.seq }, { "BATCH", batch },
                                    { "LAYOUT", s.layout }, { "XW_OFFSET", xwOff } };
        if (coopmat) {
            gemm = program("input_projection_coopmat", { plan->x, weight("W"), xw }, 2, gemmConstants);
            tile = COOPMAT_TILE;
            plan->projection = "input_projection_coopmat";
        } else {
            uint32_t tpt = projectionTpt(static_cast<uint64_t>(key.steps) * batch * G * H * D,
                                         settings.variants.largeProjection);
            gemmConstants.push_back({ "TPT", tpt });
            gemm = program("input_projection", { plan->x, weight("W"), xw }, 2, gemmConstants);
            tile = projectionTile(tpt);
            plan->projection = "input_projection";
        }
        Constants initConstants = join(shape(), { { "HAS_H0", key.hasH0 }, { "HAS_C0", key.hasC0 },
                                                  { "HAS_CELL", s.cell->hasInput("initial_c") },
                                                  { "STATE_OFFSET", stOff } });
        if (batched) {
            initConstants = join(join(initConstants, { { "TRANSPOSED", 1 } }), transposed());
        }
        auto init = program("state_init", { plan->h0 ? plan->h0 : L.dummy, plan->c0 ? plan->c0 : L.dummy, st }, 0,
                            initConstants);

        Constants common = {
            { "CELL", s.cell->code }, { "HAS_BIAS", s.hasBias }, { "HAS_PEEP", s.hasPeepholes },
            { "HAS_CLIP", s.clip.has_value() }, { "CLIP_BITS", s.clip ? floatBits(*s.clip) : 0u },
            { "INPUT_FORGET", s.inputForget }, { "LBR", s.lbr }, { "HAS_LENS", key.hasLens },
            { "HIDDEN", H }, { "BATCH", batch }, { "SEQ", key.seq }, { "DIRS", D },
            { "REVERSE0", s.reverse }, { "XW_OFFSET", xwOff }, { "STATE_OFFSET", stOff },
        };
        bool general = activationConstants(s, common);
        common.push_back({ "GENERAL", general });
        std::vector<std::pair<std::shared_ptr<Program>, std::array<uint64_t, 3>>> passes;
        plan->steps = batched ? std::string(batchedVariant(H, batch, s.float16, settings.variants).shader())
                              : std::string(stepKernelName(stepKernel));
        for (auto [pass, gatesInPass] : stepPasses(s.gruTwoPass(), G)) {
            if (stepKernel == StepKernel::Coopmat) {
                // 16 units x the pass's gates x 16 NBT batch rows a workgroup, on the matrix units.
                uint32_t nbt = coopmatBlocks(H, batch, D, settings.variants);
                std::array<uint64_t, 3> groups{ ceilDiv(H, 16), D, ceilDiv(batch, 16 * nbt) };
                limits.checkGroups("the step pass", groups);
                auto p = program("step_coopmat", { xw, weight("R"), weight("B"), weight("P"), lensB, st }, 1,
                                 join(common, { { "PASS", pass }, { "NBT", nbt } }));
                passes.push_back({ p, groups });
            } else if (batched) {
                // v4 (step_batched, a batch row a lane) or v5 (step_tiled, TB rows a thread):
                // the same layouts and constants, v5 with its rows per thread; the tile by
                // element type and batch (variants.hpp's table, or the settings' overrides).
                BatchedVariant v = batchedVariant(H, batch, s.float16, settings.variants);
                std::array<uint64_t, 3> groups{ ceilDiv(H, v.units()), D, ceilDiv(batch, 32) };
                limits.checkGroups("the step pass", groups);
                Constants tiling = { { "PASS", pass }, { "UPT", v.upt }, { "BY", v.by },
                                     { "PREFETCH", v.prefetch }, { "KSPLIT", v.ksplit } };
                if (v.rows > 1) {
                    tiling.push_back({ "TB", v.rows });
                }
                auto p = program(std::string(v.shader()),
                                 { xw, weight("RB"), weight("B"), weight("P"), lensB, st }, 1,
                                 join(join(common, tiling), transposed()));
                passes.push_back({ p, groups });
            } else {
                StepVariant v = stepVariant(batch, gatesInPass);
                std::array<uint64_t, 3> groups{ ceilDiv(H, v.units), D, ceilDiv(batch, v.nb) };
                limits.checkGroups("the step pass", groups);
                auto p = program("step", { xw, weight("R"), weight("B"), weight("P"), lensB, st }, 1,
                                 join(common, { { "PASS", pass }, { "NB", v.nb }, { "UNITS", v.units },
                                                { "ROWS", v.rows }, { "TY", v.ty() }, { "RPT", v.rpt } }));
                passes.push_back({ p, groups });
            }
        }

        // -- the sequence
        plan->timestamps = settings.timestamps && L.device.timestamps;
        auto seq = std::make_shared<Sequence>(L.ctx, plan->timestamps ? 4 : 0);
        // Write-after-read against the previous run's last reads of the input buffers.
        seq->barrier("compute", "transfer");
        std::vector<std::shared_ptr<Buffer>> inputs{ plan->x };
        for (const auto& b : { plan->lens, plan->h0, plan->c0 }) {
            if (b) {
                inputs.push_back(b);
            }
        }
        seq->upload(inputs);
        seq->barrier("transfer", "compute");
        if (plan->timestamps) {
            seq->timestamp(0);
        }
        uint32_t maxGroups = limits.maxGroups;
        // Row tiles in dispatches of at most maxGroups (the shader offsets by tile0).
        uint64_t rowTiles = ceilDiv(static_cast<uint64_t>(key.steps) * batch, tile);
        for (uint64_t tile0 = 0; tile0 < rowTiles; tile0 += maxGroups) {
            seq->dispatch(gemm, static_cast<uint32_t>(ceilDiv(G * H, tile)),
                          static_cast<uint32_t>(std::min<uint64_t>(maxGroups, rowTiles - tile0)), D,
                          { key.steps * batch, static_cast<uint32_t>(tile0) });
        }
        seq->dispatch(init, gridGroups(plane(), maxGroups), 1, 1, {});
        seq->barrier("compute", "compute");
        if (plan->timestamps) {
            seq->timestamp(1);
        }
        for (uint32_t step = 0; step < key.steps; step++) {
            for (auto& [prog, groups] : passes) {
                seq->dispatch(prog, static_cast<uint32_t>(groups[0]), static_cast<uint32_t>(groups[1]),
                              static_cast<uint32_t>(groups[2]), { step });
                seq->barrier("compute", "compute");
            }
        }
        if (plan->timestamps) {
            seq->timestamp(2);
        }
        for (uint32_t i = 0; i < 3; i++) {
            if (!outs[i]) {
                continue;
            }
            Constants c = join(shape(), { { "HAS_LENS", key.hasLens }, { "STATE_OFFSET", stOff } });
            if (i == 0) {
                uint64_t words = ceilDiv(static_cast<uint64_t>(key.seq) * plane() * s.item, 4);
                auto prog = program("output_sequence", { st, lensB, outs[i] }, 0,
                                    join(c, { { "REVERSE0", s.reverse } }));
                seq->dispatch(prog, gridGroups(words, maxGroups), 1, 1, {});
            } else {
                uint64_t words = ceilDiv(plane() * s.item, 4);
                auto prog = program("output_state", { st, lensB, outs[i] }, 1,
                                    join(c, { { "CELL_STATE", i == 2 }, { "ZERO_EMPTY", 1 } }));
                seq->dispatch(prog, gridGroups(words, maxGroups), 1, 1, { key.steps });
            }
        }
        if (plan->timestamps) {
            seq->timestamp(3);
        }
        // Results go to host-cached memory (fast to read), then the end-of-run marker that
        // eval() polls; its barriers make the copies visible to the host.
        seq->barrier("compute", "transfer");
        for (uint32_t i = 0; i < 3; i++) {
            if (outs[i]) {
                seq->copy(outs[i], plan->readback[i], 0, 0, outs[i]->bytes);
            }
        }
        seq->finish();
        plan->sequence = seq;
        return plan;
    }
};

} // namespace

std::shared_ptr<Plan>
LayerImpl::record(const PlanKey& key, const RunInputs& in, const PlanPool& pool)
{
    if (pool.stepKernel == StepKernel::Batched) {
        uploadBatchedR();
    }
    auto plan = Recording(*this, key, in, pool).run();
    g_plansRecorded++;
    return plan;
}

std::pair<std::shared_ptr<PlanPool>, std::shared_ptr<Plan>>
LayerImpl::acquire(const PlanKey& key)
{
    LayerSettings current = currentSettings();
    std::unique_lock<std::mutex> lock(cacheLock);
    while (true) {
        auto& pool = pools[key];
        if (!pool) {
            pool = std::make_shared<PlanPool>();
            // Caller regions may be one arena shared by this layer's shapes: one plan per key.
            pool->limit = key.callerScratch() ? 1 : current.maxConcurrent;
            pool->settings = current;
            pool->stepKernel = stepKernelFor(key.batch, current);
            evict(key);
        }
        lru.remove(key);
        lru.push_back(key);
        auto p = pools[key];
        if (!p->free.empty()) {
            auto plan = p->free.back();
            p->free.pop_back();
            return { p, plan };
        }
        if (p->count < p->limit) {
            p->count++;
            return { p, nullptr };
        }
        // wait_for, not wait: libstdc++ 12 versions condition_variable::wait GLIBCXX_3.4.30,
        // which would raise the wheel's manylinux tag from 2_34 to 2_35; the loop re-checks.
        cacheFree.wait_for(lock, std::chrono::milliseconds(50));
    }
}

void
LayerImpl::release(const PlanKey& key, const std::shared_ptr<PlanPool>& pool, std::shared_ptr<Plan> plan)
{
    std::lock_guard<std::mutex> lock(cacheLock);
    auto it = pools.find(key);
    if (!plan) {
        pool->count--;
    } else if (it != pools.end() && it->second == pool) {
        pool->free.push_back(std::move(plan));
    }
    // else: the key was evicted while this run held the plan; it is dropped here.
    evict(key);   // shapes kept beyond the cache while they were busy
    cacheFree.notify_all();
}

// Keep plans for at most the cache's capacity of shapes: drop the least recently used idle
// ones (never `keep`, the key being acquired; while runs hold plans of every other key the
// cache may hold more for a while). Called with cacheLock held.
void
LayerImpl::evict(const PlanKey& keep)
{
    uint32_t capacity;
    {
        std::lock_guard<std::mutex> lock(settingsLock);
        capacity = settings.planCache;
    }
    for (auto it = lru.begin(); it != lru.end() && pools.size() > capacity;) {
        auto p = pools.find(*it);
        if (!(*it == keep) && p != pools.end() && p->second->free.size() == p->second->count) {
            pools.erase(p);
            it = lru.erase(it);
        } else {
            ++it;
        }
    }
}

// ---------------------------------------------------------------- Layer

Layer::Layer(const NodeConfig& config, const Weights& weights, const LayerSettings& settings)
  : impl(std::make_unique<LayerImpl>(config, weights, settings))
{
    g_layersCreated++;
    g_layersAlive++;
}

void
checkLayerSpec(const NodeConfig& config, const Weights& weights)
{
    (void)makeSpec(config, weights);
}

Layer::~Layer()
{
    g_layersAlive--;
}

void
injectFault(const std::string& kind, double value)
{
    if (kind != "" && kind != "fail" && kind != "scale" && kind != "add") {
        throw std::invalid_argument("ortops: fault kind must be '', 'fail', 'scale' or 'add', got '" + kind + "'");
    }
    std::lock_guard<std::mutex> lock(g_faultLock);
    g_faultKind = kind;
    g_faultOn.store(!kind.empty());
    g_faultValue = value;
}

CoreCounters
coreCounters()
{
    CoalesceCounters c = coalesceCounters();
    return { g_layersCreated.load(), g_layersAlive.load(), g_plansRecorded.load(), g_runs.load(), c.runs, c.requests };
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
    const Spec& s = impl->spec;
    const char* want = s.float16 ? "the dtype of W (float16)" : "the dtype of W (float32)";
    requireType(s, "X", in.X, s.type(), want);
    int64_t seq, batch;
    if (s.layout == 0) {
        requireRank(s, "X", in.X, 3, "seq_length, batch_size, input_size");
        seq = in.X.shape[0];
        batch = in.X.shape[1];
        requireShape(s, "X", in.X, { seq, batch, s.input }, "seq_length, batch_size, input_size from W");
    } else {
        requireRank(s, "X", in.X, 3, "batch_size, seq_length, input_size (layout 1)");
        batch = in.X.shape[0];
        seq = in.X.shape[1];
        requireShape(s, "X", in.X, { batch, seq, s.input }, "batch_size, seq_length, input_size from W; layout 1");
    }
    if (seq > (int64_t(1) << 24) || batch > (int64_t(1) << 24)) {
        throw UnsupportedLayerError(s.op + ": unsupported input: seq_length " + std::to_string(seq) +
                                    " and batch_size " + std::to_string(batch) + " must be at most 2^24");
    }
    if (in.sequenceLens) {
        const HostTensor& l = *in.sequenceLens;
        requireType(s, "sequence_lens", l, ElementType::Int32, "dtype int32");
        requireShape(s, "sequence_lens", l, { batch }, "batch_size");
        const auto* v = static_cast<const int32_t*>(l.data);
        int64_t bad = 0, first = -1;
        for (int64_t b = 0; b < batch; b++) {
            if (v[b] < 0 || v[b] > seq) {
                bad++;
                first = first < 0 ? b : first;
            }
        }
        if (bad) {
            fail(s.op + ": sequence_lens[" + std::to_string(first) + "] = " + std::to_string(v[first]) +
                 " is outside [0, " + std::to_string(seq) + "] (batch row " + std::to_string(first) + "; " +
                 std::to_string(bad) + " row(s) out of range)");
        }
    }
    std::vector<int64_t> state = s.layout == 0 ? std::vector<int64_t>{ s.dirs, batch, s.hidden }
                                               : std::vector<int64_t>{ batch, s.dirs, s.hidden };
    std::string stateText = s.layout == 0 ? "num_directions, batch_size, hidden_size"
                                          : "batch_size, num_directions, hidden_size (layout 1)";
    if (in.initialC && !s.cell->hasInput("initial_c")) {
        fail(s.op + ": initial_c is only defined for LSTM");
    }
    for (auto [name, t] : { std::pair<const char*, const std::optional<HostTensor>*>{ "initial_h", &in.initialH },
                            { "initial_c", &in.initialC } }) {
        if (*t) {
            requireType(s, name, **t, s.type(), want);
            requireShape(s, name, **t, state, stateText);
        }
    }
    if (in.steps) {
        int64_t longest = seq;
        if (in.sequenceLens) {
            const auto* v = static_cast<const int32_t*>(in.sequenceLens->data);
            longest = 0;
            for (int64_t b = 0; b < batch; b++) {
                longest = std::max<int64_t>(longest, v[b]);
            }
        }
        if (*in.steps > seq || *in.steps < longest) {
            fail(s.op + ": max_length = " + std::to_string(*in.steps) + " must be in [" + std::to_string(longest) +
                 ", " + std::to_string(seq) + "] (the longest sequence length, the sequence length)");
        }
    }
    OutputShapes shapes;
    for (uint32_t i = 0; i < s.cell->outputCount; i++) {
        bool wanted = in.outputs ? (*in.outputs)[i] : impl->config.wants(s.cell->outputs[i]);
        if (!wanted) {
            continue;
        }
        if (i == 0) {
            shapes[i] = s.layout == 0 ? std::vector<int64_t>{ seq, s.dirs, batch, s.hidden }
                                      : std::vector<int64_t>{ batch, seq, s.dirs, s.hidden };
        } else {
            shapes[i] = state;
        }
    }
    return shapes;
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
    uint32_t rows, inFlight;
    bool timestamps;
    LayerSettings settings;
    {
        std::lock_guard<std::mutex> lock(L.settingsLock);
        settings = L.settings;
    }
    rows = settings.coalesceRows;
    inFlight = settings.coalesceInFlight;
    timestamps = settings.timestamps;
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
    if (rows <= 1 || timestamps || in.xwScratch || in.stateScratch || batch <= 0 || batch >= rows ||
        in.X.elements() == 0) {
        L.runPlan(in, shapes, out);
        return;
    }
    CoalesceRequest request{ &in, &shapes, &out, static_cast<uint32_t>(batch) };
    L.coalescer.run(request, BatchAxes::forLayout(s.layout), s.item, rows, inFlight,
                    [&L](const RunInputs& i, const OutputShapes& sh, const OutputPointers& o, const RunCopies* c) {
                        L.runPlan(i, sh, o, c);
                    });
}

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
                         [&L](const RunInputs& i, const OutputShapes& sh, const OutputPointers& o, const RunCopies* c) {
                        L.runPlan(i, sh, o, c);
                    });
}

void
LayerImpl::runPlan(const RunInputs& in, const OutputShapes& shapes, const OutputPointers& out, const RunCopies* copies)
{
    LayerImpl& L = *this;
    const Spec& s = L.spec;
    if (faultFails()) {
        throw InputError(s.op + ": failure injected by the test");
    }
    int64_t seq = s.layout == 0 ? in.X.shape[0] : in.X.shape[1];
    int64_t batch = s.layout == 0 ? in.X.shape[1] : in.X.shape[0];
    if (seq == 0 || batch == 0) {
        // Nothing runs: Y is empty or zeros; final states are the initial states or zeros.
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
                std::memcpy(out[i], (*initial)->data, n * s.item);
            } else {
                std::memset(out[i], 0, n * s.item);
            }
        }
        return;
    }
    PlanKey key;
    key.seq = static_cast<uint32_t>(seq);
    key.batch = static_cast<uint32_t>(batch);
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
    std::unique_lock<std::mutex> scratch(L.scratchLock, std::defer_lock);
    if (key.callerScratch()) {
        scratch.lock();
    }
    auto [pool, plan] = L.acquire(key);
    try {
        if (!plan) {
            plan = L.record(key, in, *pool);
        }
        if (copies) {
            plan->x->writePieces(copies->x);
            if (in.sequenceLens) {
                plan->lens->writePieces(copies->lens);
            }
            if (in.initialH) {
                plan->h0->writePieces(copies->h0);
            }
            if (in.initialC) {
                plan->c0->writePieces(copies->c0);
            }
        } else {
            plan->x->write(in.X.data, in.X.elements() * s.item, 0);
            if (in.sequenceLens) {
                plan->lens->write(in.sequenceLens->data, in.sequenceLens->elements() * 4, 0);
            }
            if (in.initialH) {
                plan->h0->write(in.initialH->data, in.initialH->elements() * s.item, 0);
            }
            if (in.initialC) {
                plan->c0->write(in.initialC->data, in.initialC->elements() * s.item, 0);
            }
        }
        plan->sequence->eval();
        g_runs++;
        if (plan->timestamps) {
            std::vector<double> t = plan->sequence->timestamps();
            GpuProfile p{ (t[3] - t[0]) * 1e-6, (t[1] - t[0]) * 1e-6, (t[2] - t[1]) * 1e-6, (t[3] - t[2]) * 1e-6 };
            std::lock_guard<std::mutex> lock(L.settingsLock);
            L.profile = p;
        }
        for (uint32_t i = 0; i < 3; i++) {
            if (!shapes[i] || !plan->readback[i]) {
                continue;
            }
            if (copies) {
                plan->readback[i]->readPieces(copies->outputs[i]);
                for (const Piece& p : copies->outputs[i]) {
                    applyFault(const_cast<void*>(p.host), p.bytes / s.item, s.float16);
                }
            } else if (out[i]) {
                plan->readback[i]->read(out[i], plan->readback[i]->bytes, 0);
                applyFault(out[i], plan->readback[i]->bytes / s.item, s.float16);
            }
        }
    } catch (...) {
        L.release(key, pool, plan);
        throw;
    }
    L.release(key, pool, plan);
}

LayerSettings
Layer::settings() const
{
    std::lock_guard<std::mutex> lock(impl->settingsLock);
    return impl->settings;
}

void
Layer::setSettings(const LayerSettings& s)
{
    uint32_t k = s.variants.batchedKsplit;
    if (k != BATCHED_TABLE && !validSplit(k)) {
        throw std::invalid_argument("ortops.variants.BATCHED_KSPLIT must be 1, 2, 4 or 8, got " + std::to_string(k));
    }
    for (uint32_t rows : { s.variants.batchedRowsFloat32, s.variants.batchedRowsFloat16 }) {
        if (rows != BATCHED_TABLE && !validSplit(rows)) {
            throw std::invalid_argument("ortops.variants.BATCHED_ROWS must be 1, 2, 4 or 8, got " +
                                        std::to_string(rows));
        }
    }
    uint32_t nbt = s.variants.coopmatBlocks;
    if (nbt != BATCHED_TABLE && nbt != 1 && nbt != 2 && nbt != 4) {
        throw std::invalid_argument("ortops.variants.COOPMAT_BLOCKS must be 1, 2 or 4, got " + std::to_string(nbt));
    }
    if (s.maxConcurrent < 1 || s.planCache < 1 || s.variants.maxGroups < 1) {
        throw std::invalid_argument("ortops: max_concurrent and the plan cache must be positive");
    }
    if (s.coalesceRows < 1 || s.coalesceInFlight < 1) {
        throw std::invalid_argument("ortops: coalesce_rows and coalesce_in_flight must be positive, got " +
                                    std::to_string(s.coalesceRows) + " and " + std::to_string(s.coalesceInFlight));
    }
    {
        std::lock_guard<std::mutex> lock(impl->settingsLock);
        impl->settings = s;
    }
    // Plans recorded under other settings go (the next run of each shape records anew): a
    // pool holds the settings its plans record, so busy pools go too (release drops the plans
    // of a pool no longer in the cache, and counts its runs down on the pool itself).
    std::lock_guard<std::mutex> lock(impl->cacheLock);
    impl->pools.clear();
    impl->lru.clear();
    impl->cacheFree.notify_all();
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
    std::lock_guard<std::mutex> lock(impl->cacheLock);
    std::vector<PlanPoolInfo> out;
    for (const PlanKey& k : impl->lru) {
        auto it = impl->pools.find(k);
        if (it == impl->pools.end()) {
            continue;
        }
        PlanPoolInfo info{ k.seq, k.batch, k.steps, k.hasLens, k.hasH0, k.hasC0, k.outputs, it->second->count, {}, {} };
        for (const auto& p : it->second->free) {
            info.freeProjections.push_back(p->projection);
            info.freeSteps.push_back(p->steps);
        }
        out.push_back(std::move(info));
    }
    return out;
}

std::vector<std::string>
Layer::weightNames() const
{
    std::lock_guard<std::mutex> lock(impl->batchedLock);
    std::vector<std::string> out;
    for (const auto& [name, buf] : impl->weights) {
        out.push_back(name);
    }
    return out;
}

std::vector<std::pair<std::string, uint64_t>>
Layer::weightBytes() const
{
    std::lock_guard<std::mutex> lock(impl->batchedLock);
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const auto& [name, buf] : impl->weights) {
        out.emplace_back(name, buf->bytes);
    }
    return out;
}

std::pair<uint64_t, uint64_t>
Layer::scratchSizes(uint32_t seq, uint32_t batch) const
{
    bool batched = impl->stepKernelFor(batch, settings()) == StepKernel::Batched;
    ScratchSizes s = ortops::scratchSizes(impl->spec, seq, batch, batched);
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
