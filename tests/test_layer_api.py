"""RecurrentLayer's API: reuse across inputs and shapes, ``outputs=``, ``max_length``,
caller-supplied scratch, ``scratch_sizes``, argument errors, and the storage-binding limit.

Numerical agreement with the reference is tests/test_kernels.py's subject; here a layer's
results are compared bit for bit with a fresh layer (the functional API) or with the same
layer's default run, and with the reference only where a test needs an independent check.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import ortops
import ortops.layer
from ortops import reference
from ortops.layer import RecurrentLayer, UnsupportedLayerError
from ortops.compare import TOLERANCE as TOL, scaled_error
from _cases import GATES, OUTPUTS

FUNCTIONAL = {"LSTM": ortops.lstm, "GRU": ortops.gru, "RNN": ortops.rnn}
REFERENCE = {"LSTM": reference.lstm, "GRU": reference.gru, "RNN": reference.rnn}
# (op, linear_before_reset): a GRU with linear_before_reset = 0 runs two passes per step and
# keeps z and r * h in its state scratch; with 1, one pass and no extra scratch.
CELLS = {"LSTM": ("LSTM", 0), "GRU": ("GRU", 0), "GRU-lbr": ("GRU", 1), "RNN": ("RNN", 0)}
# Every cell in float32, and an LSTM in float16 (each new shape or scratch placement compiles
# its kernels, which is slow on lavapipe).
CELL_RUNS = [pytest.param(c, np.float32, id=f"{c}-float32") for c in CELLS]
CELL_RUNS += [pytest.param("LSTM", np.float16, id="LSTM-float16")]


# --------------------------------------------------------------------------- helpers


def make_weights(op, *, input_size=6, hidden=7, directions=2, dtype=np.float32, seed=0):
    """W, R, B (and P for an LSTM), keyed as the API names them."""
    rng = np.random.default_rng(seed)
    G, D, H = GATES[op], directions, hidden

    def draw(shape, scale):
        return rng.uniform(-scale, scale, shape).astype(np.float32).astype(dtype)

    w = {"W": draw((D, G * H, input_size), 1.5 / np.sqrt(input_size)),
         "R": draw((D, G * H, H), 1.5 / np.sqrt(H)),
         "B": draw((D, 2 * G * H), 0.5)}
    if op == "LSTM":
        w["P"] = draw((D, 3 * H), 0.8)
    return w


def make_inputs(op, w, *, seq, batch, lens=None, initial=True, seed=1, layout=0):
    """X (and sequence_lens, initial states) for weights ``w``, keyed as the API names them."""
    rng = np.random.default_rng(seed)
    dtype = w["W"].dtype
    D, _, input_size = w["W"].shape
    H = w["R"].shape[2]

    def draw(shape, scale):
        return rng.uniform(-scale, scale, shape).astype(np.float32).astype(dtype)

    x = {"X": draw((seq, batch, input_size) if layout == 0 else (batch, seq, input_size), 1.0)}
    if lens is not None:
        x["sequence_lens"] = np.asarray(lens, dtype=np.int32)
    if initial:
        state = (D, batch, H) if layout == 0 else (batch, D, H)
        x["initial_h"] = draw(state, 0.8)
        if op == "LSTM":
            x["initial_c"] = draw(state, 0.8)
    return x


def new_layer(op, w, **attrs):
    return RecurrentLayer(op, w["W"], w["R"], w.get("B"), w.get("P"), **attrs)


def bidirectional_layer(cell, dtype, seed):
    """(op, weights, attributes, layer) of a bidirectional layer of one of the CELLS runs."""
    op, lbr = CELLS[cell]
    attrs = {"linear_before_reset": lbr} if op == "GRU" else {}
    w = make_weights(op, dtype=dtype, seed=seed)
    attrs["direction"] = "bidirectional"
    return op, w, attrs, new_layer(op, w, **attrs)


def call(layer, x, **kwargs):
    return layer(x["X"], x.get("sequence_lens"), x.get("initial_h"), x.get("initial_c"),
                 **kwargs)


def assert_bits(got, expected, what):
    """Outputs (None where not requested) equal bit for bit."""
    assert len(got) == len(expected), what
    names = OUTPUTS["LSTM"] if len(got) == 3 else OUTPUTS["GRU"]
    for name, a, b in zip(names, got, expected):
        if b is None:
            assert a is None, f"{what}: {name} should be None"
            continue
        assert a is not None, f"{what}: {name} is None"
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {name} dtype/shape"
        assert a.tobytes() == b.tobytes(), f"{what}: {name} has different bits"


# --------------------------------------------------------------------------- reuse


@pytest.mark.parametrize("cell, dtype", CELL_RUNS)
def test_layer_reuse_with_different_inputs(cell, dtype):
    # One layer, many calls: new values, new optional inputs, a new shape, then the first
    # again. Each call equals a fresh layer's (the functional API).
    op, w, attrs, layer = bidirectional_layer(cell, dtype, seed=11)
    runs = [dict(seq=5, batch=3, lens=None, initial=False, seed=1),
            dict(seq=5, batch=3, lens=[5, 0, 3], initial=True, seed=2),
            dict(seq=5, batch=3, lens=[2, 4, 5], initial=True, seed=3),   # same plan, new values
            dict(seq=3, batch=9, lens=None, initial=True, seed=4),
            dict(seq=5, batch=3, lens=None, initial=False, seed=5)]       # the first plan again
    previous = None
    for k, run in enumerate(runs):
        x = make_inputs(op, w, **run)
        got = call(layer, x)
        fresh = FUNCTIONAL[op](**x, **w, **attrs)
        assert_bits(got, fresh, f"call {k} ({run})")
        if previous is not None and got[0].shape == previous[0].shape:
            assert got[0].tobytes() != previous[0].tobytes(), f"call {k} repeats the last result"
        previous = got
        # And the results are right, not merely repeatable.
        expected = REFERENCE[op](**x, **w, **attrs)
        for a, e in zip(got, expected):
            assert scaled_error(a, e) <= TOL[np.dtype(dtype)], f"call {k}"


def test_layer_rebuilds_dropped_plans():
    # A layer keeps 8 plans. Twelve plans of one shape (with and without sequence_lens and
    # initial states, three output sets), then the first again: it is rebuilt and gives the
    # same bits, and so does every other.
    w = make_weights("LSTM", seed=13)
    layer = new_layer("LSTM", w, direction="bidirectional")
    keys = list(itertools.product((None, [4, 0, 2]), (False, True),
                                  (None, ("Y",), ("Y_h", "Y_c"))))
    assert len(keys) > 8
    inputs = [make_inputs("LSTM", w, seq=4, batch=3, lens=lens, initial=initial, seed=k)
              for k, (lens, initial, _) in enumerate(keys)]
    first = [call(layer, x, outputs=outputs) for x, (_, _, outputs) in zip(inputs, keys)]
    for x, (_, _, outputs), expected in zip(inputs, keys, first):
        assert_bits(call(layer, x, outputs=outputs), expected, f"outputs={outputs}")
    full = call(layer, inputs[0])
    assert_bits(full, FUNCTIONAL["LSTM"](**inputs[0], **w, direction="bidirectional"), "full")


def test_layers_on_one_device_do_not_interfere():
    w1, w2 = make_weights("LSTM", seed=1), make_weights("GRU", seed=2)
    x1, x2 = make_inputs("LSTM", w1, seq=4, batch=2), make_inputs("GRU", w2, seq=3, batch=5)
    a, b = new_layer("LSTM", w1, direction="bidirectional"), new_layer("GRU", w2, direction="bidirectional")
    first = call(a, x1), call(b, x2)
    assert_bits(call(b, x2), first[1], "GRU after GRU")
    assert_bits(call(a, x1), first[0], "LSTM after GRU")


# --------------------------------------------------------------------------- outputs=


def subsets(names):
    return [c for n in range(len(names) + 1) for c in itertools.combinations(names, n)]


@pytest.mark.parametrize("op", ("LSTM", "GRU", "RNN"))
def test_outputs_subsets(op):
    w = make_weights(op, seed=3)
    layer = new_layer(op, w, direction="bidirectional", layout=1)
    x = make_inputs(op, w, seq=5, batch=3, lens=[5, 0, 2], layout=1)
    full = call(layer, x)
    for wanted in subsets(OUTPUTS[op]):
        for order in (wanted, tuple(reversed(wanted))):
            got = call(layer, x, outputs=order)
            expected = tuple(f if n in wanted else None for n, f in zip(OUTPUTS[op], full))
            assert_bits(got, expected, f"outputs={order}")
    # A list works as well as a tuple; and the empty shapes honour outputs= too.
    assert_bits(call(layer, x, outputs=["Y_h"]), (None, full[1]) + (None,) * (len(full) - 2),
                "outputs=['Y_h']")
    # A single name as a string is that one name, not its characters.
    assert_bits(call(layer, x, outputs="Y_h"), (None, full[1]) + (None,) * (len(full) - 2),
                "outputs='Y_h'")
    empty = make_inputs(op, w, seq=0, batch=3, layout=1)
    got = call(layer, empty, outputs=("Y_h",))
    assert got[0] is None and got[1] is not None and all(g is None for g in got[2:])
    np.testing.assert_array_equal(got[1], empty["initial_h"])


@pytest.mark.parametrize("op, bad", [("GRU", "Y_c"), ("RNN", "Y_c"), ("LSTM", "y"), ("LSTM", "Z")])
def test_outputs_unknown_name(op, bad):
    w = make_weights(op, directions=1, seed=3)
    layer = new_layer(op, w)
    x = make_inputs(op, w, seq=3, batch=2)
    with pytest.raises(ValueError, match=rf"^{op}: outputs may name .*got '{bad}'"):
        call(layer, x, outputs=("Y", bad))
    assert_bits(call(layer, x), FUNCTIONAL[op](**x, **w), "the next call")


# --------------------------------------------------------------------------- max_length


@pytest.mark.parametrize("layout", (0, 1))
@pytest.mark.parametrize("cell", list(CELLS))
def test_max_length_gives_the_same_result(cell, layout):
    op, lbr = CELLS[cell]
    attrs = {"direction": "bidirectional", "layout": layout}
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    w = make_weights(op, seed=5)
    layer = new_layer(op, w, **attrs)
    x = make_inputs(op, w, seq=7, batch=3, lens=[5, 2, 0], layout=layout)
    full = call(layer, x)
    for m in (5, 6, 7):
        assert_bits(call(layer, x, max_length=m), full, f"max_length={m}")
    assert_bits(call(layer, x), full, "without max_length after max_length runs")
    expected = REFERENCE[op](**x, **w, **attrs)
    for a, e in zip(full, expected):
        assert scaled_error(a, e) <= 1e-5


def test_max_length_zero_with_all_lengths_zero():
    w = make_weights("LSTM", seed=6)
    layer = new_layer("LSTM", w, direction="bidirectional")
    x = make_inputs("LSTM", w, seq=4, batch=2, lens=[0, 0])
    got = call(layer, x, max_length=0)
    assert_bits(got, call(layer, x), "max_length=0")
    assert not any(g.any() for g in got)  # Y past every length, and 0-length rows' states


def test_max_length_errors():
    w = make_weights("LSTM", seed=7)
    layer = new_layer("LSTM", w, direction="bidirectional")
    x = make_inputs("LSTM", w, seq=7, batch=3, lens=[4, 6, 0])
    good = call(layer, x)
    with pytest.raises(ValueError, match=r"^LSTM: max_length = 5 is shorter than "
                                         r"sequence_lens\[1\] = 6"):
        call(layer, x, max_length=5)
    for bad in (8, -1, 6.5):
        with pytest.raises(ValueError, match=r"^LSTM: max_length must be an integer in \[0, 7\]"):
            call(layer, x, max_length=bad)
    no_lens = dict(x, sequence_lens=None)
    with pytest.raises(ValueError, match=r"^LSTM: max_length = 6 is shorter than the sequence "
                                         r"length \(no sequence_lens\)"):
        call(layer, no_lens, max_length=6)
    assert_bits(call(layer, x), good, "the next call")
    assert_bits(call(layer, no_lens, max_length=7), call(layer, no_lens), "max_length = seq")


# --------------------------------------------------------------------------- scratch


def expected_sizes(op, lbr, D, seq, batch, H):
    """The ScratchSizes docstring: xw is float32 [dirs, seq, batch, gates * hidden]; state is
    float32 [seq + 1, dirs, batch, hidden] then the LSTM cell state (one plane) or the GRU's
    z and r * h (two planes; only a GRU with linear_before_reset = 0 has the second pass that
    needs them)."""
    plane = D * batch * H
    extra = {"LSTM": plane, "GRU": 0 if lbr else 2 * plane, "RNN": 0}[op]
    return 4 * D * seq * batch * GATES[op] * H, 4 * ((seq + 1) * plane + extra)


@pytest.mark.parametrize("direction", ("forward", "bidirectional"))
@pytest.mark.parametrize("cell", list(CELLS))
def test_scratch_sizes_formulas(cell, direction):
    op, lbr = CELLS[cell]
    D = 2 if direction == "bidirectional" else 1
    for H, dtype in ((7, np.float32), (33, np.float16)):
        w = make_weights(op, hidden=H, directions=D, dtype=dtype, seed=8)
        layer = new_layer(op, w, direction=direction,
                          **({"linear_before_reset": lbr} if op == "GRU" else {}))
        for seq, batch in ((5, 3), (1, 1), (80, 8), (0, 4), (4, 0)):
            sizes = layer.scratch_sizes(seq, batch)
            assert isinstance(sizes, ortops.layer.ScratchSizes)
            assert (sizes.xw, sizes.state) == expected_sizes(op, lbr, D, seq, batch, H), \
                f"seq {seq}, batch {batch}, hidden {H}"


def arena_regions(layer, seq, batch, order, lead=12, gap=8, tail=4):
    """An arena from layer.allocate holding both regions at non-zero 4-byte-aligned offsets,
    ``order`` "xw-state" or "state-xw"; with gap = tail = 0 the regions are packed tight and
    the second ends at the arena's last byte. Returns (arena, xw region, state region)."""
    sizes = layer.scratch_sizes(seq, batch)
    first, second = (sizes.xw, sizes.state) if order == "xw-state" else (sizes.state, sizes.xw)
    arena = layer.allocate(lead + first + gap + second + tail)
    a, b = (arena, lead), (arena, lead + first + gap)
    return (arena, a, b) if order == "xw-state" else (arena, b, a)


