#version 450
#extension GL_GOOGLE_include_directive : require
// Pass 2: the first hidden state (state slot 0) and the cell state, from initial_h /
// initial_c or zeros. The state buffer holds, from STATE_OFFSET:
//   H[slot 0..SEQ][dir][batch][hidden]   every step's hidden state (slot s+1 = after step s)
//   C[dir][batch][hidden]                LSTM cell state, updated in place
//   G[2][dir][batch][hidden]             GRU (linear_before_reset = 0): z and r * h
#include "common.glsl"

layout(local_size_x = 64) in;

layout(constant_id = 0) const uint DIRS = 1;
layout(constant_id = 1) const uint BATCH = 1;
layout(constant_id = 2) const uint HIDDEN = 1;
layout(constant_id = 3) const uint SEQ = 0;
layout(constant_id = 4) const uint LAYOUT = 0;
layout(constant_id = 5) const uint HAS_H0 = 0;
layout(constant_id = 6) const uint HAS_C0 = 0;
layout(constant_id = 7) const uint HAS_CELL = 0;
layout(constant_id = 8) const uint STATE_OFFSET = 0;
// The batched step kernel's transposed plane 0 (glsl/step_batched.comp), when it runs.
layout(constant_id = 9) const uint TRANSPOSED = 0;
layout(constant_id = 10) const uint NI = 1;
layout(constant_id = 11) const uint B32 = 32;
layout(constant_id = 12) const uint HT_OFFSET = 0;

layout(std430, binding = 0) readonly buffer H0Buf { uint H0[]; };
layout(std430, binding = 1) readonly buffer C0Buf { uint C0[]; };
layout(std430, binding = 2) buffer StateBuf { uint S[]; };

void init(uint i, uint total)
{
    uint u = i % HIDDEN;
    uint b = (i / HIDDEN) % BATCH;
    uint d = i / (HIDDEN * BATCH);
    // initial_h / initial_c are [dirs, batch, hidden] (layout 0) or [batch, dirs, hidden].
    uint src = LAYOUT == 0u ? i : (b * DIRS + d) * HIDDEN + u;
    float h = HAS_H0 != 0u ? LOADT(H0, src) : 0.0;
    STOREF(S, STATE_OFFSET + i, h);
    if (TRANSPOSED != 0u) {
        STOREF(S, transposedIndex(HT_OFFSET, 0u, DIRS, d, NI, B32, u, b), h);
    }
    if (HAS_CELL != 0u) {
        uint c = STATE_OFFSET + (SEQ + 1u) * total + i;
        STOREF(S, c, HAS_C0 != 0u ? LOADT(C0, src) : 0.0);
    }
}

void main()
{
    // A grid-stride loop: the host caps the workgroup count at Vulkan's guaranteed 65535.
    uint total = DIRS * BATCH * HIDDEN;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * 64u) {
        init(i, total);
    }
}
