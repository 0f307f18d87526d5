"""The core's vocabularies are spelled once: no module of the Python package defines one again.

The names a mode, placement, dtype, direction and op may have, and the operator versions the
device path implements, are defined in the native core (src/core/config/types.hpp, the cell
table) and reach Python through ortops/_tables.py, read by ortops.vocabulary. This test parses
every other module of the package (ast) and fails where one holds a copy:

* a tuple, list, set or dict literal (a dict's keys, or its values; the first argument of
  each call it holds) or a conditional expression holding two or more names of one vocabulary
  (``("float32", "float16")``, ``{"gpu", "auto"}``, ``{np.float16: "float16", np.float32:
  "float32"}``, ``(Mode("exact", ...), Mode("fast", ...))``, ``"float16" if f else
  "float32"``): derive it from ortops.vocabulary instead;
* an integer tuple, list or set equal to the supported versions;
* a device-matching helper (a function named ``_match*``, ``match_uuid`` or ``*uuid_prefix``):
  the native core chooses devices (src/core/vk/devices.hpp, ``_vk.choose_device``).
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

from ortops import vocabulary

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ortops"
#: The vocabulary's own modules: the generated table and its reader.
OWN = {"ortops/_tables.py", "ortops/vocabulary.py"}

VOCABULARIES = {
    "mode": vocabulary.MODES,
    "placement": vocabulary.PLACEMENTS,
    "dtype": vocabulary.DTYPES,
    "direction": vocabulary.DIRECTIONS,
    "op": vocabulary.OPS,
}
DEVICE_MATCHING = re.compile(r"^(_match.*|match_uuid|.*uuid_prefix)$")


def _strings(nodes) -> set[str]:
    """The string constants among ``nodes``, and the first argument of each call among them (a
    table of records keyed by their first field: ``(Mode("deterministic", ...), Mode("exact",
    ...))``; a record's other fields may name what it is about, e.g. a cuDNN precision's dtype)."""
    out = set()
    for n in nodes:
        if isinstance(n, ast.Call) and n.args:
            n = n.args[0]
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
    return out


def _collections(node: ast.AST):
    """The groups of elements a literal holds: its items, a dict's keys and its values, or a
    conditional's two values (``"float16" if ... else "float32"``: a mapping too)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        yield node.elts
    elif isinstance(node, ast.Dict):
        yield [k for k in node.keys if k is not None]
        yield node.values
    elif isinstance(node, ast.IfExp):
        yield [node.body, node.orelse]


def copies(source: str) -> list[str]:
    """What in ``source`` (a module's text) copies a vocabulary, one line each."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and DEVICE_MATCHING.match(node.name):
            found.append(f"line {node.lineno}: device-matching helper {node.name}() (the core chooses devices)")
        for elements in _collections(node):
            names = _strings(elements)
            for kind, vocab in VOCABULARIES.items():
                held = sorted(names & set(vocab))
                if len(held) >= 2:
                    found.append(f"line {node.lineno}: {kind} names {held} (read ortops.vocabulary)")
            ints = [e.value for e in elements if isinstance(e, ast.Constant) and type(e.value) is int]
            if ints and len(ints) == len(elements) and set(ints) == set(vocabulary.SUPPORTED_VERSIONS):
                found.append(f"line {node.lineno}: the supported versions {ints} (read ortops.vocabulary)")
    return found


def _modules() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if str(p.relative_to(ROOT)) not in OWN)


@pytest.mark.parametrize("module", _modules())
def test_no_module_copies_a_vocabulary(module):
    found = copies((ROOT / module).read_text())
    assert not found, f"{module} spells a vocabulary of the core again:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("source, what", [
    ('MODES = ("deterministic", "exact", "fast")', "mode names"),
    ('if d in {"forward", "reverse"}: pass', "direction names"),
    ('T = {np.float16: "float16", np.float32: "float32"}', "dtype names"),
    ('T = {"float32": 1e-5, "float16": 2e-3}', "dtype names"),
    ('P = ["gpu", "auto"]', "placement names"),
    ('G = {"LSTM": 4, "GRU": 3, "RNN": 1}', "op names"),
    ("V = (7, 14, 22)", "supported versions"),
    ('M = (Mode("deterministic", ""), Mode("exact", "_exact"))', "mode names"),
    ('d = "float16" if half else "float32"', "dtype names"),
    ("def _matches(dev, spec): pass", "device-matching helper"),
    ("def match_uuid(text, found): pass", "device-matching helper"),
])
def test_the_scan_catches_each_kind_of_copy(source, what):
    assert any(what in line for line in copies(source)), copies(source)


@pytest.mark.parametrize("source", [
    'x = ("float32", 3, "LSTM")',                    # one name of each: not a vocabulary
    'choices = vocabulary.MODES',
    "V = (7, 14)",                                    # not the supported versions
    'doc = "deterministic, exact or fast"',           # text, not a collection
    "def matching_rows(a): pass",
    'P = (Precision("strict", "float32"), Precision("tf32", "float32"), Precision("half", "float16"))',
])
def test_the_scan_passes_legitimate_code(source):
    assert copies(source) == []
