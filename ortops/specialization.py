"""Named specialization constants: for each shader in glsl/, its constants by name.

A program takes specialization constants as one list indexed by ``constant_id``. Writing
those lists by position hides which value is which; instead each shader's
``layout(constant_id = N) const uint NAME = default;`` declarations are written out once, in
the native core (``src/core/rnn/specialization.cpp``, which records every plan with them), and
read here from the generated ``ortops/_tables.py``; :func:`pack` turns a dict of named values
into the list, filling every id the caller leaves out with the shader's default (and ids no
constant uses with 0). ``tests/test_specialization.py`` parses glsl/*.comp (and what they
include) and checks the tables against the declarations: same names, same ids, same
defaults, nothing missing and nothing extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Mapping, Tuple

import numpy as np

from ortops import _tables

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


#: Every shader in glsl/ by name: the native core's layouts (src/core/rnn/specialization.cpp,
#: through the generated ortops/_tables.py).
LAYOUTS: Dict[str, Layout] = {shader: Layout(shader, dict(constants), dict(local))
                              for shader, (constants, local) in _tables.LAYOUTS.items()}


def pack(shader: str, **values) -> list:
    """``LAYOUTS[shader].pack(values)``: the constants of ``glsl/<shader>.comp`` by name."""
    return LAYOUTS[shader].pack(values)
