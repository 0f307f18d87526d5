#version 450
#extension GL_GOOGLE_include_directive : require
// The position loops over a thread's tile and the tree must unroll so that the sums stay in
// registers.
#extension GL_EXT_control_flow_attributes : enable
// Pass 3, batched, with a register tile (v5): one time step of every direction and batch
// row. The default step kernel from batch 16 (BATCHED_FROM), with
// the tile the H200 measured fastest by element type and batch (BATCHED_TILES in
// src/core/rnn/variants.hpp); ortops.variants.BATCHED_ROWS = 1 runs step_batched.comp instead.
//
// Same sums as step.comp and step_batched.comp, bit for bit: each R row's product with h is 32
// class sums (class l: k = l, l + 32, ... in increasing order, from +0) combined by the fixed
// halving tree (16, 8, 4, 2, 1). As in step_batched.comp a thread walks the classes in the
// tree's own left-to-right order (class numbers with their five bits reversed) and joins each
// finished class sum to the tree at once (pending left subtrees, like carries in a binary
// counter); KSPLIT threads share a walk, each a whole subtree, and the subtree sums meet in
// the tree's top levels (left + right at every node).
//
// Why a tile: step_batched.comp gives a thread one batch row, so every position costs it one
// read of h (4 bytes) and one of R (16 bytes, an LSTM's four gates of a unit) for four
// multiply-adds, and on the H200 its rate is set by those loads at every size from batch 64.
// Here a thread holds TB batch rows x UPT units x the pass's gates: at each position one read
// of TB rows of h (16 bytes for TB = 4: the rows lie side by side in the transposed plane)
// and UPT reads of R feed TB x UPT x 4 multiply-adds (32 for 4 x 2 x 4, against 4). Each multiply-add is still its own sum's next term, so the order is unchanged.
//
// A workgroup: 32 batch rows (the padded transposed plane's tile) x BY groups of TB x UPT
// units x KSPLIT parts of the walk. In a warp, lane = bg + (32 / TB) * ug: bg picks TB
// consecutive batch rows, ug the unit group, so the lanes with one bg read the same h (one
// 128-byte row of the plane for the warp) and those with one ug the same R (broadcast).
// Every R value a workgroup needs is read by one warp and every h value by its BY warps
// (through L1), so staging R and h tiles in shared memory would cut no traffic; it would only
// add barriers inside the walk. What remains is the loads' latency, which PREFETCH (terms of
// several positions loaded at once) and the number of warps in flight hide.
//
// After the walk the sums go through shared memory twice: the parts meet there (in log2
// KSPLIT rounds that reuse KSPLIT / 2 slots, so a 32-sum tile split over 8 threads needs 16 KiB,
// Vulkan's guaranteed minimum), and the finished sums are spread over every thread of the
// workgroup for the cell updates (cell.glsl), one (unit, batch row) each: a thread updating
// its 32 cells in turn would wait on each one's loads (xw, biases, state) in series.
#define GENERAL_ACTIVATIONS
#include "common.glsl"
#include "cell.glsl"
#include "batched.glsl"   // RB's views and loadR

// 32 lanes (32 / TB batch-row groups x TB unit groups) x BY x KSPLIT parts of the class walk
layout(local_size_x = 32, local_size_y_id = 41, local_size_z_id = 46) in;

layout(constant_id = 40) const uint UPT = 1;       // units per thread
layout(constant_id = 41) const uint BY = 1;        // groups of TB x UPT units per workgroup
layout(constant_id = 42) const uint NI = 1;        // positions per class: ceil(HIDDEN / 32)
layout(constant_id = 43) const uint B32 = 32;      // batch rows of a transposed plane (x 32)
layout(constant_id = 44) const uint HT_OFFSET = 0; // first float of the transposed planes in S
layout(constant_id = 45) const uint PREFETCH = 1;  // positions whose terms are loaded at once
layout(constant_id = 46) const uint KSPLIT = 1;    // threads sharing one sum's class walk (1, 2, 4, 8)
layout(constant_id = 47) const uint TB = 4;        // batch rows per thread (2, 4 or 8; 1 works too)

// The transposed planes read TB rows at once (the state buffer's words, as uvec4 / uvec2).
layout(std430, binding = 5) readonly buffer StateBuf4 { uvec4 S4[]; };
layout(std430, binding = 5) readonly buffer StateBuf2 { uvec2 S2[]; };

