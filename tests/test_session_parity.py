"""ortops.InferenceSession behaves like onnxruntime.InferenceSession where the two could differ.

Overridable initializers, a closed session, arrays in the other byte order, attributes of
the wrong type, and the placement of recurrent nodes inside subgraphs. Comparisons are
against stock ONNX Runtime CPU with the project's float32 tolerance (scaled error 1e-5).
"""

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper

import ortops
from ortops import validation
from ortops.ort import customop
from ortops.compare import scaled_error
from ortops.ort.session import placement

from _scripts import load_script

conformance = load_script("ci/conformance")
CPU = ["CPUExecutionProvider"]


def _stock(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=CPU).run(None, feeds)


def _assert_close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        err = scaled_error(g, w)
        assert err <= 1e-5, f"scaled error {err} above 1e-5"


# -- overridable initializers -------------------------------------------------------------


def _lstm_with_overridable(name):
    """An LSTM (peepholes, bias) whose initializer ``name`` is also a graph input."""
    case = conformance.node_case("ovr", "LSTM", seq=4, batch=2, inp=3, hidden=4, bias=True, peep=True, h0=True,
                                 c0=True, rng=np.random.default_rng(20))
    init = next(t for t in case.model.graph.initializer if t.name == name)
    case.model.graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(init.dims)))
    return case, numpy_helper.to_array(init)


@pytest.mark.parametrize("name", ["W", "R", "B", "P"])
def test_a_fed_weight_overrides_its_initializer_like_stock_ort(name, build_counter):
    case, default = _lstm_with_overridable(name)
    sess = ortops.InferenceSession(case.model, providers=CPU)
    stock = ort.InferenceSession(case.model.SerializeToString(), providers=CPU)
    assert [i.name for i in sess.get_overridable_initializers()] == \
        [i.name for i in stock.get_overridable_initializers()] == [name]
    (p,) = sess.placement
    assert p.where == "gpu" and p.weights.startswith("inputs")

    other = (default * -1.5 + 0.1).astype(np.float32)
    fed = dict(case.feeds, **{name: other})
    want_default, want_fed = stock.run(None, case.feeds), stock.run(None, fed)
    assert scaled_error(want_fed[0], want_default[0]) > 1e-2, "the fed weight must change the result"
    builds0 = build_counter["builds"]
    _assert_close(sess.run(None, case.feeds), want_default)  # the initializer's value
    _assert_close(sess.run(None, fed), want_fed)  # the fed value
    _assert_close(sess.run(None, fed), want_fed)
    _assert_close(sess.run(None, case.feeds), want_default)  # back to the initializer
    # a layer is built (weights uploaded) when the weights change, not on every run
    assert build_counter["builds"] - builds0 == 3


def test_unknown_feed_names_list_the_overridable_initializers_too():
    case, _ = _lstm_with_overridable("W")
    sess = ortops.InferenceSession(case.model, providers=CPU)
    with pytest.raises(ValueError, match=r"unknown input name\(s\) \['w'\].*inputs are \['X', 'initial_c', "
                                         r"'initial_h'\] and its overridable initializers \['W'\]"):
        sess.run(None, dict(case.feeds, w=np.zeros(1, np.float32)))


# -- a closed session ---------------------------------------------------------------------------


def test_every_method_of_a_closed_session_says_it_is_closed():
    case = conformance.node_case("closed", "GRU", seq=3, batch=2, inp=3, hidden=4, rng=np.random.default_rng(21))
    sess = ortops.InferenceSession(case.model, providers=CPU)
    binding = sess.io_binding()
    ort_values = {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in case.feeds.items()}
    sess.close()
    calls = {
        "run": lambda: sess.run(None, case.feeds),
        "run_with_ort_values": lambda: sess.run_with_ort_values(None, ort_values),
        "run_with_iobinding": lambda: sess.run_with_iobinding(binding),
        "io_binding": lambda: sess.io_binding(),
        "ort_session": lambda: sess.ort_session,
        "get_tuning_results (forwarded)": lambda: sess.get_tuning_results(),
    }
    for method in ("get_inputs", "get_outputs", "get_overridable_initializers", "get_providers",
                   "get_provider_options", "get_session_options", "get_modelmeta", "end_profiling",
                   "get_profiling_start_time_ns"):
        calls[method] = lambda m=method: getattr(sess, m)()
    for what, call in calls.items():
        with pytest.raises(RuntimeError, match=r"^ortops\.InferenceSession is closed"):
            call()
            pytest.fail(f"{what} did not raise")
    with pytest.raises(AttributeError, match="no_such_method"):  # not a session method at all
        sess.no_such_method
    assert sess.placement  # what ortops itself knows stays readable
    sess.close()  # closing twice is harmless


