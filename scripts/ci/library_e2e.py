"""The custom-op library end to end in plain onnxruntime, against ONNX Runtime CPU's own kernels.

    python scripts/ci/library_e2e.py [LIBRARY]      (default: ortops.library_path())

Builds small models with one custom node each (domain "ortops", config v4 written here as
ortops.convert writes it) and their standard twins, registers LIBRARY with
``SessionOptions.register_custom_ops_library`` (no ortops import when LIBRARY is given) and
checks:

- LSTM, bidirectional, constant W/R/B/P, sequence_lens, initial_h, initial_c: every output
  within 1e-5 (scaled error, ortops.compare) of ORT CPU;
- an LSTM computing only Y_h, its absent inputs empty names;
- a GRU whose W and R are graph inputs, changed between runs (the layer follows the fed
  weights), then 4 threads running that session with different weights;
- RNN_f16 on float16 tensors (2e-3);
- run errors (X of rank 2, sequence_lens out of range): INVALID_ARGUMENT naming the node, the
  session usable afterwards;
- session-creation errors naming the node: the config disagreeing with the node's inputs, a
  malformed config, W of the wrong shape.

Exit status 0 when every check passes. Needs a Vulkan device (lavapipe will do).
"""

from __future__ import annotations

import json
import sys
import threading

import numpy as np
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper, numpy_helper

INPUTS = {"LSTM": ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"],
          "GRU": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
          "RNN": ["X", "W", "R", "B", "sequence_lens", "initial_h"]}
ATTRS = {"activation_alpha": None, "activation_beta": None, "activations": None, "clip": None,
         "direction": "forward", "hidden_size": None, "input_forget": 0, "layout": 0,
         "linear_before_reset": 0}
S, B, I, H = 7, 3, 5, 4
TOLERANCE = {T.FLOAT: 1e-5, T.FLOAT16: 2e-3}


def config(op: str, inputs: list[str], outputs: list[str], dtype: str = "float32", **attrs) -> str:
    absent = [n for i, n in enumerate(INPUTS[op]) if i >= 3 and (i >= len(inputs) or not inputs[i])]
    c = {"v": 4, "node": "n", "op": op, "dtype": dtype, "attrs": dict(ATTRS, **attrs),
         "absent": absent, "outputs": [o for o in outputs if o], "device": None,
         "mode": "deterministic"}
    return json.dumps(c, sort_keys=True, separators=(",", ":"))


def model(op, inputs, outputs, graph_inputs, inits, custom, elem=T.FLOAT, cfg=None, **attrs) -> bytes:
    """One node: the ortops custom node (custom=True) or the standard one."""
    if custom:
        dtype = "float16" if elem == T.FLOAT16 else "float32"
        name = op + ("_f16" if dtype == "float16" else "")
        node = helper.make_node(name, inputs, outputs, domain="ortops", name="n",
                                config=cfg or config(op, inputs, outputs, dtype, **attrs))
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ortops", 1)]
    else:
        node = helper.make_node(op, inputs, outputs, name="n", **attrs)
        opsets = [helper.make_opsetid("", 17)]
    outs = [helper.make_tensor_value_info(o, elem, None) for o in outputs if o]
    m = helper.make_model(helper.make_graph([node], "g", graph_inputs, outs, inits),
                          opset_imports=opsets)
    m.ir_version = 8
    return m.SerializeToString()


def session(m: bytes, library: str | None) -> ort.InferenceSession:
    so = ort.SessionOptions()
    if library:
        so.register_custom_ops_library(library)
    return ort.InferenceSession(m, so, providers=["CPUExecutionProvider"])


def scaled_error(got, expected) -> float:
    """ortops.compare.scaled_error (no NaNs here)."""
    g, e = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    if g.shape != e.shape:
        return float("inf")
    if g.size == 0:
        return 0.0
    diff, scale = float(np.abs(g - e).max()), float(np.abs(e).max())
    return diff / scale if scale > 0 else diff


