"""The batched step kernels (glsl/step_batched.comp, v4, and glsl/step_tiled.comp, v5's
register tile) against the lanes kernel (glsl/step.comp).

All compute every recurrent product as 32 class sums combined by the same halving tree; the
batched kernels only assign the work differently (whole products in a thread's registers, R
in its own layout; v5 several batch rows and units a thread). So a layer must give the same
bits with any of them, and with every tiling, case by case: every cell and pass, options,
activation sets, hidden sizes around the class length (7, 32, 33, 45, 100), batches that leave
a tile partly empty, float32 and float16, sequence lengths (zeros included), initial states,
both modes.
"""

import numpy as np
import pytest

import ortops
from ortops import _vk, variants
from _cases import activation_params, layer_case, max_difference, rotation, same_bits, seed_of

LANES = None      # BATCHED_FROM that keeps every batch on the lanes kernel


@pytest.fixture(autouse=True)
def _step_kernels(monkeypatch):
    """These tests compare the step kernels, so the whole-sequence kernel, which the table
    chooses on a CPU device such as lavapipe, is kept out (tests/test_sequence_kernel.py)."""
    monkeypatch.setattr(variants, "SEQUENCE_STEPS", False)


def _case(op, direction, hidden, batch, dtype, seq=5, inp=11, **kw):
    return layer_case(seed_of(op, direction, hidden, batch, str(dtype), tuple(sorted(kw))), op, direction,
                      hidden, batch, dtype, seq, inp)


def _run(monkeypatch, op, direction, arrays, lens, *, batched_from, tiling=None, mode=None, **kw):
    """The layer's outputs with the batched kernel from ``batched_from`` and ``tiling``
    (upt, by, prefetch, ksplit, rows: ortops.variants.BATCHED_*; None: the shipped defaults)."""
    monkeypatch.setattr(variants, "BATCHED_FROM", batched_from)
    for name, value in (tiling or {}).items():
        monkeypatch.setattr(variants, "BATCHED_" + name.upper(), value)
    weights = {k: arrays[k] for k in ("W", "R", "B", "P") if k in arrays}
    layer = ortops.RecurrentLayer(op, **weights, direction=direction, mode=mode, **kw)
    states = {k: arrays[k] for k in ("initial_h", "initial_c") if k in arrays}
    return layer(arrays["X"], lens, **states)


def _assert_same_bits(a, b):
    assert same_bits(a, b), f"max difference {max_difference(a, b)}"


CASES = [
    # op, direction, hidden, batch, options
    ("LSTM", "bidirectional", 33, 9, {}),
    ("LSTM", "forward", 45, 13, {"clip": 0.6, "input_forget": 1}),
    ("LSTM", "reverse", 7, 17, {"activations": "rotate"}),
    ("LSTM", "bidirectional", 100, 11, {}),
    ("GRU", "bidirectional", 32, 10, {}),                           # two passes
    ("GRU", "forward", 45, 9, {"linear_before_reset": 1, "clip": 0.9}),
    ("GRU", "reverse", 33, 12, {"activations": "rotate"}),
    ("RNN", "bidirectional", 64, 9, {}),
    ("RNN", "forward", 7, 16, {"activations": "rotate"}),
]


def _options(op, direction, options):
    kw = dict(options)
    if kw.pop("activations", None):
        names = rotation(op, 3, 2 if direction == "bidirectional" else 1)
        alpha, beta = activation_params(names)
        kw.update(activations=names, activation_alpha=alpha or None, activation_beta=beta or None)
    return kw


# Exact mode compiles every pass again (slow on lavapipe): one case of each cell there.
EXACT_CASES = {0, 4, 8}
MATRIX = [pytest.param(*case, dtype, mode, id=f"{case[0]}-{case[1]}-{case[2]}-{case[3]}-{i}-"
                       f"{np.dtype(dtype).name}-{mode}")
          for i, case in enumerate(CASES) for dtype in (np.float32, np.float16)
          for mode in ("deterministic", "exact") if mode == "deterministic" or i in EXACT_CASES]


