"""ortops.InferenceSession, convert + register, placement and errors.

Every comparison is against stock ONNX Runtime CPU (or, for layout 1 and
float16, ORT CPU on the layout-0 float32 equivalent model) with the
project's tolerances: scaled error 1e-5 for float32, 2e-3 for float16.
"""

import importlib.util
import json
import pathlib
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortops
from ortops.ort import customop
from ortops.ort.equivalent import cpu_equivalent, cpu_feeds
from ortops.ort.rewrite import ModelError, rewrite
from ortops.ort.session import placement

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _script(name):
    spec = importlib.util.spec_from_file_location(f"_ortops_script_{name.replace('/', '_')}", ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


conformance = _script("ci/conformance")
node_case = conformance.node_case
scaled_error = conformance.scaled_error


def stock(model, feeds, output_names=None):
    """Outputs of stock ORT CPU (through the equivalent model when it must)."""
    needs_eq = any(v.dtype == np.float16 for v in feeds.values()) or any(
        a.name == "layout" and a.i == 1 for n in model.graph.node for a in n.attribute)
    m = cpu_equivalent(model) if needs_eq else model
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(output_names, cpu_feeds(feeds) if needs_eq else feeds)


def assert_close(got, expected, dtype="float32"):
    tol = {"float32": 1e-5, "float16": 2e-3}[dtype]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        err = scaled_error(g, e)
        assert err <= tol, f"scaled error {err} above {tol}"


def recognizer_like(dtype="float32", seed=0):
    """Two stacked bidirectional LSTMs and a MatMul head, small sizes."""
    mm = _script("make_models")
    m = mm.recognizer(seq=7, inp=6, hidden=5, classes=4, seed=seed)
    return mm.to_float16(m) if dtype == "float16" else m


# -- correctness and interface -------------------------------------------------------


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_matches_stock_ort_and_has_its_interface(op):
    case = node_case(f"{op}-basic", op, direction="bidirectional", seq=5, batch=3, inp=4, hidden=6, bias=True,
                     lens="zeros", h0=True, c0=op == "LSTM", rng=np.random.default_rng(1))
    ours = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    ref = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [p.where for p in ours.placement] == ["gpu"]
    for a, b in ((ours.get_inputs(), ref.get_inputs()), (ours.get_outputs(), ref.get_outputs())):
        assert [(x.name, x.type, x.shape) for x in a] == [(x.name, x.type, x.shape) for x in b]
    assert "CPUExecutionProvider" in ours.get_providers()
    got = ours.run(None, case.feeds)
    want = ref.run(None, case.feeds)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    assert_close(got, want)
    # output_names selects and orders outputs like stock ORT
    names = [o.name for o in ref.get_outputs()][::-1]
    assert_close(ours.run(names, case.feeds), ref.run(names, case.feeds))


def test_model_as_path_bytes_or_proto(tmp_path):
    model = recognizer_like()
    before = model.SerializeToString()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    X = np.random.default_rng(2).uniform(-1, 1, (7, 2, 6)).astype(np.float32)
    want = stock(model, {"X": X})
    for src in (str(path), path, before, model):
        sess = ortops.InferenceSession(src, providers=["CPUExecutionProvider"])
        assert [p.where for p in sess.placement] == ["gpu", "gpu"]
        assert_close(sess.run(None, {"X": X}), want)
    assert model.SerializeToString() == before, "the caller's ModelProto must not be modified"


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layout1_and_float16(dtype):
    case = node_case("l1", "LSTM", direction="bidirectional", layout=1, dtype=dtype, seq=4, batch=3, inp=3,
                     hidden=4, bias=True, peep=True, lens="zeros", h0=True, c0=True, rng=np.random.default_rng(3))
    sess = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    got = sess.run(None, case.feeds)
    assert all(g.dtype == np.dtype(dtype) for g in got)
    assert_close(got, stock(case.model, case.feeds), dtype)


def test_float16_model_end_to_end():
    model = recognizer_like("float16")
    X = np.random.default_rng(4).uniform(-1, 1, (7, 1, 6)).astype(np.float16)
    sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {"X": X})
    assert got.dtype == np.float16 and got.shape == (7, 1, 4)
    assert_close([got], stock(model, {"X": X}), "float16")


