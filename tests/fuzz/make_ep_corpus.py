"""Write the node checker's seed corpus, tests/fuzz/corpus/ep_node/ (deterministic).

    .venv/bin/python tests/fuzz/make_ep_corpus.py      # rewrites the directory

One file per recurrent node of tests/models/*.onnx (every scope: If/Loop/Scan bodies too), in
the layout tests/fuzz/fuzz_ep_node.cpp's Reader decodes: the node's description as a door hands
it to the core's checker (op, domain, name, operator version, input and output counts, each
input's presence, ONNX element type, dims after shape inference and constness, a small
constant's elements, the attributes with their ONNX attribute types and values), then the mode
and the device (storage-binding limit, UUID, NaN preservation, present). Two
com.microsoft.DynamicQuantizeLSTM nodes (per tensor and per channel, their scales and zero
points given) and a few edits of one node each (an extra input, X missing, an attribute of the
wrong type, a non-finite clip, an unknown activation, out-of-range values, too many alpha
values, float64, quantized zero points ORT refuses, no device) start the fuzzer near the
refusals. Needs onnx and numpy (the project's .venv).
"""

from __future__ import annotations

import pathlib
import struct

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

from ortops.ort.subgraphs import all_graphs

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE / "corpus" / "ep_node"
RECURRENT = {"RNN", "GRU", "LSTM"}
MODES = {"deterministic": 0, "exact": 1, "fast": 2}
# ONNX's AttributeProto types (the description's).
INT, FLOAT, STRING, FLOATS, INTS, STRINGS = 2, 1, 3, 6, 7, 8


def s16(b: bytes | str) -> bytes:
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<H", len(b)) + b


def attr_value(a: onnx.AttributeProto) -> tuple[int, bytes]:
    """(ONNX attribute type, the value as the Reader reads it)."""
    if a.type == INT:
        return a.type, struct.pack("<q", a.i)
    if a.type == FLOAT:
        return a.type, struct.pack("<f", a.f)
    if a.type == STRING:
        return a.type, s16(a.s)
    if a.type == STRINGS:
        return a.type, s16(b"\0".join(a.strings))
    if a.type == FLOATS:
        return a.type, s16(struct.pack(f"<{len(a.floats)}f", *a.floats))
    if a.type == INTS:
        return a.type, s16(struct.pack(f"<{len(a.ints)}q", *a.ints))
    return a.type, s16(b"")


def encode(op: str, name: str | bytes, version: int, inputs: list, outputs: list, attrs: list,
           mode: str = "deterministic", max_storage: int = 1 << 30, uuid: bool = True, domain: str = "",
           count_in: int | None = None, nan_preserve: bool = True, device: bool = True) -> bytes:
    """inputs: (name or None, element type, dims or None[, constant elements as bytes]) per
    position; outputs: names ("" absent); attrs: (name, ONNX attribute type, value bytes)."""
    out = s16(op) + s16(domain) + s16(name) + struct.pack("<i", version)
    out += bytes([count_in if count_in is not None else len(inputs), len(outputs)])
    for nm, elem, dims, *data in inputs[:16]:
        flags = (1 if nm is None else 0) | (2 if nm == "" else 0) | (4 if data else 0)
        out += bytes([flags]) + struct.pack("<i", elem)
        if dims is None:
            out += b"\xff"
        else:
            out += bytes([len(dims)]) + b"".join(struct.pack("<q", -1 if d is None else d) for d in dims[:8])
        if data and dims is not None and len(data[0]) <= 1 << 16:
            out += data[0]
    out += bytes(0 if o else 1 for o in outputs[:4])
    out += bytes([len(attrs)])
    for nm, t, v in attrs:
        out += s16(nm) + bytes([t]) + v
    flags = (1 if uuid else 0) | (0 if nan_preserve else 2) | (0 if device else 4)
    return out + bytes([MODES[mode]]) + struct.pack("<I", max_storage) + bytes([flags])


