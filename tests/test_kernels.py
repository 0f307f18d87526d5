"""The GPU recurrent kernels (ortops.lstm / gru / rnn and RecurrentLayer) against the float64
reference (ortops.reference), following docs/design.md, 'Tolerances'.

Every case:
  * runs twice on one RecurrentLayer and once through the functional API (a fresh layer) and
    requires identical bits from all three;
  * compares each output with the reference as the scaled error max|gpu - ref| / max|ref|:
    at most 1e-5 for float32 and 2e-3 for float16 (float16 inputs are drawn in float32, cast
    to float16, and the reference gets the same float16 arrays); a NaN never passes;
  * requires the reference output not to be (nearly) all zero and not saturated, so that an
    agreement means something.

Weights are drawn uniform in +-1.5/sqrt(fan_in) (W: input size, R: hidden size), biases in
+-0.5, so pre-activations have a standard deviation of about 0.6 to 0.7 (measured on the
option cases): the activations work in their curved range, not at 0 or +-1. Option cases also check that the option changes the reference
result, so that a kernel ignoring it would fail.

Shapes are small (lavapipe under validation in CI) except the text-line recognizer shapes,
which run at full size.

Exact mode (``mode="exact"``, docs/exact.md) runs the same checks against the same
tolerances on a cut of the matrix (``exact_too``, ``exact_option``): its kernels take longer to
compile on lavapipe (about 0.85 s a case against 0.3 s with a warm shader cache), so it runs
every activation in every LSTM slot and per direction in the other cells, the "all" option
set (layout 0; test_layout_1_is_layout_0_transposed shows the layout's bits), a part of the
odd sizes and of the consistency checks.
tests/test_exact_functions.py and tests/test_exact_digests.py cover the rest of exact mode.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ortops
import ortops.layer
from ortops.activations import ACTIVATIONS
from ortops.compare import TOLERANCE as TOL, scaled_error
from _cases import GATES, OUTPUTS, REFERENCE, SLOTS, activation_params, rotation, seed_of

FUNCTIONAL = {"LSTM": ortops.lstm, "GRU": ortops.gru, "RNN": ortops.rnn}
DIRECTIONS = ("forward", "reverse", "bidirectional")
DTYPES = (np.float32, np.float16)
MIN_SCALE = 0.05          # max|ref| below this: the case compares (nearly) nothing
MIN_INFORMATIVE = 0.25    # fraction of Y entries that must be neither 0 nor +-1
MODES = ("deterministic", "exact")


def exact_too(params, keep):
    """``params`` (pytest.param objects or value tuples) in deterministic mode, and those for
    which ``keep(*values)`` holds in exact mode too; the mode is the last value."""
    out = []
    for p in params:
        values, pid = (p.values, p.id) if hasattr(p, "values") else (tuple(p), None)
        for mode in MODES:
            if mode == "exact" and not keep(*values):
                continue
            out.append(pytest.param(*values, mode, id=None if pid is None else f"{pid}-{mode}"))
    return out

# Largest scaled error seen per dtype (printed at the end of the module with -s).
MAX_ERROR = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 0.0}


@pytest.fixture(scope="module", autouse=True)
def _report_max_error():
    yield
    print("\nmax scaled error: " + ", ".join(f"{d.name} {e:.3g}" for d, e in MAX_ERROR.items()))


# --------------------------------------------------------------------------- cases


def make_inputs(op, *, seq, batch, input_size, hidden, direction="bidirectional", layout=0,
                dtype=np.float32, seed=0, bias=True, lens=None, initial=False,
                peepholes=False):
    """Random inputs for one layer, keyed by the reference's argument names.

    Every tensor is drawn whether used or not, so that the same seed gives the same values
    with an option switched on or off. ``lens`` is a list of lengths or None.
    """
    rng = np.random.default_rng(seed)
    D, G, H = (2 if direction == "bidirectional" else 1), GATES[op], hidden

    def draw(shape, scale):
        return rng.uniform(-scale, scale, shape).astype(np.float32).astype(dtype)

    x_shape = (seq, batch, input_size) if layout == 0 else (batch, seq, input_size)
    state_shape = (D, batch, H) if layout == 0 else (batch, D, H)
    t = {
        "X": draw(x_shape, 1.0),
        "W": draw((D, G * H, input_size), 1.5 / np.sqrt(max(input_size, 1))),
        "R": draw((D, G * H, H), 1.5 / np.sqrt(H)),
    }
    B = draw((D, 2 * G * H), 0.5)
    h0 = draw(state_shape, 0.8)
    c0 = draw(state_shape, 0.8)
    P = draw((D, 3 * H), 0.8)
    t["B"] = B if bias else None
    t["sequence_lens"] = None if lens is None else np.asarray(lens, dtype=np.int32)
    t["initial_h"] = h0 if initial else None
    if op == "LSTM":
        t["initial_c"] = c0 if initial else None
        t["P"] = P if peepholes else None
    return t


def make_layer(op, t, attrs, mode="deterministic"):
    return ortops.RecurrentLayer(op, t["W"], t["R"], t["B"], t.get("P"), **attrs, mode=mode)


def run_layer(layer, t):
    return layer(t["X"], t["sequence_lens"], t["initial_h"], t.get("initial_c"))


# --------------------------------------------------------------------------- checks


def assert_close(name, got, ref):
    assert got.shape == ref.shape, f"{name}: shape {got.shape}, reference {ref.shape}"
    if ref.size == 0:
        return
    assert np.isfinite(ref).all(), f"{name}: the reference is not finite"
    assert not np.isnan(got).any(), f"{name}: NaN in the GPU output"
    assert np.abs(ref).max() >= MIN_SCALE, f"{name}: max|ref| = {np.abs(ref).max():.3g} is tiny"
    err = scaled_error(got, ref)
    tol = TOL[got.dtype]
    MAX_ERROR[got.dtype] = max(MAX_ERROR[got.dtype], err)
    assert err <= tol, f"{name}: scaled error {err:.3g} above {tol:g} ({got.dtype.name})"


def assert_informative(Y):
    """Most of Y must be neither 0 nor +-1: a saturated layer proves little."""
    a = np.abs(Y)
    inside = (a > 1e-3) & (np.abs(a - 1.0) > 1e-3)
    assert inside.mean() >= MIN_INFORMATIVE, (
        f"only {inside.mean():.0%} of Y is neither 0 nor +-1: the case is saturated")


def assert_same_bits(name, what, a, b):
    assert a.dtype == b.dtype and a.shape == b.shape, f"{name}: {what}: dtype/shape differ"
    assert a.tobytes() == b.tobytes(), f"{name}: {what} gives different bits"


def check_case(op, t, attrs, mode="deterministic"):
    """Run one case (twice on one layer, once on a fresh one) in ``mode`` and compare with the
    reference.

    Returns (gpu outputs, reference outputs).
    """
    dtype = t["X"].dtype
    expected = REFERENCE[op](**t, **attrs)
    layer = make_layer(op, t, attrs, mode)
    first = run_layer(layer, t)
    again = run_layer(layer, t)
    fresh = FUNCTIONAL[op](**t, **attrs, mode=mode)
    assert len(first) == len(expected) == len(OUTPUTS[op])
    for name, got, ref, got2, got3 in zip(OUTPUTS[op], first, expected, again, fresh):
        assert got.dtype == dtype, f"{name}: dtype {got.dtype}, input {dtype}"
        assert_same_bits(name, "a second run on the same layer", got, got2)
        assert_same_bits(name, "a fresh layer", got, got3)
        assert_close(name, got, ref)
    assert_informative(expected[0])
    return first, expected


def assert_differs(op, t, attrs, t_off, attrs_off, what):
    """The reference with an option on differs clearly from the one with it off."""
    on = REFERENCE[op](**t, **attrs)
    off = REFERENCE[op](**t_off, **attrs_off)
    diff = max(scaled_error(a, b) for a, b in zip(off, on) if b.size)
    assert diff > 0.01, f"{what} changes the reference by only {diff:.3g}: the case tests nothing"


# --------------------------------------------------------------------------- option matrix

# Per cell: (seq, batch, input, hidden); hidden sizes odd so they divide no workgroup.
OPTION_SHAPES = {"LSTM": (5, 3, 7, 7), "GRU": (5, 3, 6, 9), "RNN": (6, 3, 5, 11)}
CLIP = 0.5
# Every set but no_bias has a bias. "all" is bias, lens, initial states, clip and (LSTM)
# peepholes; not input_forget, which would leave the forget gate's peephole unused.
# Every cell x direction x layout runs the sets in EVERY_DIRECTION, GRU with
# linear_before_reset 0 and 1, so each option runs in every direction and layout (inside
# "all"). The sets that switch one option on alone run bidirectional (both directions'
# arithmetic in one layer), in both layouts. The layout does not change the step kernel, the
# other options do: each (set, direction, dtype) compiles one (about a second on lavapipe).
EVERY_DIRECTION = {"LSTM": ("no_bias", "all", "input_forget"), "GRU": ("no_bias", "all"),
                   "RNN": ("no_bias", "all")}
ALONE = {"LSTM": ("lens", "initial", "clip", "peepholes"), "GRU": ("lens", "initial", "clip"),
         "RNN": ("lens", "initial", "clip")}
# float16 changes how the tensors are loaded and stored, not the arithmetic: it runs the set
# that loads every optional tensor (B, P, sequence_lens, initial_h, initial_c).
FLOAT16_OPTIONS = ("all",)


def exact_option(op, option, direction, layout):
    """The option cases that run in exact mode too: layout 0, the "all" set (every direction
    for the LSTM, bidirectional for the others), and the LSTM's no-bias and input_forget sets
    bidirectional (tests/test_exact_digests.py runs every cell x direction in exact mode)."""
    if layout or option not in ("all", "no_bias", "input_forget"):
        return False
    if op == "LSTM":
        return option == "all" or direction == "bidirectional"
    return option == "all" and direction == "bidirectional"


def option_cases():
    for op in ("LSTM", "GRU", "RNN"):
        for option in EVERY_DIRECTION[op] + ALONE[op]:
            directions = DIRECTIONS if option in EVERY_DIRECTION[op] else ("bidirectional",)
            for lbr, dtype, direction, layout in itertools.product(
                    (0, 1) if op == "GRU" else (0,), DTYPES, directions, (0, 1)):
                if dtype == np.float16 and option not in FLOAT16_OPTIONS:
                    continue
                name = f"{op}-{option}" + (f"-lbr{lbr}" if op == "GRU" else "")
                for mode in MODES:
                    if mode == "exact" and not exact_option(op, option, direction, layout):
                        continue
                    yield pytest.param(op, option, lbr, dtype, direction, layout, mode,
                                       id=f"{name}-{np.dtype(dtype).name}-{direction}-{layout}-{mode}")


def option_case(op, option, lbr, direction, layout, dtype, *, without=None):
    """(inputs, attrs) of one option set (or "bias": the bias alone); ``without`` names one
    feature to leave out, for the check that the feature matters."""
    seq, batch, input_size, hidden = OPTION_SHAPES[op]
    if option == "all":
        features = {"bias", "lens", "initial", "clip"} | ({"peepholes"} if op == "LSTM" else set())
    else:
        features = {option} | ({"bias"} if option != "no_bias" else set())
    features.discard(without)
    t = make_inputs(op, seq=seq, batch=batch, input_size=input_size, hidden=hidden,
                    direction=direction, layout=layout, dtype=dtype,
                    seed=seed_of(op, lbr, direction, layout),
                    bias="bias" in features,
                    lens=[seq - 2, 0, seq] if "lens" in features else None,
                    initial="initial" in features, peepholes="peepholes" in features)
    attrs = {"direction": direction, "layout": layout}
    if "clip" in features:
        attrs["clip"] = CLIP
    if op == "LSTM":
        attrs["input_forget"] = int("input_forget" in features)
    if op == "GRU":
        attrs["linear_before_reset"] = 0 if without == "linear_before_reset" else lbr
    return t, attrs


@pytest.mark.parametrize("op, option, lbr, dtype, direction, layout, mode", list(option_cases()))
def test_options(op, option, lbr, dtype, direction, layout, mode):
    t, attrs = option_case(op, option, lbr, direction, layout, dtype)
    check_case(op, t, attrs, mode)
    # The option must matter, or agreeing with the reference would not show it is implemented.
    if option == "no_bias":
        t_on, attrs_on = option_case(op, "bias", lbr, direction, layout, dtype)
        assert_differs(op, t_on, attrs_on, t, attrs, "bias")
    elif option != "all":
        t_off, attrs_off = option_case(op, option, lbr, direction, layout, dtype, without=option)
        assert_differs(op, t, attrs, t_off, attrs_off, option)
    if op == "GRU" and lbr == 1:
        t_off, attrs_off = option_case(op, option, lbr, direction, layout, dtype,
                                       without="linear_before_reset")
        assert_differs(op, t, attrs, t_off, attrs_off, "linear_before_reset")


def test_zero_length_row_gives_zero_final_state():
    # Guards the option matrix: its "all" cases rely on the 0-length row of sequence_lens
    # giving zero final states even with initial states, and on Y being zero past each length.
    t, attrs = option_case("LSTM", "all", 0, "bidirectional", 0, np.float32)
    Y, Y_h, Y_c = check_case("LSTM", t, attrs)[0]
    assert not Y[:, :, 1].any() and not Y_h[:, 1].any() and not Y_c[:, 1].any()
    assert not Y[3:, :, 0].any() and Y[:3, :, 0].all()
    assert Y_h[:, 0].all() and Y_h[:, 2].all()


# --------------------------------------------------------------------------- activations

# The one-set rotation (11 cases per cell) puts every activation in every slot of both
# directions, in float32. With one set both directions get the same constants, so the
# per-direction rotation shows each direction reads its own: four shifts per cell (each slot
# has a different activation in the two directions), in float16 (the activations are float32
# arithmetic in both precisions). Each case compiles its own step kernel.
ACTIVATION_RUNS = [pytest.param(shift, 1, np.float32, id=f"one-set-{shift}-float32")
                   for shift in range(len(ACTIVATIONS))]
ACTIVATION_RUNS += [pytest.param(shift, 2, np.float16, id=f"per-direction-{shift}-float16")
                    for shift in (0, 3, 6, 9)]


@pytest.mark.parametrize("op, shift, sets, dtype, mode", exact_too(
    [pytest.param(op, *p.values, id=f"{op}-{p.id}") for op in ("LSTM", "GRU", "RNN") for p in ACTIVATION_RUNS],
    lambda op, shift, sets, dtype: op == "LSTM" or sets == 2))
def test_activations(op, shift, sets, dtype, mode):
    names = rotation(op, shift, sets)
    alphas, betas = activation_params(names)
    lbr = shift % 2 if op == "GRU" else 0
    t = make_inputs(op, seq=4, batch=2, input_size=6, hidden=7, layout=shift % 2,
                    dtype=dtype, seed=seed_of("act", op, shift, sets), initial=True,
                    peepholes=op == "LSTM" and shift % 3 == 0)
    attrs = {"direction": "bidirectional", "layout": shift % 2, "activations": names,
             "activation_alpha": alphas, "activation_beta": betas}
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    check_case(op, t, attrs, mode)


def test_activation_runs_cover_every_slot():
    # Guards the activation matrix: the one-set runs put every activation in every slot, and
    # every per-direction run gives the two directions different activations in every slot.
    runs = [p.values for p in ACTIVATION_RUNS]
    for op, n in SLOTS.items():
        seen = {(k, name) for shift, sets, _ in runs if sets == 1
                for k, name in enumerate(rotation(op, shift, 1))}
        assert len(seen) == n * len(ACTIVATIONS)
        for shift, sets, _ in runs:
            if sets == 2:
                names = rotation(op, shift, 2)
                assert all(a != b for a, b in zip(names[:n], names[n:]))


@pytest.mark.parametrize("op, names", [
    ("LSTM", ["HardSigmoid", "Elu", "LeakyRelu", "Sigmoid", "ThresholdedRelu", "Elu"]),
    ("GRU", ["HardSigmoid", "LeakyRelu", "Sigmoid", "Elu"]),
    ("RNN", ["LeakyRelu", "Elu"]),
])
@pytest.mark.parametrize("mode", MODES)
def test_activation_default_parameters(op, names, mode):
    # No activation_alpha / activation_beta: each activation's own defaults.
    t = make_inputs(op, seq=4, batch=2, input_size=6, hidden=7, seed=seed_of("defaults", op),
                    initial=True)
    check_case(op, t, {"direction": "bidirectional", "activations": names}, mode)


# --------------------------------------------------------------------------- empty shapes

EMPTY = {  # name: (seq, batch, initial states, sequence_lens)
    "seq0": (0, 2, False, False),
    "seq0-initial": (0, 2, True, False),
    "seq0-initial-lens": (0, 2, True, True),
    "batch0": (4, 0, False, False),
    "batch0-initial-lens": (4, 0, True, True),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("layout", (0, 1))
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", ("LSTM", "GRU", "RNN"))
@pytest.mark.parametrize("empty", list(EMPTY))
def test_empty(empty, op, direction, layout, dtype):
    seq, batch, initial, lens = EMPTY[empty]
    t = make_inputs(op, seq=seq, batch=batch, input_size=5, hidden=6, direction=direction,
                    layout=layout, dtype=dtype, seed=seed_of("empty", op, empty),
                    lens=[0] * batch if lens else None, initial=initial,
                    peepholes=op == "LSTM")
    attrs = {"direction": direction, "layout": layout}
    expected = REFERENCE[op](**t, **attrs)
    layer = make_layer(op, t, attrs)
    first = run_layer(layer, t)
    again = run_layer(layer, t)
    fresh = FUNCTIONAL[op](**t, **attrs)
    for name, got, ref, got2, got3 in zip(OUTPUTS[op], first, expected, again, fresh):
        assert got.dtype == dtype and got.shape == ref.shape, f"{name}: {got.dtype} {got.shape}"
        np.testing.assert_array_equal(got, ref.astype(dtype), err_msg=name)
        assert_same_bits(name, "a second run on the same layer", got, got2)
        assert_same_bits(name, "a fresh layer", got, got3)
    if initial and seq == 0:  # the final states are the initial states, not zeros
        np.testing.assert_array_equal(first[1], t["initial_h"])
        assert first[1].any()


# --------------------------------------------------------------------------- odd sizes

CELLS = {"LSTM": ("LSTM", 0), "GRU": ("GRU", 0), "GRU-lbr": ("GRU", 1), "RNN": ("RNN", 0)}


# Per cell, hidden sizes with the one-row step kernel (batch 1) and with the batched one
# (batch 9 or 17: one row into the second or third eight-row tile), so that each size meets a
# partial workgroup of units and a partial batch tile somewhere. Each new shape compiles its kernels
# (about a second on lavapipe), so this is not the full product of sizes and batches.
SIZE_RUNS = [(1, 1, np.float32), (33, 1, np.float32), (3, 17, np.float32), (65, 9, np.float32),
             (33, 17, np.float32), (65, 17, np.float16)]


@pytest.mark.parametrize("cell, hidden, batch, dtype, mode", exact_too(
    [pytest.param(c, *r, id=f"{c}-h{r[0]}-b{r[1]}-{np.dtype(r[2]).name}") for c in CELLS for r in SIZE_RUNS],
    lambda cell, hidden, batch, dtype: (hidden, batch) in ((33, 1), (65, 17))))
def test_odd_hidden_and_large_batch(cell, hidden, batch, dtype, mode):
    # Hidden sizes that divide no workgroup (ortops.layer gives a step workgroup 2 to 8 hidden
    # units, the Gemm a 64 x 64 tile), batches past one eight-row tile.
    op, lbr = CELLS[cell]
    seq = 4
    rng = np.random.default_rng(seed_of("lens", batch))
    lens = None if batch == 1 else [0, seq] + list(rng.integers(0, seq + 1, batch - 2))
    layout = 1 if batch == 9 else 0
    t = make_inputs(op, seq=seq, batch=batch, input_size=6, hidden=hidden, layout=layout,
                    dtype=dtype, seed=seed_of("odd", cell, hidden, batch), lens=lens,
                    initial=True, peepholes=op == "LSTM")
    attrs = {"direction": "bidirectional", "layout": layout}
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    check_case(op, t, attrs, mode)


@pytest.mark.parametrize("op", ("LSTM", "GRU", "RNN"))
@pytest.mark.parametrize("mode", MODES)
def test_single_unit_single_row_float16(op, mode):
    # The smallest layer: one direction, one row, one hidden unit. In float16 every output has
    # an odd element count, so its last 32-bit word holds one half (a bidirectional layer's
    # outputs always have an even count).
    t = make_inputs(op, seq=3, batch=1, input_size=5, hidden=1, direction="forward",
                    dtype=np.float16, seed=seed_of("one", op), initial=True)
    check_case(op, t, {"direction": "forward"}, mode)


# --------------------------------------------------------------------------- dispatch limits


def test_output_larger_than_one_dispatch_of_workgroups():
    # Y of 130 x 4096 x 8 = 4,259,840 words needs more than 65,535 workgroups of 64: above
    # lavapipe's maxComputeWorkGroupCount (and the count Vulkan guarantees), so the output
    # pass loops over a capped grid. Without that the dispatch is invalid (the validation
    # layer reports VUID-vkCmdDispatch-groupCountX-00386; the binding now refuses it). About
    # 5 s a run on lavapipe.
    t = make_inputs("RNN", seq=130, batch=4096, input_size=4, hidden=8, direction="forward",
                    seed=seed_of("wide"), initial=True)
    expected = REFERENCE["RNN"](**t, direction="forward")
    layer = make_layer("RNN", t, {"direction": "forward"})
    first, again = run_layer(layer, t), run_layer(layer, t)
    assert first[0].size > 65535 * 64
    for name, got, ref, got2 in zip(OUTPUTS["RNN"], first, expected, again):
        assert_same_bits(name, "a second run on the same layer", got, got2)
        assert_close(name, got, ref)


@pytest.mark.parametrize("cell, dtype, mode", exact_too(
    [pytest.param(c, t, id=f"{c}-{np.dtype(t).name}") for c in CELLS for t in DTYPES],
    lambda cell, dtype: dtype == np.float32))
def test_passes_split_over_capped_dispatches(cell, dtype, mode, monkeypatch):
    # ortops.layer caps every dispatch dimension at _MAX_GROUPS (65,535): the projection
    # splits its row tiles over several dispatches, the weight copy and the state and output
    # passes loop over their grid. With the cap lowered to 2, small shapes take those paths
    # (6 row tiles in 3 dispatches; 23,760 words of Y over 128 invocations) and must give the
    # bits of the uncapped layer.
    op, lbr = CELLS[cell]
    rng = np.random.default_rng(seed_of("capped lens", cell))
    t = make_inputs(op, seq=40, batch=9, input_size=6, hidden=33, dtype=dtype,
                    seed=seed_of("capped", cell, np.dtype(dtype).name),
                    lens=[40, 0] + list(rng.integers(1, 41, 7)), initial=True,
                    peepholes=op == "LSTM")
    attrs = {"direction": "bidirectional"}
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    plain = run_layer(make_layer(op, t, attrs, mode), t)
    monkeypatch.setattr(ortops.layer, "_MAX_GROUPS", 2)
    capped = run_layer(make_layer(op, t, attrs, mode), t)
    for name, got, want, ref in zip(OUTPUTS[op], capped, plain, REFERENCE[op](**t, **attrs)):
        assert_same_bits(name, "capped dispatches against uncapped", got, want)
        assert_close(name, got, ref)


# --------------------------------------------------------------------------- recognizer

# The text-line recognizer of docs/design.md, 'Tolerances': bidirectional LSTM, (seq, batch,
# input, hidden, lens). float32 at full size (on lavapipe a run takes one to two seconds, and a case runs three times); the
# batch-8 case has padded lines. float16 at full input and hidden size with the sequence cut
# (80 to 16, 48 to 12).
LINES = [48, 40, 33, 48, 12, 27, 48, 1]
RECOGNIZER = [
    pytest.param((80, 1, 256, 256, None), np.float32, "deterministic", id="seq80-b1-in256-h256-float32"),
    pytest.param((48, 8, 192, 96, LINES), np.float32, "deterministic", id="seq48-b8-in192-h96-float32"),
    pytest.param((16, 1, 256, 256, None), np.float16, "deterministic", id="seq16-b1-in256-h256-float16"),
    pytest.param((12, 8, 192, 96, [min(n, 12) for n in LINES]), np.float16, "deterministic",
                 id="seq12-b8-in192-h96-float16"),
    # Exact mode at the recognizer's widths (input 256, hidden 256 and 96), sequences cut.
    pytest.param((16, 1, 256, 256, None), np.float16, "exact", id="seq16-b1-in256-h256-float16-exact"),
    pytest.param((24, 8, 192, 96, [min(n, 24) for n in LINES]), np.float32, "exact",
                 id="seq24-b8-in192-h96-float32-exact"),
]


@pytest.mark.parametrize("shape, dtype, mode", RECOGNIZER)
def test_recognizer_shapes(shape, dtype, mode):
    seq, batch, input_size, hidden, lens = shape
    t = make_inputs("LSTM", seq=seq, batch=batch, input_size=input_size, hidden=hidden,
                    dtype=dtype, seed=seed_of("recognizer", shape), lens=lens)
    check_case("LSTM", t, {"direction": "bidirectional"}, mode)


# --------------------------------------------------------------------------- consistency


# These reuse the option matrix's "all" layers (same shapes and flags, so the same compiled
# kernels) with related data.


@pytest.mark.parametrize("cell, direction, dtype, mode", exact_too(
    [pytest.param(c, d, t, id=f"{c}-{d}-{np.dtype(t).name}") for c in CELLS for d in DIRECTIONS
     for t in DTYPES], lambda cell, direction, dtype: direction == "bidirectional" and dtype == np.float32))
def test_layout_1_is_layout_0_transposed(cell, direction, dtype, mode):
    # Same data in both layouts: the arithmetic order is fixed by the shapes, so the bits agree.
    op, lbr = CELLS[cell]
    t0, attrs = option_case(op, "all", lbr, direction, 0, dtype)
    t1 = dict(t0, X=t0["X"].transpose(1, 0, 2).copy(),
              initial_h=t0["initial_h"].transpose(1, 0, 2).copy())
    if op == "LSTM":
        t1["initial_c"] = t0["initial_c"].transpose(1, 0, 2).copy()
    out0 = run_layer(make_layer(op, t0, attrs, mode), t0)
    out1 = run_layer(make_layer(op, t1, dict(attrs, layout=1), mode), t1)
    assert_same_bits("Y", "layout 1", out0[0].transpose(2, 0, 1, 3), out1[0])
    for name, a, b in zip(OUTPUTS[op][1:], out0[1:], out1[1:]):
        assert_same_bits(name, "layout 1", a.transpose(1, 0, 2), b)


@pytest.mark.parametrize("cell, dtype, mode", exact_too(
    [pytest.param(c, t, id=f"{c}-{np.dtype(t).name}") for c in CELLS for t in DTYPES],
    lambda cell, dtype: dtype == np.float32))
def test_bidirectional_is_forward_and_reverse(cell, dtype, mode):
    # Each half of a bidirectional layer gives the bits of a one-direction layer with its weights.
    op, lbr = CELLS[cell]
    t, attrs = option_case(op, "all", lbr, "bidirectional", 0, dtype)
    both = run_layer(make_layer(op, t, attrs, mode), t)
    for d, direction in enumerate(("forward", "reverse")):
        # W, R, B, P and the initial states (layout 0) all lead with the direction axis.
        half = {k: (v if k in ("X", "sequence_lens") or v is None else v[d:d + 1].copy())
                for k, v in t.items()}
        one = run_layer(make_layer(op, half, dict(attrs, direction=direction), mode), half)
        assert_same_bits("Y", direction, both[0][:, d:d + 1], one[0])
        for name, a, b in zip(OUTPUTS[op][1:], both[1:], one[1:]):
            assert_same_bits(name, direction, a[d:d + 1], b)
