#!/usr/bin/env python3
"""Float32 at large sizes, measured attempts (issue 32, item 5): per shape, what ships against
each attempt and cuDNN strict float32, alternated in rounds in one process, GPU ms of the layer
and of its passes (projection, steps, outputs; ortops' timestamps), medians and spread, and
whether each attempt's output bits equal what ships (they must: every attempt keeps each sum's
order, docs/perf.md "Misses").

    python3 -P bench/f32_attempts.py --out DIR [--rounds 3] [--runs 30] [--small]
        [--shape S,B,I,H ...] [--attempt NAME ...]

The attempts (ATTEMPTS below; each a set of ortops.variants tunables, what ships being none):
- proj_kt32: the portable projection with 32 k a staged slice (half its barriers and staging
  rounds per k; ortops.variants.PROJECTION_KT = 32);
- proj_stages2: the portable projection with two staged slices, the next staged while this one
  is read, one barrier a slice (PROJECTION_STAGES = 2);
- steps_2x2x1x4x4: the steps' register tile at 32 sums a thread (4 rows x 2 units) with two
  groups a workgroup, ksplit 4 so that its shared memory stays 16 KiB (256 threads);
- steps_4x1x1x8x2: 32 sums a thread as 2 rows x 4 units (one group, ksplit 8, 256 threads);
- steps_2x1x2x8x4: what ships at hidden 1024 (4 rows x 2 units) with two positions loaded at once.
Writes DIR/f32_attempts.json and .md and prints the table. Bidirectional float32 LSTM, input =
hidden. --small: two small shapes that still run the kernels concerned (lavapipe: a check that
the script runs and the bits agree, its times meaning nothing). Without torch and CUDA the cuDNN
column is left empty, with a note.
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
from ortops import layer as layer_module
from ortops import variants
from ortops.tools.measure import weights
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # bench/'s helpers (python -P leaves it off)
import cudnn  # noqa: E402

SHAPES = [(200, 64, 512, 512), (100, 64, 1024, 1024)]
# Small shapes for a CPU device: batch 32 runs a batched step kernel at every hidden size; the
# second forces the 128 x 128 projection tile (LARGE below) so that both TPTs are exercised.
SMALL_SHAPES = [(3, 32, 64, 64), (2, 32, 96, 64)]

ATTEMPTS = {
    "proj_kt32": {"PROJECTION_KT": 32},
    "proj_stages2": {"PROJECTION_STAGES": 2},
    "steps_2x2x1x4x4": {"BATCHED_UPT": 2, "BATCHED_BY": 2, "BATCHED_PREFETCH": 1, "BATCHED_KSPLIT": 4,
                        "BATCHED_ROWS": 4},
    "steps_4x1x1x8x2": {"BATCHED_UPT": 4, "BATCHED_BY": 1, "BATCHED_PREFETCH": 1, "BATCHED_KSPLIT": 8,
                        "BATCHED_ROWS": 2},
    "steps_2x1x2x8x4": {"BATCHED_UPT": 2, "BATCHED_BY": 1, "BATCHED_PREFETCH": 2, "BATCHED_KSPLIT": 8,
                        "BATCHED_ROWS": 4},
}
TUNABLES = sorted({k for a in ATTEMPTS.values() for k in a})
PASSES = ("projection_ms", "steps_ms", "outputs_ms")


def _set(attempt: dict) -> None:
    """The tunables of one attempt (every other one of TUNABLES back to what ships)."""
    for name in TUNABLES:
        setattr(variants, name, attempt.get(name))


def _in_force(seq: int, hidden: int, batch: int, inp: int, max_shared: int) -> dict:
    """What the tunables now in force give this shape: the steps' tile (as the native core
    clamps it) and the projection's staged slices (the native rule, projectionSlices)."""
    v = variants.batched_variant(hidden, "float32", batch=batch)
    tpt = variants.projection_tpt(seq * batch * 4 * hidden * 2, layer_module._LARGE_PROJECTION)
    kt = 32 if variants.PROJECTION_KT == 32 and inp % 32 == 0 else 16
    stages = 2 if variants.PROJECTION_STAGES == 2 else 1
    if 2 * 16 * tpt * kt * stages * 4 > max_shared:
        stages = 1
    if 2 * 16 * tpt * kt * stages * 4 > max_shared:
        kt = 16
    return {"tile": f"{v.upt}x{v.by}x{v.prefetch}x{v.ksplit}x{v.rows}", "projection": f"tpt{tpt} kt{kt} x{stages}",
            "step_kernel": v.shader if variants.step_kernel(batch, hidden) == "step_batched" else "step"}


def _ortops(X, W, R, B, runs: int):
    layer = ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", timestamps=True)
    t0 = time.perf_counter()
    ys = layer(X)
    while time.perf_counter() - t0 < 0.5:
        ys = layer(X)
    gpu, e2e, parts = [], [], {p: [] for p in PASSES}
    for _ in range(runs):
        t = time.perf_counter()
        ys = layer(X)
        e2e.append(1e3 * (time.perf_counter() - t))
        if layer.last_gpu_time_ms is not None:
            gpu.append(layer.last_gpu_time_ms)
            for p in PASSES:
                parts[p].append(layer.last_gpu_profile[p])
    fig = dict(e2e=statistics.median(e2e), gpu=statistics.median(gpu) if gpu else None)
    for p in PASSES:
        fig[p] = statistics.median(parts[p]) if parts[p] else None
    bits = b"".join(np.ascontiguousarray(y).tobytes() for y in ys)
    return fig, bits