def _types(model) -> dict:
    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:
        inferred = model
    types = {}
    for g in all_graphs(inferred.graph):
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            tt = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim] if tt.HasField("shape") else None
            types[vi.name] = (tt.elem_type, dims)
        for t in g.initializer:
            types[t.name] = (t.data_type, list(t.dims))
        for n in g.node:
            if n.op_type == "Constant":
                for a in n.attribute:
                    if a.name == "value":
                        types[n.output[0]] = (a.t.data_type, list(a.t.dims))
    return types


def _constants(model) -> dict:
    """Initializer name -> its elements' bytes (small ones: the Reader reads them)."""
    out = {}
    for g in all_graphs(model.graph):
        inputs = {i.name for i in g.input}
        for t in g.initializer:
            a = numpy_helper.to_array(t)
            if t.name not in inputs and a.nbytes <= 1 << 16:
                out[t.name] = np.ascontiguousarray(a).tobytes()
    return out


def nodes() -> dict[str, dict]:
    """name -> the encode() arguments of each recurrent node of tests/models."""
    out = {}
    for path in sorted((ROOT / "tests" / "models").glob("*.onnx")):
        model = onnx.load(str(path))
        opset = next(i.version for i in model.opset_import if i.domain in ("", "ai.onnx"))
        types, consts = _types(model), _constants(model)
        for g in all_graphs(model.graph):
            for k, n in enumerate(g.node):
                if n.op_type not in RECURRENT or n.domain not in ("", "ai.onnx"):
                    continue
                version = onnx.defs.get_schema(n.op_type, opset, "").since_version
                inputs = [(nm, *types.get(nm, (1, None)), *([consts[nm]] if nm in consts else []))
                          if nm else ("", 0, None) for nm in n.input]
                attrs = [(a.name, *attr_value(a)) for a in n.attribute]
                out[f"model-{path.stem}-{k}-{n.op_type}"] = dict(op=n.op_type, name=n.name, version=version,
                                                                 inputs=inputs, outputs=list(n.output), attrs=attrs)
    return out


def quantized(per_channel: bool) -> dict:
    """A DynamicQuantizeLSTM (int8 per channel with zero points 0, or uint8 per tensor) with
    its scales and zero points as constants the checker reads."""
    rng = np.random.default_rng(5)
    hidden, inp = 3, 2
    dt = np.int8 if per_channel else np.uint8
    shape = (1, 4 * hidden) if per_channel else (1,)
    w = rng.integers(0, 100, (1, inp, 4 * hidden)).astype(dt)
    r = rng.integers(0, 100, (1, hidden, 4 * hidden)).astype(dt)
    scale = rng.uniform(0.01, 0.1, shape).astype(np.float32)
    zero = np.zeros(shape, dt) if per_channel else np.full(shape, 7, dt)
    q = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dt))

    def const(name, a):
        return (name, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape), a.tobytes())

    inputs = [("X", 1, [4, 2, inp]), const("Wq", w), const("Rq", r), ("", 0, None), ("", 0, None), ("", 0, None),
              ("", 0, None), ("", 0, None), const("Ws", scale), const("Wz", zero), const("Rs", scale),
              const("Rz", zero)]
    assert inputs[1][1] == q
    return dict(op="DynamicQuantizeLSTM", domain="com.microsoft", name="q", version=1, inputs=inputs,
                outputs=["Y", "Y_h", "Y_c"], attrs=[("hidden_size", INT, struct.pack("<q", hidden))])


