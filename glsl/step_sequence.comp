#version 450
#extension GL_GOOGLE_include_directive : require
// The class walk is written out (CLASS below) so that the pending subtrees stay in registers.
#extension GL_EXT_control_flow_attributes : enable
// Pass 3 as one dispatch: every time step of a layer run (issue 32; docs/design.md, "Passes").
// A workgroup owns one direction and NB batch rows and walks all the steps, with a workgroup
// barrier between steps (two for a GRU with linear_before_reset = 0: the candidate's product
// needs r * h of every unit). No grid-wide barrier is needed, since no workgroup reads what
// another writes: the directions and batch rows are independent. The step kernels instead
// record a dispatch per step (per pass) with a host barrier after each; on lavapipe each such
// dispatch cost about a millisecond, and on a discrete GPU each step is a chain of dependent
// dispatches (docs/perf.md, "Whole-sequence kernel").
//
// Same sums as the step kernels, bit for bit: each R row's product with h is 32 class sums
// (class l: k = l, l + 32, ... in increasing order, from +0) joined by the fixed halving tree
// (16, 8, 4, 2, 1). As in glsl/step_batched.comp a thread walks the classes in the tree's own
// left-to-right order (class numbers with their five bits reversed) and joins each finished
// class sum at once (pending left subtrees, like carries in a binary counter), and R is read
// in that order from the batched layout RB (glsl/batched.glsl: [dir][position][unit][gate]).
// The cell update is cell.glsl's, called with the same sums.
//
// A thread owns whole cells (unit u, batch row j of the block): cell c = u + HIDDEN * j for
// c = thread, thread + THREADS, ... It forms all of the pass's gates of its cell and updates
// the cell, so no barrier separates the product from the update; the same thread owns the
// same cells at every step, so the state it reads back from the state buffer (h of the last
// step, the cell state, a GRU's z) is its own write. What other threads need, the new h (or
// r * h), goes to shared memory: h of step s in plane s & 1, so one barrier a step suffices
// (step s + 1 writes the plane step s read, after the barrier), r * h in plane 2. The state
// slots in the state buffer are still written for every step, for the output passes.
//
// Why this split: a thread per cell needs no shared-memory reduction and no barrier inside a
// step, and its loads of h are the same for every thread of a batch row (NB = 1 makes them
// uniform, which lavapipe turns into one scalar load for 8 lanes). The R it reads, of one
// direction, is the same for every step: on lavapipe it stays in the CPU's caches; on a GPU,
// where one workgroup runs on one compute unit, it is read from that unit's cache when it fits
// there (hence the small-hidden rule for GPUs in src/core/variants.hpp, SEQUENCE_STEPS).
#define GENERAL_ACTIVATIONS
#include "common.glsl"
#include "cell.glsl"

layout(local_size_x_id = 40) in;

layout(constant_id = 40) const uint THREADS = 64;  // invocations per workgroup
layout(constant_id = 41) const uint NB = 1;        // batch rows per workgroup
layout(constant_id = 42) const uint NI = 1;        // positions per class: ceil(HIDDEN / 32)
// 1: a thread per unit (NB = 1, THREADS = HIDDEN) holds its unit's rows of R in a private
// array for the whole run (CPU devices: see R_REGS below); 0: R is read from RB every step.
layout(constant_id = 43) const uint R_REGS = 0;

// RB as 16-byte reads: an LSTM's four gates of a unit at a position (float32 words, and exact
// mode's float32 copy in both precisions) or 8-byte reads of four halves.
layout(std430, binding = 1) readonly buffer RBuf4 { uvec4 R4[]; };
layout(std430, binding = 1) readonly buffer RBuf2 { uvec2 R2[]; };

const uint KP = 32u * NI;                          // positions per RB row
const bool TWO_PASS = CELL == 1u && LBR == 0u;
// h of step s in plane s & 1, r * h (GRU, linear_before_reset = 0) in plane 2, as float32
// bits in the walk's order: a batch row's unit k at position bitrev5(k % 32) * NIP + k / 32,
// so that a class's terms lie side by side and are read four at a time (one load where there
// were four; on lavapipe each load is a loop over the lanes). NIP: NI rounded up to 4.
const uint NIP = (NI + 3u) & ~3u;
const uint ROW = 32u * NIP;                        // words of a batch row
const uint PLANE_WORDS = NB * ROW;
shared uvec4 hs[(TWO_PASS ? 3u : 2u) * PLANE_WORDS / 4u];

