"""``ortops bench`` (ortops/tools/bench.py), the package's one benchmark harness: where it writes,
its table, and its arguments' errors (one line, exit status 2). A real run on the device is
tests/test_cli.py's test_bench_small_writes_report; the lab's harnesses are tests/test_lab.py."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from ortops.timing import samples
from ortops.tools import bench, cli


def _report(shapes, dtypes):
    rows = []
    for cell, seq, batch, inp, hidden, direction in shapes:
        for dt in dtypes:
            rows.append(dict(cell=cell, seq=seq, batch=batch, input=inp, hidden=hidden, direction=direction,
                             dtype=np.dtype(dt).name, gpu_ms=0.3, layer_call_ms=0.5, e2e_ms=0.6,
                             overhead_ms=0.25, error=3e-7, ort1_ms=4.0, ortN_ms=2.4, e2e_vs_ortN=0.25,
                             memory_bytes=2**20, memory_budget_bytes=2**20))
    return dict(device="[0] test", driver="t", cpus=2, date="d", runs=20, mode="deterministic",
                round_trip_ms=0.04, round_trip_fence_ms=0.05, command="ortops bench", results=rows)


@pytest.fixture
def measured(monkeypatch):
    """bench.run replaced by a synthetic report; the calls it got."""
    calls = []

    def fake(shapes, dtypes, runs, device=None, **kw):
        calls.append(dict(shapes=shapes, dtypes=dtypes, runs=runs, device=device, **kw))
        return _report(shapes, dtypes)

    monkeypatch.setattr(bench, "run", fake)
    return calls


def test_writes_into_a_folder_of_its_own_by_default(measured, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench", "--small", "--shape", "2", "--dtype", "float32"]) == 0
    out = tmp_path / bench.DEFAULT_OUT
    assert sorted(p.name for p in tmp_path.iterdir()) == [bench.DEFAULT_OUT]   # nothing else written
    assert sorted(p.name for p in out.iterdir()) == ["bench.json", "bench.md"]
    report = json.loads((out / "bench.json").read_text())
    (row,) = report["results"]
    assert row["cell"] == "RNN" and row["dtype"] == "float32"
    table = (out / "bench.md").read_text()
    assert "| RNN 8×2×32→32 forwa | float32 | 0.300 | 0.600 | 0.250 | 0.500 | 3.0e-07 | 4.00 | 2.40 | 0.25 |" in table
    assert table in capsys.readouterr().out
    assert measured[0]["shapes"] == [bench.SMALL_SHAPES[2]] and measured[0]["runs"] == 20


def test_out_names_the_folder(measured, tmp_path):
    assert cli.main(["bench", "--out", str(tmp_path / "a" / "b"), "--runs", "3", "--warm", "0"]) == 0
    assert (tmp_path / "a" / "b" / "bench.json").is_file()
    assert measured[0]["shapes"] == bench.ANCHOR_SHAPES and measured[0]["runs"] == 3
    assert measured[0]["warm_s"] == 0.0 and measured[0]["dtypes"] == [np.float32, np.float16]


def test_help_shows_the_default_folder(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")   # argparse wraps its help at the terminal's width
    with pytest.raises(SystemExit) as done:
        cli.main(["bench", "--help"])
    assert done.value.code == 0
    (out,) = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("--out")]
    assert f"(default: ./{bench.DEFAULT_OUT}/)" in out and "docs" not in out


@pytest.mark.parametrize("args,message", [
    (["--shape", "99"], "argument --shape: expected an index 0 to 4 of the anchor shapes, got 99"),
    (["--small", "--shape", "3"], "argument --shape: expected an index 0 to 2 of the small shapes, got 3"),
    (["--shape", "-1"], "argument --shape: expected an integer of at least 0, got -1"),
    (["--shape", "x"], "argument --shape: expected an integer, got 'x'"),
    (["--runs", "0"], "argument --runs: expected an integer of at least 1, got 0"),
    (["--warm", "-2"], "argument --warm: expected a number of seconds >= 0, got '-2'"),
    (["--warm", "nan"], "argument --warm: expected a number of seconds >= 0, got 'nan'"),
    (["--dtype", "float64"], "argument --dtype: invalid choice: 'float64'"),
    (["--mode", "fastest"], "argument --mode: invalid choice: 'fastest'"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
])
def test_bad_arguments_are_one_line_and_status_2(measured, tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bench", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"ortops bench: error: {message}"), line
    assert measured == [] and list(tmp_path.iterdir()) == []   # nothing measured, nothing written


def test_markdown_is_one_table_beside_ort_cpu():
    text = bench.markdown(_report(bench.SMALL_SHAPES[:1], [np.float32, np.float16]))
    header = next(line for line in text.splitlines() if line.startswith("| layer"))
    for col in ("ortops GPU ms", "ortops e2e ms", "host overhead ms", "layer call ms", "error",
                "ORT CPU 1 thr ms", "ORT CPU all ms", "e2e ÷ ORT CPU all", "memory MiB (budget)"):
        assert f"| {col} |" in header
    assert "cuDNN" not in text and "WebGPU" not in text
    assert len([line for line in text.splitlines() if line.startswith("| LSTM")]) == 2
    assert "mode deterministic" in text and "0.040 ms polling the completion marker" in text


def test_ratio_is_none_without_both_figures():
    assert bench.ratio(1.0, 4.0) == 0.25
    assert bench.ratio(None, 4.0) is None and bench.ratio(1.0, None) is None and bench.ratio(1.0, 0) is None


def test_samples_stop_at_runs_or_after_budget_with_three_at_least():
    assert len(samples(lambda: 1.0, 5)) == 5
    slow = samples(lambda: time.sleep(0.02) or 1.0, 50, budget_s=0.01)
    assert len(slow) == 3
    assert 3 <= len(samples(lambda: time.sleep(0.01) or 1.0, 50, budget_s=0.05)) < 50