const uint KP = 32u * NI;                          // positions per RB row
const uint SPAN = 32u / KSPLIT;                    // tree positions a thread walks
const uint SUBTREE = KSPLIT == 1u ? 5u : (KSPLIT == 2u ? 4u : (KSPLIT == 4u ? 3u : 2u));
const uint LB = 32u / TB;                          // lanes along the batch rows
const uint HQ = (TB + 3u) / 4u;                    // vec4s of h a position
const uint UW = BY * TB * UPT;                     // units per workgroup
const uint E = TB * UPT * 4u;                      // sums a thread holds (4 gates each)
// One slot: a subtree sum of every thread of one part, [unit group][e][lane]; the same size
// holds the workgroup's finished sums, [unit][gate][batch row].
const uint SLOT = BY * E * 32u;
shared float parts[(KSPLIT > 1u ? KSPLIT / 2u : 1u) * SLOT];

// Rows i .. i + 3 of a transposed plane, those of the thread's TB (i a multiple of TB from
// HT_OFFSET on, so the vector reads are aligned when HT_OFFSET is; else word by word).
vec4 loadH(uint i)
{
#if !EXACT
    if (TB >= 4u && HT_OFFSET % 4u == 0u) return uintBitsToFloat(S4[i >> 2u]);
    if (TB == 2u && HT_OFFSET % 2u == 0u) return vec4(uintBitsToFloat(S2[i >> 1u]), 0.0, 0.0);
#endif
    vec4 h = vec4(0.0);
    [[unroll]] for (uint j = 0u; j < 4u; j++)
        if (j < TB) h[j] = LOADF(S, i + j);
    return h;
}

// Class sums at tree position first + RPOS (class l = that position with its bits reversed),
// then their join: LEVEL pending left subtrees are added to the left of each, which becomes
// pending at LEVEL (as in step_batched.comp, for every sum of the tile). RPOS past SPAN does
// nothing. When HIDDEN is a multiple of 32 every class has NI positions, written so that the
// driver sees a constant trip count (it may unroll and overlap the loads); the value is the
// same as the general count's.
#define CLASS(RPOS, LEVEL) if (RPOS < SPAN) { \
    const uint POS = first + RPOS; \
    const uint l = bitfieldReverse(POS) >> 27u; \
    const uint n = HIDDEN % 32u == 0u ? NI : (l < HIDDEN ? (HIDDEN - 1u - l) / 32u + 1u : 0u); \
    float acc[TB][UPT][4]; \
    [[unroll]] for (uint j = 0u; j < TB; j++) \
        [[unroll]] for (uint t = 0u; t < UPT; t++) \
            [[unroll]] for (uint g = 0u; g < 4u; g++) acc[j][t][g] = 0.0; \
    for (uint i0 = 0u; i0 < n; i0 += PREFETCH) { \
        vec4 h[PREFETCH][HQ]; \
        vec4 w[PREFETCH][UPT]; \
        [[unroll]] for (uint q = 0u; q < PREFETCH; q++) { \
            uint p = POS * NI + min(i0 + q, n - 1u); \
            [[unroll]] for (uint c = 0u; c < HQ; c++) h[q][c] = loadH(hAt + p * B32 + 4u * c); \
            [[unroll]] for (uint t = 0u; t < UPT; t++) w[q][t] = loadR(rAt[t] + p * HIDDEN * GATES); \
        } \
        [[unroll]] for (uint q = 0u; q < PREFETCH; q++) \
            if (i0 + q < n) \
                [[unroll]] for (uint j = 0u; j < TB; j++) \
                    [[unroll]] for (uint t = 0u; t < UPT; t++) \
                        [[unroll]] for (uint g = 0u; g < 4u; g++) \
                            if (g < GATES_IN_PASS) \
                                acc[j][t][g] = ADD(acc[j][t][g], MUL(w[q][t][g], h[q][j >> 2u][j & 3u])); \
    } \
    [[unroll]] for (uint j = 0u; j < TB; j++) \
        [[unroll]] for (uint t = 0u; t < UPT; t++) \
            [[unroll]] for (uint g = 0u; g < 4u; g++) \
                if (g < GATES_IN_PASS) { \
                    float v = acc[j][t][g]; \
                    [[unroll]] for (uint lv = 0u; lv < LEVEL; lv++) v = ADD(pending[lv][j][t][g], v); \
                    pending[LEVEL][j][t][g] = v; \
                } \
}

