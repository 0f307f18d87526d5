#version 450
#extension GL_GOOGLE_include_directive : require
// The input loop unrolls where W's row is held in a private array (indexed by constants only).
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_ballot : require
// Pass 1 for CPU implementations of Vulkan (lavapipe; issue 32): the input projection
//   Xw[d][t][b][n] = sum_k X[t][b][k] * W[d][n][k]        (n = gate * hidden + unit)
// with the same sums as glsl/input_projection.comp: one float32 accumulator an output, summed
// in increasing k from +0, MUL(x, w) then ADD (that kernel's zero padding past K adds +0 to a
// sum that cannot be -0, so it changes no bit). So the bits are the tiled kernel's.
//
// Why another kernel: lavapipe (Mesa 22.3, LLVM JIT) runs 8 invocations as the 8 lanes of one
// vector, and compiles every shared-memory or storage-buffer load inside a loop or a branch
// as a loop over the lanes with a branch and a bounds check per lane and component (a load
// with the same address in every lane is one broadcast load only outside all control flow),
// while multiplies and adds are 8 lanes an instruction. The tiled kernel stages both operands
// through shared memory and pays that per-lane loop at every read. Here:
// - an invocation owns one column n of one direction (neighbouring lanes: neighbouring n) and
//   walks every Xw row (time step, batch row), MR rows at a time, so each W value it loads
//   feeds MR multiply-adds;
// - X's values are the same for every lane: lane j loads quad j of a chunk of 4 x LANES k of
//   each row (one per-lane load where each lane would load them all) and subgroupBroadcast
//   hands each value to every lane (an extract and a splat), so X costs LANES times fewer
//   per-lane loads than a lane loading its own copy.
// On lavapipe several times faster than the tiled kernel, the same bits (docs/perf.md, "Kernel
// choices"). W_REGS (W's row in a private array, loaded once, the k loop unrolled) is kept for
// measurements only: lavapipe compiles it for minutes (src/core/rnn/cpu_projection.cpp).
// The workgroups split the columns (THREADS a workgroup, x) and the directions (z).
#include "common.glsl"

layout(local_size_x_id = 7) in;

layout(constant_id = 0) const uint N = 1;       // gates * hidden
layout(constant_id = 1) const uint K = 1;       // input size
layout(constant_id = 2) const uint SEQ = 1;
layout(constant_id = 3) const uint BATCH = 1;
layout(constant_id = 4) const uint LAYOUT = 0;  // 1: X is [batch, seq, input]
layout(constant_id = 5) const uint XW_OFFSET = 0; // in floats, inside the Xw binding
layout(constant_id = 6) const uint MR = 4;      // Xw rows a walk over the input (sums in flight)
layout(constant_id = 7) const uint THREADS = 64;  // columns a workgroup
layout(constant_id = 8) const uint W_REGS = 1;  // 1: W's row in a private array, the k loop unrolled
layout(constant_id = 9) const uint LANES = 8;   // the device's subgroup size (lavapipe: 8 with AVX2)
layout(constant_id = 10) const uint NC = 1;     // columns an invocation (1 with W_REGS)

layout(std430, binding = 0) readonly buffer XBuf { uint X[]; };
layout(std430, binding = 0) readonly buffer XBuf4 { uvec4 X4[]; };
layout(std430, binding = 0) readonly buffer XBuf2 { uvec2 X2[]; };
layout(std430, binding = 1) readonly buffer WBuf { uint W[]; };
layout(std430, binding = 1) readonly buffer WBuf4 { uvec4 W4[]; };
layout(std430, binding = 1) readonly buffer WBuf2 { uvec2 W2[]; };
layout(std430, binding = 2) writeonly buffer XwBuf { uint Xw[]; };

// The tiled kernel's push constants; tile0 is unused (one dispatch covers every row).
layout(push_constant) uniform Push { uint rows; uint tile0; } pc;

const bool WIDE = K % 4u == 0u;     // rows of X and W start at multiples of 4 elements
const uint KQ = (K + 3u) / 4u;      // quads of k
const uint CHUNK = 4u * LANES;      // k a chunk: a quad a lane
const uint KC = (K + CHUNK - 1u) / CHUNK;

float wr[W_REGS != 0u ? 4u * KQ : 1u];

uint xRow(uint m)
{
    // m = t * BATCH + b is the row of Xw; X's own row order depends on the layout.
    if (LAYOUT == 0u) {
        return m;
    }
    uint t = m / BATCH;
    uint b = m - t * BATCH;
    return b * SEQ + t;
}

// Element j of a group of four read at once (as the tiled kernel reads it).
float element(uvec4 words, uint j)
{
#if FLOAT16
    uint w = words[j >> 1u];
#if EXACT
    return half_to_float_((w >> (16u * (j & 1u))) & 0xFFFFu);
#else
    return unpackHalf2x16(w)[j & 1u];
#endif
#else
#if EXACT
    return ftz_(uintBitsToFloat(words[j]));
#else
    return uintBitsToFloat(words[j]);
#endif
#endif
}