def test_only_consumed_outputs_are_computed():
    case = node_case("yh", "LSTM", seq=3, batch=2, inp=2, hidden=3, outputs=("Y_h",),
                     rng=np.random.default_rng(5))
    sess = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    assert sess.placement[0].outputs == ("Y_h",)
    (node,) = _custom_nodes(ortops.convert(case.model))
    assert json.loads(helper.get_attribute_value(node.attribute[0]))["outputs"] == ["Y_h"]
    assert list(node.output)[0] == "" and node.output[1]      # Y is not computed at all
    assert_close(sess.run(None, case.feeds), stock(case.model, case.feeds))


# -- weights: uploaded once ----------------------------------------------------------------


def _custom_nodes(model):
    return [n for n in model.graph.node if n.domain == customop.DOMAIN]


def test_session_uploads_constant_weights_once(build_counter):
    model = recognizer_like()
    sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert build_counter["builds"] == 2  # one layer per LSTM, built when ORT creates its kernel
    X = np.random.default_rng(6).uniform(-1, 1, (7, 1, 6)).astype(np.float32)
    for _ in range(3):
        sess.run(None, {"X": X})
    assert build_counter["builds"] == 2, "a run must not rebuild (re-upload) a layer"
    assert build_counter["calls"] == 6
    # The custom nodes read their weights from initializers: constant inputs of their kernels.
    rewritten = rewrite(model).model
    inits = {t.name: t for t in rewritten.graph.initializer}
    for node in _custom_nodes(rewritten):
        cfg = json.loads(helper.get_attribute_value(node.attribute[0]))
        assert cfg["v"] == 4 and "weights" not in cfg
        for name in node.input[1:4]:  # W, R, B
            assert name in inits and len(inits[name].dims) in (2, 3)


def test_close_releases_layers():
    import gc

    from ortops import _vk

    gc.collect()
    alive = _vk.core_counters()["layers_alive"]
    sess = ortops.InferenceSession(recognizer_like(), providers=["CPUExecutionProvider"])
    assert _vk.core_counters()["layers_alive"] == alive + 2
    sess.close()
    gc.collect()
    assert _vk.core_counters()["layers_alive"] == alive


def test_two_sessions_do_not_share_layers():
    a = ortops.InferenceSession(recognizer_like(seed=1), providers=["CPUExecutionProvider"])
    b = ortops.InferenceSession(recognizer_like(seed=2), providers=["CPUExecutionProvider"])
    X = np.random.default_rng(7).uniform(-1, 1, (7, 1, 6)).astype(np.float32)
    assert_close(a.run(None, {"X": X}), stock(recognizer_like(seed=1), {"X": X}))
    assert_close(b.run(None, {"X": X}), stock(recognizer_like(seed=2), {"X": X}))


# -- convert + register -----------------------------------------------------------------------


def test_convert_and_register_with_plain_onnxruntime(build_counter):
    model = recognizer_like()
    converted = ortops.convert(model)
    assert build_counter["builds"] == 0  # the library builds the layers, not the conversion
    so = ort.SessionOptions()
    assert ortops.register(so) is so
    assert ortops.register(so) is so  # idempotent
    sess = ort.InferenceSession(converted.SerializeToString(), so, providers=["CPUExecutionProvider"])
    assert build_counter["builds"] == 2  # uploaded when ORT created the kernels
    X = np.random.default_rng(8).uniform(-1, 1, (7, 2, 6)).astype(np.float32)
    want = stock(model, {"X": X})
    for _ in range(3):
        assert_close(sess.run(None, {"X": X}), want)
    assert build_counter["builds"] == 2, "unchanged weights must reuse the uploaded layer"
    # standalone: the weights stay initializers feeding the custom nodes
    inits = {t.name for t in converted.graph.initializer}
    for node in _custom_nodes(converted):
        assert all(name in inits for name in node.input[1:4])
    # and it survives serialization through a file
    onnx.checker.check_model(onnx.load_from_string(converted.SerializeToString()), full_check=False)


def test_convert_rebuilds_only_when_weights_change(build_counter):
    case = node_case("wi", "GRU", seq=3, batch=2, inp=3, hidden=4, bias=True, lbr=1, weights_as_inputs=True,
                     rng=np.random.default_rng(9))
    sess = ort.InferenceSession(ortops.convert(case.model).SerializeToString(),
                                ortops.register(ort.SessionOptions()), providers=["CPUExecutionProvider"])
    builds0 = build_counter["builds"]
    assert_close(sess.run(None, case.feeds), stock(case.model, case.feeds))
    assert_close(sess.run(None, case.feeds), stock(case.model, case.feeds))
    assert build_counter["builds"] == builds0 + 1
    feeds = dict(case.feeds, W=(case.feeds["W"] * 0.5).astype(np.float32))
    assert_close(sess.run(None, feeds), stock(case.model, feeds))
    assert build_counter["builds"] == builds0 + 2


