"""Recurrent nodes inside If, Loop and Scan bodies (nested too) on the device.

Hand-built models (onnx.helper) with the cases exporters write: weights as main-graph
initializers read from a body (outer scope), weights as body initializers or Constant nodes,
initial states computed outside the body, state carried across Loop iterations (a Loop over
chunks), a Scan, an If inside a Loop. Each is compared with stock ORT CPU on the original
model (scaled error 1e-5, float32) and its placement is checked (path and element type).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_session import assert_close, stock

import ortops
from ortops.ort import customop
from ortops.ort.session import placement

F = TensorProto.FLOAT
I, H, B, T = 3, 4, 2, 5
OPSET = [helper.make_opsetid("", 17)]


def _weights(op: str, rng, dirs: int = 1, prefix: str = "") -> list:
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    return [numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), prefix + n)
            for n, shape in (("W", (dirs, gates * H, I)), ("R", (dirs, gates * H, H)),
                             ("B", (dirs, 2 * gates * H)))]


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "control_flow", inputs, outputs, list(initializers))
    m = helper.make_model(g, opset_imports=OPSET, ir_version=8)
    onnx.checker.check_model(m)
    return m


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _if_model(rng) -> onnx.ModelProto:
    """then: an LSTM with main-graph weights and an initial_h computed outside (Tanh);
    else: a GRU with its own initializers and a bias from a Constant node."""
    then_g = helper.make_graph(
        [helper.make_node("LSTM", ["X", "mW", "mR", "mB", "", "h0"], ["tY", "tY_h"], name="lstm", hidden_size=H)],
        "then", [], [_vi("tY_h", [1, B, H])])
    gw = _weights("GRU", rng, prefix="g")
    else_g = helper.make_graph(
        [helper.make_node("Constant", [], ["gbias"], value=gw[2]),
         helper.make_node("GRU", ["X", "gW", "gR", "gbias"], ["eY", "eY_h"], name="gru", hidden_size=H,
                          linear_before_reset=1)],
        "else", [], [_vi("eY_h", [1, B, H])], gw[:2])
    nodes = [helper.make_node("Tanh", ["h_in"], ["h0"]),
             helper.make_node("If", ["cond"], ["out"], name="branch", then_branch=then_g, else_branch=else_g)]
    return _model(nodes, [_vi("X", [T, B, I]), _vi("h_in", [1, None, H]), _vi("cond", [], TensorProto.BOOL)],
                  [_vi("out", [1, B, H])], _weights("LSTM", rng, prefix="m"))


def _loop_model(rng, chunks: int, chunk: int) -> onnx.ModelProto:
    """A Loop over ``chunks`` chunks of X, the LSTM's (h, c) carried across iterations; Y of
    each chunk collected as the scan output."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["i", "clen"], ["start"]),
         helper.make_node("Add", ["start", "clen"], ["stop"]),
         helper.make_node("Unsqueeze", ["start", "ax0"], ["start1"]),
         helper.make_node("Unsqueeze", ["stop", "ax0"], ["stop1"]),
         helper.make_node("Slice", ["X", "start1", "stop1", "ax0"], ["xc"]),
         helper.make_node("LSTM", ["xc", "mW", "mR", "mB", "", "h", "c"], ["y", "h2", "c2"], name="chunk_lstm",
                          hidden_size=H),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("h", [1, B, H]),
                 _vi("c", [1, B, H])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("h2", [1, B, H]), _vi("c2", [1, B, H]), _vi("y", [chunk, 1, B, H])],
        [numpy_helper.from_array(np.array(chunk, np.int64), "clen"),
         numpy_helper.from_array(np.array([0], np.int64), "ax0")])
    nodes = [helper.make_node("Loop", ["n", "", "h0", "c0"], ["hN", "cN", "ys"], name="chunks", body=body)]
    inits = _weights("LSTM", rng, prefix="m") + [numpy_helper.from_array(np.array(chunks, np.int64), "n")]
    return _model(nodes, [_vi("X", [chunks * chunk, B, I]), _vi("h0", [1, B, H]), _vi("c0", [1, B, H])],
                  [_vi("hN", [1, B, H]), _vi("cN", [1, B, H]), _vi("ys", [chunks, chunk, 1, B, H])], inits)


