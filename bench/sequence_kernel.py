"""The whole-sequence kernel (glsl/step_sequence.comp) against the step kernels, one shape.

    .venv/bin/python bench/sequence_kernel.py SEQ BATCH HIDDEN [INPUT] [--repeat N]

A bidirectional float32 LSTM (input = hidden unless given) as an ortops.RecurrentLayer with
timestamps: for the step kernels (ortops.variants.SEQUENCE_STEPS = False) and then the
whole-sequence kernel (True), the first call's wall time (it compiles the kernels), the
median wall time of N more calls and the last call's GPU time of each pass group, and whether
both give the same bits (they must: docs/perf.md, "Kernel choices").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ortops
from ortops import variants


def measure(X, W, R, B, sequence: bool, repeat: int):
    variants.SEQUENCE_STEPS = sequence
    layer = ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", timestamps=True)
    t0 = time.perf_counter()
    out = layer(X)
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = layer(X)
        times.append(time.perf_counter() - t0)
    return out, first, float(np.median(times)), layer.last_gpu_profile


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seq", type=int)
    ap.add_argument("batch", type=int)
    ap.add_argument("hidden", type=int)
    ap.add_argument("input", type=int, nargs="?")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    inp = args.input or args.hidden
    rng = np.random.default_rng(0)
    s = 1 / np.sqrt(args.hidden)
    W = rng.uniform(-s, s, (2, 4 * args.hidden, inp)).astype(np.float32)
    R = rng.uniform(-s, s, (2, 4 * args.hidden, args.hidden)).astype(np.float32)
    B = rng.uniform(-s, s, (2, 8 * args.hidden)).astype(np.float32)
    X = rng.standard_normal((args.seq, args.batch, inp)).astype(np.float32)
    outs = []
    for name, sequence in (("step kernels", False), ("whole-sequence", True)):
        out, first, median, prof = measure(X, W, R, B, sequence, args.repeat)
        outs.append(out)
        gpu = ", ".join(f"{k[:-3]} {v:.2f}" for k, v in prof.items())
        print(f"{name}: {args.seq}x{args.batch}x{args.hidden} input {inp}: first call {1e3 * first:.0f} ms, "
              f"median {1e3 * median:.2f} ms over {args.repeat}; GPU ms {gpu}")
    same = all(np.array_equal(a.view(np.uint32), b.view(np.uint32)) for a, b in zip(*outs))
    print(f"same bits: {same}")


if __name__ == "__main__":
    main()
