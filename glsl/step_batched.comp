#version 450
#extension GL_GOOGLE_include_directive : require
// The position loop and the tree must unroll so that the partial sums stay in registers.
#extension GL_EXT_control_flow_attributes : enable
// Pass 3, batched: one time step of every direction and batch row, for batches where the step
// is bound by throughput rather than latency (ortops.variants.step_kernel says when).
//
// Same sums as step.comp, bit for bit: each R row's product with h is 32 class sums (class
// l: k = l, l + 32, ... in increasing order, from +0) combined by the fixed halving tree
// (16, 8, 4, 2, 1). step.comp gives a class to each of 32 lanes and meets the 32 partial sums
// in shared memory: at a batch of 64, tens of MB of partial sums a step.
// Here one thread computes whole sums: it walks the classes in the tree's own left-to-right
// order (class numbers with their five bits reversed: 0, 16, 8, 24, 4, ...), and each
// finished class sum joins the tree at once: a pending left subtree of the same size is added
// to it (left + right, as in step.comp), like carries in a binary counter. At most five
// subtrees are pending, so a sum needs six registers instead of 32, and only the parts of a
// walk split over several threads (KSPLIT, below) meet in shared memory.
//
// A warp's 32 lanes are 32 batch rows; a thread owns UPT units' gates of the pass (every gate
// a cell update needs), so it updates the cell from its registers (cell.glsl). The terms are
// read where this walk wants them:
//   R in its own layout, RB[dir][position][unit][gate] (ortops.plan.batched_r): position
//     p = t * NI + i holds k = l + 32 i of the class l at tree position t. Every lane needs
//     the same R values: one broadcast read (16 bytes for an LSTM's four gates) per unit.
//   h transposed, [plane][dir][position][batch row] in the state buffer (transposedIndex,
//     common.glsl): one coalesced read for the warp's 32 rows. Each step writes the next
//     step's plane (two alternate, so no workgroup reads what another writes in the pass); a
//     GRU's first pass writes r * h to a third plane, which its second pass reads.
// A first version that read h from the state rows and split units over lanes ran slower than
// step.comp: every lane loaded its own R values, so R crossed the cache once per batch row.
#define GENERAL_ACTIVATIONS
#include "common.glsl"
#include "cell.glsl"
#include "batched.glsl"   // RB's views and loadR

// 32 batch rows x BY groups of UPT units x KSPLIT parts of the class walk
layout(local_size_x = 32, local_size_y_id = 41, local_size_z_id = 46) in;

layout(constant_id = 40) const uint UPT = 1;       // units per thread
layout(constant_id = 41) const uint BY = 8;        // groups of UPT units per workgroup
layout(constant_id = 42) const uint NI = 1;        // positions per class: ceil(HIDDEN / 32)
layout(constant_id = 43) const uint B32 = 32;      // batch rows of a transposed plane (x 32)
layout(constant_id = 44) const uint HT_OFFSET = 0; // first float of the transposed planes in S
layout(constant_id = 45) const uint PREFETCH = 1;  // positions whose terms are loaded at once
// Threads sharing one sum's class walk (1, 2, 4 or 8): thread z walks the subtree of tree
// positions [z * SPAN, (z + 1) * SPAN), and the subtree sums meet through shared memory in the
// tree's top levels, so a thread's serial chain of loads is KSPLIT times shorter.
layout(constant_id = 46) const uint KSPLIT = 1;

const uint SPAN = 32u / KSPLIT;
const uint SUBTREE = KSPLIT == 1u ? 5u : (KSPLIT == 2u ? 4u : (KSPLIT == 4u ? 3u : 2u));
// The subtree sums of the parts z > 0, [z - 1][unit group][t][g][lane].
shared float parts[(KSPLIT - 1u) * BY * UPT * 4u * 32u + 1u];

const uint KP = 32u * NI;                          // positions per RB row

