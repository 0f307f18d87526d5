"""``com.microsoft.DynamicQuantizeLSTM`` as an ai.onnx LSTM with dequantized weights.

``onnxruntime.quantization.quantize_dynamic`` turns each LSTM into a DynamicQuantizeLSTM:
its W ``[num_directions, input_size, 4*hidden]`` and R ``[num_directions, hidden, 4*hidden]``
(transposed relative to ai.onnx LSTM, gates in the same i, o, f, c order along the last
axis) are int8 or uint8, with ``W_scale``/``W_zero_point`` and ``R_scale``/``R_zero_point``
per tensor (``[num_directions]``) or per channel (``[num_directions, 4*hidden]``; ORT's kernel
then requires int8 zero points all 0 and uint8 ones all equal, and refuses the node otherwise,
so ortops leaves such a node to it). Every
other input and attribute is LSTM's (no ``layout``: the op is layout 0).

The device path takes such a node as an LSTM whose weights are dequantized once, when its
layer is built: ``(q - zero_point) * scale`` in float64 (exact: an integer of at most 9 bits
times a float32), rounded once to float32 and transposed to ai.onnx's layout. The rules (what
is admitted, with which message) and the formula are the native core's
(``src/core/config/quantized.hpp``), which the execution provider applies too: :func:`dequantize`
calls it, and the placement asks the core's node checker (``ortops.ort.placement``). The device then
computes the dequantized model to float32's tolerance; ORT CPU's own kernel also quantizes
the activations (X and the hidden state, to uint8 at every step), which the device does not,
so the two differ by about ORT's activation-quantization error (how the results are judged:
:func:`ortops.compare.quantized_problems`; the figures: docs/onnxruntime.md, "Quantized LSTM").

Only constant weights, scales and zero points are dequantized (a node whose quantized weights
are graph inputs or computed stays on ORT CPU, with the reason in the placement report).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortops.ort.names import unique_name

OP = "DynamicQuantizeLSTM"
DOMAIN = "com.microsoft"
#: The op's inputs in order (ONNX Runtime's ContribOperators.md).
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P",
          "W_scale", "W_zero_point", "R_scale", "R_zero_point")
#: The quantized weights, each with its scale and zero point.
QUANTIZED = {"W": ("W_scale", "W_zero_point"), "R": ("R_scale", "R_zero_point")}


def is_quantized(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is a com.microsoft DynamicQuantizeLSTM."""
    return node.op_type == OP and node.domain == DOMAIN


def dequantize(name: str, q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """The float32 ai.onnx LSTM weight ``[num_directions, 4*hidden, cols]`` of the quantized
    DynamicQuantizeLSTM weight ``name`` (``"W"`` or ``"R"``, ``[num_directions, cols,
    4*hidden]``): the core's rule (``src/core/config/quantized.hpp``, the EP's too). Raises
    ValueError naming the operator, the argument, what was expected and what came."""
    return _native().dequantize_lstm_weight(name, np.asarray(q), np.asarray(scale), np.asarray(zero_point))


def _native():
    from ortops.device import _native as native

    return native()


def _padded(node) -> list:
    return list(node.input) + [""] * (len(INPUTS) - len(node.input))


def _dequantized_weights(node: onnx.NodeProto, constant) -> dict | None:
    """``{"W": ..., "R": ...}`` of a DynamicQuantizeLSTM whose quantized weights, scales and zero
    points are all constants (``constant(name)``: its array, or None) the core's rule admits;
    else None (the node is kept as it is)."""
    inputs = dict(zip(INPUTS, list(node.input) + [""] * len(INPUTS)))
    arrays = {}
    for w, (s, z) in QUANTIZED.items():
        q, scale, zero = (constant(inputs[n]) if inputs[n] else None for n in (w, s, z))
        if q is None or scale is None or zero is None:
            return None
        try:
            arrays[w] = dequantize(w, q, scale, zero)
        except ValueError:
            return None
    return arrays


def as_lstm(node: onnx.NodeProto, names: dict) -> onnx.NodeProto:
    """The ai.onnx LSTM computing what ``node`` computes with the weights dequantized,
    reading W and R from ``names["W"]``, ``names["R"]`` (the other inputs, outputs, name and
    attributes are the node's)."""
    inputs = _padded(node)[:8]
    inputs[1], inputs[2] = names["W"], names["R"]
    while inputs and not inputs[-1]:
        inputs.pop()
    lstm = helper.make_node("LSTM", inputs, list(node.output), name=node.name)
    lstm.attribute.extend(node.attribute)
    return lstm


def dequantized_model(model: onnx.ModelProto, which=None) -> onnx.ModelProto:
    """A copy of ``model`` whose main-graph DynamicQuantizeLSTM nodes with constant weights
    are ai.onnx LSTMs with the dequantized float32 weights: the float model ortops computes,
    which stock ONNX Runtime and ``ortops.reference`` run exactly (the oracle of
    ``ortops run --compare`` and the tests). Others are kept as they are, and so is the k-th
    DynamicQuantizeLSTM of the main graph where ``which[k]`` is false (a node the device path
    did not take runs ORT's own kernel)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    inputs = {i.name for i in g.input}
    consts = {t.name: t for t in g.initializer if t.name not in inputs}
    taken = {t.name for t in g.initializer} | {n for node in g.node for n in (*node.input, *node.output)}
    nodes, k = [], 0
    for node in g.node:
        if not is_quantized(node):
            nodes.append(node)
            continue
        k += 1
        if which is not None and not which[k - 1]:
            nodes.append(node)
            continue
        arrays = _dequantized_weights(node, lambda n: numpy_helper.to_array(consts[n]) if n in consts else None)
        if arrays is None:
            nodes.append(node)
            continue
        names = {w: unique_name(taken, f"{node.input[1 if w == 'W' else 2]}__dequantized") for w in arrays}
        g.initializer.extend(numpy_helper.from_array(arrays[w], names[w]) for w in arrays)
        nodes.append(as_lstm(node, names))
    del g.node[:]
    g.node.extend(nodes)
    used = {n for node in g.node for n in node.input} | {o.name for o in g.output}
    keep = [t for t in g.initializer if t.name in used or t.name in inputs]
    del g.initializer[:]
    g.initializer.extend(keep)
    return out



def recurrent_outputs(model: onnx.ModelProto) -> list[str]:
    """The named outputs of the main graph's DynamicQuantizeLSTM nodes that are not graph
    outputs already (``ortops run --compare`` judges them directly: a quantized node after
    them, e.g. MatMulInteger, moves a float32 rounding difference to a whole quantization step)."""
    have = {o.name for o in model.graph.output}
    return [o for n in model.graph.node if is_quantized(n) for o in n.output if o and o not in have]


def with_outputs(model: onnx.ModelProto, names) -> onnx.ModelProto:
    """A copy of ``model`` that also outputs ``names`` (float32 values: T of DynamicQuantizeLSTM)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.output.extend(helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in names)
    return out


from ortops._deprecated import module_getattr  # noqa: E402 - the deprecated names, after what they use

__getattr__ = module_getattr(__name__, {
    "dequantized_weights": ("ortops.ort.quantized.dequantize(name, q, scale, zero_point) for each weight, or "
                            "ortops.ort.session.placement(model) for whether a node is taken",
                            lambda: lambda node, constant: (_dequantized_weights(node, constant), "")),
})
