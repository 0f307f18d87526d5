"""ortops.cells, the one table of recurrent cells: it agrees with ONNX's own operator schemas
and with the step shader, and the package's older per-module tables are views of it.

No device needed: the table and the shader are read as text.
"""

from __future__ import annotations

import re
from pathlib import Path

import onnx.defs
import pytest

from ortops import activations, layer, validation
from ortops.ort import customop, rewrite
from ortops.activations import ACTIVATIONS
from ortops.cells import CELLS, Cell, cell

STEP_SHADER = Path(__file__).resolve().parents[1] / "glsl" / "cell.glsl"   # what the step kernels share
OPSET = 22   # the newest version of the three operators (see ortops.vocabulary.SUPPORTED_VERSIONS)


def test_the_three_onnx_cells():
    assert list(CELLS) == ["LSTM", "GRU", "RNN"]
    for name, c in CELLS.items():
        assert isinstance(c, Cell) and c.name == name and cell(name) is c


@pytest.mark.parametrize("op", list(CELLS))
def test_cell_matches_onnx_schema(op):
    schema = onnx.defs.get_schema(op, OPSET)
    c = CELLS[op]
    assert c.inputs == tuple(i.name for i in schema.inputs)
    assert c.outputs == tuple(o.name for o in schema.outputs)
    assert c.attributes == frozenset(schema.attributes)
    # Gate order as the schema's description of W states it: "W[iofc]", "W[zrh]", "Wi".
    w = next(i for i in schema.inputs if i.name == "W").description
    m = re.search(r"`W\[([a-z]+)\]`", w) or re.search(r"`W([a-z])`", w)
    assert m, w
    assert "".join(c.gate_order) == m.group(1)
    assert c.gates == len(c.gate_order)
    # Every weight is an input; P is LSTM's and B, W, R are everyone's.
    assert set(c.weights) <= set(c.inputs) and c.weights[:3] == ("W", "R", "B")
    # Slots and default activations as the schema's equations state them:
    # "Equations (Default: f=Sigmoid, g=Tanh, h=Tanh):".
    defaults = re.search(r"Equations \(Default: ([^)]*)\)", schema.doc)
    assert defaults, "no default activations in the schema's doc"
    pairs = tuple(tuple(p.strip().split("=")) for p in defaults.group(1).split(","))
    assert c.slots == tuple(slot for slot, _ in pairs)
    assert c.default_activations == tuple(act for _, act in pairs)
    assert set(c.default_activations) <= set(ACTIVATIONS)


def test_codes_and_gates_match_the_step_shader():
    text = STEP_SHADER.read_text()
    # layout(constant_id = 0) const uint CELL = 0;       // 0 LSTM (i o f c), 1 GRU (z r h), 2 RNN
    line = re.search(r"const uint CELL\b[^\n]*//([^\n]*)", text)
    assert line, "CELL specialization constant not found in cell.glsl"
    described = {m.group(2): (int(m.group(1)), m.group(3))
                 for m in re.finditer(r"(\d+) ([A-Z]+)(?: \(([a-z ]+)\))?", line.group(1))}
    assert set(described) == set(CELLS)
    for name, (code, order) in described.items():
        assert CELLS[name].code == code
        if order is not None:
            assert CELLS[name].gate_order == tuple(order.split())
    # const uint GATES = CELL == 0u ? 4u : (CELL == 1u ? 3u : 1u);
    expr = re.search(r"const uint GATES = ([^;]+);", text).group(1)
    py = re.sub(r"(\d+)u", r"\1", expr)
    py = re.sub(r"(\w[\w =]*?) \? (\w+) : ", r"\2 if \1 else ", py)
    for c in CELLS.values():
        assert eval(py, {"CELL": c.code}) == c.gates, (py, c.name)   # noqa: S307 (shader text of this repo)
    assert len({c.code for c in CELLS.values()}) == len(CELLS)


def test_extra_state_planes():
    assert CELLS["LSTM"].extra_state_planes() == 1          # the cell state c
    assert CELLS["GRU"].extra_state_planes(0) == 2          # z and r*h between the two passes
    assert CELLS["GRU"].extra_state_planes(1) == 0
    assert CELLS["RNN"].extra_state_planes() == 0


def test_unknown_op():
    with pytest.raises(ValueError, match=r"^op must be one of LSTM, GRU, RNN, got 'Lstm'$"):
        cell("Lstm")
    with pytest.raises(ValueError, match="op must be one of LSTM, GRU, RNN, got None"):
        cell(None)
    with pytest.raises(ValueError, match=r"got \['LSTM'\]"):
        cell(["LSTM"])


def test_aliases_are_views_of_the_table():
    for name, c in CELLS.items():
        assert validation.GATES[name] == c.gates
        assert validation.OUTPUTS[name] == c.outputs
        assert activations.SLOTS[name] == len(c.slots)
        assert activations.DEFAULT_ACTIVATIONS[name] == c.default_activations
        assert customop.INPUTS[name] == c.inputs
        assert set(c.weights) <= set(customop.WEIGHTS)
    for table in (validation.GATES, validation.OUTPUTS, activations.SLOTS,
                  activations.DEFAULT_ACTIVATIONS, customop.INPUTS):
        assert list(table) == list(CELLS)
    assert customop.WEIGHTS == ("W", "R", "B", "P")
    assert rewrite.RECURRENT == tuple(CELLS)
    # The old private copies are gone: the layer reads the table.
    assert not hasattr(layer, "_CELL") and not hasattr(layer, "_DEFAULT_ACTIVATIONS")
    assert not hasattr(rewrite, "_ATTRS")


def test_layer_kwargs_pass_the_cells_attributes():
    attrs = {"hidden_size": 4, "input_forget": 1, "linear_before_reset": 1}
    for name, c in CELLS.items():
        kw = customop.layer_kwargs(attrs, name)
        assert set(kw) == c.attributes
        assert kw["direction"] == "forward" and kw["layout"] == 0 and kw["clip"] is None