@pytest.mark.parametrize("cell, dtype", CELL_RUNS)
def test_caller_scratch_in_one_arena(cell, dtype):
    op, w, attrs, layer = bidirectional_layer(cell, dtype, seed=9)
    x = make_inputs(op, w, seq=6, batch=3, lens=[6, 0, 4])
    owned = call(layer, x)
    # Spaced, and packed tight in both orders: a pass that wrote past its region's size
    # would overwrite the other region and change the result.
    for order, gap, tail in (("xw-state", 8, 4), ("xw-state", 0, 0), ("state-xw", 0, 0)):
        arena, xw, state = arena_regions(layer, 6, 3, order, gap=gap, tail=tail)
        assert xw[0] is state[0] and xw[1] > 0 and state[1] > 0
        for k in range(2):
            got = call(layer, x, xw_scratch=xw, state_scratch=state)
            assert_bits(got, owned, f"{order} gap {gap}, run {k}")
    # Another layer using the same arena in between does not disturb the next run.
    w_other = make_weights(op, dtype=dtype, seed=10)
    other = new_layer(op, w_other, **attrs)
    assert other.scratch_sizes(6, 3) == layer.scratch_sizes(6, 3)
    assert_bits(call(other, x, xw_scratch=xw, state_scratch=state),
                FUNCTIONAL[op](**x, **w_other, **attrs), "the other layer in the arena")
    assert_bits(call(layer, x, xw_scratch=xw, state_scratch=state), owned, "after another layer")


