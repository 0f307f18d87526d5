"""The lab's measuring code in bench/ (not part of the package): docs/perf.md's tables beside the
peers (perf.py), the sweep (sweep.py), cuDNN (cudnn.py), the host-copy bound (hostcopy.py) and
the tables between markers (report.py), imported from bench/ as its scripts import them.

cuDNN needs torch with CUDA, which the test environment lacks: the tables' cuDNN columns are
checked on synthetic reports, and cudnn.measure's refusal without torch on its own."""

from __future__ import annotations

import ast
import copy
import json
import re

import numpy as np
import pytest

from ortops import modes
from ortops.tools import bench

from _scripts import ROOT, load_bench

perf, sweep, cudnn, hostcopy, report = (load_bench(n) for n in ("perf", "sweep", "cudnn", "hostcopy", "report"))


def _point(hidden, batch, dtype, gpu, call, peers):
    return dict(hidden=hidden, batch=batch, input=hidden, seq=4, dtype=dtype,
                ortops={m: dict(gpu_ms=gpu * (1 + i), call_ms=call * (1 + i),
                                session_ms=None if hidden > 16 else call + 1, runs=3, error=None)
                        for i, m in enumerate(modes.MODES)},
                cudnn={p: None if v is None else dict(gpu_ms=v, e2e_ms=v + 1, runs=3, error=None)
                       for p, v in peers.items()})


def _report(points):
    cfg = sweep.Config(batches=[1, 256], hiddens=[16, 32], seq=4, warm_s=0.0)
    return dict(kind="sweep", schema=sweep.SCHEMA, cell="LSTM", direction="bidirectional",
                device="[0] test device", driver="test 1.0", torch={}, modes=list(modes.MODES),
                cudnn_precisions=["strict", "tf32", "float16"],
                config={k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(cfg).items()},
                expected_s=60.0, elapsed_s=90.0, host="h", cpus=2, date="2026-11-29T00:00:00+00:00",
                command="python bench.py --sweep", points=points)


def _synthetic():
    # batch 1: ortops fastest everywhere; batch 256: cuDNN TF32 fastest on the GPU (0.5 ms
    # against ortops's 2 ms), but its e2e (1.5 ms) loses to ortops's call (1.2 ms).
    return _report([
        _point(16, 1, "float32", 0.1, 0.2, {"strict": 1.0, "tf32": 0.9}),
        _point(16, 256, "float32", 2.0, 1.2, {"strict": 3.0, "tf32": 0.5}),
        _point(32, 1, "float32", 0.2, 0.3, {"strict": None, "tf32": None}),
        _point(16, 1, "float16", 0.1, 0.2, {"float16": 0.05}),
    ])


def test_sweep_markdown_names_every_mode_and_the_winner():
    text = sweep.markdown(_synthetic())
    f32, f16 = text.split("**float32**")[1].split("**float16**")
    header = next(line for line in f32.splitlines() if line.startswith("| hidden"))
    for m in modes.MODES:
        assert f"ortops {m}" in header
    assert "cuDNN strict f32" in header and "cuDNN TF32" in header and "cuDNN f16" not in header
    rows = [line for line in f32.splitlines() if line.startswith("| 16 |") or line.startswith("| 32 |")]
    assert len(rows) == 3
    assert rows[0].endswith("| ortops deterministic | ortops deterministic |")
    assert rows[1].endswith("| cuDNN TF32 | ortops deterministic |")
    assert "| — / — |" in rows[2]                   # no cuDNN figure at that point
    assert "0.100 / 0.200 / 1.200" in rows[0]       # GPU / layer call / session
    assert "0.200 / 0.300 |" in rows[2]             # hidden 32 > 16: no session figure
    f16_rows = [line for line in f16.splitlines() if line.startswith("| 16 |")]
    assert len(f16_rows) == 1 and "cuDNN f16" in f16 and f16_rows[0].endswith("| cuDNN f16 | ortops deterministic |")


