#version 450
#extension GL_GOOGLE_include_directive : require
// The tile loops must unroll so that the sums and the staged values stay in registers.
#extension GL_EXT_control_flow_attributes : enable
// Pass 1: the input projection of every step and every direction, one batched Gemm:
//   Xw[d][t][b][n] = sum_k X[t][b][k] * W[d][n][k]        (n = gate * hidden + unit)
// W is used as stored, [dirs, gates*hidden, input], read through the transposed-B form, so
// weights are never repacked. Each output has one float32 accumulator summed in increasing
// k from +0 (the slices zero past K, as every version has: the bits are the first version's),
// so the result is fixed by the shapes (deterministic run to run).
// A workgroup computes a TILE x TILE tile of one direction (TILE = 16 * TPT), each thread
// TPT x TPT outputs, with K staged through shared memory 16 at a time. TPT = 4 for small
// products (more workgroups to spread over the device), 8 for large ones (twice the
// multiply-adds per shared-memory load).
//
// Three choices where a plainer version of the same tile and sums lost its time (it ran at half
// the H200's float32 rate):
// - staging writes without bank conflicts: a thread stages four consecutive k of one row
//   (one 16-byte load where K is a multiple of 4) and neighbouring threads take neighbouring
//   rows, so each of its four shared-memory writes lands 32 lanes on 32 banks (the first
//   version's neighbours took neighbouring k of one row: 16 writes to one bank);
// - a thread's rows (and columns) are groups of four adjacent ones, so the products read
//   them from shared memory as vec4s (TPT / 2 16-byte reads per k for TPT^2 multiply-adds,
//   against 2 TPT 4-byte reads);
// - the next slice's loads are issued into registers before this slice's multiply-adds, as
//   glsl/input_projection_coopmat.comp does, so their latency hides behind them; and Xw rows
//   are stored four outputs at a time where they are 16-byte aligned.
//
// Two switches for measuring float32 at large sizes (issue 32, item 5; VariantSettings
// projectionKt / projectionStages, ORTOPS_PROJECTION_KT / ORTOPS_PROJECTION_STAGES; both off by
// default), neither changing any output's sum (increasing k from +0, the same terms):
// - KT = 32: 32 k a staged slice instead of 16 (half the barriers and staging rounds per k, a
//   longer run of multiply-adds between them). The host uses it only where K % 32 == 0, so no
//   slice pads past K where the 16-wide one would not (a padded +0 term turns a -0 sum into +0);
// - STAGES = 2: two slices in shared memory, the next one staged while this one is read, one
//   barrier a slice instead of two.
// Either needs 2 * TILE * KT * STAGES * 4 bytes of shared memory (32 KiB for one of them at the
// 128 x 128 tile, 64 KiB for both); the host turns a switch off where the device has less.
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

layout(constant_id = 0) const uint N = 1;       // gates * hidden
layout(constant_id = 1) const uint K = 1;       // input size
layout(constant_id = 2) const uint SEQ = 1;
layout(constant_id = 3) const uint BATCH = 1;
layout(constant_id = 4) const uint LAYOUT = 0;  // 1: X is [batch, seq, input]
layout(constant_id = 5) const uint XW_OFFSET = 0; // in floats, inside the Xw binding
layout(constant_id = 6) const uint TPT = 4;       // outputs per thread in each dimension
layout(constant_id = 7) const uint KT = 16;       // k a staged slice (16; 32 where K % 32 == 0)
layout(constant_id = 8) const uint STAGES = 1;    // staged slices in shared memory (1 or 2)

// Each operand bound as words (any K, the edges) and as 4 elements at once (K % 4 == 0:
// 16 bytes of float32, 8 of float16).
layout(std430, binding = 0) readonly buffer XBuf { uint X[]; };
layout(std430, binding = 0) readonly buffer XBuf4 { uvec4 X4[]; };
layout(std430, binding = 0) readonly buffer XBuf2 { uvec2 X2[]; };
layout(std430, binding = 1) readonly buffer WBuf { uint W[]; };
layout(std430, binding = 1) readonly buffer WBuf4 { uvec4 W4[]; };
layout(std430, binding = 1) readonly buffer WBuf2 { uvec2 W2[]; };
layout(std430, binding = 2) writeonly buffer XwBuf { uint Xw[]; };
layout(std430, binding = 2) writeonly buffer XwBuf4 { uvec4 Xw4[]; };

// rows: how many (step, batch row) rows to compute; the host's MaxLength bound shortens it.
// tile0: the first row tile of this dispatch. The host splits the rows over dispatches of at
// most 65535 row tiles (Vulkan's guaranteed workgroup count), so any row count fits.
layout(push_constant) uniform Push { uint rows; uint tile0; } pc;

const uint TILE = 16u * TPT;
const uint QUADS = TILE * KT / 4u / 256u;   // four-k groups a thread stages per operand a slice
const uint TQ = TPT / 4u;                   // a thread's groups of four rows (and columns)
const bool WIDE = K % 4u == 0u;             // rows of X and W start at multiples of 4 elements
const bool DIRECT = N % 4u == 0u && XW_OFFSET % 4u == 0u;   // Xw rows 16-byte aligned
const uint SLICE = KT * TILE / 4u;          // vec4s of one staged slice of one operand
// Staged slices [stage][k][row of the tile], read four rows at a time.
shared vec4 As[STAGES * SLICE];
shared vec4 Bs[STAGES * SLICE];

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

// Element j of a group of four read at once, as LOADT reads it.
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

