"""The float32 attempts of issue 32, item 5 (bench/f32_attempts.py), against what ships.

The portable projection's staged slices (glsl/input_projection.comp's KT = 32 and STAGES = 2,
ortops.variants.PROJECTION_KT / PROJECTION_STAGES) sum each output in increasing k from +0 with
the same terms, and the steps' register tiles the script measures (32 sums a thread in two
shapes, two positions loaded at once) keep step.comp's class sums and tree: so a layer must give
the same bits with each as with what ships. Both projection tiles (TPT 4 and, through a lowered
LARGE_PROJECTION, 8), inputs that are and are not multiples of 32 (where KT = 32 falls back to
16), rows and columns that leave tiles partly empty, layout 1.
"""

import numpy as np
import pytest

import ortops
from ortops import layer as layer_module
from ortops import variants
from _cases import GATES, max_difference, same_bits, seed_of

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _portable(monkeypatch):
    """The portable projection and the step kernels everywhere (lavapipe's table would choose the
    CPU projection and the whole-sequence kernel)."""
    monkeypatch.setattr(variants, "CPU_PROJECTION", False)
    monkeypatch.setattr(variants, "SEQUENCE_STEPS", False)


def _case(op, direction, seq, batch, inp, hidden, layout=0):
    rng = np.random.default_rng(seed_of("projection_slices", op, direction, seq, batch, inp, hidden))
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    s = 1.0 / np.sqrt(hidden)
    X = rng.standard_normal((batch, seq, inp) if layout else (seq, batch, inp)).astype(np.float32)
    W = rng.uniform(-s, s, (d, g * hidden, inp)).astype(np.float32)
    R = rng.uniform(-s, s, (d, g * hidden, hidden)).astype(np.float32)
    B = rng.uniform(-s, s, (d, 2 * g * hidden)).astype(np.float32)
    return X, W, R, B


def _run(monkeypatch, case, op, direction, tunables, **kw):
    X, W, R, B = case
    for name in ("PROJECTION_KT", "PROJECTION_STAGES", "BATCHED_UPT", "BATCHED_BY", "BATCHED_PREFETCH",
                 "BATCHED_KSPLIT", "BATCHED_ROWS"):
        monkeypatch.setattr(variants, name, tunables.get(name))
    layer = ortops.RecurrentLayer(op, W, R, B, direction=direction, **kw)
    out = layer(X)
    projections = {plan.projection for pool in layer._plans.values() for plan in pool.free}
    assert projections == {"input_projection"}
    return out


SLICES = {"kt32": {"PROJECTION_KT": 32}, "stages2": {"PROJECTION_STAGES": 2},
          "kt32-stages2": {"PROJECTION_KT": 32, "PROJECTION_STAGES": 2}}

CASES = [
    # op, direction, seq, batch, input, hidden, options
    ("LSTM", "bidirectional", 3, 5, 64, 20, {}),             # K % 32 == 0: two 32-k slices
    ("LSTM", "forward", 2, 3, 96, 33, {"layout": 1}),         # N = 132: a partial tile
    ("GRU", "reverse", 4, 2, 48, 24, {}),                     # K % 32 != 0: KT 32 falls back
    ("RNN", "forward", 2, 7, 37, 16, {}),                     # K % 4 != 0
]


@pytest.mark.parametrize("large", (False, True), ids=("tpt4", "tpt8"))
@pytest.mark.parametrize("slices", sorted(SLICES))
@pytest.mark.parametrize("op,direction,seq,batch,inp,hidden,kw", CASES)
def test_projection_slices_give_the_shipped_bits(monkeypatch, op, direction, seq, batch, inp, hidden, kw, slices,
                                                 large):
    if large:
        monkeypatch.setattr(layer_module, "_LARGE_PROJECTION", 1)   # the 128 x 128 tile
    case = _case(op, direction, seq, batch, inp, hidden, kw.get("layout", 0))
    ship = _run(monkeypatch, case, op, direction, {}, **kw)
    tried = _run(monkeypatch, case, op, direction, SLICES[slices], **kw)
    for a, b in zip(ship, tried):
        assert same_bits(a, b), f"max difference {max_difference(a, b)}"


STEP_TILES = {
    "2x2x1x4x4": {"BATCHED_UPT": 2, "BATCHED_BY": 2, "BATCHED_PREFETCH": 1, "BATCHED_KSPLIT": 4, "BATCHED_ROWS": 4},
    "4x1x1x8x2": {"BATCHED_UPT": 4, "BATCHED_BY": 1, "BATCHED_PREFETCH": 1, "BATCHED_KSPLIT": 8, "BATCHED_ROWS": 2},
    "2x1x2x8x4": {"BATCHED_UPT": 2, "BATCHED_BY": 1, "BATCHED_PREFETCH": 2, "BATCHED_KSPLIT": 8, "BATCHED_ROWS": 4},
}


@pytest.mark.parametrize("tile", sorted(STEP_TILES))
def test_step_tiles_of_the_attempts_give_the_shipped_bits(monkeypatch, tile):
    # Batch 40 at hidden 48: the batched kernel (from batch 32 below hidden 384), two 32-row
    # tiles, the second partly empty; hidden 48 leaves the units' last group partly empty too.
    case = _case("LSTM", "bidirectional", 3, 40, 32, 48)
    ship = _run(monkeypatch, case, "LSTM", "bidirectional", {})
    assert variants.step_kernel(40, 48) == "step_batched"
    tried = _run(monkeypatch, case, "LSTM", "bidirectional", STEP_TILES[tile])
    for a, b in zip(ship, tried):
        assert same_bits(a, b), f"max difference {max_difference(a, b)}"
