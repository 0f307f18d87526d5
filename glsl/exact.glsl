// Exact mode (docs/exact.md): the same bits on every conformant Vulkan device.
//
// Included by common.glsl when the shader is compiled with -DEXACT=1. Vulkan requires only
// add, subtract and multiply (and comparisons, selects, integer operations and bit casts) to
// be correctly rounded; exp, log, tanh, division and fused multiply-add are each device's
// choice. So here:
//   - every float add, subtract and multiply is a function whose result is a `precise`
//     variable: SPIR-V NoContraction, so no compiler may fuse it into an fma with its
//     neighbour (tests/test_exact_spirv.py checks that every OpFAdd/OpFSub/OpFMul of the
//     exact binaries carries the decoration, and that they hold no other float arithmetic:
//     no OpFDiv, no OpFNegate, no float extended instruction, no half conversion);
//   - denormals: whether a device keeps or flushes float32 denormals is its choice
//     (shaderDenormPreserveFloat32 is false on NVIDIA), so the code flushes them itself:
//     every load and every arithmetic result below FLT_MIN in magnitude becomes a zero of
//     its sign (ftz_; R, loaded at every multiply-add, is flushed once on the host instead:
//     LOADR below; where a result provably cannot be a denormal, the flush is left out:
//     ADDN, SUBN, MULN below). No operation ever sees a denormal operand, and a denormal
//     result, kept by one device and flushed by another, is ±0 on both.
//   - exp, log, reciprocal (and so division), sigmoid, tanh and softplus are built here from
//     those operations and integer bit manipulation; their error bounds, measured against
//     float64, are in docs/exact.md (tests/test_exact_functions.py).
//   - float16 tensors are converted to and from float32 by integer code (round to nearest
//     even, overflow to Inf, NaN kept): Vulkan does not fix the rounding of a conversion.

float ftz_(float x)
{
    uint u = floatBitsToUint(x);
    return (u & 0x7F800000u) == 0u ? uintBitsToFloat(u & 0x80000000u) : x;
}

float fadd_(float a, float b)
{
    precise float r = a + b;
    return ftz_(r);
}

float fsub_(float a, float b)
{
    precise float r = a - b;
    return ftz_(r);
}

float fmul_(float a, float b)
{
    precise float r = a * b;
    return ftz_(r);
}

// Two places where a flush cannot change anything, written without it (each flush is three
// integer operations on the chain of dependent operations the step's latency is made of):
//  - a Horner step p * v + c of the polynomials below, where |p * v| <= |c| / 2 and
//    |c| >= 1/5040 (above 2^-13): a denormal p * v (kept, or flushed by the device) changes nothing, since
//    it is below half an ulp of the sum, and the sum is a normal number;
//  - a Newton step of the reciprocal, whose operands and results all lie in [0.47, 2].
// Both are still `precise` (NoContraction): no fma.
float horner_(float p, float v, float c)
{
    precise float r = p * v + c;
    return r;
}

float newton_(float y, float m)
{
    precise float r = y * (2.0 - m * y);
    return r;
}

// Adds, subtracts and multiplies whose correctly rounded result can never be a denormal: the
// flush would be the identity, so it is left out (three integer operations on the step's
// chain each: 11 per sigmoid, 14 per tanh; what it gained: docs/exact.md, "Cost"). Each use says why its result cannot be a denormal for operands that are zero,
// normal, infinite or NaN (as loads and flushed results are), and, where a denormal operand
// can reach it (a denormal clip value, which clip returns as it is), why the bits are those
// the flushes gave. The arguments below recur:
//  - c * x with |c| >= 1 (or x an integer, |x| >= 1, and c normal): |c * x| >= |x| >= 2^-126,
//    and rounding is monotonic with 2^-126 representable, so the result is 0 or >= 2^-126;
//  - 1 + x, 1 - x for any x: if |x| <= 1/2 the result is >= 1/2 (a denormal x, kept or
//    taken as 0 by the device, gives 1); otherwise x is a multiple of 2^-24, so the exact
//    sum is 0 or at least 2^-24 in magnitude;
//  - a sum whose exact value is a multiple of 2^-m (m < 126): 0 or >= 2^-m.
float faddn_(float a, float b)
{
    precise float r = a + b;
    return r;
}

float fsubn_(float a, float b)
{
    precise float r = a - b;
    return r;
}

float fmuln_(float a, float b)
{
    precise float r = a * b;
    return r;
}