@pytest.mark.parametrize("op,direction,hidden,batch,options,dtype,mode", MATRIX)
def test_batched_kernel_gives_the_lanes_kernels_bits(monkeypatch, op, direction, hidden, batch,
                                                     options, dtype, mode):
    arrays, lens = _case(op, direction, hidden, batch, dtype)
    kw = _options(op, direction, options)
    lanes = _run(monkeypatch, op, direction, arrays, lens, batched_from=LANES, mode=mode, **kw)
    # Each case with the shipped tiling (before any other is set: at these batches, below 64,
    # v5's 4 rows x 2 units a thread, the walk split over 8, in both precisions), with v4's one
    # thread per sum and its walk split over 4 threads, and with the float32 default from batch
    # 64 (2 rows x 2 units x 2 groups).
    shipped = _run(monkeypatch, op, direction, arrays, lens, batched_from=1, mode=mode, **kw)
    batched = _run(monkeypatch, op, direction, arrays, lens, batched_from=1, mode=mode,
                   tiling=dict(upt=1, by=8, prefetch=1, ksplit=1, rows=1), **kw)
    split = _run(monkeypatch, op, direction, arrays, lens, batched_from=1, mode=mode,
                 tiling=dict(upt=1, by=8, prefetch=1, ksplit=4, rows=1), **kw)
    tiled = _run(monkeypatch, op, direction, arrays, lens, batched_from=1, mode=mode,
                 tiling=dict(upt=2, by=2, prefetch=1, ksplit=8, rows=2), **kw)
    _assert_same_bits(lanes, shipped)
    _assert_same_bits(lanes, batched)
    _assert_same_bits(lanes, split)
    _assert_same_bits(lanes, tiled)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("hidden,batch", [(45, 20), (45, 40), (45, 70), (390, 16), (390, 34)])
def test_shipped_defaults(monkeypatch, dtype, hidden, batch):
    # Nothing set: what ortops.variants ships runs with the lanes kernel's bits. At hidden 45 the
    # batched kernel from batch 32 (a batch of 20 stays on the lanes kernel; 40: two lane
    # groups, the second partly empty; 70: three), at hidden 390 from batch 16 (16: one lane
    # group, partly empty; 34: in float32 the table's 2-row tile of hidden 384-767 from batch 33).
    arrays, lens = _case("LSTM", "bidirectional", hidden, batch, dtype, seq=3)
    weights = {k: arrays[k] for k in ("W", "R", "B", "P")}
    states = {k: arrays[k] for k in ("initial_h", "initial_c")}
    layer = ortops.RecurrentLayer("LSTM", **weights, direction="bidirectional")
    shipped = layer(arrays["X"], lens, **states)
    batched = batch >= (16 if hidden >= 384 else 32)
    assert variants.step_kernel(batch, hidden) == ("step_batched" if batched else "step")
    assert ("RB" in layer._weights) == batched
    if batched:
        v = variants.batched_variant(hidden, np.dtype(dtype).name, batch=batch)
        assert v.shader == "step_tiled" and v.rows == (2 if hidden == 390 and batch >= 33 and dtype == np.float32
                                                       else 4)
    lanes = _run(monkeypatch, "LSTM", "bidirectional", arrays, lens, batched_from=LANES)
    _assert_same_bits(lanes, shipped)


SPECIAL_CASES = [("LSTM", {"clip": 0.7}), ("LSTM", {}), ("GRU", {}), ("RNN", {})]


def _nan_as_canonical(outputs):
    """Every NaN as 0x7FC00000: docs/special_values.md leaves a NaN's sign and payload
    unspecified in the default mode (where two NaNs meet, x86 keeps whichever operand its
    compiler put first, and the two kernels are compiled apart); its position is specified."""
    return [np.where(np.isnan(y), np.float32(np.nan), y).astype(y.dtype) for y in outputs]


@pytest.mark.parametrize("mode", ["deterministic", "exact"])
@pytest.mark.parametrize("op,options", SPECIAL_CASES)
def test_special_values_give_the_lanes_kernels_bits(monkeypatch, op, options, mode):
    # NaN, +-Inf and -0 in X, the initial state and R (tests/test_special_values.py checks the
    # lanes kernel against the float64 reference and ORT CPU; the batched kernels must give its
    # bits: zero signs and Inf included, NaN at the same places; exact mode writes every NaN
    # as the canonical one, so there every bit), at a batch of 37 (two lane groups).
    arrays, lens = _case(op, "bidirectional", 33, 37, np.float32)
    arrays["X"][0, 3, 1], arrays["X"][1, 33, 4] = np.nan, np.inf
    arrays["initial_h"][0, 5, 2], arrays["initial_h"][1, 34, 0] = -np.inf, -0.0
    arrays["R"][0, 7, 3], arrays["R"][1, 20, 32] = np.nan, -np.inf
    lanes = _run(monkeypatch, op, "bidirectional", arrays, lens, batched_from=LANES, mode=mode,
                 **options)
    # The shipped tile (hidden 33, float32: 4 rows x 2 units), v4's former default (1x2x1x8)
    # and the float32 tile of hidden 384-767 (2 rows x 2 units x 2 groups).
    shipped = _run(monkeypatch, op, "bidirectional", arrays, lens, batched_from=1, mode=mode,
                   **options)
    batched = _run(monkeypatch, op, "bidirectional", arrays, lens, batched_from=1, mode=mode,
                   tiling=dict(upt=1, by=2, prefetch=1, ksplit=8, rows=1), **options)
    tiled = _run(monkeypatch, op, "bidirectional", arrays, lens, batched_from=1, mode=mode,
                 tiling=dict(upt=2, by=2, prefetch=1, ksplit=8, rows=2), **options)
    assert any(np.isnan(y).any() for y in lanes)     # the special values reached the outputs
    if mode == "deterministic":
        lanes, shipped, batched, tiled = (_nan_as_canonical(lanes), _nan_as_canonical(shipped),
                                          _nan_as_canonical(batched), _nan_as_canonical(tiled))
    _assert_same_bits(lanes, shipped)
    _assert_same_bits(lanes, batched)
    _assert_same_bits(lanes, tiled)