def test_sweep_schema_accepts_the_report_and_names_what_is_wrong():
    report = _synthetic()
    sweep.check_report(json.loads(json.dumps(report)))
    broken = []
    r = copy.deepcopy(report)
    del r["points"][1]["ortops"][modes.DEFAULT]["call_ms"]
    broken.append((r, "points[1].ortops.deterministic lacks 'call_ms'"))
    r = copy.deepcopy(report)
    r["points"][0]["ortops"].pop(sorted(modes.MODES)[-1])
    broken.append((r, "points[0].ortops has modes"))
    r = copy.deepcopy(report)
    r["points"][0]["cudnn"]["tf64"] = None
    broken.append((r, "unknown precision 'tf64'"))
    r = copy.deepcopy(report)
    r["points"][2]["batch"] = "1"
    broken.append((r, "points[2].batch must be int"))
    r = copy.deepcopy(report)
    del r["modes"]
    broken.append((r, "report lacks 'modes'"))
    for bad, message in broken:
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
            sweep.check_report(bad)


def test_sweep_parts_merge_into_one_grid():
    full = _synthetic()
    a, b = copy.deepcopy(full), copy.deepcopy(full)
    a["points"] = [p for p in full["points"] if p["hidden"] == 32]
    a["config"]["hiddens"] = [32]
    b["points"] = [p for p in full["points"] if p["hidden"] == 16]
    b["config"]["hiddens"] = [16]
    joined = sweep.merge([a, b])
    sweep.check_report(joined)
    assert joined["config"]["hiddens"] == [16, 32]
    assert [(p["hidden"], p["batch"], p["dtype"]) for p in joined["points"]] == [
        (16, 1, "float32"), (16, 1, "float16"), (16, 256, "float32"), (32, 1, "float32")]
    assert joined["elapsed_s"] == 180.0
    b["device"] = "[1] other"
    with pytest.raises(ValueError, match="device differs"):
        sweep.merge([a, b])


def test_parts_with_different_kernels_say_so():
    # A part run again after a kernel default changed replaces the first part's points, and
    # the table names both parts' kernels.
    full = _synthetic()
    a, b = copy.deepcopy(full), copy.deepcopy(full)
    a["kernels"] = dict(fast_projection="input_projection", batched_from=None,
                        batched_tiling={"float32": "1x8x1x1"})
    b["kernels"] = dict(a["kernels"], batched_from=32)
    b["points"] = [p for p in full["points"] if p["batch"] == 256]
    b["points"][0]["ortops"]["deterministic"]["gpu_ms"] = 0.25
    joined = sweep.merge([a, b])
    [p256] = [p for p in joined["points"] if p["batch"] == 256]
    assert p256["ortops"]["deterministic"]["gpu_ms"] == 0.25
    assert joined["kernels"]["parts"] == [a["kernels"], b["kernels"]]
    text = sweep.markdown(joined)
    assert "Run in 2 parts" in text and "step glsl/step.comp at every batch" in text
    assert "glsl/step_batched.comp from batch 32" in text
    assert "Run in" not in sweep.markdown(a)


def test_write_docs_fills_the_sweep_markers_and_keeps_the_rest(tmp_path):
    doc = tmp_path / "perf.md"
    doc.write_text(f"# P\n\nprose\n\n{perf.BEGIN}\nbench table\n{perf.END}\n\nmore prose\n")
    for _ in range(2):  # twice: replaced, not appended
        report.write_table(str(doc), "sweep table\n", sweep.BEGIN, sweep.END)
    text = doc.read_text()
    assert text.count(sweep.BEGIN) == 1 and text.count("sweep table") == 1
    assert f"{perf.BEGIN}\nbench table\n{perf.END}" in text and "more prose" in text
    assert text.index("more prose") < text.index(sweep.BEGIN)


