"""Write the node-config decoder's seed corpus, tests/fuzz/corpus/nodeconfig/ (deterministic).

    python tests/fuzz/make_corpus.py            # rewrites the directory

Standard library only. Valid configs are written as the v4 writer writes them
(``json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=False)``, src/core/config/nodeconfig.hpp)
and named ``ok-*``: tests/fuzz/replay.cpp requires the C++ decoder to accept each and the C++
encoder to give back exactly its bytes, so they also pin the encoder to Python's json. Damaged or
wrong configs are named ``bad-*`` (replay requires a refusal); ``flip-*`` files (one byte flipped
in a valid config, which may land harmlessly, e.g. in the node's name) only have to pass the fuzz
target's checks. tests/test_node_config_decoder.py reads the same files. Also writes tests/fuzz/doubles.txt
(Python's repr of 4000 doubles, for replay --doubles).
"""

from __future__ import annotations

import itertools
import json
import pathlib
import random
import struct

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "corpus" / "nodeconfig"

OPS = {
    # op: (optional inputs, outputs, activation slots, defaults)
    "LSTM": (("B", "sequence_lens", "initial_h", "initial_c", "P"), ("Y", "Y_h", "Y_c"), 3,
             ("Sigmoid", "Tanh", "Tanh")),
    "GRU": (("B", "sequence_lens", "initial_h"), ("Y", "Y_h"), 2, ("Sigmoid", "Tanh")),
    "RNN": (("B", "sequence_lens", "initial_h"), ("Y", "Y_h"), 1, ("Tanh",)),
}
DTYPES = ("float32", "float16")
DIRECTIONS = ("forward", "reverse", "bidirectional")
MODES = ("deterministic", "exact", "fast")
UUID = "0123abcd-4567-89ef-0a1b-2c3d4e5f6a7b"


