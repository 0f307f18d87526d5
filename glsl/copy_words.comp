#version 450
// Copies a staged tensor into device-only memory (weights are uploaded once per layer).
// A grid-stride loop, so any size fits in the dispatch limits.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Push { uint count; } pc;

void main()
{
    uint stride = gl_NumWorkGroups.x * 64u;
    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += stride) {
        dst[i] = src[i];
    }
}