def _scan_model(rng, k: int) -> onnx.ModelProto:
    """A Scan over ``k`` sequences, a bidirectional RNN with body initializers, the state
    carried (its Y_h becomes the next initial_h)."""
    body = helper.make_graph(
        [helper.make_node("RNN", ["x", "rW", "rR", "rB", "", "h"], ["y", "h2"], name="scan_rnn", hidden_size=H,
                          direction="bidirectional"),
         helper.make_node("Identity", ["y"], ["y_out"])],
        "body", [_vi("h", [2, B, H]), _vi("x", [T, B, I])], [_vi("h2", [2, B, H]), _vi("y_out", [T, 2, B, H])],
        _weights("RNN", rng, dirs=2, prefix="r"))
    nodes = [helper.make_node("Scan", ["h0", "Xs"], ["hN", "ys"], name="scan", body=body, num_scan_inputs=1)]
    return _model(nodes, [_vi("h0", [2, B, H]), _vi("Xs", [k, T, B, I])],
                  [_vi("hN", [2, B, H]), _vi("ys", [k, T, 2, B, H])])


def _if_in_loop_model(rng, n: int) -> onnx.ModelProto:
    """A Loop whose body holds an If whose then_branch holds a GRU (weights in the main graph),
    the GRU's state carried; the else_branch passes the state through."""
    then_g = helper.make_graph(
        [helper.make_node("GRU", ["X", "mW", "mR", "mB", "", "h"], ["ty", "th"], name="inner_gru", hidden_size=H)],
        "then", [], [_vi("th", [1, B, H])])
    else_g = helper.make_graph([helper.make_node("Identity", ["h"], ["eh"])], "else", [], [_vi("eh", [1, B, H])])
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["r"]),
         helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["h2"], name="every_other", then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("h", [1, B, H])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("h2", [1, B, H])],
        [numpy_helper.from_array(np.array(2, np.int64), "two"), numpy_helper.from_array(np.array(0, np.int64), "zero")])
    nodes = [helper.make_node("Loop", ["n", "", "h0"], ["hN"], name="outer", body=body)]
    inits = _weights("GRU", rng, prefix="m") + [numpy_helper.from_array(np.array(n, np.int64), "n")]
    return _model(nodes, [_vi("X", [T, B, I]), _vi("h0", [1, B, H])], [_vi("hN", [1, B, H])], inits)


def _body(node, name: str) -> onnx.GraphProto:
    return next(a.g for a in node.attribute if a.name == name)


