#!/usr/bin/env python3
"""Per-frame latency of a streaming model: silero-vad, one call per audio frame, state fed back.

silero-vad (PyPI, MIT licence) ships ONNX voice-activity detectors whose LSTM (hidden 128,
batch 1, one time step per call) sits inside ``If`` nodes and whose state goes out and back in
through the model's ``state``/``stateN``. A stream is what its users run: every 32 ms (512
samples at 16 kHz, plus the 64 samples of context its wrapper prepends) one ``run`` with the
previous call's ``stateN`` as ``state``. At that size a GPU's fixed cost per submission can
lose to the CPU; this script measures it rather than assume it.

For each engine (ortops.InferenceSession; the same with ``placement="auto"``; ORT CPU with its default thread pool; ORT CPU with
one intra-op thread) it streams ``--frames`` frames of a synthetic signal (silence, a tone,
noise), timing each ``run`` alone (time.perf_counter_ns around the call), after ``--warmup``
seconds of untimed frames, and reports median, p90, p99 and max in microseconds. Frames go
back to back by default; ``--realtime`` paces them as a live stream does (one every 32 ms),
which leaves a GPU idle between frames and so at its idle clocks (docs/perf.md, "GPU clocks"):
the latency a deployed stream sees. It also
checks that the ortops stream's speech probabilities equal ORT CPU's (scaled error over the
stream, the project's float32 tolerance) and fails (exit 1) if not.

The model comes from the silero-vad wheel that scripts/setup.sh downloads into build/deps (it
is not committed; ``--wheel`` or ``--model`` to point elsewhere). Nothing is fetched here.

Usage: python scripts/gpu/stream_bench.py [--frames 2000] [--sr 16000] [--out DIR]
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import time
import zipfile

import numpy as np

from ortops.tools.report import write_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The wheel scripts/setup.sh downloads (``pip download silero-vad==VERSION --no-deps``).
SILERO_VERSION = "6.2.3"
WHEEL_GLOB = os.path.join(ROOT, "build", "deps", f"silero_vad-{SILERO_VERSION}-*.whl")
#: Samples per frame and of prepended context, by sample rate (silero-vad's OnnxWrapper).
FRAMES = {16000: (512, 64), 8000: (256, 32)}
STATE_SHAPE = (2, 1, 128)


def find_wheel(path: str | None = None) -> str:
    """The silero-vad wheel (``path``, else the one in build/deps); a clear error if absent."""
    if path:
        return path
    found = sorted(glob.glob(WHEEL_GLOB))
    if not found:
        raise FileNotFoundError(f"no silero-vad {SILERO_VERSION} wheel at {WHEEL_GLOB}: run scripts/setup.sh "
                                f"(pip download silero-vad=={SILERO_VERSION} --no-deps -d build/deps)")
    return found[-1]


def extract_models(wheel: str, out_dir: str) -> dict[str, str]:
    """Extract every ``silero_vad/data/*.onnx`` of the wheel into ``out_dir``: name -> path."""
    out = {}
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if member.startswith("silero_vad/data/") and member.endswith(".onnx"):
                path = os.path.join(out_dir, os.path.basename(member))
                with open(path, "wb") as f:
                    f.write(z.read(member))
                out[os.path.basename(member)[:-5]] = path
    return out


def signal(seconds: float, sr: int, seed: int = 0) -> np.ndarray:
    """Silence, then a 220 Hz tone with a vibrato, then noise bursts: float32 in [-1, 1]."""
    t = np.arange(round(seconds * sr)) / sr
    rng = np.random.default_rng(seed)
    tone = 0.5 * np.sin(2 * np.pi * (220 + 20 * np.sin(2 * np.pi * 3 * t)) * t)
    gate = ((t % 4.0) > 1.0) & ((t % 4.0) < 2.5)
    noise = 0.3 * rng.standard_normal(t.size) * ((t % 4.0) > 3.0)
    return (tone * gate + noise + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


def frames(sig: np.ndarray, sr: int):
    """The model inputs of each frame: context + frame samples, shape [1, context + frame]."""
    frame, context = FRAMES[sr]
    ctx = np.zeros((1, context), np.float32)
    for i in range(0, sig.size - frame + 1, frame):
        x = np.concatenate([ctx, sig[None, i:i + frame]], axis=1)
        ctx = x[:, -context:]
        yield x


def stream(sess, sig: np.ndarray, sr: int, on_frame=None, pace: float | None = None):
    """Run ``sess`` over ``sig`` frame by frame, its state fed back. Returns (probabilities
    [frames], states [frames, 2, 1, 128], per-run nanoseconds [frames]). ``on_frame(x, state)``
    sees each frame's feed before the run (the tests compare there); ``pace``: seconds between
    frame starts (a live stream), None: back to back."""
    state = np.zeros(STATE_SHAPE, np.float32)
    sr_arr = np.array(sr, np.int64)
    probs, states, ns = [], [], []
    start = time.perf_counter()
    for k, x in enumerate(frames(sig, sr)):
        if pace is not None:
            time.sleep(max(0.0, start + k * pace - time.perf_counter()))
        if on_frame is not None:
            on_frame(x, state)
        t0 = time.perf_counter_ns()
        prob, state = sess.run(None, {"input": x, "state": state, "sr": sr_arr})
        ns.append(time.perf_counter_ns() - t0)
        probs.append(float(prob.reshape(-1)[0]))
        states.append(state)
    return np.array(probs, np.float32), np.stack(states), np.array(ns, np.int64)


def percentiles(ns: np.ndarray) -> dict:
    us = ns / 1e3
    return {"frames": int(us.size), "median_us": float(np.median(us)), "p90_us": float(np.percentile(us, 90)),
            "p99_us": float(np.percentile(us, 99)), "max_us": float(us.max()), "mean_us": float(us.mean())}


def sessions(model: str, device=None) -> dict:
    """The engines compared: name -> a session with ``run``."""
    import onnxruntime as ort

    import ortops

    one = ort.SessionOptions()
    one.intra_op_num_threads = 1
    return {
        "ortops": ortops.InferenceSession(model, providers=["CPUExecutionProvider"], device=device,
                                          require_gpu=True),
        # placement="auto": each recurrent node where the calibrated cost model predicts it
        # faster (ORT CPU or the device), as a streaming user would configure it.
        "ortops auto": ortops.InferenceSession(model, providers=["CPUExecutionProvider"], device=device,
                                               placement="auto"),
        "ORT CPU": ort.InferenceSession(model, providers=["CPUExecutionProvider"]),
        "ORT CPU 1 thread": ort.InferenceSession(model, one, providers=["CPUExecutionProvider"]),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2000, help="timed frames per engine (default 2000)")
    ap.add_argument("--warmup", type=float, default=2.0, metavar="SECONDS",
                    help="untimed frames, back to back, for this long first (default 2)")
    ap.add_argument("--realtime", action="store_true",
                    help="one frame every frame duration (32 ms at 16 kHz), as a live stream")
    ap.add_argument("--sr", type=int, default=16000, choices=sorted(FRAMES))
    ap.add_argument("--model", default="silero_vad", help="model name in the wheel, or a path to an .onnx")
    ap.add_argument("--wheel", default=None, help="the silero-vad wheel (default: build/deps)")
    ap.add_argument("--device", default=None, help="Vulkan device for ortops")
    ap.add_argument("--out", default=None, help="write stream.json and stream.txt here")
    args = ap.parse_args(argv)
    from ortops.compare import TOLERANCE, scaled_error

    with tempfile.TemporaryDirectory() as tmp:
        model = args.model if args.model.endswith(".onnx") else extract_models(find_wheel(args.wheel), tmp)[args.model]
        engines = sessions(model, args.device)
        frame, _ = FRAMES[args.sr]
        timed = signal(args.frames * frame / args.sr, args.sr)
        warm = signal(4.0, args.sr, seed=1)
        pace = frame / args.sr if args.realtime else None
        lines = [f"model {os.path.basename(model)}, {args.sr} Hz, frame {frame} samples "
                 f"({1e3 * frame / args.sr:.0f} ms), batch 1, state fed back; {args.warmup} s of warm-up frames; "
                 + ("frames paced in real time" if args.realtime else "frames back to back")]
        lines += [p.describe() for p in engines["ortops"].placement]
        lines += ["auto: " + p.describe() for p in engines["ortops auto"].placement]
        report, probs = {"model": os.path.basename(model), "sr": args.sr, "frame": frame,
                         "realtime": args.realtime, "engines": {}}, {}
        for name, sess in engines.items():
            until = time.perf_counter() + args.warmup
            while time.perf_counter() < until:
                stream(sess, warm[:int(0.5 * args.sr)], args.sr)   # half-second streams
            probs[name], _, ns = stream(sess, timed, args.sr, pace=pace)
            report["engines"][name] = stats = percentiles(ns)
            lines.append(f"{name:17s} median {stats['median_us']:8.1f} us  p90 {stats['p90_us']:8.1f}  "
                         f"p99 {stats['p99_us']:8.1f}  max {stats['max_us']:9.1f}  ({stats['frames']} frames)")
        err = scaled_error(probs["ortops"], probs["ORT CPU"])
        ok = err <= TOLERANCE[np.dtype(np.float32)]
        report["scaled_error"] = err
        lines.append(f"speech probabilities, ortops against ORT CPU over the stream: scaled error {err:.3g} "
                     f"({'within' if ok else 'ABOVE'} {TOLERANCE[np.dtype(np.float32)]})")
    text = "\n".join(lines)
    print(text)
    if args.out:
        write_report(args.out, "stream", report, text, ".txt")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
