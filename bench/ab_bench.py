#!/usr/bin/env python3
"""Two builds of ortops side by side in one call: the anchor shapes' GPU time, layer call and
session run, each build in its own process (two ortops cannot share one), the builds
alternated round by round (order swapped every round) so that clock and neighbour drift falls
on both. A verdict per figure: "slower" only when the new build's best round is slower than
the old build's worst (beyond the run-to-run spread).

    python3 -P ab_bench.py --build old=/tmp/site-old --build new=/tmp/site-new --rounds 3 --out DIR
        [--modes deterministic,exact]

--modes: the ortops modes each build is measured in (default deterministic), every figure per
mode; with two or more, a second table gives each build's ratio of each mode to the first
(e.g. exact / deterministic, docs/exact.md "Cost"), round by round.

Each --build names a folder put first on PYTHONPATH (pip install --target DIR .); the worker
mode (--worker) measures the build its interpreter imports and prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ANCHORS = [
    ("LSTM", 80, 1, 256, 256, "bidirectional"),
    ("LSTM", 48, 8, 192, 96, "bidirectional"),
    ("LSTM", 80, 8, 256, 256, "bidirectional"),
    ("GRU", 80, 1, 256, 256, "bidirectional"),
    ("LSTM", 200, 64, 512, 512, "bidirectional"),
]
SMALL = [("LSTM", 8, 1, 32, 32, "bidirectional"), ("GRU", 8, 2, 32, 32, "bidirectional")]
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _model(cell, seq, batch, inp, hidden, direction, W, R, B, dtype):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    elem = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    outs = ["Y", "Y_h", "Y_c"] if cell == "LSTM" else ["Y", "Y_h"]
    node = helper.make_node(cell, ["X", "W", "R", "B"], outs, hidden_size=hidden, direction=direction)
    graph = helper.make_graph(
        [node], "ab", [helper.make_tensor_value_info("X", elem, [seq, batch, inp])],
        [helper.make_tensor_value_info(o, elem, None) for o in outs],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _median_ms(fn, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(1e3 * (time.perf_counter() - t))
    return statistics.median(out)


def worker(runs: int, dtypes, shapes, modes=("deterministic",)) -> dict:
    import numpy as np
    import ortops

    res = {"ortops": os.path.dirname(ortops.__file__), "rows": []}
    for mode, dt, shape in ((m, d, sh) for m in modes for d in dtypes for sh in shapes):
        dtype = np.float16 if dt == "float16" else np.float32
        cell, seq, batch, inp, hidden, direction = shape
        dirs = 2 if direction == "bidirectional" else 1
        rng = np.random.default_rng(0)
        s = 1.0 / np.sqrt(hidden)
        g = GATES[cell]
        W = rng.uniform(-s, s, (dirs, g * hidden, inp)).astype(dtype)
        R = rng.uniform(-s, s, (dirs, g * hidden, hidden)).astype(dtype)
        B = rng.uniform(-s, s, (dirs, 2 * g * hidden)).astype(dtype)
        X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(dtype)
        layer = ortops.RecurrentLayer(cell, W, R, B, direction=direction, timestamps=True, mode=mode)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:     # clocks up (docs/perf.md, "GPU clocks")
            layer(X)
        gpu, parts = [], {}
        for _ in range(runs):
            layer(X)
            gpu.append(layer.last_gpu_time_ms)
            for k, v in (layer.last_gpu_profile or {}).items():
                parts.setdefault(k, []).append(v)
        call = _median_ms(lambda: layer(X), runs)
        y = np.asarray(layer(X)[0])
        # The same call into preallocated outputs: without the fresh output arrays, whose page
        # faults (a new mapping each call above glibc's 32 MB) vary from process to process.
        names = ("Y", "Y_h", "Y_c") if cell == "LSTM" else ("Y", "Y_h")
        out = {n: np.empty_like(a) for n, a in zip(names, layer(X))}
        call_out = _median_ms(lambda: layer(X, out=out), runs)
        sess = ortops.InferenceSession(_model(cell, seq, batch, inp, hidden, direction, W, R, B, dtype), mode=mode)
        for _ in range(3):
            sess.run(None, {"X": X})
        e2e = _median_ms(lambda: sess.run(None, {"X": X}), runs)
        import hashlib
        res["rows"].append(dict(shape="%s %dx%dx%d->%d %s" % (cell, seq, batch, inp, hidden, direction[:2]),
                                dtype=dt, mode=mode, gpu_ms=statistics.median(gpu), call_ms=call, call_out_ms=call_out,
                                session_ms=e2e,
                                gpu_parts_ms={k: statistics.median(v) for k, v in parts.items()},
                                y_sha=hashlib.sha256(y.tobytes()).hexdigest()[:16]))
        del layer, sess
    return res


def compare(rounds: dict, old: str, new: str, modes: list) -> tuple:
    """The verdict table of build `new` against build `old`, and its number of slower figures."""
    lines = ["| shape | dtype | mode | figure | %s median (min–max) | %s median (min–max) | %s/%s | verdict | same bits |"
             % (old, new, new, old), "|---|---|---|---|---|---|---|---|---|"]
    worst = 0
    split = []   # where a GPU time is slower: its parts (projection and set-up, steps, outputs)
    for i, row in enumerate(rounds[old][0]["rows"]):
        same = all(rr["rows"][i]["y_sha"] == row["y_sha"] for b in rounds for rr in rounds[b])
        for fig in ("gpu_ms", "call_ms", "call_out_ms", "session_ms"):
            if fig not in row:   # a build whose worker predates the figure
                continue
            o = [rr["rows"][i][fig] for rr in rounds[old]]
            n = [rr["rows"][i][fig] for rr in rounds[new]]
            ratio = statistics.median(n) / statistics.median(o)
            verdict = "slower" if min(n) > max(o) else ("faster" if max(n) < min(o) else "within spread")
            worst += verdict == "slower"
            if fig == "gpu_ms" and verdict == "slower":
                for part in row.get("gpu_parts_ms", {}):
                    po = [rr["rows"][i]["gpu_parts_ms"][part] for rr in rounds[old]]
                    pn = [rr["rows"][i]["gpu_parts_ms"][part] for rr in rounds[new]]
                    split.append("| %s | %s | %s | %.4f (%.4f–%.4f) | %.4f (%.4f–%.4f) |" % (
                        row["shape"], row["dtype"], part, statistics.median(po), min(po), max(po),
                        statistics.median(pn), min(pn), max(pn)))
            lines.append("| %s | %s | %s | %s | %.3f (%.3f–%.3f) | %.3f (%.3f–%.3f) | %.3f | %s | %s |" % (
                row["shape"], row["dtype"], row.get("mode", "deterministic"), fig, statistics.median(o), min(o), max(o),
                statistics.median(n), min(n), max(n), ratio, verdict, "yes" if same else "NO"))
    if split:
        lines += ["", "Where a GPU time is slower, its parts (ms):", "",
                  "| shape | dtype | part | %s median (min–max) | %s median (min–max) |" % (old, new), "|---|---|---|---|---|",
                  *split]
    if len(modes) > 1:
        # Each build's GPU time in each further mode over the first mode's, per round (the
        # modes ran in the same process, one after the other): median (min–max) of the rounds.
        lines += ["", "| shape | dtype | ratio | %s median (min–max) | %s median (min–max) |" % (old, new),
                  "|---|---|---|---|---|"]
        rows0 = rounds[old][0]["rows"]
        key = lambda r: (r["shape"], r["dtype"])
        for i, row in enumerate(rows0):
            if row["mode"] == modes[0]:
                continue
            j = next(k for k, r in enumerate(rows0) if r["mode"] == modes[0] and key(r) == key(row))
            cells = []
            for b in (old, new):
                q = [rr["rows"][i]["gpu_ms"] / rr["rows"][j]["gpu_ms"] for rr in rounds[b]]
                cells.append("%.2f (%.2f–%.2f)" % (statistics.median(q), min(q), max(q)))
            lines.append("| %s | %s | GPU %s / %s | %s | %s |" % (row["shape"], row["dtype"], row["mode"], modes[0],
                                                                   cells[0], cells[1]))
    return lines, worst


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--build", action="append", default=[],
                   help="NAME=DIR (put first on PYTHONPATH), or NAME=DIR@VAR=VALUE,... (that build with these "
                        "environment variables set, e.g. a switch); the first is the old build, each other is "
                        "compared with it")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--dtypes", default="float32,float16")
    p.add_argument("--out", default=".")
    p.add_argument("--small", action="store_true", help="two tiny shapes (a check of this script on lavapipe)")
    p.add_argument("--modes", default="deterministic", help="ortops modes, comma-separated (first: the ratios' base)")
    a = p.parse_args()
    dtypes = a.dtypes.split(",")
    modes = a.modes.split(",")
    if a.worker:
        print(json.dumps(worker(a.runs, dtypes, SMALL if a.small else ANCHORS, modes)))
        return 0
    builds = [b.split("=", 1) for b in a.build]
    settings = {}
    for b in builds:
        b[1], _, extra = b[1].partition("@")
        settings[b[0]] = dict(kv.split("=", 1) for kv in filter(None, extra.split(",")))
    rounds = {name: [] for name, _ in builds}
    for r in range(a.rounds):
        order = builds if r % 2 == 0 else builds[::-1]
        for name, path in order:
            env = dict(os.environ, **settings[name])
            if path:   # empty: the interpreter's own installation
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, os.environ.get("PYTHONPATH")]))
            cp = subprocess.run([sys.executable, "-P", __file__, "--worker", "--runs", str(a.runs),
                                 "--dtypes", a.dtypes, "--modes", a.modes] + (["--small"] if a.small else []), env=env, capture_output=True, text=True)
            if cp.returncode != 0:
                print(cp.stderr[-3000:], file=sys.stderr)
                return 1
            rounds[name].append(json.loads(cp.stdout.strip().splitlines()[-1]))
            print("round %d %s done (%s)" % (r + 1, name, rounds[name][-1]["ortops"]), file=sys.stderr, flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "ab_bench.json"), "w") as f:
        json.dump(rounds, f, indent=1)
    old = builds[0][0]
    lines, worst = [], 0
    for new, _ in builds[1:]:
        if lines:
            lines += ["", "%s (%s) against %s:" % (new, ", ".join("%s=%s" % kv for kv in settings[new].items()) or
                                                   "no settings", old), ""]
        block, slower = compare(rounds, old, new, modes)
        lines += block
        worst += slower if new == builds[1][0] else 0
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "ab_bench.md"), "w") as f:
        f.write(text + "\n")
    print("ab_bench: %d figure(s) slower beyond the spread" % worst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