// Class sums at tree position first + RPOS (class l = that position with its bits reversed),
// then their join: LEVEL pending left subtrees are added to the left of each, which becomes
// pending at LEVEL. A thread walks SPAN = 32 / KSPLIT positions (a whole subtree), so RPOS
// past SPAN does nothing. The terms are read PREFETCH positions at a time, all loads first,
// so that several reads are in flight per thread (the sums still take them one by one).
#define CLASS(RPOS, LEVEL) if (RPOS < SPAN) { \
    const uint POS = first + RPOS; \
    const uint l = bitfieldReverse(POS) >> 27u; \
    const uint n = l < HIDDEN ? (HIDDEN - 1u - l) / 32u + 1u : 0u; \
    float acc[UPT][4]; \
    [[unroll]] for (uint t = 0u; t < UPT; t++) \
        [[unroll]] for (uint g = 0u; g < 4u; g++) acc[t][g] = 0.0; \
    for (uint i0 = 0u; i0 < n; i0 += PREFETCH) { \
        float h[PREFETCH]; \
        vec4 w[PREFETCH][UPT]; \
        [[unroll]] for (uint q = 0u; q < PREFETCH; q++) { \
            uint p = POS * NI + min(i0 + q, n - 1u); \
            h[q] = LOADF(S, hAt + p * B32); \
            [[unroll]] for (uint t = 0u; t < UPT; t++) w[q][t] = loadR(rAt[t] + p * HIDDEN * GATES); \
        } \
        [[unroll]] for (uint q = 0u; q < PREFETCH; q++) \
            if (i0 + q < n) \
                [[unroll]] for (uint t = 0u; t < UPT; t++) \
                    [[unroll]] for (uint g = 0u; g < 4u; g++) \
                        if (g < GATES_IN_PASS) acc[t][g] = ADD(acc[t][g], MUL(w[q][t][g], h[q])); \
    } \
    [[unroll]] for (uint t = 0u; t < UPT; t++) \
        [[unroll]] for (uint g = 0u; g < 4u; g++) { \
            float v = acc[t][g]; \
            [[unroll]] for (uint lv = 0u; lv < LEVEL; lv++) v = ADD(pending[lv][t][g], v); \
            pending[LEVEL][t][g] = v; \
        } \
}

void main()
{
    uint b = gl_WorkGroupID.z * 32u + gl_LocalInvocationID.x;
    uint d = gl_WorkGroupID.y;
    uint u0 = (gl_WorkGroupID.x * BY + gl_LocalInvocationID.y) * UPT;
    uint s = pc.step;
    uint z = gl_LocalInvocationID.z;
    uint first = z * SPAN;                          // this thread's first tree position

    // This pass multiplies plane s & 1 (h of step s) or, in a GRU's candidate pass, plane 2.
    uint hAt = transposedIndex(HT_OFFSET, PASS == 2u ? 2u : (s & 1u), DIRS, d, NI, B32, 0u, b);
    uint rAt[UPT];
    [[unroll]] for (uint t = 0u; t < UPT; t++)     // units past the layer read the last, then drop
        rAt[t] = (d * KP * HIDDEN + min(u0 + t, HIDDEN - 1u)) * GATES + FIRST_GATE;

    // pending[level][t][g]: the finished left subtree of 2^level classes, waiting for its right.
    float pending[6][UPT][4];
    // The 32 classes, each with its tree position and the levels it completes (the trailing
    // one bits of the position), written out so that every index below is a constant: a loop
    // the compiler did not unroll would move pending[] to local memory.
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
    float sub[UPT][4];
    [[unroll]] for (uint t = 0u; t < UPT; t++)
        [[unroll]] for (uint g = 0u; g < 4u; g++)
            sub[t][g] = SUBTREE == 5u ? pending[5][t][g] : (SUBTREE == 4u ? pending[4][t][g]
                      : (SUBTREE == 3u ? pending[3][t][g] : pending[2][t][g]));
    if (KSPLIT > 1u) {
        uint y = gl_LocalInvocationID.y, lane = gl_LocalInvocationID.x;
        if (z > 0u)
            [[unroll]] for (uint t = 0u; t < UPT; t++)
                [[unroll]] for (uint g = 0u; g < 4u; g++)
                    parts[((((z - 1u) * BY + y) * UPT + t) * 4u + g) * 32u + lane] = sub[t][g];
        barrier();
        if (z > 0u) return;
        // The tree's top levels over the parts, left + right at every node: 2 parts (0 + 1),
        // 4 ((0 + 1) + (2 + 3)), 8 (((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7))).
        [[unroll]] for (uint t = 0u; t < UPT; t++)
            [[unroll]] for (uint g = 0u; g < 4u; g++) {
                float v[8];
                v[0] = sub[t][g];
                [[unroll]] for (uint q = 1u; q < 8u; q++)
                    v[q] = q < KSPLIT ? parts[((((q - 1u) * BY + y) * UPT + t) * 4u + g) * 32u + lane] : 0.0;
                [[unroll]] for (uint stride = 1u; stride < 8u; stride <<= 1u)
                    [[unroll]] for (uint q = 0u; q < 8u; q += 2u * stride)
                        if (stride < KSPLIT) v[q] = ADD(v[q], v[q + stride]);
                sub[t][g] = v[0];
            }
    }

    // Cell updates, and the value the next product takes into its transposed plane.
    uint plane = PASS == 1u ? 2u : ((s + 1u) & 1u);
    [[unroll]] for (uint t = 0u; t < UPT; t++) {
        uint u = u0 + t;
        float next = updateCell(d, u, b, s, vec4(sub[t][0], sub[t][1], sub[t][2], sub[t][3]));
        if (u < HIDDEN && b < BATCH)
            STOREF(S, transposedIndex(HT_OFFSET, plane, DIRS, d, NI, B32, u, b), next);
    }
}
