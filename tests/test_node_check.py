"""The core's node checker (src/core/placement/node_check.hpp) through ``ortops._vk.check_node``:
the one answer the execution provider (GetCapability, Compile), ``ortops.convert`` and the
placement report give for a recurrent node, each refusal worded once.

Checked on descriptions written here (what ortops/ort/placement.py's ``describe`` writes from
onnx, what src/ep/read.cpp writes from ONNX Runtime's graph API), with the device given as facts
(no Vulkan device is needed: tests/conftest.py's NO_DEVICE lists the module):

- a plain node is taken with the checked config (its device, mode, outputs, absent inputs);
- every kind of refusal gives the core's words: the operator version (from the core's
  vocabulary), the counts, an unknown attribute, an attribute of the wrong ONNX type, the
  element types, a missing input, no named output, no device, a device without NaN
  preservation, the storage binding (the core's Limits message), the layer's spec;
- a bad attribute value gives exactly the message the JSON decoder gives for the same value
  in a config (one validation function behind both);
- values ORT ignores (alpha past what the activations use, a clip of +inf) are dropped as ORT
  drops them;
- com.microsoft.DynamicQuantizeLSTM: taken with its weights described; the zero points ORT
  refuses, a non-constant or missing quantization input refused with the quantized rule's words;
- placement "auto": the cost model's reason, or the device keeping the node with the reason
  there is no cost model.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import AttributeProto, TensorProto

from ortops import _vk
from ortops.ort import policy
from ortops.ort.nodeconfig import NodeAttrs
from ortops.vocabulary import SUPPORTED_VERSIONS
from test_policy import _stub

UUID = "0123abcd-4567-89ef-0a1b-2c3d4e5f6a7b"
DEVICE = {"name": "test device", "uuid": UUID, "max_storage_buffer_range": 1 << 30, "nan_preserve_float32": True}
INT, FLOAT, STRING, FLOATS, INTS, STRINGS = (AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING,
                                             AttributeProto.FLOATS, AttributeProto.INTS, AttributeProto.STRINGS)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _const(name, a):
    a = np.ascontiguousarray(a)
    return {"name": name, "element": {np.float32: 1, np.float16: 10, np.int8: 3, np.uint8: 2}[a.dtype.type],
            "dims": list(a.shape), "constant": True, "data": a}


def _value(name, element, dims):
    return {"name": name, "element": element, "dims": dims, "constant": False}


def node(op="GRU", hidden=4, inp=3, dtype=np.float32, attrs=None, version=14, outputs=("Y", "Y_h")) -> dict:
    """A one-direction node: X [5, 2, inp] fed, W R B constant."""
    G = GATES[op]
    rng = np.random.default_rng(0)
    element = 10 if dtype == np.float16 else 1
    inputs = [_value("X", element, [5, 2, inp]), _const("W", rng.uniform(-1, 1, (1, G * hidden, inp)).astype(dtype)),
              _const("R", rng.uniform(-1, 1, (1, G * hidden, hidden)).astype(dtype)),
              _const("B", np.zeros((1, 2 * G * hidden), dtype))]
    attributes = [{"name": "hidden_size", "type": INT, "value": hidden}]
    for name, (t, v) in (attrs or {}).items():
        attributes = [a for a in attributes if a["name"] != name] + [{"name": name, "type": t, "value": v}]
    return {"name": "n", "op_type": op, "domain": "", "since_version": version, "inputs": inputs,
            "outputs": list(outputs), "attributes": attributes}


def check(n, **kw):
    kw.setdefault("mode", "deterministic")
    kw.setdefault("device", DEVICE)
    return _vk.check_node(n, **kw)


def refused(n, **kw) -> str:
    v = check(n, **kw)
    assert not v["taken"] and v["config"] is None and v["weights"] == ""
    return v["reason"]


def test_a_plain_node_is_taken_with_its_checked_config():
    v = check(node("LSTM", outputs=("Y", "", "Y_c")), mode="exact")
    assert v["taken"] and v["reason"] == "test device" and v["weights"] == "constant, uploaded once"
    assert v["constant"] and (v["dtype"], v["direction"], v["layout"], v["hidden_size"]) == ("float32", "forward", 0, 4)
    config = _vk.decode_node_config(v["config"])
    assert config["device"] == UUID and config["mode"] == "exact" and config["node"] == "n"
    assert config["outputs"] == ["Y", "Y_c"] and config["absent"] == ["sequence_lens", "initial_h", "initial_c", "P"]
    assert v["outputs"] == ("Y", "Y_c")
    # the outputs the door computes (Compile's fused node, convert's outputs the graph reads)
    assert _vk.decode_node_config(check(node(), computed=["Y_h"])["config"])["outputs"] == ["Y_h"]
    assert _vk.decode_node_config(check(node(), write_device=False)["config"])["device"] is None
    fed = node()
    fed["inputs"][2] = _value("R", 1, [1, 12, 4])
    assert check(fed)["weights"] == "inputs, compared each run"


def test_operator_versions_are_the_cores():
    supported = ", ".join(map(str, SUPPORTED_VERSIONS))
    for version in (1, 7, 13, 14, 22):
        v = check(node(version=version))
        if version in SUPPORTED_VERSIONS:
            assert v["taken"], v["reason"]
        else:
            assert v["reason"] == f"GRU-{version} is not one of the supported versions {supported}"


@pytest.mark.parametrize("n, reason", [
    (dict(attrs={"zoneout": (FLOAT, 0.1)}), "attribute zoneout is not an attribute of GRU"),
    (dict(attrs={"input_forget": (INT, 0)}), "attribute input_forget is not an attribute of GRU"),
    (dict(attrs={"hidden_size": (FLOAT, 4.0)}), "attribute hidden_size has type FLOAT, the GRU schema says INT"),
    (dict(attrs={"activations": (STRING, b"Tanh")}), "attribute activations has type STRING, the GRU schema says STRINGS"),
    (dict(attrs={"layout": (FLOATS, [0.0])}), "attribute layout has type FLOATS, the GRU schema says INT"),
    (dict(attrs={"direction": (INTS, [0])}), "attribute direction has type INTS, the GRU schema says STRING"),
    (dict(dtype=np.float16), None),
])
def test_attribute_names_and_types(n, reason):
    v = check(node(**n))
    assert v["taken"] if reason is None else v["reason"] == reason


def test_element_types_inputs_and_outputs():
    n = node()
    n["inputs"][0]["element"] = TensorProto.DOUBLE
    assert refused(n) == "X is float64; the GPU path takes float32 and float16"
    n["inputs"][0]["element"] = 0      # a type shape inference did not find: W's stands in
    assert check(n)["taken"] and check(n)["dtype"] == "float32"
    n["inputs"][1] = _value("W", 0, None)
    assert refused(n) == "X is of an unknown type; the GPU path takes float32 and float16"
    n = node()
    n["inputs"][3] = _const("B", np.zeros((1, 24), np.float16))
    assert refused(n) == "input B is float16, not float32"
    n = node()
    n["inputs"].append(_value("L", TensorProto.INT64, [2]))
    assert refused(n) == "input sequence_lens is int64, not int32"
    n = node()
    n["inputs"][2] = {"name": "", "element": 0, "dims": None, "constant": False}
    assert refused(n) == "input R is required and the node has none"
    assert refused(node(outputs=("", ""))) == "the node names no output"
    n = node(outputs=("Y", "Y_h", "Y_c"))
    assert refused(n) == "the node has 4 inputs and 3 outputs; GRU has at most 6 and 2"


def test_the_device():
    assert refused(node(), device=None, no_device="no Vulkan device matches 'x'") == "no Vulkan device matches 'x'"
    plain = dict(DEVICE, nan_preserve_float32=False)
    assert "cannot run ortops's kernels: it does not report shaderSignedZeroInfNanPreserveFloat32" in refused(
        node(), device=plain)
    small = dict(DEVICE, max_storage_buffer_range=100)
    # W [1, 12, 3] float32 is 144 bytes; in mode exact R is bound as float32 words too
    assert refused(node(), device=small) == ("GRU: unsupported layer on test device: W needs 144 bytes in one "
                                             "storage binding, above the device's maxStorageBufferRange of 100 bytes")
    assert refused(node(dtype=np.float16), device=dict(DEVICE, max_storage_buffer_range=96), mode="exact") == (
        "GRU: unsupported layer on test device: R needs 192 bytes in one storage binding, above the device's "
        "maxStorageBufferRange of 96 bytes")


def test_the_layers_spec_checks_the_weights_shapes():
    n = node()
    n["inputs"][1] = _const("W", np.zeros((1, 11, 3), np.float32))
    assert refused(n).startswith("GRU: W must have shape [1, 12, 3]")


BAD_VALUES = [  # attribute (ONNX type, value), the config's key and value for the same thing
    ("layout", INT, 2, "layout", 2),
    ("hidden_size", INT, -3, "hidden_size", -3),
    ("direction", STRING, b"sideways", "direction", "sideways"),
    ("clip", FLOAT, -1.0, "clip", -1.0),
    ("linear_before_reset", INT, 2, "linear_before_reset", 2),
    ("activations", STRINGS, [b"Sigmoid", b"Gelu"], "activations", ["Sigmoid", "Gelu"]),
    ("activation_alpha", FLOATS, [0.5] * 70, "activation_alpha", None),
]


@pytest.mark.parametrize("name, t, value, key, config_value", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_a_bad_value_gives_the_json_decoders_message(name, t, value, key, config_value):
    v = check(node(attrs={name: (t, value)}))
    if config_value is None:   # 70 alpha values the default activations never read: ORT ignores them
        assert v["taken"] and _vk.decode_node_config(v["config"])["attrs"]["activation_alpha"] == []
        return
    assert not v["taken"]
    good = json.loads(check(node())["config"])
    good["attrs"][key] = config_value
    with pytest.raises(ValueError) as decoded:
        _vk.decode_node_config(json.dumps(good))
    assert v["reason"] == str(decoded.value)


def test_values_ort_ignores_are_dropped():
    n = node(attrs={"activations": (STRINGS, [b"LeakyRelu", b"Tanh"]), "activation_alpha": (FLOATS, [0.5, 7.0, 9.0]),
                    "clip": (FLOAT, float("inf"))})
    attrs = _vk.decode_node_config(check(n)["config"])["attrs"]
    assert attrs["activation_alpha"] == [0.5] and attrs["clip"] is None
    assert refused(node(attrs={"clip": (FLOAT, float("nan"))})).endswith("attrs.clip must be a finite float32 "
                                                                          "value, got nan")


def _quantized(per_channel=True, zero=0, constant=True) -> dict:
    hidden, inp = 3, 2
    rng = np.random.default_rng(1)
    shape = (1, 4 * hidden) if per_channel else (1,)
    inputs = [_value("X", 1, [4, 2, inp]), _const("Wq", rng.integers(-9, 9, (1, inp, 4 * hidden)).astype(np.int8)),
              _const("Rq", rng.integers(-9, 9, (1, hidden, 4 * hidden)).astype(np.int8))] + \
        [{"name": "", "element": 0, "dims": None, "constant": False}] * 5 + \
        [_const("Ws", np.full(shape, 0.1, np.float32)), _const("Wz", np.full(shape, zero, np.int8)),
         _const("Rs", np.full(shape, 0.1, np.float32)), _const("Rz", np.zeros(shape, np.int8))]
    if not constant:
        inputs[10] = _value("Rs", 1, list(shape))
    return {"name": "q", "op_type": "DynamicQuantizeLSTM", "domain": "com.microsoft", "since_version": 1,
            "inputs": inputs, "outputs": ["Y"], "attributes": [{"name": "hidden_size", "type": INT, "value": hidden}]}


def test_dynamic_quantize_lstm():
    v = check(_quantized())
    assert v["taken"] and v["weights"] == "int8 per-channel, dequantized to float32 and uploaded once"
    assert _vk.decode_node_config(v["config"])["op"] == "LSTM"
    assert refused(_quantized(zero=3)) == ("DynamicQuantizeLSTM: W_zero_point: expected per-channel int8 zero "
                                           "points all 0 (ONNX Runtime's kernel refuses others), got [3]")
    assert refused(_quantized(constant=False)) == ("DynamicQuantizeLSTM: R_scale 'Rs' not constant (the device "
                                                   "path dequantizes constant weights once)")
    n = _quantized()
    n["inputs"] = n["inputs"][:9]
    assert refused(n) == ("DynamicQuantizeLSTM without W_zero_point, R_scale, R_zero_point (ONNX Runtime's own "
                          "kernel reports it)")
    assert check(_quantized(per_channel=False, zero=5))["taken"]


def test_placement_auto_takes_the_cost_models_reason():
    cal = _stub()
    big = node(hidden=128, inp=64)
    big["inputs"][0]["dims"] = [50, 4, 64]
    small = node("RNN", hidden=8, inp=8)
    small["inputs"][0]["dims"] = [1, 1, 8]
    sides = (cal.device.astuple(), cal.cpu.astuple())
    for n, op, x, w in ((big, "GRU", [50, 4, 64], [1, 384, 64]), (small, "RNN", [1, 1, 8], [1, 8, 8])):
        gpu, why = policy.choose(op, NodeAttrs(hidden_size=n["attributes"][0]["value"]), x, w, None, cal)
        v = check(n, placement="auto", calibration=sides)
        assert v["taken"] == gpu and v["reason"] == (f"test device; {why}" if gpu else why)
    v = check(small, placement="auto", cost_problem="no cost model (timer broken)")
    assert v["taken"] and v["reason"] == "test device; no cost model (timer broken)"


def test_dequantize_lstm_weight_is_the_formula():
    q = np.arange(-6, 6, dtype=np.int8).reshape(1, 3, 4)
    scale, zero = np.array([0.5], np.float32), np.array([2], np.int8)
    got = _vk.dequantize_lstm_weight("W", q, scale, zero)
    want = ((q.astype(np.float64) - 2) * 0.5).astype(np.float32).transpose(0, 2, 1)
    assert got.dtype == np.float32 and got.shape == (1, 4, 3)
    np.testing.assert_array_equal(got, want)