@pytest.mark.parametrize("upt,by,prefetch,ksplit,rows", [
    (1, 1, 1, 1, 1), (2, 8, 4, 1, 1), (4, 4, 2, 2, 1), (3, 2, 3, 4, 1), (1, 8, 8, 1, 1), (1, 4, 1, 8, 1),
    (2, 2, 2, 8, 1),
    # v5 (glsl/step_tiled.comp): 2, 4 and 8 rows a thread; every split of the walk (1 and 2 put
    # 5 and 4 pending levels in registers, 4 and 8 meet in 2 and 3 rounds); several units and
    # unit groups (3 units do not divide 45); prefetch that does not divide a class's length.
    (1, 1, 1, 1, 4), (2, 1, 1, 8, 4), (1, 2, 1, 8, 4), (2, 2, 2, 8, 2), (1, 1, 1, 8, 8),
    (3, 1, 3, 2, 2), (1, 2, 2, 4, 4), (4, 4, 1, 8, 4)])
def test_every_tiling_gives_the_same_bits(monkeypatch, upt, by, prefetch, ksplit, rows):
    arrays, lens = _case("LSTM", "bidirectional", 45, 37, np.float32)   # two lane groups
    lanes = _run(monkeypatch, "LSTM", "bidirectional", arrays, lens, batched_from=LANES)
    tiled = _run(monkeypatch, "LSTM", "bidirectional", arrays, lens, batched_from=1,
                 tiling=dict(upt=upt, by=by, prefetch=prefetch, ksplit=ksplit, rows=rows))
    _assert_same_bits(lanes, tiled)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op,batch", [("LSTM", 2), ("LSTM", 8), ("GRU", 5), ("RNN", 3)])
def test_lanes_kernel_at_small_batches_gives_the_batched_kernels_bits(monkeypatch, op, batch, dtype):
    # Batch 2-8: the lanes kernel's own split by element type (float32 2 rows a workgroup,
    # float16 up to 8; variants.hpp, LANES_FLOAT32_NB), against the batched kernel's bits.
    arrays, lens = _case(op, "bidirectional", 33, batch, dtype)
    lanes = _run(monkeypatch, op, "bidirectional", arrays, lens, batched_from=LANES)
    _assert_same_bits(lanes, _run(monkeypatch, op, "bidirectional", arrays, lens, batched_from=1))


def _rows_alone(monkeypatch, op, arrays, lens, rows, mode=None):
    """Each of ``rows`` batch rows run alone (batch 1: one row a lanes workgroup) by one layer,
    stacked back into the layout of the whole batch's outputs (Y [seq, dirs, batch, hidden],
    the states [dirs, batch, hidden])."""
    monkeypatch.setattr(variants, "BATCHED_FROM", LANES)
    weights = {k: arrays[k] for k in ("W", "R", "B", "P") if k in arrays}
    layer = ortops.RecurrentLayer(op, **weights, direction="bidirectional", mode=mode)
    batched = ("X", "initial_h", "initial_c")
    alone = [layer(arrays["X"][:, r:r + 1], lens[r:r + 1],
                   **{k: arrays[k][:, r:r + 1] for k in batched[1:] if k in arrays}) for r in rows]
    return [None if outs[0] is None else np.concatenate(outs, axis=-2) for outs in zip(*alone)]