# -- byte order ---------------------------------------------------------------------------------


def test_a_big_endian_feed_runs_with_its_values():
    # Stock ORT 1.32 reads the bytes of a '>f4' array as native floats; ortops converts it.
    case = conformance.node_case("be", "LSTM", seq=3, batch=2, inp=3, hidden=4, bias=True, h0=True,
                                 rng=np.random.default_rng(22))
    sess = ortops.InferenceSession(case.model, providers=CPU)
    want = _stock(case.model, case.feeds)
    for name in ("X", "initial_h"):
        swapped = dict(case.feeds, **{name: case.feeds[name].astype(">f4")})
        _assert_close(sess.run(None, swapped), want)


def _big(a):
    return None if a is None else a.astype(a.dtype.newbyteorder(">"))


@pytest.mark.parametrize("arg", ["W", "R", "B", "P"])
def test_layer_validation_names_a_weights_byte_order(arg):
    rng = np.random.default_rng(23)
    t = {"W": rng.random((1, 16, 3), np.float32), "R": rng.random((1, 16, 4), np.float32),
         "B": rng.random((1, 32), np.float32), "P": rng.random((1, 12), np.float32)}
    t[arg] = _big(t[arg])
    expected = "dtype float32 or float16" if arg == "W" else r"the dtype of W \(float32\)"
    with pytest.raises(ValueError, match=rf"^LSTM: {arg} must have {expected}, got big-endian float32 \(>f4\)$"):
        validation.check_layer("LSTM", t["W"], t["R"], t["B"], t["P"])
    with pytest.raises(ValueError, match=r"got big-endian float32 \(>f4\)"):
        ortops.lstm(np.zeros((2, 1, 3), np.float32), t["W"], t["R"], t["B"], P=t["P"])


@pytest.mark.parametrize("arg", ["X", "sequence_lens", "initial_h", "initial_c"])
def test_input_validation_names_an_arrays_byte_order(arg):
    rng = np.random.default_rng(24)
    spec = validation.check_layer("LSTM", rng.random((1, 16, 3), np.float32), rng.random((1, 16, 4), np.float32))
    feeds = {"X": rng.random((2, 1, 3), np.float32), "sequence_lens": np.array([2], np.int32),
             "initial_h": rng.random((1, 1, 4), np.float32), "initial_c": rng.random((1, 1, 4), np.float32)}
    feeds[arg] = _big(feeds[arg])
    expected = "dtype int32, got big-endian int32 (>i4)" if arg == "sequence_lens" else \
        "the dtype of W (float32), got big-endian float32 (>f4)"
    with pytest.raises(ValueError, match="^" + re.escape(f"LSTM: {arg} must have {expected}") + "$"):
        validation.check_inputs(spec, **feeds)


# -- attribute types ------------------------------------------------------------------------------


def _with_attribute(op, name, attr):
    case = conformance.node_case("attr", op, seq=3, batch=2, inp=3, hidden=4, bias=True, opset=14,
                                 rng=np.random.default_rng(25))
    node = case.model.graph.node[0]
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept + [attr])
    return case


