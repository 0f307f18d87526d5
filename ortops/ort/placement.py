"""Placement: for each recurrent node, whether the device path takes it, and why.

The answer is the native core's (``_vk.check_node``, ``src/core/placement/node_check.hpp``), the
question the execution provider asks in GetCapability: this module only describes the node as
onnx gives it (:func:`describe`: its op, domain and operator version, its inputs with their
element types, dims and constant values from :class:`ModelInfo`, its outputs, its attributes
with their ONNX types and values) and the device. The core checks the operator version, every
attribute's name, type and value, the element types, a ``com.microsoft.DynamicQuantizeLSTM``'s
quantized inputs, the device and the layer's spec and storage bindings, and gives the checked
config or the reason, worded once for every door; under placement ``"auto"`` it applies the
calibrated cost model (``ortops.ort.costmodel``). The answer is a :class:`Decision`; its
:class:`NodePlacement` is what reports show.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ortops.cells import CELLS
from ortops.ort import quantized, subgraphs
from ortops.ort.modelinfo import ModelInfo, op_version
from ortops.ort.nodeconfig import NodeConfig
from ortops.validation import OUTPUTS

log = logging.getLogger("ortops")


@dataclass(frozen=True)
class NodePlacement:
    """Where one recurrent node runs.

    ``where`` is ``"gpu"`` (the device path, on ``device``) or ``"cpu"`` (left to ONNX
    Runtime's own kernel, ``reason`` says why, in the words the execution provider logs).
    """

    index: int
    name: str
    op: str
    dtype: str | None
    direction: str
    layout: int
    hidden_size: int | None
    where: str
    reason: str
    weights: str = ""  # "constant, uploaded once" or "inputs, compared each run"
    outputs: tuple = ()
    path: str = ""  # the subgraph holding the node ("If 'x' then_branch / Loop 'l' body"); "" main graph

    def describe(self) -> str:
        """One line for reports such as ``ortops info``."""
        shape = f"{self.op} {self.direction} layout={self.layout} hidden={self.hidden_size} {self.dtype}"
        where = f"GPU ({self.reason})" if self.where == "gpu" else f"ONNX Runtime CPU ({self.reason})"
        extra = f", weights {self.weights}" if self.weights else ""
        outs = f", outputs {'/'.join(self.outputs)}" if self.outputs else ""
        node = f"{self.path} / {self.op} {self.name!r}" if self.path else repr(self.name)
        return f"#{self.index} {node}: {shape} -> {where}{extra}{outs}"

    @classmethod
    def of(cls, index: int, name: str, op: str, verdict: dict, path: str = "") -> NodePlacement:
        """The placement a verdict (``_vk.check_node``'s) or a decision the execution provider
        recorded (``_vk.node_decisions``') says."""
        return cls(index=index, name=name, op=op, dtype=verdict["dtype"], direction=verdict["direction"],
                   layout=verdict["layout"], hidden_size=verdict["hidden_size"],
                   where="gpu" if verdict["taken"] else "cpu", reason=verdict["reason"],
                   weights=verdict["weights"], outputs=tuple(verdict["outputs"]), path=path)


def node_key(path: str, node: onnx.NodeProto) -> str:
    """How the execution provider's recorded decisions name ``node`` (decisions.hpp's nodeKey):
    the body holding it (``path_step``; "" in the main graph), its name and its op type."""
    return f"{path}{_text(node.name)}\n{node.op_type}"


def path_step(node: onnx.NodeProto, body: onnx.GraphProto) -> str:
    """One step of a body's path (decisions.hpp's pathStep): the node holding it, its name."""
    return f"{node.op_type} {_text(node.name)} {_text(body.name)}\n"


def outputs_key(node: onnx.NodeProto) -> str:
    """The node's output names as decisions.hpp's outputsKey joins them."""
    outputs = [_text(o) for o in node.output]
    while outputs and not outputs[-1]:
        outputs.pop()
    return "\n".join(outputs)


def node_name(node: onnx.NodeProto, index: int) -> str:
    """A node's name in reports (an unnamed one by its op type and index)."""
    return _text(node.name) or f"{node.op_type}_{index}"


def _text(s) -> str:
    """A name protobuf handed over as bytes (not valid UTF-8 in the file) as the core shows it."""
    return s.decode("utf-8", "backslashreplace") if isinstance(s, bytes) else s


@dataclass(frozen=True)
class StandardNode:
    """A recurrent node as the model has it: ``op`` its op type (``DynamicQuantizeLSTM`` too),
    ``cell`` the standard op it computes, ``inputs`` and ``outputs`` the cell's, padded with ""."""

    node: onnx.NodeProto
    index: int
    name: str
    op: str
    cell: str
    inputs: list
    outputs: list
    scope: subgraphs.Scope = subgraphs.Scope()

    @classmethod
    def read(cls, node, index: int, scope: subgraphs.Scope = subgraphs.Scope()) -> StandardNode:
        op = node.op_type
        cell = "LSTM" if quantized.is_quantized(node) else op
        n = len(CELLS[cell].inputs)
        inputs = (list(node.input) + [""] * n)[:n]
        return cls(node, index, node_name(node, index), op, cell, inputs,
                   list(node.output) + [""] * (len(OUTPUTS[cell]) - len(node.output)), scope)

    def present(self) -> dict[str, str]:
        """Input slot -> value name, for the cell's inputs the node has."""
        return {n: s for n, s in zip(CELLS[self.cell].inputs, self.inputs) if s}


@dataclass(frozen=True)
class Decision:
    """:func:`place`'s answer for one node: taken by the GPU path (``config``: the checked
    config; ``device``: the ``ortops.Device``) or left to ONNX Runtime (``placement.reason``)."""

    placement: NodePlacement
    config: NodeConfig | None = None
    constant: bool = False      # the weights are constants (the kernel uploads them once)
    device: Any = None
    arrays: dict | None = None  # constant weights (W R B P), in the node's dtype

    @property
    def taken(self) -> bool:
        return self.placement.where == "gpu"


#: The inputs whose constant value the checker reads (W R B P, a DynamicQuantizeLSTM's scales
#: and zero points): the others are described by their types alone.
_CONSTANT_INPUTS = frozenset({1, 2, 3, 7, 8, 9, 10, 11})


def _input(position: int, name: str, info: ModelInfo) -> dict:
    """An input as the core's description holds it: the element type and dims the graph gives
    (shape inference's, or a constant's), whether it is constant and its value."""
    if not name:
        return {"name": "", "element": 0, "dims": None, "constant": False}
    value = info.array(name) if position in _CONSTANT_INPUTS else None
    if value is not None:
        return {"name": name, "element": helper.np_dtype_to_tensor_dtype(value.dtype), "dims": list(value.shape),
                "constant": True, "data": value}
    element, dims = info.types.get(name) or (0, None)
    return {"name": name, "element": element, "constant": False,
            "dims": None if dims is None else [-1 if d is None else d for d in dims],
            "unsqueezed": info.unsqueezed(name) if position == 0 else None}


def _attribute(a: onnx.AttributeProto) -> dict:
    value: Any = None
    if a.type == onnx.AttributeProto.INT:
        value = a.i
    elif a.type == onnx.AttributeProto.FLOAT:
        value = a.f
    elif a.type == onnx.AttributeProto.STRING:
        value = a.s
    elif a.type == onnx.AttributeProto.INTS:
        value = list(a.ints)
    elif a.type == onnx.AttributeProto.FLOATS:
        value = list(a.floats)
    elif a.type == onnx.AttributeProto.STRINGS:
        value = list(a.strings)
    return {"name": a.name, "type": int(a.type), "value": value}


def describe(node: onnx.NodeProto, info: ModelInfo, opset: int) -> dict:
    """The node as the core's checker takes it (``_vk.check_node``): what the execution
    provider reads of it through ONNX Runtime's graph API, here from onnx and ``info``."""
    version = 1 if quantized.is_quantized(node) else op_version(node.op_type, opset) or 0
    return {"name": node.name, "op_type": node.op_type, "domain": node.domain, "since_version": version,
            "inputs": [_input(i, n, info) for i, n in enumerate(node.input)], "outputs": list(node.output),
            "attributes": [_attribute(a) for a in node.attribute]}


def _read_outputs(std: StandardNode, info: ModelInfo) -> list | None:
    """The outputs the graph reads; when none, the first named one (the node still produces
    something); None when the node names none (the core refuses it)."""
    named = [o for o, s in zip(OUTPUTS[std.cell], std.outputs) if s]
    used = [o for o, s in zip(OUTPUTS[std.cell], std.outputs) if s and s in info.used]
    return used or named[:1] or None


def _device_facts(device) -> tuple[Any, dict | None, str]:
    """(the ``ortops.Device`` of ``device``, its facts for the core, why there is none)."""
    from ortops.device import select

    try:
        dev = select(device)
    except Exception as e:   # no device, or a spec that matches none: every node says why
        return None, None, str(e)
    return dev, {"name": dev.name, "uuid": dev.uuid or "", "max_storage_buffer_range": dev.max_storage_buffer_range,
                 "nan_preserve_float32": dev.nan_preserve_float32}, ""


def _calibration(dev) -> tuple[tuple | None, str]:
    """((device side, cpu side) of ``dev``'s calibration, "") or (None, why there is none)."""
    from ortops.ort import costmodel

    try:
        cal = costmodel.calibration(dev)
    except Exception as e:  # it failed to measure: the device keeps the node, saying why
        log.warning("ortops: placement 'auto': no cost model (%s); the device keeps the nodes it can run", e)
        return None, f"no cost model ({e})"
    return (cal.device.astuple(), cal.cpu.astuple()), ""


def check(std: StandardNode, info: ModelInfo, opset: int, device, mode: str, placement: str = "gpu") -> dict:
    """The core's verdict on ``std`` (``_vk.check_node``), under ``placement``."""
    from ortops.device import _native

    dev, facts, why = _device_facts(device)
    ask = dict(mode=mode, device=facts, no_device=why, write_device=device is not None,
               computed=_read_outputs(std, info))
    node = describe(std.node, info, opset)
    verdict = _native().check_node(node, **ask)
    if verdict["taken"] and placement == "auto":
        calibration, problem = _calibration(dev)
        verdict = _native().check_node(node, placement="auto", calibration=calibration, cost_problem=problem, **ask)
    return dict(verdict, device=dev)


def _weights(std: StandardNode, info: ModelInfo, dtype: str) -> dict:
    """The constant weights W R B P in the node's dtype (a DynamicQuantizeLSTM's W and R
    dequantized by the core's rule)."""
    present = std.present()
    arrays = {n: (info.array(present[n]) if n in present else None) for n in ("W", "R", "B", "P")}
    if std.op == quantized.OP:
        inputs = dict(zip(quantized.INPUTS, list(std.node.input) + [""] * len(quantized.INPUTS)))
        for w, (s, z) in quantized.QUANTIZED.items():
            q, scale, zero = (info.array(inputs[n]) for n in (w, s, z))
            assert q is not None and scale is not None and zero is not None   # the checker's: constants
            arrays[w] = quantized.dequantize(w, q, scale, zero)
    return {n: None if a is None else np.ascontiguousarray(a.astype(dtype, copy=False)) for n, a in arrays.items()}


def place(std: StandardNode, info: ModelInfo, opset: int, device, mode: str, placement: str = "gpu") -> Decision:
    """Take ``std`` or leave it to ONNX Runtime, with the core's reason."""
    verdict = check(std, info, opset, device, mode, placement)
    p = NodePlacement.of(std.index, std.name, std.op, verdict, std.scope.describe())
    if not verdict["taken"]:
        return Decision(p)
    config = NodeConfig.from_json(verdict["config"])
    arrays = _weights(std, info, config.dtype) if verdict["constant"] else None
    return Decision(p, config, verdict["constant"], verdict["device"], arrays)


from ortops._deprecated import attribute, module_getattr  # noqa: E402 - the deprecated names, after what they use

__getattr__ = module_getattr(__name__, {
    "SUPPORTED_VERSIONS": ("ortops.vocabulary.SUPPORTED_VERSIONS (the core's)",
                           attribute("ortops.vocabulary", "SUPPORTED_VERSIONS")),
})