def test_caller_scratch_errors():
    w = make_weights("LSTM", seed=12)
    layer = new_layer("LSTM", w, direction="bidirectional")
    x = make_inputs("LSTM", w, seq=5, batch=2, lens=[5, 3])
    owned = call(layer, x)
    sizes = layer.scratch_sizes(5, 2)
    arena, xw, state = arena_regions(layer, 5, 2, "xw-state")
    bad_calls = [
        # Each region too small (by 1 byte and by 4).
        (dict(xw_scratch=(layer.allocate(16 + sizes.xw - 1), 16), state_scratch=state),
         r"^LSTM: the input projection scratch needs \d+ bytes at offset 16, but its buffer holds"),
        (dict(xw_scratch=xw, state_scratch=(layer.allocate(sizes.state + 4), 8)),
         r"^LSTM: the state scratch needs \d+ bytes at offset 8, but its buffer holds"),
        # Offsets not a multiple of 4, and negative.
        (dict(xw_scratch=(arena, 2), state_scratch=state),
         r"^LSTM: the input projection scratch offset must be a non-negative multiple of 4 "
         r"bytes, got 2"),
        (dict(xw_scratch=xw, state_scratch=(arena, state[1] + 1)),
         r"^LSTM: the state scratch offset must be a non-negative multiple of 4 bytes"),
        (dict(xw_scratch=(arena, -4), state_scratch=state),
         r"^LSTM: the input projection scratch offset must be a non-negative multiple"),
    ]
    for kwargs, message in bad_calls:
        with pytest.raises(ValueError, match=message):
            call(layer, x, **kwargs)
        # The failed plan is not kept: the next valid calls work, supplied or owned.
        assert_bits(call(layer, x, xw_scratch=xw, state_scratch=state), owned, message)
        assert_bits(call(layer, x), owned, message)


