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

Recurrent nodes inside subgraphs (If/Loop/Scan bodies, nested to any depth)
are rewritten like main-graph ones (``ortops.ort.subgraphs``): their custom node
reads the run token as an outer-scope value, its casts and check Squeeze go
into the subgraph, and constant weights (initializers of any enclosing scope,
Constant nodes, data-movement chains of them) are uploaded once per session.

Structure: per recurrent node, :func:`place` decides (a :class:`Decision`:
taken with its layer, or left to ORT with the reason), :func:`node_config`
makes its :class:`ortops.ort.nodeconfig.NodeConfig` and :func:`emit` its nodes
(float16 casts, the custom node, the check Squeeze); ``_Builder`` holds what
is graph-wide (unique names, the shared initializers, the run-token input).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ortops.ort import customop, policy, quantized, subgraphs
from ortops.ort.names import unique_name
from ortops.cells import CELLS
from ortops.modes import DEFAULT as DEFAULT_MODE, check_mode
from ortops.ort.nodeconfig import NodeAttrs, NodeConfig
from ortops.validation import GATES, OUTPUTS

log = logging.getLogger("ortops")

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
    path: str = ""  # the subgraph holding the node ("If 'x' then_branch / Loop 'l' body"); "" main graph

    def describe(self) -> str:
        """One line for reports such as ``ortops info``."""
        shape = f"{self.op} {self.direction} layout={self.layout} hidden={self.hidden_size} {self.dtype}"
        where = f"GPU ({self.reason})" if self.where == "gpu" else f"ONNX Runtime CPU ({self.reason})"
        extra = f", weights {self.weights}" if self.weights else ""
        outs = f", outputs {'/'.join(self.outputs)}" if self.outputs else ""
        node = f"{self.path} / {self.op} {self.name!r}" if self.path else repr(self.name)
        return f"#{self.index} {node}: {shape} -> {where}{extra}{outs}"


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
    """Lookups over the model, every scope (value names are unique model-wide, see
    ``ortops.ort.subgraphs``): constants, element types, consumers."""

    def __init__(self, model: onnx.ModelProto):
        g = model.graph
        self.model = model
        self.graph_inputs = {i.name for i in g.input}
        self.consts: dict[str, TensorProto] = {}
        for sg in subgraphs.all_graphs(g):
            inputs = {i.name for i in sg.input}
            for t in sg.initializer:
                if t.name not in inputs:  # an initializer that is also an input can be fed
                    self.consts[t.name] = t
            for n in sg.node:
                t = subgraphs.constant_tensor(n)
                if t is not None:
                    self.consts[n.output[0]] = t
        self.folder = subgraphs.Folder(model, self.consts)
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
        for sg in list(subgraphs.all_graphs(inferred))[1:]:
            self._add_types(list(sg.input) + list(sg.output) + list(sg.value_info), sg.initializer, sg.node)
        self.all_names: set[str] = set()
        for sg in subgraphs.all_graphs(g):
            self.all_names |= _all_names(sg)
        self.used = self.read_names()

    def read_names(self) -> set[str]:
        """Names read by a node of any scope or returned by any graph (main or body)."""
        g = self.model.graph
        return used_names(g) | {o.name for sg in subgraphs.all_graphs(g) for o in sg.output}

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
        """The constant value of ``name`` (folded through data-movement ops), else None."""
        return self.folder.value(name) if name else None

    def unique(self, base: str) -> str:
        return unique_name(self.all_names, base)


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
    scope: subgraphs.Scope = subgraphs.Scope()

    @classmethod
    def read(cls, node, index: int, info: "_Graph", scope: subgraphs.Scope = subgraphs.Scope()) -> "_Standard":
        op = node.op_type
        inputs = list(node.input) + [""] * (len(customop.INPUTS[op]) - len(node.input))
        x_type = info.types.get(inputs[0]) or info.types.get(inputs[1]) or _folded_type(inputs[1], info)
        return cls(node, index, node.name or f"{op}_{index}", op, _attrs(node), inputs,
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


def _folded_type(name: str, info: "_Graph") -> tuple | None:
    """(element type, dims) of a constant computed from constants (e.g. W in an exporter's
    If branch, which shape inference may leave untyped)."""
    arr = info.array(name)
    if arr is None:
        return None
    return (onnx.helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape))


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
    if all(info.array(present[n]) is not None for n in customop.WEIGHTS if n in present):
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
        self._casts: dict[tuple, str] = {}   # (scope, source) -> its float32 cast in that scope
        self.scope = subgraphs.Scope()      # the graph whose nodes are being emitted
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
        key = (self.scope, src)  # a cast made in one subgraph is not visible in another
        if key not in self._casts:
            self._casts[key] = self.unique(f"{src}__ortops_f32")
            nodes.append(helper.make_node("Cast", [src], [self._casts[key]], to=TensorProto.FLOAT,
                                          name=self.unique(f"{src}/ortops_widen")))
        return self._casts[key]

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
        import. Constants nothing reads any more go (:func:`_tidy`)."""
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
        device=None if device is None or weights == "registry" else _device_spec(device))


def _device_spec(device) -> str:
    """How a converted model names its device: a Device by UUID (two GPUs of one model share
    a name, so a name would send every node to the first), anything else as given."""
    return str(getattr(device, "uuid", "") or getattr(device, "name", device))


def _is_recurrent(node) -> bool:
    return node.op_type in RECURRENT and node.domain in ("", "ai.onnx")


def rewrite(model, *, weights: str = "registry", device=None, tag: str | None = None,
            placement: str = "gpu", mode: str | None = None) -> Rewritten:
    """Rewrite the recurrent nodes of ``model`` that the GPU path takes.

    weights: ``"registry"`` (constant weights kept out of the nodes; layers
    returned in ``Rewritten.layers`` for the caller to put in
    ``customop.REGISTRY``) or ``"inline"`` (weights stay node inputs; the
    layers built here seed the converted-model cache).
    device: passed to ``RecurrentLayer`` (None: ``ORTOPS_DEVICE`` or default).
    tag: prefix of the layer keys (default: a fresh UUID).
    placement: ``"gpu"`` or ``"auto"`` (``ortops.ort.policy``).
    mode: the numerical mode of every recurrent node (ortops.modes; None: "deterministic").
    """
    policy.check(placement)
    mode = check_mode(mode, "ortops")
    if weights not in ("registry", "inline"):
        raise ValueError(f"weights must be 'registry' or 'inline', not {weights!r}")
    proto = load_model(model)
    opset = default_opset(proto)
    tag = tag or uuid.uuid4().hex[:12]
    info = _Graph(proto)
    b = _Builder(info, opset)
    out = Rewritten(proto, [])
    folded: set[str] = set()  # outputs of weight chains the layers now hold (registry mode)

    def rewrite_nodes(graph, scope: subgraphs.Scope) -> list:
        """The new node list of ``graph`` (its bodies rewritten in place, depth first)."""
        nodes = []
        for node in graph.node:
            if quantized.is_quantized(node):
                std, d = _place_quantized(node, len(out.placement), info, b, opset, device, scope, mode)
            elif _is_recurrent(node):
                std = _Standard.read(node, len(out.placement), info, scope)
                d = place(std, info, opset, device, mode)
            else:
                subgraphs.rewrite_subgraphs(node, scope, rewrite_body)
                nodes.append(node)
                continue
            if placement != "gpu" and d.taken:
                d = _apply_policy(d, std, info, device)
            out.placement.append(d.placement)
            if not d.taken:
                nodes.append(node)
                continue
            cfg = node_config(std, d, f"{tag}/{std.index}", weights, device, mode)
            b.scope = scope
            nodes.extend(emit(std, cfg, b))
            _keep(out, cfg, d, weights, device)
            if cfg.weights == "registry":
                folded.update(o for w, src in std.present().items() if w in customop.WEIGHTS
                              for n in info.folder.chain(src) or () for o in n.output)
        return nodes

    def rewrite_body(graph, scope: subgraphs.Scope) -> None:
        nodes = rewrite_nodes(graph, scope)
        del graph.node[:]
        graph.node.extend(nodes)

    try:
        nodes = rewrite_nodes(proto.graph, subgraphs.Scope())
    finally:
        # rewrite_nodes and rewrite_body refer to each other through their closure cells: left
        # so, that cycle kept `out` (the layers) and `info` (the model's protobuf arena) until
        # the next full collection, about 0.1 MB of arena per session of the small recognizer
        # and the whole model for a large one (docs/memory.md). Emptying one cell breaks it.
        rewrite_body = None  # noqa: F841
    out.run_input = b.finish(proto, nodes, taken=bool(out.keys), registry=weights == "registry")
    _tidy(proto, folded, info)
    return out


def _apply_policy(d: Decision, std: _Standard, info: "_Graph", device) -> Decision:
    """``d`` under placement "auto" (ortops.ort.policy): the node's layer dropped and the node
    left to ONNX Runtime where the cost model predicts its CPU faster; the prediction in the
    report either way."""
    from ortops.device import select

    dims = lambda name: (info.types.get(name) or (None, None))[1]  # noqa: E731
    dev = d.layer.device if d.layer is not None else select(device)
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


def _place_quantized(node, index: int, info: "_Graph", b: _Builder, opset: int, device,
                     scope: subgraphs.Scope = subgraphs.Scope(), mode=None):
    """(std, decision) for a com.microsoft DynamicQuantizeLSTM (ortops.ort.quantized): placed as
    the ai.onnx LSTM with its weights dequantized once (new initializers, used by a converted
    model), reported under its own op type."""
    arrays, note = quantized.dequantized_weights(node, info.array)
    names = dict(zip(("W", "R"), (list(node.input) + ["", ""])[1:3]))
    if arrays is not None:
        for w, a in arrays.items():
            names[w] = b.unique(f"{names[w]}__ortops_dequantized")
            t = numpy_helper.from_array(a, names[w])
            info.consts[names[w]], info.types[names[w]] = t, (TensorProto.FLOAT, list(a.shape))
            b.initializers.append(t)   # dropped by finish() unless a converted model's node reads it
    std = _Standard.read(quantized.as_lstm(node, names), index, info, scope)
    d = place(std, info, opset, device, mode) if arrays is not None else Decision(std.placed("cpu", note))
    p = d.placement
    # T is float32 only: the type of a node X whose producer shape inference does not know
    weights = f"{note}, dequantized to float32 and uploaded once" if d.taken else p.weights
    p = dataclasses.replace(p, op=quantized.OP, dtype=p.dtype or "float32", weights=weights)
    return std, dataclasses.replace(d, placement=p)


def _tidy(proto: onnx.ModelProto, folded: set, info: "_Graph") -> None:
    """Remove the weight chains the layers now hold (``folded``: their output names), then
    the initializers and Constant nodes nothing reads any more, in every scope; repeated while
    something goes (one pass per link of a chain: 4 for TorchScript's Slice/Concat/Unsqueeze)."""
    graphs = list(subgraphs.all_graphs(proto.graph))
    while True:
        live = info.read_names()
        removed = sum(subgraphs.prune(g, folded, live) for g in graphs) if folded else 0
        removed += sum(_drop_unused_constants(g, live) for g in graphs)
        if not removed:
            return


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


def _drop_unused_constants(g, used: set | None = None) -> int:
    """Remove initializers and Constant nodes nothing reads any more (weights
    now held by the registry), so the session does not keep a second copy.
    ``used``: the names read anywhere in the model (default: in ``g`` and its bodies).
    Returns how many went."""
    used = used if used is not None else used_names(g) | {o.name for o in g.output}
    before = len(g.initializer) + len(g.node)
    inputs = {i.name for i in g.input}
    keep = [t for t in g.initializer if t.name in used or t.name in inputs]
    if len(keep) != len(g.initializer):
        del g.initializer[:]
        g.initializer.extend(keep)
    nodes = [n for n in g.node
             if not (n.op_type == "Constant" and n.domain in ("", "ai.onnx") and not any(o in used for o in n.output))]
    if len(nodes) != len(g.node):
        del g.node[:]
        g.node.extend(nodes)
    return before - len(g.initializer) - len(g.node)
