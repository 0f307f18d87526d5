"""Data for the C++ examples (examples/cpp/run.sh): for main.cpp (the custom-op library) a small
seeded bidirectional LSTM, converted for the ortops custom-op library, its input and ONNX Runtime
CPU's output of the original model; for ep_main.cpp (the execution provider) an unmodified model
of tests/models (EP_MODEL), its stored input and ONNX Runtime CPU's output.

    python examples/cpp/make_data.py OUT_DIR

Writes OUT_DIR/model.onnx, OUT_DIR/inputs/NAME.{bin,shape} and OUT_DIR/expected/NAME.{bin,shape}
(NAME.bin: raw little-endian values; NAME.shape: "float32 d0 d1 ..."), what main.cpp reads, and
the same in OUT_DIR/ep/ plus ep/recurrent.txt (the main graph's recurrent node names).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

SEED = 20261201
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Two stacked bidirectional LSTMs between other nodes, as torch.onnx's dynamo exporter wrote them.
EP_MODEL = os.path.join(ROOT, "tests", "models", "dynamo_lstm2_bidirectional.onnx")
SEQ, BATCH, INPUT, HIDDEN = 12, 3, 16, 20


def model() -> onnx.ModelProto:
    rng = np.random.default_rng(SEED)
    bound = 1.0 / np.sqrt(HIDDEN)
    w = lambda *s: rng.uniform(-bound, bound, size=s).astype(np.float32)  # noqa: E731
    inits = [numpy_helper.from_array(w(2, 4 * HIDDEN, INPUT), "W"),
             numpy_helper.from_array(w(2, 4 * HIDDEN, HIDDEN), "R"),
             numpy_helper.from_array(w(2, 8 * HIDDEN), "B")]
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], name="bilstm",
                            direction="bidirectional", hidden_size=HIDDEN)
    out = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)  # noqa: E731
    graph = helper.make_graph([node], "bilstm", [out("X", [SEQ, BATCH, INPUT])],
                              [out("Y", [SEQ, 2, BATCH, HIDDEN]), out("Y_h", [2, BATCH, HIDDEN]),
                               out("Y_c", [2, BATCH, HIDDEN])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="ortops/examples/cpp/make_data.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def convert(m: onnx.ModelProto) -> onnx.ModelProto:
    import ortops

    return ortops.convert(m)


def save(folder: str, name: str, a: np.ndarray) -> None:
    os.makedirs(folder, exist_ok=True)
    dtype = {np.dtype(np.float32): "float32", np.dtype(np.int32): "int32"}[a.dtype]
    np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tofile(os.path.join(folder, name + ".bin"))
    with open(os.path.join(folder, name + ".shape"), "w") as f:
        f.write(" ".join([dtype] + [str(d) for d in a.shape]) + "\n")


def main(out: str) -> None:
    m = model()
    x = np.random.default_rng(SEED + 1).standard_normal((SEQ, BATCH, INPUT)).astype(np.float32)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = ref.run(None, {"X": x})
    os.makedirs(out, exist_ok=True)
    onnx.save(convert(m), os.path.join(out, "model.onnx"))
    save(os.path.join(out, "inputs"), "X", x)
    for o, v in zip(ref.get_outputs(), expected):
        save(os.path.join(out, "expected"), o.name, v)
    print(f"make_data: {out}: model.onnx, X {x.shape}, expected " +
          ", ".join(f"{o.name} {v.shape}" for o, v in zip(ref.get_outputs(), expected)))


def main_ep(out: str) -> None:
    """The EP example's data: EP_MODEL copied unchanged, its stored input, ORT CPU's outputs."""
    m = onnx.load(EP_MODEL)
    stored = np.load(EP_MODEL[:-5] + ".npz")
    feeds = {k[len("input."):]: stored[k] for k in stored.files if k.startswith("input.")}
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = ref.run(None, feeds)
    os.makedirs(out, exist_ok=True)
    onnx.save(m, os.path.join(out, "model.onnx"))
    with open(os.path.join(out, "recurrent.txt"), "w") as f:
        f.writelines(n.name + "\n" for n in m.graph.node if n.op_type in ("LSTM", "GRU", "RNN"))
    for k, v in feeds.items():
        save(os.path.join(out, "inputs"), k, v)
    for o, v in zip(ref.get_outputs(), expected):
        save(os.path.join(out, "expected"), o.name, v)
    print(f"make_data: {out}: {os.path.basename(EP_MODEL)} unmodified, expected " +
          ", ".join(f"{o.name} {v.shape}" for o, v in zip(ref.get_outputs(), expected)))


if __name__ == "__main__":
    main(sys.argv[1])
    main_ep(os.path.join(sys.argv[1], "ep"))
