"""What an ortops session costs beside onnxruntime-gpu's CUDA execution provider.

With ``providers=["CUDAExecutionProvider", "CPUExecutionProvider"]`` the model's other nodes run
on CUDA and the recurrent nodes on the Vulkan device through the custom-op library's kernels
(libortops_ort.so), which ONNX Runtime assigns to its CPU provider (the ops name no provider,
src/ort/kernel.cpp), so they take and return host memory: each recurrent node's inputs cross
from CUDA memory to the host and its outputs back. This script measures, on one model and one feed, the median run time
of

- ortops with the CPU provider for the other nodes (ortops' default),
- ortops with the CUDA provider for the other nodes,
- stock onnxruntime with the CUDA provider (ORT's own CUDA RNN kernels, cuDNN),
- stock onnxruntime with the CPU provider,

and checks every output against stock ORT CPU (scaled error within the float32 tolerance).
Needs onnxruntime-gpu in place of onnxruntime; where the CUDA provider is not available the
CUDA rows say so. Run: ``python -P bench/cuda_ep.py [MODEL] --runs 200``.
"""

from __future__ import annotations

import argparse
import sys

import onnx
import onnxruntime as ort

import ortops
from ortops.timing import median_s, warm
from ortops.compare import scaled_error, tolerance
from ortops.tools.cli import make_feeds

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"


def _median_ms(run, runs: int, warmup_s: float) -> float:
    warm(run, warmup_s)
    return 1e3 * median_s(run, runs, warmup_runs=0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?", default="models/recognizer.onnx")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=float, default=2.0, help="untimed seconds first (default 2)")
    args = ap.parse_args(argv)

    if hasattr(ort, "preload_dlls"):   # CUDA and cuDNN from the nvidia-* wheels, where present
        try:
            ort.preload_dlls()
        except Exception as e:  # noqa: BLE001 - reported, then the CUDA rows say what happened
            print(f"preload_dlls: {type(e).__name__}: {e}")
    available = ort.get_available_providers()
    print(f"onnxruntime {ort.__version__} ({ort.__file__}); providers {available}")
    model = onnx.load(args.model)
    ref = ort.InferenceSession(args.model, providers=[CPU])
    feeds = make_feeds(ref, model, {}, {}, 0)
    expected = ref.run(None, feeds)
    names = [o.name for o in ref.get_outputs()]

    def row(label, sess):
        used = sess.get_providers()
        out = sess.run(None, feeds)
        errs = [scaled_error(o, e) for o, e in zip(out, expected)]
        ok = all(err <= tolerance(e.dtype) for err, e in zip(errs, expected))
        ms = _median_ms(lambda: sess.run(None, feeds), args.runs, args.warmup)
        worst = max(errs)
        print(f"| {label} | {', '.join(p.replace('ExecutionProvider', '') for p in used)} | {ms:.3f} | "
              f"{worst:.2e} {'OK' if ok else 'FAILS'} |", flush=True)
        return ok

    print(f"\nmodel {args.model}, outputs {names}; median of {args.runs} runs after {args.warmup} s\n")
    print("| session | providers used | median ms | scaled error vs ORT CPU |")
    print("|---|---|---|---|")
    good = row("ortops, other nodes on CPU", ortops.InferenceSession(args.model, providers=[CPU]))
    if CUDA in available:
        good &= row("ortops, other nodes on CUDA", ortops.InferenceSession(args.model, providers=[CUDA, CPU]))
        good &= row("onnxruntime CUDA (its own RNN kernels)", ort.InferenceSession(args.model, providers=[CUDA, CPU]))
    else:
        print(f"| ortops, other nodes on CUDA | {CUDA} not available here | - | - |")
    good &= row("onnxruntime CPU", ref)
    # Where the other nodes run on CUDA, a recurrent node's inputs and outputs cross to the host:
    # their bytes per run, for the copy cost.
    sess = ortops.InferenceSession(args.model, providers=[CPU])
    print("\nrecurrent nodes:", "; ".join(p.describe() for p in sess.placement))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
