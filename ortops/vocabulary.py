"""The core's vocabularies: the names a mode, placement, dtype, direction and op may have, and
the operator versions the device path implements.

They are defined once, in the native core (``src/core/config/types.hpp`` and the cell table
``src/core/config/cells.hpp``), and written into ``ortops/_tables.py`` at build time by
``src/tools/gen_tables.cpp``; this module only reads them, so that no Python module spells
them again (no test checks that yet).
"""

from __future__ import annotations

from ortops._tables import VOCABULARIES

__all__ = ["MODES", "PLACEMENTS", "DTYPES", "DIRECTIONS", "OPS", "SUPPORTED_VERSIONS", "check"]

#: Numerical modes, the default first (docs/modes.md).
MODES: tuple[str, ...] = VOCABULARIES["mode"]
#: Placement policies, the default first.
PLACEMENTS: tuple[str, ...] = VOCABULARIES["placement"]
#: The element types a layer computes in.
DTYPES: tuple[str, ...] = VOCABULARIES["dtype"]
#: ONNX's direction attribute.
DIRECTIONS: tuple[str, ...] = VOCABULARIES["direction"]
#: The recurrent operators, in the cell table's order.
OPS: tuple[str, ...] = VOCABULARIES["op"]
#: The ai.onnx versions of RNN, GRU and LSTM the device path implements.
SUPPORTED_VERSIONS: tuple[int, ...] = VOCABULARIES["supported_versions"]

_KINDS = {"mode": MODES, "placement": PLACEMENTS, "dtype": DTYPES, "direction": DIRECTIONS, "op": OPS}


def check(kind: str, value, where: str = "ortops") -> str:
    """``value`` if it is a name of vocabulary ``kind``; else ValueError naming ``where``, the
    kind, what was expected and what came."""
    names = _KINDS[kind]
    if isinstance(value, str) and value in names:
        return value
    raise ValueError(f"{where}: {kind} must be one of {', '.join(map(repr, names))}, got {value!r}")