// A state value as the step kernels read it from the state buffer (LOADF: exact mode flushes
// denormals).
#if EXACT
#define HVAL(bits) ftz_(uintBitsToFloat(bits))
#else
#define HVAL(bits) uintBitsToFloat(bits)
#endif

// Where unit k of a batch row sits in its row of hs.
uint hPosition(uint k)
{
    return (bitfieldReverse(k & 31u) >> 27u) * NIP + (k >> 5u);
}

// One word of hs, written with a constant component: a dynamic one may be compiled as a
// read-modify-write of the whole uvec4, which would race with the threads writing its other
// words in the same step.
void putH(uint word, uint bits)
{
    uint i = word >> 2u;
    switch (word & 3u) {
        case 0u: hs[i].x = bits; break;
        case 1u: hs[i].y = bits; break;
        case 2u: hs[i].z = bits; break;
        default: hs[i].w = bits; break;
    }
}

// R_REGS: the thread's unit's rows of R by position, [gate][position] (KP positions a gate).
// On lavapipe (Mesa 22.3) every storage-buffer or shared-memory load is a loop over the 8
// lanes with a branch and a bounds check per lane and component, several instructions a
// multiply-add, while a private array indexed by constants only (the loops below unroll) lives
// in LLVM registers or in vector spill slots, one 8-wide load per 8 multiply-adds. R is loaded
// once per run instead of once per step. Not for GPUs: a thread holds gates x KP floats.
float rr[R_REGS != 0u ? GATES * KP : 1u];

// Gates `first` .. first + count - 1 of a unit at RB element index i (i at gate 0 of the unit).
vec4 loadGates(uint i, uint first, uint count)
{
    if (GATES == 4u) {
#if FLOAT16 && !EXACT
        uvec2 w = R2[i >> 2u];
        return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
#else
        return uintBitsToFloat(R4[i >> 2u]);
#endif
    }
    vec4 r = vec4(0.0);
    [[unroll]] for (uint g = 0u; g < 4u; g++)
        if (g < count) r[g] = LOADR(R, i + first + g);
    return r;
}

// The same gates from rr at position p.
vec4 regGates(uint p, uint first, uint count)
{
    vec4 r = vec4(0.0);
    [[unroll]] for (uint g = 0u; g < 4u; g++)
        if (g < count) r[g] = rr[(R_REGS != 0u ? first + g : 0u) * KP + p];
    return r;
}

// Class sums at tree position POS (class l = POS with its bits reversed), then their join:
// LEVEL pending left subtrees are added to the left of each, which becomes pending at LEVEL.
#define CLASS(POS, LEVEL) { \
    const uint l = bitfieldReverse(POS) >> 27u; \
    const uint n = HIDDEN % 32u == 0u ? NI : (l < HIDDEN ? (HIDDEN - 1u - l) / 32u + 1u : 0u); \
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0); \
    [[unroll]] for (uint q = 0u; q < NIP; q += 4u) { \
        if (q < n) { \
            uvec4 h4 = hs[(hAt + POS * NIP + q) >> 2u]; \
            [[unroll]] for (uint c = 0u; c < 4u; c++) { \
                const uint i = q + c; \
                if (i < n) { \
                    vec4 w = R_REGS != 0u ? regGates(POS * NI + i, first, count) \
                                          : loadGates(rAt + (POS * NI + i) * HIDDEN * GATES, first, count); \
                    float h = HVAL(h4[c]); \
                    [[unroll]] for (uint g = 0u; g < 4u; g++) \
                        if (g < count) acc[g] = ADD(acc[g], MUL(w[g], h)); \
                } \
            } \
        } \
    } \
    [[unroll]] for (uint g = 0u; g < 4u; g++) \
        if (g < count) { \
            float v = acc[g]; \
            [[unroll]] for (uint lv = 0u; lv < LEVEL; lv++) v = ADD(pending[lv][g], v); \
            pending[LEVEL][g] = v; \
        } \
}

