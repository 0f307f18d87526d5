"""Fuzz what ortops still does in Python: reading and rewriting untrusted models, and the layer
API's checks of untrusted feeds (docs/security.md). The native node-config decoder has its own
fuzzer (scripts/ci/fuzz.sh).

    python scripts/ci/fuzz_python.py [SECONDS] [--part models|layer|all] [--seed N] [--out DIR]

models: tests/models/*.onnx mutated - bytes flipped in the serialized protobuf, truncated,
spliced, and structural mutations made with onnx (attributes of the wrong type or out of range,
missing/extra/duplicated attributes, inputs dropped or dangling, initializers with the wrong
dtype, rank, dims, too little data, external data, huge dims; graph inputs of the wrong type or
shape; opsets; cycles; deep If nesting) - through ortops.ort.rewrite.load_model and
rewrite(..., weights="inline"), and one case in SESSION_EVERY through ortops.InferenceSession
(run on the model's stored feeds).
layer: RecurrentLayer / ortops.lstm / gru / rnn with mutated weights, attributes and feeds
(wrong dtype or byte order, rank, zero-size dims, non-contiguous, misaligned and read-only
arrays, zero-stride views of huge logical size, NaN/Inf, bad sequence_lens, max_length,
outputs and out=); after every batch of bad calls each layer must still give the same bits as
before for its good input, and those must match ortops.reference.

A case passes if it succeeds or raises a clean error (ALLOWED: ValueError and its subclasses -
ModelError, UnsupportedLayerError, NodeRunError -, onnx's ValidationError, RuntimeError and
ONNX Runtime's own exceptions). Anything else (TypeError, KeyError, IndexError, RecursionError,
MemoryError - a huge allocation attempted where a check should refuse -, a crash, a hang) is a
finding, saved under --out (default build/fuzz_python/) with the input and the traceback;
findings listed in KNOWN (reported, to be fixed outside ortops/validation.py) are counted
apart. The run forks a worker process per batch so that a crash or hang is caught and saved;
the worker limits its address space (RLIMIT_AS, default 16 GiB) so that an attempt to
materialise a huge array fails as MemoryError instead of exhausting the machine.
tests/test_fuzz_smoke.py runs a short fixed-seed version in-process.

Exit status: 0 when no finding outside KNOWN.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import pathlib
import random
import subprocess
import sys
import time
import traceback

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "models"
SESSION_EVERY = 8
ADDRESS_SPACE = 16 << 30

#: Findings reported to the maintainers and not yet fixed (their fix is outside
#: ortops/validation.py): a key the classifier gives -> what and where to fix.
KNOWN: dict[str, str] = {}
# Fixed (each was a finding here): max_length of inf/NaN (RecurrentLayer._steps),
# outputs=5 (RecurrentLayer.__call__), a node name that is not UTF-8 (rewrite: decoded with
# backslashreplace), an attribute the node's opset does not define with a wrong type
# (rewrite.place leaves the node to ONNX Runtime), and configs the decoder refuses written by
# the rewrite (a node name over 4096 bytes, more alpha/beta values than the activations use).


class Finding(Exception):
    """A case that ended otherwise than in success or a clean error."""

    def __init__(self, key: str, detail: str):
        super().__init__(f"{key}: {detail}")
        self.key = key
        self.detail = detail


def allowed_errors() -> tuple:
    import onnx
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    ort_errors = tuple(v for v in vars(state).values()
                       if isinstance(v, type) and issubclass(v, Exception) and v.__module__ == state.__name__)
    return (ValueError, RuntimeError, onnx.checker.ValidationError) + ort_errors


# ------------------------------------------------------------------ models


def seeds() -> list:
    """(name, serialized model, feeds or None) of every model in tests/models."""
    out = []
    for p in sorted(MODELS.glob("*.onnx")):
        feeds = None
        npz = p.with_suffix(".npz")
        if npz.exists():
            with np.load(npz) as z:
                feeds = {k[6:]: z[k] for k in z.files if k.startswith("input.")}
        out.append((p.stem, p.read_bytes(), feeds))
    return out


def _recurrent(model):
    from ortops.ort.subgraphs import all_graphs

    return [(g, n) for g in all_graphs(model.graph) for n in g.node if n.op_type in ("LSTM", "GRU", "RNN")]


def _set_attr(node, attr):
    for i, a in enumerate(node.attribute):
        if a.name == attr.name:
            del node.attribute[i]
            break
    node.attribute.append(attr)


def _structural(rng: random.Random, model) -> str:
    """Mutate model (an onnx.ModelProto) in place; return what was done."""
    import onnx
    from onnx import TensorProto, helper

    from ortops.ort.subgraphs import all_graphs

    rec = _recurrent(model)
    graph, node = rng.choice(rec) if rec else (model.graph, model.graph.node[0])
    inits = {t.name: t for g in all_graphs(model.graph) for t in g.initializer}
    kind = rng.randrange(18)
    if kind == 0:   # an attribute of the wrong type
        name = rng.choice(("hidden_size", "direction", "layout", "activations", "activation_alpha", "clip",
                           "input_forget", "linear_before_reset"))
        value = rng.choice((1.5, "x", b"forward", [1, 2], [0.5, 2.0], ["Tanh"], 7, -3, helper.make_tensor(
            "t", TensorProto.FLOAT, [1], [1.0])))
        _set_attr(node, helper.make_attribute(name, value))
        return f"{node.op_type}.{name} = {value!r:.40}"
    if kind == 1:   # an attribute out of range
        name, value = rng.choice((("hidden_size", 0), ("hidden_size", -1), ("hidden_size", 1 << 40),
                                  ("hidden_size", 3), ("layout", 2), ("layout", -1), ("direction", "Bidirectional"),
                                  ("direction", ""), ("clip", 0.0), ("clip", -1.0), ("clip", float("nan")),
                                  ("clip", float("inf")), ("input_forget", 5), ("linear_before_reset", 2),
                                  ("activations", ["Gelu"]), ("activations", ["Tanh"] * 9),
                                  ("activation_alpha", [float("nan")] * 3), ("activation_alpha", [1e39] * 200),
                                  ("activations", [""]), ("activations", ["tanh\x00"])))
        _set_attr(node, helper.make_attribute(name, value))
        return f"{node.op_type}.{name} = {value!r:.40}"
    if kind == 2 and node.attribute:   # an attribute dropped or duplicated
        i = rng.randrange(len(node.attribute))
        if rng.random() < 0.5:
            a = node.attribute[i]
            del node.attribute[i]
            return f"{node.op_type}: attribute {a.name} dropped"
        node.attribute.append(node.attribute[i])
        return f"{node.op_type}: attribute {node.attribute[i].name} duplicated"
    if kind == 3:   # an input dropped, emptied, dangling or added
        i = rng.randrange(len(node.input) + 1)
        how = rng.randrange(4)
        if how == 0 and i < len(node.input):
            node.input[i] = ""
        elif how == 1 and i < len(node.input):
            node.input[i] = "no_such_value"
        elif how == 2:
            node.input.append(rng.choice(("", "extra", node.input[0] if node.input else "x")))
        elif node.input:
            del node.input[len(node.input) - 1]
        return f"{node.op_type}: input {i} changed ({how})"
    if kind == 4:   # outputs
        how = rng.randrange(3)
        if how == 0:
            node.output.append("extra_output")
        elif how == 1 and node.output:
            node.output[rng.randrange(len(node.output))] = ""
        else:
            node.output[:] = [node.output[0]] * len(node.output) if node.output else []
        return f"{node.op_type}: outputs changed ({how})"
    named = [inits[n] for n in node.input if n in inits]
    if kind in (5, 6, 7, 8, 9) and named:
        t = rng.choice(named)
        if kind == 5:   # another dtype, same bytes
            t.data_type = rng.choice((TensorProto.DOUBLE, TensorProto.INT32, TensorProto.FLOAT16, TensorProto.INT64,
                                      TensorProto.BFLOAT16, TensorProto.STRING, TensorProto.BOOL, 0, 999))
            return f"initializer {t.name}: data_type {t.data_type}"
        if kind == 6:   # other dims
            dims = list(t.dims)
            how = rng.randrange(5)
            if how == 0 and dims:
                dims = dims[::-1]
            elif how == 1:
                dims = dims[:-1]
            elif how == 2:
                dims = dims + [1]
            elif how == 3 and dims:
                dims[rng.randrange(len(dims))] = rng.choice((0, -1, 1 << 40, 2))
            else:
                dims = [1 << 31, 1 << 31, 4]
            del t.dims[:]
            t.dims.extend(dims)
            return f"initializer {t.name}: dims {dims}"
        if kind == 7:   # too little data
            if t.raw_data:
                t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data))]
            elif t.float_data:
                del t.float_data[rng.randrange(len(t.float_data)):]
            return f"initializer {t.name}: data cut"
        if kind == 8:   # external data
            t.data_location = TensorProto.EXTERNAL
            del t.external_data[:]
            for k, v in (("location", rng.choice(("weights.bin", "../../../etc/passwd", "/etc/passwd",
                                                  "tests/models/gru_h0.onnx"))),
                         ("offset", str(rng.choice((0, 7, 1 << 62)))), ("length", str(rng.choice((16, 1 << 40))))):
                e = t.external_data.add()
                e.key, e.value = k, v
            t.raw_data = b""
            return f"initializer {t.name}: external data {t.external_data[0].value}"
        # huge dims, no data
        del t.dims[:]
        t.dims.extend([1, 1 << 22, 1 << 22])
        t.raw_data = b""
        del t.float_data[:]
        return f"initializer {t.name}: dims [1, 2^22, 2^22], no data"
    if kind == 10 and model.graph.input:   # a graph input of another type or shape
        vi = rng.choice(model.graph.input)
        tt = vi.type.tensor_type
        if rng.random() < 0.5:
            tt.elem_type = rng.choice((TensorProto.DOUBLE, TensorProto.INT64, TensorProto.STRING, TensorProto.FLOAT16,
                                       TensorProto.BOOL, TensorProto.UINT8))
            return f"input {vi.name}: elem_type {tt.elem_type}"
        dims = tt.shape.dim
        if dims:
            d = dims[rng.randrange(len(dims))]
            choice = rng.randrange(3)
            if choice == 0:
                d.dim_value = rng.choice((0, 1, 1 << 40))
            elif choice == 1:
                d.dim_param = rng.choice(("", "n", "\udcff" if False else "x y"))
            else:
                tt.shape.ClearField("dim")
        return f"input {vi.name}: shape changed"
    if kind == 11:   # opset
        for imp in model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                imp.version = rng.choice((1, 6, 7, 13, 14, 22, 99, -1))
                return f"opset {imp.version}"
        return "opset (none)"
    if kind == 12:   # a cycle: the node reads its own output
        if node.output and node.input:
            node.input[0] = node.output[0]
        return f"{node.op_type}: reads its own output"
    if kind == 13:   # domain / op_type
        node.domain = rng.choice(("ortops", "com.microsoft", "x"))
        return f"{node.op_type}: domain {node.domain}"
    if kind == 14:   # duplicate node (same outputs twice)
        graph.node.append(node)
        return f"{node.op_type}: duplicated"
    if kind == 15:   # deep If nesting around the graph's nodes (each level's else branch is the
        # innermost body, so the model grows linearly with the depth)
        depth = rng.choice((5, 15, 30))   # protobuf (upb) refuses messages nested beyond 100 levels
        outputs = [o.name for o in model.graph.output]
        inner = helper.make_graph(list(model.graph.node), "b", [], list(model.graph.output),
                                  list(model.graph.initializer))
        body = inner
        for k in range(depth):
            cond = helper.make_tensor(f"c{k}", TensorProto.BOOL, [], [True])
            iff = helper.make_node("If", [f"c{k}"], outputs, then_branch=body, else_branch=inner if k < 3 else
                                   helper.make_graph([helper.make_node("Identity", [f"c{k}"], [f"e{k}"])], "e", [],
                                                     [helper.make_tensor_value_info(f"e{k}", TensorProto.BOOL, [])]))
            body = helper.make_graph([iff], f"b{k}", [], list(model.graph.output), [cond])
        del model.graph.node[:]
        model.graph.node.extend(body.node)
        model.graph.initializer.extend(body.initializer)
        return f"If nesting {depth} deep"
    if kind == 16:   # node names: empty, huge, control characters
        node.name = rng.choice(("", "n" * 100000, "\x00\x1b[2J", "\u202e" * 10))
        return "node name"
    # a value's type in value_info
    vi = model.graph.value_info.add()
    vi.name = node.output[0] if node.output else "y"
    vi.type.tensor_type.elem_type = TensorProto.INT8
    return "value_info of an output: INT8"


def model_case(rng: random.Random, pool: list):
    """(description, model input, feeds or None): bytes or an onnx.ModelProto."""
    import onnx

    name, data, feeds = rng.choice(pool)
    kind = rng.randrange(10)
    if kind < 3:
        b = bytearray(data)
        n = rng.choice((1, 1, 2, 4, 16))
        for _ in range(n):
            b[rng.randrange(len(b))] ^= rng.randrange(1, 256)
        return f"{name}: {n} byte(s) flipped", bytes(b), feeds
    if kind == 3:
        cut = rng.randrange(len(data))
        return f"{name}: truncated at {cut}", data[:cut], feeds
    if kind == 4:
        _, other, _ = rng.choice(pool)
        a, b = rng.randrange(len(data)), rng.randrange(len(other))
        return f"{name}: spliced at {a}/{b}", data[:a] + other[b:], feeds
    model = onnx.load_from_string(data)
    what = [_structural(rng, model) for _ in range(rng.choice((1, 1, 2, 3)))]
    if rng.random() < 0.5:
        return f"{name}: " + "; ".join(what), model, feeds
    try:
        return f"{name}: " + "; ".join(what), model.SerializeToString(), feeds
    except Exception:   # e.g. > 2 GiB
        return f"{name}: " + "; ".join(what), model, feeds


def run_model(model, feeds, session: bool) -> str:
    from ortops.ort import rewrite as rw

    proto = rw.load_model(model)
    import inspect

    # weights="inline" (ortops.convert's rewrite) where the rewrite still has two modes; the
    # native library's rewrite has only that one.
    inline = {"weights": "inline"} if "weights" in inspect.signature(rw.rewrite).parameters else {}
    rw.rewrite(proto, **inline)
    if not session:
        return "rewritten"
    import ortops

    sess = ortops.InferenceSession(model)
    if feeds:
        sess.run(None, feeds)
        return "ran"
    return "session"


# ------------------------------------------------------------------ layer


OPS = {"LSTM": 4, "GRU": 3, "RNN": 1}


class LayerBench:
    """A few small layers with a good input each, their first result and the reference's."""

    def __init__(self, rng: np.random.Generator):
        import ortops

        self.layers = []
        for op, dtype, direction, layout in (("LSTM", np.float32, "bidirectional", 0), ("GRU", np.float16, "forward", 1),
                                             ("RNN", np.float32, "reverse", 0)):
            g, H, I, dirs = OPS[op], 5, 3, 2 if direction == "bidirectional" else 1
            W = (rng.standard_normal((dirs, g * H, I)) * 0.5).astype(dtype)
            R = (rng.standard_normal((dirs, g * H, H)) * 0.5).astype(dtype)
            B = (rng.standard_normal((dirs, 2 * g * H)) * 0.1).astype(dtype)
            layer = ortops.RecurrentLayer(op, W, R, B, direction=direction, layout=layout)
            X = rng.standard_normal((4, 2, I) if layout == 0 else (2, 4, I)).astype(dtype)
            first = layer(X)
            self.layers.append(dict(op=op, dtype=dtype, H=H, I=I, dirs=dirs, layout=layout, W=W, R=R, B=B,
                                    direction=direction, layer=layer, X=X, first=first))
            self._check_reference(self.layers[-1])

    @staticmethod
    def _check_reference(e):
        from ortops import reference
        from ortops.compare import scaled_error

        want = getattr(reference, e["op"].lower())(e["X"], e["W"], e["R"], e["B"], direction=e["direction"],
                                                   layout=e["layout"])
        for got, ref in zip(e["first"], want):
            err = scaled_error(got.astype(np.float64), np.asarray(ref, np.float64))
            if not err <= (1e-5 if e["dtype"] == np.float32 else 5e-3):
                raise Finding("layer:reference", f"{e['op']}: scaled error {err} against ortops.reference")

    def still_right(self) -> None:
        for e in self.layers:
            again = e["layer"](e["X"])
            for a, b in zip(again, e["first"]):
                if a.tobytes() != b.tobytes():
                    raise Finding("layer:state", f"{e['op']}: the good input gives other bits after the bad calls")


