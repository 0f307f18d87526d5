#version 450
#extension GL_GOOGLE_include_directive : require
// The class walk is written out (CLASS below) so that the pending subtrees stay in registers.
#extension GL_EXT_control_flow_attributes : enable
// LANES: a lane's loads of h reach the other lanes by subgroupBroadcast.
#extension GL_KHR_shader_subgroup_ballot : require
// Pass 3 as one dispatch: every time step of a layer run (issue 32; docs/design.md, "Passes").
// A workgroup owns one direction and NB batch rows and walks all the steps, with a workgroup
// barrier between steps (two for a GRU with linear_before_reset = 0: the candidate's product
// needs r * h of every unit). No grid-wide barrier is needed, since no workgroup reads what
// another writes: the directions and batch rows are independent. The step kernels instead
// record a dispatch per step (per pass) with a host barrier after each; on lavapipe each such
// dispatch cost about a millisecond, and on a discrete GPU each step is a chain of dependent
// dispatches (docs/perf.md, "Kernel choices").
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
// there (hence the small-hidden rule for GPUs in src/core/rnn/variants.hpp, SEQUENCE_STEPS).
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
// With R_REGS, the device's subgroup size (lavapipe: 8 with AVX2), or 0. Each step, lane j of a
// subgroup loads the quads j, j + LANES, ... of the batch row's h and subgroupBroadcast hands
// each quad to every lane, where every lane loaded every quad: on lavapipe (Mesa 22.3) a
// shared-memory load inside the step loop is a loop over the 8 lanes that inserts each
// lane's words into a vector through the stack (a store-to-load stall per word), so the row's
// words cost LANES times fewer such inserts; a broadcast is an extract and a splat in
// registers. THREADS is then the hidden size rounded up to LANES, and every thread forms a
// product (threads past the hidden size that of the last unit, stored nowhere), so that
// every lane of a subgroup is active at each broadcast.
layout(constant_id = 44) const uint LANES = 0;
// With LANES, the units a thread owns (units t, t + THREADS, ...): each broadcast quad of h then
// feeds UPT units' multiply-adds, and a workgroup has UPT times fewer subgroups, each of which
// loads and broadcasts the whole row every step (on lavapipe a broadcast inside the step loop
// is itself a loop over the lanes, the cost that UPT divides).
layout(constant_id = 45) const uint UPT = 1;

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
// With LANES, UPT units' rows, [unit][gate][position].
const bool BROADCAST = R_REGS != 0u && LANES != 0u;
const uint UR = BROADCAST ? UPT : 1u;
float rr[R_REGS != 0u ? UR * GATES * KP : 1u];

// LANES: the lane's quads of the row being multiplied, hq[m] = the row's quad m * LANES + lane.
const uint HQ = BROADCAST ? ROW / (4u * LANES) : 1u;
uvec4 hq[HQ];

// Fills hq from the row at shared word `at` (a multiple of 4).
void loadRow(uint at)
{
    uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint m = 0u; m < HQ; m++) hq[m] = hs[(at >> 2u) + m * LANES + lane];
}

// The quad of h at word w of the row being multiplied (w a multiple of 4): from hs at hAt + w,
// or with LANES from the lane that loaded it.
uvec4 hQuad(uint hAt, uint w)
{
    if (BROADCAST) {
        uint quad = w >> 2u;
        return subgroupBroadcast(hq[quad / LANES], quad % LANES);
    }
    return hs[(hAt + w) >> 2u];
}

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

