#version 450
#extension GL_GOOGLE_include_directive : require
// Pass 4b: Y_h (the state after each row's last valid step, state slot MaxLength, where
// ended rows carried theirs through) or Y_c (the LSTM cell state), in the requested layout,
// rounded to half for float16 models. A row of length 0 gives zeros.
#include "common.glsl"

layout(local_size_x = 64) in;

layout(constant_id = 0) const uint DIRS = 1;
layout(constant_id = 1) const uint BATCH = 1;
layout(constant_id = 2) const uint HIDDEN = 1;
layout(constant_id = 3) const uint SEQ = 1;
layout(constant_id = 4) const uint LAYOUT = 0;     // 0: [dirs, batch, hidden]; 1: [batch, dirs, hidden]
layout(constant_id = 5) const uint HAS_LENS = 0;
layout(constant_id = 6) const uint CELL_STATE = 0; // 0: Y_h, 1: Y_c
layout(constant_id = 7) const uint STATE_OFFSET = 0;
layout(constant_id = 8) const uint ZERO_EMPTY = 1; // a row of length 0 gives zeros

layout(std430, binding = 0) readonly buffer StateBuf { uint S[]; };
layout(std430, binding = 1) readonly buffer LensBuf { int Lens[]; };
layout(std430, binding = 2) writeonly buffer OutBuf { uint O[]; };

layout(push_constant) uniform Push { uint steps; } pc;   // MaxLength: the slot of the final state

const uint PLANE = DIRS * BATCH * HIDDEN;
#if FLOAT16
const uint WORDS = (PLANE + 1u) / 2u;   // two halves per word
#else
const uint WORDS = PLANE;
#endif

float value(uint e)
{
    if (e >= PLANE) return 0.0;
    uint u = e % HIDDEN;
    uint d, b;
    if (LAYOUT == 0u) {
        b = (e / HIDDEN) % BATCH;
        d = e / (HIDDEN * BATCH);
    } else {
        d = (e / HIDDEN) % DIRS;
        b = e / (HIDDEN * DIRS);
    }
    if (HAS_LENS != 0u && ZERO_EMPTY != 0u && Lens[b] == 0) return 0.0;
    uint i = (d * BATCH + b) * HIDDEN + u;
    uint src = CELL_STATE != 0u ? STATE_OFFSET + (SEQ + 1u) * PLANE + i
                                : STATE_OFFSET + pc.steps * PLANE + i;
    return LOADF(S, src);
}

void main()
{
    // A grid-stride loop over words (the host caps the workgroup count at 65535).
    for (uint w = gl_GlobalInvocationID.x; w < WORDS; w += gl_NumWorkGroups.x * 64u) {
#if FLOAT16
        O[w] = PACK2(value(2u * w), value(2u * w + 1u));
#else
        O[w] = OUTBITS(value(w));
#endif
    }
}
