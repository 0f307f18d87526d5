"""Writing a taken node: the ``ortops::<OP>`` custom node (``customop.py`` has its contract)
with its v4 config (the core's checked config, ``ortops.ort.placement``; ``ortops.ort.nodeconfig``).

Its inputs are ONNX's, in order (an absent optional one an empty name), its outputs the
computed ones (the rest empty names). Constant weights, wherever they are defined (an enclosing
scope, a Constant node, an exporter's data-movement chain), are read from initializers of the
node's own graph in its dtype (:meth:`Builder.weight`), so that the library's kernel gets them as
constant inputs and uploads them once; the chains they replace are collected for the rewrite
to remove.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ortops import vocabulary
from ortops.ort import customop, subgraphs
from ortops.ort.modelinfo import ModelInfo
from ortops.ort.nodeconfig import NodeConfig
from ortops.ort.placement import Decision, StandardNode
from ortops.validation import OUTPUTS

_ONNX = {name: helper.np_dtype_to_tensor_dtype(np.dtype(name)) for name in vocabulary.DTYPES}


class Builder:
    """The graph-wide parts of a rewrite: unique names and the graph whose nodes are being
    written (where a node's weight initializers go)."""

    def __init__(self, info: ModelInfo, graph: onnx.GraphProto):
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
        import. (The rewrite then removes the weight chains and constants nothing reads any more.)"""
        g = proto.graph
        del g.node[:]
        g.node.extend(nodes)
        if taken and not any(i.domain == customop.DOMAIN for i in proto.opset_import):
            proto.opset_import.append(helper.make_opsetid(customop.DOMAIN, 1))


def _custom_inputs(std: StandardNode, d: Decision, b: Builder, folded: set) -> list[str]:
    """The custom node's inputs: the op's inputs in order ("" where absent), constant
    weights from initializers of the node's graph (the chains they replace go to ``folded``)."""
    assert d.config is not None
    new_in = []
    for n, src in zip(customop.INPUTS[std.cell], std.inputs):
        if src and d.arrays is not None and n in customop.WEIGHTS:
            name, new = b.weight(src, d.arrays[n], d.config.dtype)
            if new:
                folded.update(o for node in b.info.folder.chain(src) or () for o in node.output)
            new_in.append(name)
        else:
            new_in.append(src)
    while new_in and not new_in[-1]:
        new_in.pop()
    return new_in


def emit(std: StandardNode, cfg: NodeConfig, d: Decision, b: Builder, folded: set) -> onnx.NodeProto:
    """The custom node replacing ``std``: its outputs are the standard node's computed ones
    ("" for the rest, which are not computed)."""
    op, name = std.cell, std.name
    new_out = []
    for o, s in zip(OUTPUTS[op], std.outputs):
        if o in cfg.outputs:
            new_out.append(s or b.unique(f"{name}_{o}"))
        else:
            new_out.append("")
    while new_out and not new_out[-1]:
        new_out.pop()
    return helper.make_node(customop.op_type(op, cfg.dtype), _custom_inputs(std, d, b, folded), new_out,
                            name=name, domain=customop.DOMAIN, config=cfg.to_json())
