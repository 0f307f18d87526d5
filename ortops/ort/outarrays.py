"""Output arrays the custom-op hook reads results into and reuses, one set per thread.

onnxruntime-extensions copies every array a Python op returns into ORT's output tensor before
the op's kernel returns (``PyCustomOpKernel::Compute`` in its pyop/pyfunc.cc), so what the hook
hands over is dead by the next run. A fresh numpy array of tens of MB is fresh memory: glibc
maps an allocation over its mmap threshold (at most 32 MiB) anew each time, and every first
touch of a page faults. Measured on the 2-core development machine: one thread's copy of 52 MB
into a fresh array 10.4-11.2 ms, into a warm one 4.4 ms. Reusing the hook's output arrays
takes those faults out of every run after the first.

One set per thread, because ORT runs nodes on several threads at once (its parallel executor,
and several ``run`` calls on one session). Only arrays of at least :data:`MIN_BYTES` are kept
(smaller ones come from malloc's heap, already touched), and at most :data:`MAX_BYTES` per
thread, the least recently used dropped first. They stay until then or until the thread ends
(a closed session's arrays too: they are the thread's, not the session's).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import numpy as np

#: Smallest array kept (smaller ones cost no page faults worth saving).
MIN_BYTES = 1 << 20
#: Most bytes kept per thread.
MAX_BYTES = 256 << 20


class _Kept(threading.local):
    def __init__(self):
        self.arrays: OrderedDict = OrderedDict()
        self.nbytes = 0
        self.active = 0


_kept = _Kept()


class reused:
    """Context manager: while active on this thread, :func:`arrays` gives the kept set."""

    def __enter__(self):
        _kept.active += 1
        return self

    def __exit__(self, *exc):
        _kept.active -= 1
        return False


def active() -> bool:
    """Whether the calling thread is inside :class:`reused` (the hook's call)."""
    return _kept.active > 0


def arrays(names, shapes: dict, dtype) -> dict:
    """Arrays for the outputs ``names`` of ``shapes`` in ``dtype``, reused from this thread's
    earlier calls where the same output had the same shape and dtype (the caller copies
    them out before the next call on this thread)."""
    dtype = np.dtype(dtype)
    out = {}
    for name in names:
        shape = tuple(shapes[name])
        nbytes = math.prod(shape) * dtype.itemsize      # math.prod: 0.2 us, np.prod 5 us
        if nbytes < MIN_BYTES:
            continue
        key = (name, shape, dtype.str)
        a = _kept.arrays.pop(key, None)
        if a is None:
            a = np.empty(shape, dtype)
            _kept.nbytes += nbytes
        _kept.arrays[key] = a       # most recently used last
        out[name] = a
    # The arrays given now are the last len(out) entries: drop older ones only.
    while _kept.nbytes > MAX_BYTES and len(_kept.arrays) > len(out):
        _, a = _kept.arrays.popitem(last=False)
        _kept.nbytes -= a.nbytes
    return out


def clear() -> None:
    """Drop this thread's kept arrays."""
    _kept.arrays.clear()
    _kept.nbytes = 0
