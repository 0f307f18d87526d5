"""The custom node's config (ortops.ort.nodeconfig), without a device: what the rewrite writes
reads back through the native decoder (the one the custom-op library uses) with every field
and float32 attribute exact, and what it refuses it names. tests/test_node_config_decoder.py
covers the decoder's every rule and its fuzzing."""

import json

import numpy as np
import pytest

from ortops import modes
from ortops.ort.nodeconfig import CONFIG_VERSION, NodeAttrs, NodeConfig, encode


def _config(**changes):
    attrs = NodeAttrs(hidden_size=5, direction="bidirectional", activations=("Sigmoid", "Tanh", "Tanh"),
                      activation_alpha=(float(np.float32(0.1)),), clip=float(np.float32(1.7)))
    fields = dict(node="lstm_node", op="LSTM", dtype="float32", attrs=attrs, absent=("P",),
                  outputs=("Y", "Y_h"))
    fields.update(changes)
    return NodeConfig(**fields)


def test_round_trip_keeps_every_field_and_float32_values_exactly():
    cfg = _config(device="01234567-89ab-cdef-0123-456789abcdef")
    back = NodeConfig.from_json(cfg.to_json())
    assert back == cfg
    assert np.float32(back.attrs.clip) == np.float32(1.7) and back.attrs.clip == float(np.float32(1.7))
    assert encode(cfg) == encode(cfg.to_dict()) == cfg.to_json()   # one encoding, sorted keys
    assert json.loads(cfg.to_json())["v"] == CONFIG_VERSION == 4


def test_float16_gru_and_rnn_configs_round_trip():
    for op, absent, outputs in (("GRU", ("B", "sequence_lens"), ("Y_h",)), ("RNN", (), ("Y", "Y_h"))):
        attrs = NodeAttrs(direction="reverse", linear_before_reset=int(op == "GRU"))
        cfg = _config(op=op, dtype="float16", attrs=attrs, absent=absent, outputs=outputs)
        assert NodeConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    (json.dumps({"v": CONFIG_VERSION - 1}), f"config version {CONFIG_VERSION - 1} is not the supported version"),
    (json.dumps([1, 2]), "must be a JSON object"),
])
def test_malformed_configs_are_clear_errors(text, message):
    with pytest.raises(ValueError, match=message):
        NodeConfig.from_json(text)


def test_missing_or_unknown_fields_and_bad_values_are_named_with_the_node():
    d = _config().to_dict()
    for name in ("absent", "mode"):
        broken = {k: v for k, v in d.items() if k != name}
        with pytest.raises(ValueError, match=f"lacks the key '{name}'"):
            NodeConfig.from_json(encode(broken))
    with pytest.raises(ValueError, match="node 'lstm_node'.*'LSTMX'"):
        NodeConfig.from_json(encode(dict(d, op="LSTMX")))
    with pytest.raises(ValueError, match="node 'lstm_node'.*attrs"):
        NodeConfig.from_json(encode(dict(d, attrs=[1])))
    with pytest.raises(ValueError, match="node 'lstm_node'.*'weights'"):
        NodeConfig.from_json(encode(dict(d, weights="registry")))   # a v3 key: nothing ignored


def test_mode_round_trips_and_an_unknown_mode_is_refused():
    cfg = _config(mode="exact")
    assert NodeConfig.from_json(cfg.to_json()).mode == "exact"
    assert _config().mode == "deterministic"
    d = dict(cfg.to_dict(), mode="fastest")
    with pytest.raises(ValueError, match="mode"):
        NodeConfig.from_json(encode(d))
    assert set(modes.MODES) == {"deterministic", "exact", "fast"}   # the decoder's list (nodeconfig.hpp)
