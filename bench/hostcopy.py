"""The host side's yardstick: one thread's memcpy bandwidth, and the bound on a layer call's
host work that the benchmark reports against it.

A layer call copies X into mapped memory and Y (and the final states) out into fresh numpy
arrays; nothing in it needs more than one pass over those bytes. The bound is
``FIXED_MS + FACTOR x (bytes in + bytes out) / bandwidth``: a fixed part for the submit, wait
and Python (the empty round trip measured 0.04 ms on the H200, docs/perf.md) and the copies at
the speed one thread copies with numpy. Two bandwidths, measured once per run on the same
size: a *fresh* copy (``np.copy``: its destination is new memory, first-touch page faults
included, as a fresh output array is) and a *warm* one (``np.copyto`` into memory already
touched). The bound uses the warm one (what reused buffers reach); both are in the report.
"""

from __future__ import annotations

from typing import Dict

import numpy as np

from ortops.cells import CELLS
from ortops.timing import median_s

FIXED_MS = 0.05
FACTOR = 1.2

__all__ = ["FIXED_MS", "FACTOR", "memcpy_bandwidth", "host_bound_ms", "io_bytes"]


def memcpy_bandwidth(nbytes: int, repeat: int = 7) -> Dict[str, float]:
    """Bytes per second of one thread copying ``nbytes`` with numpy: {"fresh": .., "warm": ..}
    (medians of ``repeat`` copies; one untimed copy first)."""
    n = max(1, int(nbytes) // 4)
    src = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)

    # np.copy's result is dropped at once: glibc returns a large block, so the next is new.
    fresh = median_s(lambda: np.copy(src), repeat)
    warm = median_s(lambda: np.copyto(dst, src), repeat, warmup_runs=0)
    return {"fresh": src.nbytes / fresh, "warm": src.nbytes / warm, "bytes": float(src.nbytes)}


def host_bound_ms(bytes_in: int, bytes_out: int, bandwidth: float) -> float:
    """The host-work bound of a call moving ``bytes_in`` + ``bytes_out`` at ``bandwidth`` B/s."""
    return FIXED_MS + FACTOR * (bytes_in + bytes_out) / bandwidth * 1e3


def io_bytes(shape, dtype):
    """Bytes in (X) and out (Y and the final states) of one call of ``shape``."""
    cell, seq, batch, inp, hidden, direction = shape
    dirs = 2 if direction == "bidirectional" else 1
    states = len(CELLS[cell].outputs) - 1
    return np.dtype(dtype).itemsize * (seq * batch * inp + dirs * batch * hidden * (seq + states))
