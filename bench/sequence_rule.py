#!/usr/bin/env python3
"""The whole-sequence kernel's GPU rows (SEQUENCE_STEPS in src/core/rnn/variants.hpp), measured:
per shape, the whole-sequence kernel, the step kernels and cuDNN strict float32, alternated in
rounds in one process (GPU time and end to end, numpy in and out), with the bits of both ortops
kernels compared (they must agree: docs/perf.md, "Kernel choices").

    python3 -P bench/sequence_rule.py --out DIR [--rounds 3] [--runs 30] [--shape S,B,I,H ...]

Writes DIR/sequence_rule.json and .md; prints the table. Bidirectional float32 LSTM.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import ortops
from ortops import variants
from ortops.tools.measure import weights
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # bench/'s helpers (python -P leaves it off)
import cudnn  # noqa: E402

SHAPES = [(48, 8, 192, 96), (80, 1, 256, 256), (80, 1, 64, 64), (80, 8, 128, 128), (80, 1, 128, 128),
          (80, 16, 128, 128), (80, 8, 256, 256), (48, 32, 96, 96)]


def _ortops(X, W, R, B, sequence: bool, runs: int):
    variants.SEQUENCE_STEPS = sequence
    layer = ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", timestamps=True)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.5:
        y = layer(X)
    gpu, e2e = [], []
    for _ in range(runs):
        t = time.perf_counter()
        y = layer(X)
        e2e.append(1e3 * (time.perf_counter() - t))
        gpu.append(layer.last_gpu_time_ms)
    steps = next((p.steps for pool in layer._plans.values() for p in pool.free), None)
    return dict(gpu=statistics.median(gpu), e2e=statistics.median(e2e), steps=steps), np.asarray(y[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--shape", action="append", default=None, help="SEQ,BATCH,INPUT,HIDDEN")
    a = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in a.shape] if a.shape else SHAPES
    rows = []
    for seq, batch, inp, hidden in shapes:
        W, R, B = weights("LSTM", inp, hidden, 2, np.float32)
        X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(np.float32)
        fig = {"sequence": [], "steps": [], "cudnn": []}
        same = True
        for r in range(a.rounds):
            seqf, ys = _ortops(X, W, R, B, True, a.runs)
            stpf, yt = _ortops(X, W, R, B, False, a.runs)
            same &= ys.tobytes() == yt.tobytes()
            c = cudnn.measure("LSTM", batch, inp, hidden, "bidirectional", "strict", X, a.runs, error=(r == 0))
            fig["sequence"].append(seqf)
            fig["steps"].append(stpf)
            fig["cudnn"].append(None if c is None else dict(gpu=c["gpu_ms"], e2e=c["e2e_ms"]))
        variants.SEQUENCE_STEPS = variants.TABLE
        row = dict(shape=f"{seq}x{batch}x{inp}->{hidden}", same_bits=same, kernels=(fig["sequence"][0]["steps"],
                                                                                     fig["steps"][0]["steps"]))
        for eng, vals in fig.items():
            for k in ("gpu", "e2e"):
                v = [x[k] for x in vals if x is not None]
                row[f"{eng}_{k}"] = (statistics.median(v), min(v), max(v)) if v else None
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "sequence_rule.json"), "w") as f:
        json.dump(rows, f, indent=1)

    def cell(t):
        return "—" if t is None else "%.3f (%.3f–%.3f)" % t

    lines = ["| shape (BiLSTM f32) | whole-sequence GPU | step kernels GPU | cuDNN strict GPU | "
             "whole-sequence e2e | step kernels e2e | cuDNN strict e2e | same bits |", "|---" * 8 + "|"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["shape"], cell(r["sequence_gpu"]), cell(r["steps_gpu"]), cell(r["cudnn_gpu"]),
            cell(r["sequence_e2e"]), cell(r["steps_e2e"]), cell(r["cudnn_e2e"]), "yes" if r["same_bits"] else "NO"))
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "sequence_rule.md"), "w") as f:
        f.write(text + "\n")
    return 0 if all(r["same_bits"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
