"""bench/real_models.py (issue 45, item 3; gpu_machine.sh's stage ``models``) kept working: one
tiny model through one ortops engine on lavapipe, its exit status following ortops' outputs
(not its times), and its tables on a synthetic report."""

import copy
import json

from _scripts import load_bench

real_models = load_bench("real_models")
ARGS = ["--models", "crnn", "--rounds", "3", "--runs", "2", "--warmup", "0"]


def test_one_model_one_engine_and_a_peer_that_does_not_start(tmp_path, monkeypatch):
    def no_adapter():
        raise real_models.NotHere("no adapter (the test's)")

    monkeypatch.setitem(real_models.FACTORIES, "WebGPU EP", no_adapter)
    # --no-probe: the peer in this process, where the patched factory is
    assert real_models.main(ARGS + ["--engines", "ortops gpu,WebGPU EP", "--no-probe", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "real_models.json").read_text())
    (row,) = report["rows"]
    ep = row["engines"]["ortops gpu"]
    assert row["name"] == "crnn" and ep["runs_here"] and ep["problems"] == [] and ep["scaled_error"] <= 1e-5
    assert list(ep["nodes"]) == ["OrtopsExecutionProvider"] and len(ep["nodes"]["OrtopsExecutionProvider"]) == 1
    lo, hi = ep["spread_ms"]
    assert len(ep["rounds_ms"]) == 3 and 0 < lo <= ep["median_ms"] <= hi
    assert row["engines"]["WebGPU EP"] == {"runs_here": False, "message": "no adapter (the test's)"}
    assert row["auto_vs_best"] is None   # ORT CPU and auto not asked
    table = (tmp_path / "real_models.md").read_text()
    assert "| crnn | " in table and " · 1/1 |" in table
    assert "does not run here [1]" in table and "[1] no adapter (the test's)" in table


def test_a_peer_that_ends_the_process_is_a_cell_not_the_end(tmp_path, monkeypatch):
    # The child that runs the peer first dies on an assert (as onnxruntime-ggml 0.2.0 did on the
    # H100); the table goes on, the peer's cell says why, and the exit status follows ortops alone.
    import subprocess

    asked = []

    def child(cmd, **kw):
        asked.append(cmd)
        return subprocess.CompletedProcess(cmd, -6, "", "ggml_vulkan: 0 = a GPU\n/x/ggml-vulkan.cpp:8146: "
                                           "GGML_ASSERT(allow_misalign || misalign_bytes == 0) failed\nbacktrace\n")

    monkeypatch.setattr(real_models.subprocess, "run", child)
    assert real_models.main(ARGS + ["--engines", "ortops gpu,ggml Vulkan", "--out", str(tmp_path)]) == 0
    (cmd,) = asked   # one child: the peer on the model, never an ortops engine
    assert cmd[cmd.index("--engines") + 1] == "ggml Vulkan" and cmd[cmd.index("--models") + 1] == "crnn"
    (row,) = json.loads((tmp_path / "real_models.json").read_text())["rows"]
    assert row["engines"]["ortops gpu"]["runs_here"]
    assert row["engines"]["ggml Vulkan"] == {
        "runs_here": False,
        "message": "ends the process (exit status -6): GGML_ASSERT(allow_misalign || misalign_bytes == 0) failed"}


def test_exit_status_follows_ortops_outputs(tmp_path, inject_fault):
    inject_fault("scale", 1.001)   # every output of the native core 0.1 % off
    assert real_models.main(ARGS + ["--engines", "ortops gpu", "--out", str(tmp_path)]) == 1
    (failure,) = json.loads((tmp_path / "real_models.json").read_text())["failures"]
    assert failure.startswith("crnn: ortops gpu: output 0: scaled error") and "above 1e-05" in failure


def _engine(ms, error=0.0, nodes=None):
    return {"runs_here": True, "median_ms": ms, "spread_ms": [ms * 0.9, ms * 1.2], "rounds_ms": [ms] * 3,
            "scaled_error": error, "nodes": nodes or {"CPUExecutionProvider": ["lstm"]}, "problems": []}


def _synthetic():
    gpu = {"OrtopsExecutionProvider": ["lstm1", "lstm2"]}
    engines = {"ORT CPU": _engine(2.0), "ortops gpu": _engine(1.0, 3e-7, gpu),
               "ortops auto": _engine(1.05, 3e-7, gpu),
               "WebGPU EP": {"runs_here": False, "message": "no adapter"},
               "ggml Vulkan": {"runs_here": False, "message": "no gpu backend"}}
    row = {"name": "stacked", "engines": engines, "auto_vs_best": {"ratio": 1.05, "within_target": True}}
    return dict(device="[0] test", cpus=2, host="h", onnxruntime="1.32.0", peers={"onnxruntime-ggml": "0.2.0"},
                rounds=3, runs=20, budget_s=2.0, engines=list(real_models.ENGINES), command="python -P x",
                date="2026-12-06T00:00:00+00:00", rows=[row, {**copy.deepcopy(row), "name": "small"}])


def test_tables_name_times_errors_nodes_and_peers_that_do_not_run():
    report = _synthetic()
    text = real_models.markdown(report)
    stacked = [line for line in text.splitlines() if line.startswith("| stacked |")]
    assert stacked[0] == ("| stacked | 2 (1.8–2.4) | 1 (0.9–1.2) | 1.05 (0.945–1.26) | does not run here [1] "
                          "| does not run here [2] | 1.05 (within 1.1×) |")
    assert stacked[1] == ("| stacked | 0.0e+00 · 0/1 | 3.0e-07 · 2/2 | 3.0e-07 · 2/2 | does not run here [1] "
                          "| does not run here [2] |")
    assert text.count("[1] no adapter") == 1 and "[2] no gpu backend" in text   # one note per message
    assert real_models.failures(report) == []
    broken = copy.deepcopy(report)
    broken["rows"][1]["engines"]["ortops auto"] = {"runs_here": False, "message": "RuntimeError: boom"}
    broken["rows"][0]["engines"]["ortops gpu"]["problems"] = ["output 0: scaled error 1 above 1e-05"]
    broken["rows"][0]["engines"]["WebGPU EP"]["message"] = "a peer's failure decides nothing"
    assert real_models.failures(broken) == ["stacked: ortops gpu: output 0: scaled error 1 above 1e-05",
                                            "small: ortops auto did not run: RuntimeError: boom"]