def _spread(values):
    v = [x for x in values if x is not None]
    return (statistics.median(v), min(v), max(v)) if v else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--small", action="store_true", help="small shapes (a CPU device: the script and the bits)")
    ap.add_argument("--shape", action="append", default=None, help="SEQ,BATCH,INPUT,HIDDEN")
    ap.add_argument("--attempt", action="append", default=None, choices=sorted(ATTEMPTS))
    a = ap.parse_args()
    if a.shape:
        shapes = [tuple(int(v) for v in s.split(",")) for s in a.shape]
    else:
        shapes = SMALL_SHAPES if a.small else SHAPES
    # The portable projection on every device (what a GPU's table chooses; a CPU device's would
    # choose glsl/input_projection_cpu.comp, which the projection attempts do not touch).
    # And the step kernels (a CPU device's table would choose the whole-sequence kernel at the
    # small shapes; a GPU's never at these).
    variants.CPU_PROJECTION = False
    variants.SEQUENCE_STEPS = False
    names = a.attempt or list(ATTEMPTS)
    engines = ["ship"] + names
    dev = ortops.RecurrentLayer("LSTM", np.zeros((1, 4, 1), np.float32), np.zeros((1, 4, 1), np.float32)).device
    max_shared = int(getattr(dev, "max_shared_memory", 0) or 0) or 16384
    have_cudnn = cudnn.available()
    notes = []
    if not have_cudnn:
        notes.append("cuDNN column empty: torch with CUDA is not importable here.")
    meta = dict(device=str(getattr(dev, "name", dev)), max_shared_memory=max_shared, cudnn=cudnn.versions(),
                rounds=a.rounds, runs=a.runs, started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                notes=notes)
    print(json.dumps(meta), flush=True)
    rows = []
    for seq, batch, inp, hidden in shapes:
        saved_large = layer_module._LARGE_PROJECTION
        if a.small and (seq, batch, inp, hidden) == SMALL_SHAPES[1]:
            layer_module._LARGE_PROJECTION = 1   # the 128 x 128 tile (TPT 8) at a small size
        W, R, B = weights("LSTM", inp, hidden, 2, np.float32)
        X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(np.float32)
        figs = {e: [] for e in engines + ["cudnn"]}
        same = {e: True for e in names}
        in_force = {}
        first_ship = None
        for r in range(a.rounds):
            ship_bits = None
            for e in engines:
                _set({} if e == "ship" else ATTEMPTS[e])
                in_force[e] = _in_force(seq, hidden, batch, inp, max_shared)
                fig, bits = _ortops(X, W, R, B, a.runs)
                figs[e].append(fig)
                if e == "ship":
                    ship_bits = bits
                    first_ship = first_ship or bits
                    same["ship"] = same.get("ship", True) and bits == first_ship   # run to run
                else:
                    same[e] &= bits == ship_bits
            _set({})
            if have_cudnn:
                c = cudnn.measure("LSTM", batch, inp, hidden, "bidirectional", "strict", X, a.runs, error=(r == 0))
                figs["cudnn"].append(None if c is None else dict(gpu=c["gpu_ms"], e2e=c["e2e_ms"],
                                                                  scaled_error=c.get("scaled_error")))
        layer_module._LARGE_PROJECTION = saved_large
        row = dict(shape=f"{seq}x{batch}x{inp}->{hidden}", in_force=in_force, same_bits=same, rounds=figs)
        for e in engines:
            for k in ("gpu", "e2e") + PASSES:
                row[f"{e}_{k}"] = _spread([f[k] for f in figs[e]])
        for k in ("gpu", "e2e"):
            row[f"cudnn_{k}"] = _spread([f[k] for f in figs["cudnn"] if f is not None])
        best = min((f["gpu"] for f in figs["cudnn"] if f is not None), default=None)
        row["cudnn_best_gpu"] = best
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "rounds"}), flush=True)
    _set({})
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "f32_attempts.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)

    def cell(t):
        return "—" if t is None else "%.3f (%.3f–%.3f)" % t

    def ratio(t, ref):
        return "—" if t is None or not ref else "%.2f ×" % (t[0] / ref)

    lines = [f"Device {meta['device']}, {meta['started']}; {a.rounds} rounds alternated in one process, "
             f"{a.runs} runs each; GPU ms, median (min–max over rounds). Bidirectional float32 LSTM."]
    lines += [f"- {n}" for n in notes]
    lines += ["", "| shape | engine | what runs | GPU ms | projection | steps | outputs | e2e ms | "
              "/ cuDNN median | / cuDNN best | same bits |", "|---" * 11 + "|"]
    for r in rows:
        cmed = r["cudnn_gpu"][0] if r["cudnn_gpu"] else None
        for e in engines:
            f = r["in_force"][e]
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                r["shape"], e, f"{f['step_kernel']} {f['tile']}, {f['projection']}", cell(r[f"{e}_gpu"]),
                cell(r[f"{e}_projection_ms"]), cell(r[f"{e}_steps_ms"]), cell(r[f"{e}_outputs_ms"]),
                cell(r[f"{e}_e2e"]), ratio(r[f"{e}_gpu"], cmed), ratio(r[f"{e}_gpu"], r["cudnn_best_gpu"]),
                ("yes" if r["same_bits"][e] else "NO") + (" (round to round)" if e == "ship" else "")))
        lines.append("| %s | cuDNN strict | TF32 off | %s | | | | %s | | | |" % (
            r["shape"], cell(r["cudnn_gpu"]), cell(r["cudnn_e2e"])))
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "f32_attempts.md"), "w") as f:
        f.write(text + "\n")
    return 0 if all(all(r["same_bits"].values()) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
