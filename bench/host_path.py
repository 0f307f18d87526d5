#!/usr/bin/env python3
"""The host side of a layer run against memcpy: what a run costs beyond its GPU time.

For each shape and precision, in one process (so every figure meets the same machine state):

  memcpy        one thread's numpy copy of as many bytes as the run's inputs and outputs, into a
                warm array (np.copyto) and into a fresh one (ndarray.copy: its page faults too);
  call          RecurrentLayer.__call__ (numpy in, numpy out), and the GPU time of that same run
                from the layer's Vulkan timestamps;
  host          call - GPU, per run, with the host copies on one thread, on the pool (the default)
                and on a thread per call (src/core/vk/hostcopy.hpp), and on the pool reading into the
                same output arrays every run (``out=``: no page faults of fresh outputs);
  host bound    0.05 ms + 1.2 x (bytes in + bytes out) / warm memcpy bandwidth (issue 12);
  session       ortops.InferenceSession of a one-node model (numpy in, numpy out; ONNX Runtime
                runs the node through the native custom-op library); its extra over the layer
                call's median, against 0.05 ms + one copy of the inputs and outputs.

Medians of ``--runs`` runs after ``--warmup`` seconds of untimed runs of each shape (the H200
idles at low clocks, docs/perf.md "GPU clocks"). Writes host_path.json and host_path.md into
``--out``.

    python bench/host_path.py --out /tmp/h          # the anchors (GPU machine: STAGE=host)
    python bench/host_path.py --small --out /tmp/h  # small shapes (lavapipe)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from ortops.tools.bench import ANCHOR_SHAPES, write_report
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # bench/'s helpers (python -P leaves it off)
from hostcopy import FACTOR as COPY_FACTOR, FIXED_MS, host_bound_ms, memcpy_bandwidth  # noqa: E402

#: cell, seq, batch, input, hidden, direction: the bench's batched LSTM anchors (one table).
ANCHORS = [s for s in ANCHOR_SHAPES if s[0] == "LSTM" and s[2] > 1]
#: Lavapipe-sized: the last one's 4.2 MB input crosses the parallel-copy threshold (two chunks).
SMALL = [
    ("LSTM", 8, 2, 32, 32, "bidirectional"),
    ("LSTM", 64, 64, 256, 8, "bidirectional"),
]
#: Host copy settings compared (ortops._vk.copy_settings).
COPY_MODES = {"1 thread": {"threads": 1}, "pool": {}, "thread per call": {"pool": False}}


def memcpy_gbs(nbytes: int, runs: int) -> dict:
    """One thread's numpy copy of ``nbytes`` into a warm and a fresh array, in GB/s (the bench's
    measurement, hostcopy.py)."""
    bw = memcpy_bandwidth(nbytes, repeat=runs)
    return {"warm": bw["warm"] * 1e-9, "fresh": bw["fresh"] * 1e-9}


def layer_times(layer, X, runs: int, out=None) -> dict:
    """Median call, GPU and call - GPU (per run) of ``layer(X)`` (reading into ``out``), in ms."""
    call, gpu = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        layer(X, out=out)
        call.append(1e3 * (time.perf_counter() - t0))
        gpu.append(layer.last_gpu_time_ms or 0.0)
    return {"call_ms": statistics.median(call), "gpu_ms": statistics.median(gpu),
            "host_ms": statistics.median(c - g for c, g in zip(call, gpu))}


def host_by_copy_mode(layer, X, runs: int) -> dict:
    """layer_times under each of COPY_MODES (the defaults restored after)."""
    from ortops import _vk

    defaults = _vk.copy_settings()
    out = {}
    try:
        for name, change in COPY_MODES.items():
            _vk.copy_settings(**{**defaults, **change})
            layer(X)
            out[name] = layer_times(layer, X, runs)
    finally:
        _vk.copy_settings(**defaults)
    # The pool, reading into the same arrays every run (RecurrentLayer(..., out=)): no page
    # faults of fresh outputs.
    reused = {name: np.empty_like(a) for name, a in zip(("Y", "Y_h", "Y_c"), layer(X)) if a is not None}
    out["pool, out= reused"] = layer_times(layer, X, runs, reused)
    return out


def session_times(shape, dtype, X, runs: int, warmup: float, device) -> dict:
    """ortops.InferenceSession runs of the one-node model (ONNX Runtime through the native
    custom-op library, no Python on the node's path): the median of the run."""
    import ortops
    from ortops.timing import warm
    from ortops.tools.measure import one_node_model

    model = one_node_model(*shape, dtype).SerializeToString()
    sess = ortops.InferenceSession(model, device=device)
    warm(lambda: sess.run(None, {"X": X}), warmup)
    runs_ms = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, {"X": X})
        runs_ms.append(1e3 * (time.perf_counter() - t0))
    return {"session_ms": statistics.median(runs_ms)}