// The same gates of the thread's unit uu from rr at position p.
vec4 regGates(uint uu, uint p, uint first, uint count)
{
    vec4 r = vec4(0.0);
    [[unroll]] for (uint g = 0u; g < 4u; g++)
        if (g < count) r[g] = rr[(R_REGS != 0u ? uu * GATES + first + g : 0u) * KP + p];
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
            uvec4 h4 = hQuad(hAt, POS * NIP + q); \
            [[unroll]] for (uint c = 0u; c < 4u; c++) { \
                const uint i = q + c; \
                if (i < n) { \
                    vec4 w = R_REGS != 0u ? regGates(0u, POS * NI + i, first, count) \
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

// CLASS for the thread's UR units at once (LANES): each quad of h is broadcast once and feeds
// every unit's sums; each unit's sums are CLASS's, term for term.
#define CLASS_U(POS, LEVEL) { \
    const uint l = bitfieldReverse(POS) >> 27u; \
    const uint n = HIDDEN % 32u == 0u ? NI : (l < HIDDEN ? (HIDDEN - 1u - l) / 32u + 1u : 0u); \
    float acc[UR][4]; \
    [[unroll]] for (uint uu = 0u; uu < UR; uu++) \
        [[unroll]] for (uint g = 0u; g < 4u; g++) acc[uu][g] = 0.0; \
    [[unroll]] for (uint q = 0u; q < NIP; q += 4u) { \
        if (q < n) { \
            uvec4 h4 = hQuad(0u, POS * NIP + q); \
            [[unroll]] for (uint c = 0u; c < 4u; c++) { \
                const uint i = q + c; \
                if (i < n) { \
                    float h = HVAL(h4[c]); \
                    [[unroll]] for (uint uu = 0u; uu < UR; uu++) { \
                        vec4 w = regGates(uu, POS * NI + i, first, count); \
                        [[unroll]] for (uint g = 0u; g < 4u; g++) \
                            if (g < count) acc[uu][g] = ADD(acc[uu][g], MUL(w[g], h)); \
                    } \
                } \
            } \
        } \
    } \
    [[unroll]] for (uint uu = 0u; uu < UR; uu++) \
        [[unroll]] for (uint g = 0u; g < 4u; g++) \
            if (g < count) { \
                float v = acc[uu][g]; \
                [[unroll]] for (uint lv = 0u; lv < LEVEL; lv++) v = ADD(pending[uu][lv][g], v); \
                pending[uu][LEVEL][g] = v; \
            } \
}

// The tree's walk: class positions 0 .. 31, each joined at its level (the trailing ones of its
// position).
#define CLASS_WALK(C) \
    C(0u, 0u) C(1u, 1u) C(2u, 0u) C(3u, 2u) C(4u, 0u) C(5u, 1u) C(6u, 0u) C(7u, 3u) \
    C(8u, 0u) C(9u, 1u) C(10u, 0u) C(11u, 2u) C(12u, 0u) C(13u, 1u) C(14u, 0u) C(15u, 4u) \
    C(16u, 0u) C(17u, 1u) C(18u, 0u) C(19u, 2u) C(20u, 0u) C(21u, 1u) C(22u, 0u) C(23u, 3u) \
    C(24u, 0u) C(25u, 1u) C(26u, 0u) C(27u, 2u) C(28u, 0u) C(29u, 1u) C(30u, 0u) C(31u, 5u)

// The pass's gates of R (unit u of direction d) times the state at shared word hAt: pass 0
// every gate, pass 1 a GRU's z and r, pass 2 its candidate (gate 2).
vec4 product(uint pass, uint d, uint u, uint hAt)
{
    uint first = pass == 2u ? 2u : 0u;
    uint count = pass == 1u ? 2u : (pass == 2u ? 1u : GATES);
    uint rAt = (d * KP * HIDDEN + u) * GATES;
    float pending[6][4];
    CLASS_WALK(CLASS)
    vec4 rec = vec4(0.0);
    [[unroll]] for (uint g = 0u; g < 4u; g++)
        if (g < count) rec[g] = pending[5][g];
    return rec;
}

// product() for the thread's UR units (LANES; h from the lanes' hq).
void productUnits(uint pass, out vec4 rec[UR])
{
    uint first = pass == 2u ? 2u : 0u;
    uint count = pass == 1u ? 2u : (pass == 2u ? 1u : GATES);
    float pending[UR][6][4];
    CLASS_WALK(CLASS_U)
    [[unroll]] for (uint uu = 0u; uu < UR; uu++) {
        rec[uu] = vec4(0.0);
        [[unroll]] for (uint g = 0u; g < 4u; g++)
            if (g < count) rec[uu][g] = pending[uu][5][g];
    }
}

// One pass of step s over the thread's cells: the product with the state in plane `from`,
// the cell update, and what the next product takes into plane `to`.
void walkCells(uint pass, uint d, uint b0, uint s, uint from, uint to)
{
    if (BROADCAST) {
        // NB = 1, UPT units a thread; every thread active through the product (see LANES).
        loadRow(from * PLANE_WORDS);
        vec4 rec[UR];
        productUnits(pass, rec);
        [[unroll]] for (uint uu = 0u; uu < UR; uu++) {
            uint u = gl_LocalInvocationID.x + uu * THREADS;
            if (u < HIDDEN) {
                float next = updateCellIn(pass, d, u, b0, s, rec[uu]);
                putH(to * PLANE_WORDS + hPosition(u), floatBitsToUint(next));
            }
        }
        return;
    }
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
        [[unroll]] for (uint uu = 0u; uu < UR; uu++) {
            uint u = min(gl_LocalInvocationID.x + uu * THREADS, HIDDEN - 1u);
            [[dont_unroll]] for (uint p = 0u; p < KP; p++) {
                vec4 w = loadGates(((d * KP + p) * HIDDEN + u) * GATES, 0u, GATES);
                [[unroll]] for (uint g = 0u; g < GATES; g++) rr[(uu * GATES + g) * KP + p] = w[g];
            }
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
