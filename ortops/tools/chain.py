"""A chain of dependent dispatches through ping-pong buffers: the demo and the barrier proof.

Step i reads the buffer step i-1 wrote and writes the other one, exactly as the recurrent
layers carry their hidden state from step to step. Its result is exact (integer arithmetic),
so a step that ran before the previous one finished changes the answer; under the validation
layer a missing barrier is reported as a hazard even where the driver happens to serialise.
"""

from __future__ import annotations

import numpy as np

from ortops.device import context
from ortops.shaders import spirv

_MUL = np.uint32(1664525)
_ADD = np.uint32(1013904223)
GROUP = 64  # local_size_x of glsl/chain_step.comp


def expected(start: np.ndarray, steps: int) -> np.ndarray:
    """What ``steps`` links of the chain give, computed on the host."""
    x = start.astype(np.uint32).copy()
    with np.errstate(over="ignore"):
        for _ in range(steps):
            x = x * _MUL + _ADD
    return x


def run(start: np.ndarray, steps: int, *, barrier: bool = True, device=None, repeat: int = 1):
    """Run ``steps`` dependent dispatches on ``start`` (uint32) and return the result.

    ``barrier=False`` leaves out the compute-to-compute barrier between steps: only for
    showing that validation reports the hazard. The sequence is recorded once and submitted
    ``repeat`` times, as a plan's sequence is.
    """
    start = np.ascontiguousarray(start, dtype=np.uint32)
    _, ctx = context(device)
    a = ctx.buffer(start.nbytes, "device")
    b = ctx.buffer(start.nbytes, "device")
    code = spirv("chain_step")
    forward = ctx.program(code, [a, b], [], 1)
    backward = ctx.program(code, [b, a], [], 1)
    groups = -(-start.size // GROUP)
    seq = ctx.sequence()
    # Write-after-read against the previous submission's last reads of `a`.
    seq.barrier("compute", "transfer")
    seq.upload([a])
    seq.barrier("transfer", "compute")
    for i in range(steps):
        seq.dispatch(forward if i % 2 == 0 else backward, groups, 1, 1, [start.size])
        if barrier and i + 1 < steps:
            seq.barrier("compute", "compute")
    last = b if steps % 2 else a
    seq.download([last])
    out = np.empty_like(start)
    for _ in range(repeat):
        a.write(start)
        seq.eval()
        last.read(out)
    return out
