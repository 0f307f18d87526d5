"""Mode "fast" (ortops.fast, docs/modes.md): float16 input projections on matrix hardware.

Every test runs on any device and branches on the capability, never skips: on a device that
lists the combination glsl/input_projection_coopmat.comp needs (an H200), float16 layers record
the cooperative-matrix projection and must stay within the float16 tolerance of the float64
reference and give the same bits run to run; on one without it (lavapipe), fast mode records
the portable projection and must give deterministic mode's bits (so too under a validation
layer older than the extension, where the context leaves it off). Float32 layers give
deterministic mode's bits everywhere. The shapes put edges in every dimension of the Gemm:
M = steps x batch, N = gates x hidden and K = input not multiples of 16 (nor of the 128-wide
tile), K above one 32-wide slice, more than one row tile, K a multiple of 8 (16-byte loads)
with whole tiles stored straight to Xw and without (N not a multiple of 4), batch_first, both
directions and sequence lengths.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ortops
import ortops.layer
from ortops import fast, modes, reference, variants
from ortops.compare import TOLERANCE, scaled_error
from _cases import GATES, fake_device, same_bits, seed_of

# (op, seq, batch, input, hidden, direction, layout, with sequence_lens)
CASES = [
    ("LSTM", 7, 3, 37, 21, "bidirectional", 0, True),     # M 21, N 84, K 37
    ("GRU", 5, 9, 70, 33, "forward", 1, False),           # K over two stages, batch_first
    ("RNN", 66, 2, 16, 16, "reverse", 0, True),           # M 132: three row tiles
    ("LSTM", 3, 1, 1, 5, "forward", 0, False),            # K 1, N 20
    ("GRU", 4, 6, 130, 40, "bidirectional", 1, True),     # K 130, N 120, batch_first, lens
    # K a multiple of 8 (16-byte staging loads) with whole 128 x 128 tiles stored straight to
    # Xw beside edge tiles: M 320, N 192, K 64 (two slices), batch_first, lens.
    ("LSTM", 40, 8, 64, 48, "bidirectional", 1, True),
    # 16-byte loads but Xw rows not 16-byte aligned (N 150): every tile through the staging
    # block; M 144.
    ("GRU", 9, 16, 24, 50, "forward", 0, False),
]
IDS = [f"{c[0]}-{c[5]}-layout{c[6]}-k{c[3]}" for c in CASES]


@pytest.fixture(autouse=True)
def coopmat_enabled(monkeypatch):
    """The cooperative-matrix projection is on by default (ortops.fast.ENABLED; ORTOPS_COOPMAT=0
    turns it off); these tests are about that kernel, so they make sure it is on whatever the
    environment says: for the Python API (ortops.fast.ENABLED) and for the custom-op library's
    kernels (ORTOPS_COOPMAT, read when ONNX Runtime creates them)."""
    monkeypatch.setattr(fast, "ENABLED", True)
    monkeypatch.delenv("ORTOPS_COOPMAT", raising=False)


@pytest.mark.parametrize("value, enabled", [(None, True), ("1", True), ("0", False)])
def test_coopmat_is_on_unless_switched_off(value, enabled):
    # On by default since its second version beat the portable projection on the H200; the
    # environment variable switches it off (read at import, as the native core reads it).
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "ORTOPS_COOPMAT"}
    if value is not None:
        env["ORTOPS_COOPMAT"] = value
    out = subprocess.run([sys.executable, "-P", "-c", "import ortops.fast as f; print(f.ENABLED)"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(enabled)


def test_fast_runs_the_portable_projection_unless_enabled(monkeypatch):
    monkeypatch.setattr(fast, "ENABLED", False)
    h200 = fake_device(cooperative_matrix=(fast.REQUIRED,), subgroup_size_range=(32, 32),
                       nan_preserve_float16=True)

    class _On:
        cooperative_matrix = True
        cooperative_matrix_off = ""

    assert fast.coopmat_reason(h200, _On()) is None
    assert fast.projection_kernel("fast", np.float16, h200, _On()) == fast.PORTABLE


def _case(op, seq, batch, inp, hidden, direction, layout, lens, dtype):
    rng = np.random.default_rng(seed_of(op, seq, batch, inp, hidden, direction, layout))
    g, d = GATES[op], 2 if direction == "bidirectional" else 1
    s = 1.0 / np.sqrt(hidden)
    shape = (batch, seq, inp) if layout else (seq, batch, inp)
    X = rng.standard_normal(shape).astype(dtype)
    W = rng.uniform(-s, s, (d, g * hidden, inp)).astype(dtype)
    R = rng.uniform(-s, s, (d, g * hidden, hidden)).astype(dtype)
    B = rng.uniform(-s, s, (d, 2 * g * hidden)).astype(dtype)
    L = rng.integers(1, seq + 1, batch).astype(np.int32) if lens else None
    return dict(X=X, W=W, R=R, B=B, lens=L, direction=direction, layout=layout)


def _run(case, dtype, mode, **kwargs):
    """(layer, outputs) of one run of ``case`` in ``mode``."""
    c = _case(*case, dtype)
    layer = ortops.RecurrentLayer(case[0], c["W"], c["R"], c["B"], direction=c["direction"],
                                  layout=c["layout"], mode=mode)
    return layer, layer(c["X"], c["lens"], **kwargs)


def _reference(case, dtype):
    c = _case(*case, dtype)
    f = getattr(reference, case[0].lower())
    return f(c["X"], c["W"], c["R"], c["B"], c["lens"], direction=c["direction"], layout=c["layout"])


# The portable projections: the tiled kernel, and on CPU devices glsl/input_projection_cpu.comp
# (the same sums; tests/test_cpu_projection.py).
PORTABLES = (fast.PORTABLE, "input_projection_cpu")


def _projection(layer) -> str:
    """The input projection shader of the layer's (one) recorded plan."""
    (pool,) = layer._plans.values()
    (plan,) = pool.free
    return plan.projection