def test_exact_mode_keeps_eight_rows_a_workgroup_with_the_same_bits(monkeypatch):
    # Mode exact keeps up to 8 batch rows a lanes workgroup in float32 (variants.hpp,
    # LANES_FLOAT32_NB: 2 rows lost 10 % there on the H200), the deterministic mode 2: each
    # row of exact's 8-row workgroups gets the bits it gets alone (one row a workgroup).
    deterministic = variants.step_variant(8, 4, "float32", "deterministic").nb
    assert variants.step_variant(8, 4, "float32", "exact").nb == 8 and deterministic == 2
    assert variants.step_variant(1, 4, "float32", "exact").nb == 1
    arrays, lens = _case("LSTM", "bidirectional", 33, 8, np.float32)
    rule = _run(monkeypatch, "LSTM", "bidirectional", arrays, lens, batched_from=LANES, mode="exact")
    _assert_same_bits(rule, _rows_alone(monkeypatch, "LSTM", arrays, lens, range(8), mode="exact"))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op,batch", [("LSTM", 7), ("GRU", 7), ("RNN", 9), ("LSTM", 9)])
def test_lanes_splits_of_the_rule_give_each_row_its_bits_alone(monkeypatch, op, batch, dtype):
    # The lanes kernel's split by batch and element type (variants.cpp, stepVariant): at batch
    # 7 float32 runs 2 rows a workgroup (the last partly empty) and float16 7, at batch 9 every
    # gate of a unit a thread over 8-row workgroups; hidden 45 leaves the last units partial.
    # The split never changes a sum's order: each row gets the bits it gets alone.
    gates = {"LSTM": 4, "GRU": 2, "RNN": 1}[op]
    v = variants.step_variant(batch, gates, np.dtype(dtype).name)
    assert v.nb == (min(batch, 8) if dtype == np.float16 or batch > 8 else 2)
    arrays, lens = _case(op, "bidirectional", 45, batch, dtype)
    rule = _run(monkeypatch, op, "bidirectional", arrays, lens, batched_from=LANES)
    _assert_same_bits(rule, _rows_alone(monkeypatch, op, arrays, lens, range(batch)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("rows", [2, 4, 8])
def test_register_tile_reads_h_at_any_alignment(monkeypatch, rows, dtype):
    # v5 reads the rows of h as one 8- or 16-byte word where the transposed planes start on
    # one (HT_OFFSET, from the state region's offset), word by word elsewhere: a caller's state
    # region 4, 8 and 12 bytes into its buffer takes every path; each gives the lanes' bits.
    # Hidden 64, batch 40: every class as long (a constant trip count), a tile partly empty.
    arrays, lens = _case("LSTM", "bidirectional", 64, 40, dtype)
    lanes = _run(monkeypatch, "LSTM", "bidirectional", arrays, lens, batched_from=LANES)
    monkeypatch.setattr(variants, "BATCHED_FROM", 1)
    for name, value in dict(upt=1, by=2, prefetch=2, ksplit=8, rows=rows).items():
        monkeypatch.setattr(variants, "BATCHED_" + name.upper(), value)
    weights = {k: arrays[k] for k in ("W", "R", "B", "P")}
    layer = ortops.RecurrentLayer("LSTM", **weights, direction="bidirectional")
    assert variants.batched_variant(64, np.dtype(dtype).name, batch=40).shader == "step_tiled"
    sizes = layer.scratch_sizes(5, 40)
    states = {k: arrays[k] for k in ("initial_h", "initial_c")}
    for offset in (0, 4, 8, 12):
        state = (layer.allocate(sizes.state + offset), offset)
        _assert_same_bits(lanes, layer(arrays["X"], lens, **states, state_scratch=state))


def test_batched_r_layout():
    # RB[d][t * NI + i][u][g] = R[d][g * H + u][l + 32 i], l = t with its bits reversed;
    # positions past the hidden size hold 0.
    rng = np.random.default_rng(3)
    d, g, h = 2, 3, 45
    R = rng.standard_normal((d, g * h, h)).astype(np.float32)
    rb = _vk.batched_r(R)
    ni = 2
    assert rb.shape == (d, 32 * ni, h, g)
    for t in (0, 1, 2, 3, 16, 31):
        l = int(f"{t:05b}"[::-1], 2)
        for i in range(ni):
            k = l + 32 * i
            want = R[:, np.arange(g)[:, None] * h + np.arange(h)[None, :], k] if k < h else 0
            got = rb[:, t * ni + i].transpose(0, 2, 1)
            assert np.array_equal(got, np.broadcast_to(want, got.shape))
