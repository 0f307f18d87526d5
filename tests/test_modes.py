"""ortops.modes: the table of numerical modes, its errors, and where a mode reaches (no device
for the argument checks; the exact-mode device checks need none either)."""

import dataclasses

import numpy as np
import pytest

import ortops
from ortops import modes
from _cases import fake_device
from ortops.device import UnsupportedDeviceError, require_mode
from ortops.shaders import spirv


def test_modes_table():
    assert set(modes.MODES) == {"deterministic", "exact", "fast"}
    assert modes.check_mode(None) == modes.DEFAULT == "deterministic"
    assert modes.check_mode("Exact") == "exact"


@pytest.mark.parametrize("bad", ["quick", "", 3, "exactly"])
def test_unknown_mode_lists_the_valid_ones(bad):
    with pytest.raises(ValueError, match=r"LSTM: mode must be one of deterministic, exact, fast, got"):
        modes.check_mode(bad, "LSTM")


def test_layer_refuses_an_unknown_mode_before_touching_a_device():
    W = np.zeros((1, 4, 2), np.float32)
    R = np.zeros((1, 4, 1), np.float32)
    with pytest.raises(ValueError, match="LSTM: mode must be one of deterministic, exact, fast, got 'quick'"):
        ortops.RecurrentLayer("LSTM", W, R, mode="quick")


def test_exact_mode_names_the_device_and_the_missing_control():
    weak = fake_device(index=2, name="Old GPU", nan_preserve_float32=False)
    with pytest.raises(UnsupportedDeviceError) as info:
        require_mode(weak, "exact")
    text = str(info.value)
    assert "mode='exact'" in text and "[2] Old GPU" in text
    assert "shaderSignedZeroInfNanPreserveFloat32" in text
    require_mode(dataclasses.replace(weak, nan_preserve_float32=True), "exact")   # accepted


def test_the_mode_picks_the_binary():
    assert spirv("step", np.float32, "exact") != spirv("step", np.float32)
    assert spirv("copy_words", np.float32, "exact") == spirv("copy_words", np.float32)
