"""The plugin execution provider's options and names, from plain onnxruntime in a child process
that never imports ortops (tests/test_ep_placement.py's CHILD), as ONNX Runtime's own plugin EPs
behave (docs/onnxruntime.md, "Options"):

- an option key the EP does not know is refused, the error naming the EP, the key and the known
  keys; a bad value is refused naming the EP, the option, what was expected (the core's
  vocabularies, ortops.vocabulary) and what came; every name of the vocabularies is taken;
- the library registered by ``ortops.get_library_path()`` offers EP devices named as
  ``ortops.get_ep_names()`` / ``get_ep_name()`` say (ONNX Runtime's plugin-EP packaging names).
"""

from __future__ import annotations

import pytest

import ortops
from _children import run_child
from ortops import vocabulary
from ortops.ort import costmodel
from test_ep_placement import EP, _child

pytestmark = pytest.mark.gpu

#: The keys docs/onnxruntime.md documents (an error listing the known keys names each of them).
DOCUMENTED = ("device", "mode", "placement")


def _names(values) -> str:
    return ", ".join(repr(v) for v in values)


def test_an_unknown_option_is_refused_naming_the_known_ones(tmp_path):
    report, _ = _child(tmp_path, {"typo": {"options": {"placment": "auto"}},
                                  "case": {"options": {"Mode": "exact"}}}, {})
    for name, key in (("typo", "placment"), ("case", "Mode")):
        error = report["runs"][name].get("error", "")
        head = f"{EP}: unknown option '{key}' (its options: "
        assert head in error, report["runs"][name]
        known = error.split(head, 1)[1]
        assert all(f"'{k}'" in known for k in DOCUMENTED), error


def test_a_bad_value_is_refused_naming_the_ep_and_the_option(tmp_path):
    runs = {"mode": {"options": {"mode": "quick"}}, "placement": {"options": {"placement": "x"}},
            "device": {"options": {"device": "no such device"}}}
    report, _ = _child(tmp_path, runs, {})
    errors = {name: r.get("error", "") for name, r in report["runs"].items()}
    assert f"{EP}: option 'mode' must be one of {_names(vocabulary.MODES)}, got 'quick'" in errors["mode"], errors
    assert (f"{EP}: option 'placement' must be one of {_names(vocabulary.PLACEMENTS)}, got 'x'"
            in errors["placement"]), errors
    assert f"{EP}: option 'device' names no Vulkan device: no Vulkan device matches 'no such device'" in errors["device"]


def test_every_name_of_the_vocabularies_is_taken(tmp_path):
    runs = {f"mode {m}": {"options": {"mode": m, "placement": "gpu"}} for m in vocabulary.MODES}
    runs.update({f"placement {p}": {"options": {"placement": p}} for p in vocabulary.PLACEMENTS})
    report, _ = _child(tmp_path, runs, {costmodel.CACHE_ENV: str(tmp_path / "cost.json"), "ORTOPS_COST_SHAPES": "small"})
    for name, r in report["runs"].items():
        assert "error" not in r, (name, r)
    assert set(report["runs"]["mode fast"]["assigned"].values()) == {EP}


# argv: library. Prints the names of the EP devices the library registered offers.
NAMES_CHILD = r'''
import json, sys
import onnxruntime as ort

lib = sys.argv[1]
ort.register_execution_provider_library("ortops", lib)
names = sorted({d.ep_name for d in ort.get_ep_devices() if d.ep_metadata.get("library_path") == lib})
print(json.dumps({"names": names, "imported": sorted(m for m in sys.modules if m.split(".")[0] == "ortops")}))
'''


def test_the_packaging_names_are_the_ones_onnxruntime_sees(tmp_path):
    import json

    output = run_child(NAMES_CHILD, ortops.get_library_path(), cwd=tmp_path)
    seen = json.loads(output.strip().splitlines()[-1])
    assert seen["imported"] == []
    assert seen["names"] == ortops.get_ep_names() == [ortops.get_ep_name()] == [ortops.EP_NAME]
