#!/usr/bin/env python3
"""Mode "fast" against "deterministic": input projection GPU time and accuracy (docs/modes.md).

    python -P bench/fast_cost.py [--runs 20] [--small] [--device D] [--out DIR]

Prints the device's VK_KHR_cooperative_matrix combinations and which projection fast mode
records on it, then for each shape (default: the anchors LSTM 200 x 64 x 512 -> 512
and 100 x 64 x 1024 -> 1024, bidirectional, float16; --small: a lavapipe-sized one) the median GPU time of one layer in
each mode split into projection / steps / outputs (Vulkan timestamps, ortops.tools.measure), the
scaled error of each mode's outputs against the float64 reference, and whether fast mode gave
the same bits on a second run. Writes DIR/fast_cost.json and DIR/fast_cost.md. Exit status 1
when fast mode leaves the float16 tolerance or changes bits between runs.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ortops
from ortops import fast, reference
from ortops.compare import TOLERANCE, scaled_error
from ortops.device import context
from ortops.tools.measure import gpu_time, weights
from ortops.tools.bench import write_report

# This script measures the cooperative-matrix projection, which fast mode records only when
# enabled (ortops.fast.ENABLED: on unless ORTOPS_COOPMAT=0); measure it even then.
fast.ENABLED = True

# The two float16 anchors of issue 22's targets: 200 x 64 x 512 -> 512 and 100 x 64 x 1024 ->
# 1024, bidirectional (at the second the projection is the larger part of the layer).
ANCHOR = [("LSTM", 200, 64, 512, 512, "bidirectional"), ("LSTM", 100, 64, 1024, 1024, "bidirectional")]
SMALL = [("LSTM", 10, 4, 40, 24, "bidirectional")]


def accuracy(shape, device):
    """Per mode: the scaled error of each output against the float64 reference, the projection
    shader recorded and whether a second run gave the same bits."""
    cell, seq, batch, inp, hidden, direction = shape
    W, R, B = weights(cell, inp, hidden, 2 if direction == "bidirectional" else 1, np.float16)
    X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(np.float16)
    want = getattr(reference, cell.lower())(X, W, R, B, direction=direction)
    out = {}
    for mode in ("deterministic", "fast"):
        layer = ortops.RecurrentLayer(cell, W, R, B, direction=direction, device=device, mode=mode)
        first, second = layer(X), layer(X)
        (pool,) = layer._plans.values()
        out[mode] = dict(errors=[scaled_error(g, w) for g, w in zip(first, want)],
                         projection=pool.free[0].projection,
                         same_bits=all(a.tobytes() == b.tobytes() for a, b in zip(first, second)))
    return out


def measure(shapes, runs, device):
    rows = []
    for shape in shapes:
        row = {"shape": "{} {}x{}x{}->{} {}".format(*shape), "dtype": "float16"}
        for mode in ("deterministic", "fast"):
            gpu, call, _, _, profile = gpu_time(*shape, np.float16, runs, device, mode)
            row[mode] = {"gpu_ms": gpu, "layer_call_ms": call, "profile": profile}
        for mode, acc in accuracy(shape, device).items():
            row[mode].update(acc)
        row["projection_speedup"] = (row["deterministic"]["profile"]["projection_ms"]
                                     / row["fast"]["profile"]["projection_ms"])
        rows.append(row)
        print(f"fast_cost: {row['shape']}: projection {row['projection_speedup']:.2f}x", file=sys.stderr)
    return rows


def table(rows) -> str:
    out = ["| shape | mode | projection kernel | GPU ms | projection ms | steps ms | outputs ms "
           "| max scaled error | same bits run to run |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        for mode in ("deterministic", "fast"):
            m, p = r[mode], r[mode]["profile"]
            out.append(f"| {r['shape']} {r['dtype']} | {mode} | {m['projection']} | {m['gpu_ms']:.3f} "
                       f"| {p['projection_ms']:.3f} | {p['steps_ms']:.3f} | {p['outputs_ms']:.3f} "
                       f"| {max(m['errors']):.3g} | {m['same_bits']} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--small", action="store_true", help="a small shape (lavapipe)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None, help="folder for fast_cost.json and fast_cost.md")
    args = ap.parse_args(argv)
    dev, ctx = context(args.device)
    why = fast.coopmat_reason(dev, ctx)
    print(dev.describe())
    print("fast projection: " + (f"cooperative matrix ({fast.REQUIRED})" if why is None
                                 else f"portable ({why})"))
    rows = measure(SMALL if args.small else ANCHOR, args.runs, args.device)
    text = table(rows)
    print(text)
    if args.out:
        write_report(args.out, "fast_cost", dict(device=str(dev), driver=f"{dev.driver} {dev.driver_info}",
                                                 cooperative_matrix=[s._asdict() for s in dev.cooperative_matrix],
                                                 fast_projection=why or fast.KERNEL, runs=args.runs,
                                                 results=rows), text)
    tol = TOLERANCE[np.dtype(np.float16)]
    bad = [r["shape"] for r in rows if max(r["fast"]["errors"]) > tol or not r["fast"]["same_bits"]]
    if bad:
        print(f"fast_cost: fast mode outside the float16 tolerance {tol:g} or not the same bits "
              f"run to run: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
