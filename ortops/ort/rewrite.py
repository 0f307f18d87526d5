"""Rewrite standard ai.onnx RNN/GRU/LSTM nodes into ortops custom nodes.

:func:`rewrite` walks the main graph and every If/Loop/Scan body (``ortops.ort.subgraphs``) and,
per recurrent node (``com.microsoft.DynamicQuantizeLSTM`` too, ``ortops.ort.quantized``):

* decides where it runs (``ortops.ort.placement``: the native core's node checker, the one the
  execution provider asks, nothing uploaded; under placement ``"auto"`` the calibrated cost
  model may leave it to ONNX Runtime CPU). A node left there stays the standard node that ORT's
  own kernel runs; :class:`NodePlacement` records where each node runs and why;
* writes a taken node as an ``ortops::<OP>`` node with its config (``ortops.ort.emit``), which
  the native custom-op library runs (``customop.py`` has their contract).

Weights: where a node's weights are constant (initializers of any enclosing scope, Constant
nodes, or data-movement chains of them, as exporters write them), the custom node reads them
from initializers of its own graph holding the folded values in the node's dtype, so that the
library's kernel gets them as constant inputs and uploads them once; the chains nothing else
reads go (:func:`_tidy`). Weights that are not constant stay inputs fed at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from ortops.cells import CELLS
from ortops.modes import check_mode
from ortops.ort import policy, quantized, subgraphs
from ortops.ort.emit import Builder, emit
from ortops.ort.modelinfo import ModelError, ModelInfo, default_opset, load_model, op_version, used_names
from ortops.ort.nodeconfig import NodeConfig
from ortops.ort.placement import Decision, NodePlacement, StandardNode, path_step, place

__all__ = ["RECURRENT", "ModelError", "NodePlacement", "Rewritten", "Decision", "default_opset", "emit",
           "load_model", "op_version", "has_recurrent", "place", "recurrent_nodes", "rewrite", "survey",
           "used_names"]

#: The standard op types the rewrite replaces (ortops.cells).
RECURRENT = tuple(CELLS)


@dataclass
class Rewritten:
    """Result of :func:`rewrite`: the new model and the placement of every recurrent node."""

    model: onnx.ModelProto
    placement: list[NodePlacement]
    configs: list[NodeConfig] = field(default_factory=list)   # of the custom nodes written


def _is_recurrent(node) -> bool:
    return node.op_type in RECURRENT and node.domain in ("", "ai.onnx")


def has_recurrent(proto: onnx.ModelProto) -> bool:
    """Whether any graph of ``proto`` (the main one or an If/Loop/Scan body) has a node that
    :func:`survey` places (reads op types only; checks nothing)."""
    return any(_is_recurrent(n) or quantized.is_quantized(n)
               for g in subgraphs.all_graphs(proto.graph) for n in g.node)


def _decide(node, index: int, info: ModelInfo, opset: int, device, scope: subgraphs.Scope, mode: str,
            placement: str) -> tuple[StandardNode, Decision] | None:
    """(the node as read, where it runs) for a recurrent node; None for any other node."""
    if not (_is_recurrent(node) or quantized.is_quantized(node)):
        return None
    std = StandardNode.read(node, index, scope)
    return std, place(std, info, opset, device, mode, placement)


def recurrent_nodes(graph: onnx.GraphProto, scope: subgraphs.Scope = subgraphs.Scope(), path: str = ""):
    """(node, scope, path) for every recurrent node of ``graph`` and its If/Loop/Scan bodies, in
    the order :func:`survey` and :func:`rewrite` place them (a body where its node stands);
    ``path`` names the body holding it as the execution provider's decisions do
    (placement.path_step: the innermost)."""
    for node in graph.node:
        if _is_recurrent(node) or quantized.is_quantized(node):
            yield node, scope, path
            continue
        for a, body in subgraphs.graph_attributes(node):
            yield from recurrent_nodes(body, scope.inside(node, a.name), path_step(node, body))


def survey(proto: onnx.ModelProto, *, device=None, mode: str | None = None, placement: str = "gpu") -> Rewritten:
    """Where each recurrent node of ``proto`` runs under ``placement`` ("gpu" or "auto": the
    core's cost model, as the execution provider decides it), and the config of
    each taken node, decided as :func:`rewrite` decides (the same walk, order and checker),
    writing nothing: ``Rewritten.model`` is ``proto`` itself, unchanged. What
    ``ortops.InferenceSession`` reports where it has no execution provider (the EP, asked the
    same question of the same native checker, records its own answers otherwise)."""
    mode = check_mode(mode, "ortops")
    info = ModelInfo(proto)
    opset = default_opset(proto)
    out = Rewritten(proto, [])

    def walk(graph, scope: subgraphs.Scope) -> None:
        for node in graph.node:
            decided = _decide(node, len(out.placement), info, opset, device, scope, mode, placement)
            if decided is None:
                subgraphs.rewrite_subgraphs(node, scope, walk)   # reads the bodies only
                continue
            std, d = decided
            out.placement.append(d.placement)
            if d.config is not None:
                out.configs.append(d.config)

    try:
        walk(proto.graph, subgraphs.Scope())
    finally:
        walk = None  # noqa: F841 - its closure cell refers to itself: a cycle holding `info` (see rewrite)
    return out


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
    info = ModelInfo(proto)
    b = Builder(info, proto.graph)
    out = Rewritten(proto, [])
    folded: set[str] = set()  # outputs of weight chains now folded into the nodes' initializers
    taken = []

    def rewrite_nodes(graph, scope: subgraphs.Scope) -> list:
        """The new node list of ``graph`` (its bodies rewritten in place, depth first)."""
        nodes = []
        for node in graph.node:
            decided = _decide(node, len(out.placement), info, opset, device, scope, mode, placement)
            if decided is None:
                subgraphs.rewrite_subgraphs(node, scope, rewrite_body)
                nodes.append(node)
                continue
            std, d = decided
            out.placement.append(d.placement)
            if not d.taken:
                nodes.append(node)
                continue
            cfg = d.config
            assert cfg is not None
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


def _tidy(proto: onnx.ModelProto, folded: set, info: ModelInfo) -> None:
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
    """Remove initializers and Constant nodes nothing reads any more (weights the custom
    nodes now read from initializers of their own), so the session does not keep a second copy.
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


from ortops._deprecated import attribute, module_getattr  # noqa: E402 - the deprecated names, after what they use

__getattr__ = module_getattr(__name__, {
    "SUPPORTED_VERSIONS": ("ortops.vocabulary.SUPPORTED_VERSIONS (the core's)",
                           attribute("ortops.vocabulary", "SUPPORTED_VERSIONS")),
})