def test_from_json_writes_the_docs_without_measuring(tmp_path, capsys):
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(_synthetic()))
    doc = tmp_path / "doc.md"
    doc.write_text("# P\n")
    out = tmp_path / "out"
    assert perf.main(["--from-json", str(saved), "--out", str(out), "--write-docs", str(doc)]) == 0
    text = doc.read_text()
    assert sweep.BEGIN in text and "| 16 | 256 |" in text
    assert json.loads((out / "sweep.json").read_text())["points"] == _synthetic()["points"]
    assert (out / "sweep.md").read_text() in text
    assert "| 16 | 256 |" in capsys.readouterr().out


def test_estimate_grows_with_the_grid_and_fits_a_device_call():
    small = sweep.Config(batches=[1, 2], hiddens=[128])
    full = sweep.Config()
    assert 0 < sweep.estimate_s(small, False) < sweep.estimate_s(small, True)
    assert sweep.estimate_s(small, True) < sweep.estimate_s(full, True)
    one_mode = sweep.Config(modes=[modes.DEFAULT])
    assert sweep.estimate_s(one_mode, True) < sweep.estimate_s(full, True)
    # The default grid is meant for one call of the device tool (10 min, the build included).
    assert sweep.estimate_s(full, True) < 6 * 60
    assert len(sweep.points(full)) == 9 * 4 * 2


def test_estimate_option_prints_and_measures_nothing(capsys):
    assert perf.main(["--estimate", "--sweep-batches", "1,2", "--sweep-hiddens", "128"]) == 0
    assert "sweep: 4 points" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        perf.main(["--estimate", "--sweep-batches", "1,x"])
    with pytest.raises(SystemExit):
        perf.main(["--estimate", "--sweep-modes", "fastest"])


def _bench_report():
    row = dict(cell="LSTM", seq=80, batch=1, input=256, hidden=256, direction="bidirectional",
               gpu_ms=0.3, layer_call_ms=0.5, e2e_ms=0.6, overhead_ms=0.25, error=3e-7,
               ort1_ms=4.0, ortN_ms=2.4, webgpu_ms=None, memory_bytes=2**20,
               memory_budget_bytes=2**20, host_bound_ms=0.1, dtype="float32",
               cudnn={"strict": dict(label="cuDNN strict f32", gpu_ms=1.5, e2e_ms=2.0, error=2e-7),
                      "tf32": dict(label="cuDNN TF32", gpu_ms=1.0, e2e_ms=1.2, error=1e-3)})
    half = dict(row, dtype="float16", ortN_ms=None, ort1_ms=None,
                cudnn={"float16": dict(label="cuDNN f16", gpu_ms=0.6, e2e_ms=0.8, error=4e-4)})
    rows = [row, half]
    for r in rows:
        r.update(perf.targets(r), e2e_vs_ortN=bench.ratio(r["e2e_ms"], r["ortN_ms"]))
    return dict(device="[0] test", driver="t", cpus=2, date="d", runs=20, round_trip_ms=0.04,
                round_trip_fence_ms=0.04, command="c", results=rows,
                memcpy_bandwidth={"fresh": 2e9, "warm": 8e9, "bytes": 2**20})


def test_anchor_table_names_precision_modes_and_divides_by_the_like_peer():
    report = _bench_report()
    f32, f16 = report["results"]
    assert f32["gpu_vs_cudnn"] == pytest.approx(0.3 / 1.5)   # strict, not TF32
    assert f16["gpu_vs_cudnn"] == pytest.approx(0.3 / 0.6)   # f16
    assert f32["e2e_vs_cudnn_e2e"] == pytest.approx(0.6 / 2.0)
    assert f32["e2e_vs_ortN"] == pytest.approx(0.6 / 2.4) and f16["e2e_vs_ortN"] is None
    assert f32["host_work_ms"] == pytest.approx(0.2)
    text = perf.markdown(report)
    for col in ("ortops GPU ms", "ortops e2e ms", "host overhead ms", "memory MiB (budget)",
                "cuDNN strict f32 GPU / e2e ms (error)", "cuDNN TF32 GPU / e2e ms (error)",
                "cuDNN f16 GPU / e2e ms (error)", "GPU ÷ cuDNN", "host work ms (bound)"):
        assert col in text
    assert "1.500 / 2.000 (2.0e-07)" in text and "1.000 / 1.200 (1.0e-03)" in text
    assert "0.200 (0.100)" in text           # host work (its bound)
    assert "2.00 GB/s into fresh memory, 8.00 GB/s" in text


