"""Data for the C++ examples (examples/cpp/run.sh): for main.cpp (the custom-op library) a small
seeded bidirectional LSTM, converted for the ortops custom-op library, its input and ONNX Runtime
CPU's output of the original model; for ep_main.cpp (the execution provider) one case per model
the tests run, each unmodified: every tests/models/*.onnx, the sample models models/*.onnx
(scripts/make_models.py; float32 and float16) and, when scripts/setup.sh has downloaded its
wheel, every silero-vad model (third-party, LSTMs inside If branches).

    python examples/cpp/make_data.py OUT_DIR

Writes OUT_DIR/model.onnx, OUT_DIR/inputs/NAME.{bin,shape} and OUT_DIR/expected/NAME.{bin,shape}
(NAME.bin: raw little-endian values; NAME.shape: "float32|float16|int32|int64 d0 d1 ..."), what
main.cpp reads, and the same per model in OUT_DIR/ep/<case>/ plus <case>/recurrent.txt (every
recurrent node's name, the main graph's and its If/Loop/Scan bodies', one a line). The expected
outputs are ONNX Runtime CPU's; a float16 model's (ORT CPU has no float16 recurrent kernel)
those of its float32 equivalent (ortops.ort.equivalent), rounded to float16 as the model's
outputs are. ep_main.cpp judges each output within its dtype's tolerance (float32 1e-5,
float16 2e-3: ortops.compare).
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

SEED = 20261201
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECURRENT = ("LSTM", "GRU", "RNN")
#: Dynamic dimensions of the sample models' inputs, which carry no stored feeds.
SAMPLE_BATCH = 2
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
    dtype = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16", np.dtype(np.int32): "int32",
             np.dtype(np.int64): "int64"}[a.dtype]
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


@functools.cache
def _model_feeds():
    """scripts/ci/model_feeds.py, the feeds tests/test_ep.py runs the same models with."""
    spec = importlib.util.spec_from_file_location("_model_feeds", os.path.join(ROOT, "scripts", "ci", "model_feeds.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _sample_feeds(path: str) -> dict:
    """A sample model's feeds (it has no stored ones): uniform X of its dtype, batch SAMPLE_BATCH,
    and for rnn's int32 sequence_lens lengths from 1 to the full sequence (padding exercised)."""
    rng = np.random.default_rng(SEED + 2)
    feeds = {}
    for i in onnx.load(path).graph.input:
        shape = [d.dim_value or SAMPLE_BATCH for d in i.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        if i.name == "sequence_lens":
            seq = feeds["X"].shape[0]
            feeds[i.name] = np.array([seq] + list(rng.integers(1, seq + 1, shape[0] - 1)), dtype)
        else:
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(dtype)
    return feeds


def _silero_cases(folder: str) -> dict:
    """silero-vad's models with tests/test_ep.py's feeds, one case per feed set (silero_vad
    also at 8 kHz: silero_vad_8k); {} (and a note) when the wheel is absent."""
    try:
        models = _model_feeds().silero_cases(folder)
    except FileNotFoundError as e:
        print(f"make_data: no silero-vad case: {e}")
        return {}
    return {name + ("_8k" if k else ""): (path, feeds)    # (every name starts with silero_)
            for name, (path, feed_sets) in models.items() for k, feeds in enumerate(feed_sets)}


def _recurrent_names(graph: onnx.GraphProto) -> list[str]:
    """Every standard recurrent node of ``graph`` and of its bodies (ORT offers the EP each body
    and reports the body nodes it took beside the main graph's)."""
    names = []
    for n in graph.node:
        if n.op_type in RECURRENT and n.domain in ("", "ai.onnx"):
            names.append(n.name)
        for a in n.attribute:
            names += _recurrent_names(a.g) if a.type == onnx.AttributeProto.GRAPH else []
            for g in a.graphs:
                names += _recurrent_names(g)
    return names


def _expected(m: onnx.ModelProto, feeds: dict) -> tuple[list[str], list[np.ndarray]]:
    """ORT CPU's outputs; for a float16 model those of its float32 equivalent, as float16."""
    from ortops.ort.equivalent import cpu_equivalent, cpu_feeds

    half = [o.type.tensor_type.elem_type == TensorProto.FLOAT16 for o in m.graph.output]
    ref_model, ref_feeds = (cpu_equivalent(m), cpu_feeds(feeds)) if any(half) else (m, feeds)
    ref = ort.InferenceSession(ref_model.SerializeToString(), providers=["CPUExecutionProvider"])
    values = ref.run(None, ref_feeds)
    values = [v.astype(np.float16) if h else v for v, h in zip(values, half)]
    return [o.name for o in ref.get_outputs()], values


def write_case(out: str, path: str, feeds: dict) -> str:
    """OUT/: the model at ``path`` copied byte for byte, recurrent.txt, inputs/, expected/."""
    m = onnx.load(path)
    names, values = _expected(m, feeds)
    os.makedirs(out, exist_ok=True)
    shutil.copyfile(path, os.path.join(out, "model.onnx"))
    with open(os.path.join(out, "recurrent.txt"), "w") as f:
        f.writelines(n + "\n" for n in _recurrent_names(m.graph))
    for k, v in feeds.items():
        save(os.path.join(out, "inputs"), k, v)
    for name, v in zip(names, values):
        save(os.path.join(out, "expected"), name, v)
    return ", ".join(f"{n} {v.dtype} {v.shape}" for n, v in zip(names, values))


def main_ep(out: str) -> None:
    """The EP example's data: one case folder per model, each copied unchanged with its feeds
    and the expected outputs."""
    ort.set_default_logger_severity(3)    # (not the unused-initializer warnings of exported models)
    cases = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "models", "*.onnx"))):
        cases[os.path.basename(path)[:-5]] = (path, _model_feeds().stored_feeds(path))
    samples = sorted(glob.glob(os.path.join(ROOT, "models", "*.onnx")))
    if not samples:
        raise SystemExit(f"make_data: no sample model in {ROOT}/models: "
                         "run scripts/make_models.py (scripts/setup.sh does)")
    for path in samples:
        cases["sample_" + os.path.basename(path)[:-5]] = (path, _sample_feeds(path))
    shutil.rmtree(out, ignore_errors=True)    # no stale case from an earlier run
    os.makedirs(out)
    cases.update(_silero_cases(out))    # (extracted into OUT/, deleted below)
    for name, (path, feeds) in sorted(cases.items()):
        expected = write_case(os.path.join(out, name), path, feeds)
        print(f"make_data: {out}/{name}: {os.path.basename(path)} unmodified, expected {expected}")
    for path in glob.glob(os.path.join(out, "*.onnx")):
        os.remove(path)


if __name__ == "__main__":
    main(sys.argv[1])
    main_ep(os.path.join(sys.argv[1], "ep"))
