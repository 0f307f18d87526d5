"""Recurrent nodes inside control flow: walking If/Loop/Scan bodies, and weights that exporters
compute from constants.

The rewrite (``ortops.ort.rewrite``) treats every graph the same way: the main graph and each
subgraph (``If`` then_branch/else_branch, ``Loop`` body, ``Scan`` body, nested to any depth)
is a list of nodes in which recurrent nodes are replaced. This module says where a subgraph
is (:class:`Scope`, the path the placement report prints, e.g.
``If 'x' then_branch / Loop 'l' body``), walks the graph attributes of a node
(:func:`rewrite_subgraphs`) and finds constant weights that are not plain initializers
(:class:`Folder`).

Why folding: TorchScript's exporter writes an LSTM inside an ``If`` with its weights as
``Unsqueeze(Concat(Slice(weight_ih, ...), ...))`` of the main graph's initializers (PyTorch's
gate order i f g o reordered to ONNX's i o f c); silero-vad's VAD models have every LSTM so.
Those chains move data only, so their value is known when the model is loaded: the layer is
built with it (weights uploaded once per session, however often the body runs) and the chain,
which nothing reads any more, is removed from the subgraph. Only data-movement ops are folded
(:data:`FOLDABLE`): their result is the same bits whoever computes it. Weights computed with
arithmetic stay node inputs (``weights inputs, compared each run``).

Names: ONNX requires every value name to be unique across the model, subgraphs included (a
subgraph may read an outer name but not redefine it), so one table of constants, producers
and types serves every scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import numpy_helper

#: Ops whose output is a rearrangement of their inputs' elements (exact: no arithmetic), with
#: Cast (IEEE round to nearest even, as ONNX Runtime's Cast) and Shape/Size of a constant.
FOLDABLE = frozenset({
    "Identity", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Transpose", "Concat", "Slice",
    "Split", "Gather", "Expand", "Tile", "Cast", "Shape", "Size", "Constant",
})
#: Graph attributes that hold a body, by op (ai.onnx).
BODIES = {"If": ("then_branch", "else_branch"), "Loop": ("body",), "Scan": ("body",)}


@dataclass(frozen=True)
class Scope:
    """Where a graph sits: () for the main graph, else the chain of (op, node name, attribute)."""

    steps: tuple = ()

    def inside(self, node: onnx.NodeProto, attribute: str) -> "Scope":
        return Scope(self.steps + ((node.op_type, node.name or "(unnamed)", attribute),))

    @property
    def is_main(self) -> bool:
        return not self.steps

    def describe(self) -> str:
        """``If 'x' then_branch / Loop 'l' body`` (empty for the main graph)."""
        return " / ".join(f"{op} {name!r} {attr}" for op, name, attr in self.steps)


def graph_attributes(node: onnx.NodeProto):
    """(attribute, graph) for every graph-valued attribute of ``node``."""
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a, a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            for g in a.graphs:
                yield a, g


def all_graphs(graph: onnx.GraphProto):
    """``graph`` and every subgraph inside it, nested ones included."""
    yield graph
    for n in graph.node:
        for _, sg in graph_attributes(n):
            yield from all_graphs(sg)


def rewrite_subgraphs(node: onnx.NodeProto, scope: Scope,
                      rewrite_graph: Callable[[onnx.GraphProto, Scope], None]) -> None:
    """Call ``rewrite_graph(subgraph, scope)`` for each body of ``node`` (in place)."""
    for a, sg in graph_attributes(node):
        rewrite_graph(sg, scope.inside(node, a.name))


def constant_tensor(node: onnx.NodeProto):
    """The value of an ai.onnx ``Constant`` node with a tensor ``value`` (else None)."""
    if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1:
        for a in node.attribute:
            if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                return a.t
    return None


class Folder:
    """Values computable from constants by data-movement ops, across all scopes.

    ``consts``: name -> TensorProto of the initializers and Constant nodes (not graph inputs);
    ``producers``: name -> the node computing it. :meth:`value` folds on demand and caches;
    :meth:`chain` lists the nodes a folded value came from (to remove them once unused).
    """

    def __init__(self, model: onnx.ModelProto, consts: dict):
        self.consts = consts
        self.opset = model.opset_import
        self.ir_version = model.ir_version
        self.producers: dict[str, onnx.NodeProto] = {}
        for g in all_graphs(model.graph):
            for n in g.node:
                for o in n.output:
                    if o:
                        self.producers[o] = n
        self._cache: dict[str, np.ndarray | None] = {}
        self._chains: dict[str, list | None] = {}

    def chain(self, name: str) -> list:
        """The nodes (in order) that compute ``name`` from constants, or None if it is not so
        computed (a graph input, a non-foldable op, a value of unknown origin on the way)."""
        if name not in self._chains:  # memoised: exporters share sub-chains (one weight, 3 Slices)
            self._chains[name] = self._chain(name)
        return self._chains[name]

    def _chain(self, name: str) -> list:
        if name in self.consts:
            return []
        n = self.producers.get(name)
        if n is None or n.domain not in ("", "ai.onnx") or n.op_type not in FOLDABLE:
            return None
        if n.op_type == "Constant":
            return [n] if constant_tensor(n) is not None else None
        out = []
        for i in n.input:
            if not i:
                continue
            sub = self.chain(i)
            if sub is None:
                return None
            out.extend(x for x in sub if x not in out)
        return out + [n]

    def value(self, name: str) -> np.ndarray | None:
        """The array ``name`` always has, or None when it is not a folded constant."""
        if name in self._cache:
            return self._cache[name]
        if name in self.consts:
            try:
                arr = numpy_helper.to_array(self.consts[name])
            except (KeyError, TypeError, ValueError):   # a tensor onnx cannot read (an unknown data type)
                arr = None
        else:
            nodes = self.chain(name)
            arr = None if not nodes else self._evaluate(nodes, name)
        self._cache[name] = arr
        return arr

    def _evaluate(self, nodes: list, name: str) -> np.ndarray | None:
        from onnx.reference import ReferenceEvaluator

        needed = {i for n in nodes for i in n.input if i} - {o for n in nodes for o in n.output}
        inits = []
        for i in sorted(needed):  # a Constant node's tensor carries no (or another) name
            t = onnx.TensorProto()
            t.CopyFrom(self.consts[i])
            t.name = i
            inits.append(t)
        graph = onnx.helper.make_graph(list(nodes), "fold", [], [onnx.helper.make_value_info(name, onnx.TypeProto())],
                                       initializer=inits)
        model = onnx.helper.make_model(graph, opset_imports=list(self.opset), ir_version=self.ir_version)
        try:
            (arr,) = ReferenceEvaluator(model).run(None, {})
        except Exception:  # an op the reference cannot run: the weights stay node inputs
            return None
        return np.asarray(arr)


def prune(graph: onnx.GraphProto, candidates: set, live: set) -> int:
    """Remove from ``graph`` the nodes among ``candidates`` (folded weight chains) whose
    outputs are not ``live`` (read anywhere in the model, graph outputs included); returns how
    many went. ``candidates`` holds the nodes' output names (unique in a model; protobuf
    messages are not hashable). The caller repeats while something goes (a Slice feeding only
    a removed Concat goes in the next pass)."""
    keep = [n for n in graph.node if not (set(n.output) & candidates) or any(o in live for o in n.output)]
    removed = len(graph.node) - len(keep)
    if removed:
        del graph.node[:]
        graph.node.extend(keep)
    return removed