def edits(base: dict) -> dict[str, dict]:
    """One node's refusals and edge cases (each a copy of ``base`` with one change)."""
    def edit(**kw):
        return {**base, **kw}

    def with_attr(name, t, v):
        return [a for a in base["attrs"] if a[0] != name] + [(name, t, v)]

    x = base["inputs"][0]
    return {
        "extra-input": edit(inputs=base["inputs"] + [("extra", 1, [1])] * (9 - len(base["inputs"]))),
        "extra-output": edit(outputs=base["outputs"] + ["o"] * (4 - len(base["outputs"]))),
        "x-missing": edit(inputs=[("", 0, None)] + base["inputs"][1:]),
        "x-null": edit(inputs=[(None, 0, None)] + base["inputs"][1:]),
        "only-x": edit(inputs=base["inputs"][:1]),
        "x-float64": edit(inputs=[(x[0], 11, x[2])] + base["inputs"][1:]),
        "x-float16": edit(inputs=[(x[0], 10, x[2])] + base["inputs"][1:]),
        "count-beyond-list": edit(count_in=12),
        "version-13": edit(version=13),
        "no-output": edit(outputs=["", ""]),
        "hidden-as-float": edit(attrs=with_attr("hidden_size", FLOAT, struct.pack("<f", 16.0))),
        "hidden-negative": edit(attrs=with_attr("hidden_size", INT, struct.pack("<q", -3))),
        "hidden-huge": edit(attrs=with_attr("hidden_size", INT, struct.pack("<q", 1 << 62))),
        "clip-nan": edit(attrs=with_attr("clip", FLOAT, struct.pack("<f", float("nan")))),
        "clip-inf": edit(attrs=with_attr("clip", FLOAT, struct.pack("<f", float("inf")))),
        "clip-negative": edit(attrs=with_attr("clip", FLOAT, struct.pack("<f", -1.0))),
        "layout-2": edit(attrs=with_attr("layout", INT, struct.pack("<q", 2))),
        "direction-bad": edit(attrs=with_attr("direction", STRING, s16("sideways\0x"))),
        "activations-unknown": edit(attrs=with_attr("activations", STRINGS, s16(b"Sigmoid\0Gelu\0Tanh"))),
        "activations-empty": edit(attrs=with_attr("activations", STRINGS, s16(b""))),
        "alpha-nan": edit(attrs=with_attr("activations", STRINGS, s16(b"LeakyRelu\0LeakyRelu\0LeakyRelu"))
                      + [("activation_alpha", FLOATS, s16(struct.pack("<3f", float("nan"), 0.1, float("inf"))))]),
        "alpha-many": edit(attrs=with_attr("activation_alpha", FLOATS, s16(struct.pack("<100f", *range(100))))),
        "alpha-odd-bytes": edit(attrs=with_attr("activation_alpha", FLOATS, s16(b"\x00\x00\x80"))),
        "unknown-attr": edit(attrs=with_attr("zoneout", FLOAT, struct.pack("<f", 0.1))),
        "linear-before-reset-2": edit(attrs=with_attr("linear_before_reset", INT, struct.pack("<q", 2))),
        "input-forget-1": edit(attrs=with_attr("input_forget", INT, struct.pack("<q", 1))),
        "mode-exact": edit(mode="exact"),
        "mode-fast": edit(mode="fast", uuid=False),
        "storage-small": edit(max_storage=64),
        "name-not-utf8": edit(name=b"n\xff\xfe"),
        "no-device": edit(device=False),
        "device-without-nan-preservation": edit(nan_preserve=False),
    }


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for f in OUT.iterdir():
        f.unlink()
    seeds = nodes()
    for name, kw in seeds.items():
        (OUT / name).write_bytes(encode(**kw))
    for op in sorted(RECURRENT):   # the edits on the first node of each op
        first = next(kw for kw in seeds.values() if kw["op"] == op)
        for name, kw in edits(first).items():
            (OUT / f"edit-{op}-{name}").write_bytes(encode(**kw))
    for per_channel in (False, True):
        kw = quantized(per_channel)
        (OUT / f"quantized-{'channel' if per_channel else 'tensor'}").write_bytes(encode(**kw))
    bad_zero = quantized(True)
    wz = bad_zero["inputs"][9]
    bad_zero["inputs"][9] = (*wz[:3], np.full(wz[2], 3, np.int8).tobytes())
    (OUT / "quantized-channel-zero-points-refused").write_bytes(encode(**bad_zero))
    print(f"{len(list(OUT.iterdir()))} files in {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