def _uniform(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def _on_gpu(sess, paths: dict) -> None:
    """Every recurrent node on the device, with its subgraph path and element type."""
    got = {p.name: p for p in sess.placement}
    assert set(got) == set(paths), [p.describe() for p in sess.placement]
    for name, path in paths.items():
        p = got[name]
        assert (p.where, p.path, p.dtype) == ("gpu", path, "float32"), p.describe()
        assert p.weights.startswith("constant"), p.describe()
        assert f"{path} / {p.op} {name!r}" in p.describe()


def test_lstm_and_gru_in_if_branches():
    rng = np.random.default_rng(1)
    model = _if_model(rng)
    sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    _on_gpu(sess, {"lstm": "If 'branch' then_branch", "gru": "If 'branch' else_branch"})
    for cond in (True, False):
        feeds = {"X": _uniform(rng, (T, B, I)), "h_in": _uniform(rng, (1, B, H)), "cond": np.array(cond)}
        assert_close(sess.run(None, feeds), stock(model, feeds))


def test_rewritten_if_model_is_valid_onnx_and_keeps_weights_with_their_nodes():
    model = _if_model(np.random.default_rng(2))
    rw = ortops.ort.rewrite.rewrite(model)
    onnx.checker.check_model(rw.model)  # subgraph outputs still produced, types still valid
    names = {t.name for t in rw.model.graph.initializer}
    assert not names & {"mW", "mR", "mB"}, names   # moved into the branch that reads them
    branch = rw.model.graph.node[-1]
    then_g, else_g = _body(branch, "then_branch"), _body(branch, "else_branch")
    assert [(n.domain, n.op_type) for n in then_g.node] == [("ortops", "LSTM")]
    (lstm,) = then_g.node
    assert set(lstm.input[1:4]) <= {t.name for t in then_g.initializer}   # constant inputs
    assert all(n.op_type != "Constant" for n in else_g.node)   # the GRU's weight chain folded


def test_loop_over_chunks_carries_state_and_uploads_once(build_counter):
    rng = np.random.default_rng(3)
    chunks, chunk = 6, 2
    model = _loop_model(rng, chunks, chunk)
    sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert build_counter["builds"] == 1       # the layer (and its weight upload) at creation
    _on_gpu(sess, {"chunk_lstm": "Loop 'chunks' body"})
    for _ in range(2):
        feeds = {"X": _uniform(rng, (chunks * chunk, B, I)), "h0": _uniform(rng, (1, B, H)),
                 "c0": _uniform(rng, (1, B, H))}
        assert_close(sess.run(None, feeds), stock(model, feeds))
    assert build_counter["builds"] == 1       # not once per iteration, nor per run
    assert build_counter["calls"] == 2 * chunks


def test_loop_over_chunks_equals_one_lstm_over_the_whole_sequence():
    # The chunked state hand-over is the whole point of such a Loop: the same numbers as one
    # LSTM over every step (ORT CPU, one node), to float32 rounding.
    rng = np.random.default_rng(4)
    model = _loop_model(rng, 4, 3)
    feeds = {"X": _uniform(rng, (12, B, I)), "h0": _uniform(rng, (1, B, H)), "c0": _uniform(rng, (1, B, H))}
    hN, cN, _ = ortops.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    whole = _model([helper.make_node("LSTM", ["X", "mW", "mR", "mB", "", "h0", "c0"], ["Y", "Yh", "Yc"],
                                     hidden_size=H)],
                   [_vi("X", [12, B, I]), _vi("h0", [1, B, H]), _vi("c0", [1, B, H])],
                   [_vi("Yh", [1, B, H]), _vi("Yc", [1, B, H])],
                   [t for t in model.graph.initializer if t.name.startswith("m")])
    assert_close([hN, cN], stock(whole, feeds))


def test_bidirectional_rnn_in_a_scan_body():
    rng = np.random.default_rng(5)
    model = _scan_model(rng, 3)
    sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    _on_gpu(sess, {"scan_rnn": "Scan 'scan' body"})
    feeds = {"h0": _uniform(rng, (2, B, H)), "Xs": _uniform(rng, (3, T, B, I))}
    assert_close(sess.run(None, feeds), stock(model, feeds))


def test_gru_in_an_if_nested_in_a_loop(build_counter):
    rng = np.random.default_rng(6)
    model = _if_in_loop_model(rng, 5)
    sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    _on_gpu(sess, {"inner_gru": "Loop 'outer' body / If 'every_other' then_branch"})
    feeds = {"X": _uniform(rng, (T, B, I)), "h0": _uniform(rng, (1, B, H))}
    assert_close(sess.run(None, feeds), stock(model, feeds))
    assert (build_counter["builds"], build_counter["calls"]) == (1, 3)   # iterations 0, 2, 4


@pytest.mark.parametrize("make", [_if_model, lambda rng: _loop_model(rng, 3, 2)], ids=["if", "loop"])
def test_converted_model_with_bodies_runs_in_plain_onnxruntime(make):
    rng = np.random.default_rng(7)
    model = make(rng)
    feeds = {i.name: (np.array(True) if i.type.tensor_type.elem_type == TensorProto.BOOL else
                      _uniform(rng, [d.dim_value or B for d in i.type.tensor_type.shape.dim]))
             for i in model.graph.input}
    sess = ort.InferenceSession(ortops.convert(model).SerializeToString(), ortops.register(),
                                providers=["CPUExecutionProvider"])
    assert_close(sess.run(None, feeds), stock(model, feeds))


def test_bad_input_inside_an_if_is_the_nodes_run_error():
    rng = np.random.default_rng(8)
    model = _if_model(rng)
    sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    bad = {"X": _uniform(rng, (T, B, I)), "h_in": _uniform(rng, (1, B + 1, H)), "cond": np.array(True)}
    with pytest.raises(customop.NodeRunError, match="LSTM node 'lstm'.*initial_h") as e:
        sess.run(None, bad)
    assert e.value.node == "lstm"
    good = dict(bad, h_in=_uniform(rng, (1, B, H)))   # and the session goes on
    assert_close(sess.run(None, good), stock(model, good))


def test_weights_computed_with_arithmetic_stay_inputs_of_the_body_node():
    # The rewrite folds data movement only: W = mW * 1 inside the body is computed each run, so
    # the custom node takes it as an input (compared each run) and the result is still right.
    # (ONNX Runtime folds the Mul itself before it offers the node to the execution provider,
    # whose report then says what the EP got: constant weights.)
    rng = np.random.default_rng(9)
    model = _if_model(rng)
    then_g = _body(model.graph.node[-1], "then_branch")
    then_g.node.insert(0, helper.make_node("Mul", ["mW", "one"], ["mW1"]))
    then_g.initializer.append(numpy_helper.from_array(np.array(1, np.float32), "one"))
    then_g.node[1].input[1] = "mW1"
    lstm = next(p for p in placement(model) if p.name == "lstm")
    assert lstm.where == "gpu" and lstm.weights.startswith("inputs"), lstm.describe()
    feeds = {"X": _uniform(rng, (T, B, I)), "h_in": _uniform(rng, (1, B, H)), "cond": np.array(True)}
    converted = ort.InferenceSession(ortops.convert(model).SerializeToString(), ortops.register(),
                                     providers=["CPUExecutionProvider"])
    assert_close(converted.run(None, feeds), stock(model, feeds))
    sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert next(p for p in sess.placement if p.name == "lstm").where == "gpu"
    assert_close(sess.run(None, feeds), stock(model, feeds))


def test_float16_node_in_a_branch_gets_its_casts_inside_the_branch():
    # ORT CPU has no float16 recurrent kernel, so the oracle is the same node in a main graph:
    # the same kernel on the same inputs gives the same bits (the determinism contract).
    rng = np.random.default_rng(10)
    H16 = TensorProto.FLOAT16
    w = [numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)
         for t in _weights("LSTM", rng, prefix="m")]
    lstm = helper.make_node("LSTM", ["X", "mW", "mR", "mB", "", "h0"], ["Y", "Y_h"], name="half", hidden_size=H)
    plain = _model([lstm], [_vi("X", [T, B, I], H16), _vi("h0", [1, B, H], H16)], [_vi("Y_h", [1, B, H], H16)], w)
    then_g = helper.make_graph([lstm], "then", [], [_vi("Y_h", [1, B, H], H16)])
    else_g = helper.make_graph([helper.make_node("Identity", ["h0"], ["e"])], "else", [], [_vi("e", [1, B, H], H16)])
    branched = _model([helper.make_node("If", ["cond"], ["out"], name="branch", then_branch=then_g,
                                        else_branch=else_g)],
                      [_vi("X", [T, B, I], H16), _vi("h0", [1, B, H], H16), _vi("cond", [], TensorProto.BOOL)],
                      [_vi("out", [1, B, H], H16)], w)
    sess = ortops.InferenceSession(branched, providers=["CPUExecutionProvider"])
    (p,) = sess.placement
    assert (p.where, p.dtype, p.path) == ("gpu", "float16", "If 'branch' then_branch"), p.describe()
    rw = ortops.ort.rewrite.rewrite(branched)
    body = _body(rw.model.graph.node[0], "then_branch")   # float16 taken as it is: no Cast
    assert [(n.domain, n.op_type) for n in body.node] == [("ortops", "LSTM_f16")]
    feeds = {"X": _uniform(rng, (T, B, I)).astype(np.float16), "h0": _uniform(rng, (1, B, H)).astype(np.float16)}
    (got,) = sess.run(None, dict(feeds, cond=np.array(True)))
    (want,) = ortops.InferenceSession(plain, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert got.dtype == np.float16 and np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_folder_folds_data_movement_exactly_and_nothing_else():
    # TorchScript's gate reorder of a weight (Slice, Concat, Unsqueeze), folded bit for bit; a
    # chain with arithmetic (Mul) or a graph input on the way is not a constant.
    from ortops.ort.subgraphs import Folder

    w = np.random.default_rng(11).standard_normal((8, 3)).astype(np.float32)
    c = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [c("s0", [4]), c("e0", [8]), c("s1", [0]), c("e1", [4]), c("ax", [0]),
             helper.make_node("Slice", ["w", "s0", "e0", "ax"], ["a"]),
             helper.make_node("Slice", ["w", "s1", "e1", "ax"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["ab"], axis=0),
             helper.make_node("Unsqueeze", ["ab", "ax"], ["W"]),
             helper.make_node("Mul", ["W", "W"], ["W2"]),
             helper.make_node("Unsqueeze", ["x", "ax"], ["X1"])]
    model = _model(nodes, [_vi("x", [8, 3])], [_vi("W", [1, 8, 3]), _vi("W2", [1, 8, 3]), _vi("X1", [1, 8, 3])],
                   [numpy_helper.from_array(w, "w")])
    consts = {"w": model.graph.initializer[0]}
    consts.update({n.output[0]: n.attribute[0].t for n in model.graph.node if n.op_type == "Constant"})
    folder = Folder(model, consts)
    got = folder.value("W")
    want = np.concatenate([w[4:], w[:4]])[None]
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert [n.op_type for n in folder.chain("W")] == ["Slice", "Slice", "Concat", "Unsqueeze"]
    assert folder.value("W2") is None and folder.chain("W2") is None
    assert folder.value("X1") is None


def test_scope_describes_the_path_outermost_first():
    from ortops.ort.subgraphs import Scope

    loop = helper.make_node("Loop", ["n", ""], [], name="l")
    cond = helper.make_node("If", ["c"], [], name="")
    scope = Scope().inside(loop, "body").inside(cond, "else_branch")
    assert scope.describe() == "Loop 'l' body / If '(unnamed)' else_branch" and not scope.is_main
    assert Scope().describe() == "" and Scope().is_main
