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
#include "cell.glsl"

layout(local_size_x = 32, local_size_y_id = 41) in;   // 32 lanes x TY = ROWS / RPT

layout(constant_id = 2) const uint NB = 1;         // batch rows per workgroup (1 to 8)
layout(constant_id = 3) const uint UNITS = 2;      // hidden units per workgroup
layout(constant_id = 40) const uint ROWS = 8;      // gates of this pass * UNITS
layout(constant_id = 41) const uint TY = 8;        // threads per lane column = ROWS / RPT
layout(constant_id = 42) const uint RPT = 1;       // R rows per thread

// Partial sums of (row, batch row) pair p at [p * 33 + lane]: the stride of 33 words keeps
// both the lane-wise writes and the pair-wise reads free of shared-memory bank conflicts.
shared float partial[ROWS * NB * 33];
shared float sums[ROWS * NB];

// The reduced dot product of R row (gate of the pass, unit ui) with batch row j of the
// workgroup (0 for gates the pass does not have).
float rec(uint gateInPass, uint ui, uint j)
{
    return gateInPass < GATES_IN_PASS ? sums[(gateInPass * UNITS + ui) * NB + j] : 0.0;
}

void main()
{
    uint lane = gl_LocalInvocationID.x;
    uint row = gl_LocalInvocationID.y;
    uint d = gl_WorkGroupID.y;
    uint u0 = gl_WorkGroupID.x * UNITS;
    uint b0 = gl_WorkGroupID.z * NB;
    uint s = pc.step;

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
    uint hbase = stateBase(d, s);
    for (uint k = lane; k < HIDDEN; k += 32u) {
        float w[RPT];
        [[unroll]] for (uint r = 0u; r < RPT; r++) w[r] = LOADR(R, rbase[r] + k);
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
    updateCell(d, u0 + ui, b0 + j, s,
               vec4(rec(0u, ui, j), rec(1u, ui, j), rec(2u, ui, j), rec(3u, ui, j)));
}