#define ADDN(a, b) faddn_(a, b)
#define SUBN(a, b) fsubn_(a, b)
#define MULN(a, b) fmuln_(a, b)
#define HORNER(p, v, c) horner_(p, v, c)
#define ADD(a, b) fadd_(a, b)
#define SUB(a, b) fsub_(a, b)
#define MUL(a, b) fmul_(a, b)
// A sign flip on the bits (OpFNegate's exactness is not spelled out by every spec version).
#define NEG(x) uintBitsToFloat(floatBitsToUint(x) ^ 0x80000000u)

float abs_(float x)
{
    return uintBitsToFloat(floatBitsToUint(x) & 0x7FFFFFFFu);
}

float with_sign_(float x, uint sign)
{
    return uintBitsToFloat(floatBitsToUint(x) | sign);
}

// 2^k for k in [-126, 127], from its exponent bits.
float pow2i_(int k)
{
    return uintBitsToFloat(uint(k + 127) << 23);
}

// x * 2^k for |x| in [1/2, 2) and k in [-150, 128] (exp_'s and recip_'s): two exact multiplies
// by powers of two (the second flushes a result below FLT_MIN and overflows to Inf). The first
// needs no flush: k / 2 is in [-75, 64], so its result is at least 2^-76.
float scale2_(float x, int k)
{
    int k1 = k / 2;
    return MUL(MULN(x, pow2i_(k1)), pow2i_(k - k1));
}

// Products and sums with an activation parameter: mulc_ and addc_ in common.glsl, shared with
// the default mode.

// ---- float16 <-> float32 by integer code

float half_to_float_(uint h)
{
    uint s = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1Fu;
    uint m = h & 0x3FFu;
    if (e == 0x1Fu) return uintBitsToFloat(s | 0x7F800000u | (m << 13));   // Inf, NaN
    if (e != 0u) return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
    if (m == 0u) return uintBitsToFloat(s);
    // A subnormal half m * 2^-24 is a normal float32.
    uint p = uint(findMSB(m));
    return uintBitsToFloat(s | ((p + 103u) << 23) | ((m << (23u - p)) & 0x7FFFFFu));
}

// Round to nearest, ties to even; beyond the largest half, Inf; NaN stays NaN (0x7E00).
uint float_to_half_(float f)
{
    uint u = floatBitsToUint(f);
    uint s = (u >> 16) & 0x8000u;
    uint a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return 0x7E00u;              // NaN: the canonical quiet NaN
    if (a >= 0x477FF000u) return s | 0x7C00u;        // >= 65520 rounds to Inf
    uint m, shift;
    if (a >= 0x38800000u) {                           // a normal half: rebias the exponent
        m = a - 0x38000000u;
        shift = 13u;
    } else {
        if (a <= 0x33000000u) return s;               // <= 2^-25 rounds to 0
        m = (a & 0x7FFFFFu) | 0x800000u;              // a subnormal half, in units of 2^-24
        shift = 126u - (a >> 23);
    }
    uint h = m >> shift;
    uint rem = m & ((1u << shift) - 1u);
    uint halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u) != 0u)) h += 1u;
    return s | h;
}

#if FLOAT16
#define LOADT(buf, i) half_to_float_((buf[(i) >> 1u] >> (16u * ((i) & 1u))) & 0xFFFFu)
#else
#define LOADT(buf, i) ftz_(uintBitsToFloat(buf[i]))
#endif
#define LOADF(buf, i) ftz_(uintBitsToFloat(buf[i]))
// R in the step kernels (glsl/step.comp's R, glsl/batched.glsl's RB), read once per
// multiply-add of every step: in exact mode the layer uploads it as float32 words in both
// precisions, already what LOADT would have made of each element (src/core/rnn/layer.cpp's
// exactR, the same integer rules done once on the host): a float16 R widened by
// half_to_float_'s rule, a float32 R with its denormals flushed by ftz_'s. So the load is a
// plain bit cast, with no decode and no flush, and gives LOADT's bits:
//  - float16: half_to_float_ is exact and its result is never a float32 denormal (the
//    smallest half, 2^-24, is a normal float32), so ftz_ of it would be the identity; the
//    kernels got these very words from the decode before, now they read them;
//  - float32: ftz_ is idempotent, so ftz_ of an already flushed word is that word.
// NaN payloads are kept by both rules (tests/test_exact_weights.py checks the host's rules
// against these functions' on every half and on float32 edge patterns).
#define LOADR(buf, i) uintBitsToFloat(buf[i])
#define PACK2(a, b) (float_to_half_(a) | (float_to_half_(b) << 16))

