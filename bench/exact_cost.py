#!/usr/bin/env python3
"""Exact mode's cost: GPU time of exact against deterministic at the anchor shapes.

    python -P bench/exact_cost.py [--runs 20] [--small] [--out DIR]

For each anchor shape (ortops.tools.bench.ANCHOR_SHAPES) and precision, the median GPU time
(Vulkan timestamps around the passes, ortops.tools.measure) of one layer in each mode, and
their ratio; prints a markdown table (the input for docs/exact.md, 'Cost') and writes it with
the raw numbers to DIR/exact_cost.json. The last anchor shape (200 x 64 x 512 -> 512) is
left out unless --all: it dominates the run time and is throughput-bound, where the cost of
exact's extra instructions is expected to be largest (say so when it is run).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ortops.tools.bench import write_report

from ortops.tools import bench
from ortops.tools.measure import gpu_time


def measure(shapes, dtypes, runs, device=None):
    rows = []
    for shape in shapes:
        for dtype in dtypes:
            row = {"shape": "{} {}x{}x{}->{} {}".format(*shape), "dtype": np.dtype(dtype).name}
            for mode in ("deterministic", "exact"):
                gpu, call, _, _, profile = gpu_time(*shape, dtype, runs, device, mode)
                row[mode] = {"gpu_ms": gpu, "layer_call_ms": call, "profile": profile}
            row["ratio"] = row["exact"]["gpu_ms"] / row["deterministic"]["gpu_ms"]
            rows.append(row)
            print(f"exact_cost: {row['shape']} {row['dtype']}: {row['ratio']:.2f}x", file=sys.stderr)
    return rows


def table(rows) -> str:
    out = ["| shape | dtype | deterministic GPU ms | exact GPU ms | exact / deterministic | exact steps ms |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {r['shape']} | {r['dtype']} | {r['deterministic']['gpu_ms']:.3f} | "
                   f"{r['exact']['gpu_ms']:.3f} | {r['ratio']:.2f} | "
                   f"{r['exact']['profile']['steps_ms']:.3f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--small", action="store_true", help="small shapes (lavapipe)")
    ap.add_argument("--all", action="store_true", help="also the 200 x 64 x 512 -> 512 shape")
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None, help="folder for exact_cost.json and exact_cost.md")
    args = ap.parse_args(argv)
    shapes = bench.SMALL_SHAPES if args.small else bench.ANCHOR_SHAPES[:None if args.all else 4]
    t0 = time.perf_counter()
    rows = measure(shapes, (np.float32, np.float16), args.runs, args.device)
    text = table(rows)
    print(text)
    print(f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    if args.out:
        write_report(args.out, "exact_cost", rows, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
