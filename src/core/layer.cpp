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
#include "devices.hpp"
#include "memory.hpp"
#include "program.hpp"
#include "sequence.hpp"
#include "shaders.hpp"
#include "specialization.hpp"
#include "variants.hpp"

#include <algorithm>
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

const char*
typeName(ElementType t)
{
    switch (t) {
        case ElementType::Float32:
            return "float32";
        case ElementType::Float16:
            return "float16";
        default:
            return "int32";
    }
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
    std::string mode;

    bool gruTwoPass() const { return op == "GRU" && !lbr; }
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
        fail(s.op + ": " + name + " must have " + wantText + ", got " + typeName(t.type));
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
    s.float16 = cfg.dtype == "float16";
    s.item = s.float16 ? 2 : 4;
    s.gates = s.cell->gates;
    const NodeAttrs& a = cfg.attrs;
    s.dirs = a.directions();
    s.reverse = a.direction == "reverse";
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
    bool general = false;
    for (const auto& dir : s.activations) {
        for (uint32_t k = 0; k < dir.size(); k++) {
            auto code = activationCode(s.cell->defaultActivations[k]);
            general = general || !code || dir[k].code != *code;
        }
    }
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
// (glsl/input_projection_coopmat.comp) where ORTOPS_COOPMAT=1 and the device can run it; the
// kernel measured slower than the portable one on the H200, so it is opt-in.
constexpr uint32_t COOPMAT_TILE = 64;
constexpr uint32_t COOPMAT_SHARED_BYTES = 2 * COOPMAT_TILE * 40 * 2 + COOPMAT_TILE * 68 * 4;

bool
useCoopmat(const Spec& s, const DeviceDescription& d, const Context& ctx)
{
    const char* env = std::getenv("ORTOPS_COOPMAT");
    if (!env || std::string(env) != "1" || s.mode != "fast" || !s.float16) {
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

// ---------------------------------------------------------------- plans

struct PlanKey
{
    uint32_t seq = 0, batch = 0;
    bool hasLens = false, hasH0 = false, hasC0 = false;
    bool operator<(const PlanKey& o) const
    {
        return std::tie(seq, batch, hasLens, hasH0, hasC0) < std::tie(o.seq, o.batch, o.hasLens, o.hasH0, o.hasC0);
    }
    bool operator==(const PlanKey& o) const { return !(*this < o) && !(o < *this); }
};

struct Plan
{
    std::shared_ptr<Sequence> sequence;
    std::shared_ptr<Buffer> x, lens, h0, c0;
    std::array<std::shared_ptr<HostBuffer>, 3> readback;
    std::vector<std::shared_ptr<void>> keep;   // buffers and programs the sequence refers to
};

// The plans of one key: each serves one run at a time; a second concurrent run of the same
// shape gets a second plan, built on first need, up to `limit`; beyond that it waits.
struct PlanPool
{
    uint32_t limit;
    uint32_t count = 0;
    std::vector<std::shared_ptr<Plan>> free;
};

constexpr uint32_t PLAN_CACHE = 8;       // shapes whose plans a layer keeps
constexpr uint32_t MAX_CONCURRENT = 8;   // runs of one shape in flight at once

} // namespace

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
    Limits limits;
    std::map<std::string, std::shared_ptr<Buffer>> weights;
    std::vector<uint8_t> hostR;   // R kept until the batched kernel's layout is uploaded
    std::mutex batchedLock;
    std::shared_ptr<Buffer> dummy;

    std::mutex cacheLock;
    std::condition_variable cacheFree;
    std::list<PlanKey> lru;   // least recently used first
    std::map<PlanKey, std::shared_ptr<PlanPool>> pools;

    LayerImpl(const NodeConfig& cfg, const Weights& w);

    std::shared_ptr<Buffer> upload(const std::map<std::string, std::pair<const void*, uint64_t>>& arrays);
    void uploadBatchedR();
    std::shared_ptr<Plan> record(const PlanKey& key);
    std::pair<std::shared_ptr<PlanPool>, std::shared_ptr<Plan>> acquire(const PlanKey& key);
    void release(const PlanKey& key, const std::shared_ptr<PlanPool>& pool, std::shared_ptr<Plan> plan);
    void evict(const PlanKey& keep);
};

LayerImpl::LayerImpl(const NodeConfig& cfg, const Weights& w)
  : config(cfg)
  , spec(makeSpec(cfg, w))
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
    VariantSettings vs = variantSettings();
    limits = Limits{ spec.op, device.name, device.maxStorageBufferRange, device.maxWorkgroupCount, vs.maxGroups };
    std::map<std::string, std::pair<const void*, uint64_t>> arrays;
    auto add = [&](const char* name, const HostTensor& t) {
        arrays[name] = { t.data, static_cast<uint64_t>(t.elements()) * spec.item };
    };
    add("W", w.W);
    add("R", w.R);
    if (w.B) {
        add("B", *w.B);
    }
    if (w.P) {
        add("P", *w.P);
    }
    upload(arrays);
    const auto* r = static_cast<const uint8_t*>(w.R.data);
    hostR.assign(r, r + w.R.elements() * spec.item);
    dummy = std::make_shared<Buffer>(ctx, 4, "storage");
}