def _misaligned(a: np.ndarray) -> np.ndarray:
    buf = bytearray(a.nbytes + 1)
    out = np.frombuffer(buf, dtype=a.dtype, offset=1, count=a.size).reshape(a.shape)
    out[...] = a
    return out


#: _bad_array mutations that keep the values, dtype and shape: a call must give the same bits.
EQUIVALENT = ("non-contiguous (every other row)", "Fortran order", "negative strides", "misaligned", "read-only")


def _bad_array(rng: random.Random, a: np.ndarray):
    """A mutation of array a (what, array); ``what`` in EQUIVALENT: the same values."""
    kind = rng.randrange(16)
    if kind == 0:
        dt = rng.choice((np.float64, np.int32, np.float16, np.float32, ">f4", ">f2", np.bool_, np.complex64, object,
                         np.uint8))
        return f"dtype {np.dtype(dt).str}", a.astype(dt)
    if kind == 1:
        return "rank - 1", a[0]
    if kind == 2:
        return "rank + 1", a[None]
    if kind == 3:
        return "0-d", np.asarray(a.flat[0])
    if kind == 4:
        shape = list(a.shape)
        shape[rng.randrange(len(shape))] = 0
        return f"zero-size {shape}", np.zeros(shape, a.dtype)
    if kind == 5:
        big = np.repeat(a, 2, axis=0)
        assert not big[::2].flags.c_contiguous or a.shape[0] <= 1
        return "non-contiguous (every other row)", big[::2]
    if kind == 6:
        return "Fortran order", np.asfortranarray(a)
    if kind == 7:
        return "negative strides", np.ascontiguousarray(a[::-1])[::-1]
    if kind == 8:
        return "misaligned", _misaligned(a)
    if kind == 9:
        r = a.copy()
        r.flags.writeable = False
        return "read-only", r
    if kind == 10:
        r = a.copy()
        r.flat[rng.randrange(r.size)] = rng.choice((np.nan, np.inf, -np.inf, -0.0, 1e30))
        return "special value", r
    if kind == 11:
        shape = list(a.shape)
        shape[rng.randrange(len(shape))] = rng.choice((1 << 31, 1 << 40))   # > 4 GiB: refused before any copy
        return f"zero-stride view {shape}", np.broadcast_to(a.flat[0], shape)
    if kind == 12:
        return "a list", a.tolist()
    if kind == 13:
        return "None", None
    if kind == 14:
        shape = list(a.shape)
        i = rng.randrange(len(shape))
        shape[i] += rng.choice((-1, 1, 7))
        shape[i] = max(shape[i], 0)
        return f"shape {shape}", np.zeros(shape, a.dtype)
    return "a memoryview", memoryview(np.ascontiguousarray(a))


