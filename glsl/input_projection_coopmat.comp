#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
// Pass 1 of mode "fast" (ortops.modes, docs/modes.md) for float16 layers, on matrix hardware
// (VK_KHR_cooperative_matrix): the same product as input_projection.comp,
//   Xw[d][t][b][n] = sum_k X[t][b][k] * W[d][n][k]        (n = gate * hidden + unit),
// as 16 x 16 x 16 float16 x float16 -> float32 matrix multiply-adds at subgroup scope, the one
// combination the host checks the device lists (ortops.fast). float16 x float16 products are
// exact in float32, so the difference from the portable kernel is only the order (and, on the
// hardware, the rounding) of the float32 sums inside each 16-wide k block.
//
// Why this shape: a first version, a 64 x 64 tile of four subgroups with 2 x 2 accumulators
// each and X and W staged one float16 a thread at a time, ran several times slower than the
// portable kernel (docs/modes.md). What changed, each for a measured or counted reason:
// - a 128 x 128 tile of eight subgroups, each 64 x 32 of it as 4 x 2 accumulators: every A
//   operand loaded from shared memory feeds two multiply-adds and every B operand four (the
//   first version: two each), and a workgroup reads each k-slice of X and W once for 128
//   columns and rows instead of 64;
// - X and W staged 16 bytes (eight halves) a thread a load where K is a multiple of 8 (rows
//   16-byte aligned), so a k-slice of 32 costs each thread two loads of each operand, not
//   sixteen 2-byte ones;
// - the next k-slice's loads are issued into registers before this slice's multiply-adds, so
//   the global latency hides behind them (one shared stage, register double buffering);
// - interior tiles store the accumulators straight to Xw (coopMatStore, rows 16-byte
//   aligned when N and XW_OFFSET are multiples of 4); edge tiles go through a per-subgroup
//   16 x 16 staging block so that the stores honour the edges.
// K goes through shared memory KT = 32 at a time, zero past every edge, so any M, N and K
// work. The tiling is fixed by the shapes and there are no atomics, so the result is the same
// bits run to run.
#include "common.glsl"
// float16 values live here too (shared memory, the matrix operands): the build gives the
// module the float control of common.glsl for 16-bit floats as well
// (scripts/spirv_float_modes.py: glslang keeps one declaration per mode), and ortops.fast
// requires the device's shaderSignedZeroInfNanPreserveFloat16 before choosing this kernel.

layout(constant_id = 0) const uint N = 1;       // gates * hidden
layout(constant_id = 1) const uint K = 1;       // input size
layout(constant_id = 2) const uint SEQ = 1;
layout(constant_id = 3) const uint BATCH = 1;
layout(constant_id = 4) const uint LAYOUT = 0;  // 1: X is [batch, seq, input]
layout(constant_id = 5) const uint XW_OFFSET = 0; // in floats, inside the Xw binding

// Eight subgroups of 32 (ortops.fast requires a device whose compute subgroups are 32 wide,
// never another size; SPIR-V 1.6 makes them full). A literal, not a specialization constant:
// glslang writes local_size_x_id as LocalSizeId in SPIR-V 1.6, which needs maintenance4.
const uint WG = 256u;
layout(local_size_x = 256) in;

// Each operand bound twice: as words (any K, the edges) and as 16-byte chunks (K % 8 == 0).
layout(std430, binding = 0) readonly buffer XBuf { uint X[]; };
layout(std430, binding = 0) readonly buffer XBuf4 { uvec4 X4[]; };
layout(std430, binding = 1) readonly buffer WBuf { uint W[]; };
layout(std430, binding = 1) readonly buffer WBuf4 { uvec4 W4[]; };
layout(std430, binding = 2) writeonly buffer XwBuf { uint Xw[]; };
layout(std430, binding = 2) writeonly buffer XwBufF { float XwF[]; };

