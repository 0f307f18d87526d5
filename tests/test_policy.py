"""Placement policies (ortops.ort.policy) and the cost model behind "auto" (ortops.ort.costmodel):
predictions from a stubbed calibration (each side wins where it should), the fit, the on-disk
cache (relocated, corrupt, concurrent writers), sessions and the command under "auto", and one
real calibration on the device."""

import json
import multiprocessing
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortops
from ortops.compare import scaled_error
from ortops.ort import costmodel, policy
from ortops.ort.nodeconfig import NodeAttrs
from ortops.tools import cli

#: A device with a high fixed cost and a high throughput against a CPU with a low fixed cost and
#: a low throughput: the shape decides.
STUB_DEVICE = costmodel.Side(per_run=1e-3, per_step=1e-5, per_flop=1e-12)
STUB_CPU = costmodel.Side(per_run=1e-5, per_step=1e-6, per_flop=1e-10)


def _stub(key="stub"):
    return costmodel.Calibration(key, STUB_DEVICE, STUB_CPU)


def test_small_node_stays_on_cpu_large_goes_to_device():
    # one step of an RNN of hidden 8: 1 ms of device fixed cost against 11 us
    small = policy.choose("RNN", NodeAttrs(hidden_size=8), [1, 1, 8], [1, 8, 8], None, _stub())
    assert small == (False, "ORT CPU: predicted 0.011 ms vs device 1.01 ms")
    # 50 steps of a GRU of hidden 128, batch 4: 29.5 MFLOP, 3 ms on the CPU, 1.5 ms on the device
    large = policy.choose("GRU", NodeAttrs(hidden_size=128), [50, 4, 64], [1, 384, 64], None, _stub())
    assert large == (True, "predicted 1.53 ms vs ORT CPU 3.01 ms")


def test_dynamic_dimensions_take_the_stated_defaults():
    w = policy.node_work("LSTM", NodeAttrs(hidden_size=4, direction="bidirectional"), [None, None, 3], None)
    assert (w.steps, w.assumed) == (2 * policy.DEFAULT_SEQ, f"sequence {policy.DEFAULT_SEQ}, batch {policy.DEFAULT_BATCH}")
    assert w.flops == 2 * 2 * policy.DEFAULT_SEQ * policy.DEFAULT_BATCH * 4 * 4 * (3 + 4)
    ok, why = policy.choose("LSTM", NodeAttrs(hidden_size=4), [None, 2, 3], None, None, _stub())
    assert why.endswith(f"(assumed sequence {policy.DEFAULT_SEQ})")
    # layout 1: X is [batch, seq, input]
    w1 = policy.node_work("GRU", NodeAttrs(hidden_size=5, layout=1), [7, 11, 2], [1, 15, 2])
    assert (w1.steps, w1.flops, w1.assumed) == (11, 2 * 11 * 7 * 3 * 5 * (2 + 5), "")


def test_fit_recovers_the_three_costs():
    side = costmodel.Side(per_run=2e-4, per_step=3e-6, per_flop=5e-11)
    shapes = costmodel.SHAPES["wide"]
    works = [costmodel.work("LSTM", steps, b, i, h, 1) for _, b, i, h, steps in shapes]
    got = costmodel.fit([(w, side.predict(w)) for w in works])
    for name in ("per_run", "per_step", "per_flop"):
        assert getattr(got, name) == pytest.approx(getattr(side, name), rel=1e-6), name
    # a side whose per-step cost is negligible: noise that makes it negative is 0, the rest refitted
    flat = costmodel.Side(per_run=1e-5, per_step=0.0, per_flop=2e-11)
    noisy = [(w, flat.predict(w) * f) for w, f in zip(works, (1.02, 0.99, 1.0))]
    got = costmodel.fit(noisy)
    assert got.per_step == 0.0 and got.per_run > 0 and got.per_flop == pytest.approx(2e-11, rel=0.05)


def test_unknown_policy_is_refused_by_name():
    with pytest.raises(ValueError, match=r"placement must be one of 'gpu', 'auto', got 'cpu'"):
        ortops.InferenceSession(_two_node_model(), placement="cpu")


def test_cache_round_trip_relocated_by_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "cost.json"
    monkeypatch.setenv(costmodel.CACHE_ENV, str(path))
    assert costmodel.cache_path() == str(path)
    assert costmodel.load("stub") is None
    costmodel.store(_stub())
    assert costmodel.load("stub") == _stub()
    assert json.loads(path.read_text())["format"] == costmodel.FORMAT


