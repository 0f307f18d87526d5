"""com.microsoft.DynamicQuantizeLSTM on the device (ortops.ort.quantized) and the rule that judges it
(ortops.compare.quantized_problems): models from onnxruntime's quantize_dynamic and hand-built
nodes (uint8 and int8, non-zero zero points, per tensor and per channel, sequence_lens, initial
states, peepholes, every direction), each against the float64 reference of its dequantized
weights, ONNX Runtime CPU's quantized kernel and the float model it came from."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortops
from ortops import reference
from ortops.compare import QUANTIZATION_BOUND, quantized_problems, scaled_error
from ortops.ort import quantized

OPSET = 17
ORT_LOG_ERROR = 3


def _init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def _model(nodes, inputs, outputs, inits, ms=False):
    graph = helper.make_graph(nodes, "q", inputs, outputs, inits)
    ops = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(quantized.DOMAIN, 1)] if ms else [])
    m = helper.make_model(graph, opset_imports=ops)
    m.ir_version = 8
    return m


def _quantize(w, dtype, per_channel):
    """(q [dirs, cols, 4H], scale, zero point) of an ai.onnx weight [dirs, 4H, cols] as ORT's
    kernel admits them: per tensor asymmetric (a zero point per direction, not 0); per channel
    int8 symmetric (zero points 0), uint8 with one zero point (131, not the middle)."""
    wt = w.astype(np.float64).transpose(0, 2, 1)
    axes = (1,) if per_channel else (1, 2)
    lo, hi = np.minimum(wt.min(axis=axes), 0), np.maximum(wt.max(axis=axes), 0)
    info = np.iinfo(dtype)
    if not per_channel:
        scale = ((hi - lo) / (info.max - info.min)).astype(np.float32)
        zp = np.clip(np.round(info.min - lo / scale), info.min, info.max).astype(dtype)
    elif dtype == np.int8:
        scale = (np.maximum(-lo, hi) / 127).astype(np.float32)
        zp = np.zeros(scale.shape, dtype)
    else:
        scale = np.maximum(-lo / 131, hi / 124).astype(np.float32)
        zp = np.full(scale.shape, 131, dtype)
    b = (w.shape[0], 1, -1) if per_channel else (w.shape[0], 1, 1)
    q = np.clip(np.round(wt / scale.reshape(b)) + zp.reshape(b), info.min, info.max).astype(dtype)
    return q, scale, zp


def _dequantized(q, scale, zp):
    """The ai.onnx weight of a quantized one, computed here independently of ortops."""
    b = (q.shape[0], 1, -1) if scale.ndim == 2 else (q.shape[0], 1, 1)
    return ((q.astype(np.float64) - zp.astype(np.float64).reshape(b)) * scale.astype(np.float64).reshape(b)) \
        .astype(np.float32).transpose(0, 2, 1)


CASES = {
    # name: (direction, dtype, per_channel, sequence_lens, initial states, peepholes)
    "uint8_tensor": ("forward", np.uint8, False, False, False, False),
    "uint8_channel_lens_states": ("forward", np.uint8, True, True, True, False),
    "int8_channel_bidirectional": ("bidirectional", np.int8, True, True, True, True),
    "int8_tensor_reverse_peepholes": ("reverse", np.int8, False, False, True, True),
}


def _hand_built(direction, dtype, per_channel, lens, states, peepholes, rng, seq=7, batch=3, inp=5, hidden=6):
    """(float model, quantized model, feeds, float weights) of one LSTM node."""
    dirs = 2 if direction == "bidirectional" else 1
    bound = 1 / np.sqrt(hidden)
    W = rng.uniform(-bound, bound, (dirs, 4 * hidden, inp)).astype(np.float32)
    R = rng.uniform(-bound, bound, (dirs, 4 * hidden, hidden)).astype(np.float32)
    B = rng.uniform(-bound, bound, (dirs, 8 * hidden)).astype(np.float32)
    P = rng.uniform(-bound, bound, (dirs, 3 * hidden)).astype(np.float32) if peepholes else None
    feeds = {"X": rng.uniform(-1, 1, (seq, batch, inp)).astype(np.float32)}
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [seq, batch, inp])]
    slots = {"B": "B", "sequence_lens": "", "initial_h": "", "initial_c": "", "P": "P" if peepholes else ""}
    if lens:
        feeds["lens"] = rng.integers(1, seq + 1, batch).astype(np.int32)
        ins.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [batch]))
        slots["sequence_lens"] = "lens"
    if states:
        for s in ("h0", "c0"):
            feeds[s] = rng.uniform(-1, 1, (dirs, batch, hidden)).astype(np.float32)
            ins.append(helper.make_tensor_value_info(s, TensorProto.FLOAT, [dirs, batch, hidden]))
        slots["initial_h"], slots["initial_c"] = "h0", "c0"
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("Y", "Y_h", "Y_c")]
    attrs = dict(hidden_size=hidden, direction=direction)
    common = [_init("B", B)] + ([_init("P", P)] if peepholes else [])
    rest = [slots[n] for n in ("B", "sequence_lens", "initial_h", "initial_c", "P")]
    fl = helper.make_node("LSTM", ["X", "W", "R"] + rest, ["Y", "Y_h", "Y_c"], name="lstm", **attrs)
    float_model = _model([fl], ins, outs, common + [_init("W", W), _init("R", R)])
    qW, qR = _quantize(W, dtype, per_channel), _quantize(R, dtype, per_channel)
    q_inits = [_init("Wq", qW[0]), _init("Ws", qW[1]), _init("Wz", qW[2]),
               _init("Rq", qR[0]), _init("Rs", qR[1]), _init("Rz", qR[2])]
    qn = helper.make_node(quantized.OP, ["X", "Wq", "Rq"] + rest + ["Ws", "Wz", "Rs", "Rz"], ["Y", "Y_h", "Y_c"],
                          name="lstm_quant", domain=quantized.DOMAIN, **attrs)
    q_model = _model([qn], ins, outs, common + q_inits, ms=True)
    reference_args = dict(W=_dequantized(*qW), R=_dequantized(*qR), B=B, P=P, sequence_lens=feeds.get("lens"),
                          initial_h=feeds.get("h0"), initial_c=feeds.get("c0"), **attrs)
    return float_model, q_model, feeds, reference_args


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = ORT_LOG_ERROR
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _judge(q_model, float_model, feeds, ref_args):
    """ortops' outputs of ``q_model`` judged by the rule against the float64 reference of the
    dequantized weights, ORT CPU's quantized kernel and the float model; returns the figures."""
    with ortops.InferenceSession(q_model, providers=["CPUExecutionProvider"], require_gpu=True) as s:
        assert all(p.op == quantized.OP and p.where == "gpu" for p in s.placement)
        got = s.run(None, feeds)
    exact = reference.lstm(feeds["X"], **ref_args)
    ort_q, ort_f = _ort(q_model, feeds), _ort(float_model, feeds)
    figures = []
    for name, g, e, q, f in zip(("Y", "Y_h", "Y_c"), got, exact, ort_q, ort_f):
        assert quantized_problems(g, e, q, f) == [], name
        figures.append((scaled_error(q, f), scaled_error(g, f), scaled_error(g, q)))
    return figures


