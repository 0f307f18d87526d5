// Shared by every pass: the float controls, how tensors of the layer's precision are read and
// written, and the activation functions.
//
// Every tensor buffer is declared as uint[]: float32 tensors are one word per element,
// float16 tensors two halves per word (element i in word i/2, the low half first, which is
// numpy's little-endian float16 memory layout), so no feature beyond core Vulkan 1.0 storage
// buffers is needed, and the same buffers serve both precisions. Scratch (input projection,
// state) is always float32.

// ---- IEEE special values (docs/special_values.md)
// Every pass that does float arithmetic includes this file, so each declares the execution
// mode SignedZeroInfNanPreserve for 32-bit floats (SPV_KHR_float_controls, core in Vulkan
// 1.2; 4466 is its capability, 4461 the mode, 32 the float width). Without it a Vulkan
// compiler may assume that no operand or result is NaN or +-Inf and ignore the sign of zero:
// NVIDIA's turned clip's compare-and-select into a NaN-dropping min/max, so an LSTM with clip
// gave finite numbers for a NaN input. All arithmetic is float32 in both precisions (float16
// tensors are unpacked to and packed from float32 by unpackHalf2x16 / packHalf2x16, which take
// and give 32-bit floats), so the SPIR-V has no 16-bit float type and needs no 16-bit mode.
// ortops.device.require_ieee refuses a device without shaderSignedZeroInfNanPreserveFloat32;
// tests/test_float_controls.py checks every installed .spv for the mode.
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4466], 4461, 32);

#ifndef FLOAT16
#define FLOAT16 0
#endif

#ifndef EXACT
#define EXACT 0
#endif

#if !EXACT
// Arithmetic as written; the exact variant (exact.glsl) routes the same operations through
// functions that forbid contraction and flush denormals.
#define ADD(a, b) ((a) + (b))
#define SUB(a, b) ((a) - (b))
#define MUL(a, b) ((a) * (b))
// Exact mode's forms without the denormal flush, for results that cannot be denormals
// (exact.glsl): here the same operations as above.
#define SUBN(a, b) ((a) - (b))
#define NEG(x) (-(x))
#if FLOAT16
#define LOADT(buf, i) (unpackHalf2x16(buf[(i) >> 1u])[(i) & 1u])
#define PACK2(a, b) packHalf2x16(vec2(a, b))
#else
#define LOADT(buf, i) (uintBitsToFloat(buf[i]))
#endif
#define LOADF(buf, i) (uintBitsToFloat(buf[i]))
// R in the step kernels: the layer's element type, as uploaded (exact mode reads a float32
// copy prepared at upload, exact.glsl).
#define LOADR(buf, i) LOADT(buf, i)
#define OUTBITS(v) floatBitsToUint(v)
#endif
#define STOREF(buf, i, v) (buf[i] = floatBitsToUint(v))

// Activation codes: the index in ortops.activations.ACTIVATIONS.
#define ACT_SIGMOID 0u
#define ACT_TANH 1u
#define ACT_RELU 2u
#define ACT_AFFINE 3u
#define ACT_LEAKYRELU 4u
#define ACT_THRESHOLDEDRELU 5u
#define ACT_SCALEDTANH 6u
#define ACT_HARDSIGMOID 7u
#define ACT_ELU 8u
#define ACT_SOFTSIGN 9u
#define ACT_SOFTPLUS 10u

// NaN and zero tested on the bits. The mode above forbids a compiler to fold isnan(x), x != x
// or x == 0.0 ? x : ... as if no NaN and no -0 existed; integer compares cannot be folded so
// even by one that ignored it, and they leave every finite result's arithmetic unchanged.
bool isnan_(float x)
{
    return (floatBitsToUint(x) & 0x7FFFFFFFu) > 0x7F800000u;
}

bool iszero_(float x)
{
    return (floatBitsToUint(x) & 0x7FFFFFFFu) == 0u;
}

#if EXACT
#include "exact.glsl"
#endif

// Products and sums with an activation parameter, a specialization constant the driver's
// compiler sees: lavapipe folds 0 * x to 0 (LeakyRelu with alpha 0 gave 0 for -Inf, not NaN,
// with the float controls declared), a compiler may fold x + 0 to x (wrong for x = -0). When
// the constant is a zero, the IEEE result is written out here instead, so no folding can
// change it; any other constant takes the plain operation (the branch folds away), so the
// default mode's bits are unchanged where a parameter is not zero. Both modes use these.
float mulc_(float c, float x)
{
    if (!iszero_(c)) return MUL(c, x);
    if ((floatBitsToUint(x) & 0x7F800000u) == 0x7F800000u) return uintBitsToFloat(0x7FC00000u);
    return uintBitsToFloat((floatBitsToUint(c) ^ floatBitsToUint(x)) & 0x80000000u);
}

