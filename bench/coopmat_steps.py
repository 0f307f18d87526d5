#!/usr/bin/env python3
"""Mode "fast"'s step kernels side by side: the portable ones against R . h on the matrix units
(glsl/step_coopmat.comp) in each batch-block count, with cuDNN float16 in the same run.

    python -P bench/coopmat_steps.py --out DIR [--small] [--runs N] [--shapes SEQxBATCHxHIDDEN,...]

For each bidirectional float16 LSTM (input = hidden) the median GPU time and step time
(Vulkan timestamps) of mode "fast" with the portable steps (ortops.variants.COOPMAT_STEPS_FROM
None: the projection on the matrix units, the steps on step.comp or the batched kernels), with
the matrix-unit steps at 1, 2 and 4 batch blocks a workgroup, and with the defaults (what
ships); whether each run gives the same bits twice; the scaled error of the portable and of
the default kernels against the float64 reference (where the reference is cheap enough). Stage
`coopmat` of scripts/gpu_machine.sh. Writes DIR/coopmat_steps.json and .md; exit status 1 when
a matrix-unit run leaves the float16 tolerance or changes bits between runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

import ortops
from ortops import fast, reference, variants
from ortops.compare import TOLERANCE, scaled_error
from ortops.timing import warm
from ortops.tools.measure import weights
from ortops.tools.bench import write_report
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # bench/'s helpers (python -P leaves it off)
import cudnn  # noqa: E402

fast.ENABLED = True
# (seq, batch, hidden): the float16 anchors first, then batches 1-256 at hidden 256-1024.
SHAPES = [(200, 64, 512), (100, 64, 1024)] + [(100, b, h) for h in (256, 512, 1024)
                                               for b in (1, 4, 8, 16, 32, 64, 128, 256)
                                               if (b, h) != (64, 1024)]
SMALL = [(6, 16, 32), (5, 3, 20)]
# name: (COOPMAT_STEPS_FROM, COOPMAT_BLOCKS)
VARIANTS = {"portable": (None, None), "coopmat-1": (1, 1), "coopmat-2": (1, 2), "coopmat-4": (1, 4),
            "default": (variants.TABLE, None)}
# float64 reference only below this many multiply-adds (seq x batch x 8 hidden^2 x 2 dirs).
REFERENCE_LIMIT = 4e10


def _layer(hidden, steps_from, blocks):
    variants.COOPMAT_STEPS_FROM, variants.COOPMAT_BLOCKS = steps_from, blocks
    W, R, B = weights("LSTM", hidden, hidden, 2, np.float16)
    return ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", mode="fast", timestamps=True)


def _measure(layer, X, runs):
    first, second = layer(X), layer(X)
    total, steps = [], []
    for _ in range(runs):
        layer(X)
        total.append(layer.last_gpu_time_ms)
        steps.append(layer.last_gpu_profile["steps_ms"])
    (pool,) = layer._plans.values()
    return dict(gpu_ms=statistics.median(total), steps_ms=statistics.median(steps),
                kernel=pool.free[0].steps, same_bits=all(a.tobytes() == b.tobytes() for a, b in zip(first, second)),
                outputs=first)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--small", action="store_true", help="shapes lavapipe runs in seconds")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--shapes", default=None, help="SEQxBATCHxHIDDEN,... instead of the built-in shapes")
    args = ap.parse_args(argv)
    shapes = SMALL if args.small else SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    rows, bad = [], []
    seq, batch, hidden = shapes[0]
    X0 = np.random.default_rng(1).standard_normal((seq, batch, hidden)).astype(np.float16)
    layer = _layer(hidden, None, None)
    warm(lambda: layer(X0), 0.2 if args.small else 3.0)
    del layer
    for seq, batch, hidden in shapes:
        X = np.random.default_rng(1).standard_normal((seq, batch, hidden)).astype(np.float16)
        name = f"LSTM {seq}×{batch}×{hidden} bidir float16"
        row = {"shape": name, "seq": seq, "batch": batch, "hidden": hidden, "variants": {}}
        want = None
        if seq * batch * 16 * hidden * hidden <= REFERENCE_LIMIT:
            W, R, B = weights("LSTM", hidden, hidden, 2, np.float16)
            want = reference.lstm(X, W, R, B, direction="bidirectional")
        for key, (steps_from, blocks) in VARIANTS.items():
            layer = _layer(hidden, steps_from, blocks)
            m = _measure(layer, X, args.runs)
            del layer
            out = m.pop("outputs")
            if want is not None:
                m["error"] = max(scaled_error(g, w) for g, w in zip(out, want))
            if m["kernel"] == fast.STEP_KERNEL and (not m["same_bits"] or m.get("error", 0) > TOLERANCE[np.dtype(np.float16)]):
                bad.append(f"{name} {key}")
            row["variants"][key] = m
        c = cudnn.measure("LSTM", batch, hidden, hidden, "bidirectional", "float16", X, args.runs)
        row["cudnn_f16"] = None if c is None else {"gpu_ms": c["gpu_ms"], "error": c["error"]}
        rows.append(row)
        v = row["variants"]
        print(f"{name}: portable {v['portable']['gpu_ms']:.3f} (steps {v['portable']['steps_ms']:.3f}) "
              + " ".join(f"{k} {v[k]['gpu_ms']:.3f} ({v[k]['steps_ms']:.3f})" for k in VARIANTS if k != "portable")
              + (f"; cuDNN f16 {c['gpu_ms']:.3f}" if c else ""), file=sys.stderr, flush=True)
    lines = ["| shape | " + " | ".join(f"{k} GPU ms (steps)" for k in VARIANTS) + " | default kernel | "
             "error portable / default | cuDNN f16 ms |",
             "|---|" + "---|" * len(VARIANTS) + "---|---|---|"]
    for r in rows:
        v = r["variants"]
        cells = [f"{v[k]['gpu_ms']:.3f} ({v[k]['steps_ms']:.3f})" + ("" if v[k]["same_bits"] else " **bits differ**")
                 for k in VARIANTS]
        err = (f"{v['portable']['error']:.1e} / {v['default']['error']:.1e}" if "error" in v["default"] else "—")
        cud = f"{r['cudnn_f16']['gpu_ms']:.3f}" if r["cudnn_f16"] else "—"
        lines.append(f"| {r['shape']} | " + " | ".join(cells) + f" | {v['default']['kernel']} | {err} | {cud} |")
    dev = ortops.devices()[0]
    text = (f"Device: {dev.name} ({dev.driver_info}); mode fast; medians of {args.runs} runs; GPU ms "
            f"(steps ms). coopmat-N: glsl/step_coopmat.comp from batch 1 with N 16-row batch blocks a "
            f"workgroup; default: what ships.\n\n" + "\n".join(lines) + "\n")
    write_report(args.out, "coopmat_steps", {"rows": rows, "runs": args.runs}, text)
    print(text)
    if bad:
        print("coopmat_steps: outside the float16 tolerance or not the same bits run to run: " + ", ".join(bad),
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
