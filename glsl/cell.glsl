// What every step kernel shares (step.comp: lanes split each dot product; step_batched.comp:
// a thread owns whole dot products): the cell's specialization constants, the bindings, and
// the cell update of one (direction, unit, batch row) from the recurrent sums of its gates.
// Both kernels compute the same sums in the same order and call the same update, so they give
// the same bits (tests/test_step_kernels.py).
//
// A kernel includes common.glsl (with GENERAL_ACTIVATIONS defined), then this file, and ends
// with updateCell(d, u, b, s, rec): rec[g] is the reduced product of R row (pass gate g,
// unit u) with batch row b's state.

layout(constant_id = 0) const uint CELL = 0;       // 0 LSTM (i o f c), 1 GRU (z r h), 2 RNN
layout(constant_id = 1) const uint PASS = 0;       // 0 whole step; GRU lbr=0: 1 (z, r), 2 (h)
layout(constant_id = 4) const uint GENERAL = 0;    // 0: the cell's default activations
layout(constant_id = 5) const uint HAS_BIAS = 0;
layout(constant_id = 6) const uint HAS_PEEP = 0;
layout(constant_id = 7) const uint HAS_CLIP = 0;
layout(constant_id = 8) const uint CLIP_BITS = 0;
layout(constant_id = 9) const uint INPUT_FORGET = 0;
layout(constant_id = 10) const uint LBR = 0;       // GRU linear_before_reset
layout(constant_id = 11) const uint HAS_LENS = 0;
layout(constant_id = 12) const uint HIDDEN = 1;
layout(constant_id = 13) const uint BATCH = 1;
layout(constant_id = 14) const uint SEQ = 1;
layout(constant_id = 15) const uint DIRS = 1;
layout(constant_id = 16) const uint REVERSE0 = 0;  // direction 0 runs backwards ("reverse")
layout(constant_id = 17) const uint XW_OFFSET = 0;
layout(constant_id = 18) const uint STATE_OFFSET = 0;
// Activations, per direction and slot (f, g, h): code, alpha bits, beta bits.
layout(constant_id = 19) const uint ACT0_F = 0;
layout(constant_id = 20) const uint ACT0_G = 1;
layout(constant_id = 21) const uint ACT0_H = 1;
layout(constant_id = 22) const uint ACT1_F = 0;
layout(constant_id = 23) const uint ACT1_G = 1;
layout(constant_id = 24) const uint ACT1_H = 1;
layout(constant_id = 25) const uint ALPHA0_F = 0;
layout(constant_id = 26) const uint ALPHA0_G = 0;
layout(constant_id = 27) const uint ALPHA0_H = 0;
layout(constant_id = 28) const uint ALPHA1_F = 0;
layout(constant_id = 29) const uint ALPHA1_G = 0;
layout(constant_id = 30) const uint ALPHA1_H = 0;
layout(constant_id = 31) const uint BETA0_F = 0;
layout(constant_id = 32) const uint BETA0_G = 0;
layout(constant_id = 33) const uint BETA0_H = 0;
layout(constant_id = 34) const uint BETA1_F = 0;
layout(constant_id = 35) const uint BETA1_G = 0;
layout(constant_id = 36) const uint BETA1_H = 0;

layout(std430, binding = 0) readonly buffer XwBuf { uint Xw[]; };
layout(std430, binding = 1) readonly buffer RBuf { uint R[]; };
layout(std430, binding = 2) readonly buffer BBuf { uint Bias[]; };
layout(std430, binding = 3) readonly buffer PBuf { uint Peep[]; };
layout(std430, binding = 4) readonly buffer LensBuf { int Lens[]; };
// A kernel whose workgroups read what other workgroups of the same dispatch wrote (the persistent
// kernel, glsl/step_persistent.comp) defines STATE_COHERENCE as devicecoherent; the others leave it
// empty, so their state accesses are unchanged.
#ifndef STATE_COHERENCE
#define STATE_COHERENCE
#endif
layout(std430, binding = 5) STATE_COHERENCE buffer StateBuf { uint S[]; };

layout(push_constant) uniform Push { uint step; } pc;

const uint GATES = CELL == 0u ? 4u : (CELL == 1u ? 3u : 1u);
const uint GATES_IN_PASS = PASS == 1u ? 2u : (PASS == 2u ? 1u : GATES);
const uint FIRST_GATE = PASS == 2u ? 2u : 0u;     // the cell gate of the pass's gate 0
const uint GH = GATES * HIDDEN;
const uint PLANE = DIRS * BATCH * HIDDEN;          // one state slot
const uint C_BASE = STATE_OFFSET + (SEQ + 1u) * PLANE;
const uint G_BASE = C_BASE;    // GRU scratch (a GRU has no cell state): z, then r * h

// Where the state a pass multiplies with R starts for direction d at step s: h of the step,
// or, in the candidate pass of a GRU (linear_before_reset = 0), r * h from pass 1.
uint stateBase(uint d, uint s)
{
    return PASS == 2u ? G_BASE + PLANE + d * BATCH * HIDDEN
                      : STATE_OFFSET + s * PLANE + d * BATCH * HIDDEN;
}

