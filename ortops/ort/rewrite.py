"""Rewrite standard ai.onnx RNN/GRU/LSTM nodes into ortops custom nodes.

:func:`rewrite` walks the main graph, decides per recurrent node whether the
GPU path takes it (by building its :class:`ortops.RecurrentLayer`, which is
what uploads the weights and what refuses unsupported dtype/attribute
combinations), and replaces the nodes it takes by ``ortops::<OP>`` nodes (see
``customop.py`` for their contract). A node it cannot take stays a standard
node that ORT's own CPU kernel runs; :class:`NodePlacement` records where
each node runs and why.

Two weight modes:

* ``"registry"`` (``ortops.InferenceSession``): constant weights are kept out
  of the node's inputs. Extensions copies every input on every call, so
  feeding a 4 MB weight would cost a copy per run; instead the layer built
  here (weights on the device) goes into ``customop.REGISTRY`` under the
  node's key, and the node's weight inputs are empty.
* ``"inline"`` (``ortops.convert``): the weights stay initializers feeding the
  node, so the model is standalone. They are copied on every run by
  extensions and compared to the cached copy; the layer is only rebuilt (and
  re-uploaded) when they changed.

Only nodes of the main graph are rewritten; recurrent nodes inside
subgraphs (If/Loop/Scan bodies) stay standard and are reported as such.

Structure: per recurrent node, :func:`place` decides (a :class:`Decision`:
taken with its layer, or left to ORT with the reason), :func:`node_config`
makes its :class:`ortops.ort.nodeconfig.NodeConfig` and :func:`emit` its nodes
(float16 casts, the custom node, the check Squeeze); ``_Builder`` holds what
is graph-wide (unique names, the shared initializers, the run-token input).
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ortops.ort import customop
from ortops.cells import CELLS
from ortops.modes import DEFAULT as DEFAULT_MODE, check_mode
from ortops.ort.nodeconfig import NodeAttrs, NodeConfig
from ortops.validation import GATES, OUTPUTS

#: The standard op types the rewrite replaces (ortops.cells).
RECURRENT = tuple(CELLS)
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

    def describe(self) -> str:
        """One line for reports such as ``ortops info``."""
        shape = f"{self.op} {self.direction} layout={self.layout} hidden={self.hidden_size} {self.dtype}"
        where = f"GPU ({self.reason})" if self.where == "gpu" else f"ONNX Runtime CPU ({self.reason})"
        extra = f", weights {self.weights}" if self.weights else ""
        outs = f", outputs {'/'.join(self.outputs)}" if self.outputs else ""
        return f"#{self.index} {self.name!r}: {shape} -> {where}{extra}{outs}"


@dataclass
class Rewritten:
    """Result of :func:`rewrite`: the new model, the placement of every
    recurrent node, and (registry mode) the prebuilt layers by key."""

    model: onnx.ModelProto
    placement: list[NodePlacement]
    layers: dict[str, Any] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    devices: dict[str, Any] = field(default_factory=dict)  # registry keys whose weights are inputs
    run_input: str | None = None  # registry mode: the graph input a session feeds its run token to


class ModelError(ValueError):
    """The model cannot be read or is not a valid ONNX model."""


def load_model(model) -> onnx.ModelProto:
    """Accept what ``onnxruntime.InferenceSession`` accepts: a path, the
    serialized bytes, or an ``onnx.ModelProto`` (not modified)."""
    if isinstance(model, onnx.ModelProto):
        out = onnx.ModelProto()
        out.CopyFrom(model)
        return out
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            return onnx.load_from_string(bytes(model))
        except Exception as e:  # protobuf's DecodeError and friends
            raise ModelError(f"the bytes given are not a serialized ONNX model ({e})") from None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise ModelError(f"model file not found: {path}")
        try:
            return onnx.load(path)
        except Exception as e:
            raise ModelError(f"{path} is not a readable ONNX model ({e})") from None
    raise TypeError(f"model must be a path, bytes or onnx.ModelProto, not {type(model).__name__}")


def default_opset(model: onnx.ModelProto) -> int:
    """Version of the default (ai.onnx) domain the model imports."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    raise ModelError("the model imports no ai.onnx opset")