def layer_case(rng: random.Random, bench: LayerBench):
    """(description, thunk): one call of the layer API with something mutated."""
    import ortops

    e = rng.choice(bench.layers)
    layer, X, op = e["layer"], e["X"], e["op"]
    seq, batch = (X.shape[0], X.shape[1]) if e["layout"] == 0 else (X.shape[1], X.shape[0])
    state = (e["dirs"], batch, e["H"]) if e["layout"] == 0 else (batch, e["dirs"], e["H"])
    kind = rng.randrange(9)
    if kind <= 2:
        what, bad = _bad_array(rng, X)
        if what in EQUIVALENT:
            def same():
                got = layer(bad)
                for g, f in zip(got, e["first"]):
                    if g.tobytes() != f.tobytes():
                        raise Finding("layer:wrong-result", f"{op}: X {what} gives other bits than the plain array")
            return f"{op} X: {what} (same bits)", same
        return f"{op} X: {what}", lambda: layer(bad)
    if kind == 3:
        what, bad = _bad_array(rng, np.zeros(state, e["dtype"]))
        return f"{op} initial_h: {what}", lambda: layer(X, initial_h=bad)
    if kind == 4:
        lens = rng.choice((np.full(batch, seq, np.int64), np.full(batch, -1, np.int32), np.full(batch, seq + 1, np.int32),
                           np.full(batch, 2 ** 31 - 1, np.int32), np.full(batch, 1.5), np.full(batch + 1, 1, np.int32),
                           np.arange(2 * batch, dtype=np.int32)[::2], np.full(batch, seq, np.uint32),
                           _misaligned(np.full(batch, seq, np.int32)), [seq] * batch, np.int32(seq)))
        return f"{op} sequence_lens {getattr(lens, 'dtype', type(lens).__name__)}", lambda: layer(X, sequence_lens=lens)
    if kind == 5:
        m = rng.choice((float("nan"), float("inf"), -1, 1.5, "2", True, 1 << 70, seq + 1, np.int64(seq), None, 0))
        return f"{op} max_length={m!r}", lambda: layer(X, max_length=m)
    if kind == 6:
        o = rng.choice((5, ["Z"], "Yh", [], None, ("Y", "Y"), b"Y", {"Y": 1}))
        return f"{op} outputs={o!r}", lambda: layer(X, outputs=o)
    if kind == 7:
        shapes = {"Y": None}
        first = e["first"][0]
        what, bad = _bad_array(rng, np.empty_like(first))
        shapes["Y"] = bad
        return f"{op} out['Y']: {what}", lambda: layer(X, out=shapes)
    # the constructor / one-call API with mutated weights or attributes
    W, R, B = e["W"], e["R"], e["B"]
    attrs = dict(direction=e["direction"], layout=e["layout"])
    which = rng.randrange(4)
    if which == 0:
        what, W = _bad_array(rng, W)
        what = "W: " + what
    elif which == 1:
        what, R = _bad_array(rng, R)
        what = "R: " + what
    elif which == 2:
        what, B = _bad_array(rng, B)
        what = "B: " + what
    else:
        name, value = rng.choice((("hidden_size", True), ("hidden_size", 5.0), ("hidden_size", np.int64(5)),
                                  ("hidden_size", 1 << 40), ("hidden_size", -5), ("direction", b"forward"),
                                  ("direction", None), ("layout", np.bool_(True)), ("layout", 1.0),
                                  ("clip", float("nan")), ("clip", -0.0), ("clip", "1"), ("clip", float("inf")),
                                  ("activations", "tanh"), ("activations", [None]), ("activations", 5),
                                  ("activation_alpha", "1"), ("activation_alpha", [object()]),
                                  ("activation_alpha", 1.0), ("input_forget", 2), ("linear_before_reset", np.float32(1)),
                                  ("mode", "slow"), ("device", 99), ("device", "no such device")))
        attrs[name] = value
        what = f"{name}={value!r}"
    if rng.random() < 0.5:
        return f"{op} RecurrentLayer {what}", lambda: ortops.RecurrentLayer(op, W, R, B, **attrs)
    fn = getattr(ortops, op.lower())
    import inspect

    params = inspect.signature(fn).parameters   # an argument the function lacks is the caller's TypeError
    attrs = {k: v for k, v in attrs.items() if k in params}
    return f"ortops.{op.lower()} {what}", lambda: fn(X, W, R, B, **attrs)


