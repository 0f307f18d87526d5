"""Placement: for each recurrent node, whether the device path takes it, and why.

:func:`place` refuses what cannot be a custom node before anything is built (an operator
version other than 7, 14 and 22, attributes of the wrong ONNX type, an element type other than
float32/float16/float64), then checks the node as its kernel will (``customop.check_node``:
weights and attributes with ``ortops/validation.py``, the mode on the device, each weight within
the storage-binding limit) without uploading anything. Under placement ``"auto"``,
:func:`apply_policy` asks the calibrated cost model (``ortops.ort.policy``,
``ortops.ort.costmodel``) and leaves the node to ONNX Runtime CPU where that is predicted
faster. ``com.microsoft.DynamicQuantizeLSTM`` is placed as the LSTM it computes
(:func:`place_quantized`). The answer is a :class:`Decision`; its :class:`NodePlacement` is
what reports show.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ortops.cells import CELLS
from ortops.ort import customop, policy, quantized, subgraphs
from ortops.ort.modelinfo import ModelInfo, op_version
from ortops.ort.nodeconfig import NodeAttrs
from ortops.validation import GATES, OUTPUTS

log = logging.getLogger("ortops")

#: Operator versions the custom ops implement (one semantics: layout came in
#: 14, types in 22). A model of opset 23 or later still uses version 22.
SUPPORTED_VERSIONS = (7, 14, 22)


_DTYPES = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16", TensorProto.DOUBLE: "float64"}


_NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64}


@dataclass(frozen=True)
class NodePlacement:
    """Where one recurrent node runs.

    ``where`` is ``"gpu"`` (an ortops custom node on ``device``) or ``"cpu"``
    (left to ONNX Runtime's own kernel, ``reason`` says why).
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
    weights: str = ""  # "constant" (uploaded once) or "inputs" (compared every run)
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


def _attrs(node) -> dict:
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode() for s in v]
        out[a.name] = v
    return out


def _attr_type_errors(node, op: str, opset: int) -> list[str]:
    """Attributes of ``node`` whose AttributeProto type is not the one the ONNX schema of
    ``op`` at ``opset`` declares (e.g. a FLOAT hidden_size).

    ONNX Runtime refuses such a node at session creation (INVALID_GRAPH, "Mismatched
    attribute type"); the node is left to it so that the model fails as it does in stock
    ONNX Runtime, with the reason in ortops' placement note.
    """
    try:
        attributes = onnx.defs.get_schema(op, opset, "").attributes
    except Exception:  # no schema: the version check reports the node
        return []
    errors = []
    for a in node.attribute:
        if a.name in attributes:  # unknown names: refused by _config_attrs
            want = attributes[a.name].type.name
            got = onnx.AttributeProto.AttributeType.Name(a.type)
            if got != want:
                errors.append(f"attribute {a.name} has type {got}, the {op} schema says {want}")
    return errors


def _as_int(value):
    """An integer attribute as int; a mistyped one (see _attr_type_errors) as it came."""
    return int(value) if isinstance(value, (int, np.integer)) else value


def _config_attrs(op: str, raw: dict) -> NodeAttrs:
    """Normalised attribute set for the config (float32 values kept exact)."""
    unknown = set(raw) - CELLS[op].attributes
    if unknown:
        raise ValueError(f"attribute(s) {sorted(unknown)} are not attributes of {op}")

    def f32(v):
        return float(np.float32(v))  # ONNX floats are float32; repr of this float64 is exact

    return used_parameters(NodeAttrs(
        hidden_size=int(raw["hidden_size"]) if "hidden_size" in raw else None,
        direction=raw.get("direction", "forward"),
        layout=int(raw.get("layout", 0)),
        activations=tuple(raw["activations"]) if "activations" in raw else None,
        activation_alpha=tuple(f32(x) for x in raw["activation_alpha"]) if "activation_alpha" in raw else None,
        activation_beta=tuple(f32(x) for x in raw["activation_beta"]) if "activation_beta" in raw else None,
        clip=f32(raw["clip"]) if "clip" in raw and f32(raw["clip"]) != float("inf") else None,
        input_forget=int(raw.get("input_forget", 0)),
        linear_before_reset=int(raw.get("linear_before_reset", 0)),
    ), op)


def used_parameters(attrs: NodeAttrs, op: str) -> NodeAttrs:
    """``attrs`` with activation_alpha / activation_beta cut to the values the activations
    consume (ORT ignores the rest too; the decoder takes at most 64): the same layer. The node
    is checked so (:func:`_config_attrs`), as the EP reads it (``parametersUsed`` in
    src/ep/node.cpp): a node listing more values than it uses is taken by both."""
    from ortops.activations import ACTIVATIONS, Activation, DEFAULT_ACTIVATIONS

    names = attrs.activations or DEFAULT_ACTIVATIONS[op]
    canonical = {a.lower(): a for a in ACTIVATIONS}
    acts = [Activation(canonical[str(n).lower()]) for n in names if str(n).lower() in canonical]
    # The cursors run over the names as listed (one set serves both directions, consumed once).
    alphas = sum(a.takes_alpha for a in acts)
    betas = sum(a.takes_beta for a in acts)
    cut = {}
    if attrs.activation_alpha is not None and len(attrs.activation_alpha) > alphas:
        cut["activation_alpha"] = tuple(attrs.activation_alpha[:alphas])
    if attrs.activation_beta is not None and len(attrs.activation_beta) > betas:
        cut["activation_beta"] = tuple(attrs.activation_beta[:betas])
    return dataclasses.replace(attrs, **cut) if cut else attrs


