"""IEEE special values on the device, against the float64 reference and ONNX Runtime CPU.

docs/special_values.md is the contract this file checks. Every case:

  * runs on the device twice (one RecurrentLayer) and requires identical bits;
  * compares the device with the float64 reference (ortops.reference) by
    ortops.compare.special_mismatches: NaN at the same positions, +-Inf at the same positions
    with the same signs, the finite elements within the scaled error (1e-5 float32, 2e-3
    float16, over the finite elements), and the sign of every exact zero on which the
    reference and ORT CPU agree;
  * runs stock ONNX Runtime CPU on a standard node (layout 0, float32; a float16 case through
    ortops.ort.equivalent's float32 model) and compares it by the same rule with the reference's
    model of ORT (``ort_cpu=True``), which differs from the reference only where ortops
    deliberately differs from ORT (the disagreements in docs/special_values.md). So each case
    shows both that the device follows the reference and that ORT does exactly what the
    documentation says it does.

The matrix (small shapes: seq 3, batch 3, input 4, hidden 5; sequence_lens [2, 0, 3]):

  * placements: NaN, +Inf, -Inf and -0 put one at a time into X, initial_h, initial_c, W, R,
    B and P, at two positions each (X also in a padding step, which must change nothing), for
    LSTM (peepholes, clip, input_forget, with and without B), GRU (linear_before_reset 0 and 1,
    clip, with and without B) and RNN (clip, without), in both directions; float32, and
    float16 for three of the layers;
  * activations: every activation of ortops.activations in every slot (LSTM f, g, h; GRU f, g;
    RNN f) of both directions (eleven rotations per cell), with NaN, +-Inf and +-1e30 in X and
    in the initial state (the LSTM h slot sees the cell state), and +-1e4 and +-100 (exp
    overflow and saturation) in both on a layer without recurrence (R = 0, P = 0, see
    MODERATE); float32 and, for four rotations per cell, float16 (large values 6e4, 1e4, 100);
  * named cases for each documented disagreement with ORT CPU, and for the clip defect seen
    on the NVIDIA H200 (an LSTM with clip and a NaN input gave finite numbers).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

import ortops
from ortops import fast, variants
from ortops.activations import ACTIVATIONS
from ortops.compare import special_mismatches
from ortops.device import UnsupportedDeviceError
from ortops.ort.equivalent import cpu_equivalent, cpu_feeds
from _cases import GATES, INPUTS, OUTPUTS, REFERENCE, SLOTS, activation_params, rotation, seed_of

pytestmark = pytest.mark.gpu

SEQ, BATCH, INPUT, HIDDEN = 3, 3, 4, 5
LENS = [2, 0, 3]     # a row that ends early, an empty row, a full row
SPECIAL = {"nan": np.nan, "+inf": np.inf, "-inf": -np.inf, "-0": -0.0}

# What the whole module saw (printed at the end with -s; the guards below read it).
SEEN = {"cases": 0, "nan": 0, "inf": 0, "neg_zero": 0, "ort_differs": 0,
        "zero_sign_disagreements": 0}


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    print("\nspecial values: " + ", ".join(f"{k} {v}" for k, v in SEEN.items()))


# --------------------------------------------------------------------------- running


def make_tensors(op, *, direction, dtype=np.float32, bias=True, peepholes=True, seed=0,
                 lens=LENS, initial=True):
    """Ordinary inputs for one layer (pre-activations of about +-1), keyed by ONNX name."""
    rng = np.random.default_rng(seed)
    D, G, H = (2 if direction == "bidirectional" else 1), GATES[op], HIDDEN

    def draw(shape, scale):
        return rng.uniform(-scale, scale, shape).astype(np.float32).astype(dtype)

    t = {"X": draw((SEQ, BATCH, INPUT), 1.0),
         "W": draw((D, G * H, INPUT), 1.5 / np.sqrt(INPUT)),
         "R": draw((D, G * H, H), 1.5 / np.sqrt(H))}
    B = draw((D, 2 * G * H), 0.5)
    h0, c0 = draw((D, BATCH, H), 0.8), draw((D, BATCH, H), 0.8)
    P = draw((D, 3 * H), 0.8)
    t["B"] = B if bias else None
    t["sequence_lens"] = None if lens is None else np.asarray(lens, np.int32)
    t["initial_h"] = h0 if initial else None
    if op == "LSTM":
        t["initial_c"] = c0 if initial else None
        t["P"] = P if peepholes else None
    return t


_SESSIONS: dict = {}


def ort_cpu(op, t, attrs):
    """Stock ONNX Runtime CPU on one standard node: float32, layout 0 (a float16 model goes
    through ortops.ort.equivalent's float32 model, which widens it exactly). Sessions are cached
    per node; tensors are fed as graph inputs."""
    present = tuple(n for n in INPUTS[op] if t.get(n) is not None)
    dtype = t["X"].dtype
    key = (op, tuple(sorted((k, repr(v)) for k, v in attrs.items())), dtype.name,
           tuple((n, t[n].shape) for n in present))
    sess = _SESSIONS.get(key)
    if sess is None:
        names = [n if t.get(n) is not None else "" for n in INPUTS[op]]
        while names and names[-1] == "":
            names.pop()
        infos = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(t[n].dtype),
                                               list(t[n].shape)) for n in present]
        node_attrs = {k: v for k, v in attrs.items() if v is not None and v != []}
        node = helper.make_node(op, names, list(OUTPUTS[op]), hidden_size=t["R"].shape[-1],
                                **node_attrs)
        elem = helper.np_dtype_to_tensor_dtype(dtype)
        outs = [helper.make_tensor_value_info(o, elem, None) for o in OUTPUTS[op]]
        model = helper.make_model(helper.make_graph([node], "g", infos, outs),
                                  opset_imports=[helper.make_opsetid("", 22)])
        model.ir_version = 10
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.log_severity_level = 4
        sess = ort.InferenceSession(cpu_equivalent(model).SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        _SESSIONS[key] = sess
    return sess.run(None, cpu_feeds({n: t[n] for n in present}))


def make_layer(op, t, attrs, mode="deterministic"):
    return ortops.RecurrentLayer(op, t["W"], t["R"], t.get("B"), t.get("P"), **attrs, mode=mode)


def _layer_in(mode, op, t, attrs):
    """make_layer's layer in ``mode``, or in make_layer's own mode for None (a module that
    replaces make_layer, test_special_values_exact, keeps its mode)."""
    return make_layer(op, t, attrs) if mode is None else make_layer(op, t, attrs, mode)


def run_layer(layer, t):
    return layer(t["X"], t["sequence_lens"], t["initial_h"], t.get("initial_c"))


def check(op, t, attrs, layer=None, *, expect_ort_differs=None, what="", mode=None):
    """Run one case everywhere and apply the rule; returns (device, reference, ORT) outputs.

    ``expect_ort_differs``: None to accept either; True / False to require that the reference
    and its model of ORT (so ORT itself) do / do not disagree on some NaN, Inf or finite value.
    """
    layer = layer if layer is not None else _layer_in(mode, op, t, attrs)
    first = run_layer(layer, t)
    again = run_layer(layer, t)
    ref = REFERENCE[op](**t, **attrs)
    ref_ort = REFERENCE[op](**t, **attrs, ort_cpu=True)
    got_ort = ort_cpu(op, t, attrs)
    dtype = t["X"].dtype
    differs = False
    for name, dev, dev2, r, ro, o in zip(OUTPUTS[op], first, again, ref, ref_ort, got_ort):
        assert dev.dtype == dtype and dev.shape == r.shape, f"{name}: {dev.dtype} {dev.shape}"
        assert dev.tobytes() == dev2.tobytes(), f"{what} {name}: a second run gives different bits"
        problems = special_mismatches(o, ro, tol=1e-5)
        assert not problems, f"{what} {name}: ORT CPU against the reference's model: {problems}"
        problems = special_mismatches(dev, r, other=o)
        assert not problems, f"{what} {name}: device against the reference: {problems}"
        differs |= bool(special_mismatches(ro, r, tol=1e-5))
        SEEN["nan"] += int(np.isnan(r).any())
        SEEN["inf"] += int(np.isinf(r).any())
        SEEN["neg_zero"] += int(((r == 0) & np.signbit(r)).any())
        opposite = (r == 0) & (o == 0) & (np.signbit(r) != np.signbit(o))
        SEEN["zero_sign_disagreements"] += int(opposite.sum())
    SEEN["cases"] += 1
    SEEN["ort_differs"] += int(differs)
    if expect_ort_differs is not None:
        assert differs == expect_ort_differs, (
            "ORT CPU " + ("agrees with" if expect_ort_differs else "differs from")
            + " the reference here, against what docs/special_values.md says")
    return first, ref, got_ort


def placed(t, name, index, value):
    """A copy of ``t`` with ``t[name][index] = value``."""
    out = dict(t)
    a = t[name].copy()
    a[index] = value
    out[name] = a
    return out


# --------------------------------------------------------------------------- placements

# name: (op, attrs, bias, peepholes); every layer has initial states and sequence_lens.
LAYERS = {
    "lstm": ("LSTM", {"direction": "bidirectional"}, True, True),
    "lstm-clip": ("LSTM", {"direction": "forward", "clip": 1.0}, True, True),
    "lstm-nobias-input_forget": ("LSTM", {"direction": "reverse", "input_forget": 1, "clip": 2.0},
                                 False, True),
    "gru": ("GRU", {"direction": "bidirectional", "linear_before_reset": 0}, True, False),
    "gru-lbr-clip": ("GRU", {"direction": "bidirectional", "linear_before_reset": 1, "clip": 1.0},
                     True, False),
    "gru-nobias": ("GRU", {"direction": "reverse", "linear_before_reset": 0}, False, False),
    "rnn-clip": ("RNN", {"direction": "bidirectional", "clip": 1.0}, True, False),
    "rnn-nobias": ("RNN", {"direction": "forward"}, False, False),
}
FLOAT16_LAYERS = ("lstm", "gru-lbr-clip", "rnn-clip")


def positions(op, name, shape):
    """Where a value goes in tensor ``name``: two places reached by different directions,
    rows, gates and units (the first and the second-to-last element; both in rows that run:
    sequence_lens is [2, 0, 3]), and for X also a padding step of row 0 (t = 2 >= its length
    2), which must change nothing."""
    size = int(np.prod(shape))
    found = [("first", np.unravel_index(1, shape)), ("last", np.unravel_index(size - 2, shape))]
    if name == "X":
        found.append(("padding", (2, 0, 1)))
    return found


def unread(op, attrs, name, index):
    """Whether no step reads this element: the forget gate's peephole under input_forget."""
    return op == "LSTM" and attrs.get("input_forget") and name == "P" and index[-1] >= 2 * HIDDEN


def placement_cases():
    for layer_name, (op, attrs, bias, peep) in LAYERS.items():
        for dtype in (np.float32, np.float16):
            if dtype == np.float16 and layer_name not in FLOAT16_LAYERS:
                continue
            yield pytest.param(layer_name, dtype, id=f"{layer_name}-{np.dtype(dtype).name}")


@pytest.mark.parametrize("layer_name, dtype", list(placement_cases()))
def test_placements(layer_name, dtype):
    placements(layer_name, dtype, None)


@pytest.mark.parametrize("layer_name", FLOAT16_LAYERS)
def test_placements_fast(layer_name, monkeypatch):
    # Mode "fast" with its matrix-unit kernels from batch 1 (these layers have batch 3): the
    # cooperative-matrix projection and glsl/step_coopmat.comp where the device has the
    # hardware (h rounded to float16 for R . h), the deterministic kernels elsewhere. The same
    # rule as every mode: NaN, +-Inf and -0 where the reference has them.
    monkeypatch.setattr(fast, "ENABLED", True)
    monkeypatch.setattr(variants, "COOPMAT_STEPS_FROM", 1)
    placements(layer_name, np.float16, "fast")


def placements(layer_name, dtype, mode):
    op, attrs, bias, peep = LAYERS[layer_name]
    base = make_tensors(op, direction=attrs["direction"], dtype=dtype, bias=bias, peepholes=peep,
                        seed=seed_of(layer_name))
    clean_layer = _layer_in(mode, op, base, attrs)
    clean = check(op, base, attrs, clean_layer, mode=mode)[0]
    tensors = [n for n in INPUTS[op] if n != "sequence_lens" and base.get(n) is not None]
    for name in tensors:
        for value_name, value in SPECIAL.items():
            # The weights are uploaded with the layer: a new one per weight placement.
            for where, index in positions(op, name, base[name].shape):
                t = placed(base, name, index, value)
                layer = clean_layer if name in ("X", "initial_h", "initial_c") else None
                what = f"{layer_name} {name}{tuple(int(i) for i in index)} = {value_name}"
                got, ref, _ = check(op, t, attrs, layer, what=what, mode=mode)
                if where == "padding":
                    # A padding step is never read: the clean run's bits, NaN or not.
                    for a, b in zip(got, clean):
                        assert a.tobytes() == b.tobytes(), f"{what}: padding changed the result"
                elif value_name == "nan" and not unread(op, attrs, name, index):
                    # Guards the comparison: a NaN in anything a step reads reaches the outputs.
                    assert any(np.isnan(r).any() for r in ref), f"{what}: no NaN in the reference"


# --------------------------------------------------------------------------- activations

def activation_attrs(op, shift):
    """Forward set ACTIVATIONS[shift:], reverse set the next ones: over shift = 0..10 every
    activation lands in every slot of both directions."""
    names = rotation(op, shift, 2)
    alphas, betas = activation_params(names)
    attrs = {"direction": "bidirectional", "activations": names, "activation_alpha": alphas,
             "activation_beta": betas}
    if op == "GRU":
        attrs["linear_before_reset"] = shift % 2
    if op == "LSTM" and shift % 3 == 0:
        attrs["clip"] = 1.0
    return attrs


# Values put into X (one element: step 1 of row 2, so both directions read it mid-sequence)
# and into the initial states (the LSTM cell state is the h slot's input). EXTREME values run
# on the layer as drawn: NaN and +-Inf, and 1e30, which saturates every bounded activation
# exactly and overflows a product of two unbounded ones. MODERATE values (exp overflow: |x| of
# 100 and 1e4 sits between float32's exp limit, 88.7, and exact saturation) run with R = 0 and
# P = 0: a large finite state fed back through R or the peepholes meets ordinary values in
# sums that cancel, and float32 rounding of the large terms then exceeds the tolerance on the
# small result (ill-conditioning, not a special-value question). float16 cannot hold 1e30: its
# large values are 6e4 (moderate) and Inf.
EXTREME = {np.dtype(np.float32): (np.nan, np.inf, -np.inf, 1e30, -1e30),
           np.dtype(np.float16): (np.nan, np.inf, -np.inf)}
# A GRU whose f is unbounded makes z huge from a huge input, and h = (1 - z) * g + z * h_prev
# then cancels two products of about 1e30 * 1.3 exactly when g and h_prev saturate at the same
# value: the result is one rounding of them, 0 without a fused multiply-add (lavapipe, the
# reference) and -1.8e22 with one (NVIDIA's FMA). Ill-conditioned, not a special-value
# question: such a GRU gets no +-1e30 (NaN and +-Inf give NaN or Inf there, whatever fuses).
UNBOUNDED = {"Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "Elu", "Softplus"}
MODERATE = {np.dtype(np.float32): (1e4, -1e4, 100.0, -100.0),
            np.dtype(np.float16): (6e4, -6e4, 1e4, -1e4, 100.0, -100.0)}
ACTIVATION_RUNS = [pytest.param(op, shift, np.float32, id=f"{op}-{shift}-float32")
                   for op in ("LSTM", "GRU", "RNN") for shift in range(len(ACTIVATIONS))]
ACTIVATION_RUNS += [pytest.param(op, shift, np.float16, id=f"{op}-{shift}-float16")
                    for op in ("LSTM", "GRU", "RNN") for shift in (0, 3, 6, 9)]


@pytest.mark.parametrize("op, shift, dtype", ACTIVATION_RUNS)
def test_activations(op, shift, dtype):
    # No B: ORT CPU's LSTM and GRU turn every NaN pre-activation into a clamp bound when B is
    # given (test_clip_and_nan_with_bias); without B they propagate it, so ORT checks NaN here.
    attrs = activation_attrs(op, shift)
    base = make_tensors(op, direction="bidirectional", dtype=dtype, bias=False,
                        peepholes=op == "LSTM", seed=seed_of("act", op, shift))
    quiet = dict(base, R=np.zeros_like(base["R"]))
    if op == "LSTM":
        quiet["P"] = np.zeros_like(base["P"])
    state = "initial_c" if op == "LSTM" else "initial_h"
    dtype = np.dtype(dtype)
    extreme = EXTREME[dtype]
    if op == "GRU" and UNBOUNDED & {attrs["activations"][0], attrs["activations"][2]}:
        extreme = tuple(v for v in extreme if not np.isfinite(v) or abs(v) < 1e30)
    for t, values in ((base, extreme), (quiet, MODERATE[dtype])):
        layer = make_layer(op, t, attrs)
        for value in values:
            check(op, placed(t, "X", (1, 2, 1), value), attrs, layer, what=f"X = {value}")
            check(op, placed(t, state, (1, 2, 3), value), attrs, layer, what=f"{state} = {value}")


def test_activation_runs_cover_every_slot():
    # Guards the activation matrix: every activation in every slot of both directions, in
    # float32 (the float16 runs repeat four rotations: float16 changes loads and stores only).
    for op, n in SLOTS.items():
        seen = set()
        for p in ACTIVATION_RUNS:
            run_op, shift, dtype = p.values
            if run_op == op and dtype == np.float32:
                names = activation_attrs(op, shift)["activations"]
                seen |= {(d, k, names[d * n + k]) for d in range(2) for k in range(n)}
        assert len(seen) == 2 * n * len(ACTIVATIONS), op


# --------------------------------------------------------------------------- named cases


def one_unit(op, *, W, R=None, B=None, X, h0=None, c0=None, P=None, dtype=np.float32):
    """A one-direction layer of one hidden unit and one input, for hand-made cases."""
    G = GATES[op]

    def f(a, shape):
        return None if a is None else np.asarray(a, np.float32).reshape(shape).astype(dtype)

    t = {"X": f(X, (-1, 1, 1)), "W": f(W, (1, G, 1)),
         "R": f(np.zeros(G) if R is None else R, (1, G, 1)), "B": f(B, (1, 2 * G)),
         "sequence_lens": None, "initial_h": f(h0, (1, 1, 1))}
    if op == "LSTM":
        t["initial_c"] = f(c0, (1, 1, 1))
        t["P"] = f(P, (1, 3))
    return t


def _attrs(**kw):
    return dict({"direction": "forward"}, **kw)


def test_clip_keeps_nan_without_bias():
    # The H200 defect: LSTM, clip = 1, a NaN in X. ORT CPU (no B), the reference and the device
    # all give NaN; a compiler that turns clip's compares into min/max would give +-1.
    t = make_tensors("LSTM", direction="forward", bias=False, seed=seed_of("clip"))
    t = placed(t, "X", (0, 0, 1), np.nan)
    got, ref, ort_out = check("LSTM", t, _attrs(clip=1.0), expect_ort_differs=False)
    # Row 0 runs 2 steps (sequence_lens [2, 0, 3]); the NaN is in its first.
    assert np.isnan(got[0][:2, 0, 0]).all() and np.isnan(ort_out[0][:2, 0, 0]).all()


@pytest.mark.parametrize("op", ("LSTM", "GRU"))
@pytest.mark.parametrize("clip", (None, 1.0))
def test_clip_and_nan_with_bias(op, clip):
    # ORT CPU's LSTM and GRU with B clamp every pre-activation with std::min/std::max
    # (clip_add_bias), at FLT_MAX without clip: std::min(c, NaN) is c, so a NaN becomes +clip
    # and the outputs are finite. Decision: NaN passes clip, as ONNX says and as ORT itself
    # does without B.
    t = make_tensors(op, direction="forward", seed=seed_of("bias clip", op))
    t = placed(t, "X", (0, 0, 1), np.nan)
    attrs = _attrs(clip=clip, **({"linear_before_reset": 0} if op == "GRU" else {}))
    got, ref, ort_out = check(op, t, attrs, expect_ort_differs=True)
    assert np.isnan(got[0][:2, 0, 0]).all() and np.isnan(ref[0][:2, 0, 0]).all()
    assert np.isfinite(ort_out[0]).all()


@pytest.mark.parametrize("name", ("Relu", "HardSigmoid"))
def test_relu_and_hardsigmoid_keep_nan(name):
    # ORT CPU's Relu and HardSigmoid are std::max(0.0f, x) (and std::min): NaN gives 0.
    # Decision: NaN (max and min propagate NaN: IEEE 754-2019 maximum, numpy, docs/design.md, 'Activations').
    t = one_unit("RNN", W=[1.0], X=[np.nan, 1.0, -2.0])
    got, ref, ort_out = check("RNN", t, _attrs(activations=[name]), expect_ort_differs=True)
    assert np.isnan(got[0][0]).all() and ort_out[0][0, 0, 0, 0] == 0.0


@pytest.mark.parametrize("x", (89.0, 100.0, 1e4, 1e30))
def test_softplus_of_large_input_is_finite(x):
    # ORT CPU's Softplus is log(1 + exp(x)) in float32: +Inf once exp overflows (x > 88.72).
    # Decision: Softplus(x) is x there (its value, representable; only the formula overflows).
    t = one_unit("RNN", W=[1.0], X=[x])
    got, ref, ort_out = check("RNN", t, _attrs(activations=["Softplus"]), expect_ort_differs=True)
    assert got[0][0, 0, 0, 0] == np.float32(x) and np.isinf(ort_out[0]).all()


def test_infinite_pre_activation_is_not_clamped():
    # ORT CPU's LSTM and GRU clamp every pre-activation to +-FLT_MAX even without clip, so
    # Relu(+Inf) is FLT_MAX there. Decision: +Inf stays +Inf (ONNX clamps only with clip).
    t = one_unit("LSTM", W=[1.0, 1.0, 1.0, 1.0], X=[np.inf])
    attrs = _attrs(activations=["Sigmoid", "Relu", "Tanh"])
    got, ref, ort_out = check("LSTM", t, attrs, expect_ort_differs=True)
    assert np.isposinf(got[2]).all() and np.isfinite(ort_out[2]).all()   # Y_c = 1 * g(+Inf)


def test_gates_saturate_exactly():
    # A gate of +-Inf is exactly 0 or 1 (Sigmoid(-Inf) = 0), so it meets an infinite state as
    # 0 * Inf = NaN. ORT CPU's GRU computes r and the candidate with a tanh approximation that
    # never reaches +-1 exactly (it overshoots to 1.00000048), so there the product stays
    # infinite. Decision: the exact limits.
    # z = Sigmoid(+Inf) = 1, r = Sigmoid(-Inf) = 0: h = (1 - z) * g(r * h0 . Rh) + z * h0 is
    # NaN (0 * Inf inside g) here; ORT's r is -2.4e-7, so g(-Inf) = -1.00000048 and h = +Inf.
    t = one_unit("GRU", W=[0.0, -1.0, 0.0], R=[1.0, -1.0, 1.0], X=[1e30], h0=[np.inf])
    got, ref, ort_out = check("GRU", t, _attrs(linear_before_reset=0), expect_ort_differs=True)
    assert np.isnan(got[1]).all() and not np.isnan(ort_out[1]).any()


def test_mlas_sigmoid_saturation():
    # ORT CPU's LSTM takes Sigmoid from MLAS, exactly 0 below about -17.5: a forget gate of
    # sigmoid(-20) (2.1e-9) times an infinite cell state is NaN there, +Inf here.
    t = one_unit("LSTM", W=[0.0, 0.0, -20.0, 0.0], X=[1.0], c0=[np.inf])
    got, ref, ort_out = check("LSTM", t, _attrs(), expect_ort_differs=True)
    assert np.isposinf(got[2]).all() and np.isnan(ort_out[2]).all()


def test_tanh_of_negative_zero():
    # tanh(-0) = -0: an LSTM whose cell state is -0 (forget gate 1, input gate 0, c0 = -0)
    # outputs h = o * tanh(-0) = -0. The kernel's tanh gave +0 before (x < 0 ? -t : t).
    t = one_unit("LSTM", W=[-1e30, 1.0, 1e30, -1.0], X=[1.0], c0=[-0.0])
    got, ref, ort_out = check("LSTM", t, _attrs(), expect_ort_differs=False)
    for y in (got[1], ref[1], ort_out[1], got[2]):
        assert y[0, 0, 0] == 0 and np.signbit(y[0, 0, 0])


def test_float16_output_overflows_to_inf():
    # A float16 result beyond 65504 is +-Inf (the float32 state is rounded to half at the
    # output): Affine(6e4) = 1.5 * 6e4 = 9e4.
    t = one_unit("RNN", W=[1.0], X=[6e4, -6e4, 100.0], dtype=np.float16)
    attrs = _attrs(activations=["Affine"], activation_alpha=[1.5], activation_beta=[0.0])
    got, ref, ort_out = check("RNN", t, attrs, expect_ort_differs=False)
    assert np.isposinf(got[0][0]).all() and np.isneginf(got[0][1]).all()
    assert np.isfinite(ref[0]).all()     # float64 holds 9e4; the rule rounds it to half first


# --------------------------------------------------------------------------- the device check


def test_device_without_nan_preservation_is_refused():
    dev = ortops.devices()[0]
    weak = dataclasses.replace(dev, nan_preserve_float32=False)
    W = np.zeros((1, 4, 2), np.float32)
    R = np.zeros((1, 4, 1), np.float32)
    with pytest.raises(UnsupportedDeviceError) as info:
        ortops.RecurrentLayer("LSTM", W, R, device=weak)
    text = str(info.value)
    assert dev.name in text and "shaderSignedZeroInfNanPreserveFloat32" in text
    with pytest.raises(RuntimeError, match="shaderSignedZeroInfNanPreserveFloat32"):
        ortops.lstm(np.zeros((1, 1, 2), np.float32), W, R, device=weak)
    ortops.RecurrentLayer("LSTM", W, R, device=dev)   # the real device is accepted