def op_version(op: str, opset: int) -> int | None:
    """Version of ``op`` that ai.onnx opset ``opset`` uses (None if unknown)."""
    try:
        return onnx.defs.get_schema(op, opset, "").since_version
    except Exception:  # onnx raises SchemaError for an opset before the op existed
        return None


def _subgraphs(graph):
    """Every subgraph (If/Loop/Scan body) of ``graph``, nested ones included."""
    for n in graph.node:
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
                list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
            for sg in subs:
                yield sg
                yield from _subgraphs(sg)


def _subgraph_nodes(graph, owner: str = ""):
    """(node, owner description) for every node inside subgraphs of ``graph``."""
    for n in graph.node:
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else (
                list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else [])
            for sg in subs:
                where = f"{n.op_type} node {n.name or '(unnamed)'!r}, attribute {a.name}"
                for inner in sg.node:
                    yield inner, where
                yield from _subgraph_nodes(sg, where)


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

    return NodeAttrs(
        hidden_size=int(raw["hidden_size"]) if "hidden_size" in raw else None,
        direction=raw.get("direction", "forward"),
        layout=int(raw.get("layout", 0)),
        activations=tuple(raw["activations"]) if "activations" in raw else None,
        activation_alpha=tuple(f32(x) for x in raw["activation_alpha"]) if "activation_alpha" in raw else None,
        activation_beta=tuple(f32(x) for x in raw["activation_beta"]) if "activation_beta" in raw else None,
        clip=f32(raw["clip"]) if "clip" in raw else None,
        input_forget=int(raw.get("input_forget", 0)),
        linear_before_reset=int(raw.get("linear_before_reset", 0)),
    )


class _Graph:
    """Lookups over the main graph: constants, element types, consumers."""

    def __init__(self, model: onnx.ModelProto):
        g = model.graph
        self.graph_inputs = {i.name for i in g.input}
        self.consts: dict[str, TensorProto] = {}
        for t in g.initializer:
            if t.name not in self.graph_inputs:  # an initializer that is also an input can be fed
                self.consts[t.name] = t
        for n in g.node:
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1:
                for a in n.attribute:
                    if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                        self.consts[n.output[0]] = a.t
        self.types: dict[str, tuple[int, list | None]] = {}
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False).graph
        except Exception:
            inferred = g  # types from what the model declares
        for vi in list(inferred.input) + list(inferred.output) + list(inferred.value_info):
            tt = vi.type.tensor_type
            if tt.elem_type:
                dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] \
                    if tt.HasField("shape") else None
                self.types[vi.name] = (tt.elem_type, dims)
        for t in g.initializer:
            self.types[t.name] = (t.data_type, list(t.dims))
        for name, t in self.consts.items():
            self.types.setdefault(name, (t.data_type, list(t.dims)))
        # Values of subgraphs (for the placement of their recurrent nodes): what shape
        # inference found inside them, then their declarations and initializers. A subgraph
        # cannot redeclare an outer name, so one table serves every scope.
        for sg in _subgraphs(inferred):
            self._add_types(list(sg.input) + list(sg.output) + list(sg.value_info), sg.initializer, sg.node)
        self.used = used_names(g) | {o.name for o in g.output}
        self.all_names = _all_names(g)

    def _add_types(self, value_infos, initializers, nodes) -> None:
        for vi in value_infos:
            tt = vi.type.tensor_type
            if tt.elem_type:
                self.types.setdefault(vi.name, (tt.elem_type, None))
        for t in initializers:
            self.types.setdefault(t.name, (t.data_type, list(t.dims)))
        for n in nodes:
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1:
                for a in n.attribute:
                    if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                        self.types.setdefault(n.output[0], (a.t.data_type, list(a.t.dims)))

    def array(self, name: str) -> np.ndarray | None:
        t = self.consts.get(name)
        return None if t is None else numpy_helper.to_array(t)

    def unique(self, base: str) -> str:
        name, i = base, 1
        while name in self.all_names:
            name, i = f"{base}_{i}", i + 1
        self.all_names.add(name)
        return name


