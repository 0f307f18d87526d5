#version 450
#extension GL_GOOGLE_include_directive : require
// Pass 4a: Y, every step's hidden state, in the requested layout, zero at the steps past
// each row's length, rounded to half for float16 models. Each invocation writes one 32-bit
// word (one float32, or two float16 values), so no two invocations share a word.
#include "common.glsl"

layout(local_size_x = 64) in;

layout(constant_id = 0) const uint DIRS = 1;
layout(constant_id = 1) const uint BATCH = 1;
layout(constant_id = 2) const uint HIDDEN = 1;
layout(constant_id = 3) const uint SEQ = 1;
layout(constant_id = 4) const uint LAYOUT = 0;     // 0: [seq, dirs, batch, hidden]; 1: [batch, seq, dirs, hidden]
layout(constant_id = 5) const uint HAS_LENS = 0;
layout(constant_id = 6) const uint REVERSE0 = 0;
layout(constant_id = 7) const uint STATE_OFFSET = 0;

layout(std430, binding = 0) readonly buffer StateBuf { uint S[]; };
layout(std430, binding = 1) readonly buffer LensBuf { int Lens[]; };
layout(std430, binding = 2) writeonly buffer YBuf { uint Y[]; };

const uint PLANE = DIRS * BATCH * HIDDEN;
const uint TOTAL = SEQ * PLANE;
#if FLOAT16
const uint WORDS = (TOTAL + 1u) / 2u;   // two halves per word
#else
const uint WORDS = TOTAL;
#endif

float value(uint e)
{
    if (e >= TOTAL) return 0.0;
    uint u = e % HIDDEN;
    uint t, d, b;
    if (LAYOUT == 0u) {
        b = (e / HIDDEN) % BATCH;
        d = (e / (HIDDEN * BATCH)) % DIRS;
        t = e / PLANE;
    } else {
        d = (e / HIDDEN) % DIRS;
        t = (e / (HIDDEN * DIRS)) % SEQ;
        b = e / (HIDDEN * DIRS * SEQ);
    }
    uint len = HAS_LENS != 0u ? uint(Lens[b]) : SEQ;
    if (t >= len) return 0.0;
    bool backwards = (d == 1u) || (REVERSE0 != 0u);
    uint s = backwards ? len - 1u - t : t;   // the step that produced time t
    return LOADF(S, STATE_OFFSET + (s + 1u) * PLANE + (d * BATCH + b) * HIDDEN + u);
}

void main()
{
    // A grid-stride loop over words: the host caps the workgroup count at Vulkan's
    // guaranteed 65535, and Y can hold more than 65535 * 64 words.
    for (uint w = gl_GlobalInvocationID.x; w < WORDS; w += gl_NumWorkGroups.x * 64u) {
#if FLOAT16
        Y[w] = PACK2(value(2u * w), value(2u * w + 1u));
#else
        Y[w] = OUTBITS(value(w));
#endif
    }
}
