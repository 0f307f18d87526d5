"""The ``ortops`` command (ortops.tools.cli.main)."""

import pathlib
import re
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from ortops import timing
from ortops.ort import placement as placement_module
from ortops.tools import cli

from _scripts import load_script




make_models = load_script("make_models")
conformance = load_script("ci/conformance")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Small versions of the example models (same builders, small sizes)."""
    d = tmp_path_factory.mktemp("models")
    small = {
        "recognizer": make_models.recognizer(seq=6, inp=5, hidden=4, classes=3),
        "gru": make_models.gru(seq=5, inp=4, hidden=6),
        "rnn": make_models.rnn(seq=5, inp=4, hidden=3),
    }
    paths = {}
    for name, m in small.items():
        for suffix, model in (("", m), ("_fp16", make_models.to_float16(m))):
            p = d / f"{name}{suffix}.onnx"
            onnx.save(model, str(p))
            paths[name + suffix] = str(p)
    case = conformance.node_case("layout1", "GRU", direction="bidirectional", layout=1, seq=4, batch=2, inp=3,
                                 hidden=4, bias=True, lbr=1, h0=True, rng=np.random.default_rng(0))
    paths["layout1"] = str(d / "layout1.onnx")
    onnx.save(case.model, paths["layout1"])
    return paths


def test_info_lists_nodes_and_placement(models, capsys):
    assert cli.main(["info", models["recognizer"]]) == 0
    out = capsys.readouterr().out
    assert "input  X: float [6, batch, 5]" in out
    assert re.search(r"#0 'lstm1': LSTM bidirectional .*-> GPU", out)
    assert re.search(r"#1 'lstm2': LSTM bidirectional .*-> GPU", out)


def test_info_shows_nodes_left_to_ort(models, capsys, monkeypatch):
    # A device the checker cannot have (the reason it gives is the door's): the node is left
    # to ONNX Runtime with that reason.
    monkeypatch.setattr(placement_module, "_device_facts", lambda device: (None, None, "no such kernel here"))
    assert cli.main(["info", models["gru"]]) == 0
    assert re.search(r"'gru': GRU .*-> ONNX Runtime CPU \(no such kernel here\)", capsys.readouterr().out)


def test_info_names_the_bodies_of_nodes_in_control_flow(capsys):
    # A torch.jit.script export (tests/models): its LSTM in a Loop body, its GRU in an If branch.
    path = pathlib.Path(__file__).resolve().parent / "models" / "scripted_loop_if.onnx"
    assert cli.main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"#\d Loop '/Loop' body / LSTM '/LSTM': LSTM forward .* float32 -> GPU", out), out
    assert re.search(r"#\d If '/If' else_branch / GRU '/GRU': GRU forward .* float32 -> GPU", out), out


@pytest.mark.parametrize("name", ["recognizer", "recognizer_fp16", "gru", "gru_fp16", "rnn", "rnn_fp16", "layout1"])
def test_run_compare_passes(models, name, capsys):
    assert cli.main(["run", models[name], "--compare", "--repeat", "3"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert re.search(r"ortops session: median [\d.]+ ms, .* runs \(\d recurrent nodes? on the Vulkan device ", out)
    assert re.search(r"ONNX Runtime CPU.*: median [\d.]+ ms", out)
    if name.endswith("fp16") or name == "layout1":
        assert "layout-0 float32 equivalent model" in out
    errors = re.findall(r"scaled error (\S+) \(tolerance (\S+)\) OK", out)
    assert errors and all(float(e) <= float(t) for e, t in errors)
    assert "ortops [" in captured.err and "3/3" in captured.err  # the progress bar


def test_run_compare_fails_above_tolerance(models, capsys, inject_fault):
    inject_fault("add", 0.01)
    assert cli.main(["run", models["gru"], "--compare"]) == 1
    out = capsys.readouterr().out
    assert "ABOVE TOLERANCE" in out
    assert "special_values.md" not in out   # finite values differ: no pointer to the special values' rule


def test_run_with_inputs_dims_and_save(models, tmp_path, capsys):
    X = np.random.default_rng(1).uniform(-1, 1, (5, 3, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    lens = np.array([5, 0, 2], np.int32)
    np.save(tmp_path / "lens.npy", lens)
    out_dir = tmp_path / "out"
    rc = cli.main(["run", models["rnn"], "--input", f"X={tmp_path / 'x.npy'}",
                   "--input", f"sequence_lens={tmp_path / 'lens.npy'}", "--save", str(out_dir)])
    assert rc == 0
    saved = np.load(out_dir / "Y_h.npy")
    ref = ort.InferenceSession(models["rnn"], providers=["CPUExecutionProvider"])
    (want,) = ref.run(None, {"X": X, "sequence_lens": lens})
    assert saved.shape == (2, 3, 3)
    assert conformance.scaled_error(saved, want) <= 1e-5
    assert np.all(saved[:, 1] == 0)  # the row of length 0


def test_dynamic_dims_default_and_override(models, capsys):
    assert cli.main(["run", models["gru"]]) == 0
    assert "Y: float32 [5, 1, 1, 6]" in capsys.readouterr().out  # batch defaults to 1
    assert cli.main(["run", models["gru"], "--dim", "batch=3"]) == 0
    assert "Y: float32 [5, 1, 3, 6]" in capsys.readouterr().out


def test_generated_sequence_lens_are_full_length(models):
    sess_model = onnx.load(models["rnn"])
    from ortops.ort.session import InferenceSession

    sess = InferenceSession(sess_model)
    feeds = cli.make_feeds(sess, sess_model, {}, {"batch": 2}, seed=0)
    assert feeds["sequence_lens"].dtype == np.int32 and feeds["sequence_lens"].tolist() == [5, 5]
    assert feeds["X"].shape == (5, 2, 4) and feeds["X"].dtype == np.float32


@pytest.mark.parametrize("argv, message", [
    (["run", "no/such/model.onnx"], "model file not found"),
    (["run", "{gru}", "--input", "X"], "must look like NAME=VALUE"),
    (["run", "{gru}", "--input", "nope=x.npy"], "cannot read --input nope"),
    (["run", "{gru}", "--dim", "batch=two"], "must be an integer"),
    (["run", "{gru}", "--repeat", "0"], "--repeat must be at least 1"),
    (["run", "{gru}", "--warmup", "-1"], "--warmup must be a number of seconds >= 0"),
    (["run", "{gru}", "--warmup", "nan"], "--warmup must be a number of seconds >= 0"),
])
def test_errors_are_one_line_with_status_2(models, capsys, argv, message):
    argv = [a.format(**models) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ortops: error:") and message in err


def test_warmup_runs_once_then_for_the_given_time():
    calls = []
    timing.warm(lambda: calls.append(1), 0.0)
    assert len(calls) == 1
    calls.clear()
    t0 = time.perf_counter()
    timing.warm(lambda: (calls.append(1), time.sleep(0.01)), 0.1)
    assert time.perf_counter() - t0 >= 0.1 and len(calls) >= 5


def test_run_with_warmup(models, capsys):
    assert cli.main(["run", models["gru"], "--warmup", "0.2", "--repeat", "2", "--compare"]) == 0
    assert re.search(r"ortops session: median [\d.]+ ms, .* runs \(\d recurrent nodes? on the Vulkan device ", capsys.readouterr().out)


def test_unknown_input_name(models, tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((5, 1, 4), np.float32))
    assert cli.main(["run", models["gru"], "--input", f"x={tmp_path / 'x.npy'}"]) == 2
    assert "not inputs of the model" in capsys.readouterr().err


def test_run_error_from_a_node_is_reported(models, tmp_path, capsys):
    np.save(tmp_path / "lens.npy", np.array([9], np.int32))
    assert cli.main(["run", models["rnn"], "--input", f"sequence_lens={tmp_path / 'lens.npy'}"]) == 2
    err = capsys.readouterr().err
    assert "RNN node 'rnn'" in err and "batch row 0" in err


def test_devices_prints_what_device_module_returns(capsys, monkeypatch):
    import ortops.device

    class Fake:
        def describe(self):
            return "[0] Fake GPU (discrete)"

    monkeypatch.setattr(ortops.device, "devices", lambda: [Fake(), Fake()])
    assert cli.main(["devices"]) == 0
    assert capsys.readouterr().out.count("[0] Fake GPU (discrete)") == 2
    monkeypatch.setattr(ortops.device, "devices", lambda: [])
    assert cli.main(["devices"]) == 1


def test_devices_real(capsys):
    from ortops.device import devices

    try:
        found = devices()
    except RuntimeError as e:  # no Vulkan loader / native module: a one-line error
        assert cli.main(["devices"]) == 2
        assert str(e).splitlines()[0] in capsys.readouterr().err
        return
    assert cli.main(["devices"]) == (0 if found else 1)
    out = capsys.readouterr().out
    assert all(d.name in out for d in found)


def test_bench_small_writes_report(tmp_path, capsys):
    assert cli.main(["bench", "--small", "--shape", "2", "--dtype", "float32", "--runs", "1",
                     "--no-baselines", "--out", str(tmp_path)]) == 0
    import json

    report = json.loads((tmp_path / "bench.json").read_text())
    (row,) = report["results"]
    assert row["cell"] == "RNN" and row["gpu_ms"] > 0 and row["e2e_ms"] > 0
    assert "RNN 8×2×32→32" in (tmp_path / "bench.md").read_text()


def test_demo_runs_the_chain(capsys):
    assert cli.main(["demo", "--steps", "10", "--size", "64"]) == 0
    assert "exact" in capsys.readouterr().out


@pytest.mark.parametrize("args,message", [
    (["--size", "-3"], "argument --size: expected a positive integer, got -3"),
    (["--size", "0"], "argument --size: expected a positive integer, got 0"),
    (["--size", "4k"], "argument --size: expected a positive integer, got '4k'"),
    (["--steps", "0"], "argument --steps: expected a positive integer, got 0"),
    (["--steps", "-1"], "argument --steps: expected a positive integer, got -1"),
])
def test_demo_refuses_bad_sizes_in_one_line(capsys, args, message):
    assert cli.main(["demo", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"ortops demo: error: {message}\n"


def test_demo_refuses_more_words_than_the_device_holds(capsys):
    from ortops.device import select
    from ortops.tools import demo

    most = demo.largest_size(select(None))
    assert cli.main(["demo", "--size", str(most + 1), "--steps", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"ortops demo: error: argument --size: at most {most} words on {select(None).name}, got {most + 1}\n"


def test_progress_bar_draws_to_the_end():
    import io

    s = io.StringIO()
    bar = cli.Progress(4, "lbl", stream=s, width=8)
    for i in range(1, 5):
        bar.update(i)
    text = s.getvalue()
    assert text.endswith("lbl [########] 4/4\n") and "lbl [##......] 1/4" in text
    s2 = io.StringIO()
    cli.Progress(1, "one", stream=s2).update(1)
    assert s2.getvalue() == ""  # a single run draws no bar


def test_run_threads_reports_runs_per_second_and_checks_bits(models, capsys):
    assert cli.main(["run", models["recognizer"], "--dim", "batch=2", "--threads", "1,3", "--repeat", "3"]) == 0
    out = capsys.readouterr().out
    for n, runs in ((1, 3), (3, 9)):
        assert re.search(rf"threads {n}: [\d.]+ runs/s \({runs} runs in [\d.]+ s; every result equal to the "
                         r"serial one\)", out), out


def test_run_threads_fails_when_a_concurrent_result_differs(models, capsys, monkeypatch):
    from ortops.ort.session import InferenceSession

    real, calls = InferenceSession.run, []

    def flaky(self, *a, **k):   # the 5th run and later: one bit of the first output flipped
        out = real(self, *a, **k)
        calls.append(1)
        if len(calls) > 4:
            out[0].view(np.uint32).reshape(-1)[0] ^= 1
        return out

    monkeypatch.setattr(InferenceSession, "run", flaky)
    assert cli.main(["run", models["recognizer"], "--threads", "2", "--repeat", "2"]) == 1
    assert "BAD: thread" in capsys.readouterr().out


def test_run_intra_op_threads_reach_the_session(models, capsys, monkeypatch):
    from ortops.ort.session import InferenceSession

    real, seen = InferenceSession.__init__, []

    def spy(self, model, sess_options=None, **k):
        seen.append(None if sess_options is None else sess_options.intra_op_num_threads)
        real(self, model, sess_options, **k)

    monkeypatch.setattr(InferenceSession, "__init__", spy)
    assert cli.main(["run", models["gru"], "--intra-op-threads", "1", "--threads", "2", "--repeat", "2"]) == 0
    assert cli.main(["run", models["gru"]]) == 0
    assert seen == [1, None]   # 0, the default: ortops.InferenceSession's own options
    assert cli.main(["run", models["gru"], "--intra-op-threads", "-1"]) == 2
    assert "--intra-op-threads must be 0 (ONNX Runtime's pool) or a positive count, got -1" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "two", "1,,2"])
def test_run_threads_refuses_bad_counts(models, capsys, value):
    with pytest.raises(SystemExit) as info:
        cli.main(["run", models["gru"], "--threads", value])
    assert info.value.code == 2 and "--threads" in capsys.readouterr().err


def test_python_dash_m_ortops_is_the_command():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-P", "-m", "ortops", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "usage: ortops" in done.stdout and "devices" in done.stdout


@pytest.fixture(scope="module")
def quantized_recognizer(tmp_path_factory):
    """The recognizer (same builder, smaller) as a user quantizes it: quantize_dynamic, per
    channel (its LSTMs become DynamicQuantizeLSTM, its head MatMulInteger)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    d = tmp_path_factory.mktemp("quantized")
    src, dst = d / "recognizer.onnx", d / "recognizer_q.onnx"
    onnx.save(make_models.recognizer(seq=12, inp=24, hidden=16, classes=10), str(src))
    # reduce_range (7-bit weights), as ONNX Runtime's quantization guide advises on x86 without
    # VNNI: there its MLAS computes uint8 x int8 products with VPMADDUBSW, whose int16 pair sums
    # saturate with full-range weights. On the 2-core AMD EPYC (AVX2, no VNNI) of 2026-12-02 its
    # own quantized result then lay 0.21 (scaled) from the dequantized model, not a quantization
    # error; with reduce_range it cannot saturate, on any x86.
    quantize_dynamic(str(src), str(dst), per_channel=True, weight_type=QuantType.QInt8, reduce_range=True)
    return str(dst)