// An output word: a NaN's sign and payload are each device's (x86 makes 0 * Inf 0xFFC00000,
// NVIDIA 0x7FFFFFFF), so every NaN leaves as the canonical quiet NaN 0x7FC00000.
uint out_bits_(float v)
{
    return isnan_(v) ? 0x7FC00000u : floatBitsToUint(v);
}
#define OUTBITS(v) out_bits_(v)

// ---- exp: Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2 (+ slack), Taylor to r^7,
// scaled by 2^k through the exponent bits.
const float LN2_HI_ = 0.693145751953125;          // 0x3F317200: 15 bits, so k * LN2_HI_ is exact
const float LN2_LO_ = 1.428606765330187e-06;      // 0x35BFBE8E: ln2 - LN2_HI_
const float LOG2E_ = 1.4426950408889634;

float exp_(float x)
{
    if (isnan_(x)) return x;
    if (x > 88.72283172607422) return uintBitsToFloat(0x7F800000u);   // e^x > FLT_MAX
    if (x < -104.0) return 0.0;                                       // below every float32
    // None of the reduction's results can be a denormal (ADDN, SUBN, MULN: no flush):
    //  - x * LOG2E_: a product with a constant above 1;
    //  - t +- 0.5 with the sign of t: at least 1/2;
    //  - kf * LN2_HI_, kf * LN2_LO_: 0, or at least 0.69 and 1.4e-6 (k an integer);
    //  - x - kf * LN2_HI_: x itself when k = 0 (kf * LN2_HI_ is +0); else |x| > 1/4 (|t| is
    //    about 1/2 or more), so x is a multiple of 2^-25, kf * LN2_HI_ (exact) one of 2^-16,
    //    and the difference is 0 or at least 2^-25;
    //  - minus kf * LN2_LO_: the same x when k = 0; else both terms are multiples of 2^-43
    //    (kf * LN2_LO_ is at least 2^-20, the first 0 or at least 2^-25): 0 or >= 2^-43.
    // A denormal x (a denormal clip value reaching sigmoid_: clip returns it as it is) makes t
    // and r denormals or zeros, as the device treats them, where the flushes made them zeros:
    // k = 0 either way (t +- 0.5 rounds to +-0.5), each Horner step then gives its constant
    // exactly, and the result is 1 as before.
    float t = MULN(x, LOG2E_);
    int k = int(ADDN(t, t < 0.0 ? -0.5 : 0.5));    // conversion truncates: exact
    float kf = float(k);                            // |k| <= 150: exact
    float r = SUBN(SUBN(x, MULN(kf, LN2_HI_)), MULN(kf, LN2_LO_));
    float p = 1.0 / 5040.0;
    p = HORNER(p, r, 1.0 / 720.0);
    p = HORNER(p, r, 1.0 / 120.0);
    p = HORNER(p, r, 1.0 / 24.0);
    p = HORNER(p, r, 1.0 / 6.0);
    p = HORNER(p, r, 0.5);
    p = HORNER(p, r, 1.0);
    p = HORNER(p, r, 1.0);
    return scale2_(p, k);
}

// ---- 1/d: d = ±m 2^e with m in [1, 2) from the bits; y0 = 48/17 - 32/17 m (relative error
// at most 1/17), three Newton steps y = y (2 - m y) (error squared each: 1/17 -> 3.5e-3 ->
// 1.2e-5 -> 1.5e-10, then the float32 rounding of the steps), scaled by 2^-e.
float recip_(float d)
{
    uint u = floatBitsToUint(d);
    uint s = u & 0x80000000u;
    uint a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return d;                                   // NaN
    if (a == 0x7F800000u) return uintBitsToFloat(s);                 // 1/±Inf = ±0
    if (a == 0u) return uintBitsToFloat(s | 0x7F800000u);            // 1/±0 = ±Inf
    int e = int(a >> 23) - 127;                    // d is normal (operands are flushed)
    float m = uintBitsToFloat((a & 0x7FFFFFu) | 0x3F800000u);
    // m in [1, 2): the seed's product lies in [0.47, 0.95) and the seed in (0.47, 0.95]
    // (no flush: neither can be a denormal).
    float y = SUBN(1.411764705882353, MULN(0.47058823529411764, m));
    y = newton_(y, m);
    y = newton_(y, m);
    y = newton_(y, m);
    return with_sign_(scale2_(y, -e), s);
}

float div_(float a, float b)
{
    return MUL(a, recip_(b));
}

