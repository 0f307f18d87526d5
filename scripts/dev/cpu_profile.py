"""The recognizer's layers on a CPU implementation of Vulkan (lavapipe), stage by stage.

    .venv/bin/python scripts/dev/cpu_profile.py [--repeat N] [--config NAME ...] [--shape SEQ,BATCH,INPUT,HIDDEN ...]

For each shape (default: the recognizer's two bidirectional float32 LSTMs, 80x1, input 256 and
512, hidden 256) and each configuration of the projection and the step kernel (named below),
an ``ortops.RecurrentLayer`` with timestamps: the first call's wall time (it compiles the
kernels, unless Mesa's shader cache already holds them), then the medians over N calls of the
wall time and of the GPU time of each stage (projection with the state set-up, steps,
outputs), with the min-max spread, and whether the outputs are the same bits as the first
configuration's (docs/perf.md, "Kernel choices").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ortops
from ortops import variants
from ortops.tools.measure import weights

# name -> (CPU_PROJECTION, CPU_PROJECTION_ROWS, CPU_PROJECTION_W_REGS, SEQUENCE_STEPS[, COLUMNS[,
# SEQUENCE_BROADCAST]])
CONFIGS = {
    "tiled": (False, None, None, True),
    "cpu": (True, None, None, True),
    "cpu-r1": (True, 1, None, True),
    "cpu-r2": (True, 2, None, True),
    "cpu-r8": (True, 8, None, True),
    "cpu-loop": (True, None, False, True),
    "cpu-loop-r8": (True, 8, False, True),
    "cpu-loop-r16": (True, 16, False, True),
    "steps-tiled": (False, None, None, False),
    "cpu-c2": (True, None, None, True, 2),
    "cpu-c4": (True, None, None, True, 4),
    "cpu-r4-c4": (True, 4, None, True, 4),
    "cpu-nobc": (True, None, None, True, None, False),   # the steps' h read by every lane
}
RECOGNIZER = ((80, 1, 256, 256), (80, 1, 512, 256))


def measure(shape, config, repeat):
    seq, batch, inp, hidden = shape
    W, R, B = weights("LSTM", inp, hidden, 2, np.float32)
    X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(np.float32)
    (variants.CPU_PROJECTION, variants.CPU_PROJECTION_ROWS, variants.CPU_PROJECTION_W_REGS,
     variants.SEQUENCE_STEPS) = CONFIGS[config][:4]
    variants.CPU_PROJECTION_COLUMNS, variants.SEQUENCE_BROADCAST = (CONFIGS[config] + (None, None))[4:6]
    layer = ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", timestamps=True)
    t0 = time.perf_counter()
    out = layer(X)
    first = time.perf_counter() - t0
    wall, prof = [], {}
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = layer(X)
        wall.append(1e3 * (time.perf_counter() - t0))
        for k, v in layer.last_gpu_profile.items():
            prof.setdefault(k[:-3], []).append(v)
    return out, first, wall, prof


def spread(values):
    return f"{np.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--config", nargs="*", default=["tiled", "cpu"], choices=sorted(CONFIGS))
    ap.add_argument("--shape", nargs="*", default=None, help="SEQ,BATCH,INPUT,HIDDEN")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else RECOGNIZER
    for shape in shapes:
        ref = None
        for config in args.config:
            out, first, wall, prof = measure(shape, config, args.repeat)
            ref = ref or out
            same = all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(ref, out))
            stages = ", ".join(f"{k} {spread(v)}" for k, v in prof.items())
            print(f"{'x'.join(map(str, shape))} {config}: first call {1e3 * first:.0f} ms; wall {spread(wall)} ms; "
                  f"GPU ms {stages}; same bits as {args.config[0]}: {same}", flush=True)


if __name__ == "__main__":
    main()