float act(uint d, uint slot, float x)
{
    if (GENERAL == 0u) {
        // ONNX defaults: LSTM (Sigmoid, Tanh, Tanh), GRU (Sigmoid, Tanh), RNN (Tanh).
        if (slot == 0u && CELL != 2u) return sigmoid_(x);
        return tanh_(x);
    }
    uint code = slot == 0u ? (d == 0u ? ACT0_F : ACT1_F) : (slot == 1u ? (d == 0u ? ACT0_G : ACT1_G) : (d == 0u ? ACT0_H : ACT1_H));
    uint a = slot == 0u ? (d == 0u ? ALPHA0_F : ALPHA1_F) : (slot == 1u ? (d == 0u ? ALPHA0_G : ALPHA1_G) : (d == 0u ? ALPHA0_H : ALPHA1_H));
    uint b = slot == 0u ? (d == 0u ? BETA0_F : BETA1_F) : (slot == 1u ? (d == 0u ? BETA0_G : BETA1_G) : (d == 0u ? BETA0_H : BETA1_H));
    return activate(code, x, uintBitsToFloat(a), uintBitsToFloat(b));
}

// clip clamps a gate's pre-activation to [-clip, clip]: +-Inf to +-clip, and a NaN passes
// (ONNX; ONNX Runtime CPU's LSTM and GRU with B give +clip instead, docs/special_values.md).
// The compares alone keep NaN only under SignedZeroInfNanPreserve (common.glsl); the bit test
// keeps it even where a compiler turns them into min/max.
float clip(float x)
{
    if (HAS_CLIP == 0u) return x;
    float c = uintBitsToFloat(CLIP_BITS);
    if (isnan_(x)) return x;
    return x > c ? c : (x < NEG(c) ? NEG(c) : x);
}

float bias(uint d, uint which, uint gate, uint u)
{
    // B is [dirs, 2 * gates * hidden]: the W biases, then the R biases.
    return HAS_BIAS != 0u ? LOADT(Bias, d * 2u * GH + which * GH + gate * HIDDEN + u) : 0.0;
}

// What a cell update reads besides its recurrent sums (cellLoad), so that a kernel can load it
// before the sums are ready (glsl/step_persistent.comp) and the update (cellUpdate) is the same
// code either way: the row's length, the previous h (and c of an LSTM, z of a GRU's candidate
// pass), and per gate of the pass (at its cell gate's index) the input projection xw and the W
// and R biases (0.0 without B, as the sums below always add them), and an LSTM's peepholes
// (i, o, f). Left 0 where the row's sequence has ended.
struct CellIn
{
    int len;
    float hPrev, cPrev, z;
    vec4 x, wb, rb;
    vec3 peep;
};

// Whether pass `pass` reads cell gate g's projection and biases.
bool gateRead(uint pass, uint g)
{
    return g < GATES && (pass == 2u ? g == 2u : (pass == 1u ? g < 2u : true));
}

CellIn cellLoad(uint pass, uint d, uint u, uint b, uint s)
{
    CellIn ci;
    ci.len = 0;
    ci.hPrev = 0.0;
    ci.cPrev = 0.0;
    ci.z = 0.0;
    ci.x = vec4(0.0);
    ci.wb = vec4(0.0);
    ci.rb = vec4(0.0);
    ci.peep = vec3(0.0);
    if (u >= HIDDEN || b >= BATCH) return ci;
    bool backwards = (d == 1u) || (REVERSE0 != 0u);
    ci.len = HAS_LENS != 0u ? Lens[b] : int(SEQ);
    uint hIdx = (d * BATCH + b) * HIDDEN + u;
    ci.hPrev = LOADF(S, STATE_OFFSET + s * PLANE + hIdx);
    if (int(s) >= ci.len) return ci;
    uint tIdx = backwards ? uint(ci.len) - 1u - s : s;
    uint xw = XW_OFFSET + ((d * SEQ + tIdx) * BATCH + b) * GH + u;
    [[unroll]] for (uint g = 0u; g < 4u; g++) {
        if (gateRead(pass, g)) {
            ci.x[g] = LOADF(Xw, xw + g * HIDDEN);
            ci.wb[g] = bias(d, 0u, g, u);
            ci.rb[g] = bias(d, 1u, g, u);
        }
    }
    if (CELL == 0u) {
        ci.cPrev = LOADF(S, C_BASE + hIdx);
        if (HAS_PEEP != 0u) {
            // P is [dirs, 3 * hidden] in the order i, o, f.
            ci.peep = vec3(LOADT(Peep, d * 3u * HIDDEN + u), LOADT(Peep, d * 3u * HIDDEN + HIDDEN + u),
                           LOADT(Peep, d * 3u * HIDDEN + 2u * HIDDEN + u));
        }
    } else if (CELL == 1u && pass == 2u) {
        ci.z = LOADF(S, G_BASE + hIdx);
    }
    return ci;
}