@pytest.mark.parametrize("case", sorted(CASES))
def test_hand_built_node_matches_its_dequantized_reference_and_ort(case):
    float_model, q_model, feeds, ref_args = _hand_built(*CASES[case], np.random.default_rng(len(case)))
    _judge(q_model, float_model, feeds, ref_args)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_quantize_dynamic_model_runs_on_the_device(tmp_path, per_channel):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(3)
    float_model, _, feeds, _ = _hand_built("bidirectional", np.int8, per_channel, True, True, False, rng,
                                           seq=9, batch=2, inp=16, hidden=24)
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(float_model, str(src))
    quantize_dynamic(str(src), str(dst), per_channel=per_channel, weight_type=QuantType.QInt8)
    q_model = onnx.load(str(dst))
    node = next(n for n in q_model.graph.node if quantized.is_quantized(n))
    consts = {t.name: numpy_helper.to_array(t) for t in q_model.graph.initializer}
    q, s, z = (consts[node.input[i]] for i in (1, 8, 9))
    assert q.dtype == np.int8 and s.ndim == (2 if per_channel else 1)
    W = _dequantized(q, s, z)
    R = _dequantized(*(consts[node.input[i]] for i in (2, 10, 11)))
    B = consts[node.input[3]]
    ref_args = dict(W=W, R=R, B=B, sequence_lens=feeds["lens"], initial_h=feeds["h0"], initial_c=feeds["c0"],
                    hidden_size=24, direction="bidirectional")
    _judge(q_model, float_model, feeds, ref_args)