def measure(shape, dtype, runs: int, warmup: float, device=None) -> dict:
    from ortops.layer import RecurrentLayer
    from ortops.timing import warm
    from ortops.tools.measure import weights

    cell, seq, batch, inp, hidden, direction = shape
    dirs = 2 if direction == "bidirectional" else 1
    W, R, B = weights(cell, inp, hidden, dirs, dtype)
    layer = RecurrentLayer(cell, W, R, B, direction=direction, device=device, timestamps=True)
    X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(dtype)
    outs = layer(X)
    bytes_in, bytes_out = X.nbytes, sum(o.nbytes for o in outs)
    warm(lambda: layer(X), warmup)
    bw = memcpy_gbs(bytes_in + bytes_out, runs)
    modes = host_by_copy_mode(layer, X, runs)
    one_copy_ms = (bytes_in + bytes_out) / bw["warm"] * 1e-6
    sess = session_times(shape, dtype, X, runs, warmup, device)
    r = {"shape": list(shape), "dtype": np.dtype(dtype).name, "bytes_in": bytes_in,
         "bytes_out": bytes_out, "memcpy_gbs": bw, "copy_modes": modes,
         "host_ms": modes["pool"]["host_ms"],
         "host_bound_ms": host_bound_ms(bytes_in, bytes_out, bw["warm"] * 1e9),
         **sess, "session_extra_ms": sess["session_ms"] - modes["pool"]["call_ms"],
         "session_bound_ms": FIXED_MS + one_copy_ms}
    r["host_ok"] = r["host_ms"] <= r["host_bound_ms"]
    r["session_ok"] = r["session_extra_ms"] <= r["session_bound_ms"]
    return r


def _shape_text(shape) -> str:
    cell, seq, batch, inp, hidden, direction = shape
    return f"{cell} {seq}x{batch}x{inp}->{hidden}" + (" bi" if direction == "bidirectional" else "")


def table(results: list[dict]) -> str:
    head = ("| shape | dtype | MB in+out | memcpy GB/s warm / fresh | call ms | GPU ms "
            "| host ms: 1 thread / pool / thread per call / pool, out= reused | host bound ms | "
            "session ms | session - call ms | session bound ms |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        m = r["copy_modes"]
        lines.append(
            f"| {_shape_text(r['shape'])} | {r['dtype']} | {(r['bytes_in'] + r['bytes_out']) / 1e6:.2f} "
            f"| {r['memcpy_gbs']['warm']:.1f} / {r['memcpy_gbs']['fresh']:.1f} "
            f"| {m['pool']['call_ms']:.3f} | {m['pool']['gpu_ms']:.3f} "
            f"| {m['1 thread']['host_ms']:.3f} / {m['pool']['host_ms']:.3f} / {m['thread per call']['host_ms']:.3f} "
            f"/ {m['pool, out= reused']['host_ms']:.3f} "
            f"| {r['host_bound_ms']:.3f} {'ok' if r['host_ok'] else 'OVER'} "
            f"| {r['session_ms']:.3f} | {r['session_extra_ms']:.3f} "
            f"| {r['session_bound_ms']:.3f} {'ok' if r['session_ok'] else 'OVER'} |")
    return "\n".join(lines)


def _parse_shape(text: str) -> tuple:
    cell, seq, batch, inp, hidden, direction = text.split(",")
    return (cell.upper(), int(seq), int(batch), int(inp), int(hidden), direction)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="small shapes (lavapipe)")
    ap.add_argument("--shape", action="append", default=None, metavar="CELL,SEQ,BATCH,INPUT,HIDDEN,DIRECTION",
                    help="a shape to measure instead of the default list (repeatable)")
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--runs", type=int, default=20, help="timed runs per figure (default 20)")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds of untimed runs per shape (default 1, 0.2 with --small)")
    ap.add_argument("--device", default=None, help="Vulkan device")
    ap.add_argument("--out", default=None, help="write host_path.json and host_path.md here")
    args = ap.parse_args(argv)
    from ortops import _vk

    warmup = args.warmup if args.warmup is not None else (0.2 if args.small else 1.0)
    results = []
    shapes = [_parse_shape(t) for t in args.shape] if args.shape else (SMALL if args.small else ANCHORS)
    for shape in shapes:
        for dtype in args.dtypes.split(","):
            results.append(measure(shape, np.dtype(dtype).type, args.runs, warmup, args.device))
            print(f"# {_shape_text(shape)} {dtype} done", file=sys.stderr)
    settings = _vk.copy_settings()
    text = (f"Host path: medians of {args.runs} runs after {warmup} s of warm-up per shape; host copies "
            f"{settings['chunk']} B chunks over up to {settings['threads']} threads "
            f"({'pool' if settings['pool'] else 'thread per call'}); bounds: host <= {FIXED_MS} ms + "
            f"{COPY_FACTOR} x I/O / warm memcpy, session - call <= {FIXED_MS} ms + one copy of the I/O.\n\n"
            + table(results))
    print(text)
    if args.out:
        write_report(args.out, "host_path", {"settings": settings, "runs": args.runs, "warmup_s": warmup,
                                             "results": results}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