def f32(x: float) -> float:
    """The float64 value of the float32 nearest x (what an ONNX float attribute holds)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def encode(d: dict) -> bytes:
    return json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def config(op="LSTM", dtype="float32", direction="forward", mode="deterministic", node="lstm", **attrs):
    absent = attrs.pop("absent", [])
    outputs = attrs.pop("outputs", list(OPS[op][1]))
    device = attrs.pop("device", None)
    a = {"hidden_size": 16, "direction": direction, "layout": 0, "activations": None,
         "activation_alpha": None, "activation_beta": None, "clip": None, "input_forget": 0,
         "linear_before_reset": 0}
    a.update(attrs)
    return {"v": 4, "node": node, "op": op, "dtype": dtype, "attrs": a, "absent": absent,
            "outputs": outputs, "device": device, "mode": mode}


def valid() -> dict[str, dict]:
    out = {}
    # Every op x dtype x direction x mode, the other options rotating through their values.
    hidden = (16, None, 1, 1 << 20)
    for i, (op, dtype, direction, mode) in enumerate(itertools.product(OPS, DTYPES, DIRECTIONS, MODES)):
        optional, outputs, _, _ = OPS[op]
        subsets = [list(s) for r in range(len(optional) + 1) for s in itertools.combinations(optional, r)]
        outs = [list(s) for r in range(1, len(outputs) + 1) for s in itertools.combinations(outputs, r)]
        out[f"{op}-{dtype}-{direction}-{mode}"] = config(
            op, dtype, direction, mode, node=f"/model/{op.lower()}_{i}",
            hidden_size=hidden[i % 4], layout=i % 2, absent=subsets[i % len(subsets)],
            outputs=outs[i % len(outs)], device=UUID if i % 3 == 0 else None)
    # Activations: every name somewhere, the counts each op and direction allows, parameters.
    out["lstm-activations"] = config(activations=["Sigmoid", "Tanh", "Tanh"])
    out["lstm-activations-lowercase"] = config(activations=["sigmoid", "TANH", "tanh"])
    out["lstm-bidirectional-one-set"] = config(direction="bidirectional", activations=["HardSigmoid", "Elu", "Softsign"],
                                               activation_alpha=[f32(0.2), 1.0], activation_beta=[0.5])
    out["lstm-bidirectional-two-sets"] = config(
        direction="bidirectional",
        activations=["Sigmoid", "Tanh", "Tanh", "LeakyRelu", "Affine", "ScaledTanh"],
        activation_alpha=[f32(0.01), f32(0.5), f32(1.5)], activation_beta=[f32(0.25), f32(-2.0)])
    out["gru-activations"] = config("GRU", node="gru", activations=["ThresholdedRelu", "Softplus"],
                                    activation_alpha=[f32(0.1)])
    out["gru-bidirectional-four"] = config("GRU", direction="bidirectional", node="gru",
                                           activations=["Sigmoid", "Tanh", "Relu", "Relu"])
    out["rnn-two-names-one-direction"] = config("RNN", node="rnn", activations=["Tanh", "Tanh"])
    out["rnn-bidirectional-two"] = config("RNN", direction="bidirectional", node="rnn",
                                          activations=["Relu", "Affine"], activation_alpha=[2.0],
                                          activation_beta=[f32(-0.3)])
    out["rnn-empty-activations"] = config("RNN", node="rnn", activations=[])
    out["alpha-64"] = config(activations=["Affine", "Affine", "Affine"],
                             activation_alpha=[f32(i / 7) for i in range(64)],
                             activation_beta=[f32(-i * 1e-3) for i in range(64)])
    out["alpha-extremes"] = config(activations=["LeakyRelu", "Tanh", "Tanh"],
                                   activation_alpha=[f32(3.4028234663852886e38), 1.401298464324817e-45, -0.0])
    # Options.
    out["clip"] = config(clip=3.0)
    out["clip-float32"] = config(clip=f32(0.1))
    out["clip-tiny"] = config(clip=1.401298464324817e-45)
    out["clip-max"] = config(clip=3.4028234663852886e38)
    out["lstm-input-forget"] = config(input_forget=1, absent=["P"])
    out["gru-linear-before-reset"] = config("GRU", node="gru", linear_before_reset=1)
    out["layout-1-no-hidden-size"] = config(layout=1, hidden_size=None)
    out["all-absent"] = config(absent=["P", "initial_c", "initial_h", "sequence_lens", "B"], outputs=["Y_c"])
    # Node names: empty, escapes, control characters, non-ASCII (\u escapes), the longest.
    out["node-empty"] = config(node="")
    out["node-escapes"] = config(node='a "quoted" \\ name/with/slashes\t\n')
    out["node-controls"] = config(node="".join(chr(c) for c in range(32)) + "\x7f")
    out["node-unicode"] = config(node="\u00e9\u4e2d\U0001f600\u202e\ufeff")
    out["node-4096"] = config(node="n" * 4096)
    return {f"ok-{k}": v for k, v in out.items()}


def bad(base: dict) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    text = encode(base)

    def variant(name, edit):
        d = json.loads(text)
        edit(d)
        out[name] = encode(d)

    def set_attr(k, v):
        return lambda d: d["attrs"].__setitem__(k, v)

    def set_top(k, v):
        return lambda d: d.__setitem__(k, v)

    # Versions, keys.
    v3 = {"v": 3, "key": "k", "node": "lstm", "op": "LSTM", "dtype": "float32", "attrs": base["attrs"],
          "weights": "inputs", "absent": [], "outputs": ["Y"], "gate": "Y", "device": None, "mode": "deterministic"}
    out["v3"] = encode(v3)
    variant("v5", set_top("v", 5))
    variant("v-float", set_top("v", 4.0))
    variant("v-string", set_top("v", "4"))
    for k in base:
        variant(f"missing-{k}", lambda d, k=k: d.pop(k))
    for k in base["attrs"]:
        variant(f"missing-attrs-{k}", lambda d, k=k: d["attrs"].pop(k))
    variant("unknown-key", set_top("weights", "inputs"))
    variant("unknown-attrs-key", set_attr("foo", 1))
    out["duplicate-key"] = text.replace(b'"mode":"deterministic"', b'"mode":"deterministic","mode":"exact"')
    out["duplicate-attrs-key"] = text.replace(b'"layout":0', b'"layout":0,"layout":0')
    # Types and ranges.
    for name, (k, v) in {
        "hidden-size-0": ("hidden_size", 0), "hidden-size-negative": ("hidden_size", -1),
        "hidden-size-huge": ("hidden_size", (1 << 20) + 1), "hidden-size-bool": ("hidden_size", True),
        "hidden-size-float": ("hidden_size", 16.0), "hidden-size-string": ("hidden_size", "16"),
        "direction-case": ("direction", "Forward"), "direction-null": ("direction", None),
        "layout-2": ("layout", 2), "layout-bool": ("layout", False), "layout-float": ("layout", 1.0),
        "activations-string": ("activations", "Tanh"), "activations-unknown": ("activations", ["Sigmoid", "Tanh", "Gelu"]),
        "activations-count": ("activations", ["Sigmoid", "Tanh"]), "activations-number": ("activations", [1, 2, 3]),
        "alpha-65": ("activation_alpha", [1.0] * 65), "alpha-string": ("activation_alpha", "1.0"),
        "alpha-bool": ("activation_alpha", [True]), "beta-float32-overflow": ("activation_beta", [3.5e38]),
        "clip-0": ("clip", 0.0), "clip-negative": ("clip", -1.0), "clip-underflows-float32": ("clip", 1e-50),
        "clip-string": ("clip", "1"), "input-forget-2": ("input_forget", 2), "input-forget-bool": ("input_forget", True),
        "linear-before-reset-on-lstm": ("linear_before_reset", 1),
    }.items():
        variant(name, set_attr(k, v))
    variant("input-forget-on-gru", lambda d: (d.__setitem__("op", "GRU"), d.__setitem__("outputs", ["Y"]),
                                              d["attrs"].__setitem__("input_forget", 1)))
    variant("rnn-three-activations", lambda d: (d.__setitem__("op", "RNN"), d.__setitem__("outputs", ["Y"]),
                                                d["attrs"].__setitem__("activations", ["Tanh"] * 3)))
    for name, (k, v) in {
        "op-lower": ("op", "lstm"), "op-unknown": ("op", "Conv"), "dtype-float64": ("dtype", "float64"),
        "node-number": ("node", 7), "node-4097": ("node", "n" * 4097), "absent-x": ("absent", ["X"]),
        "absent-twice": ("absent", ["B", "B"]), "absent-string": ("absent", "B"),
        "outputs-empty": ("outputs", []), "outputs-order": ("outputs", ["Y_h", "Y"]),
        "outputs-unknown": ("outputs", ["Z"]), "device-upper": ("device", UUID.upper()),
        "device-short": ("device", UUID[:-1]), "device-dashes": ("device", UUID.replace("-", "")),
        "mode-case": ("mode", "Exact"), "mode-null": ("mode", None), "attrs-list": ("attrs", []),
    }.items():
        variant(name, set_top(k, v))
    # JSON and bytes.
    out["not-object"] = b"[]"
    out["empty"] = b""
    out["bom"] = b"\xef\xbb\xbf" + text
    out["trailing"] = text + b"x"
    out["nan"] = text.replace(b'"clip":null', b'"clip":NaN')
    out["infinity"] = text.replace(b'"clip":null', b'"clip":Infinity')
    out["leading-zero"] = text.replace(b'"hidden_size":16', b'"hidden_size":016')
    out["invalid-utf8-node"] = text.replace(b'"node":"lstm"', b'"node":"ls\xfftm"')
    out["overlong-node"] = text.replace(b'"node":"lstm"', b'"node":"ls\xc0\xaftm"')
    out["surrogate-node"] = text.replace(b'"node":"lstm"', b'"node":"ls\xed\xa0\x80tm"')
    out["lone-surrogate-escape"] = text.replace(b'"node":"lstm"', b'"node":"ls\\ud800tm"')
    out["above-10ffff-node"] = text.replace(b'"node":"lstm"', b'"node":"ls\xf4\x90\x80\x80tm"')
    out["control-in-node"] = text.replace(b'"node":"lstm"', b'"node":"ls\x01tm"')
    out["bad-escape"] = text.replace(b'"node":"lstm"', b'"node":"ls\\xtm"')
    out["deep"] = text.replace(b'"activations":null', b'"activations":' + b"[" * 15 + b"]" * 15)
    out["too-big"] = text.replace(b'"node":"lstm"', b'"node":"' + b"n" * (64 * 1024) + b'"')
    for cut in (1, len(text) // 3, len(text) // 2, len(text) - 1):
        out[f"truncated-{cut}"] = text[:cut]
    return {f"bad-{k}": v for k, v in out.items()}


def flips(base: bytes) -> dict[str, bytes]:
    rng = random.Random(4)
    out = {}
    for k in range(12):
        b = bytearray(base)
        pos = rng.randrange(len(b))
        b[pos] ^= 1 << rng.randrange(8)
        out[f"flip-{pos:03d}"] = bytes(b)
    return out


def doubles(n: int = 4000) -> str:
    """Lines "<hex bits of a double> <Python's repr>" over the whole range (random bit patterns,
    powers of ten, the repr's fixed/exponent switch): tests/fuzz/replay.cpp --doubles checks the
    C++ writer against them."""
    rng = random.Random(1201)
    values = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e16, 1e15, 1e-4,
              1e-5, 9999999999999998.0, 0.1, 1 / 3, 2.0 ** 63, 123456789012345678.0]
    values += [10.0 ** k for k in range(-323, 309)]
    while len(values) < n:
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if x == x and abs(x) != float("inf"):
            values.append(x if rng.random() < 0.5 else float(f"{x:.{rng.randrange(1, 8)}g}"))
    return "".join(f"{struct.unpack('<Q', struct.pack('<d', x))[0]:016x} {x!r}\n" for x in values)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        old.unlink()
    files: dict[str, bytes] = {name: encode(d) for name, d in valid().items()}
    base = config()
    files.update(bad(base))
    files.update(flips(encode(base)))
    for name, data in sorted(files.items()):
        (OUT / name).write_bytes(data)
    print(f"{OUT}: {len(files)} files")
    (HERE / "doubles.txt").write_text(doubles())


if __name__ == "__main__":
    main()
