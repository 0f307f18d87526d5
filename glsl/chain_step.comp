#version 450
// One link of a chain of dependent dispatches, used by the demo and by the barrier test:
// dst[i] = src[i] * 1664525 + 1013904223 (mod 2^32). Exact integer arithmetic, so a chain
// of any length has one right answer, and a step that reads a stale or half-written src
// shows up in the result (and, under synchronization validation, as a hazard).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Push { uint count; } pc;

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i < pc.count) {
        dst[i] = src[i] * 1664525u + 1013904223u;
    }
}