def test_memcpy_bandwidth_and_the_host_bound():
    bw = hostcopy.memcpy_bandwidth(1 << 20, repeat=3)
    assert bw["bytes"] == 1 << 20 and bw["fresh"] > 1e7 and bw["warm"] > 1e7
    assert hostcopy.host_bound_ms(10**6, 10**6, 2e9) == pytest.approx(0.05 + 1.2 * 1.0)


def test_cudnn_modes_and_absence():
    assert cudnn.for_dtype(np.float32) == ["strict", "tf32"]
    assert cudnn.for_dtype("float16") == ["float16"]
    assert not cudnn.PRECISIONS["strict"].tf32 and cudnn.PRECISIONS["tf32"].tf32


def test_cudnn_measure_without_torch_is_none(monkeypatch):
    monkeypatch.setattr(cudnn, "_torch", lambda: None)
    X = np.zeros((2, 1, 4), np.float32)
    assert cudnn.measure("LSTM", 1, 4, 4, "bidirectional", "strict", X, 3) is None
    assert not cudnn.available() and cudnn.versions() == {}


def test_sweep_runs_every_mode_at_tiny_shapes(tmp_path, capsys):
    # On the device (lavapipe here), through the command as the GPU machine's stage runs it.
    out = tmp_path / "out"
    assert perf.main(["--small", "--sweep", "--sweep-batches", "1,2", "--sweep-hiddens", "8",
                       "--sweep-seq", "3", "--runs", "2", "--sweep-seconds", "0.01", "--warm", "0",
                       "--no-baselines", "--out", str(out)]) == 0
    report = json.loads((out / "sweep.json").read_text())
    sweep.check_report(report)
    assert report["complete"] and report["failures"] == []
    assert report["modes"] == list(modes.MODES) and report["cudnn_precisions"] == []
    assert [(p["batch"], p["dtype"]) for p in report["points"]] == [
        (1, "float32"), (1, "float16"), (2, "float32"), (2, "float16")]
    for p in report["points"]:
        assert p["cudnn"] == {} and p["seq"] == 3 and p["hidden"] == p["input"] == 8
        for m, f in p["ortops"].items():
            assert f["gpu_ms"] > 0 and f["call_ms"] > 0 and f["session_ms"] > 0, (m, f)
            assert f["runs"] == 2
    assert not (out / "sweep.partial.json").exists()   # removed once sweep.json has it all
    docs = (out / "perf.md").read_text()
    assert sweep.BEGIN in docs and docs.count("| 8 |") == 4
    assert (out / "sweep.md").read_text() in docs and "| 8 | 2 |" in capsys.readouterr().out


def test_a_failed_figure_is_recorded_and_the_rest_measured(monkeypatch):
    calls = []

    def fake(hidden, batch, dtype, mode, X, cfg):
        calls.append(mode)
        if mode == modes.DEFAULT:
            raise MemoryError("out of device memory (test)")
        return dict(gpu_ms=1.0, call_ms=2.0, session_ms=None, error=None, runs=3)

    monkeypatch.setattr(sweep, "_ortops_point", fake)
    failures = []
    cfg = sweep.Config(batches=[4], hiddens=[8], seq=2)
    p = sweep.measure_point(8, 4, "float32", cfg, False, failures)
    assert calls == list(modes.MODES)
    assert p["ortops"][modes.DEFAULT] is None and all(
        p["ortops"][m]["gpu_ms"] == 1.0 for m in modes.MODES if m != modes.DEFAULT)
    assert failures == [f"hidden 8 batch 4 float32 ortops {modes.DEFAULT}: MemoryError: "
                        "out of device memory (test)"]
    report = _report([p])
    report.update(failures=failures, complete=False)
    sweep.check_report(report)
    text = sweep.markdown(report)
    assert "Failed (—): hidden 8 batch 4" in text and "**Incomplete**: 1 of 8 points ran." in text
    assert "| 8 | 4 | — / — |" in text