# --------------------------------------------------------------------------- argument errors

@pytest.fixture(scope="module")
def canary():
    """A valid call on the device, to run after each error: it must still give its bits."""
    w = make_weights("GRU", directions=1, seed=20)
    x = make_inputs("GRU", w, seq=4, batch=2, lens=[4, 1])
    expected = ortops.gru(**x, **w, direction="reverse")
    assert expected[0].any()

    def check():
        assert_bits(ortops.gru(**x, **w, direction="reverse"), expected,
                    "a valid call after an error")

    return check


# (id, op, weight overrides, attributes, message pattern): errors when the layer is built.
LAYER_ERRORS = [
    ("W-rank", "LSTM", lambda w: dict(w, W=w["W"][0]), {},
     r"^LSTM: W must have rank 3 \[num_directions, 4\*hidden_size, input_size\]"),
    ("W-shape", "LSTM", lambda w: dict(w, W=w["W"][:, :-1]), {},
     r"^LSTM: W must have shape \[2, 28, 6\]"),
    ("W-dtype", "LSTM", lambda w: dict(w, W=w["W"].astype(np.float64)), {},
     r"^LSTM: W must have dtype float32 or float16, got float64"),
    # Without hidden_size, a W/R disagreement is reported against R's last dimension.
    ("R-shape", "GRU", lambda w: dict(w, R=w["R"][:, :, :-1]), {},
     r"^GRU: W must have shape \[2, 18, 6\] .*hidden_size = 6 from R's last dimension"),
    ("R-hidden", "GRU", lambda w: dict(w, R=w["R"][:, :-3]), {},
     r"^GRU: R must have shape \[2, 21, 7\]"),
    ("R-dtype", "RNN", lambda w: dict(w, R=w["R"].astype(np.float16)), {},
     r"^RNN: R must have the dtype of W \(float32\), got float16"),
    ("B-shape", "RNN", lambda w: dict(w, B=w["B"][:, :-1]), {},
     r"^RNN: B must have shape \[2, 14\]"),
    ("P-shape", "LSTM", lambda w: dict(w, P=w["P"][:, :-1]), {},
     r"^LSTM: P must have shape \[2, 21\]"),
    ("P-on-GRU", "GRU", lambda w: dict(w, P=np.zeros((2, 21), np.float32)), {},
     r"^GRU: P \(peepholes\) is only defined for LSTM"),
    ("input_forget-on-GRU", "GRU", None, {"input_forget": 1},
     r"^GRU: input_forget is only defined for LSTM"),
    ("input_forget-on-RNN", "RNN", None, {"input_forget": 1},
     r"^RNN: input_forget is only defined for LSTM"),
    ("linear_before_reset-on-LSTM", "LSTM", None, {"linear_before_reset": 1},
     r"^LSTM: linear_before_reset is only defined for GRU"),
    ("linear_before_reset-2", "GRU", None, {"linear_before_reset": 2},
     r"^GRU: linear_before_reset must be 0 or 1, got 2"),
    ("activation-unknown", "LSTM", None, {"activations": ["Sigmoid", "Swish", "Tanh"]},
     r"^LSTM: activations\[1\] must be one of .*got 'Swish'"),
    ("activation-count", "GRU", None, {"activations": ["Sigmoid", "Tanh", "Tanh"]},
     r"^GRU: activations must list"),
    ("direction-case", "RNN", None, {"direction": "Forward"},
     r"^RNN: direction must be 'forward', 'reverse' or 'bidirectional', got the string 'Forward'"),
    ("direction-unknown", "LSTM", None, {"direction": "both"},
     r"^LSTM: direction must be .*got the string 'both'"),
    ("layout-2", "LSTM", None, {"layout": 2}, r"^LSTM: layout must be 0 or 1, got 2"),
    ("layout-str", "GRU", None, {"layout": "1"}, r"^GRU: layout must be 0 or 1, got the string '1'"),
    ("clip-0", "RNN", None, {"clip": 0.0}, r"^RNN: clip must be null or a positive number"),
    ("hidden_size", "LSTM", None, {"hidden_size": 8}, r"^LSTM: W must have shape \[2, 32, 6\]"),
]