// A gate's pre-activation ((xw + rec) + Wb) + Rb, cell gate g, its recurrent sum r.
float pre(CellIn ci, uint g, float r)
{
    return ADD(ADD(ADD(ci.x[g], r), ci.wb[g]), ci.rb[g]);
}

// One (direction d, unit u, batch row b) at step s, from its gates' recurrent sums rec[g]
// (g: the pass's gates, in cell order) and what cellLoad read. Units and rows past the layer's
// do nothing. Returns what the next product multiplies with R for this unit and row: r * h
// after pass 1 of a GRU, else the new hidden state. `pass` is the PASS constant's meaning: the
// step kernels pass PASS (updateCell); glsl/step_sequence.comp runs both passes of a GRU step in
// one kernel. Callers pass a constant, so the compiler folds it as it folds PASS.
float cellUpdate(uint pass, uint d, uint u, uint b, uint s, vec4 rec, CellIn ci)
{
    if (u >= HIDDEN || b >= BATCH) return 0.0;
    uint hIdx = (d * BATCH + b) * HIDDEN + u;
    uint hOut = STATE_OFFSET + (s + 1u) * PLANE + hIdx;
    float hPrev = ci.hPrev;
    if (int(s) >= ci.len) {
        // This row's sequence has ended: carry its state through (pass 1 of a GRU only
        // prepares scratch, and zeros keep the candidate's product finite).
        if (pass == 1u) {
            STOREF(S, G_BASE + PLANE + hIdx, 0.0);
            return 0.0;
        }
        STOREF(S, hOut, hPrev);
        return hPrev;
    }

    if (CELL == 0u) {
        // LSTM, gates i, o, f, c. pre = ((xw + rec) + Wb) + Rb, then peepholes (i and f with
        // the previous cell state, o with the new one), then clip, then the activation.
        float cPrev = ci.cPrev;
        float pi = pre(ci, 0u, rec[0]);
        float po = pre(ci, 1u, rec[1]);
        float pf = pre(ci, 2u, rec[2]);
        float pc_ = pre(ci, 3u, rec[3]);
        if (HAS_PEEP != 0u) {
            pi = ADD(pi, MUL(ci.peep[0], cPrev));
            pf = ADD(pf, MUL(ci.peep[2], cPrev));
        }
        float ig = act(d, 0u, clip(pi));
        // 1 - ig cannot be a denormal (exact.glsl's 1 - x rule; a denormal ig, a denormal clip
        // value through Relu, leaves 1): no flush.
        float fg = INPUT_FORGET != 0u ? SUBN(1.0, ig) : act(d, 0u, clip(pf));
        float cg = act(d, 1u, clip(pc_));
        float c = ADD(MUL(fg, cPrev), MUL(ig, cg));
        if (HAS_PEEP != 0u) {
            po = ADD(po, MUL(ci.peep[1], c));
        }
        float og = act(d, 0u, clip(po));
        float h = MUL(og, act(d, 2u, c));
        STOREF(S, C_BASE + hIdx, c);
        STOREF(S, hOut, h);
        return h;
    } else if (CELL == 1u) {
        // GRU, gates z, r, h.
        if (pass == 2u) {
            float ph = pre(ci, 2u, rec[0]);
            float ht = act(d, 1u, clip(ph));
            float h = ADD(MUL(SUBN(1.0, ci.z), ht), MUL(ci.z, hPrev));   // SUBN: as 1 - ig above
            STOREF(S, hOut, h);
            return h;
        }
        float pz = pre(ci, 0u, rec[0]);
        float pr = pre(ci, 1u, rec[1]);
        float z = act(d, 0u, clip(pz));
        float r = act(d, 0u, clip(pr));
        if (pass == 1u) {
            // linear_before_reset = 0: the candidate needs (r * h) . Rh of every unit, a
            // second pass after this one has written r * h for all of them.
            float rh = MUL(r, hPrev);
            STOREF(S, G_BASE + hIdx, z);
            STOREF(S, G_BASE + PLANE + hIdx, rh);
            return rh;
        }
        // linear_before_reset = 1: pre_h = (xw_h + r * (rec_h + Rb_h)) + Wb_h.
        float ph = ADD(ADD(ci.x[2], MUL(r, ADD(rec[2], ci.rb[2]))), ci.wb[2]);
        float ht = act(d, 1u, clip(ph));
        float h = ADD(MUL(SUBN(1.0, z), ht), MUL(z, hPrev));   // SUBN: as 1 - ig above
        STOREF(S, hOut, h);
        return h;
    }
    float h = act(d, 0u, clip(pre(ci, 0u, rec[0])));
    STOREF(S, hOut, h);
    return h;
}

float updateCellIn(uint pass, uint d, uint u, uint b, uint s, vec4 rec)
{
    return cellUpdate(pass, d, u, b, s, rec, cellLoad(pass, d, u, b, s));
}

float updateCell(uint d, uint u, uint b, uint s, vec4 rec)
{
    return updateCellIn(PASS, d, u, b, s, rec);
}