void main()
{
    uint lane = gl_LocalInvocationID.x;
    uint y = gl_LocalInvocationID.y;
    uint z = gl_LocalInvocationID.z;
    uint d = gl_WorkGroupID.y;
    uint s = pc.step;
    uint b0 = gl_WorkGroupID.z * 32u;              // the workgroup's first batch row
    uint u0 = gl_WorkGroupID.x * UW;               // and first unit
    uint bg = lane % LB, ug = lane / LB;
    uint unit0 = (y * TB + ug) * UPT;              // the thread's first unit in the workgroup
    uint first = z * SPAN;                         // its first tree position

    // This pass multiplies plane s & 1 (h of step s) or, in a GRU's candidate pass, plane 2:
    // rows b0 + bg * TB + j of position 0.
    uint hAt = transposedIndex(HT_OFFSET, PASS == 2u ? 2u : (s & 1u), DIRS, d, NI, B32, 0u, b0 + bg * TB);
    uint rAt[UPT];
    [[unroll]] for (uint t = 0u; t < UPT; t++)     // units past the layer read the last, then drop
        rAt[t] = (d * KP * HIDDEN + min(u0 + unit0 + t, HIDDEN - 1u)) * GATES + FIRST_GATE;

    // pending[level][j][t][g]: the finished left subtree of 2^level classes, waiting for its right.
    float pending[6][TB][UPT][4];
    // The 32 classes, each with its tree position and the levels it completes (the trailing
    // one bits of the position), written out so that every index below is a constant.
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

    // This part's subtree sums (SUBTREE levels: pending[SUBTREE], a constant per pipeline).
    float sub[TB][UPT][4];
    [[unroll]] for (uint j = 0u; j < TB; j++)
        [[unroll]] for (uint t = 0u; t < UPT; t++)
            [[unroll]] for (uint g = 0u; g < 4u; g++)
                sub[j][t][g] = g >= GATES_IN_PASS ? 0.0
                             : (SUBTREE == 5u ? pending[5][j][t][g] : (SUBTREE == 4u ? pending[4][j][t][g]
                             : (SUBTREE == 3u ? pending[3][j][t][g] : pending[2][j][t][g])));

    // The tree's top levels over the parts, left + right at every node, one level a round: at
    // stride st the parts z = st mod 2 st hand their sums to z - st through slot z / (2 st),
    // which adds them on its right. 2 parts: 0 + 1; 4: (0 + 1) + (2 + 3); 8: ((0 + 1) + (2 + 3))
    // + ((4 + 5) + (6 + 7)), as step_batched.comp meets them.
    for (uint st = 1u; st < KSPLIT; st <<= 1u) {
        uint at = (z / (2u * st) * BY + y) * E * 32u + lane;
        if (z % (2u * st) == st)
            [[unroll]] for (uint j = 0u; j < TB; j++)
                [[unroll]] for (uint t = 0u; t < UPT; t++)
                    [[unroll]] for (uint g = 0u; g < 4u; g++)
                        if (g < GATES_IN_PASS) parts[at + ((j * UPT + t) * 4u + g) * 32u] = sub[j][t][g];
        barrier();
        if (z % (2u * st) == 0u)
            [[unroll]] for (uint j = 0u; j < TB; j++)
                [[unroll]] for (uint t = 0u; t < UPT; t++)
                    [[unroll]] for (uint g = 0u; g < 4u; g++)
                        if (g < GATES_IN_PASS)
                            sub[j][t][g] = ADD(sub[j][t][g], parts[at + ((j * UPT + t) * 4u + g) * 32u]);
        barrier();   // the slots are written again in the next round
    }

    // The finished sums, [unit][gate][batch row] of the workgroup, for every thread to take.
    if (z == 0u)
        [[unroll]] for (uint j = 0u; j < TB; j++)
            [[unroll]] for (uint t = 0u; t < UPT; t++)
                [[unroll]] for (uint g = 0u; g < 4u; g++)
                    if (g < GATES_IN_PASS) parts[((unit0 + t) * 4u + g) * 32u + bg * TB + j] = sub[j][t][g];
    barrier();

    // Cell updates, one (unit, batch row) a thread in turn (a warp: 32 rows of one unit), and
    // the value the next product takes into its transposed plane.
    uint plane = PASS == 1u ? 2u : ((s + 1u) & 1u);
    for (uint c = (z * BY + y) * 32u + lane; c < UW * 32u; c += BY * KSPLIT * 32u) {
        uint row = c & 31u, unit = c >> 5u;
        uint u = u0 + unit, b = b0 + row;
        vec4 rec = vec4(0.0);
        [[unroll]] for (uint g = 0u; g < 4u; g++)
            if (g < GATES_IN_PASS) rec[g] = parts[(unit * 4u + g) * 32u + row];
        float next = updateCell(d, u, b, s, rec);
        if (u < HIDDEN && b < BATCH)
            STOREF(S, transposedIndex(HT_OFFSET, plane, DIRS, d, NI, B32, u, b), next);
    }
}
