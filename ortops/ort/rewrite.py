"""Rewrite standard ai.onnx RNN/GRU/LSTM nodes into ortops custom nodes.

:func:`rewrite` walks the main graph and every If/Loop/Scan body (``ortops.ort.subgraphs``),
decides per recurrent node whether the GPU path takes it (by building its
:class:`ortops.RecurrentLayer`, which refuses unsupported dtype/attribute combinations and
shapes the device cannot run), and replaces the nodes it takes by ``ortops::<OP>`` nodes,
which the native custom-op library runs (``customop.py`` has their contract). A node it
cannot take stays a standard node that ORT's own CPU kernel runs; :class:`NodePlacement`
records where each node runs and why.

Weights: where a node's weights are constant (initializers of any enclosing scope, Constant
nodes, or data-movement chains of them, as exporters write them), the custom node reads them
from initializers of its own graph holding the folded values in the node's dtype, so that the
library's kernel gets them as constant inputs and uploads them once; the chains nothing else
reads go. Weights that are not constant stay inputs fed at run time.

Structure: per recurrent node, :func:`place` decides (a :class:`Decision`: taken, or left to
ORT with the reason), :func:`node_config` makes its
:class:`ortops.ort.nodeconfig.NodeConfig` and :func:`emit` its node; ``_Builder`` holds what
is graph-wide (unique names, the graph being written).
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
_ONNX = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}


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
    """Result of :func:`rewrite`: the new model and the placement of every recurrent node."""

    model: onnx.ModelProto
    placement: list[NodePlacement]
    configs: list[NodeConfig] = field(default_factory=list)   # of the custom nodes written


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
        clip=f32(raw["clip"]) if "clip" in raw and f32(raw["clip"]) != float("inf") else None,
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


def _folded_type(name: str, info: "_Graph") -> tuple | None:
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


def _read_outputs(std: _Standard, info: "_Graph") -> tuple:
    """The outputs the graph reads; when none, the first named one (or Y): the node still
    produces something."""
    used = [o for o, s in zip(OUTPUTS[std.op], std.outputs) if s and s in info.used]
    return tuple(used or [o for o, s in zip(OUTPUTS[std.op], std.outputs) if s][:1] or ["Y"])


def place(std: _Standard, info: "_Graph", opset: int, device, mode=None) -> Decision:
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


class _Builder:
    """The graph-wide parts of a rewrite: unique names and the graph whose nodes are being
    written (where a node's weight initializers go)."""

    def __init__(self, info: "_Graph", graph: onnx.GraphProto):
        self.info = info
        self.graph = graph                  # the graph whose nodes are being emitted
        self.scope = subgraphs.Scope()      # and its scope

    def unique(self, base: str) -> str:
        return self.info.unique(base)

    def weight(self, src: str, value: np.ndarray, dtype: str) -> tuple[str, bool]:
        """(the name the node reads weight ``src`` from, whether it is a new initializer): an
        initializer of this graph in the node's dtype is read as it is; anything else (a
        chain, a Constant, an outer scope's, another dtype) becomes an initializer of this
        graph holding ``value``."""
        for t in self.graph.initializer:
            if t.name == src and t.data_type == _ONNX[dtype] and src not in self.info.graph_inputs:
                return src, False
        name = self.unique(f"{src}__ortops")
        self.graph.initializer.append(numpy_helper.from_array(value, name))
        return name, True

    def finish(self, proto: onnx.ModelProto, nodes: list, taken: bool) -> None:
        """Install the main graph's ``nodes`` and, when a node was ``taken``, the ortops opset
        import. Constants nothing reads any more go (:func:`_tidy`)."""
        g = proto.graph
        del g.node[:]
        g.node.extend(nodes)
        if taken and not any(i.domain == customop.DOMAIN for i in proto.opset_import):
            proto.opset_import.append(helper.make_opsetid(customop.DOMAIN, 1))


def _custom_inputs(std: _Standard, d: "Decision", b: _Builder, folded: set) -> list[str]:
    """The custom node's inputs: the op's inputs in order ("" where absent), constant
    weights from initializers of the node's graph (the chains they replace go to ``folded``)."""
    new_in = []
    for n, src in zip(customop.INPUTS[std.op], std.inputs):
        if src and d.arrays is not None and n in customop.WEIGHTS:
            name, new = b.weight(src, d.arrays[n], std.dtype)
            if new:
                folded.update(o for node in b.info.folder.chain(src) or () for o in node.output)
            new_in.append(name)
        else:
            new_in.append(src)
    while new_in and not new_in[-1]:
        new_in.pop()
    return new_in


def emit(std: _Standard, cfg: NodeConfig, d: "Decision", b: _Builder, folded: set) -> onnx.NodeProto:
    """The custom node replacing ``std``: its outputs are the standard node's computed ones
    ("" for the rest, which are not computed)."""
    op, name = std.op, std.name
    new_out = []
    for o, s in zip(OUTPUTS[op], std.outputs):
        if o in cfg.outputs:
            new_out.append(s or b.unique(f"{name}_{o}"))
        else:
            new_out.append("")
    while new_out and not new_out[-1]:
        new_out.pop()
    return helper.make_node(customop.op_type(op, std.dtype), _custom_inputs(std, d, b, folded), new_out,
                            name=name, domain=customop.DOMAIN, config=cfg.to_json())


def node_config(std: _Standard, d: Decision, device, mode: str = DEFAULT_MODE) -> NodeConfig:
    """The config of a taken node."""
    return NodeConfig(
        node=_config_name(std.name), op=std.op, dtype=std.dtype, attrs=_used_parameters(d.attrs, std.op),
        absent=tuple(n for n, s in zip(customop.INPUTS[std.op], std.inputs) if not s),
        outputs=d.outputs, mode=mode, device=_device_uuid(d, device))


#: The config's node name is for messages; the decoder refuses longer ones (nodeconfig.hpp).
CONFIG_NAME_BYTES = 4096


def _config_name(name: str) -> str:
    """``name`` cut to at most 4096 bytes of UTF-8, on a character boundary."""
    data = name.encode("utf-8", "backslashreplace")
    return data[:CONFIG_NAME_BYTES].decode("utf-8", "ignore") if len(data) > CONFIG_NAME_BYTES else name


def _used_parameters(attrs: NodeAttrs, op: str) -> NodeAttrs:
    """``attrs`` with activation_alpha / activation_beta cut to the values the activations
    consume (ORT ignores the rest too; the decoder takes at most 64): the same layer."""
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


def _device_uuid(d: Decision, device) -> str | None:
    """How a node names its device: by UUID (two GPUs of one model share a name); None when
    none was asked for (the library then takes ORTOPS_DEVICE or the default, as here)."""
    if device is None:
        return None
    return d.device.uuid or None


def _is_recurrent(node) -> bool:
    return node.op_type in RECURRENT and node.domain in ("", "ai.onnx")


def rewrite(model, *, device=None, placement: str = "gpu", mode: str | None = None) -> Rewritten:
    """Rewrite the recurrent nodes of ``model`` that the GPU path takes.

    device: the device the nodes run on (written into their configs by UUID; None:
    ``ORTOPS_DEVICE`` or the default where the model runs).
    placement: ``"gpu"`` or ``"auto"`` (``ortops.ort.policy``).
    mode: the numerical mode of every recurrent node (ortops.modes; None: "deterministic").
    """
    policy.check(placement)
    mode = check_mode(mode, "ortops")
    proto = load_model(model)
    opset = default_opset(proto)
    info = _Graph(proto)
    b = _Builder(info, proto.graph)
    out = Rewritten(proto, [])
    folded: set[str] = set()  # outputs of weight chains now folded into the nodes' initializers
    taken = []

    def rewrite_nodes(graph, scope: subgraphs.Scope) -> list:
        """The new node list of ``graph`` (its bodies rewritten in place, depth first)."""
        nodes = []
        for node in graph.node:
            if quantized.is_quantized(node):
                std, d = _place_quantized(node, len(out.placement), info, opset, device, scope, mode)
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
            cfg = node_config(std, d, device, mode)
            out.configs.append(cfg)
            outer = (b.graph, b.scope)
            b.graph, b.scope = graph, scope
            nodes.append(emit(std, cfg, d, b, folded))
            b.graph, b.scope = outer
            taken.append(std.name)
        return nodes

    def rewrite_body(graph, scope: subgraphs.Scope) -> None:
        nodes = rewrite_nodes(graph, scope)
        del graph.node[:]
        graph.node.extend(nodes)

    try:
        nodes = rewrite_nodes(proto.graph, subgraphs.Scope())
    finally:
        # rewrite_nodes and rewrite_body refer to each other through their closure cells: left
        # so, that cycle kept `out` and `info` (the model's protobuf arena) until the next full
        # collection (docs/memory.md). Emptying one cell breaks it.
        rewrite_body = None  # noqa: F841
    b.finish(proto, nodes, taken=bool(taken))
    _tidy(proto, folded, info)
    return out


def _apply_policy(d: Decision, std: _Standard, info: "_Graph", device) -> Decision:
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


def _place_quantized(node, index: int, info: "_Graph", opset: int, device,
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