def _dims_hint(info, op, attrs):
    """(input_size, hidden_size) of the dummy weights :func:`_build` checks when the weights are
    not constant (from the declared shapes of W and R where known, else 1)."""
    hidden = attrs.hidden_size
    w = info.get("W")
    r = info.get("R")
    if hidden is None and r and r[1] and len(r[1]) == 3 and r[1][2]:
        hidden = r[1][2]
    inp = w[1][2] if w and w[1] and len(w[1]) == 3 and w[1][2] else 1
    return inp, hidden or 1


@dataclass(frozen=True)
class StandardNode:
    """A main-graph recurrent node as the model has it (inputs and outputs padded with "")."""

    node: onnx.NodeProto
    index: int
    name: str
    op: str
    raw: dict               # its attributes as they came
    inputs: list            # the op's inputs in order ("" where absent)
    outputs: list           # the op's outputs in order ("" where not named)
    x_type: tuple | None    # (ONNX element type, dims) of X, else of W
    dtype: str | None
    scope: subgraphs.Scope = subgraphs.Scope()

    @classmethod
    def read(cls, node, index: int, info: ModelInfo, scope: subgraphs.Scope = subgraphs.Scope()) -> StandardNode:
        op = node.op_type
        inputs = list(node.input) + [""] * (len(customop.INPUTS[op]) - len(node.input))
        x_type = info.types.get(inputs[0]) or info.types.get(inputs[1]) or _folded_type(inputs[1], info)
        name = node.name
        if isinstance(name, bytes):   # not valid UTF-8 in the file: protobuf hands the bytes over
            name = name.decode("utf-8", "backslashreplace")
        return cls(node, index, name or f"{op}_{index}", op, _attrs(node), inputs,
                   list(node.output) + [""] * (len(OUTPUTS[op]) - len(node.output)), x_type,
                   _DTYPES.get(x_type[0]) if x_type else None, scope)

    def placed(self, where: str, reason: str, **extra) -> NodePlacement:
        return NodePlacement(index=self.index, name=self.name, op=self.op, dtype=self.dtype,
                             direction=str(self.raw.get("direction", "forward")),
                             layout=_as_int(self.raw.get("layout", 0)), hidden_size=self.raw.get("hidden_size"),
                             where=where, reason=reason, path=self.scope.describe(), **extra)

    def present(self) -> dict[str, str]:
        """Input slot -> value name, for the inputs the node has."""
        return {n: s for n, s in zip(customop.INPUTS[self.op], self.inputs) if s}


def _folded_type(name: str, info: ModelInfo) -> tuple | None:
    """(element type, dims) of a constant computed from constants (e.g. W in an exporter's
    If branch, which shape inference may leave untyped)."""
    arr = info.array(name)
    if arr is None:
        return None
    return (onnx.helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape))


@dataclass(frozen=True)
class Decision:
    """:func:`place`'s answer for one node: taken by the GPU path (``attrs``, ``device``: the
    ``ortops.Device`` it runs on) or left to ONNX Runtime (``placement.reason`` says why)."""

    placement: NodePlacement
    attrs: NodeAttrs | None = None
    constant: bool = False     # the weights are constants (the kernel uploads them once)
    device: Any = None
    arrays: dict | None = None  # constant weights, in the node's dtype
    outputs: tuple = ()         # the outputs the graph reads

    @property
    def taken(self) -> bool:
        return self.placement.where == "gpu"


def _device_name(dev) -> str:
    return "Vulkan device" if dev is None else str(getattr(dev, "name", dev))


def _refusal(std: StandardNode, opset: int) -> str | None:
    """Why ``std`` cannot be a custom node, before any layer is built (None: it may)."""
    op, version = std.op, op_version(std.op, opset)
    if version not in SUPPORTED_VERSIONS:
        return (f"{op}-{version} (ai.onnx opset {opset}) is not one of the supported versions "
                f"{', '.join(map(str, SUPPORTED_VERSIONS))}")
    mistyped = _attr_type_errors(std.node, op, opset)
    if mistyped:
        return "; ".join(mistyped) + " (ONNX Runtime refuses the model: INVALID_GRAPH)"
    if std.dtype is None:
        return ("element type unknown or not float32/float16/float64"
                + (f" (ONNX type {std.x_type[0]})" if std.x_type else ""))
    return None