def _steps(layer) -> str:
    """The step kernel of the layer's (one) recorded plan."""
    (pool,) = layer._plans.values()
    (plan,) = pool.free
    return plan.steps


def _has_hardware(layer) -> bool:
    return fast.coopmat_reason(layer.device, layer._ctx) is None


# ------------------------------------------------------------------------- no device needed

def test_fast_is_a_mode_running_the_deterministic_binaries():
    assert modes.check_mode("Fast") == "fast"
    assert modes.spirv_name("step", "fast") == modes.spirv_name("step", "deterministic") == ""
    assert fast.REQUIRED == fast.CoopMatShape(16, 16, 16, "float16", "float16", "float32",
                                              "float32", False, "subgroup")


class _Ctx:
    def __init__(self, enabled, off=""):
        self.cooperative_matrix = enabled
        self.cooperative_matrix_off = off


def test_projection_kernel_choice():
    h200 = fake_device(cooperative_matrix=(fast.CoopMatShape(16, 8, 16, "float16", "float16",
                                                             "float16", "float16", False, "subgroup"),
                                           fast.REQUIRED))
    on = _Ctx(True)
    assert fast.projection_kernel("fast", np.float16, h200, on) == fast.KERNEL
    # Float32 layers, the other modes, a context without the extension: the portable kernel.
    assert fast.projection_kernel("fast", np.float32, h200, on) == fast.PORTABLE
    for mode in ("deterministic", "exact"):
        assert fast.projection_kernel(mode, np.float16, h200, on) == fast.PORTABLE
    assert fast.projection_kernel("fast", np.float16, h200, _Ctx(False)) == fast.PORTABLE
    assert "old layer" in fast.coopmat_reason(h200, _Ctx(False, "old layer"))
    # A device listing other combinations only, or none, or lacking a limit the kernel needs.
    others = dataclasses.replace(h200, cooperative_matrix=h200.cooperative_matrix[:1])
    for device, why in ((others, "does not list"), (fake_device(), "does not list"),
                        (dataclasses.replace(h200, nan_preserve_float16=False), "Float16"),
                        (dataclasses.replace(h200, max_shared_memory=16384), "shared memory"),
                        (dataclasses.replace(h200, subgroup_size_range=(16, 32)), "exactly 32"),
                        (dataclasses.replace(h200, subgroup_size_range=()), "not reported")):
        assert fast.projection_kernel("fast", np.float16, device, on) == fast.PORTABLE
        assert why in fast.coopmat_reason(device, on)
    assert fast.coopmat_reason(h200, on) is None