# ------------------------------------------------------------------ driver


def _where(exc: BaseException) -> str:
    """file:function of the innermost ortops frame of exc's traceback ("outside" if none)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f"{os.sep}ortops{os.sep}" in f.filename]
    if not frames:
        return "outside"
    return f"{os.path.basename(frames[-1].filename)}:{frames[-1].name}"


def classify(part: str, what: str, exc: BaseException | None, allowed: tuple) -> str | None:
    """None for success or a clean error; else a finding key, "<part>:<exception>@<file>:<function>"
    (the innermost frame in ortops)."""
    if isinstance(exc, Finding):
        return exc.key
    if exc is None or isinstance(exc, allowed):
        return None
    return f"{part}:{type(exc).__name__}@{_where(exc)}"


def run(seconds: float, part: str, seed: int, out: pathlib.Path | None, start: int = 0,
        log=print, max_cases: int | None = None) -> dict:
    """Fuzz in this process for ``seconds``; returns the summary (findings by key)."""
    allowed = allowed_errors()
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)   # mutated models make ORT warn a lot
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    pool = seeds()
    bench = LayerBench(nprng) if part in ("layer", "all") else None
    summary = {"cases": 0, "clean_errors": 0, "ok": 0, "findings": {}, "known": {}, "sessions": 0}
    deadline = time.monotonic() + seconds
    i = start
    while time.monotonic() < deadline and (max_cases is None or summary["cases"] < max_cases):
        case_rng = random.Random(f"{seed}:{i}")
        this = part if part != "all" else ("models" if i % 3 == 0 else "layer")
        if this == "models":
            try:
                what, model, feeds = model_case(case_rng, pool)
            except Exception as e:   # the mutator's own limits (e.g. protobuf's 2 GiB): skip
                log(f"fuzz_python: case {i}: no model ({type(e).__name__}: {e})")
                i += 1
                continue
            session = i % SESSION_EVERY == 0
            summary["sessions"] += session
            thunk = (lambda m=model, f=feeds, s=session: run_model(m, f, s))
            payload = model if isinstance(model, bytes) else model.SerializeToString() if model.ByteSize() < 1 << 30 else b""
        else:
            what, thunk = layer_case(case_rng, bench)
            payload = what.encode()
        if out is not None:
            (out / "current.json").write_text(json.dumps({"case": i, "part": this, "what": what}))
            (out / "current.bin").write_bytes(payload)
        exc = None
        try:
            thunk()
        except BaseException as e:   # noqa: BLE001 - classifying is the point
            if isinstance(e, KeyboardInterrupt):
                raise
            exc = e
        summary["cases"] += 1
        key = classify(this, what, exc, allowed)
        if key is None:
            summary["ok" if exc is None else "clean_errors"] += 1
        else:
            bucket = summary["known"] if key in KNOWN else summary["findings"]
            detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]
            first = key not in bucket
            bucket.setdefault(key, []).append({"case": i, "what": what, "error": f"{type(exc).__name__}: {exc}"[:500]})
            if first:
                log(f"fuzz_python: {'known ' if key in KNOWN else ''}finding {key} in case {i} ({what}):\n{detail}")
            if out is not None and first:
                stem = f"{key.replace(':', '-')}-{hashlib.sha1(payload).hexdigest()[:10]}"
                (out / f"{stem}.bin").write_bytes(payload)
                (out / f"{stem}.txt").write_text(f"{what}\n\n{detail}")
        if bench is not None and this == "layer" and summary["cases"] % 25 == 0:
            try:
                bench.still_right()
            except Finding as f:
                summary["findings"].setdefault(f.key, []).append({"case": i, "what": "after bad calls",
                                                                   "error": f.detail})
        i += 1
    if bench is not None:
        try:
            bench.still_right()
        except Finding as f:
            summary["findings"].setdefault(f.key, []).append({"case": i, "what": "at the end", "error": f.detail})
    summary["next"] = i
    return summary


def _worker(args) -> int:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (args.address_space, args.address_space))
    out = pathlib.Path(args.out)
    summary = run(args.seconds, args.part, args.seed, out, start=args.start)
    (out / "summary-worker.json").write_text(json.dumps(summary))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("seconds", nargs="?", type=float, default=60.0)
    p.add_argument("--part", choices=("models", "layer", "all"), default="all")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "build" / "fuzz_python"))
    p.add_argument("--address-space", type=int, default=ADDRESS_SPACE)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.worker:
        return _worker(args)

    # The parent: workers until the budget is spent; a worker that dies (a crash) or stops
    # making progress (a hang, 120 s on one case) leaves its current case as a finding.
    deadline = time.monotonic() + args.seconds
    total = {"cases": 0, "clean_errors": 0, "ok": 0, "sessions": 0, "findings": {}, "known": {}, "crashes": []}
    start = 0
    while time.monotonic() < deadline - 5:
        left = deadline - time.monotonic()
        for f in ("summary-worker.json", "current.json"):
            (out / f).unlink(missing_ok=True)
        cmd = [sys.executable, __file__, str(left), "--part", args.part, "--seed", str(args.seed), "--out", str(out),
               "--address-space", str(args.address_space), "--worker", "--start", str(start)]
        proc = subprocess.Popen(cmd)
        last, last_change = None, time.monotonic()
        while proc.poll() is None:
            time.sleep(1)
            cur = (out / "current.json").read_text() if (out / "current.json").exists() else None
            if cur != last:
                last, last_change = cur, time.monotonic()
            elif time.monotonic() - last_change > 120:
                proc.kill()
                proc.wait()
                break
        summary_file = out / "summary-worker.json"
        if summary_file.exists():
            s = json.loads(summary_file.read_text())
            for k in ("cases", "clean_errors", "ok", "sessions"):
                total[k] += s[k]
            for bucket in ("findings", "known"):
                for key, v in s[bucket].items():
                    total[bucket].setdefault(key, []).extend(v)
            break
        current = json.loads((out / "current.json").read_text()) if (out / "current.json").exists() else {"case": start}
        how = "hang (no progress for 120 s)" if proc.returncode in (-9,) else f"exit status {proc.returncode}"
        total["crashes"].append({**current, "how": how})
        stem = f"crash-{current['case']}"
        if (out / "current.bin").exists():
            (out / "current.bin").rename(out / f"{stem}.bin")
        print(f"fuzz_python: worker died on case {current}: {how}", flush=True)
        start = int(current["case"]) + 1
    findings = sum(len(v) for v in total["findings"].values()) + len(total["crashes"])
    total["result"] = "findings" if findings else "passed"
    (out / "summary.json").write_text(json.dumps(total, indent=1))
    print(json.dumps({k: (v if not isinstance(v, dict) else {kk: len(vv) for kk, vv in v.items()})
                      for k, v in total.items()}, indent=1))
    for key, cases in total["known"].items():
        print(f"fuzz_python: known {key} ({len(cases)} case(s)): {KNOWN[key]}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