def test_dequantize_is_the_formula_in_ai_onnx_layout():
    rng = np.random.default_rng(5)
    W = rng.uniform(-1, 1, (2, 8, 3)).astype(np.float32)
    for dtype in (np.int8, np.uint8):
        for per_channel in (False, True):
            q, s, z = _quantize(W, dtype, per_channel)
            assert z.any() or (per_channel and dtype == np.int8)   # non-zero where ORT admits them
            got = quantized.dequantize("W", q, s, z)
            np.testing.assert_array_equal(got, _dequantized(q, s, z))
            assert got.shape == W.shape and np.abs(got - W).max() <= s.max()


@pytest.mark.parametrize("args, message", [
    ((np.zeros((1, 3, 8), np.int16), np.ones(1, np.float32), np.zeros(1, np.int16)),
     "DynamicQuantizeLSTM: W: expected an int8 or uint8 tensor [num_directions, rows, 4*hidden], got int16 [1, 3, 8]"),
    ((np.zeros((1, 3, 8), np.int8), np.ones(8, np.float32), np.zeros(8, np.int8)),
     "DynamicQuantizeLSTM: W_scale: expected float32 [1] (per tensor) or [1, 8] (per channel), got float32 [8]"),
    ((np.zeros((1, 3, 8), np.int8), np.ones(1, np.float32), np.zeros(1, np.uint8)),
     "DynamicQuantizeLSTM: W_zero_point: expected int8 [1] (the type of W, the shape of W_scale), got uint8 [1]"),
    ((np.zeros((1, 3, 8), np.int8), np.full(1, np.inf, np.float32), np.zeros(1, np.int8)),
     "DynamicQuantizeLSTM: W_scale: expected finite scales, got [inf]"),
])
def test_dequantize_errors_name_operator_argument_expected_got(args, message):
    with pytest.raises(ValueError) as e:
        quantized.dequantize("W", *args)
    assert str(e.value) == message


def test_zero_points_ort_refuses_stay_on_ort_with_the_reason():
    """Per-channel int8 zero points that are not 0: ORT's kernel refuses them at run time, and
    ortops leaves the node to it (the model fails as in stock ORT, the reason in the report)."""
    _, q_model, feeds, _ = _hand_built("forward", np.int8, True, False, False, False, np.random.default_rng(11))
    for t in q_model.graph.initializer:
        if t.name == "Wz":
            t.CopyFrom(_init("Wz", np.full(list(t.dims), 3, np.int8)))
    with ortops.InferenceSession(q_model, providers=["CPUExecutionProvider"]) as s:
        (p,) = s.placement
        assert (p.op, p.where) == (quantized.OP, "cpu")
        assert p.reason == ("DynamicQuantizeLSTM: W_zero_point: expected per-channel int8 zero points all 0 "
                            "(ONNX Runtime's kernel refuses others), got [3]")
        with pytest.raises(Exception, match="zero point must be zero"):
            s.run(None, feeds)


def _misread(q, s, z, how):
    """A wrong reading of a quantized weight (what the rule must catch)."""
    if how == "zero point ignored":
        return _dequantized(q, s, np.zeros_like(z))
    if how == "not transposed":
        return np.ascontiguousarray(_dequantized(q, s, z).transpose(0, 2, 1)).reshape(
            q.shape[0], q.shape[2], q.shape[1])   # ORT's layout taken for ai.onnx's
    return _dequantized(q[:, ::-1], s, z)   # rows reversed