@pytest.mark.parametrize("op, change, attrs, message",
                         [pytest.param(*e[1:], id=e[0]) for e in LAYER_ERRORS])
def test_layer_argument_errors(op, change, attrs, message, canary):
    w = make_weights(op, seed=22)
    if change is not None:
        w = change(w)
    attrs = dict({"direction": "bidirectional"}, **attrs)
    with pytest.raises(ValueError, match=message):
        new_layer(op, w, **attrs)
    canary()


def test_unknown_op():
    w = make_weights("LSTM", seed=22)
    with pytest.raises(ValueError, match=r"op must be one of LSTM, GRU, RNN, got 'CONV'"):
        RecurrentLayer("Conv", w["W"], w["R"])


def _x(layer_inputs, **changes):
    return dict(layer_inputs, **changes)


# (id, op, input change, message pattern): errors when an existing layer is called.
CALL_ERRORS = [
    ("X-rank", "LSTM", lambda x: _x(x, X=x["X"][0]),
     r"^LSTM: X must have rank 3 \[seq_length, batch_size, input_size\], got shape \[2, 6\]"),
    ("X-input-size", "LSTM", lambda x: _x(x, X=x["X"][:, :, :-1]),
     r"^LSTM: X must have shape \[5, 2, 6\] \(seq_length, batch_size, input_size from W\), "
     r"got \[5, 2, 5\]"),
    ("X-dtype", "GRU", lambda x: _x(x, X=x["X"].astype(np.float16)),
     r"^GRU: X must have the dtype of W \(float32\), got float16"),
    ("X-list", "RNN", lambda x: _x(x, X=x["X"].tolist()),
     r"^RNN: X must be a numpy array, got list"),
    ("lens-above", "LSTM", lambda x: _x(x, sequence_lens=np.array([5, 6], np.int32)),
     r"^LSTM: sequence_lens\[1\] = 6 is outside \[0, 5\]"),
    ("lens-negative", "GRU", lambda x: _x(x, sequence_lens=np.array([-1, 5], np.int32)),
     r"^GRU: sequence_lens\[0\] = -1 is outside \[0, 5\]"),
    ("lens-int64", "RNN", lambda x: _x(x, sequence_lens=np.array([5, 5], np.int64)),
     r"^RNN: sequence_lens must have dtype int32, got int64"),
    ("lens-shape", "LSTM", lambda x: _x(x, sequence_lens=np.array([5, 5, 5], np.int32)),
     r"^LSTM: sequence_lens must have shape \[2\]"),
    ("initial_h-shape", "GRU", lambda x: _x(x, initial_h=x["initial_h"][:1]),
     r"^GRU: initial_h must have shape \[2, 2, 7\]"),
    ("initial_c-dtype", "LSTM", lambda x: _x(x, initial_c=x["initial_c"].astype(np.float64)),
     r"^LSTM: initial_c must have the dtype of W \(float32\), got float64"),
    ("initial_c-on-GRU", "GRU", lambda x: _x(x, initial_c=x["initial_h"]),
     r"^GRU: initial_c is only defined for LSTM"),
]


