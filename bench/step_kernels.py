"""The step kernels side by side on one device: GPU time of the lanes kernel (glsl/step.comp)
and of the batched kernels (glsl/step_batched.comp, v4; glsl/step_tiled.comp, v5's register
tile, for tilings of more than one row a thread) in several tilings, every output checked bit
for bit against the lanes kernel's, with cuDNN (strict float32, TF32, float16) measured in the
same run where torch and CUDA are there. Stage `steps` of scripts/gpu_machine.sh. The tiling
`default` runs what ships, nothing set: the batched kernel from ortops.variants' BATCHED_FROM
with the native table's tile for the shape's element type and batch (src/core/rnn/variants.hpp,
BATCHED_TILES), the lanes kernel below.

    python bench/step_kernels.py --out DIR [--small] [--runs N] [--tilings default,1x2x1x8,2x1x1x8x4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

import ortops
from ortops import variants
from ortops.timing import warm
from ortops.tools.measure import weights
from ortops.tools.bench import write_report
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # bench/'s helpers (python -P leaves it off)
import cudnn  # noqa: E402

LANES = None   # every batch on the lanes kernel
# (seq, batch, hidden) of bidirectional LSTMs (input = hidden); the anchor first.
SHAPES = [(200, 64, 512), (200, 16, 512), (200, 32, 512), (200, 128, 512), (100, 256, 512),
          (100, 64, 1024), (100, 64, 256)]
SMALL = [(6, 16, 33), (5, 12, 64)]
# (units per thread, groups, prefetch, class split[, batch rows per thread]): v4's former
# defaults (float32 1x2x1x8, float16 2x2x1x8) as the baseline, then v5's register tiles
# (glsl/step_tiled.comp): 4 rows x 2 units (32 sums a thread, the tile docs/perf.md proposed;
# the default of float16 and of float32 below batch 64), with 2 positions' loads in flight,
# 4 x 1 and 2 x 2 (16 sums, twice the warps; 2x2x1x8x2 the float32 default from batch 64),
# 8 x 1. Every tiling is set in full here, so the table's defaults (src/core/rnn/variants.hpp,
# BATCHED_TILES) never fill a field; a 4-field tiling is v4 (rows 1).
TILINGS = [(1, 2, 1, 8), (2, 2, 1, 8), (2, 1, 1, 8, 4), (2, 1, 2, 8, 4), (1, 2, 1, 8, 4), (1, 2, 2, 8, 4),
           (2, 2, 1, 8, 2), (1, 1, 1, 8, 8)]


DEFAULT = ("default",)   # nothing set: what ships


def _layer(hidden, dtype, upt, by, batched_from, prefetch=1, ksplit=1, rows=1):
    variants.BATCHED_FROM, variants.BATCHED_UPT, variants.BATCHED_BY = batched_from, upt, by
    variants.BATCHED_PREFETCH, variants.BATCHED_KSPLIT, variants.BATCHED_ROWS = prefetch, ksplit, rows
    W, R, B = weights("LSTM", hidden, hidden, 2, dtype)
    return ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", timestamps=True)


def _time(layer, X, runs):
    layer(X)
    layer(X)
    total, steps = [], []
    for _ in range(runs):
        out = layer(X)
        total.append(layer.last_gpu_time_ms)
        steps.append(layer.last_gpu_profile["steps_ms"])
    return statistics.median(total), statistics.median(steps), out


def _cudnn(batch, hidden, X, runs):
    """{mode: (GPU ms, scaled error against float64)} of cuDNN in each precision mode that
    compares with X's dtype (cudnn.py; empty without torch and CUDA)."""
    out = {}
    for precision in cudnn.for_dtype(X.dtype):
        m = cudnn.measure("LSTM", batch, hidden, hidden, "bidirectional", precision, X, runs)
        if m is not None:
            out[precision] = (m["gpu_ms"], m["error"])
    return out


def _tiling(text):
    """A --tilings entry: "default", or a batched tiling UPTxBYxPREFETCHxKSPLIT[xROWS]."""
    if text == "default":
        return DEFAULT
    return tuple(int(v) for v in text.split("x"))


