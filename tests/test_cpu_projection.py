"""The CPU projection (glsl/input_projection_cpu.comp: a column of Xw an invocation, W's row in
registers, every row walked) against the tiled projection (glsl/input_projection.comp).

Both sum each output in increasing k from +0 with one float32 accumulator, so a layer must give
the same bits with either: both precisions, both modes, inputs that are and are not multiples
of 4, layout 1, row counts that are not multiples of the walk's rows, columns that are not
multiples of the workgroup, W held in registers or read from memory; and the table chooses it
on CPU devices only (CPU_PROJECTION in src/core/rnn/variants.hpp).
"""

import numpy as np
import pytest

import ortops
from ortops import variants
from _cases import GATES, max_difference, same_bits, seed_of

pytestmark = pytest.mark.gpu


def _case(op, direction, seq, batch, inp, hidden, dtype, layout=0):
    rng = np.random.default_rng(seed_of("cpu_projection", op, direction, seq, batch, inp, hidden, str(dtype)))
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    s = 1.0 / np.sqrt(hidden)
    X = rng.standard_normal((batch, seq, inp) if layout else (seq, batch, inp)).astype(dtype)
    W = rng.uniform(-s, s, (d, g * hidden, inp)).astype(dtype)
    R = rng.uniform(-s, s, (d, g * hidden, hidden)).astype(dtype)
    B = rng.uniform(-s, s, (d, 2 * g * hidden)).astype(dtype)
    lens = rng.integers(0, seq + 1, batch).astype(np.int32)
    lens[0] = seq
    return X, W, R, B, lens


def _run(monkeypatch, case, op, direction, *, cpu, rows=None, w_regs=None, **kw):
    X, W, R, B, lens = case
    monkeypatch.setattr(variants, "CPU_PROJECTION", cpu)
    monkeypatch.setattr(variants, "CPU_PROJECTION_ROWS", rows)
    monkeypatch.setattr(variants, "CPU_PROJECTION_W_REGS", w_regs)
    layer = ortops.RecurrentLayer(op, W, R, B, direction=direction, **kw)
    out = layer(X, lens)
    projections = {plan.projection for pool in layer._plans.values() for plan in pool.free}
    assert projections == {"input_projection_cpu" if cpu else "input_projection"}
    return out


CASES = [
    # op, direction, seq, batch, input, hidden, options
    ("LSTM", "bidirectional", 7, 3, 37, 20, {}),            # K % 4 != 0, rows % 4 != 0
    ("LSTM", "forward", 5, 2, 64, 33, {"layout": 1}),       # N = 132: a partial workgroup
    ("GRU", "reverse", 6, 1, 12, 70, {"linear_before_reset": 1}),
    ("RNN", "forward", 9, 5, 3, 16, {}),
]


@pytest.mark.parametrize("dtype", (np.float32, np.float16))
@pytest.mark.parametrize("mode", ("deterministic", "exact"))
@pytest.mark.parametrize("op,direction,seq,batch,inp,hidden,kw", CASES)
def test_cpu_projection_gives_the_tiled_bits(monkeypatch, op, direction, seq, batch, inp, hidden, kw, mode, dtype):
    case = _case(op, direction, seq, batch, inp, hidden, dtype, kw.get("layout", 0))
    want = _run(monkeypatch, case, op, direction, cpu=False, mode=mode, **kw)
    got = _run(monkeypatch, case, op, direction, cpu=True, mode=mode, **kw)
    for a, b in zip(got, want):
        assert same_bits(a, b), f"max difference {max_difference(a, b)}"


@pytest.mark.parametrize("rows,w_regs,columns", [(1, True, None), (3, True, None), (8, False, 1), (16, False, 2),
                                                 (5, False, 3)])
def test_cpu_projection_splits_give_the_same_bits(monkeypatch, rows, w_regs, columns):
    case = _case("LSTM", "bidirectional", 11, 2, 40, 24, np.float32)
    want = _run(monkeypatch, case, "LSTM", "bidirectional", cpu=False)
    monkeypatch.setattr(variants, "CPU_PROJECTION_COLUMNS", columns)
    got = _run(monkeypatch, case, "LSTM", "bidirectional", cpu=True, rows=rows, w_regs=w_regs)
    for a, b in zip(got, want):
        assert same_bits(a, b), f"max difference {max_difference(a, b)}"


def test_the_table_chooses_it_on_cpu_devices_only(monkeypatch):
    monkeypatch.delenv("ORTOPS_CPU_PROJECTION", raising=False)
    monkeypatch.setattr(variants, "CPU_PROJECTION", variants.TABLE)
    X, W, R, B, lens = _case("RNN", "forward", 3, 1, 8, 8, np.float32)
    layer = ortops.RecurrentLayer("RNN", W, R, B)
    layer(X, lens)
    projections = {plan.projection for pool in layer._plans.values() for plan in pool.free}
    want = "input_projection_cpu" if layer.device.type == "cpu" else "input_projection"
    assert projections == {want}
