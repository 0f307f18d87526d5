"""The native node-config decoder (src/core/config/nodeconfig.cpp, json.cpp, activations.cpp) through
``ortops._vk.decode_node_config`` / ``encode_node_config`` / ``resolve_activations``.

A model is untrusted input and the native custom-op library decodes each node's ``config``
with this decoder: every config that is not exactly v4 (src/core/config/nodeconfig.hpp) must be a
ValueError whose message starts "ortops node config: " and names the node once its name was
read; a valid config must decode to its dict and encode back to exactly what Python's
``json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=False)`` writes. No Vulkan
device is needed (the module is listed in tests/conftest.py's NO_DEVICE). The seed corpus of
the libFuzzer target (tests/fuzz/corpus/nodeconfig, tests/fuzz/make_corpus.py) is read here
too; test_mutations_only_ever_raise_value_error is the in-process fuzz smoke test.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import pathlib
import random
import struct

import pytest

from ortops import _vk
from ortops.activations import resolve_activations as py_resolve

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "fuzz" / "corpus" / "nodeconfig"
REGRESSIONS = HERE / "fuzz" / "regressions"
PREFIX = "ortops node config: "
UUID = "0123abcd-4567-89ef-0a1b-2c3d4e5f6a7b"

decode = _vk.decode_node_config
encode = _vk.encode_node_config

OPS = {
    "LSTM": (("B", "sequence_lens", "initial_h", "initial_c", "P"), ("Y", "Y_h", "Y_c"), 3),
    "GRU": (("B", "sequence_lens", "initial_h"), ("Y", "Y_h"), 2),
    "RNN": (("B", "sequence_lens", "initial_h"), ("Y", "Y_h"), 1),
}


def config(op="LSTM", node="lstm_7", **attrs) -> dict:
    top = {k: attrs.pop(k) for k in ("dtype", "absent", "outputs", "device", "mode") if k in attrs}
    a = {"hidden_size": 16, "direction": "forward", "layout": 0, "activations": None,
         "activation_alpha": None, "activation_beta": None, "clip": None, "input_forget": 0,
         "linear_before_reset": 0}
    a.update(attrs)
    d = {"v": 4, "node": node, "op": op, "dtype": "float32", "attrs": a, "absent": [],
         "outputs": list(OPS[op][1]), "device": None, "mode": "deterministic"}
    d.update(top)
    return d


def dumps(d) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=False)


def refused(data, *fragments: str, node: str | None = "lstm_7") -> str:
    """Decode ``data``, which must be refused; the message must hold every fragment and name
    ``node`` (None: must not name a node). Returns the message."""
    with pytest.raises(ValueError) as info:
        decode(data)
    message = str(info.value)
    assert message.startswith(PREFIX), message
    for f in fragments:
        assert f in message, (f, message)
    if node is None:
        assert not message.startswith(PREFIX + "node '"), message
    else:
        assert message.startswith(f"{PREFIX}node '{node}': "), message
    assert message.isascii() and message.isprintable(), message
    return message


def test_module_exposes_the_version_and_the_limit():
    assert _vk.NODE_CONFIG_VERSION == 4
    assert _vk.NODE_CONFIG_MAX_BYTES == 64 * 1024


# ------------------------------------------------------------------ valid configs, round trips


def _valid_configs():
    for op, dtype, direction, mode in itertools.product(OPS, ("float32", "float16"),
                                                        ("forward", "reverse", "bidirectional"),
                                                        ("deterministic", "exact", "fast")):
        optional, outputs, _ = OPS[op]
        for i, (hidden, layout, device) in enumerate(((16, 0, None), (None, 1, UUID), (1 << 20, 0, None))):
            yield config(op, node=f"{op}/{dtype}/{direction}/{mode}/{i}", dtype=dtype, mode=mode,
                         direction=direction, hidden_size=hidden, layout=layout, device=device,
                         absent=list(optional[i:]), outputs=list(outputs[i % len(outputs):]))


def test_every_op_dtype_direction_mode_decodes_and_encodes_as_python_json():
    n = 0
    for d in _valid_configs():
        text = dumps(d)
        assert decode(text) == d
        assert decode(text.encode()) == d
        assert encode(d) == text
        n += 1
    assert n == 3 * 2 * 3 * 3 * 3


def test_corpus_ok_files_decode_to_their_json_and_encode_back_byte_for_byte():
    files = sorted(CORPUS.glob("ok-*"))
    assert len(files) >= 60
    for p in files:
        data = p.read_bytes()
        d = decode(data)
        assert d == json.loads(data), p.name
        assert encode(d).encode() == data, p.name


def test_corpus_bad_files_are_refused():
    files = sorted(CORPUS.glob("bad-*"))
    assert len(files) >= 80
    for p in files:
        with pytest.raises(ValueError, match="^ortops node config: "):
            decode(p.read_bytes())


def test_regressions_do_not_crash_and_decode_or_raise_value_error():
    for p in sorted(REGRESSIONS.iterdir()):
        if p.name.startswith("."):
            continue
        try:
            d = decode(p.read_bytes())
        except ValueError as e:
            assert str(e).startswith(PREFIX)
        else:
            assert decode(encode(d)) == d


def test_whitespace_and_key_order_are_accepted_and_encoding_is_canonical():
    d = config(clip=2.5, activation_alpha=[1.0, 0.5], activations=["Affine", "Tanh", "Tanh"])
    pretty = json.dumps(d, indent=4)          # insertion order, spaces, newlines
    assert decode(pretty) == d
    assert encode(decode(pretty)) == dumps(d)


def test_integers_in_parameter_lists_become_floats():
    d = config(activations=["Affine", "Tanh", "Tanh"], activation_alpha=[2], clip=3)
    out = decode(dumps(d))
    assert out["attrs"]["activation_alpha"] == [2.0] and isinstance(out["attrs"]["activation_alpha"][0], float)
    assert out["attrs"]["clip"] == 3.0 and isinstance(out["attrs"]["clip"], float)
    assert '"activation_alpha":[2.0]' in encode(out) and '"clip":3.0' in encode(out)


def _random_doubles(rng: random.Random, n: int):
    """Doubles a config may hold (finite, inside float32's range): float32 values, random bit
    patterns, decimal-looking values, integral values, powers of ten around the repr switch."""
    out = [0.0, -0.0, 1.0, 100.0, 0.1, 1e-05, 0.0001, 1e16, 1e15, 9999999999999998.0, 1e-7, 1.5e-7,
           123456789.0, 2.0 ** 53, 2.0 ** 53 + 2, 3.4028234663852886e38, 1.401298464324817e-45]
    while len(out) < n:
        kind = rng.randrange(5)
        if kind == 0:
            x = struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0]
        elif kind == 1:
            x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        elif kind == 2:
            x = round(rng.uniform(-1000, 1000), rng.randrange(0, 8))
        elif kind == 3:
            x = float(rng.randrange(-10 ** rng.randrange(1, 20), 10 ** rng.randrange(1, 20)))
        else:
            x = rng.choice((1.0, -3.0, 7.0, 1.25)) * 10.0 ** rng.randrange(-40, 38)
        if math.isfinite(x) and abs(x) < 3.4e38:
            out.append(x)
    return out


def test_floats_are_written_as_pythons_repr():
    rng = random.Random(20261201)
    values = _random_doubles(rng, 20000)
    for i in range(0, len(values), 64):
        chunk = values[i:i + 64]
        d = config(activation_alpha=chunk, activation_beta=chunk[::-1])
        assert encode(d) == dumps(d), chunk
        back = decode(dumps(d))["attrs"]["activation_alpha"]
        assert [struct.pack("<d", x) for x in back] == [struct.pack("<d", x) for x in chunk]
    for x in values[:2000]:
        if x > 0 and abs(x) >= 1.401298464324817e-45:
            d = config(clip=x)
            assert encode(d) == dumps(d)


def test_node_names_round_trip_whatever_they_hold():
    for name in ("", "a", 'q"uo\\te/s', "\x00\x01\x1f\x7f", "\u00e9\u4e2d\U0001f600\u202e", "n" * 4096,
                 "\ud7ff\ue000\uffff\U0010ffff"):
        d = config(node=name)
        assert decode(dumps(d)) == d
        assert decode(json.dumps(d, ensure_ascii=False).encode()) == d   # raw UTF-8 too
        assert encode(d) == dumps(d)


# ------------------------------------------------------------------ bytes, UTF-8, JSON


@pytest.mark.parametrize("raw,what", [
    (b"\xff", "invalid UTF-8"),
    (b"\x80", "continuation byte"),
    (b"\xc0\xaf", "overlong"),
    (b"\xc1\xbf", "overlong"),
    (b"\xe0\x80\xaf", "overlong"),
    (b"\xf0\x80\x80\xaf", "overlong"),
    (b"\xed\xa0\x80", "surrogate"),
    (b"\xed\xbf\xbf", "surrogate"),
    (b"\xf4\x90\x80\x80", "above U+10FFFF"),
    (b"\xf5\x80\x80\x80", "above U+10FFFF"),
    (b"\xc3", "truncated"),
    (b"\xe4\xb8", "truncated"),
    (b"\xf0\x9f\x98", "truncated"),
    (b"\xe4\x41\x41", "truncated"),
])
def test_invalid_utf8_is_refused_with_its_offset(raw, what):
    text = dumps(config()).encode()
    at = text.index(b'"node":"') + len(b'"node":"') + 2
    data = text[:at] + raw + text[at:]
    # "node" is read only after absent/attrs/device/dtype/mode; a break inside it names no node.
    message = refused(data, "not valid JSON: invalid UTF-8", what, f"at byte {at}", node=None)
    assert message.endswith(f"at byte {at}")


def test_invalid_utf8_after_the_name_names_the_node():
    text = dumps(config()).encode()
    at = text.index(b'"op":"') + len(b'"op":"')
    refused(text[:at] + b"\xc0\xaf" + text[at:], "invalid UTF-8 (overlong encoding)", f"at byte {at}")


def test_a_str_with_a_lone_surrogate_is_a_value_error():
    refused(dumps(config(node="x")).replace("x", "\ud800"), "lone UTF-16 surrogate", node=None)


def test_decode_takes_bytes_bytearray_and_str_and_nothing_else():
    text = dumps(config())
    assert decode(text) == decode(text.encode()) == decode(bytearray(text.encode()))
    with pytest.raises(TypeError):
        decode(12)
    with pytest.raises(TypeError):
        decode(None)


@pytest.mark.parametrize("edit,fragment", [
    (lambda t: t + "x", "trailing data"),
    (lambda t: t + " \n\t", None),                            # trailing whitespace is fine
    (lambda t: "\ufeff" + t, "byte order mark"),
    (lambda t: t[:-1], "unexpected end of input"),
    (lambda t: t.replace('"hidden_size":16', '"hidden_size":016'), "leading zero"),
    (lambda t: t.replace('"hidden_size":16', '"hidden_size":+16'), "may not start with '+'"),
    (lambda t: t.replace('"hidden_size":16', '"hidden_size":.5'), "may not start with '.'"),
    (lambda t: t.replace('"hidden_size":16', '"hidden_size":16.'), "'.' not followed by a digit"),
    (lambda t: t.replace('"hidden_size":16', '"hidden_size":1e'), "exponent without digits"),
    (lambda t: t.replace('"hidden_size":16', '"hidden_size":-'), "'-' not followed by a digit"),
    (lambda t: t.replace('"hidden_size":16', '"hidden_size":99999999999999999999'), "outside int64"),
    (lambda t: t.replace('"clip":null', '"clip":1e999'), "overflows a double"),
    (lambda t: t.replace('"clip":null', '"clip":1e-999'), "underflows to zero"),
    (lambda t: t.replace('"clip":null', '"clip":NaN'), "NaN is not JSON"),
    (lambda t: t.replace('"clip":null', '"clip":Infinity'), "Infinity is not JSON"),
    (lambda t: t.replace('"clip":null', '"clip":-Infinity'), "'-' not followed by a digit"),
    (lambda t: t.replace('"clip":null', '"clip":nul'), "expected a value"),
    (lambda t: t.replace('"clip":null', '"clip":None'), "expected a value"),
    (lambda t: t.replace('"clip":null', "'clip':null"), "expected a key"),
    (lambda t: t.replace(',"clip":null', ',"clip":null,'), "expected a key"),
    (lambda t: t.replace('"absent":[]', '"absent":[,]'), "expected a value"),
    (lambda t: t.replace('"absent":[]', '"absent":["B",]'), "expected a value"),
    (lambda t: t.replace('"node":"lstm_7"', '"node":"lstm_7\\q"'), "invalid escape \\q"),
    (lambda t: t.replace('"node":"lstm_7"', '"node":"lstm_7\\u12"'), "four hex digits"),
    (lambda t: t.replace('"node":"lstm_7"', '"node":"lstm_7\\udc00"'), "lone low surrogate"),
    (lambda t: t.replace('"node":"lstm_7"', '"node":"lstm_7\\ud800\\u0041"'), "not followed by a low surrogate"),
    (lambda t: t.replace('"node":"lstm_7"', '"node":"lstm_7\x01"'), "control character"),
    (lambda t: t.replace('"node":"lstm_7"', '"node":"lstm_7\t"'), "control character"),
    (lambda t: t.replace('"node":"lstm_7"', '"node":"lstm_7'), "expected ',' or '}'"),
    (lambda t: t.replace('"activations":null', '"activations":' + "[" * 14 + "]" * 14), "activations[0] must be a string"),
    (lambda t: t.replace('"activations":null', '"activations":' + "[" * 15 + "]" * 15), "nesting deeper than 16"),
    (lambda t: t.replace('"activations":null', '"activations":' + "[" * 10000), "nesting deeper than 16"),
    (lambda t: t.replace('"mode":"deterministic"', '"mode":"deterministic","mode":"deterministic"'), "duplicate key \"mode\""),
    (lambda t: t.replace('"clip":null', '"clip":null,"clip":null'), "duplicate key \"clip\""),
    (lambda t: "[" + t + "]", "must be a JSON object, got a list of 1"),
    (lambda t: "null", "must be a JSON object, got null"),
    (lambda t: "", "empty input"),
    (lambda t: "   ", "empty input"),
])
def test_bad_json_is_refused(edit, fragment):
    text = edit(dumps(config()))
    if fragment is None:
        assert decode(text) == config()
        return
    with pytest.raises(ValueError) as info:
        decode(text)
    message = str(info.value)
    assert message.startswith(PREFIX) and fragment in message, message
    assert message.isascii() and message.isprintable(), message


def test_size_limit_is_64_kib():
    text = dumps(config())
    limit = _vk.NODE_CONFIG_MAX_BYTES
    assert decode(text + " " * (limit - len(text))) == config()
    refused(text + " " * (limit - len(text) + 1), "65537 bytes, more than the limit of 65536", node=None)
    refused(dumps(config(node="n" * 70000)), "more than the limit", node=None)


# ------------------------------------------------------------------ keys at both levels


TOP = ("absent", "attrs", "device", "dtype", "mode", "node", "op", "outputs", "v")
ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
         "input_forget", "layout", "linear_before_reset")


@pytest.mark.parametrize("key", TOP)
def test_every_missing_top_level_key_is_named(key):
    d = config()
    del d[key]
    if key == "v":
        refused(dumps(d), "lacks the version 'v'")
    elif key == "node":
        refused(dumps(d), "the config lacks the key 'node'", node=None)
    else:
        refused(dumps(d), f"the config lacks the key '{key}'")


@pytest.mark.parametrize("key", ATTRS)
def test_every_missing_attribute_key_is_named(key):
    d = config()
    del d["attrs"][key]
    refused(dumps(d), f"attrs lacks the key '{key}'")


@pytest.mark.parametrize("key", ["key", "weights", "gate", "V", "nodes", "", "x" * 300, "\u00e9"])
def test_unknown_keys_are_named_at_both_levels(key):
    d = config()
    d[key] = None
    refused(dumps(d), "the config has the unknown key")
    d = config()
    d["attrs"][key] = 0
    refused(dumps(d), "attrs has the unknown key")


@pytest.mark.parametrize("key", TOP + tuple("attrs." + k for k in ATTRS))
def test_a_duplicate_key_is_refused_even_with_the_same_value(key):
    text = dumps(config())
    name = key.rpartition(".")[2]
    start = text.index(f'"{name}":')
    # the member's text: up to the next top/attrs-level comma or brace
    d = config()
    value = d["attrs"][name] if key.startswith("attrs.") else d[name]
    member = f'"{name}":' + dumps(value)
    assert text[start:start + len(member)] == member
    doubled = text[:start] + member + "," + text[start:]
    with pytest.raises(ValueError, match=f'duplicate key "{name}"'):
        decode(doubled)


def test_todays_v3_config_and_other_versions_are_refused_by_version():
    v3 = {"v": 3, "key": "k", "node": "lstm_7", "op": "LSTM", "dtype": "float32", "attrs": config()["attrs"],
          "weights": "inputs", "absent": [], "outputs": ["Y"], "gate": "Y", "device": None, "mode": "deterministic"}
    refused(dumps(v3), "config version 3 is not the supported version 4")
    for v, fragment in ((5, "config version 5 is not"), (0, "config version 0 is not"), (-4, "version -4"),
                        (4.0, "must be the integer 4, got 4.0"), ("4", "got the string '4'"),
                        (True, "got true"), (None, "got null"), ([4], "got a list of 1")):
        d = config()
        d["v"] = v
        refused(dumps(d), fragment)


# ------------------------------------------------------------------ types and ranges


BAD_VALUES = [
    # (where, value, message fragment)
    ("attrs.hidden_size", 0, "hidden_size must be null or an integer from 1 to 1048576, got 0"),
    ("attrs.hidden_size", -1, "got -1"),
    ("attrs.hidden_size", (1 << 20) + 1, "got 1048577"),
    ("attrs.hidden_size", 1 << 62, "got 4611686018427387904"),
    ("attrs.hidden_size", True, "got true"),
    ("attrs.hidden_size", 16.0, "got 16.0"),
    ("attrs.hidden_size", "16", "got the string '16'"),
    ("attrs.hidden_size", [16], "got a list of 1"),
    ("attrs.direction", "Forward", "direction must be 'forward', 'reverse' or 'bidirectional'"),
    ("attrs.direction", "", "got the string ''"),
    ("attrs.direction", None, "got null"),
    ("attrs.direction", 1, "got 1"),
    ("attrs.layout", 2, "layout must be 0 or 1, got 2"),
    ("attrs.layout", -1, "got -1"),
    ("attrs.layout", 1.0, "got 1.0"),
    ("attrs.layout", False, "got false"),
    ("attrs.layout", None, "got null"),
    ("attrs.activations", "Tanh", "activations must be null or a list of names, got the string 'Tanh'"),
    ("attrs.activations", {"f": "Tanh"}, "got an object"),
    ("attrs.activations", ["Sigmoid", None, "Tanh"], "activations[1] must be a string, got null"),
    ("attrs.activations", ["Sigmoid", "Tanh", "Gelu"], "LSTM: activations[2] must be one of Sigmoid, Tanh, Relu"),
    ("attrs.activations", ["Sigmoid", "Tanh"], "LSTM: activations must list 3 names (f, g, h) for one direction, got 2"),
    ("attrs.activation_alpha", [1.0] * 65, "activation_alpha must list at most 64 numbers, got 65"),
    ("attrs.activation_alpha", "1.0", "activation_alpha must be null or a list of numbers, got the string '1.0'"),
    ("attrs.activation_alpha", 1.0, "got 1.0"),
    ("attrs.activation_alpha", [True], "activation_alpha[0] must be a number, got true"),
    ("attrs.activation_alpha", [1.0, "2"], "activation_alpha[1] must be a number"),
    ("attrs.activation_alpha", [None], "got null"),
    ("attrs.activation_beta", [3.5e38], "activation_beta[0] must be a finite float32 value, got 3.5e+38"),
    ("attrs.activation_beta", [-1e300], "got -1e+300"),
    ("attrs.activation_beta", [[1.0]], "must be a number, got a list of 1"),
    ("attrs.clip", 0.0, "clip must be null or a positive number"),
    ("attrs.clip", -0.0, "got -0.0"),
    ("attrs.clip", -1.0, "got -1.0"),
    ("attrs.clip", 0, "got 0"),
    ("attrs.clip", 1e-50, "positive as a float32"),
    ("attrs.clip", 1e39, "finite float32"),
    ("attrs.clip", "1", "clip must be a number, got the string '1'"),
    ("attrs.clip", True, "got true"),
    ("attrs.clip", [1.0], "got a list of 1"),
    ("attrs.input_forget", 2, "input_forget must be 0 or 1, got 2"),
    ("attrs.input_forget", True, "got true"),
    ("attrs.input_forget", 1.0, "got 1.0"),
    ("attrs.input_forget", None, "got null"),
    ("attrs.linear_before_reset", 1, "linear_before_reset is only defined for GRU, got 1 on LSTM"),
    ("attrs.linear_before_reset", -1, "linear_before_reset must be 0 or 1, got -1"),
    ("attrs", [], "attrs must be an object, got a list of 0"),
    ("attrs", None, "attrs must be an object, got null"),
    ("op", "lstm", "op must be 'LSTM', 'GRU' or 'RNN', got the string 'lstm'"),
    ("op", "Conv", "got the string 'Conv'"),
    ("op", None, "got null"),
    ("dtype", "float64", "dtype must be 'float32' or 'float16', got the string 'float64'"),
    ("dtype", "bfloat16", "got the string 'bfloat16'"),
    ("dtype", 1, "got 1"),
    ("absent", "B", "absent must be a list of names, got the string 'B'"),
    ("absent", ["X"], "absent[0] must be an optional input of LSTM (B, sequence_lens, initial_h, initial_c, P), got the string 'X'"),
    ("absent", ["W"], "got the string 'W'"),
    ("absent", ["B", "B"], "absent[1] repeats 'B'"),
    ("absent", ["b"], "got the string 'b'"),
    ("absent", [None], "got null"),
    ("outputs", [], "outputs must name at least one output of LSTM (Y, Y_h, Y_c)"),
    ("outputs", ["Y_h", "Y"], "outputs must be in ONNX's order (Y, Y_h, Y_c), got 'Y' after 'Y_h'"),
    ("outputs", ["Y", "Y"], "outputs[1] repeats 'Y'"),
    ("outputs", ["Z"], "outputs[0] must be an output of LSTM (Y, Y_h, Y_c), got the string 'Z'"),
    ("outputs", None, "outputs must be a list of names, got null"),
    ("device", UUID.upper(), "device must be null or a Vulkan device UUID"),
    ("device", UUID[:-1], "device must be null"),
    ("device", UUID + "0", "device must be null"),
    ("device", UUID.replace("-", ""), "device must be null"),
    ("device", UUID.replace("-", "_"), "device must be null"),
    ("device", "{" + UUID[1:-1] + "}", "device must be null"),
    ("device", "0123abcg-4567-89ef-0a1b-2c3d4e5f6a7b", "device must be null"),
    ("device", "", "device must be null"),
    ("device", 0, "got 0"),
    ("device", "Vulkan device", "device must be null"),
    ("mode", "Exact", "mode must be 'deterministic', 'exact' or 'fast', got the string 'Exact'"),
    ("mode", "", "got the string ''"),
    ("mode", None, "got null"),
    ("node", 7, "node must be a string, got 7"),
    ("node", None, "node must be a string, got null"),
    ("node", "n" * 4097, "must be at most 4096 bytes, got 4097"),
    ("node", "\u00e9" * 2049, "must be at most 4096 bytes, got 4098"),
]


@pytest.mark.parametrize("where,value,fragment", BAD_VALUES, ids=[f"{w}={str(v)[:20]}" for w, v, _ in BAD_VALUES])
def test_wrong_types_and_out_of_range_values_are_named(where, value, fragment):
    d = config()
    if where.startswith("attrs."):
        d["attrs"][where[6:]] = value
    else:
        d[where] = value
    if where != "node":
        refused(dumps(d), fragment)
        return
    with pytest.raises(ValueError) as info:
        decode(dumps(d))
    message = str(info.value)
    assert message.startswith(PREFIX) and fragment in message, message
    if isinstance(value, str):   # too long: named, cut
        assert message.startswith(PREFIX + "node '") and "...' (" in message and len(message) < 400, message
    else:
        assert not message.startswith(PREFIX + "node '"), message


@pytest.mark.parametrize("op,ok", [("LSTM", True), ("GRU", False), ("RNN", False)])
def test_input_forget_only_on_lstm(op, ok):
    d = config(op, input_forget=1)
    if ok:
        assert decode(dumps(d)) == d
    else:
        refused(dumps(d), f"input_forget is only defined for LSTM, got 1 on {op}")
    assert decode(dumps(config(op, input_forget=0)))["attrs"]["input_forget"] == 0


@pytest.mark.parametrize("op,ok", [("LSTM", False), ("GRU", True), ("RNN", False)])
def test_linear_before_reset_only_on_gru(op, ok):
    d = config(op, linear_before_reset=1)
    if ok:
        assert decode(dumps(d)) == d
    else:
        refused(dumps(d), f"linear_before_reset is only defined for GRU, got 1 on {op}")


@pytest.mark.parametrize("op", OPS)
def test_absent_and_outputs_follow_the_ops_cell(op):
    optional, outputs, _ = OPS[op]
    for r in range(len(optional) + 1):
        for subset in itertools.permutations(optional, r) if r <= 2 else itertools.combinations(optional, r):
            d = config(op, absent=list(subset))
            assert decode(dumps(d))["absent"] == list(subset)
    for r in range(1, len(outputs) + 1):
        for subset in itertools.permutations(outputs, r):
            d = config(op, outputs=list(subset))
            if list(subset) == sorted(subset, key=outputs.index):
                assert decode(dumps(d))["outputs"] == list(subset)
            else:
                refused(dumps(d), "outputs must be in ONNX's order")
    for other in ("initial_c", "P", "X", "W", "R"):
        if other not in optional:
            refused(dumps(config(op, absent=[other])), f"absent[0] must be an optional input of {op}")
    if "Y_c" not in outputs:
        refused(dumps(config(op, outputs=["Y", "Y_c"])), f"outputs[1] must be an output of {op}")


# ------------------------------------------------------------------ activations: the table's rules


NAMES = ("Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
         "Elu", "Softsign", "Softplus")


def _py_message(op, dirs, names, alpha, beta):
    try:
        py_resolve(op, dirs, names, alpha, beta)
    except ValueError as e:
        return str(e)
    return None


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_activation_counts_and_names_are_those_python_accepts_with_its_message(op, direction):
    rng = random.Random(hash((op, direction)) & 0xFFFF)
    dirs = 2 if direction == "bidirectional" else 1
    for count in range(0, 8):
        for _ in range(4):
            names = [rng.choice(NAMES) for _ in range(count)]
            names = [n.lower() if rng.random() < 0.2 else n for n in names]
            if count and rng.random() < 0.25:
                names[rng.randrange(count)] = rng.choice(["Gelu", "", "tanh ", "Tan", "Sigmoid\x00"])
            alpha = [rng.choice((0.1, 2.0, -0.5)) for _ in range(rng.randrange(4))] or None
            beta = [rng.choice((0.3, 1.0)) for _ in range(rng.randrange(3))] or None
            d = config(op, direction=direction, activations=names, activation_alpha=alpha, activation_beta=beta)
            expected = _py_message(op, dirs, names, alpha, beta)
            if expected is None:
                assert decode(dumps(d)) == d
            else:
                with pytest.raises(ValueError) as info:
                    decode(dumps(d))
                assert str(info.value) == f"{PREFIX}node 'lstm_7': {expected}"


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_resolve_activations_matches_python_on_random_cases():
    rng = random.Random(7)
    for _ in range(3000):
        op = rng.choice(list(OPS))
        dirs = rng.choice((1, 2))
        count = rng.choice((0, 1, 2, 3, 4, 6, 7)) if rng.random() < 0.3 else OPS[op][2] * rng.choice((1, dirs))
        names = [rng.choice(NAMES) for _ in range(count)]
        if rng.random() < 0.1:
            names = None
        if names and rng.random() < 0.1:
            names[rng.randrange(len(names))] = rng.choice(["gelu", "Affine2", "'quoted'", 'd"q', "x\ty"])
        alpha = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] if rng.random() < 0.1
                 else rng.uniform(-3, 3) for _ in range(rng.randrange(8))] or None
        beta = [rng.uniform(-3, 3) for _ in range(rng.randrange(8))] or None
        try:
            want = py_resolve(op, dirs, names, alpha, beta)
        except ValueError as e:
            with pytest.raises(ValueError) as info:
                _vk.resolve_activations(op, dirs, names, alpha, beta)
            assert str(info.value) == str(e)
            continue
        got = _vk.resolve_activations(op, dirs, names, alpha, beta)
        want = [[(a.name, a.alpha, a.beta) for a in direction] for direction in want]
        # NaN != NaN: compare the bits
        pack = lambda t: [[(n, struct.pack("<d", a), struct.pack("<d", b)) for n, a, b in d] for d in t]
        assert pack(got) == pack(want), (op, dirs, names, alpha, beta)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_resolve_activations_rounds_parameters_to_float32_as_python_does():
    for x in (0.1, 1e-46, 3.4028235e38, 3.4028236e38, 1e39, -1e300, 2.0 ** -149, 2.0 ** -150):
        got = _vk.resolve_activations("RNN", 1, ["LeakyRelu"], [x])
        want = py_resolve("RNN", 1, ["LeakyRelu"], [x])
        assert struct.pack("<d", got[0][0][1]) == struct.pack("<d", want[0][0].alpha), x


def test_a_bad_activation_name_is_shown_escaped():
    d = config("RNN", activations=["\u202eTanh\x1b[31m"])
    message = refused(dumps(d), "RNN: activations[0] must be one of")
    assert "got '\\u202eTanh\\x1b[31m'" in message


# ------------------------------------------------------------------ the node's name in messages


@pytest.mark.parametrize("name,shown", [
    ("plain", "'plain'"),
    ("it's", "'it\\'s'"),
    ("back\\slash", "'back\\\\slash'"),
    ("new\nline\x1b[2J", "'new\\x0aline\\x1b[2J'"),
    ("\u00e9\u4e2d\U0001f600", "'\\xe9\\u4e2d\\U0001f600'"),
    ("\u202egnp.exe", "'\\u202egnp.exe'"),
    ("\x00", "'\\x00'"),
    ("a" * 4096, "'" + "a" * 64 + "...' (4096 bytes)"),
    ("\u00e9" * 100, "'" + "\\xe9" * 64 + "...' (200 bytes)"),
])
def test_the_node_name_in_a_message_is_escaped_and_cut(name, shown):
    d = config(node=name, mode="slow")
    with pytest.raises(ValueError) as info:
        decode(dumps(d))
    message = str(info.value)
    assert message.startswith(f"{PREFIX}node {shown}: mode must be"), message
    assert message.isascii() and message.isprintable()


# ------------------------------------------------------------------ encode


def test_encode_checks_like_decode_and_refuses_what_json_cannot_hold():
    with pytest.raises(ValueError, match="hidden_size"):
        encode(config(hidden_size=0))
    with pytest.raises(ValueError, match="NaN or infinity"):
        encode(config(clip=float("nan")))
    with pytest.raises(ValueError, match="outside int64"):
        encode(config(hidden_size=1 << 70))
    with pytest.raises(ValueError, match="cannot hold"):
        encode(config(clip=object()))
    with pytest.raises(ValueError, match="not a str"):
        encode({1: 2})
    deep = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ValueError, match="nested too deeply"):
        encode(config(activations=deep))
    assert encode(tuple_config := copy.deepcopy(config(absent=("B",)))) == dumps(tuple_config)


# ------------------------------------------------------------------ flipped bytes, mutations


def test_flipped_bytes_are_refused_or_decode_to_a_config_that_round_trips():
    """Every single-bit flip and a few byte values at every position of a valid config: a
    ValueError naming the node wherever the flip comes after the name, or (a harmless flip,
    e.g. inside the name) a valid config that encodes and decodes to itself."""
    d = config(clip=1.5, activations=["Sigmoid", "Tanh", "Tanh"], activation_alpha=[0.5], absent=["B"],
               device=UUID)
    text = dumps(d).encode()
    name_end = text.index(b'"node":"lstm_7"') + len(b'"node":"lstm_7"')
    decoded = refusals = 0
    for pos in range(len(text)):
        for new in {text[pos] ^ (1 << bit) for bit in range(8)} | {0x00, 0x22, 0x5c, 0xff, 0xc0}:
            if new == text[pos]:
                continue
            data = text[:pos] + bytes([new]) + text[pos + 1:]
            try:
                out = decode(data)
            except ValueError as e:
                refusals += 1
                message = str(e)
                assert message.startswith(PREFIX), message
                assert message.isascii() and message.isprintable(), message
                if pos >= name_end:
                    assert message.startswith(f"{PREFIX}node 'lstm_7': "), (pos, new, message)
            else:
                decoded += 1
                assert decode(encode(out)) == out
                assert encode(decode(encode(out))) == encode(out)
    assert refusals > 8 * len(text) // 2
    assert decoded > 0   # flips in the name (and a few others) are harmless


def _mutate(rng: random.Random, data: bytes, pool: list) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        kind = rng.randrange(8)
        pos = rng.randrange(len(b) + 1)
        if kind == 0 and b:
            b[min(pos, len(b) - 1)] ^= 1 << rng.randrange(8)
        elif kind == 1 and b:
            b[min(pos, len(b) - 1)] = rng.choice((0, 0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a, 0x80, 0xc0,
                                                  0xed, 0xf4, 0xff, rng.randrange(256)))
        elif kind == 2:
            del b[pos:pos + rng.randrange(1, 16)]
        elif kind == 3:
            b[pos:pos] = rng.choice((b"null", b"[", b"{", b'"', b"\\u", b"\\ud800", b"1e999", b"-0", b"0.5",
                                     b'"Tanh"', b'"Y_c"', b'"P"', b",", b"}", b"]", b"\xf0\x9f\x98\x80"))
        elif kind == 4 and b:
            start = rng.randrange(len(b))
            b[pos:pos] = b[start:start + rng.randrange(1, 32)]
        elif kind == 5:
            other = rng.choice(pool)
            cut = rng.randrange(len(other) + 1)
            b = b[:pos] + bytearray(other[cut:])
        elif kind == 6:
            b = b[:pos]
        else:
            digits = rng.choice((b"0", b"1", b"2", b"16", b"1048577", b"-1", b"1.0", b"9" * 30, b"true"))
            b[pos:pos] = digits
    return bytes(b)


def test_mutations_only_ever_raise_value_error():
    """The in-process fuzz smoke test: 5000 mutations of the corpus (fixed seed); the decoder
    returns a config that round-trips, or raises ValueError - nothing else, no crash."""
    pool = [p.read_bytes() for p in sorted(CORPUS.iterdir()) if p.stat().st_size < 8192]
    rng = random.Random(1201)
    outcomes = {"ok": 0, "refused": 0}
    for _ in range(5000):
        data = _mutate(rng, rng.choice(pool), pool)
        try:
            out = decode(data)
        except ValueError as e:
            assert str(e).startswith(PREFIX)
            outcomes["refused"] += 1
        else:
            outcomes["ok"] += 1
            assert decode(encode(out)) == out
    assert outcomes["refused"] > 2500 and outcomes["ok"] > 0, outcomes
