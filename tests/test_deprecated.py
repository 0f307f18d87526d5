"""Public names removed from the API stay one release as deprecated aliases (ortops/_deprecated.py):
each warns with what to use instead and still works, and CHANGELOG.md lists it under "Removed"."""

from __future__ import annotations

import importlib
import pathlib
import warnings

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: module, name, and a call that shows the alias still works (None: the value is checked).
DEPRECATED = [
    ("ortops.device", "match_uuid"),
    ("ortops.ort.session", "session_device"),
    ("ortops.ort.placement", "SUPPORTED_VERSIONS"),
    ("ortops.ort.rewrite", "SUPPORTED_VERSIONS"),
    ("ortops.ort.quantized", "dequantized_weights"),
    ("ortops.ort.customop", "check_node"),
]


@pytest.mark.parametrize("module, name", DEPRECATED)
def test_a_removed_name_warns_and_says_what_to_use(module, name):
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{name} is deprecated .* use "):
        getattr(mod, name)


@pytest.mark.parametrize("module, name", DEPRECATED)
def test_the_changelog_lists_each_removed_name(module, name):
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"`{module}.{name}`" in changelog, f"CHANGELOG.md does not list {module}.{name}"


def test_an_unknown_name_is_still_an_attribute_error():
    import ortops.device

    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        ortops.device.no_such_name  # noqa: B018


def test_the_aliases_still_do_their_work():
    import ortops
    from ortops.ort import customop, placement, quantized, session
    from ortops.vocabulary import SUPPORTED_VERSIONS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert placement.SUPPORTED_VERSIONS == SUPPORTED_VERSIONS
        found = ortops.devices()
        assert ortops.device.match_uuid(found[0].uuid, found) == found[0]
        assert session.session_device(found[0].uuid).uuid == found[0].uuid
        W = np.zeros((1, 16, 4), np.float32)
        assert customop.check_node("LSTM", {"W": W, "R": W.copy()}, {"hidden_size": 4}).uuid == ortops.device.select().uuid
        with pytest.raises(ValueError, match="LSTM"):
            customop.check_node("LSTM", {"W": W, "R": W[:, :8]}, {"hidden_size": 4})
        q = np.zeros((1, 4, 16), np.int8)
        assert callable(quantized.dequantized_weights)
        assert quantized.dequantize("W", q, np.ones(1, np.float32), np.zeros(1, np.int8)).shape == (1, 16, 4)
