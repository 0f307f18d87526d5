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

``--rounds R`` (issue 32, item 2) splits each engine's frames into R rounds and alternates the
engines round by round, so that a drift of the machine (ORT CPU's own median moved from 145 to
214 µs between two calls on the H200 machine) meets every engine alike; the report gives each
engine's p50 and p99 per round, their medians and spread. ``--breakdown`` adds where a frame's
time goes, from ONNX Runtime's own profiler (a session of each engine with profiling on, the
same frames): the ortops node(s) (the device's round trip: inputs written, one submission, the
wait, outputs read), the rest of the model's nodes on ORT CPU, and what the run adds around the
nodes (the session's run call, feeds and fetches, Python); and, for the ortops node, a
``RecurrentLayer`` of its shape split into the device's execution (Vulkan timestamps) and the
host's part of the call (copies, submission, waiting).

The model comes from the silero-vad wheel that scripts/setup.sh downloads into build/deps (it
is not committed; ``--wheel`` or ``--model`` to point elsewhere). Nothing is fetched here.

Usage: python bench/stream_bench.py [--frames 2000] [--sr 16000] [--rounds 5] [--breakdown] [--out DIR]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time
import zipfile

import numpy as np

from ortops.tools.bench import write_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The wheel scripts/setup.sh downloads (``pip download silero-vad==VERSION --no-deps``).
SILERO_VERSION = "6.2.3"
WHEEL_GLOB = os.path.join(ROOT, "build", "deps", f"silero_vad-{SILERO_VERSION}-*.whl")
#: Samples per frame and of prepended context, by sample rate (silero-vad's OnnxWrapper).
FRAMES = {16000: (512, 64), 8000: (256, 32)}
STATE_SHAPE = (2, 1, 128)


def find_wheel(path: str | None = None) -> str:
    """The silero-vad wheel (``path``, else $ORTOPS_SILERO_WHEEL, else the one in build/deps);
    a clear error if absent."""
    path = path or os.environ.get("ORTOPS_SILERO_WHEEL")
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


def rounds_summary(per_round: list[dict]) -> dict:
    """An engine's rounds: each round's percentiles, and the median (min-max) of their p50 and p99."""
    out = {"rounds": per_round}
    for key in ("median_us", "p99_us"):
        values = [r[key] for r in per_round]
        out[key] = float(np.median(values))
        out[key.replace("_us", "_spread_us")] = [float(min(values)), float(max(values))]
    return out


def profiled_nodes(sess_factory, sig: np.ndarray, sr: int, tmp: str, tag: str) -> dict:
    """Per frame, in µs (medians over the frames): the run (ONNX Runtime's model_run), each
    provider's node time (its nodes' kernel_time events, subgraph nodes of If bodies included,
    the If nodes themselves left out since they contain them) and the frame's wall time."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tmp, tag)
    sess = sess_factory(so)
    _, _, ns = stream(sess, sig, sr)
    inner = getattr(sess, "ort_session", sess)
    path = inner.end_profiling()
    with open(path) as f:
        events = json.load(f)
    # A run's node events are written as each node ends, its model_run event when the run ends:
    # the nodes since the last model_run are that run's.
    runs: list[float] = []
    nodes: dict[str, list[float]] = {}
    current: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "Session" and e.get("name") == "model_run":
            runs.append(e["dur"])
            for key, dur in current.items():
                nodes.setdefault(key, []).append(dur)
            current = {}
        elif e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            args = e.get("args", {})
            if args.get("op_name") != "If":
                key = args.get("provider", "?")
                current[key] = current.get(key, 0.0) + e["dur"]
    return {"frames": int(ns.size), "wall_us": float(np.median(ns / 1e3)),
            "model_run_us": float(np.median(runs)) if runs else None,
            "nodes_us": {k: float(np.median(v)) for k, v in sorted(nodes.items())}}


def layer_split(model: str, runs: int = 500) -> dict | None:
    """The ortops node's own cost at its shape: a RecurrentLayer of the model's LSTM's shape
    (batch 1, one step), its call time and the device's time (Vulkan timestamps) per run,
    medians; the rest of the call is the host's (copies, submission, wait)."""
    import onnx
    from onnx import numpy_helper

    import ortops
    from ortops.ort.subgraphs import all_graphs

    nodes = [n for g in all_graphs(onnx.load(model).graph) for n in g.node]   # If bodies included
    lstms = [n for n in nodes if n.op_type == "LSTM"]
    # silero's weights reach the LSTM through exporter chains (Constant -> Unsqueeze ...): the
    # shape of its input weights, [4 * hidden, input], is on the Constant.
    weights_ih = [numpy_helper.to_array(a.t).shape for n in nodes
                  if n.op_type == "Constant" and n.output[0].endswith("weight_ih") for a in n.attribute if a.name == "value"]
    if not lstms:
        return None
    hidden = next(a.i for a in lstms[0].attribute if a.name == "hidden_size")
    inputs = weights_ih[0][1] if weights_ih else hidden
    # The cost of one step does not depend on the values: random weights of the node's shape.
    rng = np.random.default_rng(1)
    W = (0.1 * rng.standard_normal((1, 4 * hidden, inputs))).astype(np.float32)
    R = (0.1 * rng.standard_normal((1, 4 * hidden, hidden))).astype(np.float32)
    B = (0.1 * rng.standard_normal((1, 8 * hidden))).astype(np.float32)
    layer = ortops.RecurrentLayer("LSTM", W, R, B, timestamps=True)
    x = np.random.default_rng(0).standard_normal((1, 1, W.shape[2])).astype(np.float32)
    calls, gpu = [], []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        layer(x)
        calls.append((time.perf_counter_ns() - t0) / 1e3)
        gpu.append(1e3 * (layer.last_gpu_time_ms or 0.0))
    call, dev = float(np.median(calls)), float(np.median(gpu))
    return {"hidden": int(R.shape[2]), "input": int(W.shape[2]), "call_us": call, "device_us": dev,
            "host_us": call - dev}


def breakdown(model: str, args, report: dict, sig: np.ndarray, tmp: str) -> list[str]:
    """``--breakdown``: ONNX Runtime's profile of an ortops session and of ORT CPU over the same
    frames, and the ortops node's layer split; into ``report["breakdown"]``, lines for the text."""
    import onnxruntime as ort

    import ortops

    def ortops_session(so):
        return ortops.InferenceSession(model, so, providers=["CPUExecutionProvider"], device=args.device,
                                       require_gpu=True)

    def cpu_session(so):
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])

    out = {"ortops": profiled_nodes(ortops_session, sig, args.sr, tmp, "ortops"),
           "ORT CPU": profiled_nodes(cpu_session, sig, args.sr, tmp, "cpu"),
           "layer": layer_split(model)}
    report["breakdown"] = out
    lines = [f"breakdown (medians per frame, µs; ONNX Runtime's profiler, {out['ortops']['frames']} frames):"]
    for name in ("ortops", "ORT CPU"):
        b = out[name]
        nodes = ", ".join(f"{k} {v:.1f}" for k, v in b["nodes_us"].items())
        run = b["model_run_us"] or 0.0
        executor = run - sum(b["nodes_us"].values())
        lines.append(f"  {name:8s} frame {b['wall_us']:.1f} = model_run {run:.1f} (nodes: {nodes}; the executor "
                     f"and If nodes {executor:.1f}) + around the run {b['wall_us'] - run:.1f}")
    if out["layer"]:
        lay = out["layer"]
        lines.append(f"  the ortops node alone (RecurrentLayer LSTM {lay['input']}->{lay['hidden']}, batch 1, "
                     f"one step): call {lay['call_us']:.1f} = device {lay['device_us']:.1f} + host "
                     f"{lay['host_us']:.1f} (copies, submission, wait)")
    return lines


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
    ap.add_argument("--rounds", type=int, default=1,
                    help="split each engine's frames into this many rounds, engines alternated round by round")
    ap.add_argument("--breakdown", action="store_true",
                    help="also where a frame's time goes (ONNX Runtime's profiler; the ortops node's layer split)")
    ap.add_argument("--out", default=None, help="write stream.json and stream.txt here")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.rounds > args.frames:
        ap.error(f"--rounds must be between 1 and --frames ({args.frames}), got {args.rounds}")
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
        names = list(engines)
        for name in names:
            until = time.perf_counter() + args.warmup
            while time.perf_counter() < until:
                stream(engines[name], warm[:int(0.5 * args.sr)], args.sr)   # half-second streams
        # The timed frames in rounds; each round every engine streams the same part, the engines'
        # order rotated round by round. Each part starts from a zero state, for every engine alike.
        parts = np.array_split(np.arange(timed.size // frame), args.rounds)
        all_ns: dict[str, list] = {n: [] for n in names}
        per_round: dict[str, list] = {n: [] for n in names}
        part_probs: dict[str, list] = {n: [] for n in names}
        for r, part in enumerate(parts):
            chunk = timed[part[0] * frame:(part[-1] + 1) * frame]
            for name in names[r % len(names):] + names[:r % len(names)]:
                p, _, ns = stream(engines[name], chunk, args.sr, pace=pace)
                part_probs[name].append(p)
                all_ns[name].append(ns)
                per_round[name].append(percentiles(ns))
        for name in names:
            probs[name] = np.concatenate(part_probs[name])
            report["engines"][name] = stats = percentiles(np.concatenate(all_ns[name]))
            line = (f"{name:17s} median {stats['median_us']:8.1f} us  p90 {stats['p90_us']:8.1f}  "
                    f"p99 {stats['p99_us']:8.1f}  max {stats['max_us']:9.1f}  ({stats['frames']} frames)")
            if args.rounds > 1:
                stats.update(rounds_summary(per_round[name]))
                line += (f"; {args.rounds} rounds: p50 {stats['median_us']:.1f} "
                         f"({stats['median_spread_us'][0]:.1f}-{stats['median_spread_us'][1]:.1f}), p99 "
                         f"{stats['p99_us']:.1f} ({stats['p99_spread_us'][0]:.1f}-{stats['p99_spread_us'][1]:.1f})")
            lines.append(line)
        if args.breakdown:
            lines += breakdown(model, args, report, timed[:min(timed.size, 500 * frame)], tmp)
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