// The pass's gates of R (unit u of direction d) times the state at shared word hAt: pass 0
// every gate, pass 1 a GRU's z and r, pass 2 its candidate (gate 2).
vec4 product(uint pass, uint d, uint u, uint hAt)
{
    uint first = pass == 2u ? 2u : 0u;
    uint count = pass == 1u ? 2u : (pass == 2u ? 1u : GATES);
    uint rAt = (d * KP * HIDDEN + u) * GATES;
    float pending[6][4];
    CLASS(0u, 0u)
    CLASS(1u, 1u)
    CLASS(2u, 0u)
    CLASS(3u, 2u)
    CLASS(4u, 0u)
    CLASS(5u, 1u)
    CLASS(6u, 0u)
    CLASS(7u, 3u)
    CLASS(8u, 0u)
    CLASS(9u, 1u)
    CLASS(10u, 0u)
    CLASS(11u, 2u)
    CLASS(12u, 0u)
    CLASS(13u, 1u)
    CLASS(14u, 0u)
    CLASS(15u, 4u)
    CLASS(16u, 0u)
    CLASS(17u, 1u)
    CLASS(18u, 0u)
    CLASS(19u, 2u)
    CLASS(20u, 0u)
    CLASS(21u, 1u)
    CLASS(22u, 0u)
    CLASS(23u, 3u)
    CLASS(24u, 0u)
    CLASS(25u, 1u)
    CLASS(26u, 0u)
    CLASS(27u, 2u)
    CLASS(28u, 0u)
    CLASS(29u, 1u)
    CLASS(30u, 0u)
    CLASS(31u, 5u)
    vec4 rec = vec4(0.0);
    [[unroll]] for (uint g = 0u; g < 4u; g++)
        if (g < count) rec[g] = pending[5][g];
    return rec;
}

// One pass of step s over the thread's cells: the product with the state in plane `from`,
// the cell update, and what the next product takes into plane `to`.
void walkCells(uint pass, uint d, uint b0, uint s, uint from, uint to)
{
    for (uint c = gl_LocalInvocationID.x; c < NB * HIDDEN; c += THREADS) {
        uint u = c % HIDDEN, j = c / HIDDEN;
        // NB = 1: j is 0 for every thread, so the h reads are uniform (constant-folded here).
        uint row = NB == 1u ? 0u : j * ROW;
        vec4 rec = product(pass, d, u, from * PLANE_WORDS + row);
        float next = updateCellIn(pass, d, u, b0 + j, s, rec);   // 0 for rows past the batch
        putH(to * PLANE_WORDS + row + hPosition(u), floatBitsToUint(next));
    }
}

void main()
{
    uint d = gl_WorkGroupID.y;
    uint b0 = gl_WorkGroupID.x * NB;
    uint steps = pc.step;   // cell.glsl's push constant: here the number of steps to walk
    if (R_REGS != 0u) {
        // The unit's rows, read as step_batched.comp reads them (positions past the hidden size
        // hold 0 in RB and are never used).
        uint u = min(gl_LocalInvocationID.x, HIDDEN - 1u);
        [[dont_unroll]] for (uint p = 0u; p < KP; p++) {
            vec4 w = loadGates(((d * KP + p) * HIDDEN + u) * GATES, 0u, GATES);
            [[unroll]] for (uint g = 0u; g < GATES; g++) rr[g * KP + p] = w[g];
        }
    }
    // h of step 0 (state slot 0, from state_init) into plane 0.
    for (uint c = gl_LocalInvocationID.x; c < NB * HIDDEN; c += THREADS) {
        uint u = c % HIDDEN, j = c / HIDDEN, b = b0 + j;
        putH(j * ROW + hPosition(u), b < BATCH ? S[STATE_OFFSET + (d * BATCH + b) * HIDDEN + u] : 0u);
    }
    barrier();
    for (uint s = 0u; s < steps; s++) {
        uint cur = s & 1u;
        if (TWO_PASS) {
            walkCells(1u, d, b0, s, cur, 2u);
            barrier();
            walkCells(2u, d, b0, s, 2u, cur ^ 1u);
        } else {
            walkCells(0u, d, b0, s, cur, cur ^ 1u);
        }
        barrier();
    }
}
