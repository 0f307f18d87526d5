"""The persistent step kernel (glsl/step_persistent.comp: every step in one grid whose workgroups
hold R in shared memory and meet at a grid barrier a step; src/core/rnn/persistent.hpp) against
the step kernels, its fallback, and its gating.

It computes the lanes kernel's sums (glsl/step.comp) and updates the cells with cell.glsl's code,
so forced on it must give the step kernels' bits at every shape it takes: every cell and pass,
directions, batch 1-8, sequence lengths, clip, activation sets, both precisions, modes
"deterministic" and "fast". On lavapipe each workgroup is a thread that runs to its end, so the
grids run in a child process whose LP_NUM_THREADS (read once, when the driver starts) gives
every workgroup a thread, and stay small. A grid that cannot run at once (more workgroups than
threads) shrinks to the workgroups that arrived, or fails (too few to hold R, or a barrier not
met within its bound) and the run is repeated on the step kernels with the same bits, the
device marked for the process. The table never chooses it on a CPU device, never in mode exact,
and ORTOPS_PERSISTENT_STEPS=0 switches it off.
"""

import json
import os
import pathlib

import numpy as np
import pytest

import ortops
import ortops.device
from ortops import _vk, variants
from _cases import layer_case, seed_of
from _children import run_child

pytestmark = pytest.mark.gpu

HERE = pathlib.Path(__file__).resolve().parent
CHILD = f"import sys; sys.path.insert(0, {str(HERE)!r}); import _persistent_child; _persistent_child.main()"
F32, F16 = "float32", "float16"
DET, FAST = "deterministic", "fast"

# id, op, direction, hidden, batch, options, dtype, mode, workgroups (each small enough for
# lavapipe's 32 KB of shared memory a workgroup)
CASES = [
    ("lstm-bi", "LSTM", "bidirectional", 24, 3, {}, F32, DET, 3),
    ("lstm-clip-cifg", "LSTM", "forward", 45, 5, {"clip": 0.6, "input_forget": 1}, F16, DET, 2),
    ("lstm-acts-layout", "LSTM", "reverse", 7, 4, {"activations": True, "layout": 1}, F32, FAST, 2),
    ("lstm-bi-f16", "LSTM", "bidirectional", 20, 2, {}, F16, FAST, 2),
    ("lstm-one-group", "LSTM", "forward", 16, 1, {}, F32, DET, 1),
    ("gru-two-pass", "GRU", "bidirectional", 32, 6, {}, F32, DET, 2),
    ("gru-lbr-clip", "GRU", "forward", 45, 3, {"linear_before_reset": 1, "clip": 0.9}, F16, DET, 2),
    ("gru-acts", "GRU", "reverse", 33, 8, {"activations": True}, F32, FAST, 3),
    ("rnn-bi", "RNN", "bidirectional", 40, 7, {}, F16, DET, 2),
    ("rnn-acts", "RNN", "forward", 7, 2, {"activations": True}, F32, DET, 1),
] + [(f"lstm-batch-{b}", "LSTM", "forward", 20, b, {}, F32, DET, 2) for b in range(1, 9)]


def _case(row) -> dict:
    cid, op, direction, hidden, batch, options, dtype, mode, groups = row
    return dict(id=cid, op=op, direction=direction, hidden=hidden, batch=batch, options=options, dtype=dtype,
                mode=mode, groups=groups)


def _child(request: dict, threads: int) -> object:
    env = dict(os.environ, LP_NUM_THREADS=str(threads))
    out = run_child(CHILD, json.dumps(request), cwd=HERE, env=env, timeout=900)
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


#: The batch sweep and one named case whose values others take: the full lane runs them; the
#: quick command runs the other named cases, whose batches take every value of the sweep (1 to
#: 8), so that each value of each parameter runs there at least once (tests/conftest.py's rule
#: for matrices), each case's pipelines compiled once.
REST = {f"lstm-batch-{b}" for b in range(1, 9)} | {"lstm-bi-f16"}   # (its values: rnn-bi, lstm-acts-layout)


