#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
// Pass 3 of mode "fast" (docs/modes.md) for float16 layers, on matrix hardware
// (VK_KHR_cooperative_matrix): one time step of every direction and batch row, the recurrent
// products R . h as 16 x 16 x 16 float16 x float16 -> float32 matrix multiply-adds, then the
// cell update of cell.glsl, the same as every other step kernel's.
//
// Per workgroup and pass: 16 units of one direction x the pass's gates (up to 64 R rows, the
// A operands: gate g's 16 x 16 blocks of R[d][g * hidden + u0 .. +15][k]) against BT = 16 x
// NBT batch rows of h (the B operands: h[d][b0 .. +BT-1][k], a k x batch block column-major),
// so that the sums of all the gates of a unit meet in one workgroup for its cell update.
// Four subgroups of 32 share the (gate, 16-row batch block) accumulators, gate-major, so a
// subgroup's accumulators share their A operand where NBT > 1 (LSTM: subgroup g is gate g).
//
// What changes against the other step kernels, and why it is mode "fast" only: h is rounded
// to float16 for the product (the layer's own precision: its outputs are float16), and the
// products' float32 sums are taken in the hardware's order within each 16-wide k block. The
// hidden state, the cell state and the update stay float32. h stays inside float16's range,
// so the rounding never overflows, because the host chooses this kernel only for the cells'
// default activations (src/core/rnn/layer.cpp, useCoopmatSteps): then |h| <= 1 after the first
// step (LSTM o * tanh(c), RNN tanh, GRU's (1 - z) h~ + z h with |h~| <= 1) and at most
// initial_h's float16 values before. NaN, +-Inf and -0 round to themselves.
//
// The k loop stages R and h through shared memory KT = 64 at a time (16-byte loads where
// rows are aligned, h converted from the float32 state once), with the next slice's loads in
// registers during this slice's multiply-adds, as glsl/input_projection_coopmat.comp does.
// The tiling is fixed by the shapes and there are no atomics: the same bits run to run.
#define GENERAL_ACTIVATIONS
#include "common.glsl"
#include "cell.glsl"

// Four subgroups of 32 (the host requires compute subgroups exactly 32 wide). A literal, not
// a specialization constant: glslang writes local_size_x_id as LocalSizeId in SPIR-V 1.6.
layout(local_size_x = 128) in;

layout(constant_id = 40) const uint NBT = 1;       // 16-row batch blocks a workgroup (1, 2, 4)

// R (float16 pairs) as 16-byte chunks, and the float32 state as 16-byte chunks.
layout(std430, binding = 1) readonly buffer RBuf4 { uvec4 R4[]; };
layout(std430, binding = 5) readonly buffer StateBuf4 { uvec4 S4[]; };

const uint WG = 128u;
const uint U = 16u;                                // units a workgroup
const uint BT = 16u * NBT;                         // batch rows a workgroup
const uint KT = 64u;                               // k a slice
const uint MR = GATES_IN_PASS * U;                 // R rows a workgroup (16 .. 64)
const uint PAIRS = GATES_IN_PASS * NBT;            // accumulators a workgroup
const uint PER = (PAIRS + 3u) / 4u;                // ... a subgroup (at most 4)
const uint SS = KT / 2u + 4u;                      // staged row stride in half pairs (144 bytes:
                                                   // 16-byte aligned rows, banks spread)
const uint RCH = KT / 8u;                          // 16-byte R chunks a staged row (8)
const uint HCH = KT / 4u;                          // 16-byte h chunks a staged row (16)
const uint RLOADS = 64u * RCH / WG;                // R chunks a thread a slice (4)
const uint HLOADS = BT * HCH / WG;                 // h chunks a thread a slice (2 NBT)
const bool WIDE_R = HIDDEN % 8u == 0u;             // R rows start 16-byte aligned
const bool WIDE_H = HIDDEN % 4u == 0u && STATE_OFFSET % 4u == 0u;   // so do h rows
shared f16vec2 As[64u * SS];                       // R rows [gate * 16 + unit][k]
shared f16vec2 Bs[BT * SS];                        // h rows [batch row][k]: the column-major B
shared float Cs[GATES_IN_PASS * BT * U];           // sums [gate][batch row][unit]

