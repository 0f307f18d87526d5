"""Named specialization constants: for each shader in glsl/, its constants by name.

The native ``program()`` takes specialization constants as one list indexed by
``constant_id``. Writing those lists by position (``[0] * (40 - len(spec))``) hides which
value is which; instead each shader's ``layout(constant_id = N) const uint NAME = default;``
declarations are written out here once, and :func:`pack` turns a dict of named values into
the list, filling every id the caller leaves out with the shader's default (and ids no
constant uses with 0). ``tests/test_specialization.py`` parses glsl/*.comp (and what they
include) and checks these tables against the declarations: same names, same ids, same
defaults, nothing missing and nothing extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Mapping, Tuple

import numpy as np

__all__ = ["Layout", "LAYOUTS", "pack", "bits"]


@dataclass(frozen=True)
class Layout:
    """The specialization constants of one shader (``glsl/<shader>.comp``).

    ``constants``: name -> (constant_id, default), as the shader declares them.
    ``local_size``: dimension ("x", "y", "z") -> the constant whose id the shader names in
    ``local_size_<dim>_id`` (the workgroup size taken from a specialization constant).
    """

    shader: str
    constants: Dict[str, Tuple[int, int]]
    local_size: Dict[str, str] = field(default_factory=dict)

    def pack(self, values: Mapping[str, int]) -> list:
        """The id-indexed list ``program()`` takes, as 32-bit words.

        Names not in ``values`` take the shader's default; ids between constants, 0. A name
        the shader does not declare raises KeyError naming it.
        """
        unknown = set(values) - set(self.constants)
        if unknown:
            raise KeyError(f"{self.shader}.comp has no specialization constant "
                           f"{', '.join(sorted(unknown))}")
        if not self.constants:
            return []
        words = [0] * (max(i for i, _ in self.constants.values()) + 1)
        for name, (cid, default) in self.constants.items():
            words[cid] = int(values.get(name, default)) & 0xFFFFFFFF
        return words


def bits(x) -> int:
    """The float32 bit pattern of x, for a float passed as a uint constant."""
    return int(np.float32(x).view(np.uint32))


def _table(*rows):
    """name -> (id, default) from (name, id, default) rows."""
    return {name: (cid, default) for name, cid, default in rows}


def _activations():
    """step.comp's activation constants: per direction d and slot f, g, h, the function's
    code (ACT<d>_<slot>, ids 19-24), then its alpha (25-30) and beta (31-36) as float bits."""
    rows = []
    for kind, first, defaults in (("ACT", 19, (0, 1, 1)), ("ALPHA", 25, (0, 0, 0)),
                                  ("BETA", 31, (0, 0, 0))):
        for d in range(2):
            for k, slot in enumerate("FGH"):
                rows.append((f"{kind}{d}_{slot}", first + 3 * d + k, defaults[k]))
    return rows


def _cell():
    """glsl/cell.glsl's constants, which both step kernels include: the cell, the pass, the
    options, the shape, the offsets and the activations."""
    return [
        ("CELL", 0, 0), ("PASS", 1, 0), ("GENERAL", 4, 0),
        ("HAS_BIAS", 5, 0), ("HAS_PEEP", 6, 0), ("HAS_CLIP", 7, 0), ("CLIP_BITS", 8, 0),
        ("INPUT_FORGET", 9, 0), ("LBR", 10, 0), ("HAS_LENS", 11, 0), ("HIDDEN", 12, 1),
        ("BATCH", 13, 1), ("SEQ", 14, 1), ("DIRS", 15, 1), ("REVERSE0", 16, 0),
        ("XW_OFFSET", 17, 0), ("STATE_OFFSET", 18, 0),
        *_activations(),
    ]


STEP = Layout("step", _table(
    *_cell(),
    ("NB", 2, 1), ("UNITS", 3, 2), ("ROWS", 40, 8), ("TY", 41, 8), ("RPT", 42, 1),
), local_size={"y": "TY"})

STEP_BATCHED = Layout("step_batched", _table(
    *_cell(),
    ("UPT", 40, 1), ("BY", 41, 8), ("NI", 42, 1), ("B32", 43, 32), ("HT_OFFSET", 44, 0),
    ("PREFETCH", 45, 1), ("KSPLIT", 46, 1),
), local_size={"y": "BY", "z": "KSPLIT"})

INPUT_PROJECTION = Layout("input_projection", _table(
    ("N", 0, 1), ("K", 1, 1), ("SEQ", 2, 1), ("BATCH", 3, 1), ("LAYOUT", 4, 0),
    ("XW_OFFSET", 5, 0), ("TPT", 6, 4),
))

INPUT_PROJECTION_COOPMAT = Layout("input_projection_coopmat", _table(
    ("N", 0, 1), ("K", 1, 1), ("SEQ", 2, 1), ("BATCH", 3, 1), ("LAYOUT", 4, 0),
    ("XW_OFFSET", 5, 0),
))

STATE_INIT = Layout("state_init", _table(
    ("DIRS", 0, 1), ("BATCH", 1, 1), ("HIDDEN", 2, 1), ("SEQ", 3, 0), ("LAYOUT", 4, 0),
    ("HAS_H0", 5, 0), ("HAS_C0", 6, 0), ("HAS_CELL", 7, 0), ("STATE_OFFSET", 8, 0),
    ("TRANSPOSED", 9, 0), ("NI", 10, 1), ("B32", 11, 32), ("HT_OFFSET", 12, 0),
))

OUTPUT_SEQUENCE = Layout("output_sequence", _table(
    ("DIRS", 0, 1), ("BATCH", 1, 1), ("HIDDEN", 2, 1), ("SEQ", 3, 1), ("LAYOUT", 4, 0),
    ("HAS_LENS", 5, 0), ("REVERSE0", 6, 0), ("STATE_OFFSET", 7, 0),
))

OUTPUT_STATE = Layout("output_state", _table(
    ("DIRS", 0, 1), ("BATCH", 1, 1), ("HIDDEN", 2, 1), ("SEQ", 3, 1), ("LAYOUT", 4, 0),
    ("HAS_LENS", 5, 0), ("CELL_STATE", 6, 0), ("STATE_OFFSET", 7, 0), ("ZERO_EMPTY", 8, 1),
))

COPY_WORDS = Layout("copy_words", {})
CHAIN_STEP = Layout("chain_step", {})

#: Every shader in glsl/ by name.
LAYOUTS: Dict[str, Layout] = {l.shader: l for l in (
    STEP, STEP_BATCHED, INPUT_PROJECTION, INPUT_PROJECTION_COOPMAT, STATE_INIT, OUTPUT_SEQUENCE,
    OUTPUT_STATE, COPY_WORDS, CHAIN_STEP)}


def pack(shader: str, **values) -> list:
    """``LAYOUTS[shader].pack(values)``: the constants of ``glsl/<shader>.comp`` by name."""
    return LAYOUTS[shader].pack(values)