// As in input_projection.comp: rows of (step, batch row) to compute, first row tile.
layout(push_constant) uniform Push { uint rows; uint tile0; } pc;

const uint TILE = 128u;         // rows (m) and columns (n) of Xw a workgroup
const uint KT = 32u;            // k a slice
const uint CHUNKS = KT / 8u;    // 16-byte chunks a row of a slice
const uint LOADS = TILE * CHUNKS / WG;   // chunks of each operand a thread a slice (2)
const uint SS = KT / 2u + 4u;   // row stride of the staged slices in half pairs (80 bytes:
                                // 16-byte aligned rows for coopMatLoad, banks spread)
const uint CS = 20u;            // row stride of a subgroup's 16 x 16 staging block, floats
const bool WIDE = K % 8u == 0u; // rows of X and W start 16-byte aligned
const bool DIRECT = N % 4u == 0u && XW_OFFSET % 4u == 0u;  // Xw rows 16-byte aligned
shared f16vec2 As[TILE * SS];   // X rows:  [m][k]
shared f16vec2 Bs[TILE * SS];   // W rows:  [n][k], read as the column-major K x N operand
shared float Cs[8u * 16u * CS];

#define MATA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MATB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MATC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

uint xRow(uint m)
{
    if (LAYOUT == 0u) {
        return m;
    }
    uint t = m / BATCH;
    uint b = m - t * BATCH;
    return b * SEQ + t;
}