def _name(tiling):
    return "x".join(map(str, tiling))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--small", action="store_true", help="shapes lavapipe runs in seconds")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--shapes", type=int, default=None, help="only the first N shapes")
    ap.add_argument("--shape", default=None,
                    help="SEQxBATCHxHIDDEN,... instead of the built-in shapes (e.g. the batches where "
                         "the float32 tile switches)")
    ap.add_argument("--tilings", default=None,
                    help="UPTxBYxPREFETCHxKSPLIT[xROWS],... (ROWS > 1: the register tile; default: a built-in list)")
    args = ap.parse_args(argv)
    shapes = SMALL if args.small else SHAPES
    shapes = shapes[:args.shapes] if args.shapes else shapes
    if args.shape:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shape.split(",")]
    tilings = TILINGS if not args.tilings else [_tiling(t) for t in args.tilings.split(",")]
    rows, mismatches = [], 0
    # Warm the GPU: the first shape's lanes kernel for 3 s (docs/perf.md, "GPU clocks").
    seq, batch, hidden = shapes[0]
    X0 = np.random.default_rng(1).standard_normal((seq, batch, hidden)).astype(np.float32)
    layer = _layer(hidden, np.float32, 1, 8, LANES)
    warm(lambda: layer(X0), 0.2 if args.small else 3.0)
    del layer
    for seq, batch, hidden in shapes:
        for dtype in (np.float32, np.float16):
            X = np.random.default_rng(1).standard_normal((seq, batch, hidden)).astype(dtype)
            name = f"LSTM {seq}×{batch}×{hidden} bidir {np.dtype(dtype).name}"
            total, steps, ref = _time(_layer(hidden, dtype, 1, 8, LANES), X, args.runs)
            row = {"shape": name, "lanes": (total, steps), "batched": {}}
            for tiling in tilings:
                if tiling == DEFAULT:
                    layer = _layer(hidden, dtype, None, None, variants.TABLE, None, None, None)
                else:
                    layer = _layer(hidden, dtype, tiling[0], tiling[1], 1, *tiling[2:])
                t, st, out = _time(layer, X, args.runs)
                del layer
                same = all(a.tobytes() == b.tobytes() for a, b in zip(ref, out))
                mismatches += not same
                row["batched"][_name(tiling)] = (t, st, same)
            row["cudnn"] = _cudnn(batch, hidden, X, args.runs)
            rows.append(row)
            best = min(row["batched"].items(), key=lambda kv: kv[1][0])
            print(f"{name}: lanes {total:.3f} ms (steps {steps:.3f}); best batched {best[0]} "
                  f"{best[1][0]:.3f} ms (steps {best[1][1]:.3f}); cuDNN "
                  + ", ".join(f"{k} {v[0]:.3f} ms (err {v[1]:.1e})" for k, v in row["cudnn"].items()),
                  flush=True)
    lines = ["| shape | lanes GPU ms (steps) | " + " | ".join("batched " + _name(t) for t in tilings)
             + " | cuDNN strict | cuDNN TF32 | cuDNN f16 |",
             "|---|---|" + "---|" * len(tilings) + "---|---|---|"]
    for r in rows:
        cells = [f"{r['lanes'][0]:.3f} ({r['lanes'][1]:.3f})"]
        for key, (t, st, same) in r["batched"].items():
            cells.append(f"{t:.3f} ({st:.3f})" + ("" if same else " **bits differ**"))
        for k in ("strict", "tf32", "float16"):
            v = r["cudnn"].get(k)
            cells.append(f"{v[0]:.3f} (err {v[1]:.1e})" if v else "—")
        lines.append(f"| {r['shape']} | " + " | ".join(cells) + " |")
    dev = ortops.devices()[0]
    text = (f"Device: {dev.name} ({dev.driver_info}); medians of {args.runs} runs; GPU ms "
            f"(steps ms in parentheses). Tilings: units per thread x groups x prefetch x split "
            f"[x batch rows per thread: glsl/step_tiled.comp].\n\n" + "\n".join(lines) + "\n")
    write_report(args.out, "step_kernels", {"rows": rows, "runs": args.runs}, text)
    print(text)
    if mismatches:
        print(f"{mismatches} batched runs differ from the lanes kernel", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