@pytest.mark.parametrize("op, change, message",
                         [pytest.param(*e[1:], id=e[0]) for e in CALL_ERRORS])
def test_call_argument_errors(op, change, message, canary):
    w = make_weights(op, seed=23)
    layer = new_layer(op, w, direction="bidirectional")
    x = make_inputs(op, w, seq=5, batch=2, lens=[5, 2])
    good = call(layer, x)
    bad = change(x)
    with pytest.raises(ValueError, match=message):
        call(layer, bad)
    # The same layer, and another call on the device, still work.
    assert_bits(call(layer, x), good, "the same layer after the error")
    canary()


@pytest.mark.parametrize("call_bad, message", [
    (lambda w, x: ortops.lstm(x["X"], w["W"], w["R"], direction="up"),
     r"^LSTM: direction must be 'forward', 'reverse' or 'bidirectional'"),
    (lambda w, x: ortops.gru(x["X"], w["W"][:, :21], w["R"][:, :21], linear_before_reset=3),
     r"^GRU: linear_before_reset must be 0 or 1, got 3"),
    (lambda w, x: ortops.rnn(x["X"], w["W"][:1, :7], w["R"][:1, :7], activations=["Tanhh"]),
     r"^RNN: activations\[0\] must be one of"),
    (lambda w, x: ortops.lstm(x["X"], w["W"], w["R"], sequence_lens=np.array([1, 9], np.int32),
                              direction="bidirectional"),
     r"^LSTM: sequence_lens\[1\] = 9 is outside \[0, 5\]"),
], ids=("lstm-direction", "gru-lbr", "rnn-activation", "lstm-lens"))
def test_functional_argument_errors(call_bad, message, canary):
    w = make_weights("LSTM", seed=24)
    x = make_inputs("LSTM", w, seq=5, batch=2)
    with pytest.raises(ValueError, match=message):
        call_bad(w, x)
    canary()


