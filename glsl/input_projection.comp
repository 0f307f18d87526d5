#version 450
#extension GL_GOOGLE_include_directive : require
// Pass 1: the input projection of every step and every direction, one batched Gemm:
//   Xw[d][t][b][n] = sum_k X[t][b][k] * W[d][n][k]        (n = gate * hidden + unit)
// W is used as stored, [dirs, gates*hidden, input], read through the transposed-B form, so
// weights are never repacked. Each output has one float32 accumulator summed in increasing
// k from +0, so the result is fixed by the shapes (deterministic run to run).
// A workgroup computes a TILE x TILE tile of one direction (TILE = 16 * TPT), each thread
// TPT x TPT outputs, with K staged through shared memory 16 at a time. TPT = 4 for small
// products (more workgroups to spread over the device), 8 for large ones (twice the
// multiply-adds per shared-memory load).
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

layout(constant_id = 0) const uint N = 1;       // gates * hidden
layout(constant_id = 1) const uint K = 1;       // input size
layout(constant_id = 2) const uint SEQ = 1;
layout(constant_id = 3) const uint BATCH = 1;
layout(constant_id = 4) const uint LAYOUT = 0;  // 1: X is [batch, seq, input]
layout(constant_id = 5) const uint XW_OFFSET = 0; // in floats, inside the Xw binding
layout(constant_id = 6) const uint TPT = 4;       // outputs per thread in each dimension

layout(std430, binding = 0) readonly buffer XBuf { uint X[]; };
layout(std430, binding = 1) readonly buffer WBuf { uint W[]; };
layout(std430, binding = 2) writeonly buffer XwBuf { uint Xw[]; };

// rows: how many (step, batch row) rows to compute; the host's MaxLength bound shortens it.
// tile0: the first row tile of this dispatch. The host splits the rows over dispatches of at
// most 65535 row tiles (Vulkan's guaranteed workgroup count), so any row count fits.
layout(push_constant) uniform Push { uint rows; uint tile0; } pc;

const uint TILE = 16u * TPT;
const uint KT = 16;
shared float As[KT][TILE];
shared float Bs[KT][TILE];

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

void main()
{
    uint d = gl_WorkGroupID.z;
    uint m0 = (pc.tile0 + gl_WorkGroupID.y) * TILE;
    uint n0 = gl_WorkGroupID.x * TILE;
    uint tx = gl_LocalInvocationID.x;
    uint ty = gl_LocalInvocationID.y;
    uint tid = ty * 16u + tx;
    uint M = pc.rows;

    float acc[TPT][TPT];
    for (uint i = 0u; i < TPT; i++)
        for (uint j = 0u; j < TPT; j++)
            acc[i][j] = 0.0;

    for (uint k0 = 0u; k0 < K; k0 += KT) {
        // TILE rows x 16 k of X and of W each, TPT * TPT / 4 values per thread.
        for (uint e = tid; e < TILE * KT; e += 256u) {
            uint r = e / KT;
            uint kk = e - r * KT;
            uint k = k0 + kk;
            uint m = m0 + r;
            uint n = n0 + r;
            As[kk][r] = (m < M && k < K) ? LOADT(X, xRow(m) * K + k) : 0.0;
            Bs[kk][r] = (n < N && k < K) ? LOADT(W, (d * N + n) * K + k) : 0.0;
        }
        barrier();
        for (uint kk = 0u; kk < KT; kk++) {
            float a[TPT];
            float b[TPT];
            for (uint i = 0u; i < TPT; i++) a[i] = As[kk][ty + 16u * i];
            for (uint j = 0u; j < TPT; j++) b[j] = Bs[kk][tx + 16u * j];
            for (uint i = 0u; i < TPT; i++)
                for (uint j = 0u; j < TPT; j++)
                    acc[i][j] = ADD(acc[i][j], MUL(a[i], b[j]));
        }
        barrier();
    }

    for (uint i = 0u; i < TPT; i++) {
        uint m = m0 + ty + 16u * i;
        if (m >= M) continue;
        for (uint j = 0u; j < TPT; j++) {
            uint n = n0 + tx + 16u * j;
            if (n < N) {
                STOREF(Xw, XW_OFFSET + (d * SEQ * BATCH + m) * N + n, acc[i][j]);
            }
        }
    }
}
