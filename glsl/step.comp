#version 450
#extension GL_GOOGLE_include_directive : require
// Loops over RPT, NB and the 32 lanes must unroll so that acc[] and v[] stay in registers.
#extension GL_EXT_control_flow_attributes : enable
// Pass 3: one time step of every direction and every batch row (for a GRU with
// linear_before_reset = 0, the first or second half of the step, PASS 1 and 2).
//
// A workgroup owns UNITS hidden units of one direction and NB batch rows, and the R rows of
// the gates this pass needs (ROWS = gates * UNITS). Each R row is reduced by 32 lanes: lane l
// sums k = l, l + 32, ... in increasing order, then the 32 partial sums are combined by a
// fixed halving tree (16, 8, 4, 2, 1). The order is fixed by the shapes alone: no atomics,
// no subgroup operations, nothing that depends on scheduling, so a run gives the same bits as
// the last on one device and driver.
//
// A thread carries RPT rows of R through the product for NB batch rows. For small batches,
// RPT = 1: many threads, the shortest chain per step (the step is latency-bound). For larger
// batches, RPT = the pass's gates (all gates of one unit): each h value loaded then feeds RPT
// multiply-adds and each R value NB, instead of one load per multiply-add.
// The lanes' partial sums meet in shared memory once; then one thread per (row, batch row)
// runs that row's whole halving tree in registers (one barrier, every thread busy, instead of
// a barrier per tree level with half the lanes idle at each), and the gate threads read the
// sums after a second barrier. Which thread computes a partial sum or a tree does not change
// the order of the arithmetic.

// The hidden state of step s is read from state slot s and written to slot s + 1: no
// workgroup reads what another writes in the same pass, and the barrier the host records
// between passes orders the steps. Rows whose sequence has ended copy their state through,
// so slot MaxLength holds every row's final state.
//
// Cell, pass, batch tile, activation set and options are specialization constants, so each
// variant compiles to a kernel holding only its own arithmetic (a step's cost is mostly the
// kernel's start, and kernel size matters).
#define GENERAL_ACTIVATIONS
#include "common.glsl"

layout(local_size_x = 32, local_size_y_id = 41) in;   // 32 lanes x TY = ROWS / RPT

layout(constant_id = 0) const uint CELL = 0;       // 0 LSTM (i o f c), 1 GRU (z r h), 2 RNN
layout(constant_id = 1) const uint PASS = 0;       // 0 whole step; GRU lbr=0: 1 (z, r), 2 (h)
layout(constant_id = 2) const uint NB = 1;         // batch rows per workgroup (1 or 8)
layout(constant_id = 3) const uint UNITS = 2;      // hidden units per workgroup
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
layout(constant_id = 40) const uint ROWS = 8;      // gates of this pass * UNITS
layout(constant_id = 41) const uint TY = 8;        // threads per lane column = ROWS / RPT
layout(constant_id = 42) const uint RPT = 1;       // R rows per thread

layout(std430, binding = 0) readonly buffer XwBuf { uint Xw[]; };
layout(std430, binding = 1) readonly buffer RBuf { uint R[]; };
layout(std430, binding = 2) readonly buffer BBuf { uint Bias[]; };
layout(std430, binding = 3) readonly buffer PBuf { uint Peep[]; };
layout(std430, binding = 4) readonly buffer LensBuf { int Lens[]; };
layout(std430, binding = 5) buffer StateBuf { uint S[]; };

layout(push_constant) uniform Push { uint step; } pc;

// Partial sums of (row, batch row) pair p at [p * 33 + lane]: the stride of 33 words keeps
// both the lane-wise writes and the pair-wise reads free of shared-memory bank conflicts.
shared float partial[ROWS * NB * 33];
shared float sums[ROWS * NB];

const uint GATES = CELL == 0u ? 4u : (CELL == 1u ? 3u : 1u);
const uint GH = GATES * HIDDEN;
const uint PLANE = DIRS * BATCH * HIDDEN;          // one state slot
const uint C_BASE = STATE_OFFSET + (SEQ + 1u) * PLANE;
const uint G_BASE = C_BASE;    // GRU scratch (a GRU has no cell state): z, then r * h

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