def test_device_description_shows_cooperative_matrix():
    text = fake_device(cooperative_matrix=(fast.REQUIRED,)).describe()
    assert "cooperative matrix        16x16x16 float16 x float16 + float32 -> float32 (subgroup)" in text
    assert "cooperative matrix        no" in fake_device().describe()
    assert fast.shapes_of([fast.REQUIRED._asdict()]) == (fast.REQUIRED,)


# ------------------------------------------------------------------------- on the device

# The step kernels of mode "fast" (ortops.variants.COOPMAT_STEPS_FROM): the portable ones
# (None), and glsl/step_coopmat.comp from batch 1 where the device has the hardware.
STEPS = {"portable-steps": None, "coopmat-steps": 1, "default-steps": variants.TABLE}


@pytest.fixture(params=list(STEPS))
def steps(request, monkeypatch):
    monkeypatch.setattr(variants, "COOPMAT_STEPS_FROM", STEPS[request.param])
    return request.param


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float16_fast_results(case, steps):
    # Within the float16 tolerance of the float64 reference; without matrix hardware, the
    # deterministic kernels' bits.
    layer, got = _run(case, np.float16, "fast")
    batch = case[2]
    from_batch = variants.coopmat_steps_from(case[4])
    assert (_steps(layer) == fast.STEP_KERNEL) == (_has_hardware(layer) and 0 < from_batch <= batch)
    for out, want in zip(got, _reference(case, np.float16)):
        assert scaled_error(out, want) <= TOLERANCE[np.dtype(np.float16)]
    if not _has_hardware(layer):
        assert same_bits(got, _run(case, np.float16, "deterministic")[1])


@pytest.mark.parametrize("case", CASES[:3], ids=IDS[:3])
def test_float32_fast_is_deterministic(case):
    # Float32 layers never use float16 products (the float32 contract is 1e-5).
    layer, got = _run(case, np.float32, "fast")
    assert _projection(layer) in PORTABLES
    assert same_bits(got, _run(case, np.float32, "deterministic")[1])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_fast_same_bits_run_to_run(case, steps):
    c = _case(*case, np.float16)
    layer, first = _run(case, np.float16, "fast")
    assert same_bits(first, layer(c["X"], c["lens"]))        # the same plan again
    assert same_bits(first, _run(case, np.float16, "fast")[1])   # a new layer and plan


@pytest.mark.parametrize("case", CASES[:2], ids=IDS[:2])
def test_fast_plan_projection(case):
    # The cooperative-matrix projection exactly where the device lists its combination (and
    # then the context must have enabled the extension); the portable one elsewhere.
    layer, _ = _run(case, np.float16, "fast")
    if fast.REQUIRED in layer.device.cooperative_matrix and not layer._ctx.cooperative_matrix_off:
        assert layer._ctx.cooperative_matrix
        assert _projection(layer) == fast.KERNEL, fast.coopmat_reason(layer.device, layer._ctx)
    else:
        assert _projection(layer) in PORTABLES
        if not layer.device.cooperative_matrix:
            assert not layer._ctx.cooperative_matrix


