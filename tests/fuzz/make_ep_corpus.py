"""Write the EP node reader's seed corpus, tests/fuzz/corpus/ep_node/ (deterministic).

    .venv/bin/python tests/fuzz/make_ep_corpus.py      # rewrites the directory

One file per recurrent node of tests/models/*.onnx (every scope: If/Loop/Scan bodies too), in
the layout tests/fuzz/fuzz_ep_node.cpp's Reader decodes: what ONNX Runtime's graph API hands the
EP for that node (op, name, opset version, input and output counts, each input's presence,
ONNX element type and dims after shape inference, the attributes with ORT's attribute types and
values), then the mode and the device's storage-binding limit. A few edits of one node each
(an extra input, X missing, an attribute of the wrong type, a non-finite clip, an unknown
activation, out-of-range values, too many alpha values, float64) start the fuzzer near the
refusals. Needs onnx (the project's .venv).
"""

from __future__ import annotations

import pathlib
import struct

import onnx
from onnx import AttributeProto, shape_inference

from ortops.ort.subgraphs import all_graphs

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE / "corpus" / "ep_node"
RECURRENT = {"RNN", "GRU", "LSTM"}
# ORT's OrtOpAttrType (src/ep/node_check.hpp's AttrType).
ATTR_TYPE = {AttributeProto.INT: 1, AttributeProto.INTS: 2, AttributeProto.FLOAT: 3, AttributeProto.FLOATS: 4,
             AttributeProto.STRING: 5, AttributeProto.STRINGS: 6, AttributeProto.GRAPH: 7, AttributeProto.TENSOR: 8}
MODES = {"deterministic": 0, "exact": 1, "fast": 2}


def s16(b: bytes | str) -> bytes:
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<H", len(b)) + b


def attr_value(a: AttributeProto) -> tuple[int, bytes]:
    """(ORT attribute type, the value as the Reader reads it)."""
    t = ATTR_TYPE.get(a.type, 0)
    if a.type == AttributeProto.INT:
        return t, struct.pack("<q", a.i)
    if a.type == AttributeProto.FLOAT:
        return t, struct.pack("<f", a.f)
    if a.type == AttributeProto.STRING:
        return t, s16(a.s)
    if a.type == AttributeProto.STRINGS:
        return t, s16(b"\0".join(a.strings))
    if a.type == AttributeProto.FLOATS:
        return t, s16(struct.pack(f"<{len(a.floats)}f", *a.floats))
    if a.type == AttributeProto.INTS:
        return t, s16(struct.pack(f"<{len(a.ints)}q", *a.ints))
    return t, s16(b"")


def encode(op: str, name: str | bytes, version: int, inputs: list, outputs: list, attrs: list,
           mode: str = "deterministic", max_storage: int = 1 << 30, uuid: bool = True, count_in: int | None = None) -> bytes:
    """inputs: (name or None, element type, dims or None) per position; outputs: names ("" absent);
    attrs: (name, ORT type, value bytes)."""
    out = s16(op) + s16(name) + struct.pack("<i", version)
    out += bytes([count_in if count_in is not None else len(inputs), len(outputs)])
    for nm, elem, dims in inputs[:12]:
        flags = (1 if nm is None else 0) | (2 if nm == "" else 0)
        out += bytes([flags]) + struct.pack("<i", elem)
        if dims is None:
            out += b"\xff"
        else:
            out += bytes([len(dims)]) + b"".join(struct.pack("<q", -1 if d is None else d) for d in dims[:8])
    out += bytes(0 if o else 1 for o in outputs[:3])
    out += bytes([len(attrs)])
    for nm, t, v in attrs:
        out += s16(nm) + bytes([t]) + v
    return out + bytes([MODES[mode]]) + struct.pack("<I", max_storage) + bytes([1 if uuid else 0])


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


def nodes() -> dict[str, dict]:
    """name -> the encode() arguments of each recurrent node of tests/models."""
    out = {}
    for path in sorted((ROOT / "tests" / "models").glob("*.onnx")):
        model = onnx.load(str(path))
        opset = next(i.version for i in model.opset_import if i.domain in ("", "ai.onnx"))
        types = _types(model)
        for g in all_graphs(model.graph):
            for k, n in enumerate(g.node):
                if n.op_type not in RECURRENT or n.domain not in ("", "ai.onnx"):
                    continue
                version = onnx.defs.get_schema(n.op_type, opset, "").since_version
                inputs = [(nm, *types.get(nm, (1, None))) if nm else ("", 0, None) for nm in n.input]
                attrs = [(a.name, *attr_value(a)) for a in n.attribute]
                out[f"model-{path.stem}-{k}-{n.op_type}"] = dict(op=n.op_type, name=n.name, version=version,
                                                                 inputs=inputs, outputs=list(n.output), attrs=attrs)
    return out


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
        "hidden-as-float": edit(attrs=with_attr("hidden_size", 3, struct.pack("<f", 16.0))),
        "hidden-negative": edit(attrs=with_attr("hidden_size", 1, struct.pack("<q", -3))),
        "hidden-huge": edit(attrs=with_attr("hidden_size", 1, struct.pack("<q", 1 << 62))),
        "clip-nan": edit(attrs=with_attr("clip", 3, struct.pack("<f", float("nan")))),
        "clip-inf": edit(attrs=with_attr("clip", 3, struct.pack("<f", float("inf")))),
        "clip-negative": edit(attrs=with_attr("clip", 3, struct.pack("<f", -1.0))),
        "layout-2": edit(attrs=with_attr("layout", 1, struct.pack("<q", 2))),
        "direction-bad": edit(attrs=with_attr("direction", 5, s16("sideways\0x"))),
        "activations-unknown": edit(attrs=with_attr("activations", 6, s16(b"Sigmoid\0Gelu\0Tanh"))),
        "activations-empty": edit(attrs=with_attr("activations", 6, s16(b""))),
        "alpha-nan": edit(attrs=with_attr("activations", 6, s16(b"LeakyRelu\0LeakyRelu\0LeakyRelu"))
                      + [("activation_alpha", 4, s16(struct.pack("<3f", float("nan"), 0.1, float("inf"))))]),
        "alpha-many": edit(attrs=with_attr("activation_alpha", 4, s16(struct.pack("<100f", *range(100))))),
        "alpha-odd-bytes": edit(attrs=with_attr("activation_alpha", 4, s16(b"\x00\x00\x80"))),
        "unknown-attr": edit(attrs=with_attr("zoneout", 3, struct.pack("<f", 0.1))),
        "linear-before-reset-2": edit(attrs=with_attr("linear_before_reset", 1, struct.pack("<q", 2))),
        "input-forget-1": edit(attrs=with_attr("input_forget", 1, struct.pack("<q", 1))),
        "mode-exact": edit(mode="exact"),
        "mode-fast": edit(mode="fast", uuid=False),
        "storage-small": edit(max_storage=64),
        "name-not-utf8": edit(name=b"n\xff\xfe"),
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
    print(f"{len(list(OUT.iterdir()))} files in {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