def test_run_compare_quantized_recognizer(quantized_recognizer, capsys):
    assert cli.main(["run", quantized_recognizer, "--compare", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"'lstm\d_quant': DynamicQuantizeLSTM bidirectional .*-> GPU .*"
                          r"weights int8 per-channel, dequantized to float32 and uploaded once", out)) == 2
    assert re.search(r"ONNX Runtime CPU \(the quantized model\): median [\d.]+ ms", out)
    # the recurrent outputs exactly the dequantized model's, every output near ORT's quantized result
    for name in ("lstm1.Y", "lstm2.Y"):
        m = re.search(rf"  {re.escape(name)}: scaled error (\S+) against the dequantized model, (\S+) against "
                      r"ORT's quantized result, whose quantization error is (\S+) OK", out)
        assert m and float(m[1]) <= 1e-5 and 0 < float(m[2]) <= 2 * float(m[3]) + 1e-5, out
    assert re.search(r"  logits: .*\(after quantized nodes: not judged\).* OK", out)


def test_run_compare_quantized_fails_when_the_device_is_off(quantized_recognizer, capsys, inject_fault):
    inject_fault("scale", 1.001)
    assert cli.main(["run", quantized_recognizer, "--compare"]) == 1
    assert re.search(r"lstm1.Y: .* FAILS: scaled error \S+ against the dequantized model, above 1e-05",
                     capsys.readouterr().out)


