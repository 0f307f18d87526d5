"""Layout-0 float32 equivalent of a model, for stock ONNX Runtime CPU.

ORT's CPU kernels refuse ``layout = 1`` recurrent nodes and have no float16
RNN/GRU/LSTM, so they cannot check those models directly. The equivalent
model computes the same function in float32 with every recurrent node in
layout 0 (the batch-first tensors are transposed around it, as Operators.md
defines layout 1). Widening float16 to float32 is exact, so it is the
natural oracle for a float16 run (the float16 run is then compared with the
2e-3 tolerance).

:func:`cpu_feeds` widens the feeds the same way.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ortops.cells import CELLS
from ortops.ort.names import unique_name
from ortops.ort.rewrite import load_model


def _widen_tensor(t: TensorProto) -> None:
    if t.data_type == TensorProto.FLOAT16:
        arr = numpy_helper.to_array(t).astype(np.float32)
        t.CopyFrom(numpy_helper.from_array(arr, t.name))


def _widen_type(tp: onnx.TypeProto) -> None:
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        if tp.tensor_type.elem_type == TensorProto.FLOAT16:
            tp.tensor_type.elem_type = TensorProto.FLOAT
    elif which == "sequence_type":
        _widen_type(tp.sequence_type.elem_type)
    elif which == "optional_type":
        _widen_type(tp.optional_type.elem_type)


def _widen_graph(g: onnx.GraphProto) -> None:
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        _widen_type(vi.type)
    for t in g.initializer:
        _widen_tensor(t)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                _widen_tensor(a.t)
            elif a.type == onnx.AttributeProto.GRAPH:
                _widen_graph(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    _widen_graph(sg)
            elif a.type == onnx.AttributeProto.INT and a.name in ("to", "dtype") and a.i == TensorProto.FLOAT16:
                a.i = TensorProto.FLOAT


def _layout0_graph(g: onnx.GraphProto) -> None:
    names = {i.name for i in g.input} | {t.name for t in g.initializer} | {o.name for o in g.output}
    for n in g.node:
        names.update(n.input)
        names.update(n.output)
    out_nodes = []
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _layout0_graph(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sg in a.graphs:
                    _layout0_graph(sg)
        layout = [a for a in n.attribute if a.name == "layout"]
        if n.op_type not in CELLS or n.domain not in ("", "ai.onnx") or not layout or layout[0].i == 0:
            out_nodes.append(n)
            continue
        layout[0].i = 0
        c = CELLS[n.op_type]
        # X, initial_h, initial_c: batch-first -> sequence/direction-first.
        for idx in (c.inputs.index(x) for x in ("X", "initial_h", "initial_c") if x in c.inputs):
            if idx < len(n.input) and n.input[idx]:
                t = unique_name(names, n.input[idx] + "_layout0")
                out_nodes.append(helper.make_node("Transpose", [n.input[idx]], [t], perm=[1, 0, 2]))
                n.input[idx] = t
        post = []
        for idx, name in enumerate(c.outputs):
            perm = [2, 0, 1, 3] if name == "Y" else [1, 0, 2]   # Y; Y_h and Y_c
            if idx < len(n.output) and n.output[idx]:
                t = unique_name(names, n.output[idx] + "_layout0")
                post.append(helper.make_node("Transpose", [t], [n.output[idx]], perm=perm))
                n.output[idx] = t
        out_nodes.append(n)
        out_nodes.extend(post)
    del g.node[:]
    g.node.extend(out_nodes)


def cpu_equivalent(model) -> onnx.ModelProto:
    """Return a float32, layout-0 model equivalent to ``model`` (path, bytes
    or ModelProto; not modified). The original output names keep their
    batch-first shapes: they are now the outputs of the Transposes."""
    m = load_model(model)
    _widen_graph(m.graph)
    _layout0_graph(m.graph)
    return m


def cpu_feeds(feeds: dict) -> dict:
    """Feeds for the equivalent model: float16 arrays widened to float32."""
    return {k: (np.asarray(v).astype(np.float32) if np.asarray(v).dtype == np.float16 else v)
            for k, v in feeds.items()}