// ---- log(y) for y >= 1 finite: y = m 2^e with m in [sqrt(1/2), sqrt(2)), s = (m-1)/(m+1),
// log m = 2 atanh s = 2s + s^3 (2/3 + s^2 (2/5 + ...)), |s| <= 0.1716.
float log_ge1_(float y)
{
    uint a = floatBitsToUint(y);
    int e = int(a >> 23) - 127;
    float m = uintBitsToFloat((a & 0x7FFFFFu) | 0x3F800000u);
    if (m > 1.4142135623730951) {
        m = MUL(m, 0.5);
        e += 1;
    }
    float f = SUB(m, 1.0);                          // exact (Sterbenz)
    float s = MUL(f, recip_(ADD(2.0, f)));
    float z = MUL(s, s);
    float p = 2.0 / 11.0;
    p = HORNER(p, z, 2.0 / 9.0);
    p = HORNER(p, z, 2.0 / 7.0);
    p = HORNER(p, z, 2.0 / 5.0);
    p = HORNER(p, z, 2.0 / 3.0);
    float lm = ADD(ADD(s, s), MUL(MUL(s, z), p));
    float ef = float(e);
    return ADD(MUL(ef, LN2_HI_), ADD(MUL(ef, LN2_LO_), lm));
}

// e^x - 1 for x < 0 (Elu): above -0.3 the Taylor series to x^8 (first term left out below
// 2e-10 relative), so no cancellation near 0; below, e^x - 1 (no cancellation there).
float expm1_neg_(float x)
{
    if (x > -0.3) {
        float p = 1.0 / 40320.0;
        p = HORNER(p, x, 1.0 / 5040.0);
        p = HORNER(p, x, 1.0 / 720.0);
        p = HORNER(p, x, 1.0 / 120.0);
        p = HORNER(p, x, 1.0 / 24.0);
        p = HORNER(p, x, 1.0 / 6.0);
        p = HORNER(p, x, 0.5);
        return ADD(x, MUL(MUL(x, x), p));
    }
    return SUB(exp_(x), 1.0);
}

// ---- the activations built on them (NaN handled by the caller, activate(), and here where
// a default-activation kernel calls sigmoid_/tanh_ directly).

// 1 / (1 + e^-x): +Inf gives 1, -Inf gives 1/Inf = 0.
float sigmoid_(float x)
{
    if (isnan_(x)) return x;
    return recip_(ADDN(1.0, exp_(NEG(x))));        // 1 + (e^-x >= 0) >= 1: no flush
}

// |x| < 0.3: the odd Taylor series to x^13 (first term left out below 1.2e-10 relative), so
// no cancellation near 0 and tanh(±0) = ±0; else 1 - 2/(e^2|x| + 1) with the sign of x
// (saturates to ±1 when e^2|x| overflows).
float tanh_(float x)
{
    if (isnan_(x) || iszero_(x)) return x;
    float ax = abs_(x);
    if (ax < 0.3) {
        float z = MUL(x, x);
        float p = 21844.0 / 6081075.0;
        p = HORNER(p, z, -1382.0 / 155925.0);
        p = HORNER(p, z, 62.0 / 2835.0);
        p = HORNER(p, z, -17.0 / 315.0);
        p = HORNER(p, z, 2.0 / 15.0);
        p = HORNER(p, z, -1.0 / 3.0);
        // The last sum keeps its flush: x may be a denormal here (a denormal clip value, which
        // clip returns as it is), and then x + (-+0) is x on a device that keeps it.
        return ADD(x, MUL(MUL(x, z), p));
    }
    // No flush below: 2|x| >= 0.6; e + 1 >= 1; 2 * (1 / (e + 1)) is 0 or a normal (the
    // reciprocal is flushed, and doubling it is exact); 1 - that: the 1 - x rule above.
    float t = SUBN(1.0, MULN(2.0, recip_(ADDN(exp_(ADDN(ax, ax)), 1.0))));
    return with_sign_(t, floatBitsToUint(x) & 0x80000000u);
}

// log(1 + e^x) for x <= 20: log1p(u) with u = e^x as log(1 + u) + (u - ((1 + u) - 1)) / (1 + u),
// the second term restoring what rounding 1 + u lost (so e^-20 gives 2.06e-9, not 0).
float softplus_(float x)
{
    float u = exp_(x);
    float y = ADD(1.0, u);
    return ADD(log_ge1_(y), MUL(SUB(u, SUB(y, 1.0)), recip_(y)));
}

#define EXP(x) exp_(x)
#define EXPM1_NEG(x) expm1_neg_(x)
#define DIV(a, b) div_(a, b)
#define ABS(x) abs_(x)
#define LOG1P_EXP(x) softplus_(x)