# -- placement ---------------------------------------------------------------------------------


def test_refused_node_stays_on_ort_and_is_reported():
    # The report comes from the native checker the EP uses (tests/test_session_ep.py checks it
    # against ONNX Runtime's assignment): a GRU with linear_before_reset 2 (ONNX says 0 or 1;
    # ORT CPU runs it as 1) is refused by it and stays on ORT's kernel.
    rng = np.random.default_rng(10)
    lstm = node_case("a", "LSTM", seq=3, batch=2, inp=3, hidden=4, bias=True, rng=rng)
    gru = node_case("b", "GRU", seq=3, batch=2, inp=3, hidden=4, bias=True, rng=rng)
    # one model: the LSTM node case plus a GRU reading the same X
    g = lstm.model.graph
    for t in gru.model.graph.initializer:
        g.initializer.append(numpy_helper.from_array(numpy_helper.to_array(t), "g" + t.name))
    g.node.append(helper.make_node("GRU", ["X", "gW", "gR", "gB"], ["gY", "gY_h"], name="gru_node", hidden_size=4,
                                   linear_before_reset=2))
    g.output.append(helper.make_tensor_value_info("gY_h", TensorProto.FLOAT, None))
    sess = ortops.InferenceSession(lstm.model, providers=["CPUExecutionProvider"])
    where = {p.op: p for p in sess.placement}
    assert where["LSTM"].where == "gpu"
    assert where["GRU"].where == "cpu" and "linear_before_reset must be 0 or 1, got 2" in where["GRU"].reason
    assert "ONNX Runtime CPU" in where["GRU"].describe()
    assert_close(sess.run(None, lstm.feeds), stock(lstm.model, lstm.feeds))
    with pytest.raises(ValueError, match="not taken by the GPU path"):
        ortops.InferenceSession(lstm.model, providers=["CPUExecutionProvider"], require_gpu=True)


def test_float64_gpu_or_clear_refusal():
    # ORT CPU has no float64 RNN/GRU/LSTM. The GPU path takes float64 only if
    # the device and kernels support it; otherwise creating the session fails
    # with ORT's error plus a note saying why the node was not taken.
    from ortops import reference

    rng = np.random.default_rng(11)
    W = rng.uniform(-0.5, 0.5, (1, 4, 3))
    R = rng.uniform(-0.5, 0.5, (1, 4, 4))
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y", "Y_h"], name="rnn64", hidden_size=4)
    g = helper.make_graph([node], "f64", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [2, 1, 3])],
                          [helper.make_tensor_value_info("Y_h", TensorProto.DOUBLE, None)],
                          [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    X = rng.uniform(-1, 1, (2, 1, 3))
    (p,) = placement(model)
    assert p.dtype == "float64" and p.reason
    if p.where == "gpu":
        got = ortops.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"X": X})
        assert got[0].dtype == np.float64
        assert_close(got, [reference.rnn(X, W, R, hidden_size=4)[1]])
    else:
        with pytest.raises(Exception, match="RNN") as info:
            ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
        assert any("rnn64" in n and p.reason in n for n in getattr(info.value, "__notes__", []))


def test_info_placement_function():
    places = placement(recognizer_like())
    assert [p.name for p in places] == ["lstm1", "lstm2"]
    assert all(p.where == "gpu" and p.hidden_size == 5 for p in places)


# -- errors ---------------------------------------------------------------------------------------


def _lstm_with_lens():
    return node_case("lens", "LSTM", direction="bidirectional", seq=4, batch=3, inp=3, hidden=4, bias=True,
                     lens="full", rng=np.random.default_rng(12))


