"""The barrier mechanism: a 1,000-step dependent chain is exact and validation-clean with
the compute-to-compute barrier, and reported as a hazard without it."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from ortops.tools import chain

HERE = pathlib.Path(__file__).resolve().parent


def test_chain_of_1000_dispatches_is_exact():
    start = np.arange(4096, dtype=np.uint32) * np.uint32(2654435761)
    got = chain.run(start, 1000, repeat=2)
    np.testing.assert_array_equal(got, chain.expected(start, 1000))


def test_chain_result_depends_on_every_step():
    # Guards the test above: a chain one step short gives a different answer.
    start = np.arange(64, dtype=np.uint32)
    assert not np.array_equal(chain.run(start, 999), chain.expected(start, 1000))


def test_dispatch_beyond_the_workgroup_count_is_refused():
    # The binding refuses what Vulkan forbids rather than record it (lavapipe ran such a
    # dispatch without complaint; only the validation layer reported it).
    from ortops.device import context
    from ortops.shaders import spirv

    dev, ctx = context()
    buf = ctx.buffer(4, "device")
    prog = ctx.program(spirv("chain_step"), [buf, buf], [], 1)
    seq = ctx.sequence()
    # Each dimension whose limit leaves room for one more in a uint32 (z is 65,535 nearly
    # everywhere).
    tried = 0
    for axis, limit in enumerate(dev.max_workgroup_count):
        if limit < 2**32 - 1:
            counts = [1, 1, 1]
            counts[axis] = limit + 1
            with pytest.raises(ValueError, match=rf"dispatch of {counts[0]} x {counts[1]} x "
                                                 rf"{counts[2]} workgroups exceeds the device's "
                                                 r"maxComputeWorkGroupCount of \d+ x \d+ x \d+"):
                seq.dispatch(prog, *counts, [1])
            tried += 1
    assert tried
    seq.dispatch(prog, 1, 1, 1, [1])   # within the limits: recorded
    seq.eval()


_PROBE = """
import numpy as np
import pytest
from ortops.tools import chain
from ortops.device import validation_messages
start = np.arange(1024, dtype=np.uint32)
ok = np.array_equal(chain.run(start, 1000, barrier={barrier}), chain.expected(start, 1000))
hazards = [m for m in validation_messages() if "SYNC-HAZARD" in m]
print("RESULT", ok, len(hazards))
"""


def _probe(barrier: bool):
    # Always under validation, whatever the suite's switch: this test is about the layer.
    env = dict(os.environ, ORTOPS_VALIDATION="1", VK_LAYER_SETTINGS_PATH=str(HERE))
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(barrier=barrier)],
        env=env, capture_output=True, text=True, timeout=600, cwd=str(HERE),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")][-1]
    _, ok, hazards = line.split()
    return ok == "True", int(hazards)


def test_chain_with_barrier_is_validation_clean():
    ok, hazards = _probe(barrier=True)
    assert ok
    assert hazards == 0


def test_chain_without_barrier_is_reported_as_hazard():
    _, hazards = _probe(barrier=False)
    assert hazards > 0