# --------------------------------------------------------------------------- binding limit


def test_unsupported_when_a_scratch_region_exceeds_the_binding_limit(canary):
    # lavapipe's maxStorageBufferRange is 128 MiB: rather than allocate past it, the test
    # lowers the layer's copy of the limit (RecurrentLayer._limit, read from the device's
    # max_storage_buffer_range when the layer is made) to just below the region's size.
    w = make_weights("LSTM", seed=25)
    layer = new_layer("LSTM", w, direction="bidirectional")
    x = make_inputs("LSTM", w, seq=5, batch=3)
    good = call(layer, x)
    sizes = layer.scratch_sizes(4, 3)   # a new shape, so a new plan is built
    x4 = make_inputs("LSTM", w, seq=4, batch=3)
    limit = layer._limit
    assert limit == layer.device.max_storage_buffer_range
    layer._limit = sizes.xw - 1
    with pytest.raises(UnsupportedLayerError,
                       match=rf"^LSTM: unsupported layer on .*the input projection scratch needs "
                             rf"{sizes.xw} bytes in one storage binding, above the device's "
                             rf"maxStorageBufferRange of {sizes.xw - 1} bytes"):
        call(layer, x4)
    assert issubclass(UnsupportedLayerError, ValueError)
    layer._limit = limit
    assert_bits(call(layer, x4), FUNCTIONAL["LSTM"](**x4, **w, direction="bidirectional"),
                "the same shape once the limit is back")
    assert_bits(call(layer, x), good, "the earlier shape")
    canary()