def test_sequence_lens_out_of_range_names_node_and_row_and_device_stays_usable():
    case = _lstm_with_lens()
    sess = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    want = stock(case.model, case.feeds)
    for bad in ([4, 5, 1], [-1, 2, 2], [4, 4, 99]):
        row = next(i for i, v in enumerate(bad) if v < 0 or v > 4)
        with pytest.raises(customop.NodeRunError, match=rf"lstm_node.*batch row {row}") as info:
            sess.run(None, dict(case.feeds, sequence_lens=np.array(bad, np.int32)))
        assert info.value.node == "lstm_node" and isinstance(info.value, ValueError)
        assert_close(sess.run(None, case.feeds), want)  # same process, same device, next run fine
    # a fresh session afterwards works too
    assert_close(ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"]).run(None, case.feeds), want)


def test_bad_feeds_give_clear_errors():
    case = _lstm_with_lens()
    sess = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    with pytest.raises(ValueError, match=r"unknown input name.*'x'.*X"):
        sess.run(None, dict(case.feeds, x=case.feeds["X"]))
    with pytest.raises(Exception, match=r"tensor\(double\)"):  # stock ORT's type check
        sess.run(None, dict(case.feeds, X=case.feeds["X"].astype(np.float64)))
    with pytest.raises(Exception, match=r"invalid dimensions for input: X"):  # stock ORT's shape check
        sess.run(None, dict(case.feeds, X=case.feeds["X"][:, :, :2]))
    with pytest.raises(Exception, match=r"[Mm]issing.*sequence_lens|sequence_lens.*missing"):
        sess.run(None, {"X": case.feeds["X"]})
    assert_close(sess.run(None, case.feeds), stock(case.model, case.feeds))


def test_wrong_shape_behind_a_dynamic_dimension_names_the_node():
    case = _lstm_with_lens()
    for vi in case.model.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            d.dim_param = "dyn" + str(id(d) % 1000)  # every dimension dynamic
    sess = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    X = case.feeds["X"]
    with pytest.raises(customop.NodeRunError, match=r"LSTM node 'lstm_node'.*X"):
        sess.run(None, dict(case.feeds, X=np.concatenate([X, X], axis=2)))  # input size 6, W says 3
    assert_close(sess.run(None, case.feeds), stock(case.model, case.feeds))


def test_plain_ort_session_reports_node_errors_without_crashing():
    # The node's own status: ORT's exception carries it, naming the node and what is wrong.
    case = _lstm_with_lens()
    sess = ort.InferenceSession(ortops.convert(case.model).SerializeToString(),
                                ortops.register(ort.SessionOptions()), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=r"INVALID_ARGUMENT.*ortops: LSTM node 'lstm_node': .*batch row 1"):
        sess.run(None, dict(case.feeds, sequence_lens=np.array([4, 7, 1], np.int32)))
    assert_close(sess.run(None, case.feeds), stock(case.model, case.feeds))


@pytest.mark.parametrize("config, message", [
    (b"{not json", "not valid JSON"),
    # flipped bytes: invalid UTF-8 in the attribute (it once aborted the process)
    (None, "UTF-8"),
])
def test_malformed_config_does_not_abort_the_process(config, message):
    converted = ortops.convert(_lstm_with_lens().model)
    node = _custom_nodes(converted)[0]
    if config is None:
        text = bytearray(node.attribute[0].s)
        text[text.index(b"Y_h") + 1] ^= 0xC0   # '_' -> 0x9F, a lone continuation byte
        config = bytes(text)
    node.attribute[0].s = config
    for make in (lambda m: ort.InferenceSession(m.SerializeToString(), ortops.register(ort.SessionOptions()),
                                                providers=["CPUExecutionProvider"]),
                 lambda m: ortops.InferenceSession(m, providers=["CPUExecutionProvider"])):
        with pytest.raises(Exception, match=rf"LSTM node 'lstm_node': ortops node config: .*{message}"):
            make(converted)
    case = _lstm_with_lens()   # and the process goes on
    assert_close(ortops.InferenceSession(case.model).run(None, case.feeds), stock(case.model, case.feeds))


@pytest.mark.parametrize("bad", [b"not an onnx model", "does/not/exist.onnx", 42])
def test_malformed_model_is_a_clear_error(bad):
    with pytest.raises((ModelError, TypeError), match=r"not a serialized ONNX model|not found|must be a path"):
        ortops.InferenceSession(bad)


def test_invalid_graph_fails_at_creation_with_ort_message():
    # LSTM whose W initializer has the wrong rank: the kernels refuse it, the
    # node stays standard and ORT itself reports the model error.
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=2)
    g = helper.make_graph([node], "bad", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.zeros((8, 2), np.float32), "W"),
                           numpy_helper.from_array(np.zeros((1, 8, 2), np.float32), "R")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    with pytest.raises(Exception) as info:
        sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
        sess.run(None, {"X": np.zeros((1, 1, 2), np.float32)})
    assert "W" in str(info.value) or "rank" in str(info.value).lower()
    # and the process goes on: a good model still runs
    case = _lstm_with_lens()
    assert_close(ortops.InferenceSession(case.model).run(None, case.feeds), stock(case.model, case.feeds))


