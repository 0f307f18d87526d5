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
times a float32), rounded once to float32 and transposed to ai.onnx's layout. The device then
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
_INTEGER = (np.dtype(np.int8), np.dtype(np.uint8))


def is_quantized(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is a com.microsoft DynamicQuantizeLSTM."""
    return node.op_type == OP and node.domain == DOMAIN


def _shape(a) -> list:
    return list(np.shape(a))


def dequantize(name: str, q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """The float32 ai.onnx LSTM weight ``[num_directions, 4*hidden, cols]`` of the quantized
    DynamicQuantizeLSTM weight ``name`` (``"W"`` or ``"R"``, ``[num_directions, cols,
    4*hidden]``): ``(q - zero_point) * scale`` in float64, rounded once to float32.

    Raises ValueError naming the operator, the argument, what was expected and what came.
    """
    q, scale, zero_point = np.asarray(q), np.asarray(scale), np.asarray(zero_point)
    s_name, z_name = QUANTIZED[name]
    if q.dtype not in _INTEGER or q.ndim != 3:
        raise ValueError(f"{OP}: {name}: expected an int8 or uint8 tensor [num_directions, rows, 4*hidden], "
                         f"got {q.dtype} {_shape(q)}")
    dirs, gates = q.shape[0], q.shape[2]
    if scale.dtype != np.float32 or _shape(scale) not in ([dirs], [dirs, gates]):
        raise ValueError(f"{OP}: {s_name}: expected float32 [{dirs}] (per tensor) or [{dirs}, {gates}] "
                         f"(per channel), got {scale.dtype} {_shape(scale)}")
    if zero_point.dtype != q.dtype or zero_point.shape != scale.shape:
        raise ValueError(f"{OP}: {z_name}: expected {q.dtype} {_shape(scale)} (the type of {name}, the "
                         f"shape of {s_name}), got {zero_point.dtype} {_shape(zero_point)}")
    if scale.ndim == 2 and q.dtype == np.int8 and zero_point.any():
        raise ValueError(f"{OP}: {z_name}: expected per-channel int8 zero points all 0 (ONNX Runtime's "
                         f"kernel refuses others), got {np.unique(zero_point)[:4].tolist()}")
    if scale.ndim == 2 and q.dtype == np.uint8 and (zero_point != zero_point.flat[0]).any():
        raise ValueError(f"{OP}: {z_name}: expected per-channel uint8 zero points all equal (ONNX Runtime's "
                         f"kernel refuses others), got {np.unique(zero_point)[:4].tolist()}")
    if not np.isfinite(scale).all():
        raise ValueError(f"{OP}: {s_name}: expected finite scales, got {scale[~np.isfinite(scale)][:3].tolist()}")
    # [dirs] -> [dirs, 1, 1]; [dirs, gates] -> [dirs, 1, gates] (one scale per output column)
    bshape = (dirs, 1, gates if scale.ndim == 2 else 1)
    deq = (q.astype(np.float64) - zero_point.astype(np.float64).reshape(bshape)) \
        * scale.astype(np.float64).reshape(bshape)
    return np.ascontiguousarray(deq.astype(np.float32).transpose(0, 2, 1))


def describe(q: np.ndarray, scale: np.ndarray) -> str:
    """``int8 per-channel`` and the like, for the placement report."""
    return f"{np.asarray(q).dtype} {'per-channel' if np.ndim(scale) == 2 else 'per-tensor'}"


def _padded(node) -> list:
    return list(node.input) + [""] * (len(INPUTS) - len(node.input))


def dequantized_weights(node: onnx.NodeProto, constant) -> tuple[dict | None, str]:
    """``({"W": ..., "R": ...}, description)`` of a DynamicQuantizeLSTM whose quantized weights,
    scales and zero points are constants (``constant(name)``: its array, or None), ``description``
    saying e.g. ``int8 per-channel``; or ``(None, why not)``."""
    inputs = dict(zip(INPUTS, _padded(node)))
    missing = [n for w, sz in QUANTIZED.items() for n in (w, *sz) if not inputs[n]]
    if missing:
        return None, f"{OP} without {', '.join(missing)} (ONNX Runtime's own kernel reports it)"
    arrays = {}
    for w, (s, z) in QUANTIZED.items():
        got = [constant(inputs[n]) for n in (w, s, z)]
        varying = [f"{n} {inputs[n]!r}" for n, a in zip((w, s, z), got) if a is None]
        if varying:
            return None, (f"{OP}: {', '.join(varying)} not constant (the device path dequantizes "
                          "constant weights once)")
        try:
            arrays[w] = dequantize(w, *got)
        except ValueError as e:
            return None, str(e)
    return arrays, describe(constant(inputs["W"]), constant(inputs["W_scale"]))


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
        arrays, _ = dequantized_weights(
            node, lambda n: numpy_helper.to_array(consts[n]) if n in consts else None)
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
