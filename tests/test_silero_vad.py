"""A model from PyPI: silero-vad's ONNX voice-activity detectors (MIT licence, fetched by
scripts/setup.sh into build/deps with ``pip download``, not committed; extracted here).

Their LSTMs sit inside ``If`` nodes (one on the sample rate, one on the state's shape), with
weights that TorchScript's exporter computes in the branch from the main graph's initializers
(Slice/Concat/Unsqueeze). Every LSTM of every model in the wheel must run on the device, and a
stream (one call per 32 ms frame, the state fed back) must give ORT CPU's numbers.

How the stream is judged. Per frame, ORT CPU runs on the very feed ortops got (ortops' own
state fed back), and the new state (the LSTM's h and c, which the model returns as
``stateN``) is compared plane by plane: h and c each within the float32 tolerance (scaled
error 1e-5; a joint scale would let c's magnitude hide h's error). The speech probability is a
sigmoid, whose relative error near 0 equals the absolute error of its logit (measured on this
stream on lavapipe: 4.6e-5 relative at p = 0.0013, where the logit's scaled error was 9.7e-6
and the absolute error of p under 3.3e-7), so it is judged as what it is, a probability: the
stream of ortops' probabilities (own state fed back all along) against ORT CPU's (its own state
fed back), scaled error over the stream (1.6e-6 on lavapipe over 1000 frames).
"""

import numpy as np
import onnx
import pytest
from _scripts import load_bench

import ortops
import onnxruntime as ort
from ortops.compare import TOLERANCE, scaled_error

bench = load_bench("stream_bench")
TOL = TOLERANCE[np.dtype(np.float32)]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return bench.extract_models(bench.find_wheel(), str(tmp_path_factory.mktemp("silero")))


def _lstm_count(graph) -> int:
    n = 0
    for node in graph.node:
        n += node.op_type == "LSTM"
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                n += _lstm_count(a.g)
    return n


def test_the_wheel_holds_the_models_with_lstms_in_if_branches(models):
    assert {"silero_vad", "silero_vad_16k_op15", "silero_vad_half"} <= set(models)
    m = onnx.load(models["silero_vad"])
    assert _lstm_count(m.graph) == 4 and not any(n.op_type == "LSTM" for n in m.graph.node)


def test_every_lstm_of_every_model_runs_on_the_device(models):
    placed = 0
    for name, path in sorted(models.items()):
        sess = ortops.InferenceSession(path, providers=["CPUExecutionProvider"])
        count = _lstm_count(onnx.load(path).graph)
        assert len(sess.placement) == count, name
        for p in sess.placement:
            assert (p.where, p.dtype) == ("gpu", "float32"), f"{name}: {p.describe()}"
            assert p.weights.startswith("constant"), f"{name}: {p.describe()}"   # uploaded once
        placed += count
    assert placed >= 8


@pytest.mark.parametrize("sr", [16000, 8000])
def test_streaming_frame_by_frame_equals_ort_cpu(models, sr):
    path = models["silero_vad"]
    sess = ortops.InferenceSession(path, providers=["CPUExecutionProvider"], require_gpu=True)
    cpu = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sig = bench.signal(3.0, sr)
    worst = {"h": 0.0, "c": 0.0}
    sr_arr = np.array(sr, np.int64)

    def check(x, state):  # ortops' state, fed back, is what both engines get
        _, want = cpu.run(None, {"input": x, "state": state, "sr": sr_arr})
        _, got = sess.run(None, {"input": x, "state": state, "sr": sr_arr})
        for plane, key in enumerate("hc"):
            worst[key] = max(worst[key], scaled_error(got[plane], want[plane]))

    probs, states, _ = bench.stream(sess, sig, sr, on_frame=check)
    want_probs, want_states, _ = bench.stream(cpu, sig, sr)
    assert probs.size == sig.size // bench.FRAMES[sr][0] >= 90
    assert worst["h"] <= TOL and worst["c"] <= TOL, worst
    assert scaled_error(probs, want_probs) <= TOL
    assert probs.max() > 0.5 > probs.min()   # the signal has speech-like and silent stretches


def test_stream_bench_reports_every_engine(tmp_path, capsys):
    # bench/stream_bench.py as gpu_machine.sh's stream stage runs it, a short stream, paced.
    assert bench.main(["--frames", "20", "--warmup", "0.2", "--realtime", "--out", str(tmp_path)]) == 0
    import json

    report = json.loads((tmp_path / "stream.json").read_text())
    assert set(report["engines"]) == {"ortops", "ortops auto", "ORT CPU", "ORT CPU 1 thread"} and report["realtime"]
    for stats in report["engines"].values():
        assert stats["frames"] == 20 and 0 < stats["median_us"] <= stats["p99_us"] <= stats["max_us"]
    assert report["scaled_error"] <= TOL
    assert "-> GPU" in capsys.readouterr().out


def test_stream_bench_rounds_and_breakdown(tmp_path):
    # Issue 32's streaming figures: engines alternated in rounds (p50 and p99 per round), and
    # where a frame's time goes (ONNX Runtime's profiler; the ortops node's layer split).
    assert bench.main(["--frames", "12", "--warmup", "0.1", "--rounds", "3", "--breakdown", "--out", str(tmp_path)]) == 0
    import json

    report = json.loads((tmp_path / "stream.json").read_text())
    for stats in report["engines"].values():
        assert len(stats["rounds"]) == 3 and sum(r["frames"] for r in stats["rounds"]) == 12
        lo, hi = stats["median_spread_us"]
        assert lo <= stats["median_us"] <= hi
    b = report["breakdown"]
    # Every LSTM of the stream ran on the EP; ORT CPU's session has no such node.
    assert b["ortops"]["nodes_us"]["OrtopsExecutionProvider"] > 0
    assert "OrtopsExecutionProvider" not in b["ORT CPU"]["nodes_us"]
    for engine in ("ortops", "ORT CPU"):
        assert 0 < sum(b[engine]["nodes_us"].values()) <= b[engine]["model_run_us"] <= b[engine]["wall_us"]
    lay = b["layer"]
    assert (lay["hidden"], lay["input"]) == (128, 128)
    assert 0 < lay["device_us"] < lay["call_us"]