def test_unsupported_state_region_and_supplied_arena():
    # Limits lowered through RecurrentLayer._limit, as above. An RNN's state scratch
    # ((seq + 1) planes) is larger than its input projection (seq planes).
    w = make_weights("RNN", seed=26)
    layer = new_layer("RNN", w, direction="bidirectional")
    x = make_inputs("RNN", w, seq=5, batch=3)
    owned = call(layer, x)
    sizes = layer.scratch_sizes(5, 3)
    assert sizes.state > sizes.xw
    limit = layer._limit
    layer._limit = sizes.state - 1
    with pytest.raises(UnsupportedLayerError, match=rf"^RNN: .*the state scratch needs "
                                                    rf"{sizes.state} bytes"):
        call(layer, x, outputs=("Y_h",))
    # A supplied arena is bound whole: an arena above the limit is refused even when each
    # region fits.
    arena, xw, state = arena_regions(layer, 5, 3, "xw-state")
    layer._limit = arena.nbytes - 1
    with pytest.raises(UnsupportedLayerError, match=r"^RNN: .*scratch \(its whole buffer is "
                                                    r"bound\) needs \d+ bytes"):
        call(layer, x, xw_scratch=xw, state_scratch=state)
    layer._limit = limit
    assert_bits(call(layer, x, xw_scratch=xw, state_scratch=state), owned, "limit restored")


def test_unsupported_weights_at_construction(monkeypatch, canary):
    # The weights' binding limit is checked while the layer is made, from the device's
    # limit; a device whose max_storage_buffer_range is just below R's size stands in for a
    # real layer too large for the device.
    w = make_weights("LSTM", hidden=9, seed=27)
    real_context = ortops.layer.context

    def small_context(device=None):
        dev, ctx = real_context(device)
        return dataclasses.replace(dev, max_storage_buffer_range=w["R"].nbytes - 1), ctx

    monkeypatch.setattr(ortops.layer, "context", small_context)
    with pytest.raises(UnsupportedLayerError,
                       match=rf"^LSTM: unsupported layer on .*: R needs {w['R'].nbytes} bytes"):
        new_layer("LSTM", w, direction="bidirectional")
    monkeypatch.undo()
    canary()


def test_unsupported_when_the_step_grid_exceeds_the_workgroup_count(monkeypatch, canary):
    # A step dispatch has ceil(batch / NB) workgroups in z (NB: the lanes kernel's batch rows a
    # workgroup, 2 for float32 at batch 2-8); a device whose maxComputeWorkGroupCount allows
    # one stands in for a batch above NB * 65,535.
    nb = ortops.variants.step_variant(8, 2).nb
    w = make_weights("GRU", seed=28)
    real_context = ortops.layer.context

    def narrow_context(device=None):
        dev, ctx = real_context(device)
        return dataclasses.replace(dev, max_workgroup_count=(65535, 65535, 1)), ctx

    monkeypatch.setattr(ortops.layer, "context", narrow_context)
    layer = new_layer("GRU", w, direction="bidirectional")
    small = make_inputs("GRU", w, seq=3, batch=nb)
    assert_bits(call(layer, small), ortops.gru(**small, **w, direction="bidirectional"),
                f"a batch of {nb}: one workgroup in z")
    with pytest.raises(UnsupportedLayerError,
                       match=r"^GRU: unsupported layer on .*: the step pass needs 2 x 2 x 2 "
                             r"workgroups, above the device's maxComputeWorkGroupCount of "
                             r"65535 x 65535 x 1"):
        call(layer, make_inputs("GRU", w, seq=3, batch=nb + 1))
    monkeypatch.undo()
    canary()
