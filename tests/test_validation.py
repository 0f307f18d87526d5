"""ortops.validation and ortops.activations.resolve_activations: accepted layers and every error path.

Every error must be a ValueError whose message starts with the operator and names the
argument ("LSTM: R must have shape ..."). What ORT itself does on these inputs is checked
in test_reference.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ortops.activations import (
    ACTIVATIONS,
    Activation,
    apply,
    resolve_activations,
)
from ortops.validation import LayerSpec, check_inputs, check_layer, output_shapes
from _cases import GATES



def weights(op, *, dirs=1, hidden=3, input_size=2, dtype=np.float32, bias=True, peep=False):
    G = GATES[op]
    t = {
        "W": np.zeros((dirs, G * hidden, input_size), dtype),
        "R": np.zeros((dirs, G * hidden, hidden), dtype),
        "B": np.zeros((dirs, 2 * G * hidden), dtype) if bias else None,
        "P": np.zeros((dirs, 3 * hidden), dtype) if peep else None,
    }
    return t


def layer(op, direction="forward", **kw):
    dirs = 2 if direction == "bidirectional" else 1
    t = weights(op, dirs=dirs, peep=(op == "LSTM"))
    return check_layer(op, t["W"], t["R"], t["B"], t["P"], direction=direction, **kw)


# ---------------------------------------------------------------------------
# Accepted layers

@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_spec_fields(op, direction):
    dirs = 2 if direction == "bidirectional" else 1
    t = weights(op, dirs=dirs, hidden=5, input_size=7, dtype=np.float16, peep=(op == "LSTM"))
    extra = {"LSTM": dict(input_forget=1), "GRU": dict(linear_before_reset=True), "RNN": {}}[op]
    spec = check_layer(op, t["W"], t["R"], t["B"], t["P"], hidden_size=5, direction=direction,
                       layout=1, clip=2, **extra)
    assert isinstance(spec, LayerSpec)
    assert spec.op == op and spec.dtype == np.float16 and spec.direction == direction
    assert spec.num_directions == dirs and spec.hidden_size == 5 and spec.input_size == 7
    assert spec.gates == GATES[op] and spec.layout == 1
    assert spec.clip == 2.0 and isinstance(spec.clip, float)
    assert spec.input_forget is (op == "LSTM")
    assert spec.linear_before_reset is (op == "GRU")
    assert spec.has_bias is True and spec.has_peepholes is (op == "LSTM")
    assert len(spec.activations) == dirs
    assert all(len(a) == {"LSTM": 3, "GRU": 2, "RNN": 1}[op] for a in spec.activations)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.hidden_size = 1


def test_spec_defaults_and_inferred_hidden_size():
    t = weights("GRU", hidden=4, bias=False)
    spec = check_layer("GRU", t["W"], t["R"])
    assert spec.hidden_size == 4 and spec.clip is None and spec.layout == 0
    assert spec.has_bias is False and spec.has_peepholes is False
    assert spec.input_forget is False and spec.linear_before_reset is False
    assert [a.name for a in spec.activations[0]] == ["Sigmoid", "Tanh"]


def test_allowed_dtypes_and_input_size_zero():
    t = weights("RNN", dtype=np.float64, input_size=0)
    spec = check_layer("RNN", t["W"], t["R"], allowed_dtypes=(np.float32, np.float64))
    assert spec.dtype == np.float64 and spec.input_size == 0
    assert check_inputs(spec, np.zeros((3, 2, 0))) == (3, 2)


def test_clip_infinity_is_accepted():
    assert layer("LSTM", clip=float("inf")).clip == float("inf")


@pytest.mark.parametrize("layout", [0, 1])
def test_check_inputs_returns_seq_and_batch(layout):
    spec = layer("LSTM", layout=layout)
    X = np.zeros((5, 4, 2) if layout == 0 else (4, 5, 2), np.float32)
    state = np.zeros((1, 4, 3) if layout == 0 else (4, 1, 3), np.float32)
    lens = np.array([0, 5, 2, 1], np.int32)
    assert check_inputs(spec, X, lens, state, state) == (5, 4)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_zero_sizes_are_valid(op):
    spec = layer(op, direction="bidirectional")
    assert check_inputs(spec, np.zeros((0, 3, 2), np.float32), np.zeros(3, np.int32),
                        np.zeros((2, 3, 3), np.float32)) == (0, 3)
    assert check_inputs(spec, np.zeros((4, 0, 2), np.float32), np.zeros(0, np.int32),
                        np.zeros((2, 0, 3), np.float32)) == (4, 0)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_output_shapes(op):
    for layout, y, state in ((0, (5, 2, 4, 3), (2, 4, 3)), (1, (4, 5, 2, 3), (4, 2, 3))):
        shapes = output_shapes(layer(op, direction="bidirectional", layout=layout), 5, 4)
        expected = {"Y": y, "Y_h": state}
        if op == "LSTM":
            expected["Y_c"] = state
        assert shapes == expected


# ---------------------------------------------------------------------------
# check_layer errors: (op, arguments changed from a valid layer, argument named)

def _layer_error_cases():
    f64 = np.float64
    for op in ("LSTM", "GRU", "RNN"):
        G = GATES[op]
        yield op, dict(direction="Forward"), "direction"
        yield op, dict(direction="both"), "direction"
        yield op, dict(layout=2), "layout"
        yield op, dict(layout=True), "layout"
        yield op, dict(layout=0.0), "layout"
        yield op, dict(clip=0.0), "clip"
        yield op, dict(clip=-1.0), "clip"
        yield op, dict(clip=float("nan")), "clip"
        yield op, dict(clip="1"), "clip"
        yield op, dict(input_forget=2), "input_forget"
        yield op, dict(linear_before_reset=-1), "linear_before_reset"
        if op != "LSTM":
            yield op, dict(input_forget=1), "input_forget"
            yield op, dict(P=np.zeros((1, 9), np.float32)), "P"
        if op != "GRU":
            yield op, dict(linear_before_reset=1), "linear_before_reset"
        yield op, dict(W=[[[0.0]]]), "W"
        yield op, dict(W=np.zeros((1, G * 3, 2), f64)), "W"
        yield op, dict(W=np.zeros((1, G * 3, 2), np.int32)), "W"
        yield op, dict(R=None), "R"
        yield op, dict(R=np.zeros((1, G * 3, 3), np.float16)), "R"
        yield op, dict(B=np.zeros((1, 2 * G * 3), f64)), "B"
        yield op, dict(W=np.zeros((G * 3, 2), np.float32)), "W"
        yield op, dict(R=np.zeros((1, G * 3, 3, 1), np.float32)), "R"
        yield op, dict(W=np.zeros((1, G * 3 + 1, 2), np.float32)), "W"
        yield op, dict(W=np.zeros((2, G * 3, 2), np.float32)), "W"
        yield op, dict(R=np.zeros((1, G * 3, 4), np.float32), hidden_size=3), "R"
        yield op, dict(R=np.zeros((1, G * 3 + 1, 3), np.float32)), "R"
        yield op, dict(R=np.zeros((1, G * 3, 4), np.float32)), "W"  # H from R: W disagrees
        yield op, dict(R=np.zeros((1, 0, 0), np.float32), W=np.zeros((1, 0, 2), np.float32)), "hidden_size"
        yield op, dict(hidden_size=0), "hidden_size"
        yield op, dict(hidden_size=-3), "hidden_size"
        yield op, dict(hidden_size=3.0), "hidden_size"
        yield op, dict(hidden_size=4), "W"
        yield op, dict(B=np.zeros((1, G * 3), np.float32)), "B"
        yield op, dict(B=np.zeros((0,), np.float32)), "B"  # zero-size is not "absent"
        yield op, dict(activations=["Gelu"] * {"LSTM": 3, "GRU": 2, "RNN": 1}[op]), "activations"
        yield op, dict(activations=["Tanh"] * 4), "activations"
        yield op, dict(activation_alpha=["x"]), "activation_alpha"
        yield op, dict(activation_beta=0.5), "activation_beta"
    yield "LSTM", dict(P=np.zeros((1, 12), np.float32)), "P"
    yield "LSTM", dict(P=np.zeros((1, 9), np.float64)), "P"
    yield "LSTM", dict(P=np.zeros((3, 3), np.float32)), "P"


LAYER_ERRORS = list(_layer_error_cases())


@pytest.mark.parametrize("index", range(len(LAYER_ERRORS)),
                         ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(LAYER_ERRORS)])
def test_check_layer_errors(index):
    op, changes, argument = LAYER_ERRORS[index]
    t = weights(op)
    kwargs = dict(t, hidden_size=None)
    kwargs.update(changes)
    tensors = [kwargs.pop(name) for name in ("W", "R", "B", "P")]
    with pytest.raises(ValueError) as info:
        check_layer(op, *tensors, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{op}: {argument}"), message


def test_message_format_names_expected_and_actual_shape():
    t = weights("LSTM", dirs=2, hidden=256, input_size=8)
    with pytest.raises(ValueError) as info:
        check_layer("LSTM", t["W"], np.zeros((2, 1024, 128), np.float32), hidden_size=256,
                    direction="bidirectional")
    assert str(info.value) == ("LSTM: R must have shape [2, 1024, 256] "
                               "(num_directions, 4*hidden_size, hidden_size), got [2, 1024, 128]")


def test_unknown_op():
    t = weights("RNN")
    with pytest.raises(ValueError, match="op must be one of LSTM, GRU, RNN, got 'Lstm'"):
        check_layer("Lstm", t["W"], t["R"])


# ---------------------------------------------------------------------------
# check_inputs errors

def _input_error_cases():
    for op in ("LSTM", "GRU", "RNN"):
        for layout in (0, 1):
            X = np.zeros((5, 4, 2) if layout == 0 else (4, 5, 2), np.float32)
            state = (1, 4, 3) if layout == 0 else (4, 1, 3)
            yield op, layout, dict(X=X.tolist()), "X"
            yield op, layout, dict(X=X.astype(np.float16)), "X"
            yield op, layout, dict(X=X[0]), "X"
            yield op, layout, dict(X=np.zeros(X.shape[:2] + (3,), np.float32)), "X"
            yield op, layout, dict(sequence_lens=np.zeros(4, np.int64)), "sequence_lens"
            yield op, layout, dict(sequence_lens=np.zeros(4, np.float32)), "sequence_lens"
            yield op, layout, dict(sequence_lens=np.zeros(5, np.int32)), "sequence_lens"
            yield op, layout, dict(sequence_lens=np.zeros((4, 1), np.int32)), "sequence_lens"
            yield op, layout, dict(sequence_lens=np.array([1, 2, 6, 9], np.int32)), "sequence_lens[2] = 6 is outside [0, 5]"
            yield op, layout, dict(sequence_lens=np.array([1, -1, 0, 9], np.int32)), "sequence_lens[1] = -1 is outside [0, 5]"
            yield op, layout, dict(initial_h=np.zeros(state, np.float64)), "initial_h"
            yield op, layout, dict(initial_h=np.zeros(state[::-1], np.float32)), "initial_h"
            yield op, layout, dict(initial_h=np.zeros((2, 4, 3), np.float32)), "initial_h"
            yield op, layout, dict(initial_h=np.zeros((0,), np.float32)), "initial_h"
            if op == "LSTM":
                yield op, layout, dict(initial_c=np.zeros((4, 4, 3), np.float32)), "initial_c"
                yield op, layout, dict(initial_c=np.zeros(state, np.float16)), "initial_c"
            else:
                yield op, layout, dict(initial_c=np.zeros(state, np.float32)), "initial_c"


INPUT_ERRORS = list(_input_error_cases())


@pytest.mark.parametrize("index", range(len(INPUT_ERRORS)),
                         ids=[f"{c[0]}-layout{c[1]}-{c[3].split()[0]}-{i}" for i, c in enumerate(INPUT_ERRORS)])
def test_check_inputs_errors(index):
    op, layout, changes, argument = INPUT_ERRORS[index]
    spec = layer(op, layout=layout)
    kwargs = dict(X=np.zeros((5, 4, 2) if layout == 0 else (4, 5, 2), np.float32))
    kwargs.update(changes)
    with pytest.raises(ValueError) as info:
        check_inputs(spec, **kwargs)
    message = str(info.value)
    assert message.startswith(f"{op}: {argument}"), message


def test_check_inputs_message_names_layout_one_shape():
    spec = layer("GRU", layout=1)
    with pytest.raises(ValueError) as info:
        check_inputs(spec, np.zeros((4, 5, 2), np.float32), initial_h=np.zeros((1, 4, 3), np.float32))
    assert str(info.value) == ("GRU: initial_h must have shape [4, 1, 3] "
                               "(batch_size, num_directions, hidden_size (layout 1)), got [1, 4, 3]")


# ---------------------------------------------------------------------------
# resolve_activations and Activation

def test_activation_codes_follow_the_shader_order():
    assert ACTIVATIONS == ("Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu", "ThresholdedRelu",
                           "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus")
    assert [Activation(n).code for n in ACTIVATIONS] == list(range(11))
    with pytest.raises(ValueError, match="Activation: name must be one of"):
        Activation("tanh")


@pytest.mark.parametrize("op, names", [("LSTM", ["Sigmoid", "Tanh", "Tanh"]),
                                       ("GRU", ["Sigmoid", "Tanh"]), ("RNN", ["Tanh"])])
def test_default_activations(op, names):
    for given in (None, []):
        resolved = resolve_activations(op, 2, given, None, None)
        assert [[a.name for a in d] for d in resolved] == [names, names]


def test_names_are_case_insensitive_and_bytes_accepted():
    (d,) = resolve_activations("LSTM", 1, ["SIGMOID", b"leakyrelu", "tAnH"], None, None)
    assert [a.name for a in d] == ["Sigmoid", "LeakyRelu", "Tanh"]


def test_separate_cursors_and_defaults():
    # The example in docs/design.md, 'Activations' (cursors): alpha [0.3, 0.2, 1.2] and
    # beta [0.4, 0.7] over HardSigmoid, LeakyRelu, ScaledTanh.
    (d,) = resolve_activations("LSTM", 1, ["HardSigmoid", "LeakyRelu", "ScaledTanh"],
                               [0.3, 0.2, 1.2], [0.4, 0.7])
    f32 = lambda v: float(np.float32(v))
    assert d == (Activation("HardSigmoid", f32(0.3), f32(0.4)),
                 Activation("LeakyRelu", f32(0.2), 0.0),
                 Activation("ScaledTanh", f32(1.2), f32(0.7)))
    # Cursors run over the forward set, then the reverse set; values that run out
    # take ORT's defaults (0 for Affine/ScaledTanh/ThresholdedRelu).
    fwd, rev = resolve_activations("GRU", 2, ["Affine", "Tanh", "ThresholdedRelu", "HardSigmoid"],
                                   [2.0], [0.5, 0.25])
    assert fwd == (Activation("Affine", 2.0, 0.5), Activation("Tanh"))
    assert rev == (Activation("ThresholdedRelu", 0.0, 0.0), Activation("HardSigmoid", f32(0.2), 0.25))
    (d,) = resolve_activations("LSTM", 1, ["Elu", "LeakyRelu", "ScaledTanh"], None, None)
    assert d == (Activation("Elu", 1.0, 0.0), Activation("LeakyRelu", f32(0.01), 0.0),
                 Activation("ScaledTanh", 0.0, 0.0))
    (d,) = resolve_activations("RNN", 1, ["Affine"], None, None)
    assert d == (Activation("Affine", 0.0, 0.0),)


def test_extra_values_are_ignored():
    (d,) = resolve_activations("RNN", 1, ["LeakyRelu"], [0.5, 7.0, 9.0], [1.0, 2.0])
    assert d == (Activation("LeakyRelu", 0.5, 0.0),)


def test_one_set_serves_both_directions():
    fwd, rev = resolve_activations("LSTM", 2, ["Elu", "Affine", "Tanh"], [0.5, 3.0], [1.5])
    assert fwd == rev == (Activation("Elu", 0.5), Activation("Affine", 3.0, 1.5), Activation("Tanh"))


def test_rnn_two_names_on_one_direction_keeps_the_first():
    (d,) = resolve_activations("RNN", 1, ["Relu", "Tanh"], None, None)
    assert d == (Activation("Relu"),)


@pytest.mark.parametrize("op, dirs, names", [
    ("LSTM", 1, ["Sigmoid", "Tanh"]), ("LSTM", 1, ["Sigmoid", "Tanh", "Tanh"] * 2),
    ("LSTM", 2, ["Sigmoid", "Tanh", "Tanh", "Tanh"]), ("GRU", 1, ["Sigmoid"]),
    ("GRU", 2, ["Sigmoid", "Tanh", "Tanh"]), ("RNN", 1, ["Tanh"] * 3), ("RNN", 2, ["Tanh"] * 3),
])
def test_wrong_number_of_names(op, dirs, names):
    with pytest.raises(ValueError) as info:
        resolve_activations(op, dirs, names, None, None)
    assert str(info.value).startswith(f"{op}: activations must list ")
    assert f"got {len(names)}" in str(info.value)


def test_unknown_name_message():
    with pytest.raises(ValueError) as info:
        resolve_activations("GRU", 1, ["Sigmoid", "Gelu"], None, None)
    assert str(info.value) == ("GRU: activations[1] must be one of Sigmoid, Tanh, Relu, Affine, "
                               "LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, "
                               "Softplus (case-insensitive), got 'Gelu'")


def test_resolve_argument_errors():
    with pytest.raises(ValueError, match="op must be one of"):
        resolve_activations("LSTM2", 1, None, None, None)
    with pytest.raises(ValueError, match="RNN: num_directions must be 1 or 2"):
        resolve_activations("RNN", 3, None, None, None)


def test_parameters_are_float32_values():
    (d,) = resolve_activations("RNN", 1, ["ThresholdedRelu"], [0.1], None)
    assert d[0].alpha == float(np.float32(0.1)) != 0.1
    # So a float32 input equal to the threshold is not above it.
    assert apply(d[0], np.array([np.float32(0.1)]))[0] == 0.0


# ---------------------------------------------------------------------------
# One checker: the core's decoder and spec, reached with the config a node carries


def test_the_core_checks_the_config_the_door_writes():
    # The door's config is the custom node's (ortops.ort.nodeconfig, v4): the native decoder
    # reads it back as the custom-op library would, so its rules are the layer's.
    import json

    from ortops import _vk

    spec = layer("GRU", direction="reverse", clip=np.float32(2.5), linear_before_reset=True,
                 activations=["HardSigmoid", "Tanh"], activation_alpha=np.array([0.5]))
    decoded = _vk.decode_node_config(spec.config)
    assert json.loads(spec.config)["v"] == decoded["v"] == 4
    assert decoded["op"] == "GRU" and decoded["attrs"]["direction"] == "reverse"
    assert decoded["attrs"]["clip"] == 2.5 and decoded["attrs"]["linear_before_reset"] == 1
    assert decoded["attrs"]["activations"] == ["HardSigmoid", "Tanh"]
    assert decoded["attrs"]["activation_alpha"] == [0.5] and decoded["absent"] == []
    assert spec.activations[0][0] == Activation("HardSigmoid", 0.5, float(np.float32(0.5)))
    # The decoder's rules reach the Python door: its range of hidden_size, finite parameters.
    with pytest.raises(ValueError, match=r"^LSTM: hidden_size must be null or an integer from 1 to 1048576, "
                                         r"got 1048577$"):
        layer("LSTM", hidden_size=(1 << 20) + 1)
    with pytest.raises(ValueError, match=r"^RNN: activation_alpha\[1\] must be a finite number, got nan$"):
        layer("RNN", activations=["Affine"], activation_alpha=[1.0, float("nan")])
    with pytest.raises(ValueError, match=r"^LSTM: activations must be a list of names, got 5$"):
        layer("LSTM", activations=5)
    # +inf clips nothing: the config says no clip, the spec keeps what was given.
    assert json.loads(layer("LSTM", clip=float("inf")).config)["attrs"]["clip"] is None


def test_the_storage_limit_is_the_cores_check():
    # One message, the core's (src/core/rnn/limits.cpp), for the rewrite's check of a node as for
    # a layer's upload; exact mode binds R as float32 words whatever the layer's dtype.
    from ortops.limits import UnsupportedLayerError
    from ortops.validation import check_bindings

    t = weights("LSTM", hidden=4, input_size=2, dtype=np.float16)   # R: 1 x 16 x 4 halves, 128 bytes
    spec = check_layer("LSTM", t["W"], t["R"], t["B"])
    check_bindings(spec, t, mode="deterministic", device="tiny", storage_range=128)
    with pytest.raises(UnsupportedLayerError) as info:
        check_bindings(spec, t, mode="exact", device="tiny", storage_range=128)
    assert str(info.value) == ("LSTM: unsupported layer on tiny: R needs 256 bytes in one storage binding, "
                               "above the device's maxStorageBufferRange of 128 bytes")
    with pytest.raises(UnsupportedLayerError, match=r"^LSTM: unsupported layer on tiny: W needs 64 bytes"):
        check_bindings(spec, t, mode="deterministic", device="tiny", storage_range=63)


def test_the_native_layer_reads_its_config_with_the_decoder():
    # ortops._vk.Layer takes the config's text and decodes it as the custom-op library does
    # (no dict of its own): a config the decoder refuses never reaches a device.
    from ortops import _vk

    t = weights("RNN")
    config = layer("RNN").config.replace('"mode":"deterministic"', '"mode":"slow"')
    with pytest.raises(ValueError, match=r"^RNN: mode must be 'deterministic', 'exact' or 'fast', "
                                         r"got the string 'slow'$"):
        _vk.Layer(config, t["W"], t["R"])