MISTYPED = [  # (op, attribute, the mistyped AttributeProto, the schema's type)
    ("LSTM", "hidden_size", helper.make_attribute("hidden_size", 4.0), "INT"),
    ("LSTM", "hidden_size", helper.make_attribute("hidden_size", [4]), "INT"),
    ("GRU", "clip", helper.make_attribute("clip", 3), "FLOAT"),
    ("GRU", "linear_before_reset", helper.make_attribute("linear_before_reset", 1.0), "INT"),
    ("RNN", "activations", helper.make_attribute("activations", "Tanh"), "STRINGS"),
    ("LSTM", "activation_alpha", helper.make_attribute("activation_alpha", 1.0), "FLOATS"),
    ("LSTM", "direction", helper.make_attribute("direction", 0), "STRING"),
    ("GRU", "layout", helper.make_attribute("layout", [0.0]), "INT"),
]


@pytest.mark.parametrize("op, name, attr, want", MISTYPED,
                         ids=[f"{m[0]}-{m[1]}-{AttributeProto.AttributeType.Name(m[2].type)}" for m in MISTYPED])
def test_a_mistyped_attribute_fails_as_in_stock_ort(op, name, attr, want):
    case = _with_attribute(op, name, attr)
    got = AttributeProto.AttributeType.Name(attr.type)
    with pytest.raises(Exception) as stock_error:
        ort.InferenceSession(case.model.SerializeToString(), providers=CPU)
    (p,) = placement(case.model)
    assert p.where == "cpu"
    assert f"attribute {name} has type {got}, the {op} schema says {want}" in p.reason
    with pytest.raises(type(stock_error.value), match="INVALID_GRAPH") as ours:
        ortops.InferenceSession(case.model, providers=CPU)
    assert str(ours.value) == str(stock_error.value)  # ONNX Runtime's own error ...
    notes = " ".join(getattr(ours.value, "__notes__", []))
    assert f"'{p.name}'" in notes and f"attribute {name} has type {got}" in notes  # ... and why


# -- placement inside subgraphs -----------------------------------------------------------------


def _gru_in_a_loop(x_source):
    """A Loop (1 trip) whose body runs a GRU on an X the body computes.

    x_source: "cast" (X = Cast(outer X as float64) to float32 in the body: its type is only
    known from shape inference of the body) or "unknown" (X from an op no schema knows, so
    only W, an initializer of the body, tells the element type).
    """
    rng = np.random.default_rng(26)
    W = rng.uniform(-1, 1, (1, 12, 3)).astype(np.float32)
    R = rng.uniform(-1, 1, (1, 12, 4)).astype(np.float32)
    if x_source == "cast":
        x_node = helper.make_node("Cast", ["X"], ["bX"], to=TensorProto.FLOAT)
        outer_x = TensorProto.DOUBLE
    else:
        x_node = helper.make_node("Mystery", ["X"], ["bX"], domain="example.unknown")
        outer_x = TensorProto.FLOAT
    body = helper.make_graph(
        [x_node, helper.make_node("GRU", ["bX", "bW", "bR"], ["bY", "bY_h"], name="gru_in_loop", hidden_size=4),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("bY_h", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(W, "bW"), numpy_helper.from_array(R, "bR")])
    loop = helper.make_node("Loop", ["trips", ""], ["hs"], name="loop", body=body)
    graph = helper.make_graph(
        [loop], "g", [helper.make_tensor_value_info("X", outer_x, [3, 2, 3])],
        [helper.make_tensor_value_info("hs", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(1, np.int64), "trips")])
    opsets = [helper.make_opsetid("", 14)]
    if x_source == "unknown":
        opsets.append(helper.make_opsetid("example.unknown", 1))
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


@pytest.mark.parametrize("x_source", ["cast", "unknown"])
def test_recurrent_node_in_a_loop_body_has_its_element_type(x_source):
    (p,) = placement(_gru_in_a_loop(x_source))
    assert (p.name, p.where, p.path) == ("gru_in_loop", "gpu", "Loop 'loop' body")
    assert p.dtype == "float32"
    assert "Loop 'loop' body / GRU 'gru_in_loop': GRU forward layout=0 hidden=4 float32 -> GPU" in p.describe()


def test_loop_body_gru_runs_like_stock_ort():
    model = _gru_in_a_loop("cast")
    feeds = {"X": np.random.default_rng(27).uniform(-1, 1, (3, 2, 3))}
    _assert_close(ortops.InferenceSession(model, providers=CPU).run(None, feeds), _stock(model, feeds))
