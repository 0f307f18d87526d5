"""Write the example models to models/ (seeded random weights, reproducible).

    python scripts/make_models.py [--out models] [--only NAME ...]

Models (each also as *_fp16.onnx, every tensor float16):

- recognizer.onnx: a text-line recognizer. X [80, batch, 256] (layout 0,
  dynamic batch, 1 in practice) -> bidirectional LSTM (hidden 256) ->
  bidirectional LSTM (hidden 256) -> linear head -> logits [80, batch, 80].
- gru.onnx: one GRU, linear_before_reset = 1, sequence 50, input 64,
  hidden 128, with bias -> Y, Y_h.
- rnn.onnx: one bidirectional Tanh RNN with a ``sequence_lens`` graph input,
  sequence 40, input 32, hidden 64 -> Y_h.

The float32 recognizer alone is about 10 MB, so the models are generated at
set-up rather than committed; ``build(name)`` returns any of them in memory.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20261129
OPSET = 17


def _w(rng, shape, fan_in):
    # Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), the usual recurrent init: keeps
    # activations in range so float16 variants are meaningful.
    bound = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def _bilstm(rng, name, x, inp, hidden, nodes, inits):
    """Bidirectional LSTM then [seq, 2, batch, H] -> [seq, batch, 2H]."""
    inits += [
        numpy_helper.from_array(_w(rng, (2, 4 * hidden, inp), hidden), f"{name}.W"),
        numpy_helper.from_array(_w(rng, (2, 4 * hidden, hidden), hidden), f"{name}.R"),
        numpy_helper.from_array(_w(rng, (2, 8 * hidden), hidden), f"{name}.B"),
    ]
    nodes.append(helper.make_node("LSTM", [x, f"{name}.W", f"{name}.R", f"{name}.B"], [f"{name}.Y"],
                                  name=name, direction="bidirectional", hidden_size=hidden))
    nodes.append(helper.make_node("Transpose", [f"{name}.Y"], [f"{name}.Yt"], perm=[0, 2, 1, 3]))
    nodes.append(helper.make_node("Reshape", [f"{name}.Yt", "shape_seq_batch_2h"], [f"{name}.out"]))
    return f"{name}.out"


def recognizer(seq=80, inp=256, hidden=256, classes=80, seed=SEED) -> onnx.ModelProto:
    """The text-line recognizer (float32)."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], [numpy_helper.from_array(np.array([0, 0, 2 * hidden], np.int64), "shape_seq_batch_2h")]
    h = _bilstm(rng, "lstm1", "X", inp, hidden, nodes, inits)
    h = _bilstm(rng, "lstm2", h, 2 * hidden, hidden, nodes, inits)
    inits += [numpy_helper.from_array(_w(rng, (2 * hidden, classes), 2 * hidden), "head.W"),
              numpy_helper.from_array(_w(rng, (classes,), 2 * hidden), "head.b")]
    nodes.append(helper.make_node("MatMul", [h, "head.W"], ["head.mm"], name="head"))
    nodes.append(helper.make_node("Add", ["head.mm", "head.b"], ["logits"], name="head_bias"))
    graph = helper.make_graph(
        nodes, "recognizer",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [seq, "batch", inp])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [seq, "batch", classes])], inits)
    return _model(graph)


def gru(seq=50, inp=64, hidden=128, seed=SEED + 1) -> onnx.ModelProto:
    """One GRU with linear_before_reset = 1 (float32)."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(_w(rng, (1, 3 * hidden, inp), hidden), "W"),
             numpy_helper.from_array(_w(rng, (1, 3 * hidden, hidden), hidden), "R"),
             numpy_helper.from_array(_w(rng, (1, 6 * hidden), hidden), "B")]
    node = helper.make_node("GRU", ["X", "W", "R", "B"], ["Y", "Y_h"], name="gru", hidden_size=hidden,
                            linear_before_reset=1)
    graph = helper.make_graph(
        [node], "gru", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [seq, "batch", inp])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [seq, 1, "batch", hidden]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, "batch", hidden])], inits)
    return _model(graph)


def rnn(seq=40, inp=32, hidden=64, seed=SEED + 2) -> onnx.ModelProto:
    """One bidirectional Tanh RNN with a sequence_lens input (float32)."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(_w(rng, (2, hidden, inp), hidden), "W"),
             numpy_helper.from_array(_w(rng, (2, hidden, hidden), hidden), "R"),
             numpy_helper.from_array(_w(rng, (2, 2 * hidden), hidden), "B")]
    node = helper.make_node("RNN", ["X", "W", "R", "B", "sequence_lens"], ["", "Y_h"], name="rnn",
                            hidden_size=hidden, direction="bidirectional")
    graph = helper.make_graph(
        [node], "rnn",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [seq, "batch", inp]),
         helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, ["batch"])],
        [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [2, "batch", hidden])], inits)
    return _model(graph)


def _model(graph) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="ortops/scripts/make_models.py")
    model.ir_version = 8  # loadable by older onnxruntime releases too
    onnx.checker.check_model(model)
    return model


def to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every float32 tensor, input and output of ``model`` as float16."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    for i, t in enumerate(g.initializer):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    g.name += "_fp16"
    onnx.checker.check_model(m)
    return m


BUILDERS = {"recognizer": recognizer, "gru": gru, "rnn": rnn}


def build(name: str) -> onnx.ModelProto:
    """Model by file stem: recognizer, recognizer_fp16, gru, gru_fp16, rnn, rnn_fp16."""
    base, _, suffix = name.partition("_")
    if base not in BUILDERS or suffix not in ("", "fp16"):
        raise ValueError(f"unknown model {name!r}; known: {', '.join(names())}")
    model = BUILDERS[base]()
    return to_float16(model) if suffix else model


def names() -> list[str]:
    """Every model name, float32 then float16 variant."""
    return [n + s for n in BUILDERS for s in ("", "_fp16")]


def main(argv=None) -> int:
    """Write the models; prints each path and size."""
    ap = argparse.ArgumentParser(description="write the example ONNX models")
    ap.add_argument("--out", default=os.path.join(ROOT, "models"), help="output folder (default: models/)")
    ap.add_argument("--only", nargs="*", default=None, help="names to write (default: all)")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or names():
        path = os.path.join(args.out, f"{name}.onnx")
        onnx.save(build(name), path)
        print(f"{path}  {os.path.getsize(path) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