// Weights go to device-only memory: staged, then copied by a compute pass (Kompute's
// device-only tensors are storage buffers, not transfer destinations).
std::shared_ptr<Buffer>
LayerImpl::upload(const std::map<std::string, std::pair<const void*, uint64_t>>& arrays)
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
    const std::string& code = spirv("copy_words", false, "deterministic");
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

// R [dirs, gates * hidden, hidden] in the batched step kernel's layout
// RB[dir][position][unit][gate] (glsl/step_batched.comp): position p = t * NI + i holds
// k = l + 32 i of the class l at tree position t (l = t with its five bits reversed), so a
// thread reads its sums' terms in order; positions past the hidden size hold 0.
void
LayerImpl::uploadBatchedR()
{
    std::lock_guard<std::mutex> lock(batchedLock);
    if (weights.count("RB")) {
        return;
    }
    const uint32_t D = spec.dirs, G = spec.gates, H = spec.hidden, NI = classesLength(H), item = spec.item;
    std::vector<uint8_t> rb(static_cast<size_t>(D) * 32 * NI * H * G * item, 0);
    for (uint32_t d = 0; d < D; d++) {
        for (uint32_t t = 0; t < 32; t++) {
            uint32_t l = 0;
            for (int b = 0; b < 5; b++) {
                l |= ((t >> b) & 1u) << (4 - b);
            }
            for (uint32_t i = 0; i < NI; i++) {
                uint32_t k = l + 32 * i;
                if (k >= H) {
                    continue;
                }
                size_t position = static_cast<size_t>(t) * NI + i;
                for (uint32_t u = 0; u < H; u++) {
                    for (uint32_t g = 0; g < G; g++) {
                        size_t src = ((static_cast<size_t>(d) * G + g) * H + u) * H + k;
                        size_t dst = ((static_cast<size_t>(d) * 32 * NI + position) * H + u) * G + g;
                        std::memcpy(&rb[dst * item], &hostR[src * item], item);
                    }
                }
            }
        }
    }
    std::map<std::string, std::pair<const void*, uint64_t>> arrays{ { "RB", { rb.data(), rb.size() } } };
    upload(arrays);
    hostR.clear();
    hostR.shrink_to_fit();
}

// ---------------------------------------------------------------- recording a plan

namespace {

struct Recording
{
    LayerImpl& L;
    const Spec& s;
    PlanKey key;
    VariantSettings vs;
    std::shared_ptr<Plan> plan = std::make_shared<Plan>();
    std::shared_ptr<Buffer> xw, st;
    std::array<std::shared_ptr<Buffer>, 3> outs;
    bool batched;
    bool coopmat;

    Recording(LayerImpl& layer, const PlanKey& k)
      : L(layer)
      , s(layer.spec)
      , key(k)
      , vs(variantSettings())
    {
        batched = stepKernel(key.batch, vs) == "step_batched";
        coopmat = useCoopmat(s, L.device, *L.ctx);
    }

