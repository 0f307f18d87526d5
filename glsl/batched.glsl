// What the two batched step kernels share (glsl/step_batched.comp, v4: a thread per batch row;
// glsl/step_tiled.comp, v5: a register tile of several batch rows): how R is read in its
// batched layout RB[dir][position][unit][gate] (src/core/rnn/layer.cpp's batchedR, made once a plan
// first needs it), where position p = t * NI + i holds k = l + 32 i of the class l at tree
// position t (l = t with its five bits reversed).
// Included after common.glsl and cell.glsl.

// A four-gate cell's (LSTM) gates of one unit at one position: one 16-byte (float32, and
// exact mode in both precisions: its RB holds float32 words) or 8-byte (float16) read.
layout(std430, binding = 1) readonly buffer RBuf4 { uvec4 R4[]; };
layout(std430, binding = 1) readonly buffer RBuf2 { uvec2 R2[]; };

// The pass's gates of R at RB element index i (gate FIRST_GATE of a unit at a position).
// Exact mode's RB holds float32 words in both precisions, already prepared (exact.glsl's
// LOADR): an LSTM's four gates are one 16-byte read there too.
vec4 loadR(uint i)
{
    if (GATES == 4u) {
#if FLOAT16 && !EXACT
        uvec2 w = R2[i >> 2u];
        return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
#else
        return uintBitsToFloat(R4[i >> 2u]);
#endif
    }
    vec4 r = vec4(0.0);
    [[unroll]] for (uint g = 0u; g < 4u; g++)
        if (g < GATES_IN_PASS) r[g] = LOADR(R, i + g);
    return r;
}
