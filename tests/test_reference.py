"""The float64 reference (ortops.reference) against stock ONNX Runtime CPU and onnx's node tests.

ORT is the oracle for layout 0 float32; its CPU kernels refuse layout 1, so layout 1
is checked as the transpose of ORT's layout-0 result. Error metric everywhere:
max|ref - ort| <= 1e-5 * max|ort| (so an all-zero ORT output needs an all-zero
reference output).

Zero sizes (seq_length = 0, batch_size = 0) are not sent to ORT: its GRU (and its LSTM
for batch 0) abort the whole process there.
"""

from __future__ import annotations

import importlib
import itertools

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ortops.activations import ACTIVATIONS, DEFAULT_ACTIVATIONS, Activation, apply
from _cases import GATES, INPUTS, OUTPUTS, REFERENCE

TOL = 1e-5
OPSET = 22
# Activations that read alpha / beta (ONNX's list; ortops.activations must agree).
TAKES_ALPHA = {"Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu"}
TAKES_BETA = {"Affine", "ScaledTanh", "HardSigmoid"}


def ort_run(op, tensors, attrs):
    """Run one ONNX node on ORT CPU; ``tensors`` maps input names to arrays (absent: missing)."""
    names, infos, feeds = [], [], {}
    for name in INPUTS[op]:
        a = tensors.get(name)
        if a is None:
            names.append("")
            continue
        names.append(name)
        infos.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
        feeds[name] = a
    while names and names[-1] == "":
        names.pop()
    attrs = {k: v for k, v in attrs.items() if v is not None}
    node = helper.make_node(op, names, list(OUTPUTS[op]), **attrs)
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in OUTPUTS[op]]
    model = helper.make_model(helper.make_graph([node], "g", infos, outs),
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def ref_run(op, tensors, attrs):
    args = [tensors.get(name) for name in INPUTS[op]]
    kwargs = {k: v for k, v in attrs.items() if v is not None}
    return REFERENCE[op](*args, **kwargs)


def assert_close(ref, expected, what):
    ref = np.asarray(ref, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert ref.shape == expected.shape, f"{what}: shape {ref.shape} != {expected.shape}"
    if expected.size == 0:
        return
    assert np.isfinite(expected).all(), f"{what}: oracle produced non-finite values"
    err = np.abs(ref - expected).max()
    scale = np.abs(expected).max()
    assert err <= TOL * scale, f"{what}: max|ref - expected| = {err:.3g}, max|expected| = {scale:.3g}"


def make_case(rng, op, direction, *, seq=5, batch=4, input_size=3, hidden=4, bias=True,
              lens=False, init=False, peep=False):
    """Random float32 tensors for one layer, scaled so that the state stays O(1)."""
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    u = lambda *shape, s=1.0: (rng.uniform(-s, s, shape)).astype(np.float32)
    t = {
        "X": u(seq, batch, input_size, s=2.0),
        "W": u(D, G * hidden, input_size, s=1.2 / np.sqrt(input_size)),
        "R": u(D, G * hidden, hidden, s=1.2 / np.sqrt(hidden)),
    }
    if bias:
        t["B"] = u(D, 2 * G * hidden, s=0.6)
    if lens:
        # One full row and one empty row, the rest random in [1, seq].
        values = rng.integers(1, seq + 1, batch)
        values[0], values[-1] = seq, 0
        t["sequence_lens"] = values.astype(np.int32)
    if init:
        t["initial_h"] = u(D, batch, hidden)
        if op == "LSTM":
            t["initial_c"] = u(D, batch, hidden)
    if peep:
        t["P"] = u(D, 3 * hidden, s=0.8)
    return t


def check_against_ort(op, tensors, attrs, what):
    expected = ort_run(op, tensors, attrs)
    got = ref_run(op, tensors, attrs)
    for name, r, e in zip(OUTPUTS[op], got, expected):
        assert r.dtype == np.float64
        assert_close(r, e, f"{what} {name}")
    return expected


def to_layout1(tensors):
    t = dict(tensors)
    t["X"] = np.ascontiguousarray(t["X"].transpose(1, 0, 2))
    for name in ("initial_h", "initial_c"):
        if t.get(name) is not None:
            t[name] = np.ascontiguousarray(t[name].transpose(1, 0, 2))
    return t


def expected_layout1(outputs):
    Y, *states = outputs
    return [Y.transpose(2, 0, 1, 3)] + [s.transpose(1, 0, 2) for s in states]


# ---------------------------------------------------------------------------
# Option grid: every cell x direction x bias x sequence_lens x initial states,
# crossed with the cell's own options (peepholes, input_forget, linear_before_reset)
# and clip; layout 1 checked on every case as the transpose.

def _grid():
    for op in ("LSTM", "GRU", "RNN"):
        extra = {"LSTM": [dict(peep=p, input_forget=i) for p in (0, 1) for i in (0, 1)],
                 "GRU": [dict(linear_before_reset=l) for l in (0, 1)],
                 "RNN": [{}]}[op]
        for direction, bias, lens, init, opts, clip in itertools.product(
                ("forward", "reverse", "bidirectional"), (0, 1), (0, 1), (0, 1), extra, (None, 0.7)):
            yield op, direction, bias, lens, init, opts, clip


GRID = list(_grid())


def _grid_id(case):
    op, direction, bias, lens, init, opts, clip = case
    parts = [op, direction, "bias" if bias else "nobias", "lens" if lens else "nolens",
             "init" if init else "noinit"]
    parts += [f"{k}{v}" for k, v in opts.items()]
    parts.append(f"clip{clip}" if clip else "noclip")
    return "-".join(parts)


@pytest.mark.parametrize("index", range(len(GRID)), ids=[_grid_id(c) for c in GRID])
def test_options_against_ort(index):
    case = GRID[index]
    op, direction, bias, lens, init, opts, clip = case
    rng = np.random.default_rng(index)
    opts = dict(opts)
    peep = bool(opts.pop("peep", 0))
    tensors = make_case(rng, op, direction, bias=bool(bias), lens=bool(lens), init=bool(init), peep=peep)
    attrs = dict(hidden_size=4, direction=direction, clip=clip, **opts)
    expected = check_against_ort(op, tensors, attrs, _grid_id(case))

    got1 = ref_run(op, to_layout1(tensors), dict(attrs, layout=1))
    for name, r, e in zip(OUTPUTS[op], got1, expected_layout1(expected)):
        assert_close(r, e, f"{_grid_id(case)} layout 1 {name}")


def test_grid_exercises_clip_and_empty_rows():
    """The grid's inputs must actually hit the clip bound and include a length-0 row."""
    rng = np.random.default_rng(0)
    t = make_case(rng, "LSTM", "forward", lens=True)
    pre = t["X"] @ t["W"][0].T
    assert np.abs(pre).max() > 0.7
    assert 0 in t["sequence_lens"] and 5 in t["sequence_lens"]


# ---------------------------------------------------------------------------
# Every activation in every slot of both directions, with alpha/beta given
# (one spare value each, which ORT ignores) and with ORT's defaults.

def _activation_cases():
    for op in ("LSTM", "GRU", "RNN"):
        slots = len(DEFAULT_ACTIVATIONS[op])
        for slot in range(slots):
            for k, name in enumerate(ACTIVATIONS):
                for params in ("given", "default"):
                    yield op, slot, name, ACTIVATIONS[(k + 3) % len(ACTIVATIONS)], params


ACT_CASES = list(_activation_cases())


@pytest.mark.parametrize("index", range(len(ACT_CASES)), ids=["-".join(map(str, c)) for c in ACT_CASES])
def test_activation_slots_against_ort(index):
    case = ACT_CASES[index]
    op, slot, forward_name, reverse_name, params = case
    rng = np.random.default_rng(1000 + index)
    names_f = list(DEFAULT_ACTIVATIONS[op])
    names_r = list(DEFAULT_ACTIVATIONS[op])
    names_f[slot] = forward_name
    names_r[slot] = reverse_name
    # Parameterised neighbours in the other slots, so the alpha/beta cursors
    # have to skip and consume across slots and directions.
    if op == "LSTM":
        names_r[(slot + 1) % 3] = "HardSigmoid"
    elif op == "GRU":
        names_f[1 - slot] = "LeakyRelu" if slot == 0 else "HardSigmoid"
    names = names_f + names_r
    n_alpha = sum(n in TAKES_ALPHA for n in names)
    n_beta = sum(n in TAKES_BETA for n in names)
    attrs = dict(hidden_size=3, direction="bidirectional", activations=names)
    if params == "given":
        attrs["activation_alpha"] = [float(v) for v in rng.uniform(0.1, 1.5, n_alpha + 1)]
        attrs["activation_beta"] = [float(v) for v in rng.uniform(-0.5, 0.9, n_beta + 1)]
    tensors = make_case(rng, op, "bidirectional", hidden=3, lens=True, init=True)
    check_against_ort(op, tensors, attrs, "-".join(map(str, case)))


def test_seed_cursor_example_against_ort():
    """The black-box case behind docs/design.md, 'Activations': separate alpha and beta
    cursors over one LSTM set, here on both directions with the reverse set falling back to defaults."""
    rng = np.random.default_rng(7)
    tensors = make_case(rng, "LSTM", "bidirectional", init=True)
    attrs = dict(hidden_size=4, direction="bidirectional",
                 activations=["HardSigmoid", "LeakyRelu", "ScaledTanh",
                              "HardSigmoid", "ThresholdedRelu", "Affine"],
                 activation_alpha=[0.3, 0.2, 1.2], activation_beta=[0.4, 0.7])
    check_against_ort("LSTM", tensors, attrs, "cursor example")


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_one_activation_set_for_bidirectional(op):
    """ORT refuses one set for a bidirectional layer; the reference uses it for both
    directions, i.e. it equals ORT given the set twice (alpha/beta consumed once)."""
    rng = np.random.default_rng(11)
    one = {"LSTM": ["HardSigmoid", "Elu", "ScaledTanh"], "GRU": ["HardSigmoid", "Elu"],
           "RNN": ["Affine"]}[op]
    tensors = make_case(rng, op, "bidirectional", init=True)
    alpha, beta = [0.4, 0.9, 0.7], [0.3, 0.6]
    with pytest.raises(Exception, match="num_directions"):
        ort_run(op, tensors, dict(hidden_size=4, direction="bidirectional", activations=one,
                                  activation_alpha=alpha, activation_beta=beta))
    n_alpha = sum(n in TAKES_ALPHA for n in one)
    n_beta = sum(n in TAKES_BETA for n in one)
    twice = dict(hidden_size=4, direction="bidirectional", activations=one + one,
                 activation_alpha=alpha[:n_alpha] * 2, activation_beta=beta[:n_beta] * 2)
    expected = ort_run(op, tensors, twice)
    got = ref_run(op, tensors, dict(hidden_size=4, direction="bidirectional", activations=one,
                                    activation_alpha=alpha, activation_beta=beta))
    for name, r, e in zip(OUTPUTS[op], got, expected):
        assert_close(r, e, f"{op} one set {name}")


def test_rnn_two_names_on_one_direction_uses_the_first():
    rng = np.random.default_rng(12)
    tensors = make_case(rng, "RNN", "forward", init=True)
    attrs = dict(hidden_size=4, activations=["LeakyRelu", "Tanh"], activation_alpha=[0.3])
    check_against_ort("RNN", tensors, attrs, "RNN two names")


def test_activation_names_case_insensitive_against_ort():
    rng = np.random.default_rng(13)
    tensors = make_case(rng, "GRU", "forward")
    attrs = dict(hidden_size=4, activations=["hardSIGMOID", "softsign"])
    check_against_ort("GRU", tensors, attrs, "GRU lower-case names")


# ---------------------------------------------------------------------------
# ortops.activations.apply against ORT's own activation code (an RNN with
# W = 1, R = 0 and no bias outputs f(x) at every step).

X_GRID = np.concatenate([np.linspace(-20, 20, 161), [-1e-3, 1e-3, 0.0]]).astype(np.float32)


def _ort_activation(name, alpha, beta):
    x = X_GRID.reshape(-1, 1, 1)
    attrs = dict(hidden_size=1, activations=[name])
    if alpha is not None:
        attrs["activation_alpha"] = [alpha]
    if beta is not None:
        attrs["activation_beta"] = [beta]
    Y, _ = ort_run("RNN", {"X": x, "W": np.ones((1, 1, 1), np.float32),
                           "R": np.zeros((1, 1, 1), np.float32)}, attrs)
    return Y.ravel()


@pytest.mark.parametrize("name", ACTIVATIONS)
@pytest.mark.parametrize("params", ["given", "default"])
def test_apply_against_ort(name, params):
    from ortops.activations import resolve_activations

    alpha = 0.7 if params == "given" and name in TAKES_ALPHA else None
    beta = -0.3 if params == "given" and name in TAKES_BETA else None
    (act,), = resolve_activations("RNN", 1, [name],
                                  None if alpha is None else [alpha],
                                  None if beta is None else [beta])
    expected = _ort_activation(name, alpha, beta)
    assert_close(apply(act, X_GRID), expected, f"{name} {params}")


def test_ort_defaults_are_zero_where_seed_001_says_one():
    """The semantics note gave ThresholdedRelu 1 and Affine/ScaledTanh alpha 1; ORT 1.32 uses 0
    (docs/design.md, 'Activations')."""
    x = X_GRID.astype(np.float64)
    assert np.array_equal(_ort_activation("ThresholdedRelu", None, None), np.where(x > 0, x, 0).astype(np.float32))
    assert not _ort_activation("Affine", None, None).any()
    assert not _ort_activation("ScaledTanh", None, None).any()


def test_apply_never_overflows():
    x = np.array([-1e308, -1000.0, -50.0, 50.0, 1000.0, 1e308])
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        for name in ("Sigmoid", "Softplus", "Elu", "Tanh", "Softsign"):
            y = apply(Activation(name, 1.0, 0.0), x)
            assert np.isfinite(y).all(), name
    assert apply(Activation("Softplus"), np.array([1000.0]))[0] == 1000.0
    assert apply(Activation("Sigmoid"), np.array([-1000.0]))[0] == 0.0


def test_apply_nan_rules():
    nan = np.array([np.nan])
    for name in ACTIVATIONS:
        y = apply(Activation(name, 0.5, 0.5), nan)[0]
        if name == "ThresholdedRelu":
            assert y == 0.0  # NaN > alpha is false
        else:
            assert np.isnan(y), name


# ---------------------------------------------------------------------------
# onnx's backend node tests for the three operators (the reference must pass all
# 18, the layout-1 *_batchwise ones included; ORT CPU fails those three).

BACKEND_NAMES = {
    "test_lstm_defaults", "test_lstm_with_initial_bias", "test_lstm_with_peepholes",
    "test_lstm_batchwise", "test_lstm_reverse", "test_lstm_bidirectional",
    "test_gru_defaults", "test_gru_with_initial_bias", "test_gru_seq_length",
    "test_gru_batchwise", "test_gru_reverse", "test_gru_bidirectional",
    "test_simple_rnn_defaults", "test_simple_rnn_with_initial_bias", "test_rnn_seq_length",
    "test_simple_rnn_batchwise", "test_simple_rnn_reverse", "test_simple_rnn_bidirectional",
}


def _backend_cases():
    import onnx.backend.test.case.node as node_cases

    # collect_testcases() imports and runs every operator's exporter (about 10 s);
    # importing the three modules runs only theirs and fills the same list.
    cases = getattr(node_cases, "_NodeTestCases", None)
    if cases is None:
        cases = node_cases.collect_testcases()
    else:
        for module in ("lstm", "gru", "rnn"):
            importlib.import_module(f"onnx.backend.test.case.node.{module}")
    return {c.name: c for c in cases if c.name in BACKEND_NAMES}


@pytest.fixture(scope="module")
def backend_cases():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _backend_cases()


def test_backend_suite_has_18_recurrent_cases(backend_cases):
    assert set(backend_cases) == BACKEND_NAMES


@pytest.mark.parametrize("name", sorted(BACKEND_NAMES))
def test_backend_case(backend_cases, name):
    case = backend_cases[name]
    node = case.model.graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if isinstance(attrs.get("direction"), bytes):
        attrs["direction"] = attrs["direction"].decode()
    for inputs, outputs in case.data_sets:
        given = iter(inputs)
        tensors = {INPUTS[node.op_type][k]: next(given) for k, n in enumerate(node.input) if n}
        got = ref_run(node.op_type, tensors, attrs)
        expected = iter(outputs)
        checked = 0
        for k, n in enumerate(node.output):
            if n:
                assert_close(got[k], next(expected), f"{name} {OUTPUTS[node.op_type][k]}")
                checked += 1
        assert checked == len(outputs)


# ---------------------------------------------------------------------------
# What ORT cannot be asked (it aborts or returns uninitialised memory): the
# reference's own zero-size semantics, and dtypes ORT has no kernel for.

@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("layout", [0, 1])
def test_seq_zero_returns_initial_states(op, layout):
    rng = np.random.default_rng(21)
    t = make_case(rng, op, "bidirectional", seq=0, batch=3, init=True, lens=False)
    t["sequence_lens"] = np.zeros(3, np.int32)
    if layout:
        t = to_layout1(t)
    out = ref_run(op, t, dict(direction="bidirectional", layout=layout))
    assert out[0].shape == ((0, 2, 3, 4) if layout == 0 else (3, 0, 2, 4))
    assert np.array_equal(out[1], t["initial_h"])
    if op == "LSTM":
        assert np.array_equal(out[2], t["initial_c"])
    no_init = ref_run(op, {k: v for k, v in t.items() if not k.startswith("initial")},
                      dict(direction="bidirectional", layout=layout))
    assert all(a.shape == b.shape for a, b in zip(no_init, out))
    assert not any(a.any() for a in no_init[1:])


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_batch_zero_returns_empty_outputs(op):
    rng = np.random.default_rng(22)
    t = make_case(rng, op, "reverse", batch=0, init=True)
    out = ref_run(op, t, dict(direction="reverse"))
    assert out[0].shape == (5, 1, 0, 4)
    assert all(s.shape == (1, 0, 4) for s in out[1:])


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_all_rows_empty_against_ort(op):
    rng = np.random.default_rng(23)
    t = make_case(rng, op, "bidirectional", init=True)
    t["sequence_lens"] = np.zeros(4, np.int32)
    expected = check_against_ort(op, t, dict(hidden_size=4, direction="bidirectional"), f"{op} all empty")
    assert not any(e.any() for e in expected)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_float16_and_float64_inputs_match_float32(op):
    rng = np.random.default_rng(24)
    t32 = make_case(rng, op, "bidirectional", bias=True, lens=True, init=True, peep=(op == "LSTM"))
    t16 = {k: (v.astype(np.float16) if v.dtype == np.float32 else v) for k, v in t32.items()}
    t32r = {k: (v.astype(np.float32) if v.dtype == np.float16 else v) for k, v in t16.items()}
    t64 = {k: (v.astype(np.float64) if v.dtype == np.float16 else v) for k, v in t16.items()}
    attrs = dict(direction="bidirectional")
    a, b, c = ref_run(op, t16, attrs), ref_run(op, t32r, attrs), ref_run(op, t64, attrs)
    for x, y, z in zip(a, b, c):
        assert x.dtype == np.float64
        assert np.array_equal(x, y) and np.array_equal(x, z)


# ---------------------------------------------------------------------------
# Things the validation refuses, and that ORT refuses too.

def test_ort_also_refuses_what_validation_refuses():
    rng = np.random.default_rng(25)
    t = make_case(rng, "LSTM", "forward", lens=True)
    bad_len = dict(t, sequence_lens=np.array([5, 6, 1, 0], np.int32))
    with pytest.raises(Exception, match="sequence_lens"):
        ort_run("LSTM", bad_len, dict(hidden_size=4))
    with pytest.raises(ValueError, match=r"LSTM: sequence_lens\[1\] = 6 is outside \[0, 5\]"):
        ref_run("LSTM", bad_len, dict(hidden_size=4))
    int64 = dict(t, sequence_lens=t["sequence_lens"].astype(np.int64))
    with pytest.raises(Exception, match="int64"):
        ort_run("LSTM", int64, dict(hidden_size=4))
    with pytest.raises(ValueError, match="LSTM: sequence_lens must have dtype int32"):
        ref_run("LSTM", int64, dict(hidden_size=4))
    for op in ("LSTM", "GRU"):
        t = make_case(rng, op, "forward")
        for clip in (0.0, -1.0, float("nan")):
            with pytest.raises(Exception, match="clip"):
                ort_run(op, t, dict(hidden_size=4, clip=clip))
            with pytest.raises(ValueError, match=f"{op}: clip must be (null or a positive|a finite) number"):
                ref_run(op, t, dict(hidden_size=4, clip=clip))