@pytest.mark.parametrize("part", ["quick", pytest.param("rest", marks=pytest.mark.full)])
def test_forced_on_it_gives_the_step_kernels_bits_at_every_shape(part):
    # Same bits in every attempt, fallback or not. A grid whose workgroups' threads the system
    # did not start within the bounded waits falls back (same bits) and marks the device for
    # its process; such cases run again in a fresh child, up to three times, and each must run
    # to its end on the persistent kernel once.
    pending = [_case(r) for r in CASES if (r[0] in REST) == (part == "rest")]
    threads = 1 + max(c["groups"] for c in pending)
    ran: dict = {}
    for _ in range(3):
        for r in _child({"kind": "cases", "cases": pending}, threads):
            assert r["same"], r
            assert r["steps_kernels"] == ["step"], r
            # Ran to its end with every workgroup it was given (each had a thread; one that
            # started after the poll closed would have shrunk the grid).
            if r["ran"] and r["taken"] == next(c["groups"] for c in pending if c["id"] == r["id"]):
                ran[r["id"]] = r
        pending = [c for c in pending if c["id"] not in ran]
        if not pending:
            break
    assert not pending, f"never ran to its end on the persistent kernel: {[c['id'] for c in pending]}"


#: The shader's DESIGN bits (glsl/step_persistent.comp: 1 thread 0's atomics at the grid barrier,
#: 2 a counter a direction, 4 the cell's inputs loaded first, 8 the lane sums by subgroup
#: shuffles where the subgroup size is 32, so not on lavapipe, 16 h exchanged with its step in
#: 64-bit words instead of the grid barrier): each forced on gives the step
#: kernels' bits, on cases whose slices cross directions (lstm-bi), stay in one (gru-two-pass,
#: two passes) and run float16 (lstm-clip-cifg). The quick command runs every bit at once.
DESIGN_CASES = ("lstm-bi", "gru-two-pass", "lstm-clip-cifg")


@pytest.mark.parametrize("design", [15, 28] + [pytest.param(d, marks=pytest.mark.full) for d in (*range(1, 15), 16, 20, 24)])
def test_every_design_gives_the_step_kernels_bits(design):
    pending = []
    for r in CASES:
        if r[0] in DESIGN_CASES:
            c = _case(r)
            c["tunables"] = {"PERSISTENT_DESIGN": design}
            pending.append(c)
    threads = 1 + max(c["groups"] for c in pending)
    ran: dict = {}
    for _ in range(3):   # as above: a grid whose threads started late falls back; again in a fresh child
        for r in _child({"kind": "cases", "cases": pending}, threads):
            assert r["same"], r
            if r["ran"] and r["taken"] == next(c["groups"] for c in pending if c["id"] == r["id"]):
                ran[r["id"]] = r
        pending = [c for c in pending if c["id"] not in ran]
        if not pending:
            break
    assert not pending, f"never ran to its end on the persistent kernel: {[c['id'] for c in pending]}"


def _cpu_device() -> bool:
    return ortops.device.select(None).type == "cpu"


# On a CPU implementation the child's thread count bounds how many workgroups run at once; a
# GPU runs every workgroup of these small grids at once (and never dispatches more than its
# compute units), so a grid there neither shrinks nor fails.
lavapipe_only = pytest.mark.skipif("not _cpu_device()", reason="needs a device whose thread count bounds co-residency")


def _fallback(tunables: dict, threads: int, **case) -> dict:
    c = _case(("fallback", "LSTM", "bidirectional", 24, 3, {}, F32, DET, 0))
    c.update(case)
    return _child({"kind": "fallback", "case": c, "tunables": tunables}, threads)


def test_a_grid_larger_than_the_device_shrinks_to_the_workgroups_that_arrived():
    # Four workgroups on two threads: lavapipe runs two at once (a thread takes two in turn),
    # the other two arrive after the poll closed and leave; those that arrived (two, or one
    # where the second thread started late) split the units, which one workgroup can hold here.
    r = _fallback({"PERSISTENT_GROUPS": 4}, 2, hidden=16)
    assert r["same"], r
    assert r["recorded"] == ["step_persistent"] and r["runs"] == 1 and r["fallbacks"] == 0, r
    assert r["taken"] in ((1, 2) if _cpu_device() else (4,)) and not r["off"], r


@lavapipe_only
def test_too_few_workgroups_to_hold_r_fall_back_and_mark_the_device():
    # Six workgroups of at most 10 units each for 48 units, two threads: two arrive, 24 units
    # each do not fit: the grid ends with FEW, the run repeats on the step kernels.
    r = _fallback({"PERSISTENT_GROUPS": 6, "PERSISTENT_UNITS": 10}, 2)
    assert r["same"], r
    assert r["recorded"] == ["step_persistent"] and r["runs"] == 1 and r["fallbacks"] == 1, r
    assert r["off"] and "too few workgroups" in r["why"], r
    assert r["fresh"] == ["step"], r   # no more persistent grids on the device


