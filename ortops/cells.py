"""The one table of recurrent cells: what LSTM, GRU and RNN are, for every module of ortops.

Validation, activation resolution, the layer's plans and shaders, the custom ops, the
model rewrite and the tools all read :data:`CELLS` (or names derived from it), so that
adding a cell, or finding where one is defined, means visiting this table (and the
step shader, which holds the arithmetic). ``tests/test_cells.py`` checks it against
ONNX's own schemas and against ``glsl/step.comp``.

No imports beyond the standard library: every other module imports this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Tuple

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
        if self.name == "LSTM":
            return 1
        if self.name == "GRU" and not linear_before_reset:
            return 2
        return 0


_CELLS = (
    Cell(
        name="LSTM",
        code=0,
        gate_order=("i", "o", "f", "c"),
        inputs=("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"),
        outputs=("Y", "Y_h", "Y_c"),
        attributes=_COMMON_ATTRIBUTES | {"input_forget"},
        slots=("f", "g", "h"),
        default_activations=("Sigmoid", "Tanh", "Tanh"),
        weights=("W", "R", "B", "P"),
    ),
    Cell(
        name="GRU",
        code=1,
        gate_order=("z", "r", "h"),
        inputs=("X", "W", "R", "B", "sequence_lens", "initial_h"),
        outputs=("Y", "Y_h"),
        attributes=_COMMON_ATTRIBUTES | {"linear_before_reset"},
        slots=("f", "g"),
        default_activations=("Sigmoid", "Tanh"),
        weights=("W", "R", "B"),
    ),
    Cell(
        name="RNN",
        code=2,
        gate_order=("i",),
        inputs=("X", "W", "R", "B", "sequence_lens", "initial_h"),
        outputs=("Y", "Y_h"),
        attributes=_COMMON_ATTRIBUTES,
        slots=("f",),
        default_activations=("Tanh",),
        weights=("W", "R", "B"),
    ),
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