    std::shared_ptr<Buffer> storage(const std::string& what, uint64_t nbytes)
    {
        L.limits.checkBinding(what, nbytes);
        auto b = std::make_shared<Buffer>(L.ctx, nbytes, "storage");
        plan->keep.push_back(b);
        return b;
    }
    std::shared_ptr<Buffer> io(const std::string& name, uint64_t elements)
    {
        uint64_t nbytes = elements * s.item;
        L.limits.checkBinding(name, nbytes);
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
    uint64_t xwBytes() const { return 4ull * s.dirs * key.seq * key.batch * s.gates * s.hidden; }
    uint64_t transposedFloats() const
    {
        return batched ? static_cast<uint64_t>(transposedPlanes(s.gruTwoPass())) * s.dirs * 32 *
                           classesLength(s.hidden) * paddedBatch(key.batch)
                       : 0;
    }
    uint64_t stateBytes() const
    {
        uint64_t extra = s.cell->extraStatePlanes(s.lbr) * plane();
        return 4 * ((key.seq + 1) * plane() + extra + transposedFloats());
    }

    Constants shape() const
    {
        return { { "DIRS", s.dirs }, { "BATCH", key.batch }, { "HIDDEN", s.hidden }, { "SEQ", key.seq },
                 { "LAYOUT", s.layout } };
    }
    Constants transposed() const
    {
        uint32_t extra = s.cell->extraStatePlanes(s.lbr);
        return { { "NI", classesLength(s.hidden) }, { "B32", paddedBatch(key.batch) },
                 { "HT_OFFSET", static_cast<uint32_t>((key.seq + 1 + extra) * plane()) } };
    }
    static Constants join(Constants a, const Constants& b)
    {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    }

    std::shared_ptr<Plan> run()
    {
        const uint32_t D = s.dirs, H = s.hidden, G = s.gates, batch = key.batch;
        xw = storage("the input projection scratch", xwBytes());
        st = storage("the state scratch", stateBytes());
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
            if (!L.config.wants(s.cell->outputs[i])) {
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
                                    { "LAYOUT", s.layout }, { "XW_OFFSET", 0 } };
        if (coopmat) {
            gemm = program("input_projection_coopmat", { plan->x, weight("W"), xw }, 2, gemmConstants);
            tile = COOPMAT_TILE;
        } else {
            uint32_t tpt = projectionTpt(static_cast<uint64_t>(key.seq) * batch * G * H * D, vs.largeProjection);
            gemmConstants.push_back({ "TPT", tpt });
            gemm = program("input_projection", { plan->x, weight("W"), xw }, 2, gemmConstants);
            tile = projectionTile(tpt);
        }
        Constants initConstants = join(shape(), { { "HAS_H0", key.hasH0 }, { "HAS_C0", key.hasC0 },
                                                  { "HAS_CELL", s.cell->hasInput("initial_c") },
                                                  { "STATE_OFFSET", 0 } });
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
            { "REVERSE0", s.reverse }, { "XW_OFFSET", 0 }, { "STATE_OFFSET", 0 },
        };
        bool general = activationConstants(s, common);
        common.push_back({ "GENERAL", general });
        std::vector<std::pair<std::shared_ptr<Program>, std::array<uint64_t, 3>>> passes;
        for (auto [pass, gatesInPass] : stepPasses(s.gruTwoPass(), G)) {
            if (batched) {
                BatchedVariant v = batchedVariant(H, s.float16, vs);
                std::array<uint64_t, 3> groups{ ceilDiv(H, v.units()), D, ceilDiv(batch, 32) };
                L.limits.checkGroups("the step pass", groups);
                auto p = program("step_batched", { xw, weight("RB"), weight("B"), weight("P"), lensB, st }, 1,
                                 join(join(common, { { "PASS", pass }, { "UPT", v.upt }, { "BY", v.by },
                                                     { "PREFETCH", v.prefetch }, { "KSPLIT", v.ksplit } }),
                                      transposed()));
                passes.push_back({ p, groups });
            } else {
                StepVariant v = stepVariant(batch, gatesInPass);
                std::array<uint64_t, 3> groups{ ceilDiv(H, v.units), D, ceilDiv(batch, v.nb) };
                L.limits.checkGroups("the step pass", groups);
                auto p = program("step", { xw, weight("R"), weight("B"), weight("P"), lensB, st }, 1,
                                 join(common, { { "PASS", pass }, { "NB", v.nb }, { "UNITS", v.units },
                                                { "ROWS", v.rows }, { "TY", v.ty() }, { "RPT", v.rpt } }));
                passes.push_back({ p, groups });
            }
        }

        // -- the sequence
        auto seq = std::make_shared<Sequence>(L.ctx, 0);
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
        uint32_t maxGroups = L.limits.maxGroups;
        uint64_t rowTiles = ceilDiv(static_cast<uint64_t>(key.seq) * batch, tile);
        for (uint64_t tile0 = 0; tile0 < rowTiles; tile0 += maxGroups) {
            seq->dispatch(gemm, static_cast<uint32_t>(ceilDiv(G * H, tile)),
                          static_cast<uint32_t>(std::min<uint64_t>(maxGroups, rowTiles - tile0)), D,
                          { key.seq * batch, static_cast<uint32_t>(tile0) });
        }
        seq->dispatch(init, gridGroups(plane(), maxGroups), 1, 1, {});
        seq->barrier("compute", "compute");
        for (uint32_t step = 0; step < key.seq; step++) {
            for (auto& [prog, groups] : passes) {
                seq->dispatch(prog, static_cast<uint32_t>(groups[0]), static_cast<uint32_t>(groups[1]),
                              static_cast<uint32_t>(groups[2]), { step });
                seq->barrier("compute", "compute");
            }
        }
        for (uint32_t i = 0; i < 3; i++) {
            if (!outs[i]) {
                continue;
            }
            Constants c = join(shape(), { { "HAS_LENS", key.hasLens }, { "STATE_OFFSET", 0 } });
            if (i == 0) {
                uint64_t words = ceilDiv(static_cast<uint64_t>(key.seq) * plane() * s.item, 4);
                auto prog = program("output_sequence", { st, lensB, outs[i] }, 0,
                                    join(c, { { "REVERSE0", s.reverse } }));
                seq->dispatch(prog, gridGroups(words, maxGroups), 1, 1, {});
            } else {
                uint64_t words = ceilDiv(plane() * s.item, 4);
                auto prog = program("output_state", { st, lensB, outs[i] }, 1,
                                    join(c, { { "CELL_STATE", i == 2 }, { "ZERO_EMPTY", 1 } }));
                seq->dispatch(prog, gridGroups(words, maxGroups), 1, 1, { key.seq });
            }
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
LayerImpl::record(const PlanKey& key)
{
    if (stepKernel(key.batch, variantSettings()) == "step_batched") {
        uploadBatchedR();
    }
    return Recording(*this, key).run();
}

std::pair<std::shared_ptr<PlanPool>, std::shared_ptr<Plan>>
LayerImpl::acquire(const PlanKey& key)
{
    std::unique_lock<std::mutex> lock(cacheLock);
    while (true) {
        auto& pool = pools[key];
        if (!pool) {
            pool = std::make_shared<PlanPool>();
            pool->limit = MAX_CONCURRENT;
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
        cacheFree.wait(lock);
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
    evict(key);
    cacheFree.notify_all();
}

// Keep plans for at most PLAN_CACHE shapes: drop the least recently used idle ones (never
// `keep`). Called with the lock held.
void
LayerImpl::evict(const PlanKey& keep)
{
    for (auto it = lru.begin(); it != lru.end() && pools.size() > PLAN_CACHE;) {
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

Layer::Layer(const NodeConfig& config, const Weights& weights)
  : impl(std::make_unique<LayerImpl>(config, weights))
{
}

Layer::~Layer() = default;

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
    OutputShapes shapes;
    for (uint32_t i = 0; i < s.cell->outputCount; i++) {
        if (!impl->config.wants(s.cell->outputs[i])) {
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
    LayerImpl& L = *impl;
    const Spec& s = L.spec;
    OutputShapes shapes = outputShapes(in);
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
    key.hasLens = in.sequenceLens.has_value();
    key.hasH0 = in.initialH.has_value();
    key.hasC0 = in.initialC.has_value();
    auto [pool, plan] = L.acquire(key);
    try {
        if (!plan) {
            plan = L.record(key);
        }
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
        plan->sequence->eval();
        for (uint32_t i = 0; i < 3; i++) {
            if (shapes[i] && out[i] && plan->readback[i]) {
                plan->readback[i]->read(out[i], plan->readback[i]->bytes, 0);
            }
        }
    } catch (...) {
        L.release(key, pool, plan);
        throw;
    }
    L.release(key, pool, plan);
}

} // namespace ortops