def test_default_cache_is_in_the_user_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(costmodel.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert costmodel.cache_path() == str(tmp_path / "ortops" / "costmodel.json")


def test_corrupt_cache_is_measured_again(tmp_path, caplog):
    path = tmp_path / "cost.json"
    path.write_text("{not json")
    assert costmodel.load("stub", str(path)) is None
    assert "unreadable" in caplog.text
    costmodel.store(_stub(), str(path))   # replaces the corrupt file
    assert costmodel.load("stub", str(path)) == _stub()


def _store_many(path, worker):
    for i in range(10):
        costmodel.store(_stub(f"w{worker}-{i}"), path)


def test_concurrent_writers_leave_every_entry(tmp_path):
    path = str(tmp_path / "cost.json")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_store_many, args=(path, w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        assert p.exitcode == 0
    entries = json.loads(open(path).read())["calibrations"]
    assert sorted(entries) == sorted(f"w{w}-{i}" for w in range(4) for i in range(10))


# -- on the device -------------------------------------------------------------------------


def _two_node_model():
    """A GRU of 50 steps, hidden 128, batch 4 (the device wins under the stub) feeding nothing
    else, and a one-step RNN of hidden 8 (ORT CPU wins)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.uniform(-0.1, 0.1, s).astype(np.float32), n) for n, s in (
        ("gW", (1, 384, 64)), ("gR", (1, 384, 128)), ("rW", (1, 8, 8)), ("rR", (1, 8, 8)))]
    nodes = [helper.make_node("GRU", ["A", "gW", "gR"], ["gY"], name="big_gru", hidden_size=128),
             helper.make_node("RNN", ["S", "rW", "rR"], ["rY"], name="small_rnn", hidden_size=8)]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [50, 4, 64]),
                                             helper.make_tensor_value_info("S", TensorProto.FLOAT, [1, 1, 8])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("gY", "rY")],
                              inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.fixture
def stub_cache(tmp_path, monkeypatch):
    """The stub calibration, cached for the device the session will use."""
    from ortops.device import select

    path = tmp_path / "cost.json"
    monkeypatch.setenv(costmodel.CACHE_ENV, str(path))
    costmodel.store(_stub(costmodel.key(select())))

    def refuse(*a, **k):
        raise AssertionError("measured although a calibration is cached")

    monkeypatch.setattr(costmodel, "measure", refuse)
    return path


def _feeds():
    rng = np.random.default_rng(1)
    return {"A": rng.uniform(-1, 1, (50, 4, 64)).astype(np.float32),
            "S": rng.uniform(-1, 1, (1, 1, 8)).astype(np.float32)}


def test_auto_keeps_the_small_node_on_cpu_and_says_why(stub_cache):
    model, feeds = _two_node_model(), _feeds()
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    with ortops.InferenceSession(model, providers=["CPUExecutionProvider"], placement="auto") as s:
        big, small = s.placement
        assert big.where == "gpu" and re.search(r"; predicted 1.53 ms vs ORT CPU 3.01 ms$", big.reason)
        assert small.where == "cpu" and small.reason == "ORT CPU: predicted 0.011 ms vs device 1.01 ms"
        assert "ONNX Runtime CPU (ORT CPU: predicted" in small.describe()
        got = s.run(None, feeds)
    assert scaled_error(got[0], expected[0]) <= 1e-5
    np.testing.assert_array_equal(got[1], expected[1])   # ORT's own kernel
    with ortops.InferenceSession(model, providers=["CPUExecutionProvider"]) as s:   # "gpu", the default
        assert [p.where for p in s.placement] == ["gpu", "gpu"]
    converted = ortops.convert(model, placement="auto")
    assert [n.domain for n in converted.graph.node] == ["ortops", ""]   # the GRU, the RNN (ORT's)


def test_info_placement_auto(stub_cache, tmp_path, capsys):
    path = str(tmp_path / "two.onnx")
    onnx.save(_two_node_model(), path)
    assert cli.main(["info", path, "--placement", "auto"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"'big_gru': GRU .*-> GPU \(.*; predicted 1.53 ms vs ORT CPU 3.01 ms\)", out)
    assert "'small_rnn': RNN forward layout=0 hidden=8 float32 -> ONNX Runtime CPU (ORT CPU: predicted " \
           "0.011 ms vs device 1.01 ms)" in out


def test_real_calibration_is_measured_once_and_cached(tmp_path, monkeypatch, caplog):
    from ortops.device import select

    cache = tmp_path / "cost.json"
    monkeypatch.setenv(costmodel.CACHE_ENV, str(cache))
    real = costmodel.measure
    calls = []
    monkeypatch.setattr(costmodel, "measure", lambda d: calls.append(d) or real(d, "small", max_runs=3))
    device = select()
    with caplog.at_level("INFO", logger="ortops"):
        cal = costmodel.calibration(device)
    for side in (cal.device, cal.cpu):
        assert all(np.isfinite(v) and v >= 0 for v in (side.per_run, side.per_step, side.per_flop))
        assert side.per_run + side.per_step > 0
    assert cal.key == costmodel.key(device) and device.name in cal.key and ortops.__version__ in cal.key
    # said before measuring, as a warning (shown by default): the device, the points, the cache
    notice = [r for r in caplog.records if "calibrating the cost model" in r.getMessage()]
    assert len(notice) == 1 and notice[0].levelname == "WARNING", caplog.text
    assert f"for {device.name} once" in notice[0].getMessage() and f"cached in {cache} " in notice[0].getMessage()
    assert re.search(r"cost model calibrated in \d+\.\d s: ", caplog.text)
    caplog.clear()
    assert costmodel.calibration(device) == cal and len(calls) == 1   # the second from the cache
    assert "calibrating" not in caplog.text


def test_placement_script_quick(tmp_path, monkeypatch, capsys):
    """bench/placement.py (the GPU machine's placement stage) in its quick form."""
    from _scripts import load_bench, load_script

    make_models = load_script("make_models")
    monkeypatch.setenv(costmodel.CACHE_ENV, str(tmp_path / "cost.json"))
    onnx.save(make_models.rnn(seq=5, inp=4, hidden=3), str(tmp_path / "rnn.onnx"))
    assert load_bench("placement").main(["--models", str(tmp_path), "--quick"]) == 0
    out = capsys.readouterr().out
    assert "calibration (small shapes" in out and "  ORT CPU: " in out
    assert re.search(r"#0 'rnn': RNN bidirectional .*predicted [\d.]+ ms vs .*[\d.]+ ms", out)
    assert re.search(r"winner mispredicted for \d+ of 4 shapes", out)


def test_auto_without_a_cost_model_keeps_the_device_and_says_why(tmp_path, monkeypatch, caplog, capfd):
    # The session's report is the EP's: its calibration cannot be measured (shapes it refuses),
    # so it keeps every node, says why in each node's reason and warns in ONNX Runtime's log.
    monkeypatch.setenv(costmodel.CACHE_ENV, str(tmp_path / "cost.json"))
    monkeypatch.setenv("ORTOPS_COST_SHAPES", "bogus")
    why = "no cost model (ortops: ORTOPS_COST_SHAPES must be 'default' or 'small', got 'bogus')"
    with ortops.InferenceSession(_two_node_model(), providers=["CPUExecutionProvider"], placement="auto") as s:
        assert [p.where for p in s.placement] == ["gpu", "gpu"]
        assert s.placement[1].reason.endswith("; " + why)
    assert why in capfd.readouterr().err
    # ortops.convert's placement (its calibration measured in Python): the same, in the ortops logger.
    monkeypatch.delenv("ORTOPS_COST_SHAPES")

    def broken(device, *a, **k):
        raise RuntimeError("timer broken")

    monkeypatch.setattr(costmodel, "measure", broken)
    places = ortops.ort.session.placement(_two_node_model(), policy="auto")
    assert [p.where for p in places] == ["gpu", "gpu"]
    assert places[1].reason.endswith("; no cost model (timer broken)")
    assert "no cost model" in caplog.text


def _frame_model(producer: str, opset: int = 17):
    """A streaming export's LSTM (hidden 128) on one frame: X made by ``producer`` from F, whose
    shape the graph does not give, so ONNX Runtime knows none of X's dimensions. An Unsqueeze on
    axis 0 makes the sequence 1 (axes an initializer from opset 13, an attribute before)."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.uniform(-0.1, 0.1, s).astype(np.float32), n)
             for n, s in (("W", (1, 512, 128)), ("R", (1, 512, 128)))]
    if producer == "unsqueeze" and opset >= 13:
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "axes"))
        make = helper.make_node("Unsqueeze", ["F", "axes"], ["X"], name="frame")
    elif producer == "unsqueeze":
        make = helper.make_node("Unsqueeze", ["F"], ["X"], name="frame", axes=[0])
    else:
        make = helper.make_node("Identity", ["F"], ["X"], name="frame")
    nodes = [make, helper.make_node("LSTM", ["X", "W", "R"], ["Y"], name="lstm", hidden_size=128)]
    graph = helper.make_graph(nodes, "frame", [helper.make_tensor_value_info("F", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("opset", [11, 17])
def test_an_unsqueezed_frame_is_one_step_in_every_door(stub_cache, opset):
    # Under the stub one step of this LSTM is ORT CPU's and the assumed 64 steps the device's;
    # the EP (the session's report) and convert read the Unsqueeze alike.
    frame = np.random.default_rng(3).uniform(-1, 1, (2, 128)).astype(np.float32)
    for producer, where, assumed in (("unsqueeze", "cpu", "(assumed batch 1)"),
                                     ("identity", "gpu", f"(assumed sequence {policy.DEFAULT_SEQ}, batch 1)")):
        model = _frame_model(producer, opset)
        with ortops.InferenceSession(model, providers=["CPUExecutionProvider"], placement="auto") as s:
            (p,) = s.placement
            assert p.where == where and p.reason.endswith(assumed), (producer, p.reason)
            if producer == "unsqueeze":
                assert s.run(None, {"F": frame})[0].shape == (1, 1, 2, 128)
        converted = ortops.convert(model, placement="auto")
        assert [n.domain for n in converted.graph.node] == ["", "ortops" if where == "gpu" else ""], producer
