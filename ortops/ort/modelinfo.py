"""Reading a model and the lookups the rewrite makes over it.

:func:`load_model` takes what ``onnxruntime.InferenceSession`` takes; :class:`ModelInfo` holds,
for every scope of the model (the main graph and every If/Loop/Scan body, whose value names are
unique model-wide: ``ortops.ort.subgraphs``), its constants (folded through data-movement
chains), element types and shapes, the names in use and the names read.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto

from ortops.ort import subgraphs
from ortops.ort.names import unique_name


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


class ModelInfo:
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
        self.producers = {o: n for sg in subgraphs.all_graphs(g) for n in sg.node for o in n.output if o}
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

    def unsqueezed(self, name: str) -> list[int] | None:
        """The axes of the ai.onnx Unsqueeze that makes ``name`` (its attribute, or its constant
        second input), as the execution provider reads them; None where another node makes it."""
        n = self.producers.get(name)
        if n is None or n.op_type != "Unsqueeze" or n.domain not in ("", "ai.onnx"):
            return None
        if len(n.input) >= 2 and n.input[1]:
            t = self.consts.get(n.input[1])   # an initializer or a Constant node, not folded
            return None if t is None or t.data_type != TensorProto.INT64 else \
                [int(a) for a in onnx.numpy_helper.to_array(t).ravel()]
        return next((list(a.ints) for a in n.attribute if a.name == "axes"), None)

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