@pytest.mark.parametrize("name", ["gru", "rnn_fp16"])
def test_run_exact_mode_compares_and_gives_the_layers_bits(models, name, capsys, tmp_path):
    # --mode exact reaches every recurrent node: the saved outputs are those of an exact-mode
    # session, and they pass the comparison with ONNX Runtime CPU.
    assert cli.main(["run", models[name], "--compare", "--mode", "exact", "--save", str(tmp_path)]) == 0
    assert re.findall(r"scaled error (\S+) \(tolerance (\S+)\) OK", capsys.readouterr().out)
    from ortops.ort.session import InferenceSession

    sess = InferenceSession(models[name], mode="exact")
    feeds = cli.make_feeds(sess, onnx.load(models[name]), {}, {}, 0)
    for o, value in zip(sess.get_outputs(), sess.run(None, feeds)):
        saved = np.load(tmp_path / f"{cli._safe(o.name)}.npy")
        assert saved.tobytes() == value.tobytes(), f"{o.name}: --mode exact is not the exact session"


def test_run_refuses_an_unknown_mode(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "model.onnx", "--mode", "quick"])
    assert "invalid choice: 'quick'" in capsys.readouterr().err


def test_median_stops_at_its_budget_after_three_runs():
    calls = []
    s = timing.median_s(lambda: (calls.append(1), time.sleep(0.02)), 100, warmup_runs=2, budget_s=0.0)
    assert len(calls) == 2 + 3 and 0.02 <= s < 1.0
    calls.clear()
    timing.median_s(lambda: calls.append(1), 7, warmup_runs=0)
    assert len(calls) == 7