@lavapipe_only
def test_a_barrier_not_met_within_its_bound_falls_back():
    # Without occupancy discovery every dispatched workgroup counts: four on two threads never
    # meet at the first barrier, whose wait ends after its bound (a short one here).
    r = _fallback({"PERSISTENT_GROUPS": 4, "PERSISTENT_DISCOVERY": False, "PERSISTENT_SPINS": 2000}, 2)
    assert r["same"], r
    assert r["runs"] == 1 and r["fallbacks"] == 1 and r["fresh"] == ["step"], r
    assert r["off"] and "grid barrier was not met" in r["why"], r


def test_runs_from_several_threads_each_give_their_serial_bits():
    # One grid on the device at a time (persistent.hpp's gate), whatever thread submits it.
    cases = [_case((f"t{i}", op, "forward", 16 + 4 * i, 2, {}, F32, DET, 2))
             for i, op in enumerate(("LSTM", "GRU", "RNN"))]
    r = _child({"kind": "threads", "cases": cases, "repeats": 3}, 3)
    assert r["same"] and not r["errors"], r
    assert r["runs"] >= 3 and r["fallbacks"] == 0 and "step_persistent" in r["kernels"], r


# ---------------------------------------------------------------- gating (in this process)

def _weights(op="LSTM", hidden=24, direction="bidirectional"):
    arrays, lens = layer_case(seed_of("persistent-gate", op, hidden), op, direction, hidden, 2, np.float32, 3)
    return {k: arrays[k] for k in ("W", "R", "B", "P") if k in arrays}, arrays, lens


def _kernels(layer):
    return {plan.steps for pool in layer._plans.values() for plan in pool.free}


def test_never_chosen_in_mode_exact_nor_above_batch_8(monkeypatch):
    monkeypatch.setattr(variants, "PERSISTENT_STEPS", True)
    weights, arrays, lens = _weights()
    exact = ortops.RecurrentLayer("LSTM", **weights, direction="bidirectional", mode="exact")
    exact(arrays["X"], lens)
    assert _kernels(exact) == {"step"}
    wide = ortops.RecurrentLayer("LSTM", **weights, direction="bidirectional")
    wide(np.repeat(arrays["X"], 5, axis=1))   # batch 10
    assert _kernels(wide) == {"step"}


def _table_choice(**kw):
    shape = dict(cell="LSTM", hidden=256, dirs=2, batch=1, gru_two_pass=False, cpu=False, compute_units=132,
                 max_shared=49152, max_invocations=1024, mode="deterministic")
    shape.update(kw)
    return _vk.persistent_steps(**shape, settings=variants.settings())


def test_the_table_chooses_it_on_gpus_only(monkeypatch):
    # variants.hpp's PERSISTENT_STEPS: on GPUs that report their compute units, the first row
    # whose cells and hidden range hold the layer, up to its batch, where R fits; never CPU
    # devices.
    monkeypatch.setattr(variants, "PERSISTENT_STEPS", variants.TABLE)
    monkeypatch.delenv("ORTOPS_PERSISTENT_STEPS", raising=False)
    rules = _vk.batched_tiles()["persistent_steps"]
    assert rules[0][0] == "cpu" and rules[0][4] == 0 and all(r[0] == "gpu" for r in rules[1:])
    assert _table_choice()                                   # the recognizer's layer on an H200
    for device, cells, low, high, batch, design in rules[1:]:
        cell = "LSTM" if cells == "LSTM" else "GRU"
        assert batch >= 1 and design == 28
        # Each row decides from its first hidden size up to its batch (the first matching row
        # wins: a row's hidden sizes that an earlier row holds are that row's).
        first = next(r for r in rules[1:] if r[1] in ("any", cell) and r[2] <= low <= r[3])
        assert _table_choice(cell=cell, hidden=low, batch=first[4])
        assert not _table_choice(cell=cell, hidden=low, batch=first[4] + 1)
        assert not _table_choice(cell=cell, hidden=low, cpu=True)
    # Below every row's hidden sizes: the whole-sequence kernel's.
    lowest = min(r[2] for r in rules[1:])
    assert not _table_choice(hidden=lowest - 1) and not _table_choice(cell="GRU", hidden=lowest - 1)
    # An LSTM-only row leaves a GRU to the next: at batch 8 and hidden 256 an LSTM, not a GRU.
    assert _table_choice(batch=8) and not _table_choice(cell="GRU", batch=8)
    assert not _table_choice(compute_units=0)               # the device does not say
    assert not _table_choice(hidden=1024)                   # R (32 MB) beyond 132 x 48 KB
    assert not _table_choice(mode="exact")
    with pytest.raises(ValueError, match="unknown cell 'lstm'"):
        _table_choice(cell="lstm")
    # This device (lavapipe here) by the table: never on a CPU device.
    weights, arrays, lens = _weights()
    layer = ortops.RecurrentLayer("LSTM", **weights, direction="bidirectional")
    layer(arrays["X"], lens)
    if layer.device.type == "cpu":
        assert "step_persistent" not in _kernels(layer)


