#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_shader_subgroup_basic : require
// Pass 1 of mode "fast" (ortops.modes, docs/modes.md) for float16 layers, on matrix hardware
// (VK_KHR_cooperative_matrix): the same product as input_projection.comp,
//   Xw[d][t][b][n] = sum_k X[t][b][k] * W[d][n][k]        (n = gate * hidden + unit),
// as 16 x 16 x 16 float16 x float16 -> float32 matrix multiply-adds at subgroup scope, the one
// combination the host checks the device lists (ortops.fast). float16 x float16 products are
// exact in float32, so the difference from the portable kernel is only the order (and, on the
// hardware, the rounding) of the float32 sums inside each 16-wide k block.
// A workgroup of 4 subgroups (gl_SubgroupID 0-3) computes a 64 x 64 tile of one direction, each subgroup a 32 x 32
// corner as 2 x 2 accumulators. K goes through shared memory KT = 32 at a time, X's and W's
// halves copied there as float16 (exact: they are float16 tensors), zero past every edge, so
// any M, N and K work. The tiling is fixed by the shapes and there are no atomics, so the
// result is the same bits run to run. The accumulators go out through shared memory, so the
// stores honour the edges, XW_OFFSET and the row order like the portable kernel's.
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

// Four subgroups of 32 (ortops.fast requires a device whose compute subgroups are 32 wide,
// never another size; SPIR-V 1.6 makes them full). A literal, not a specialization constant:
// glslang writes local_size_x_id as LocalSizeId in SPIR-V 1.6, which needs maintenance4.
const uint WG = 128u;
layout(local_size_x = 128) in;

layout(std430, binding = 0) readonly buffer XBuf { uint X[]; };
layout(std430, binding = 1) readonly buffer WBuf { uint W[]; };
layout(std430, binding = 2) writeonly buffer XwBuf { uint Xw[]; };

// As in input_projection.comp: rows of (step, batch row) to compute, first row tile.
layout(push_constant) uniform Push { uint rows; uint tile0; } pc;

const uint TILE = 64u;
const uint KT = 32u;
const uint AS = KT + 8u;        // row stride of the staged tiles in halves (16-byte multiple)
const uint CS = TILE + 4u;      // row stride of the result tile in floats
shared float16_t As[TILE * AS]; // X rows:  [m][k]
shared float16_t Bs[TILE * AS]; // W rows:  [n][k], read as the column-major K x N operand
shared float Cs[TILE * CS];

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

// Element i of a packed float16 tensor, as the half it is (a bit cast, no rounding).
float16_t half_(uint word, uint i)
{
    return unpackFloat2x16(word)[i & 1u];
}

void main()
{
    uint d = gl_WorkGroupID.z;
    uint m0 = (pc.tile0 + gl_WorkGroupID.y) * TILE;
    uint n0 = gl_WorkGroupID.x * TILE;
    uint tid = gl_LocalInvocationID.x;
    uint M = pc.rows;
    uint sm = (gl_SubgroupID >> 1u) * 32u;   // this subgroup's corner of the tile
    uint sn = (gl_SubgroupID & 1u) * 32u;

    MATC c00 = MATC(0.0);
    MATC c01 = MATC(0.0);
    MATC c10 = MATC(0.0);
    MATC c11 = MATC(0.0);
    for (uint k0 = 0u; k0 < K; k0 += KT) {
        for (uint e = tid; e < TILE * KT; e += WG) {
            uint r = e / KT;
            uint kk = e - r * KT;
            uint k = k0 + kk;
            uint m = m0 + r;
            uint n = n0 + r;
            uint xi = xRow(m) * K + k;
            uint wi = (d * N + n) * K + k;
            As[r * AS + kk] = (m < M && k < K) ? half_(X[xi >> 1u], xi) : float16_t(0.0);
            Bs[r * AS + kk] = (n < N && k < K) ? half_(W[wi >> 1u], wi) : float16_t(0.0);
        }
        barrier();
        for (uint kk = 0u; kk < KT; kk += 16u) {
            // One declaration each: glslang 13.1.1 gives the second name of a list
            // "MATB b0, b1;" an invalid matrix use (spirv-val refuses the module).
            MATA a0;
            MATA a1;
            MATB b0;
            MATB b1;
            coopMatLoad(a0, As, sm * AS + kk, AS, gl_CooperativeMatrixLayoutRowMajor);
            coopMatLoad(a1, As, (sm + 16u) * AS + kk, AS, gl_CooperativeMatrixLayoutRowMajor);
            coopMatLoad(b0, Bs, sn * AS + kk, AS, gl_CooperativeMatrixLayoutColumnMajor);
            coopMatLoad(b1, Bs, (sn + 16u) * AS + kk, AS, gl_CooperativeMatrixLayoutColumnMajor);
            c00 = coopMatMulAdd(a0, b0, c00);
            c01 = coopMatMulAdd(a0, b1, c01);
            c10 = coopMatMulAdd(a1, b0, c10);
            c11 = coopMatMulAdd(a1, b1, c11);
        }
        barrier();
    }
    coopMatStore(c00, Cs, sm * CS + sn, CS, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(c01, Cs, sm * CS + sn + 16u, CS, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(c10, Cs, (sm + 16u) * CS + sn, CS, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(c11, Cs, (sm + 16u) * CS + sn + 16u, CS, gl_CooperativeMatrixLayoutRowMajor);
    barrier();
    for (uint e = tid; e < TILE * TILE; e += WG) {
        uint r = e / TILE;
        uint c = e - r * TILE;
        uint m = m0 + r;
        uint n = n0 + c;
        if (m < M && n < N) {
            STOREF(Xw, XW_OFFSET + (d * SEQ * BATCH + m) * N + n, Cs[r * CS + c]);
        }
    }
}