#define MATA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define MATB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define MATC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// Half i of R as the low 16 bits (R is float16 pairs, the low half first).
uint halfR(uint i)
{
    return (R[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu;
}

// The eight halves k .. k+7 of R row `row` (a row of R[dir][gate * hidden + unit]), zero past
// the layer's units (`live` false) and past HIDDEN.
uvec4 chunkR(uint row, bool live, uint k)
{
    if (!live || k >= HIDDEN) return uvec4(0u);
    uint i = row * HIDDEN + k;
    if (WIDE_R) return R4[i >> 3u];
    uvec4 c;
    [[unroll]] for (uint w = 0u; w < 4u; w++) {
        uint lo = k + 2u * w < HIDDEN ? halfR(i + 2u * w) : 0u;
        uint hi = k + 2u * w + 1u < HIDDEN ? halfR(i + 2u * w + 1u) : 0u;
        c[w] = lo | (hi << 16u);
    }
    return c;
}

// The four floats k .. k+3 of the state row from float `at` (zero past the batch and HIDDEN).
vec4 chunkH(uint at, bool live, uint k)
{
    if (!live || k >= HIDDEN) return vec4(0.0);
    if (WIDE_H) return uintBitsToFloat(S4[(at + k) >> 2u]);
    vec4 h;
    [[unroll]] for (uint w = 0u; w < 4u; w++) h[w] = k + w < HIDDEN ? LOADF(S, at + k + w) : 0.0;
    return h;
}

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint sg = gl_SubgroupID;
    uint d = gl_WorkGroupID.y;
    uint u0 = gl_WorkGroupID.x * U;
    uint b0 = gl_WorkGroupID.z * BT;
    uint s = pc.step;

    // This thread's staged chunks: R row tid / RCH (+ 16 each load), chunk tid % RCH; h row
    // tid / HCH (+ 8 each load), chunk tid % HCH.
    uint rRow[RLOADS];
    bool rLive[RLOADS];
    [[unroll]] for (uint l = 0u; l < RLOADS; l++) {
        uint r = tid / RCH + l * (WG / RCH);         // gate * 16 + unit in the workgroup
        uint g = r / U, u = u0 + r % U;
        rLive[l] = r < MR && u < HIDDEN;
        rRow[l] = d * GH + (FIRST_GATE + g) * HIDDEN + u;
    }
    uint rk = (tid % RCH) * 8u;
    uint hAt[HLOADS];
    bool hLive[HLOADS];
    [[unroll]] for (uint l = 0u; l < HLOADS; l++) {
        uint b = b0 + tid / HCH + l * (WG / HCH);
        hLive[l] = b < BATCH;
        hAt[l] = stateBase(d, s) + b * HIDDEN;       // h of step s, or a GRU's r * h (pass 2)
    }
    uint hk = (tid % HCH) * 4u;

    MATC acc[4];
    [[unroll]] for (uint j = 0u; j < 4u; j++) acc[j] = MATC(0.0);

    uvec4 ra[RLOADS];
    vec4 hb[HLOADS];
    [[unroll]] for (uint l = 0u; l < RLOADS; l++) ra[l] = chunkR(rRow[l], rLive[l], rk);
    [[unroll]] for (uint l = 0u; l < HLOADS; l++) hb[l] = chunkH(hAt[l], hLive[l], hk);
    for (uint k0 = 0u; k0 < HIDDEN; k0 += KT) {
        barrier();   // the previous slice's operands are read
        [[unroll]] for (uint l = 0u; l < RLOADS; l++) {
            uint at = (tid / RCH + l * (WG / RCH)) * SS + rk / 2u;
            As[at] = unpackFloat2x16(ra[l].x);
            As[at + 1u] = unpackFloat2x16(ra[l].y);
            As[at + 2u] = unpackFloat2x16(ra[l].z);
            As[at + 3u] = unpackFloat2x16(ra[l].w);
        }
        [[unroll]] for (uint l = 0u; l < HLOADS; l++) {
            uint at = (tid / HCH + l * (WG / HCH)) * SS + hk / 2u;
            Bs[at] = f16vec2(hb[l].xy);
            Bs[at + 1u] = f16vec2(hb[l].zw);
        }
        barrier();
        uint k1 = k0 + KT;   // the next slice's loads, in flight during the multiply-adds
        if (k1 < HIDDEN) {
            [[unroll]] for (uint l = 0u; l < RLOADS; l++) ra[l] = chunkR(rRow[l], rLive[l], k1 + rk);
            [[unroll]] for (uint l = 0u; l < HLOADS; l++) hb[l] = chunkH(hAt[l], hLive[l], k1 + hk);
        }
        [[unroll]] for (uint kk = 0u; kk < KT; kk += 16u) {
            [[unroll]] for (uint j = 0u; j < 4u; j++) {
                uint p = sg * PER + j;               // (gate p / NBT, batch block p % NBT)
                if (j < PER && p < PAIRS) {
                    MATA a;
                    coopMatLoad(a, As, (p / NBT) * U * SS + kk / 2u, SS, gl_CooperativeMatrixLayoutRowMajor);
                    MATB b;
                    coopMatLoad(b, Bs, (p % NBT) * 16u * SS + kk / 2u, SS, gl_CooperativeMatrixLayoutColumnMajor);
                    acc[j] = coopMatMulAdd(a, b, acc[j]);
                }
            }
        }
    }
    // The sums, [gate][batch row][unit]: C is units x batch rows, stored column-major.
    [[unroll]] for (uint j = 0u; j < 4u; j++) {
        uint p = sg * PER + j;
        if (j < PER && p < PAIRS)
            coopMatStore(acc[j], Cs, ((p / NBT) * BT + (p % NBT) * 16u) * U, U, gl_CooperativeMatrixLayoutColumnMajor);
    }
    barrier();

    // Cell updates, one (unit, batch row) a thread in turn, units fastest (the Xw and state
    // reads of 16 neighbouring units are contiguous).
    for (uint c = tid; c < BT * U; c += WG) {
        uint unit = c % U, row = c / U;
        vec4 rec = vec4(0.0);
        [[unroll]] for (uint g = 0u; g < 4u; g++)
            if (g < GATES_IN_PASS) rec[g] = Cs[(g * BT + row) * U + unit];
        updateCell(d, u0 + unit, b0 + row, s, rec);
    }
}
