"""The arithmetic order is fixed by the shapes, not by how the work is split over threads.

A batch row's result depends only on its own inputs and the layer: computed alone (the
one-row step kernel), inside a batch of up to eight (one R row per thread, several batch
rows per thread) or inside a batch above eight (a unit's gates per thread), it must come out
with the same bits, in both modes (exact mode's bits must not depend on the variant either,
or they would differ between devices whose limits pick different variants). Different kernels and tilings give the same bits only if none of them
reorders a sum.
"""

import numpy as np
import pytest

import ortops
from ortops import reference


def _case(op, seq, batch, inp, hidden, direction, seed=7):
    rng = np.random.default_rng(seed)
    g = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    d = 2 if direction == "bidirectional" else 1
    s = 1.0 / np.sqrt(hidden)
    X = rng.standard_normal((seq, batch, inp)).astype(np.float32)
    W = rng.uniform(-s, s, (d, g * hidden, inp)).astype(np.float32)
    R = rng.uniform(-s, s, (d, g * hidden, hidden)).astype(np.float32)
    B = rng.uniform(-s, s, (d, 2 * g * hidden)).astype(np.float32)
    lens = rng.integers(0, seq + 1, batch).astype(np.int32)
    return X, W, R, B, lens


@pytest.mark.parametrize("mode", ("deterministic", "exact"))
@pytest.mark.parametrize("op,direction,kw", [
    ("LSTM", "bidirectional", {}),
    ("GRU", "forward", {}),
    ("GRU", "reverse", {"linear_before_reset": 1}),
    ("RNN", "reverse", {}),
])
def test_a_rows_bits_do_not_depend_on_its_batch(op, direction, kw, mode):
    X, W, R, B, lens = _case(op, 4, 11, 9, 45, direction)
    layer = ortops.RecurrentLayer(op, W, R, B, direction=direction, mode=mode, **kw)
    big = layer(X, lens)                       # batch 11: the batched kernel
    small = layer(X[:, 3:8], lens[3:8])        # batch 5: the one-row-per-thread kernel
    ref = getattr(reference, op.lower())(X, W, R, B, lens, direction=direction, **kw)
    for got, want in zip(big, ref):
        assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    for row in (3, 5, 7):
        alone = layer(X[:, row:row + 1], lens[row:row + 1])   # batch 1: the one-row kernel
        for a, b, c in zip(big, small, alone):
            # Y is [seq, dirs, batch, hidden]; Y_h and Y_c [dirs, batch, hidden]
            pick = (lambda y, i: y[..., i, :])
            assert pick(a, row).tobytes() == pick(c, 0).tobytes()
            assert pick(a, row).tobytes() == pick(b, row - 3).tobytes()


@pytest.mark.parametrize("mode", ("deterministic", "exact"))
def test_projection_tiles_give_the_same_bits(monkeypatch, mode):
    # The 128 x 128 tile is chosen for large products only (too slow for lavapipe in CI);
    # lowering the threshold runs it on a small layer, which must match the 64 x 64 tile
    # bit for bit: both sum each output in increasing k from +0.
    import ortops.layer

    X, W, R, B, lens = _case("LSTM", 5, 3, 37, 20, "bidirectional")
    small = ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", mode=mode)(X, lens)
    monkeypatch.setattr(ortops.layer, "_LARGE_PROJECTION", 0)
    large = ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", mode=mode)(X, lens)
    for a, b in zip(small, large):
        assert a.tobytes() == b.tobytes()
