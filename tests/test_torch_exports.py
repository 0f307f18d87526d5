"""Real PyTorch (TorchScript exporter) models through ortops, at every ORT optimisation level.

tests/models/ holds three small exports written by scripts/export_torch_models.py: an
nn.LSTM at opset 9, an nn.GRU and a two-layer nn.RNN at opset 14, all sequence first with
static shapes. Their recurrent outputs go through Squeeze into graph outputs, the pattern ORT's
Reshape/Squeeze chain fusion rewrites: ORT 1.21 to 1.30 failed to create a session for them
while ortops checked node failures with ``Reshape(raw, status)`` ("Attempting to get index
by a name which does not exist: ..._ortops_status for node: ..._new_reshape").
"""

import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ortops
from ortops.ort import customop
from ortops.compare import scaled_error

MODELS = pathlib.Path(__file__).resolve().parent / "models"
NAMES = ["lstm_opset9", "gru_opset14", "rnn2_opset14"]
LEVELS = {
    "disable_all": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
RECURRENT = {"LSTM", "GRU", "RNN"}


def _options(level: str) -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    return so


def _feeds(path: pathlib.Path) -> dict:
    (x,) = onnx.load(str(path)).graph.input
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    assert all(shape), f"{path.name}: the exports have static shapes, got {shape}"
    return {x.name: np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)}


def _recurrent_nodes(path: pathlib.Path) -> int:
    return sum(n.op_type in RECURRENT for n in onnx.load(str(path)).graph.node)


def _stock(path: pathlib.Path, feeds: dict) -> list:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", NAMES)
def test_torch_export_runs_on_the_gpu_like_stock_ort(name, level):
    path = MODELS / f"{name}.onnx"
    feeds = _feeds(path)
    sess = ortops.InferenceSession(str(path), _options(level), providers=["CPUExecutionProvider"])
    assert len(sess.placement) == _recurrent_nodes(path) >= 1
    assert [p.where for p in sess.placement] == ["gpu"] * len(sess.placement), \
        [p.describe() for p in sess.placement]
    got = sess.run(None, feeds)
    want = _stock(path, feeds)
    assert [g.shape for g in got] == [w.shape for w in want]
    for out, g, w in zip(sess.get_outputs(), got, want):
        err = scaled_error(g, w)
        assert err <= 1e-5, f"{name} at {level}: output {out.name} scaled error {err} above 1e-5"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", NAMES)
def test_converted_torch_export_runs_in_plain_onnxruntime(name, level):
    path = MODELS / f"{name}.onnx"
    feeds = _feeds(path)
    so = ortops.register(_options(level))
    sess = ort.InferenceSession(ortops.convert(str(path)).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    for g, w in zip(sess.run(None, feeds), _stock(path, feeds)):
        assert g.shape == w.shape and scaled_error(g, w) <= 1e-5


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", NAMES)
def test_a_failing_node_is_an_ordinary_run_error_at_every_level(name, level, monkeypatch, caplog):
    # Whatever ORT's optimisers made of the check node, a failed recurrent node must fail the
    # run (not return its empty output as a result), and the next run must work.
    path = MODELS / f"{name}.onnx"
    feeds = _feeds(path)
    sess = ortops.InferenceSession(str(path), _options(level), providers=["CPUExecutionProvider"])
    plain = ort.InferenceSession(ortops.convert(str(path)).SerializeToString(), ortops.register(_options(level)),
                                 providers=["CPUExecutionProvider"])
    real = customop.run_node

    def failing(cfg, feed):
        raise RuntimeError("failure injected by the test")

    monkeypatch.setattr(customop, "run_node", failing)
    with pytest.raises(customop.NodeRunError, match="failure injected by the test"):
        sess.run(None, feeds)
    with pytest.raises(Exception, match="ortops_check"):
        plain.run(None, feeds)
    assert "failure injected by the test" in caplog.text   # the plain session's only report
    monkeypatch.setattr(customop, "run_node", real)
    want = _stock(path, feeds)
    for s in (sess, plain):
        for g, w in zip(s.run(None, feeds), want):
            assert scaled_error(g, w) <= 1e-5
