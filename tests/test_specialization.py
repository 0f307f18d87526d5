"""ortops.specialization against glsl/: every shader's named constants, as declared.

Pure Python, no device: parses each ``layout(constant_id = N) const uint NAME = default;``
and ``local_size_<dim>_id = N`` in glsl/*.comp and the files they #include.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ortops import specialization
from ortops.specialization import LAYOUTS, pack

GLSL = Path(__file__).resolve().parents[1] / "glsl"
SHADERS = sorted(p.stem for p in GLSL.glob("*.comp"))

_CONSTANT = re.compile(r"layout\s*\(\s*constant_id\s*=\s*(\d+)\s*\)\s*const\s+(\w+)\s+(\w+)\s*=\s*([^;]+);")
_LOCAL_ID = re.compile(r"local_size_([xyz])_id\s*=\s*(\d+)")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _source(path: Path, seen=None) -> str:
    """The shader's text with its #include files appended (each once)."""
    seen = set() if seen is None else seen
    if path in seen:
        return ""
    seen.add(path)
    text = re.sub(r"//[^\n]*", "", path.read_text())
    return text + "".join(_source(path.parent / name, seen) for name in _INCLUDE.findall(text))


def _declared(shader: str):
    text = _source(GLSL / f"{shader}.comp")
    constants = {}
    for cid, type_, name, default in _CONSTANT.findall(text):
        assert type_ == "uint", f"{shader}.comp: {name} is {type_}; pack() writes uint words"
        assert name not in constants, f"{shader}.comp declares {name} twice"
        constants[name] = (int(cid), int(default.strip().rstrip("uU"), 0))
    local = {dim: int(cid) for dim, cid in _LOCAL_ID.findall(text)}
    return constants, local


def test_every_shader_has_a_layout():
    assert SHADERS and sorted(LAYOUTS) == SHADERS


@pytest.mark.parametrize("shader", SHADERS)
def test_layout_matches_the_shader(shader):
    constants, local = _declared(shader)
    layout = LAYOUTS[shader]
    assert layout.shader == shader
    assert {n: c for n, (c, _) in layout.constants.items()} == {n: c for n, (c, _) in constants.items()}
    assert layout.constants == constants, "defaults differ from the shader's"
    ids = [c for c, _ in constants.values()]
    assert len(ids) == len(set(ids)), f"{shader}.comp: two constants share an id"
    assert {d: layout.constants[name][0] for d, name in layout.local_size.items()} == local


def test_pack_fills_defaults_and_gaps():
    words = pack("step", CELL=2, ACT1_H=5, ROWS=3, CLIP_BITS=specialization.bits(-1.0))
    assert len(words) == 43
    assert words[0] == 2 and words[24] == 5 and words[40] == 3
    assert words[8] == 0xBF800000
    assert words[37:40] == [0, 0, 0]                      # ids no constant uses
    assert words[20] == 1 and words[41] == 8              # ACT0_G, TY: the shader's defaults
    assert pack("output_state", ZERO_EMPTY=0)[8] == 0
    assert pack("copy_words") == []
    assert pack("state_init", SEQ=-1)[3] == 0xFFFFFFFF    # 32-bit words


def test_pack_refuses_unknown_names():
    with pytest.raises(KeyError, match="state_init.comp has no specialization constant XW_OFFSET"):
        pack("state_init", XW_OFFSET=1)