def used_names(graph) -> set[str]:
    """Every value name read by a node of the graph or of its subgraphs."""
    used = set()
    for n in graph.node:
        used.update(i for i in n.input if i)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                used |= used_names(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    used |= used_names(sg)
    return used


def _all_names(graph) -> set[str]:
    names = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {o.name for o in graph.output}
    for n in graph.node:
        names.update(n.input)
        names.update(n.output)
        names.add(n.name)
    return names


def _dims_hint(info, op, attrs):
    """(input_size, hidden_size) for a probe layer when weights are not constant."""
    hidden = attrs.hidden_size
    w = info.get("W")
    r = info.get("R")
    if hidden is None and r and r[1] and len(r[1]) == 3 and r[1][2]:
        hidden = r[1][2]
    inp = w[1][2] if w and w[1] and len(w[1]) == 3 and w[1][2] else 1
    return inp, hidden or 1


@dataclass(frozen=True)
class _Standard:
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

    @classmethod
    def read(cls, node, index: int, info: "_Graph") -> "_Standard":
        op = node.op_type
        inputs = list(node.input) + [""] * (len(customop.INPUTS[op]) - len(node.input))
        x_type = info.types.get(inputs[0]) or info.types.get(inputs[1])
        return cls(node, index, node.name or f"{op}_{index}", op, _attrs(node), inputs,
                   list(node.output) + [""] * (len(OUTPUTS[op]) - len(node.output)), x_type,
                   _DTYPES.get(x_type[0]) if x_type else None)

    def placed(self, where: str, reason: str, **extra) -> NodePlacement:
        return NodePlacement(index=self.index, name=self.name, op=self.op, dtype=self.dtype,
                             direction=str(self.raw.get("direction", "forward")),
                             layout=_as_int(self.raw.get("layout", 0)), hidden_size=self.raw.get("hidden_size"),
                             where=where, reason=reason, **extra)

    def present(self) -> dict[str, str]:
        """Input slot -> value name, for the inputs the node has."""
        return {n: s for n, s in zip(customop.INPUTS[self.op], self.inputs) if s}


@dataclass(frozen=True)
class Decision:
    """:func:`place`'s answer for one node: taken by the GPU path (``attrs``, ``layer``:
    the prebuilt layer, None when the weights are not constant) or left to ONNX Runtime
    (``placement.reason`` says why)."""

    placement: NodePlacement
    attrs: NodeAttrs | None = None
    constant: bool = False     # the weights are constants (the layer holds them)
    layer: Any = None
    arrays: dict | None = None  # constant weights, as the layer got them
    outputs: tuple = ()         # the outputs the graph reads (the first is the gated one)

    @property
    def taken(self) -> bool:
        return self.placement.where == "gpu"


def _device_name(layer) -> str:
    dev = getattr(layer, "device", None)
    if dev is None:
        return "Vulkan device"
    return str(getattr(dev, "name", dev))


def _refusal(std: _Standard, opset: int) -> str | None:
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


def _build(std: _Standard, attrs: NodeAttrs, info: "_Graph", device, mode=None):
    """(layer, weight arrays) for constant weights; (None, None) after a probe with dummy
    weights otherwise (the kernels refuse dtype/attribute combinations at construction,
    whatever the sizes). Raises the kernels' refusal."""
    op, np_dt, present = std.op, _NP[std.dtype], std.present()
    if all(present[n] in info.consts for n in customop.WEIGHTS if n in present):
        arrays = {n: info.array(present[n]) if n in present else None for n in customop.WEIGHTS}
        arrays = {n: (None if a is None else np.ascontiguousarray(a.astype(np_dt, copy=False)))
                  for n, a in arrays.items()}
        return customop.build_layer(op, arrays, attrs, device, mode=mode), arrays
    inp, hid = _dims_hint({n: info.types.get(present.get(n, "")) for n in ("W", "R")}, op, attrs)
    dirs = 2 if attrs.direction == "bidirectional" else 1
    G = GATES[op]
    dummy = {"W": np.zeros((dirs, G * hid, inp), np_dt), "R": np.zeros((dirs, G * hid, hid), np_dt),
             "B": None, "P": None}
    customop.build_layer(op, dummy, dataclasses.replace(attrs, hidden_size=hid), device, mode=mode)
    return None, None


def _read_outputs(std: _Standard, info: "_Graph") -> tuple:
    """The outputs the graph reads; when none, the first named one (or Y): the node still
    produces something."""
    used = [o for o, s in zip(OUTPUTS[std.op], std.outputs) if s and s in info.used]
    return tuple(used or [o for o, s in zip(OUTPUTS[std.op], std.outputs) if s][:1] or ["Y"])


def place(std: _Standard, info: "_Graph", opset: int, device, mode=None) -> Decision:
    """Take ``std`` (build its layer, or probe one) or leave it to ONNX Runtime, with why."""
    reason = _refusal(std, opset)
    if reason is not None:
        return Decision(std.placed("cpu", reason))
    try:
        attrs = _config_attrs(std.op, std.raw)
    except ValueError as e:
        return Decision(std.placed("cpu", str(e)))
    try:
        layer, arrays = _build(std, attrs, info, device, mode)
    except Exception as e:  # the kernels' refusal: the node stays on ORT's CPU kernel
        return Decision(std.placed("cpu", f"not taken by the GPU path: {type(e).__name__}: {e}"))
    constant = arrays is not None
    outputs = _read_outputs(std, info)
    return Decision(std.placed("gpu", _device_name(layer) if layer is not None else "Vulkan device",
                               weights="constant, uploaded once" if constant else "inputs, compared each run",
                               outputs=outputs),
                    attrs, constant, layer, arrays, outputs)


class _Builder:
    """The graph-wide parts of a rewrite: unique names, the shared initializers (empty
    inputs, the check axes, a converted model's run token) and the float16 casts (one per
    source value)."""

    def __init__(self, info: "_Graph", opset: int):
        self.info = info
        self.opset = opset
        self.initializers: list[TensorProto] = []
        self._absent: dict[str, str] = {}
        self._casts: dict[str, str] = {}
        self._check_axes: str | None = None
        # The run token every custom node takes last (customop, "Errors"): a graph input that
        # ortops.InferenceSession feeds per run; in a converted model a constant 0.
        self.run_name = info.unique(customop.RUN_INPUT)

    def unique(self, base: str) -> str:
        return self.info.unique(base)

    def _constant(self, base: str, value: np.ndarray) -> str:
        name = self.unique(base)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def absent(self, kind: str) -> str:
        """The shared empty initializer of ``kind`` (int32, float32 or float64)."""
        if kind not in self._absent:
            np_dt = {"int32": np.int32, "float32": np.float32, "float64": np.float64}[kind]
            self._absent[kind] = self._constant(f"ortops_absent_{kind}", np.zeros((0,), np_dt))
        return self._absent[kind]

    def widened(self, src: str, nodes: list) -> str:
        """``src`` cast to float32 (float16 inputs of a Python op abort: customop's docstring);
        the Cast, made on first use, is appended to ``nodes``."""
        if src not in self._casts:
            self._casts[src] = self.unique(f"{src}__ortops_f32")
            nodes.append(helper.make_node("Cast", [src], [self._casts[src]], to=TensorProto.FLOAT,
                                          name=self.unique(f"{src}/ortops_widen")))
        return self._casts[src]

    def check(self, raw: str, out: str, node_name: str) -> onnx.NodeProto:
        """The check node ``Squeeze(raw, axes=[0])`` (customop's docstring). From opset 13 the
        axes are an input: one shared initializer (an initializer has no producer node, so no
        optimiser moves an edge of it)."""
        if self.opset < 13:
            return helper.make_node("Squeeze", [raw], [out], name=node_name, axes=[0])
        if self._check_axes is None:
            self._check_axes = self._constant("ortops_check_axes", np.zeros((1,), np.int64))
        return helper.make_node("Squeeze", [raw, self._check_axes], [out], name=node_name)

    def finish(self, proto: onnx.ModelProto, nodes: list, taken: bool, registry: bool) -> str | None:
        """Install ``nodes``, the shared initializers and, when a node was ``taken``, the run
        token (an input in registry mode, returned; else a constant 0) and the ortops opset
        import. Constants nothing reads any more go."""
        g = proto.graph
        run_input = None
        if taken and registry:
            g.input.append(helper.make_tensor_value_info(self.run_name, TensorProto.INT64, [1]))
            run_input = self.run_name
        elif taken:
            self.initializers.append(numpy_helper.from_array(np.zeros((1,), np.int64), self.run_name))
        del g.node[:]
        g.node.extend(nodes)
        g.initializer.extend(self.initializers)
        _drop_unused_constants(g)
        if taken and not any(i.domain == customop.DOMAIN for i in proto.opset_import):
            proto.opset_import.append(helper.make_opsetid(customop.DOMAIN, 1))
        return run_input


def _custom_inputs(std: _Standard, registry: bool, b: _Builder, nodes: list) -> list[str]:
    """The custom node's inputs: every slot of the op (empty initializers for absent inputs,
    and for the weights of a registry node; float16 widened), then the run token."""
    in_kind = "float64" if std.dtype == "float64" else "float32"
    new_in = []
    for n, src in zip(customop.INPUTS[std.op], std.inputs):
        if registry and n in customop.WEIGHTS:
            new_in.append(b.absent(in_kind))
        elif not src:
            new_in.append(b.absent("int32" if n == "sequence_lens" else in_kind))
        elif n == "sequence_lens" or std.dtype != "float16":
            new_in.append(src)
        else:
            new_in.append(b.widened(src, nodes))
    return new_in + [b.run_name]


def emit(std: _Standard, cfg: NodeConfig, b: _Builder) -> list[onnx.NodeProto]:
    """The nodes replacing ``std``: new float16 casts, the custom node, its check Squeeze."""
    nodes: list[onnx.NodeProto] = []
    op, name, gate = std.op, std.name, cfg.gate
    new_in = _custom_inputs(std, cfg.weights == "registry", b, nodes)
    new_out = []
    for o, s in zip(OUTPUTS[op], std.outputs):
        if o == gate:
            new_out.append(b.unique(f"{s or name + '_' + o}__ortops_raw"))
        elif o in cfg.outputs:
            new_out.append(s)
        else:
            new_out.append(b.unique(f"{name}__ortops_unused_{o}"))
    nodes.append(helper.make_node(customop.op_type(op, std.dtype), new_in, new_out, name=name,
                                  domain=customop.DOMAIN, config=cfg.to_json()))
    g = OUTPUTS[op].index(gate)
    gate_name = std.outputs[g] or b.unique(f"{name}_{gate}")
    nodes.append(b.check(new_out[g], gate_name,
                         b.unique(f"{name}/ortops_check (on failure the reason is in the ortops log)")))
    return nodes


def node_config(std: _Standard, d: Decision, key: str, weights: str, device,
                mode: str = DEFAULT_MODE) -> NodeConfig:
    """The config of a taken node (``weights``: the rewrite's mode)."""
    return NodeConfig(
        key=key, node=std.name, op=std.op, dtype=std.dtype, attrs=d.attrs,
        weights="registry" if weights == "registry" and d.constant else "inputs",
        absent=tuple(n for n, s in zip(customop.INPUTS[std.op], std.inputs) if not s),
        outputs=d.outputs, gate=d.outputs[0], mode=mode,
        device=None if device is None or weights == "registry" else str(getattr(device, "name", device)))


def _subgraph_placements(g, info: "_Graph", index: int) -> list[NodePlacement]:
    """Recurrent nodes inside subgraphs: left to ONNX Runtime, numbered from ``index``."""
    out = []
    for node, where in _subgraph_nodes(g):
        if _is_recurrent(node):
            raw = _attrs(node)
            # X's type (inferred inside the subgraph, or an outer value), else W's (an initializer)
            x_type = next((info.types[n] for n in node.input[:2] if n in info.types), None)
            out.append(NodePlacement(
                index=index, name=node.name or f"{node.op_type}_{index}", op=node.op_type,
                dtype=_DTYPES.get(x_type[0]) if x_type else None, direction=str(raw.get("direction", "forward")),
                layout=_as_int(raw.get("layout", 0)), hidden_size=raw.get("hidden_size"), where="cpu",
                reason=f"inside a subgraph ({where}); only main-graph nodes are rewritten"))
            index += 1
    return out


def _is_recurrent(node) -> bool:
    return node.op_type in RECURRENT and node.domain in ("", "ai.onnx")


def rewrite(model, *, weights: str = "registry", device=None, tag: str | None = None,
            mode=None) -> Rewritten:
    """Rewrite the recurrent nodes of ``model`` that the GPU path takes.

    weights: ``"registry"`` (constant weights kept out of the nodes; layers
    returned in ``Rewritten.layers`` for the caller to put in
    ``customop.REGISTRY``) or ``"inline"`` (weights stay node inputs; the
    layers built here seed the converted-model cache).
    device: passed to ``RecurrentLayer`` (None: ``ORTOPS_DEVICE`` or default).
    tag: prefix of the layer keys (default: a fresh UUID).
    mode: the numerical mode of every recurrent node (ortops.modes; None: "deterministic").
    """
    mode = check_mode(mode, "ortops")
    if weights not in ("registry", "inline"):
        raise ValueError(f"weights must be 'registry' or 'inline', not {weights!r}")
    proto = load_model(model)
    opset = default_opset(proto)
    tag = tag or uuid.uuid4().hex[:12]
    info = _Graph(proto)
    b = _Builder(info, opset)
    out = Rewritten(proto, [])
    nodes, index = [], 0
    for node in proto.graph.node:
        if not _is_recurrent(node):
            nodes.append(node)
            continue
        std = _Standard.read(node, index, info)
        index += 1
        d = place(std, info, opset, device, mode)
        out.placement.append(d.placement)
        if not d.taken:
            nodes.append(node)
            continue
        cfg = node_config(std, d, f"{tag}/{std.index}", weights, device, mode)
        nodes.extend(emit(std, cfg, b))
        _keep(out, cfg, d, weights, device)
    out.placement.extend(_subgraph_placements(proto.graph, info, index))
    out.run_input = b.finish(proto, nodes, taken=bool(out.keys), registry=weights == "registry")
    return out


def _keep(out: Rewritten, cfg: NodeConfig, d: Decision, weights: str, device) -> None:
    """Record a taken node: its prebuilt layer (registry), its device (registry, weights as
    inputs) or its layer in the converted-model cache (inline)."""
    if cfg.weights == "registry":
        out.layers[cfg.key] = d.layer
    elif weights == "registry":
        out.devices[cfg.key] = device
    elif d.layer is not None:
        customop.REGISTRY.seed_inline(cfg.key, d.arrays, d.layer)
    out.keys.append(cfg.key)


def _drop_unused_constants(g) -> None:
    """Remove initializers and Constant nodes nothing reads any more (weights
    now held by the registry), so the session does not keep a second copy."""
    used = used_names(g) | {o.name for o in g.output}
    keep = [t for t in g.initializer if t.name in used or t.name in {i.name for i in g.input}]
    if len(keep) != len(g.initializer):
        del g.initializer[:]
        g.initializer.extend(keep)
    nodes = [n for n in g.node
             if not (n.op_type == "Constant" and n.domain in ("", "ai.onnx") and not any(o in used for o in n.output))]
    if len(nodes) != len(g.node):
        del g.node[:]
        g.node.extend(nodes)
