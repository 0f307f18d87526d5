"""Real PyTorch models (TorchScript and dynamo exporters) through ortops.

The corpus (scripts/dev/export_torch_models.py, ``corpus()``): nn.LSTM / nn.GRU / nn.RNN of one and
two layers, bidirectional, batch_first, with and without h0/c0, packed sequences with lengths,
dynamic axes, a CRNN, an embedding + GRU tagger, a torch.jit.script model with an LSTM in a
Loop body and a GRU in an If branch, and a dynamo export. Each NAME.onnx comes with NAME.npz:
the inputs (``input.*``, other sizes than the export's example where axes are dynamic) and
torch's own outputs (``output.*``). Every recurrent node (in every scope) must be on the device
and every output within the float32 tolerance of both ORT CPU and torch.

The matrix over ORT's optimisation levels below covers the first three exports:

tests/models/ holds three small exports written by scripts/dev/export_torch_models.py: an
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


CORPUS = sorted(p.stem for p in MODELS.glob("*.npz"))


def _all_recurrent(graph) -> int:
    """Recurrent nodes of ``graph`` and of its If/Loop/Scan bodies."""
    n = 0
    for node in graph.node:
        n += node.op_type in RECURRENT
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                n += _all_recurrent(a.g)
    return n


def _saved(name: str):
    data = np.load(MODELS / f"{name}.npz")
    feeds = {k[len("input."):]: data[k] for k in data.files if k.startswith("input.")}
    torch_out = {k[len("output."):]: data[k] for k in data.files if k.startswith("output.")}
    return feeds, torch_out


def test_the_corpus_is_there():
    assert len(CORPUS) >= 10 and "scripted_loop_if" in CORPUS and "dynamo_lstm2_bidirectional" in CORPUS


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_model_runs_on_the_device_like_ort_cpu_and_torch(name):
    path = MODELS / f"{name}.onnx"
    feeds, torch_out = _saved(name)
    sess = ortops.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert len(sess.placement) == _all_recurrent(onnx.load(str(path)).graph) >= 1
    for p in sess.placement:
        assert p.where == "gpu" and p.dtype == "float32" and p.weights.startswith("constant"), p.describe()
    feeds = {i.name: feeds[i.name] for i in sess.get_inputs()}   # exporters may drop unused inputs
    got = sess.run(None, feeds)
    want = _stock(path, feeds)
    for out, g, w in zip(sess.get_outputs(), got, want):
        assert g.shape == w.shape == torch_out[out.name].shape, out.name
        for ref, label in ((w, "ORT CPU"), (torch_out[out.name], "torch")):
            err = scaled_error(g, ref)
            assert err <= 1e-5, f"{name}: output {out.name} scaled error {err} against {label}"


def test_scripted_model_takes_both_branches_and_loops_on_the_device():
    # The saved input takes the Loop's LSTM path (x.sum() > 0); its negation takes the GRU in
    # the If's other branch. Both paths are rewritten: placement names them by their bodies.
    path = MODELS / "scripted_loop_if.onnx"
    feeds, _ = _saved("scripted_loop_if")
    sess = ortops.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert sorted(p.path.split(" ")[0] for p in sess.placement) == ["If", "Loop"]
    for x in (feeds["x"], -feeds["x"]):
        f = dict(feeds, x=x)
        for g, w in zip(sess.run(None, f), _stock(path, f)):
            assert g.shape == w.shape and scaled_error(g, w) <= 1e-5


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
def test_a_failing_node_is_an_ordinary_run_error_at_every_level(name, level, inject_fault):
    # Whatever ORT's optimisers make of the graph, a failed recurrent node must fail the run
    # (with its own status, naming the node), and the next run must work.
    path = MODELS / f"{name}.onnx"
    feeds = _feeds(path)
    sess = ortops.InferenceSession(str(path), _options(level), providers=["CPUExecutionProvider"])
    plain = ort.InferenceSession(ortops.convert(str(path)).SerializeToString(), ortops.register(_options(level)),
                                 providers=["CPUExecutionProvider"])
    inject_fault("fail")
    with pytest.raises(customop.NodeRunError, match="failure injected by the test"):
        sess.run(None, feeds)
    with pytest.raises(Exception, match=r"ortops: (LSTM|GRU|RNN) node '.*': .*failure injected by the test"):
        plain.run(None, feeds)
    inject_fault("")
    want = _stock(path, feeds)
    for s in (sess, plain):
        for g, w in zip(s.run(None, feeds), want):
            assert scaled_error(g, w) <= 1e-5
