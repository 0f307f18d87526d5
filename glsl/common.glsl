// Shared by every pass: how tensors of the layer's precision are read and written, and the
// activation functions.
//
// Every tensor buffer is declared as uint[]: float32 tensors are one word per element,
// float16 tensors two halves per word (element i in word i/2, the low half first, which is
// numpy's little-endian float16 memory layout), so no feature beyond core Vulkan 1.0 storage
// buffers is needed, and the same buffers serve both precisions. Scratch (input projection,
// state) is always float32.

#ifndef FLOAT16
#define FLOAT16 0
#endif

#if FLOAT16
#define LOADT(buf, i) (unpackHalf2x16(buf[(i) >> 1u])[(i) & 1u])
#else
#define LOADT(buf, i) (uintBitsToFloat(buf[i]))
#endif
#define LOADF(buf, i) (uintBitsToFloat(buf[i]))
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

float sigmoid_(float x)
{
    return 1.0 / (1.0 + exp(-x));
}

// tanh through exp(2|x|): a driver's tanh may compute (e^2x - 1)/(e^2x + 1) and give
// inf/inf = NaN for large |x|; this form saturates to +-1 and keeps NaN.
float tanh_(float x)
{
    float t = 1.0 - 2.0 / (exp(2.0 * abs(x)) + 1.0);
    return x < 0.0 ? -t : t;
}

#ifdef GENERAL_ACTIVATIONS
float activate(uint code, float x, float alpha, float beta)
{
    // Comparisons are written so that a NaN input gives NaN (as ONNX Runtime's do).
    switch (code) {
        case ACT_SIGMOID: return sigmoid_(x);
        case ACT_TANH: return tanh_(x);
        case ACT_RELU: return x < 0.0 ? 0.0 : x;
        case ACT_AFFINE: return alpha * x + beta;
        case ACT_LEAKYRELU: return x < 0.0 ? alpha * x : x;
        case ACT_THRESHOLDEDRELU: return x > alpha ? x : 0.0;
        case ACT_SCALEDTANH: return alpha * tanh_(beta * x);
        case ACT_HARDSIGMOID: {
            float y = alpha * x + beta;
            return y < 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y);
        }
        case ACT_ELU: return x >= 0.0 ? x : alpha * (exp(x) - 1.0);
        case ACT_SOFTSIGN: return x / (1.0 + abs(x));
        case ACT_SOFTPLUS: return x > 20.0 ? x : log(1.0 + exp(x));
    }
    return x;
}
#endif
