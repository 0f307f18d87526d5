"""docs/special_values.md's matrix in exact mode: the same rule, the same cases.

Every test of tests/test_special_values.py that runs a layer runs here again with the layers
built with ``mode="exact"`` (its ``make_layer`` replaced for the module): NaN, ±Inf and −0 in
every input and every activation slot must behave as the default mode's contract says. The
one intended difference, float32 denormals flushed to ±0 (docs/exact.md, 'Denormals'), is
within the rule's tolerance where it shows (sigmoid(−100) = 3.7e−44 becomes 0). Plus exact
mode's own refusal of a device without the float control, by a real device's name.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ortops
import test_special_values as sv
from ortops.device import UnsupportedDeviceError
from test_special_values import (  # noqa: F401  (collected here, run in exact mode)
    test_activations, test_clip_and_nan_with_bias, test_clip_keeps_nan_without_bias,
    test_float16_output_overflows_to_inf, test_gates_saturate_exactly, test_infinite_pre_activation_is_not_clamped,
    test_mlas_sigmoid_saturation, test_placements, test_relu_and_hardsigmoid_keep_nan,
    test_softplus_of_large_input_is_finite, test_tanh_of_negative_zero,
)


def _exact_layer(op, t, attrs):
    return ortops.RecurrentLayer(op, t["W"], t["R"], t.get("B"), t.get("P"), **attrs, mode="exact")


@pytest.fixture(autouse=True)
def _exact_mode(monkeypatch):
    monkeypatch.setattr(sv, "make_layer", _exact_layer)
    built = []
    real = ortops.RecurrentLayer

    def spy(*a, **k):
        layer = real(*a, **k)
        built.append(layer.mode)
        return layer

    monkeypatch.setattr(ortops, "RecurrentLayer", spy)
    yield
    assert built and set(built) == {"exact"}, f"layers built in modes {set(built)}"


def test_exact_mode_refuses_a_device_without_nan_preservation():
    dev = ortops.devices()[0]
    weak = dataclasses.replace(dev, nan_preserve_float32=False)
    W = np.zeros((1, 4, 2), np.float32)
    R = np.zeros((1, 4, 1), np.float32)
    with pytest.raises(UnsupportedDeviceError, match=r"mode='exact' .*shaderSignedZeroInfNanPreserveFloat32") as info:
        ortops.RecurrentLayer("LSTM", W, R, device=weak, mode="exact")
    assert dev.name in str(info.value)
    ortops.RecurrentLayer("LSTM", W, R, device=dev, mode="exact")