// Halves i and i + 1 of a packed float16 tensor as one word, zero past K (bit moves only).
uint pairX(uint row, uint k)
{
    uint i = row * K + k;
    uint lo = k < K ? (X[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu : 0u;
    uint j = i + 1u;
    uint hi = k + 1u < K ? (X[j >> 1u] >> ((j & 1u) * 16u)) & 0xffffu : 0u;
    return lo | (hi << 16u);
}

uint pairW(uint row, uint k)
{
    uint i = row * K + k;
    uint lo = k < K ? (W[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu : 0u;
    uint j = i + 1u;
    uint hi = k + 1u < K ? (W[j >> 1u] >> ((j & 1u) * 16u)) & 0xffffu : 0u;
    return lo | (hi << 16u);
}

// The eight halves k .. k+7 of X's row for Xw row m (zero past M and K).
uvec4 chunkX(uint m, uint k)
{
    if (m >= pc.rows) {
        return uvec4(0u);
    }
    uint row = xRow(m);
    if (WIDE) {
        return k < K ? X4[(row * K + k) >> 3u] : uvec4(0u);
    }
    return uvec4(pairX(row, k), pairX(row, k + 2u), pairX(row, k + 4u), pairX(row, k + 6u));
}

// The eight halves k .. k+7 of W's row n of direction d (zero past N and K).
uvec4 chunkW(uint d, uint n, uint k)
{
    if (n >= N) {
        return uvec4(0u);
    }
    uint row = d * N + n;
    if (WIDE) {
        return k < K ? W4[(row * K + k) >> 3u] : uvec4(0u);
    }
    return uvec4(pairW(row, k), pairW(row, k + 2u), pairW(row, k + 4u), pairW(row, k + 6u));
}

void main()
{
    uint d = gl_WorkGroupID.z;
    uint m0 = (pc.tile0 + gl_WorkGroupID.y) * TILE;
    uint n0 = gl_WorkGroupID.x * TILE;
    uint tid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint sm = (sg >> 2u) * 64u;   // this subgroup's 64 x 32 corner of the tile
    uint sn = (sg & 3u) * 32u;

    MATC acc[4][2];
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        [[unroll]] for (uint j = 0u; j < 2u; ++j) {
            acc[i][j] = MATC(0.0);
        }
    }
    // This thread's chunks of a slice: row tid / CHUNKS (+ 64 for the second), chunk tid % CHUNKS.
    uint lr = tid / CHUNKS;
    uint lc = tid - lr * CHUNKS;
    uvec4 xa[LOADS];
    uvec4 wb[LOADS];
    [[unroll]] for (uint l = 0u; l < LOADS; ++l) {
        xa[l] = chunkX(m0 + lr + l * (WG / CHUNKS), lc * 8u);
        wb[l] = chunkW(d, n0 + lr + l * (WG / CHUNKS), lc * 8u);
    }
    for (uint k0 = 0u; k0 < K; k0 += KT) {
        barrier();   // the previous slice's operands are read
        [[unroll]] for (uint l = 0u; l < LOADS; ++l) {
            uint at = (lr + l * (WG / CHUNKS)) * SS + lc * 4u;
            As[at] = unpackFloat2x16(xa[l].x);
            As[at + 1u] = unpackFloat2x16(xa[l].y);
            As[at + 2u] = unpackFloat2x16(xa[l].z);
            As[at + 3u] = unpackFloat2x16(xa[l].w);
            Bs[at] = unpackFloat2x16(wb[l].x);
            Bs[at + 1u] = unpackFloat2x16(wb[l].y);
            Bs[at + 2u] = unpackFloat2x16(wb[l].z);
            Bs[at + 3u] = unpackFloat2x16(wb[l].w);
        }
        barrier();
        uint k1 = k0 + KT;   // the next slice's loads, in flight during the multiply-adds
        if (k1 < K) {
            [[unroll]] for (uint l = 0u; l < LOADS; ++l) {
                xa[l] = chunkX(m0 + lr + l * (WG / CHUNKS), k1 + lc * 8u);
                wb[l] = chunkW(d, n0 + lr + l * (WG / CHUNKS), k1 + lc * 8u);
            }
        }
        [[unroll]] for (uint kk = 0u; kk < KT; kk += 16u) {
            // One declaration each: glslang 13.1.1 gives the second name of a list
            // "MATB b0, b1;" an invalid matrix use (spirv-val refuses the module).
            MATB b0;
            MATB b1;
            coopMatLoad(b0, Bs, sn * SS + kk / 2u, SS, gl_CooperativeMatrixLayoutColumnMajor);
            coopMatLoad(b1, Bs, (sn + 16u) * SS + kk / 2u, SS, gl_CooperativeMatrixLayoutColumnMajor);
            [[unroll]] for (uint i = 0u; i < 4u; ++i) {
                MATA a;
                coopMatLoad(a, As, (sm + i * 16u) * SS + kk / 2u, SS, gl_CooperativeMatrixLayoutRowMajor);
                acc[i][0] = coopMatMulAdd(a, b0, acc[i][0]);
                acc[i][1] = coopMatMulAdd(a, b1, acc[i][1]);
            }
        }
    }
    uint base = XW_OFFSET + d * SEQ * BATCH * N;
    bool interior = DIRECT && m0 + TILE <= pc.rows && n0 + TILE <= N;
    uint lane = gl_SubgroupInvocationID;
    [[unroll]] for (uint i = 0u; i < 4u; ++i) {
        [[unroll]] for (uint j = 0u; j < 2u; ++j) {
            uint m = m0 + sm + i * 16u;
            uint n = n0 + sn + j * 16u;
            if (interior) {
                coopMatStore(acc[i][j], XwF, base + m * N + n, N, gl_CooperativeMatrixLayoutRowMajor);
                continue;
            }
            // An edge tile: through this subgroup's staging block, each lane 8 of its values.
            coopMatStore(acc[i][j], Cs, sg * 16u * CS, CS, gl_CooperativeMatrixLayoutRowMajor);
            subgroupBarrier();
            [[unroll]] for (uint e = lane; e < 256u; e += 32u) {
                uint r = e >> 4u;
                uint c = e & 15u;
                if (m + r < pc.rows && n + c < N) {
                    STOREF(Xw, base + (m + r) * N + n + c, Cs[sg * 16u * CS + r * CS + c]);
                }
            }
            subgroupBarrier();
        }
    }
}