def _imports(path):
    """(module, name) of every ``from module import name`` and ``import module`` of a file."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out += [(node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
    return out


def test_measuring_helpers_have_one_home_and_no_import_circle():
    # ortops/tools/measure.py and bench.py hold what `ortops bench` and the lab share; the package
    # imports nothing of bench/, and the lab's modules do not reach back into perf.py (which runs
    # the sweep).
    lab = {p.stem for p in (ROOT / "bench").glob("*.py")}
    for path in sorted((ROOT / "ortops").rglob("*.py")):
        assert not [i for i in _imports(path) if i[0].split(".")[0] in lab], path
    for name in ("sweep.py", "report.py", "cudnn.py", "hostcopy.py"):
        assert not [i for i in _imports(ROOT / "bench" / name) if i[0] == "perf"], name
    assert {"perf", "sweep", "cudnn", "hostcopy", "report"} <= lab


def test_scripts_use_only_public_names_of_the_package():
    # The package's private helpers (the native module ortops._vk is the scripts' way in).
    tools = r"(?:bench|measure|cli|chain|demo)"
    private = re.compile(rf"\bfrom ortops\.tools(?:\.{tools})? import [^\n]*\b_[a-z]\w*|\b{tools}\._[a-z]\w*")
    found = [f"{p.relative_to(ROOT)}: {m.group(0)}"
             for folder in ("scripts", "bench") for p in sorted((ROOT / folder).rglob("*.py"))
             for m in private.finditer(p.read_text())]
    assert not found, found


def test_webgpu_reports_through_the_logger(caplog, capsys, monkeypatch):
    # An unavailable baseline is a warning record of "ortops.bench", not a line on stderr.
    import logging
    import sys
    import types

    def refuse():
        raise RuntimeError("no adapter (test)")

    monkeypatch.setitem(sys.modules, "onnxruntime_ep_webgpu", types.SimpleNamespace(get_ep_name=refuse))
    with caplog.at_level(logging.WARNING, logger="ortops"):
        assert perf.webgpu_ms(None, None, 1) is None
    assert [(r.name, r.levelname) for r in caplog.records] == [("ortops.bench", "WARNING")]
    assert capsys.readouterr().err == ""


def test_persistent_rule_measures_the_table_beside_the_forced_kernel(tmp_path, capsys):
    # bench/persistent_rule.py on the device (lavapipe here: the persistent kernel forced on runs a
    # workgroup a thread), both cells and precisions: one row each, the same bits, times > 0, the
    # kernel forced off never running it.
    rule = load_bench("persistent_rule")
    out = tmp_path / "out"
    assert rule.main(["--layer", "LSTM,3,1,8,8,float32", "--layer", "GRU,3,2,8,8,float16",
                      "--rounds", "1", "--runs", "2", "--out", str(out)]) == 0
    rows = json.loads((out / "persistent_rule.json").read_text())["rows"]
    assert [(r["layer"], r["dtype"]) for r in rows] == [("LSTM 3x1x8->8", "float32"), ("GRU 3x2x8->8", "float16")]
    for r in rows:
        assert r["same_bits"] and min(r[n][0] for n in ("table", "off", "persistent")) > 0, r
        assert r["kernels"]["persistent"] == ["step_persistent"], r
        assert "step_persistent" not in r["kernels"]["off"], r
        assert "step_persistent" not in r["kernels"]["table"], r   # never by the table on a CPU device
    assert "| LSTM 3x1x8->8 | float32 |" in capsys.readouterr().out
