// makeSpec and checkInputs (spec.hpp): a layer's configuration and a run's inputs checked.

#include "rnn/spec.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "base/errors.hpp"

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

// ---------------------------------------------------------------- the spec

// The config's attributes (nothing checked against the weights yet).
Spec
specFromConfig(const NodeConfig& cfg)
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
    return s;
}

// The hidden size (the attribute's, else R's last dimension) and input size, with the note
// messages add when the hidden size came from R.
void
sizesFromWeights(Spec& s, const NodeAttrs& a, const Weights& w, std::string& source)
{
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
}

void
checkWeights(Spec& s, const NodeAttrs& a, const Weights& w)
{
    const char* want = s.float16 ? "dtype float16 (the node's)" : "dtype float32 (the node's)";
    std::string gt = gateText(*s.cell);
    requireType(s, "W", w.W, s.type(), want);
    requireType(s, "R", w.R, s.type(), want);
    requireRank(s, "W", w.W, 3, "num_directions, " + gt + ", input_size");
    requireRank(s, "R", w.R, 3, "num_directions, " + gt + ", hidden_size");
    std::string source;
    sizesFromWeights(s, a, w, source);
    int64_t D = s.dirs, G = s.gates, H = s.hidden;
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
}

void
resolveSpecActivations(Spec& s, const NodeAttrs& a)
{
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
}

// ---------------------------------------------------------------- a run's inputs

// X's (seq_length, batch_size) by the layout.
std::pair<int64_t, int64_t>
checkX(const Spec& s, const HostTensor& X, const char* want)
{
    requireType(s, "X", X, s.type(), want);
    int64_t seq, batch;
    if (s.layout == 0) {
        requireRank(s, "X", X, 3, "seq_length, batch_size, input_size");
        seq = X.shape[0];
        batch = X.shape[1];
        requireShape(s, "X", X, { seq, batch, s.input }, "seq_length, batch_size, input_size from W");
    } else {
        requireRank(s, "X", X, 3, "batch_size, seq_length, input_size (layout 1)");
        batch = X.shape[0];
        seq = X.shape[1];
        requireShape(s, "X", X, { batch, seq, s.input }, "batch_size, seq_length, input_size from W; layout 1");
    }
    if (seq > (int64_t(1) << 24) || batch > (int64_t(1) << 24)) {
        throw UnsupportedLayerError(s.op + ": unsupported input: seq_length " + std::to_string(seq) +
                                    " and batch_size " + std::to_string(batch) + " must be at most 2^24");
    }
    return { seq, batch };
}

void
checkLens(const Spec& s, const HostTensor& l, int64_t seq, int64_t batch)
{
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

void
checkSteps(const Spec& s, const RunInputs& in, int64_t seq, int64_t batch)
{
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

} // namespace

Spec
makeSpec(const NodeConfig& cfg, const Weights& w)
{
    Spec s = specFromConfig(cfg);
    checkWeights(s, cfg.attrs, w);
    resolveSpecActivations(s, cfg.attrs);
    return s;
}

OutputShapes
checkInputs(const Spec& s, const NodeConfig& config, const RunInputs& in)
{
    const char* want = s.float16 ? "the dtype of W (float16)" : "the dtype of W (float32)";
    auto [seq, batch] = checkX(s, in.X, want);
    if (in.sequenceLens) {
        checkLens(s, *in.sequenceLens, seq, batch);
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
        checkSteps(s, in, seq, batch);
    }
    OutputShapes shapes;
    for (uint32_t i = 0; i < s.cell->outputCount; i++) {
        bool wanted = in.outputs ? (*in.outputs)[i] : config.wants(s.cell->outputs[i]);
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

} // namespace ortops