// Elements i .. i+3 of X (WIDE: one load; else each clamped to the row's last, which the
// callers never add). No branch around the loads: a uniform load inside one is per lane.
vec4 quadX(uint row, uint k)
{
    uint i = row * K + k;
    vec4 v;
    if (WIDE) {
#if FLOAT16
        uvec4 w = uvec4(X2[i >> 2u], 0u, 0u);
#else
        uvec4 w = X4[i >> 2u];
#endif
        [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = element(w, j);
        return v;
    }
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = LOADT(X, row * K + min(k + j, K - 1u));
#if EXACT
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = ftz_(v[j]);
#endif
    return v;
}

// The same for W's row starting at element `at`.
vec4 quadW(uint at, uint k)
{
    vec4 v;
    if (WIDE) {
#if FLOAT16
        uvec4 w = uvec4(W2[(at + k) >> 2u], 0u, 0u);
#else
        uvec4 w = W4[(at + k) >> 2u];
#endif
        [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = element(w, j);
        return v;
    }
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = LOADT(W, at + min(k + j, K - 1u));
#if EXACT
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = ftz_(v[j]);
#endif
    return v;
}

uint wAt[NC];                       // W's rows of this invocation's columns
// The walk's state: X's row of each of the MR Xw rows, and their sums [row][column].
uint xr[MR];
float acc[MR * NC];

// The terms k0 .. k0 + CHUNK - 1 of the sums, in increasing k. Lane j loads quad j of the
// chunk of each row (one per-lane load where every lane would load all of them), and each
// value reaches every lane by subgroupBroadcast (an extract and a splat on lavapipe), where
// it feeds the NC columns' sums.
void chunkTerms(uint k0)
{
    uint lane = gl_SubgroupInvocationID;
    vec4 xq[MR];
    [[unroll]] for (uint r = 0u; r < MR; r++) xq[r] = quadX(xr[r], min(k0 + 4u * lane, 4u * (KQ - 1u)));
    [[unroll]] for (uint j = 0u; j < LANES; j++) {
        uint k = k0 + 4u * j;
        uint q = min(k, 4u * (KQ - 1u));
        vec4 wv[NC];
        [[unroll]] for (uint c = 0u; c < NC; c++)
            wv[c] = W_REGS != 0u ? vec4(wr[q], wr[q + 1u], wr[q + 2u], wr[q + 3u]) : quadW(wAt[c], q);
        [[unroll]] for (uint r = 0u; r < MR; r++) {
            [[unroll]] for (uint e = 0u; e < 4u; e++) {
                float x = subgroupBroadcast(xq[r][e], j);
                [[unroll]] for (uint c = 0u; c < NC; c++)
                    acc[r * NC + c] = k + e < K ? ADD(acc[r * NC + c], MUL(x, wv[c][e])) : acc[r * NC + c];
            }
        }
    }
}

void main()
{
    uint d = gl_WorkGroupID.z;   // the grid: (column groups, 1, directions)
    // Columns n0 + THREADS c of the workgroup's THREADS x NC (neighbouring lanes, neighbouring
    // columns). Lanes past N compute column N - 1 and store nothing: no branch around loads.
    uint n0 = gl_WorkGroupID.x * THREADS * NC + gl_LocalInvocationID.x;
    [[unroll]] for (uint c = 0u; c < NC; c++) wAt[c] = (d * N + min(n0 + THREADS * c, N - 1u)) * K;
    if (W_REGS != 0u) {
        [[unroll]] for (uint q = 0u; q < KQ; q++) {
            vec4 w = quadW(wAt[0], 4u * q);
            [[unroll]] for (uint j = 0u; j < 4u; j++) wr[4u * q + j] = w[j];
        }
    }
    uint base = XW_OFFSET + d * SEQ * BATCH * N;
    uint rows = pc.rows;
    for (uint m0 = 0u; m0 < rows; m0 += MR) {
        [[unroll]] for (uint r = 0u; r < MR; r++) {
            xr[r] = xRow(min(m0 + r, rows - 1u));
            [[unroll]] for (uint c = 0u; c < NC; c++) acc[r * NC + c] = 0.0;
        }
        if (W_REGS != 0u) {
            [[unroll]] for (uint c = 0u; c < KC; c++) chunkTerms(c * CHUNK);
        } else {
            [[dont_unroll]] for (uint c = 0u; c < KC; c++) chunkTerms(c * CHUNK);
        }
        [[unroll]] for (uint r = 0u; r < MR; r++)
            [[unroll]] for (uint c = 0u; c < NC; c++) {
                uint n = n0 + THREADS * c;
                if (n < N && m0 + r < rows) STOREF(Xw, base + (m0 + r) * N + n, acc[r * NC + c]);
            }
    }
}