def _build(std: StandardNode, attrs: NodeAttrs, info: ModelInfo, device, mode=None):
    """(device, weight arrays) for constant weights; (device, None) after a check with dummy
    weights otherwise (dtype/attribute combinations are refused whatever the sizes). Raises
    the refusal (customop.check_node: nothing is uploaded here)."""
    op, np_dt, present = std.op, _NP[std.dtype], std.present()
    if all(info.array(present[n]) is not None for n in customop.WEIGHTS if n in present):
        arrays = {n: info.array(present[n]) if n in present else None for n in customop.WEIGHTS}
        arrays = {n: (None if a is None else np.ascontiguousarray(a.astype(np_dt, copy=False)))
                  for n, a in arrays.items()}
        return customop.check_node(op, arrays, attrs, device, mode=mode), arrays
    inp, hid = _dims_hint({n: info.types.get(present.get(n, "")) for n in ("W", "R")}, op, attrs)
    dirs = 2 if attrs.direction == "bidirectional" else 1
    G = GATES[op]
    dummy = {"W": np.zeros((dirs, G * hid, inp), np_dt), "R": np.zeros((dirs, G * hid, hid), np_dt),
             "B": None, "P": None}
    return customop.check_node(op, dummy, dataclasses.replace(attrs, hidden_size=hid), device, mode=mode), None


def _read_outputs(std: StandardNode, info: ModelInfo) -> tuple:
    """The outputs the graph reads; when none, the first named one (or Y): the node still
    produces something."""
    used = [o for o, s in zip(OUTPUTS[std.op], std.outputs) if s and s in info.used]
    return tuple(used or [o for o, s in zip(OUTPUTS[std.op], std.outputs) if s][:1] or ["Y"])


def place(std: StandardNode, info: ModelInfo, opset: int, device, mode=None) -> Decision:
    """Take ``std`` (check it as its kernel will) or leave it to ONNX Runtime, with why."""
    reason = _refusal(std, opset)
    if reason is not None:
        return Decision(std.placed("cpu", reason))
    try:
        attrs = _config_attrs(std.op, std.raw)
    except (ValueError, TypeError) as e:   # e.g. a list where an int belongs, in an opset without it
        return Decision(std.placed("cpu", f"attributes not usable: {e}"))
    try:
        dev, arrays = _build(std, attrs, info, device, mode)
    except Exception as e:  # the kernels' refusal: the node stays on ORT's CPU kernel
        return Decision(std.placed("cpu", f"not taken by the GPU path: {type(e).__name__}: {e}"))
    constant = arrays is not None
    outputs = _read_outputs(std, info)
    return Decision(std.placed("gpu", _device_name(dev),
                               weights="constant, uploaded once" if constant else "inputs, compared each run",
                               outputs=outputs),
                    attrs, constant, dev, arrays, outputs)


def apply_policy(d: Decision, std: StandardNode, info: ModelInfo, device) -> Decision:
    """``d`` under placement "auto" (ortops.ort.policy): the node's layer dropped and the node
    left to ONNX Runtime where the cost model predicts its CPU faster; the prediction in the
    report either way."""
    from ortops.device import select

    dims = lambda name: (info.types.get(name) or (None, None))[1]  # noqa: E731
    dev = d.device if d.device is not None else select(device)
    p = d.placement
    try:
        gpu, why = policy.choose(std.op, d.attrs, dims(std.inputs[0]), dims(std.inputs[1]), dev)
    except Exception as e:  # no calibration (it failed to measure): "gpu"'s answer, saying why
        log.warning("ortops: placement 'auto': no cost model (%s: %s); node %r stays on the device",
                    type(e).__name__, e, std.name)
        return dataclasses.replace(d, placement=dataclasses.replace(
            p, reason=f"{p.reason}; no cost model ({type(e).__name__}: {e})"))
    if gpu:
        return dataclasses.replace(d, placement=dataclasses.replace(p, reason=f"{p.reason}; {why}"))
    return Decision(dataclasses.replace(p, where="cpu", reason=why, weights="", outputs=()))


def place_quantized(node, index: int, info: ModelInfo, opset: int, device,
                     scope: subgraphs.Scope = subgraphs.Scope(), mode=None):
    """(std, decision) for a com.microsoft DynamicQuantizeLSTM (ortops.ort.quantized): placed as
    the ai.onnx LSTM with its weights dequantized once (new initializers, used by a converted
    model), reported under its own op type."""
    arrays, note = quantized.dequantized_weights(node, info.array)
    names = dict(zip(("W", "R"), (list(node.input) + ["", ""])[1:3]))
    if arrays is not None:
        # The dequantized weights as constants of the rewrite (never written into the model:
        # the custom node gets initializers of its own holding them, Builder.weight).
        for w, a in arrays.items():
            names[w] = info.unique(f"{names[w]}__ortops_dequantized")
            t = numpy_helper.from_array(a, names[w])
            info.consts[names[w]], info.types[names[w]] = t, (TensorProto.FLOAT, list(a.shape))
    std = StandardNode.read(quantized.as_lstm(node, names), index, info, scope)
    d = place(std, info, opset, device, mode) if arrays is not None else Decision(std.placed("cpu", note))
    p = d.placement
    # T is float32 only: the type of a node X whose producer shape inference does not know
    weights = f"{note}, dequantized to float32 and uploaded once" if d.taken else p.weights
    p = dataclasses.replace(p, op=quantized.OP, dtype=p.dtype or "float32", weights=weights)
    return std, dataclasses.replace(d, placement=p)