// The reduced dot product of R row (gate, unit) with batch row j of the workgroup.
float rec(uint gateInPass, uint ui, uint j)
{
    return sums[(gateInPass * UNITS + ui) * NB + j];
}

// A gate's pre-activation ((xw + rec) + Wb) + Rb, gate g of the pass (so also the R row).
float pre(uint xw, uint g, uint ui, uint j, uint d, uint u)
{
    return ADD(ADD(ADD(LOADF(Xw, xw + g * HIDDEN), rec(g, ui, j)), bias(d, 0u, g, u)), bias(d, 1u, g, u));
}

void main()
{
    uint lane = gl_LocalInvocationID.x;
    uint row = gl_LocalInvocationID.y;
    uint d = gl_WorkGroupID.y;
    uint u0 = gl_WorkGroupID.x * UNITS;
    uint b0 = gl_WorkGroupID.z * NB;
    uint s = pc.step;
    bool backwards = (d == 1u) || (REVERSE0 != 0u);

    // ---- recurrent products: R rows (gate, unit) . h of NB batch rows
    float acc[RPT][NB];
    uint rbase[RPT];
    bool live[RPT];
    [[unroll]] for (uint r = 0u; r < RPT; r++) {
        uint rowR = row + r * TY;                 // row index = gateInPass * UNITS + unit
        uint gateInPass = rowR / UNITS;
        uint u = u0 + rowR - gateInPass * UNITS;
        uint gate = PASS == 2u ? 2u : gateInPass;
        live[r] = u < HIDDEN;
        rbase[r] = (d * GH + gate * HIDDEN + min(u, HIDDEN - 1u)) * HIDDEN;
        [[unroll]] for (uint j = 0u; j < NB; j++) acc[r][j] = 0.0;
    }
    // The candidate pass of a GRU multiplies r * h (from pass 1), not h.
    uint hbase = PASS == 2u ? G_BASE + PLANE + d * BATCH * HIDDEN
                            : STATE_OFFSET + s * PLANE + d * BATCH * HIDDEN;
    for (uint k = lane; k < HIDDEN; k += 32u) {
        float w[RPT];
        [[unroll]] for (uint r = 0u; r < RPT; r++) w[r] = LOADT(R, rbase[r] + k);
        [[unroll]] for (uint j = 0u; j < NB; j++) {
            uint b = min(b0 + j, BATCH - 1u);     // rows past the batch compute, then drop
            float h = LOADF(S, hbase + b * HIDDEN + k);
            [[unroll]] for (uint r = 0u; r < RPT; r++) acc[r][j] = ADD(acc[r][j], MUL(w[r], h));
        }
    }
    [[unroll]] for (uint r = 0u; r < RPT; r++)
        [[unroll]] for (uint j = 0u; j < NB; j++)
            partial[((row + r * TY) * NB + j) * 33u + lane] = live[r] ? acc[r][j] : 0.0;
    barrier();
    // One thread per (row, batch row) pair: the halving tree over its 32 lane sums.
    uint t = row * 32u + lane;
    if (t < ROWS * NB) {
        float v[32];
        [[unroll]] for (uint l = 0u; l < 32u; l++) v[l] = partial[t * 33u + l];
        [[unroll]] for (uint stride = 16u; stride > 0u; stride >>= 1u)
            [[unroll]] for (uint l = 0u; l < stride; l++) v[l] = ADD(v[l], v[l + stride]);
        sums[t] = v[0];
    }
    barrier();

    // ---- gate arithmetic: one thread per (unit, batch row)
    if (t >= UNITS * NB) return;
    uint ui = t % UNITS;
    uint j = t / UNITS;
    uint u = u0 + ui;
    uint b = b0 + j;
    if (u >= HIDDEN || b >= BATCH) return;

    int len = HAS_LENS != 0u ? Lens[b] : int(SEQ);
    uint hIdx = (d * BATCH + b) * HIDDEN + u;
    uint hIn = STATE_OFFSET + s * PLANE + hIdx;
    uint hOut = hIn + PLANE;
    float hPrev = LOADF(S, hIn);
    if (int(s) >= len) {
        // This row's sequence has ended: carry its state through (pass 1 of a GRU only
        // prepares scratch, and zeros keep the candidate's product finite).
        if (PASS == 1u) {
            STOREF(S, G_BASE + PLANE + hIdx, 0.0);
        } else {
            STOREF(S, hOut, hPrev);
        }
        return;
    }
    uint tIdx = backwards ? uint(len) - 1u - s : s;
    uint xw = XW_OFFSET + ((d * SEQ + tIdx) * BATCH + b) * GH + u;

    if (CELL == 0u) {
        // LSTM, gates i, o, f, c. pre = ((xw + rec) + Wb) + Rb, then peepholes (i and f with
        // the previous cell state, o with the new one), then clip, then the activation.
        uint cIdx = C_BASE + hIdx;
        float cPrev = LOADF(S, cIdx);
        float pi = pre(xw, 0u, ui, j, d, u);
        float po = pre(xw, 1u, ui, j, d, u);
        float pf = pre(xw, 2u, ui, j, d, u);
        float pc_ = pre(xw, 3u, ui, j, d, u);
        if (HAS_PEEP != 0u) {
            // P is [dirs, 3 * hidden] in the order i, o, f.
            pi = ADD(pi, MUL(LOADT(Peep, d * 3u * HIDDEN + u), cPrev));
            pf = ADD(pf, MUL(LOADT(Peep, d * 3u * HIDDEN + 2u * HIDDEN + u), cPrev));
        }
        float ig = act(d, 0u, clip(pi));
        float fg = INPUT_FORGET != 0u ? SUB(1.0, ig) : act(d, 0u, clip(pf));
        float cg = act(d, 1u, clip(pc_));
        float c = ADD(MUL(fg, cPrev), MUL(ig, cg));
        if (HAS_PEEP != 0u) {
            po = ADD(po, MUL(LOADT(Peep, d * 3u * HIDDEN + HIDDEN + u), c));
        }
        float og = act(d, 0u, clip(po));
        STOREF(S, cIdx, c);
        STOREF(S, hOut, MUL(og, act(d, 2u, c)));
    } else if (CELL == 1u) {
        // GRU, gates z, r, h.
        if (PASS == 2u) {
            float ph = ADD(ADD(ADD(LOADF(Xw, xw + 2u * HIDDEN), rec(0u, ui, j)), bias(d, 0u, 2u, u)), bias(d, 1u, 2u, u));
            float z = LOADF(S, G_BASE + hIdx);
            float ht = act(d, 1u, clip(ph));
            STOREF(S, hOut, ADD(MUL(SUB(1.0, z), ht), MUL(z, hPrev)));
            return;
        }
        float pz = pre(xw, 0u, ui, j, d, u);
        float pr = pre(xw, 1u, ui, j, d, u);
        float z = act(d, 0u, clip(pz));
        float r = act(d, 0u, clip(pr));
        if (PASS == 1u) {
            // linear_before_reset = 0: the candidate needs (r * h) . Rh of every unit, a
            // second pass after this one has written r * h for all of them.
            STOREF(S, G_BASE + hIdx, z);
            STOREF(S, G_BASE + PLANE + hIdx, MUL(r, hPrev));
            return;
        }
        // linear_before_reset = 1: pre_h = (xw_h + r * (rec_h + Rb_h)) + Wb_h.
        float ph = ADD(ADD(LOADF(Xw, xw + 2u * HIDDEN), MUL(r, ADD(rec(2u, ui, j), bias(d, 1u, 2u, u)))), bias(d, 0u, 2u, u));
        float ht = act(d, 1u, clip(ph));
        STOREF(S, hOut, ADD(MUL(SUB(1.0, z), ht), MUL(z, hPrev)));
    } else {
        float p = pre(xw, 0u, ui, j, d, u);
        STOREF(S, hOut, act(d, 0u, clip(p)));
    }
}