def test_the_switch_turns_it_off_where_the_table_decides(monkeypatch):
    monkeypatch.setattr(variants, "PERSISTENT_STEPS", variants.TABLE)
    monkeypatch.setenv("ORTOPS_PERSISTENT_STEPS", "0")
    assert not _table_choice()
    monkeypatch.setenv("ORTOPS_PERSISTENT_STEPS", "1")   # only 0 means anything
    assert _table_choice()
    # The Python tunable wins over the switch.
    monkeypatch.setenv("ORTOPS_PERSISTENT_STEPS", "0")
    monkeypatch.setattr(variants, "PERSISTENT_STEPS", True)
    assert _table_choice()
    monkeypatch.setattr(variants, "PERSISTENT_STEPS", False)
    assert not _table_choice(hidden=512, batch=4)


def test_the_split_holds_r_in_one_workgroup_per_compute_unit():
    s = variants.settings()
    v = _vk.persistent_variant(cell="LSTM", hidden=256, dirs=2, batch=1, gru_two_pass=False, cpu=False,
                               compute_units=132, max_shared=49152, max_invocations=1024, settings=s)
    # 512 units over 132 workgroups: 4 a workgroup (16 KB of R), 16 rows a round.
    assert v["groups"] == 132 and v["threads"] == 16 * 32 and v["fits"]
    assert v["units_max"] >= 4 and v["shared_bytes"] <= 49152 and v["poll_delay"] == 0
    # Batch 8 on lavapipe's 32 KB: fewer row threads, so that the lane sums leave room for R.
    v = _vk.persistent_variant(cell="LSTM", hidden=20, dirs=1, batch=8, gru_two_pass=False, cpu=True,
                               compute_units=0, max_shared=32768, max_invocations=1024, settings=s)
    assert v["fits"] and v["shared_bytes"] <= 32768 and v["poll_delay"] > 0


def test_tunables_are_checked(monkeypatch):
    for name, value in (("PERSISTENT_STEPS", 2), ("PERSISTENT_GROUPS", 0), ("PERSISTENT_UNITS", True),
                        ("PERSISTENT_SPINS", -1), ("PERSISTENT_DISCOVERY", 1), ("PERSISTENT_PIECE", "all"),
                        ("PERSISTENT_DESIGN", 32), ("PERSISTENT_DESIGN", True)):
        monkeypatch.setattr(variants, name, value)
        with pytest.raises(ValueError, match=name):
            variants.settings()
        monkeypatch.undo()


def test_the_device_describes_what_the_kernel_needs():
    dev = ortops.device.select(None)
    assert isinstance(dev.compute_units, int) and isinstance(dev.memory_model_device_scope, bool)
    if dev.type == "cpu":
        assert dev.compute_units == 0   # lavapipe does not offer VK_NV_shader_sm_builtins


def test_the_benchmark_runs_here(tmp_path):
    # bench/persistent.py (the GPU machine's STAGE=persistent) on small shapes and grids: every
    # engine runs, the bits agree (exit status 1 otherwise), the grids ran (2 otherwise), and the
    # recognizer goes through the EP with the kernel left to the table and switched off.
    script = HERE.parent / "bench" / "persistent.py"
    args = ["--out", str(tmp_path), "--rounds", "1", "--runs", "2", "--layer", "4,2,12,20", "--groups", "2",
            "--also-groups", "1", "--no-cudnn"]
    code = (f"import runpy, sys; sys.argv = [{str(script)!r}] + {args!r}; "
            f"runpy.run_path({str(script)!r}, run_name='__main__')")
    run_child(code, cwd=tmp_path, env=dict(os.environ, LP_NUM_THREADS="3"), timeout=900)
    report = json.loads((tmp_path / "persistent.json").read_text())
    (layer,) = report["layers"]
    assert layer["same_bits"] and layer["fallbacks"] == 0, layer
    assert layer["kernels"]["persistent"] == layer["kernels"]["persistent-g1"] == ["step_persistent"], layer
    assert report["recognizer"]["same_bits"], report["recognizer"]
    assert "| 4x2x12->20 |" in (tmp_path / "persistent.md").read_text()