def test_recurrent_node_in_a_subgraph_runs_on_the_gpu_and_is_reported_with_its_path():
    case = node_case("sub", "GRU", seq=3, batch=2, inp=3, hidden=4, bias=True, rng=np.random.default_rng(13))
    g = case.model.graph
    gru = g.node[0]
    # then-branch: the GRU on the outer X; else-branch: the same GRU's output
    # computed in the main graph (so the main graph has a GPU node too).
    then_g = helper.make_graph([helper.make_node("GRU", list(gru.input), ["tY", "tY_h"], name="gru_in_if",
                                                 hidden_size=4)],
                               "then", [], [helper.make_tensor_value_info("tY_h", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Identity", ["Y_h"], ["eY_h"])], "else", [],
                               [helper.make_tensor_value_info("eY_h", TensorProto.FLOAT, None)])
    g.input.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
    g.node.append(helper.make_node("If", ["cond"], ["out"], name="branch", then_branch=then_g, else_branch=else_g))
    g.output.append(helper.make_tensor_value_info("out", TensorProto.FLOAT, None))
    sess = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    where = {p.name: p for p in sess.placement}
    assert where["gru_node"].where == "gpu"
    assert where["gru_in_if"].where == "gpu" and where["gru_in_if"].path == "If 'branch' then_branch"
    assert where["gru_in_if"].dtype == "float32"
    assert "If 'branch' then_branch / GRU 'gru_in_if'" in where["gru_in_if"].describe()
    for cond in (True, False):
        feeds = dict(case.feeds, cond=np.array(cond))
        assert_close(sess.run(None, feeds), stock(case.model, feeds))


def test_other_session_methods_are_forwarded():
    case = _lstm_with_lens()
    sess = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    assert sess.get_modelmeta().graph_name == case.model.graph.name
    assert isinstance(sess.get_tuning_results(), list)  # forwarded through __getattr__
    sess.close()
    with pytest.raises(RuntimeError, match="closed"):  # every method: test_session_parity.py
        sess.get_tuning_results()


def test_model_converted_by_an_earlier_config_version_is_refused_clearly():
    case = _lstm_with_lens()
    old = ortops.convert(case.model)
    for node in _custom_nodes(old):
        cfg = json.loads(helper.get_attribute_value(node.attribute[0]))
        cfg["v"] = 1
        node.attribute[0].s = customop.encode_config(cfg).encode()
    with pytest.raises(Exception, match=f"config version 1 is not the supported version {customop.CONFIG_VERSION}"):
        ort.InferenceSession(old.SerializeToString(), ortops.register(ort.SessionOptions()),
                             providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("weights_as_inputs", (False, True))
def test_exact_mode_reaches_every_node_through_session_and_convert(weights_as_inputs):
    # mode="exact" on InferenceSession and convert: each node's config says so, and the three
    # paths (prebuilt layer, converted model, a RecurrentLayer of the node) give the same bits.
    case = node_case("ex", "GRU", seq=3, batch=2, inp=3, hidden=5, bias=True, lbr=1,
                     weights_as_inputs=weights_as_inputs, rng=np.random.default_rng(21))
    converted = ortops.convert(case.model, mode="exact")
    configs = [json.loads(helper.get_attribute_value(a)) for n in _custom_nodes(converted)
               for a in n.attribute if a.name == "config"]
    assert configs and all(c["mode"] == "exact" for c in configs)
    plain = ort.InferenceSession(converted.SerializeToString(), ortops.register(ort.SessionOptions()),
                                 providers=["CPUExecutionProvider"]).run(None, case.feeds)
    with ortops.InferenceSession(case.model, mode="exact") as sess:
        ours = sess.run(None, case.feeds)
    f = {t.name: numpy_helper.to_array(t) for t in case.model.graph.initializer}
    f.update(case.feeds)
    layer = ortops.RecurrentLayer("GRU", f["W"], f["R"], f["B"], linear_before_reset=1, mode="exact")
    direct = layer(f["X"], f.get("sequence_lens"), f.get("initial_h"))
    for a, b, c in zip(plain, ours, direct):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    assert_close(ours, stock(case.model, case.feeds))