@pytest.mark.parametrize("how", ["zero point ignored", "not transposed", "rows reversed"])
def test_rule_catches_weights_read_otherwise_than_ort(how):
    """The rule without the float model (``ortops run --compare``): a dequantized model that reads
    the weights otherwise than ORT's kernel is far beyond QUANTIZATION_BOUND from ORT's result,
    while the right reading is within it. Device-free: ORT CPU runs the dequantized models."""
    float_model, q_model, feeds, ref_args = _hand_built("forward", np.uint8, True, False, False, False,
                                                        np.random.default_rng(7), seq=6, batch=2, inp=6, hidden=6)
    ort_q = _ort(q_model, feeds)
    right = _ort(quantized.dequantized_model(q_model), feeds)
    consts = {t.name: numpy_helper.to_array(t) for t in q_model.graph.initializer}
    W = _misread(consts["Wq"], consts["Ws"], consts["Wz"], how)
    wrong = reference.lstm(feeds["X"], **{**ref_args, "W": W})
    for r, w, q in zip(right, wrong, ort_q):
        assert quantized_problems(r, r, q) == []
        assert scaled_error(q, r) <= QUANTIZATION_BOUND
        problems = quantized_problems(w, w, q)
        assert problems and "not read as ONNX Runtime reads them" in problems[0]
        assert scaled_error(q, w) > 0.1


def test_dequantized_model_is_the_float_model_ortops_computes():
    float_model, q_model, feeds, ref_args = _hand_built("bidirectional", np.int8, False, True, True, True,
                                                        np.random.default_rng(8))
    dq = quantized.dequantized_model(q_model)
    assert [n.op_type for n in dq.graph.node] == ["LSTM"]
    assert {t.name for t in dq.graph.initializer} == {"B", "P", "Wq__dequantized", "Rq__dequantized"}
    for got, exact in zip(_ort(dq, feeds), reference.lstm(feeds["X"], **ref_args)):
        assert scaled_error(got, exact) <= 1e-5
    kept = quantized.dequantized_model(q_model, which=[False])
    assert [n.op_type for n in kept.graph.node] == [quantized.OP]


def test_weights_not_constant_stay_on_ort_with_the_reason():
    float_model, q_model, feeds, _ = _hand_built("forward", np.int8, False, False, False, False,
                                                 np.random.default_rng(9))
    # Rs becomes a graph input: the weights cannot be dequantized once
    rs = next(t for t in q_model.graph.initializer if t.name == "Rs")
    q_model.graph.input.append(helper.make_tensor_value_info("Rs", TensorProto.FLOAT, list(rs.dims)))
    with ortops.InferenceSession(q_model, providers=["CPUExecutionProvider"]) as s:
        (p,) = s.placement
        assert (p.op, p.where) == (quantized.OP, "cpu")
        assert "R_scale 'Rs' not constant" in p.reason
        got = s.run(None, feeds)
    for g, e in zip(got, _ort(q_model, feeds)):
        np.testing.assert_array_equal(g, e)   # ORT's own kernel ran it


def test_converted_quantized_model_runs_in_a_plain_session():
    float_model, q_model, feeds, ref_args = _hand_built("forward", np.uint8, True, True, True, False,
                                                        np.random.default_rng(10))
    converted = ortops.convert(q_model)
    assert [n.domain for n in converted.graph.node if n.op_type.startswith("LSTM")] == ["ortops"]
    assert not any(t.data_type in (TensorProto.INT8, TensorProto.UINT8) for t in converted.graph.initializer)
    sess = ort.InferenceSession(converted.SerializeToString(), ortops.register(),
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    got = dict(zip(names, sess.run(None, feeds)))
    for name, exact in zip(("Y", "Y_h", "Y_c"), reference.lstm(feeds["X"], **ref_args)):
        assert scaled_error(got[name], exact) <= 1e-5, name
