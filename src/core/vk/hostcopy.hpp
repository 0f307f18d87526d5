// Host copies of large ranges over several threads (the inputs into mapped memory, the outputs
// out of it).
//
// One thread's memcpy runs at a few GB/s, and the first touch of a fresh numpy output costs a
// page fault per 4 KiB page on top, so a large layer's host work was several times its GPU
// time (docs/perf.md, "Kernel choices"). Large ranges are split into chunks that a small
// persistent pool of threads and the calling thread claim one at a time; the page faults of a
// fresh target are then taken by several threads at once too. Below the threshold (two
// chunks) a plain memcpy is cheaper than waking anyone.
//
// Thread safety: any number of threads may copy at once (each call is its own job; the pool
// serves jobs in order and every caller works on its own job, so a call never waits for a
// busy pool). Callers release the GIL first; nothing here touches Python.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ortops {
namespace hostcopy {

struct Settings
{
    // Bytes a thread claims at once; ranges under two chunks are one memcpy.
    size_t chunk;
    // Threads of one copy, the caller included (1: always a plain memcpy).
    unsigned threads;
    // true: a persistent pool helps; false: std::thread per call (kept to measure against).
    bool pool;
};

Settings settings();
// Change the settings (tests lower the chunk to cross many boundaries with small arrays);
// threads is clamped to [1, 64], chunk to at least 1.
void configure(const Settings& s);

// Copy n bytes; the ranges must not overlap. Call without the GIL.
void copy(void* dst, const void* src, size_t n);

// Narrow n float32 values to float16 bits, rounding to nearest even (numpy's astype, and the
// F16C instruction used where the CPU has it); NaN stays NaN, quiet, with the top bits of its
// payload. numpy's own astype is several times slower than a copy of the same bytes. Same
// chunks and threads as copy (a chunk counted in source bytes). Call without the GIL.
void narrowToHalf(uint16_t* dst, const float* src, size_t n);

} // namespace hostcopy
} // namespace ortops