// Elements k .. k+3 of X's row for Xw row m (zero past M and K).
vec4 quadX(uint m, uint k)
{
    vec4 v = vec4(0.0);
    if (m >= pc.rows) {
        return v;
    }
    uint i = xRow(m) * K + k;
    if (WIDE) {
        if (k < K) {
#if FLOAT16
            uvec4 w = uvec4(X2[i >> 2u], 0u, 0u);
#else
            uvec4 w = X4[i >> 2u];
#endif
            [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = element(w, j);
        }
        return v;
    }
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = k + j < K ? LOADT(X, i + j) : 0.0;
    return v;
}

// Elements k .. k+3 of W's row n of direction d (zero past N and K).
vec4 quadW(uint d, uint n, uint k)
{
    vec4 v = vec4(0.0);
    if (n >= N) {
        return v;
    }
    uint i = (d * N + n) * K + k;
    if (WIDE) {
        if (k < K) {
#if FLOAT16
            uvec4 w = uvec4(W2[i >> 2u], 0u, 0u);
#else
            uvec4 w = W4[i >> 2u];
#endif
            [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = element(w, j);
        }
        return v;
    }
    [[unroll]] for (uint j = 0u; j < 4u; j++) v[j] = k + j < K ? LOADT(W, i + j) : 0.0;
    return v;
}

// This thread's staged groups (xa, wb) into stage STAGE_ of the shared slices (a macro: the
// groups are arrays of a specialization-constant size).
#define STAGE_SLICE(STAGE_)                                                        \
    [[unroll]] for (uint l = 0u; l < QUADS; l++) {                                 \
        uint g = tid + 256u * l;                                                   \
        uint r = g % TILE, q = g / TILE;                                           \
        [[unroll]] for (uint j = 0u; j < 4u; j++) {                                \
            uint at = (4u * q + j) * TILE + r;                                     \
            As[(STAGE_) * SLICE + (at >> 2u)][at & 3u] = xa[l][j];                 \
            Bs[(STAGE_) * SLICE + (at >> 2u)][at & 3u] = wb[l][j];                 \
        }                                                                          \
    }

void main()
{
    uint d = gl_WorkGroupID.z;
    uint m0 = (pc.tile0 + gl_WorkGroupID.y) * TILE;
    uint n0 = gl_WorkGroupID.x * TILE;
    uint tx = gl_LocalInvocationID.x;
    uint ty = gl_LocalInvocationID.y;
    uint tid = ty * 16u + tx;

    float acc[TPT][TPT];
    [[unroll]] for (uint i = 0u; i < TPT; i++)
        [[unroll]] for (uint j = 0u; j < TPT; j++)
            acc[i][j] = 0.0;

    // This thread's staged groups: row g % TILE of the tile, k group g / TILE (g = tid + 256 l).
    vec4 xa[QUADS];
    vec4 wb[QUADS];
    [[unroll]] for (uint l = 0u; l < QUADS; l++) {
        uint g = tid + 256u * l;
        xa[l] = quadX(m0 + g % TILE, 4u * (g / TILE));
        wb[l] = quadW(d, n0 + g % TILE, 4u * (g / TILE));
    }
    uint stage = 0u;   // the stage this slice is read from (STAGES = 2 alternates)
    if (STAGES == 2u) {
        STAGE_SLICE(0u)
        barrier();
    }
    for (uint k0 = 0u; k0 < K; k0 += KT) {
        if (STAGES == 1u) {
            barrier();   // the previous slice's values are read
            STAGE_SLICE(0u)
            barrier();
        }
        uint k1 = k0 + KT;   // the next slice's loads, in flight during the multiply-adds
        if (k1 < K) {
            [[unroll]] for (uint l = 0u; l < QUADS; l++) {
                uint g = tid + 256u * l;
                xa[l] = quadX(m0 + g % TILE, k1 + 4u * (g / TILE));
                wb[l] = quadW(d, n0 + g % TILE, k1 + 4u * (g / TILE));
            }
        }
        [[unroll]] for (uint kk = 0u; kk < KT; kk++) {
            // Rows 64 i4 + 4 ty + c and columns 64 j4 + 4 tx + c of the tile.
            vec4 a[TQ];
            vec4 b[TQ];
            [[unroll]] for (uint q = 0u; q < TQ; q++) {
                a[q] = As[stage * SLICE + (kk * TILE + 64u * q) / 4u + ty];
                b[q] = Bs[stage * SLICE + (kk * TILE + 64u * q) / 4u + tx];
            }
            [[unroll]] for (uint i = 0u; i < TPT; i++)
                [[unroll]] for (uint j = 0u; j < TPT; j++)
                    acc[i][j] = ADD(acc[i][j], MUL(a[i >> 2u][i & 3u], b[j >> 2u][j & 3u]));
        }
        if (STAGES == 2u) {
            // The next slice into the other stage (read last in the slice before, which every
            // thread finished before the last barrier), then one barrier.
            stage ^= 1u;
            if (k1 < K) {
                STAGE_SLICE(stage)
            }
            barrier();
        }
    }

    uint base = XW_OFFSET + d * SEQ * BATCH * N;
    [[unroll]] for (uint i = 0u; i < TPT; i++) {
        uint m = m0 + 64u * (i >> 2u) + 4u * ty + (i & 3u);
        if (m >= pc.rows) continue;
        [[unroll]] for (uint q = 0u; q < TQ; q++) {
            uint n = n0 + 64u * q + 4u * tx;
            if (DIRECT && n + 3u < N) {
                Xw4[(base + m * N + n) >> 2u] = uvec4(floatBitsToUint(acc[i][4u * q]), floatBitsToUint(acc[i][4u * q + 1u]),
                                                      floatBitsToUint(acc[i][4u * q + 2u]), floatBitsToUint(acc[i][4u * q + 3u]));
                continue;
            }
            [[unroll]] for (uint c = 0u; c < 4u; c++)
                if (n + c < N) STOREF(Xw, base + m * N + n + c, acc[i][4u * q + c]);
        }
    }
}
