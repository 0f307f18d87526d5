"""The one table of recurrent cells: what LSTM, GRU and RNN are, for every module of ortops.

The table itself is the native core's (``src/core/config/cells.hpp``), written into
``ortops/_tables.py`` at build time (``src/tools/gen_tables.cpp``) and read here in pure
Python: validation, activation resolution, the float64 reference, the custom ops, the model
rewrite and the tools all read :data:`CELLS` (or names derived from it), and the native layers
and the custom-op library read the same table in C++. ``tests/test_cells.py`` checks it against
ONNX's own schemas and the shaders; ``tests/test_native_tables.py`` against the native module.

No imports beyond the standard library and the generated table: every other module imports
this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Tuple

from ortops import _tables

__all__ = ["Cell", "CELLS", "NAMES", "cell"]

# Attributes all three ONNX recurrent operators have (opset 14 on: layout).
_COMMON_ATTRIBUTES = frozenset({
    "hidden_size", "direction", "layout", "activations", "activation_alpha", "activation_beta", "clip",
})


@dataclass(frozen=True)
class Cell:
    """One ONNX recurrent operator as ortops implements it.

    ``code`` is the step shader's ``CELL`` specialization constant (glsl/step.comp).
    ``gate_order`` names the gates in the order ONNX stacks them in W, R and B (LSTM
    ``W[iofc]``, GRU ``W[zrh]``, RNN ``Wi``); ``gates`` is their number, the rows of W
    and R per hidden unit. ``slots`` names the activation slots of one direction.
    ``weights`` are the inputs a layer uploads once (the rest arrive with each run).
    """

    name: str
    code: int
    gate_order: Tuple[str, ...]
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]
    attributes: FrozenSet[str]
    slots: Tuple[str, ...]
    default_activations: Tuple[str, ...]
    weights: Tuple[str, ...]
    planes: Tuple[int, int] = (0, 0)   # extra state planes with linear_before_reset 0 and 1

    @property
    def gates(self) -> int:
        return len(self.gate_order)

    def extra_state_planes(self, linear_before_reset: int = 0) -> int:
        """State planes (num_directions x batch x hidden each) the step pass keeps besides
        the hidden state of every step.

        LSTM keeps its cell state c. A GRU with linear_before_reset = 0 runs each step in two
        passes (r must be applied to h before the product with R_h), so it keeps z and r*h
        between them; with linear_before_reset = 1, and for RNN, nothing.
        """
        return self.planes[1 if linear_before_reset else 0]


_CELLS = tuple(
    Cell(name=name, code=code, gate_order=gates, inputs=inputs, outputs=outputs,
         attributes=_COMMON_ATTRIBUTES | ({"input_forget"} if forget else set())
         | ({"linear_before_reset"} if lbr else set()),
         slots=slots, default_activations=defaults,
         weights=tuple(i for i in inputs if i in ("W", "R", "B", "P")), planes=planes)
    for name, code, gates, inputs, outputs, slots, defaults, forget, lbr, planes in _tables.CELLS
)

#: The cells by ONNX op type, in the order LSTM, GRU, RNN.
CELLS: Dict[str, Cell] = {c.name: c for c in _CELLS}

#: "LSTM, GRU, RNN", for messages that list the choices.
NAMES = ", ".join(CELLS)


def cell(op: str) -> Cell:
    """The cell of ONNX op type ``op``; ValueError naming ``op`` and the choices otherwise."""
    try:
        return CELLS[op]
    except (KeyError, TypeError):
        raise ValueError(f"op must be one of {NAMES}, got {op!r}") from None