float addc_(float x, float c)
{
    if (!iszero_(c)) return ADD(x, c);
    // x + (+0) is x, except -0 + +0 = +0; x + (-0) is x.
    return (floatBitsToUint(c) == 0u && floatBitsToUint(x) == 0x80000000u) ? 0.0 : x;
}

#define MULC(c, x) mulc_(c, x)
#define ADDC(x, c) addc_(x, c)

// The transposed state the batched step kernel reads (glsl/step_batched.comp): plane p of
// [plane][dir][position][batch row, padded to b32], from float `base` of the state buffer.
// Element k of a row sits at the position where that kernel's sums take it: class l = k % 32
// at tree position bitrev5(l), i = k / 32 within it, so position bitrev5(l) * ni + i.
uint transposedIndex(uint base, uint plane, uint dirs, uint d, uint ni, uint b32, uint k, uint b)
{
    uint position = (bitfieldReverse(k & 31u) >> 27u) * ni + (k >> 5u);
    return base + ((plane * dirs + d) * 32u * ni + position) * b32 + b;
}

#if !EXACT
#define EXPM1_NEG(x) (exp(x) - 1.0)
#define DIV(a, b) ((a) / (b))
#define ABS(x) abs(x)
#define LOG1P_EXP(x) log(1.0 + exp(x))

// 1 / (1 + e^-x): +Inf gives 1, -Inf gives 1 / Inf = 0, NaN gives NaN (arithmetic only).
float sigmoid_(float x)
{
    return 1.0 / (1.0 + exp(-x));
}

// tanh through exp(2|x|): a driver's tanh may compute (e^2x - 1)/(e^2x + 1) and give
// inf/inf = NaN for large |x|; this form saturates to +-1 (+-Inf too) and keeps NaN.
// tanh(+-0) = +-0: x itself, since x < 0 is false for -0 and the select alone gave +0 (seen as
// a +0 in Y where ONNX Runtime and the reference give -0: h = o * tanh(c) with c = -0).
float tanh_(float x)
{
    float t = 1.0 - 2.0 / (exp(2.0 * abs(x)) + 1.0);
    if (iszero_(x)) return x;
    return x < 0.0 ? -t : t;
}

#endif  // !EXACT

#ifdef GENERAL_ACTIVATIONS
float activate(uint code, float x, float alpha, float beta)
{
    // NaN in, NaN out, for every activation but ThresholdedRelu, whose definition is the
    // comparison x > alpha, false for NaN: 0 (as in the reference and ONNX Runtime). Relu and
    // HardSigmoid keep NaN where ONNX Runtime CPU gives 0 (docs/special_values.md). Tested on
    // the bits, so that no compiler can turn a compare-and-select below into a NaN-dropping
    // max or min.
    if (isnan_(x)) return code == ACT_THRESHOLDEDRELU ? 0.0 : x;
    switch (code) {
        case ACT_SIGMOID: return sigmoid_(x);
        case ACT_TANH: return tanh_(x);
        // Relu and HardSigmoid clamp with <= so that -0 gives +0 (IEEE 754-2019 max(0, -0)).
        case ACT_RELU: return x <= 0.0 ? 0.0 : x;
        case ACT_AFFINE: return ADDC(MULC(alpha, x), beta);
        case ACT_LEAKYRELU: return x < 0.0 ? MULC(alpha, x) : x;
        case ACT_THRESHOLDEDRELU: return x > alpha ? x : 0.0;
        case ACT_SCALEDTANH: return MULC(alpha, tanh_(MULC(beta, x)));
        case ACT_HARDSIGMOID: {
            float y = ADDC(MULC(alpha, x), beta);   // NaN also for alpha = 0 and x = +-Inf
            if (isnan_(y)) return y;
            return y <= 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y);
        }
        case ACT_ELU: return x >= 0.0 ? x : MULC(alpha, EXPM1_NEG(x));
        case ACT_SOFTSIGN: return DIV(x, ADD(1.0, ABS(x)));
        case ACT_SOFTPLUS: return x > 20.0 ? x : LOG1P_EXP(x);
    }
    return x;
}
#endif
