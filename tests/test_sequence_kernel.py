"""The whole-sequence kernel (glsl/step_sequence.comp: one dispatch walks every time step, a
workgroup per direction and batch rows) against the step kernels.

It computes every recurrent product as the same 32 class sums joined by the same halving tree,
and updates the cells with cell.glsl's code, so a layer must give the step kernels' bits with
it: every cell and pass (a GRU with linear_before_reset = 0 runs both passes in the one
kernel), options, activation sets, hidden sizes around the class length, sequence lengths
(zeros included), initial states, both precisions, both modes, special values; and it is the
kernel the table (SEQUENCE_STEPS in src/core/rnn/variants.hpp) chooses where it says.
"""

import numpy as np
import pytest

import ortops
from ortops import _vk, variants
from _cases import activation_params, layer_case, max_difference, rotation, same_bits, seed_of

pytestmark = pytest.mark.gpu


def _case(op, direction, hidden, batch, dtype, seq=6, inp=11):
    return layer_case(seed_of("sequence", op, direction, hidden, batch, str(dtype)), op, direction, hidden,
                      batch, dtype, seq, inp, zero_row=True)


def _layer(monkeypatch, op, direction, arrays, *, sequence, rows=None, mode=None, **kw):
    """A layer whose plans record the whole-sequence kernel (sequence True) or the step kernels
    (False), with ``rows`` batch rows a workgroup; the persistent kernel, which the table
    (variants.hpp's PERSISTENT_STEPS) takes before either at some GPU shapes, off."""
    monkeypatch.setattr(variants, "PERSISTENT_STEPS", False)
    monkeypatch.setattr(variants, "SEQUENCE_STEPS", sequence)
    monkeypatch.setattr(variants, "SEQUENCE_ROWS", rows)
    weights = {k: arrays[k] for k in ("W", "R", "B", "P") if k in arrays}
    return ortops.RecurrentLayer(op, **weights, direction=direction, mode=mode, **kw)


def _run(layer, arrays, lens, **kw):
    states = {k: arrays[k] for k in ("initial_h", "initial_c") if k in arrays}
    return layer(arrays["X"], lens, **states, **kw)


def _kernels(layer):
    """The step kernels the layer's plans recorded."""
    return {plan.steps for pool in layer._plans.values() for plan in pool.free}


def _assert_same_bits(a, b):
    assert same_bits(a, b), f"max difference {max_difference(a, b)}"


def _options(op, direction, options):
    kw = dict(options)
    if kw.pop("activations", None):
        names = rotation(op, 3, 2 if direction == "bidirectional" else 1)
        alpha, beta = activation_params(names)
        kw.update(activations=names, activation_alpha=alpha or None, activation_beta=beta or None)
    return kw


CASES = [
    # op, direction, hidden, batch, options
    ("LSTM", "bidirectional", 33, 3, {}),
    ("LSTM", "forward", 45, 5, {"clip": 0.6, "input_forget": 1}),
    ("LSTM", "reverse", 7, 4, {"activations": "rotate", "layout": 1}),
    ("LSTM", "bidirectional", 64, 1, {}),
    ("GRU", "bidirectional", 32, 3, {}),                            # two passes in one kernel
    ("GRU", "forward", 45, 3, {"linear_before_reset": 1, "clip": 0.9}),
    ("GRU", "reverse", 33, 4, {"activations": "rotate"}),
    ("RNN", "bidirectional", 40, 3, {}),
    ("RNN", "forward", 7, 2, {"activations": "rotate"}),
]
EXACT_CASES = {0, 4, 7}
MATRIX = [pytest.param(*case, dtype, mode, id=f"{case[0]}-{case[1]}-{case[2]}-{case[3]}-{i}-"
                       f"{np.dtype(dtype).name}-{mode}")
          for i, case in enumerate(CASES) for dtype in (np.float32, np.float16)
          for mode in ("deterministic", "exact") if mode == "deterministic" or i in EXACT_CASES]