def test_coopmat_steps_rules():
    # glsl/step_coopmat.comp's choices (variants.hpp): from batch 4, 2 at hidden 384 up, 1 at 896 up;
    # two 16-row batch blocks a workgroup where the grid keeps COOPMAT_PAIR_GROUPS workgroups
    # (ceil(hidden / 16) x dirs x ceil(batch / 32)), else one; the tunables override both.
    from ortops import _vk

    tables = _vk.batched_tiles()
    assert tables["coopmat_steps_from"] == [(0, 4), (384, 2), (896, 1)]
    assert [variants.coopmat_steps_from(h) for h in (20, 383, 384, 895, 896, 1024)] == [4, 4, 2, 2, 1, 1]
    pair = tables["coopmat_pair_groups"]
    rule = variants.settings()
    for hidden, batch, dirs in ((1024, 64, 2), (512, 64, 2), (256, 16, 1), (512, 256, 2), (64, 3, 1),
                                (256, 256, 2), (256, 128, 2)):
        got = _vk.coopmat_blocks(hidden, batch, dirs, rule)
        assert got == (2 if -(-hidden // 16) * dirs * -(-batch // 32) >= pair else 1), (hidden, batch, dirs)
    assert _vk.coopmat_blocks(1024, 64, 2, rule) == 2 and _vk.coopmat_blocks(512, 64, 2, rule) == 1
    rule.coopmat_blocks = 4
    assert _vk.coopmat_blocks(1024, 64, 2, rule) == 4
    variants.COOPMAT_STEPS_FROM = 7
    try:
        assert variants.coopmat_steps_from(1024) == 7
        variants.COOPMAT_STEPS_FROM = None
        assert variants.coopmat_steps_from(1024) == 0
        variants.COOPMAT_STEPS_FROM, variants.COOPMAT_BLOCKS = variants.TABLE, 3
        with pytest.raises(ValueError, match="COOPMAT_BLOCKS must be 1, 2 or 4"):
            variants.settings()
    finally:
        variants.COOPMAT_STEPS_FROM, variants.COOPMAT_BLOCKS = variants.TABLE, None


@pytest.mark.parametrize("blocks", [1, 2, 4])
def test_coopmat_steps_every_block_count(blocks, monkeypatch):
    # Every batch-block count of the matrix-unit steps: within the float16 tolerance and the
    # same bits run to run (batch 16: one whole block, and 8: a part of one; LSTM and GRU's
    # two passes).
    monkeypatch.setattr(variants, "COOPMAT_STEPS_FROM", 1)
    monkeypatch.setattr(variants, "COOPMAT_BLOCKS", blocks)
    for case in (CASES[5], CASES[6]):
        c = _case(*case, np.float16)
        layer, got = _run(case, np.float16, "fast")
        for out, want in zip(got, _reference(case, np.float16)):
            assert scaled_error(out, want) <= TOLERANCE[np.dtype(np.float16)]
        assert same_bits(got, layer(c["X"], c["lens"]))


def test_coopmat_steps_only_where_h_stays_in_float16(monkeypatch):
    # The matrix-unit steps round h to float16: only for the cells' default activations
    # (bounded h), only float16 layers in mode "fast", never with the hardware switched off.
    monkeypatch.setattr(variants, "COOPMAT_STEPS_FROM", 1)
    case = CASES[0]
    c = _case(*case, np.float16)

    def steps_of(dtype=np.float16, mode="fast", **attrs):
        layer = ortops.RecurrentLayer(case[0], c["W"].astype(dtype), c["R"].astype(dtype), c["B"].astype(dtype),
                                      direction=c["direction"], mode=mode, **attrs)
        layer(c["X"].astype(dtype), c["lens"])
        return layer, _steps(layer)

    layer, default = steps_of()
    assert (default == fast.STEP_KERNEL) == _has_hardware(layer)
    for kwargs in (dict(activations=["Relu", "Tanh", "Tanh"] * 2), dict(dtype=np.float32),
                   dict(mode="deterministic")):
        assert steps_of(**kwargs)[1] != fast.STEP_KERNEL, kwargs
    monkeypatch.setattr(fast, "ENABLED", False)
    assert steps_of()[1] != fast.STEP_KERNEL
    monkeypatch.setattr(fast, "ENABLED", True)
    monkeypatch.setattr(variants, "COOPMAT_STEPS_FROM", None)
    assert steps_of()[1] != fast.STEP_KERNEL


def test_fast_row_tiles_split_over_dispatches(monkeypatch):
    # One row tile per dispatch (the shader offsets by tile0) gives the unsplit bits.
    case = CASES[2]
    whole = _run(case, np.float16, "fast")[1]
    monkeypatch.setattr(ortops.layer, "_MAX_GROUPS", 1)
    assert same_bits(whole, _run(case, np.float16, "fast")[1])


@pytest.mark.parametrize("case,offset", [(CASES[0], 64), (CASES[5], 64), (CASES[5], 4)],
                         ids=["edges-64", "whole-tiles-64", "whole-tiles-4"])
def test_fast_caller_scratch_offset(case, offset):
    # XW_OFFSET: the projection written at an offset inside a caller's buffer; at 4 bytes the
    # rows of Xw are not 16-byte aligned and whole tiles go through the staging block too.
    c = _case(*case, np.float16)
    layer, owned = _run(case, np.float16, "fast")
    seq, batch = c["X"].shape[:2]
    if case[6]:
        batch, seq = seq, batch
    region = (layer.allocate(offset + layer.scratch_sizes(seq, batch).xw), offset)
    assert same_bits(owned, layer(c["X"], c["lens"], xw_scratch=region))


@pytest.mark.parametrize("convert", [False, True], ids=["session", "convert"])
def test_fast_reaches_sessions_and_converted_models(convert):
    # mode="fast" through onnxruntime (InferenceSession, and convert's standalone model) runs
    # the layer in fast mode: the bits of a RecurrentLayer in fast mode on the same weights.
    from ortops.tools.measure import one_node_model, weights

    shape = ("LSTM", 5, 3, 37, 20, "bidirectional")
    model = one_node_model(*shape, np.float16)
    X = np.random.default_rng(3).standard_normal((5, 3, 37)).astype(np.float16)
    if convert:
        import onnxruntime as ort

        converted = ortops.convert(model, mode="fast")
        got = ort.InferenceSession(converted.SerializeToString(), ortops.register(),
                                   providers=["CPUExecutionProvider"]).run(None, {"X": X})
    else:
        got = ortops.InferenceSession(model.SerializeToString(), mode="fast").run(None, {"X": X})
    W, R, B = weights("LSTM", 37, 20, 2, np.float16)
    want = ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", mode="fast")(X)
    assert same_bits(got, want)


def test_build_step_declares_the_float_control_for_float16():
    # scripts/spirv_float_modes.py (CMakeLists.txt runs it on the coopmat kernel): with the
    # 16-bit SignedZeroInfNanPreserve taken out of the installed binary it puts it back, the
    # same words; a binary whose floats are all declared comes out unchanged.
    import struct

    from _scripts import load_script
    from test_float_controls import MODE_SIGNED_ZERO_INF_NAN_PRESERVE as MODE, OP_EXECUTION_MODE, installed_shaders

    step = load_script("spirv_float_modes")
    code = installed_shaders()[f"{fast.KERNEL}_f16.spv"]
    words = list(struct.unpack(f"<{len(code) // 4}I", code))
    i = 5
    while not (words[i] & 0xFFFF == OP_EXECUTION_MODE and words[i + 2:i + 4] == [MODE, 16]):
        i += words[i] >> 16
    stripped = struct.pack(f"<{len(words) - 4}I", *(words[:i] + words[i + 4:]))
    assert step.add_modes(stripped) == code
    plain = installed_shaders()["input_projection_f16.spv"]
    assert step.add_modes(plain) == plain


def test_fast_cost_script(tmp_path):
    # What STAGE=fast runs on the H200, on a small shape: both modes measured and judged.
    import json

    from _scripts import load_bench

    assert load_bench("fast_cost").main(["--small", "--runs", "3", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "fast_cost.json").read_text())
    (row,) = report["results"]
    assert row["fast"]["projection"] in (fast.KERNEL, *PORTABLES)
    assert row["deterministic"]["projection"] in PORTABLES
    assert row["fast"]["same_bits"] and max(row["fast"]["errors"]) <= TOLERANCE[np.dtype(np.float16)]
    assert "| fast |" in (tmp_path / "fast_cost.md").read_text()


def test_coopmat_steps_script(tmp_path):
    # What STAGE=coopmat measures on the H200, on small shapes: every variant run, judged
    # (within the float16 tolerance, the same bits twice), the kernel each plan recorded.
    import json

    from _scripts import load_bench

    assert load_bench("coopmat_steps").main(["--small", "--runs", "2", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "coopmat_steps.json").read_text())
    for row in report["rows"]:
        v = row["variants"]
        assert set(v) == {"portable", "coopmat-1", "coopmat-2", "coopmat-4", "default"}
        assert v["portable"]["kernel"] != fast.STEP_KERNEL
        assert all(m["same_bits"] and m["error"] <= TOLERANCE[np.dtype(np.float16)] for m in v.values())
    assert "coopmat-1 GPU ms (steps)" in (tmp_path / "coopmat_steps.md").read_text()
    assert (variants.COOPMAT_STEPS_FROM, variants.COOPMAT_BLOCKS) == (variants.TABLE, None)   # left as found