def tensor(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def main(library: str) -> int:
    rng = np.random.default_rng(20261201)
    failed = []

    def check(name, ok, info=""):
        print(("ok   " if ok else "FAIL ") + name, info)
        if not ok:
            failed.append(name)

    def errors(got, ref):
        return [scaled_error(g, r) for g, r in zip(got, ref)]

    def uniform(*shape, dtype=np.float32):
        return rng.uniform(-0.5, 0.5, shape).astype(dtype)

    # LSTM, bidirectional, everything fed.
    W, R, Bias, P = uniform(2, 4 * H, I), uniform(2, 4 * H, H), uniform(2, 8 * H), uniform(2, 3 * H)
    inits = [numpy_helper.from_array(a, n) for a, n in [(W, "W"), (R, "R"), (Bias, "B"), (P, "P")]]
    ins = ["X", "W", "R", "B", "L", "h0", "c0", "P"]
    outs = ["Y", "Y_h", "Y_c"]
    gin = [tensor("X", T.FLOAT, [S, B, I]), tensor("L", T.INT32, [B]),
           tensor("h0", T.FLOAT, [2, B, H]), tensor("c0", T.FLOAT, [2, B, H])]
    feed = {"X": rng.standard_normal((S, B, I)).astype(np.float32),
            "L": np.array([7, 3, 0], np.int32),
            "h0": rng.standard_normal((2, B, H)).astype(np.float32),
            "c0": rng.standard_normal((2, B, H)).astype(np.float32)}
    bidi = {"direction": "bidirectional", "hidden_size": H}
    ref = session(model("LSTM", ins, outs, gin, inits, False, **bidi), None).run(None, feed)
    got = session(model("LSTM", ins, outs, gin, inits, True, **bidi), library).run(None, feed)
    e = errors(got, ref)
    check("LSTM bidirectional, constant W/R/B/P, sequence_lens, initial_h, initial_c",
          max(e) <= 1e-5, " ".join(f"{x:.2e}" for x in e))

    # Only Y_h; the absent inputs empty names.
    x_only = {"X": feed["X"]}
    ref = session(model("LSTM", ["X", "W", "R"], ["", "Y_h"], gin[:1], inits[:2], False, **bidi),
                  None).run(None, x_only)
    got = session(model("LSTM", ["X", "W", "R", "", "", "", "", ""], ["", "Y_h"], gin[:1],
                        inits[:2], True, **bidi), library).run(None, x_only)
    check("LSTM computing only Y_h, absent inputs as empty names",
          len(got) == 1 and scaled_error(got[0], ref[0]) <= 1e-5, f"{scaled_error(got[0], ref[0]):.2e}")

    # GRU, W and R fed at run time.
    Wg, Rg = uniform(1, 3 * H, I), uniform(1, 3 * H, H)
    gin = [tensor("X", T.FLOAT, [S, B, I]), tensor("W", T.FLOAT, [1, 3 * H, I]),
           tensor("R", T.FLOAT, [1, 3 * H, H])]
    gru = {"linear_before_reset": 1, "hidden_size": H}
    custom = session(model("GRU", ["X", "W", "R"], ["Y", "Y_h"], gin, [], True, **gru), library)
    stock = session(model("GRU", ["X", "W", "R"], ["Y", "Y_h"], gin, [], False, **gru), None)
    worst = 0.0
    for k in (1, 1, 2, 2, 3, 1):
        f = {"X": feed["X"], "W": Wg * k, "R": Rg}
        worst = max(worst, *errors(custom.run(None, f), stock.run(None, f)))
    check("GRU with W and R fed, changed between runs", worst <= 1e-5, f"{worst:.2e}")

    results: list[float] = []

    def work(k):
        f = {"X": feed["X"], "W": Wg * (1 + k), "R": Rg}
        ref = stock.run(None, f)
        for _ in range(10):
            results.append(max(errors(custom.run(None, f), ref)))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check("4 threads x 10 runs on that session, each with its own weights",
          len(results) == 40 and max(results) <= 1e-5, f"{max(results):.2e}")

    # RNN_f16 on float16 tensors; the reference is ORT CPU on the same values in float32.
    Wr, Rr = uniform(1, H, I, dtype=np.float16), uniform(1, H, H, dtype=np.float16)
    x16 = feed["X"].astype(np.float16)
    got = session(model("RNN", ["X", "W", "R"], ["Y", "Y_h"], [tensor("X", T.FLOAT16, [S, B, I])],
                        [numpy_helper.from_array(Wr, "W"), numpy_helper.from_array(Rr, "R")], True,
                        elem=T.FLOAT16, hidden_size=H), library).run(None, {"X": x16})
    ref = session(model("RNN", ["X", "W", "R"], ["Y", "Y_h"], [tensor("X", T.FLOAT, [S, B, I])],
                        [numpy_helper.from_array(Wr.astype(np.float32), "W"),
                         numpy_helper.from_array(Rr.astype(np.float32), "R")], False,
                        hidden_size=H), None).run(None, {"X": x16.astype(np.float32)})
    e = errors(got, ref)
    check("RNN_f16 on float16 tensors", got[0].dtype == np.float16 and max(e) <= TOLERANCE[T.FLOAT16],
          " ".join(f"{x:.2e}" for x in e))

    # Run errors, then the same session again.
    gin = [tensor("X", T.FLOAT, None), tensor("L", T.INT32, [B]),
           tensor("h0", T.FLOAT, [2, B, H]), tensor("c0", T.FLOAT, [2, B, H])]
    lstm = session(model("LSTM", ins, outs, gin, inits, True, **bidi), library)
    for name, f in [("X of rank 2", dict(feed, X=feed["X"][0])),
                    ("sequence_lens 9 > seq_length 7", dict(feed, L=np.array([9, 1, 1], np.int32)))]:
        try:
            lstm.run(None, f)
            check(f"run error: {name}", False, "no error")
        except Exception as ex:  # onnxruntime's InvalidArgument
            text = str(ex)
            check(f"run error: {name}", "INVALID_ARGUMENT" in text and "ortops: LSTM node 'n': " in text,
                  text.split("Status Message: ")[-1][:150])
    ref = session(model("LSTM", ins, outs, gin, inits, False, **bidi), None).run(None, feed)
    check("the session runs after those errors", max(errors(lstm.run(None, feed), ref)) <= 1e-5)

    # Session-creation errors.
    x = [tensor("X", T.FLOAT, [S, B, I])]
    bad_w = [numpy_helper.from_array(W[:, :5], "W"), inits[1]]
    for name, m in [
        ("config lists B as fed, the node has none",
         model("LSTM", ["X", "W", "R"], ["Y"], x, inits[:2], True,
               cfg=config("LSTM", ["X", "W", "R", "B"], ["Y"], **bidi))),
        ("malformed config", model("LSTM", ["X", "W", "R"], ["Y"], x, inits[:2], True, cfg='{"v":4}')),
        ("W of the wrong shape", model("LSTM", ["X", "W", "R"], ["Y"], x, bad_w, True, **bidi)),
    ]:
        try:
            session(m, library)
            check(f"session error: {name}", False, "no error")
        except Exception as ex:
            text = str(ex)
            check(f"session error: {name}", "ortops: LSTM node 'n': " in text,
                  text.split("initialization: ")[-1][:150])

    print(("ALL OK" if not failed else f"{len(failed)} FAILED") + f": onnxruntime {ort.__version__}, {library}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        lib = sys.argv[1]
    else:
        import ortops

        lib = ortops.library_path()
    sys.exit(main(lib))