@pytest.mark.parametrize("op,direction,hidden,batch,options,dtype,mode", MATRIX)
def test_sequence_kernel_gives_the_step_kernels_bits(monkeypatch, op, direction, hidden, batch, options,
                                                     dtype, mode):
    arrays, lens = _case(op, direction, hidden, batch, dtype)
    kw = _options(op, direction, options)
    if kw.get("layout") == 1:
        arrays["X"] = np.ascontiguousarray(arrays["X"].transpose(1, 0, 2))
        for k in ("initial_h", "initial_c"):
            arrays[k] = np.ascontiguousarray(arrays[k].transpose(1, 0, 2))
    steps = _layer(monkeypatch, op, direction, arrays, sequence=False, mode=mode, **kw)
    want = _run(steps, arrays, lens)
    assert _kernels(steps) <= {"step", "step_batched", "step_tiled"}
    whole = _layer(monkeypatch, op, direction, arrays, sequence=True, mode=mode, **kw)
    got = _run(whole, arrays, lens)
    assert _kernels(whole) == {"step_sequence"}
    _assert_same_bits(want, got)
    _assert_same_bits(got, _run(whole, arrays, lens))                   # run to run
    # Two batch rows a workgroup (the last block partly empty where the batch is odd).
    two = _layer(monkeypatch, op, direction, arrays, sequence=True, rows=2, mode=mode, **kw)
    _assert_same_bits(want, _run(two, arrays, lens))


def test_lengths_max_length_and_missing_states(monkeypatch):
    # Every row of length 0 but one, max_length below the sequence, no initial state, no lens.
    arrays, _ = _case("LSTM", "bidirectional", 20, 4, np.float32, seq=7)
    lens = np.array([5, 0, 0, 2], np.int32)
    for k in ("initial_h", "initial_c"):
        del arrays[k]
    steps = _layer(monkeypatch, "LSTM", "bidirectional", arrays, sequence=False)
    whole = _layer(monkeypatch, "LSTM", "bidirectional", arrays, sequence=True)
    for run_lens, max_length in ((lens, 5), (lens, None), (None, None)):
        kw = {} if max_length is None else {"max_length": max_length}
        want = steps(arrays["X"], run_lens, **kw)
        got = whole(arrays["X"], run_lens, **kw)
        _assert_same_bits(want, got)
    assert _kernels(whole) == {"step_sequence"}
    y, y_h, y_c = whole(arrays["X"], lens)
    assert not y[:, :, 1:3].any() and not y_h[:, 1:3].any() and not y_c[:, 1:3].any()


def _nan_as_canonical(outputs):
    """Every NaN as 0x7FC00000 (docs/special_values.md leaves a NaN's sign and payload
    unspecified in the default mode; its position is specified)."""
    return [np.where(np.isnan(y), np.float32(np.nan), y).astype(y.dtype) for y in outputs]


@pytest.mark.parametrize("mode", ["deterministic", "exact"])
@pytest.mark.parametrize("op,options", [("LSTM", {"clip": 0.7}), ("GRU", {}), ("RNN", {})])
def test_special_values_give_the_step_kernels_bits(monkeypatch, op, options, mode):
    # NaN, +-Inf and -0 in X, the initial state and R: zero signs and Inf as the step kernels
    # give them, NaN at the same places (exact mode: every bit).
    arrays, lens = _case(op, "bidirectional", 33, 5, np.float32)
    arrays["X"][0, 3, 1], arrays["X"][1, 4, 4] = np.nan, np.inf
    arrays["initial_h"][0, 2, 2], arrays["initial_h"][1, 3, 0] = -np.inf, -0.0
    arrays["R"][0, 7, 3], arrays["R"][1, 20, 32] = np.nan, -np.inf
    want = _run(_layer(monkeypatch, op, "bidirectional", arrays, sequence=False, mode=mode, **options), arrays, lens)
    got = _run(_layer(monkeypatch, op, "bidirectional", arrays, sequence=True, mode=mode, **options), arrays, lens)
    assert any(np.isnan(y).any() for y in want)
    if mode == "deterministic":
        want, got = _nan_as_canonical(want), _nan_as_canonical(got)
    _assert_same_bits(want, got)


def test_negative_zero_state_passes_through(monkeypatch):
    # A row of length 0 past its end and -0 initial states: an RNN with Relu keeps h = +0 from
    # -0 (max(0, -0)), an Affine with alpha 1 keeps -0 where the sums are -0: as the step kernels.
    arrays, lens = _case("RNN", "forward", 5, 3, np.float32, seq=3)
    arrays["initial_h"][:] = -0.0
    arrays["W"][:] = -0.0
    arrays["R"][:] = 0.0
    arrays["B"][:] = -0.0
    for acts, alpha, beta in ((["Relu"], None, None), (["Affine"], [1.0], [-0.0])):
        kw = dict(activations=acts, activation_alpha=alpha, activation_beta=beta)
        want = _run(_layer(monkeypatch, "RNN", "forward", arrays, sequence=False, **kw), arrays, lens)
        got = _run(_layer(monkeypatch, "RNN", "forward", arrays, sequence=True, **kw), arrays, lens)
        _assert_same_bits(want, got)


def test_table_chooses_it_where_it_says(monkeypatch):
    # The native table by device class, hidden size and batch (variants.hpp, SEQUENCE_STEPS):
    # this device's layer records the kernel exactly where its class's rule says, and
    # ORTOPS_SEQUENCE_STEPS (read where the tunable is left to the table) turns it off and on.
    monkeypatch.setattr(variants, "SEQUENCE_STEPS", variants.TABLE)
    monkeypatch.delenv("ORTOPS_SEQUENCE_STEPS", raising=False)   # tests/conftest.py sets it to 0
    tables = _vk.batched_tiles()
    rules = tables["sequence_steps"]
    assert [r[0] for r in rules] == ["cpu", "gpu"]
    arrays, lens = _case("LSTM", "bidirectional", 24, 2, np.float32, seq=3)
    weights = {k: arrays[k] for k in ("W", "R", "B", "P")}
    layer = ortops.RecurrentLayer("LSTM", **weights, direction="bidirectional")
    cls = "cpu" if layer.device.type == "cpu" else "gpu"
    rule = next(r for r in rules if r[0] == cls)
    chosen = 24 <= rule[1] and 2 <= rule[2]
    _run(layer, arrays, lens)
    assert _kernels(layer) == ({"step_sequence"} if chosen else {"step"})
    for env, want in (("0", {"step"}), ("1", {"step_sequence"})):
        monkeypatch.setenv("ORTOPS_SEQUENCE_STEPS", env)
        fresh = ortops.RecurrentLayer("LSTM", **weights, direction="bidirectional")
        _run(fresh, arrays, lens)
        assert _kernels(fresh) == want, env
    # The Python tunable wins over the environment.
    monkeypatch.setattr(variants, "SEQUENCE_STEPS", False)
    fresh = ortops.RecurrentLayer("LSTM", **weights, direction="bidirectional")
    _run(fresh, arrays, lens)
    assert _kernels(fresh) == {"step"}


def test_tunables_are_checked(monkeypatch):
    for name, value in (("SEQUENCE_STEPS", 2), ("SEQUENCE_STEPS", "yes"), ("SEQUENCE_ROWS", 0),
                        ("SEQUENCE_ROWS", True)):
        monkeypatch.setattr(variants, name, value)
        with pytest.raises(ValueError, match=name):
            variants.settings()
        monkeypatch.undo()


def test_cli_says_when_the_only_device_is_a_cpu_implementation(monkeypatch):
    # `ortops run` prints one line beside its timings where every Vulkan device is a CPU
    # implementation (the "GPU path" then ran on the CPU), and none where a GPU is present.
    from _cases import fake_device

    import ortops.device
    from ortops.tools import cli

    lavapipe = fake_device(name="llvmpipe (LLVM 15.0.6, 256 bits)", type="cpu")
    monkeypatch.setattr(ortops.device, "devices", lambda: [lavapipe])
    note = cli._cpu_only_note()
    assert "CPU implementation" in note and "llvmpipe" in note and "\n" not in note
    monkeypatch.setattr(ortops.device, "devices", lambda: [lavapipe, fake_device()])
    assert cli._cpu_only_note() == ""
    monkeypatch.setattr(ortops.device, "devices", lambda: [])
    assert cli._cpu_only_note() == ""
