"""Issue 30's targets on one device: a run through the plugin EP against the custom-op path, and
session creation through the EP against the rewrite it replaced.

1. End to end (numpy in, numpy out) at the anchor shapes (ortops/tools/bench.py's
   ANCHOR_SHAPES), one LSTM/GRU node each:
   - "custom op": the model rewritten by ``ortops.convert`` run by plain onnxruntime with the
     custom-op library registered (``ortops.register``);
   - "EP": the unmodified model run by plain onnxruntime with the EP first
     (``ortops.ep_session_options``).
   Both sessions are made and warmed first; then ROUNDS rounds, the engines alternating within
   each round, each round's figure the median of RUNS calls (after 3 untimed). Reported per engine: the median
   of the rounds and their spread (min-max); the target reads EP / custom op on the medians
   (<= 1.05).
2. Session creation on the sample models (scripts/dev/session_creation.py's engines, alternated
   the same way): the target reads "InferenceSession (EP)" against "rewrite + custom ops".

    python -P bench/ep_bench.py [--small] [--rounds 5] [--runs 50] [--dtypes float32,float16]
        [--models models/recognizer.onnx ...] [--out DIR]

Writes DIR/ep_bench.json and prints a markdown table (docs/perf.md, "Through ONNX Runtime").
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "dev"))


def _engines(model, device):
    import onnxruntime as ort

    import ortops

    converted = ortops.convert(model, device=device)
    custom = ort.InferenceSession(converted.SerializeToString(), ortops.register(ort.SessionOptions()),
                                  providers=["CPUExecutionProvider"])
    ep = ort.InferenceSession(model.SerializeToString(), ortops.ep_session_options(device))
    return {"custom op": custom, "EP": ep}


def summary(rounds: list[float]) -> dict:
    return {"median_ms": statistics.median(rounds), "min_ms": min(rounds), "max_ms": max(rounds),
            "rounds_ms": rounds}


def run_shapes(shapes, dtypes, rounds, runs, device=None) -> list[dict]:
    from ortops.tools import measure

    rows = []
    for cell, seq, batch, inp, hidden, direction in shapes:
        for dtype in dtypes:
            dt = np.dtype(dtype)
            model = measure.one_node_model(cell, seq, batch, inp, hidden, direction, dt.type)
            X = np.random.default_rng(2).standard_normal((seq, batch, inp)).astype(dt)
            sessions = _engines(model, device)
            outputs = {}
            for name, sess in sessions.items():   # warm: plans recorded, weights uploaded
                for _ in range(3):
                    outputs[name] = sess.run(None, {"X": X})
            same = all(a.tobytes() == b.tobytes() for a, b in zip(outputs["custom op"], outputs["EP"]))
            times: dict[str, list[float]] = {name: [] for name in sessions}
            for _ in range(rounds):
                for name, sess in sessions.items():
                    times[name].append(measure.median_ms(lambda s=sess: s.run(None, {"X": X}), runs))
            row = dict(cell=cell, seq=seq, batch=batch, input=inp, hidden=hidden, direction=direction,
                       dtype=dt.name, same_bits=same, **{name: summary(t) for name, t in times.items()})
            row["ep_vs_custom_op"] = row["EP"]["median_ms"] / row["custom op"]["median_ms"]
            rows.append(row)
            print(f"{cell} {seq}x{batch}x{inp}->{hidden} {dt.name}: custom op {row['custom op']['median_ms']:.3f} ms, "
                  f"EP {row['EP']['median_ms']:.3f} ms ({row['ep_vs_custom_op']:.3f}x), same bits {same}",
                  flush=True)
            del sessions
    return rows


def run_creation(models, rounds) -> list[dict]:
    import session_creation

    rows = []
    for path in models:
        times = session_creation.measure(path, rounds)
        row = {"model": os.path.relpath(path, ROOT), **{name: summary(t) for name, t in times.items()}}
        rows.append(row)
        print(f"{row['model']}: " + ", ".join(f"{n} {row[n]['median_ms']:.1f} ms" for n in times), flush=True)
    return rows


def _fmt(s: dict) -> str:
    return f"{s['median_ms']:.3f} ({s['min_ms']:.3f}-{s['max_ms']:.3f})"


def markdown(report: dict) -> str:
    lines = [f"Device: {report['device']}; {report['rounds']} rounds of {report['runs']} calls, engines "
             f"alternated; median of the rounds (min-max), ms. `{report['command']}`, {report['date']}.", "",
             "| shape | dtype | custom op | EP | EP / custom op | same bits |", "|---|---|---|---|---|---|"]
    for r in report["shapes"]:
        lines.append(f"| {r['cell']} {r['seq']}x{r['batch']}x{r['input']}->{r['hidden']} {r['direction']} "
                     f"| {r['dtype']} | {_fmt(r['custom op'])} | {_fmt(r['EP'])} | {r['ep_vs_custom_op']:.3f} "
                     f"| {'yes' if r['same_bits'] else 'no'} |")
    if report["creation"]:
        names = [k for k in report["creation"][0] if k != "model"]
        lines += ["", "Session creation, ms, median (min-max):", "",
                  "| model | " + " | ".join(names) + " | EP / rewrite |", "|---" * (len(names) + 2) + "|"]
        for r in report["creation"]:
            ratio = r["InferenceSession (EP)"]["median_ms"] / r["rewrite + custom ops"]["median_ms"]
            lines.append(f"| {r['model']} | " + " | ".join(_fmt(r[n]) for n in names) + f" | {ratio:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from ortops.device import select
    from ortops.tools.bench import ANCHOR_SHAPES, SMALL_SHAPES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="the small shapes (a check of the script, not a figure)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--device", default=None)
    ap.add_argument("--models", nargs="*", default=[os.path.join(ROOT, "models", "recognizer.onnx")])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.rounds < 3:
        ap.error(f"--rounds must be 3 or more (a median and a spread), got {args.rounds}")
    shapes = SMALL_SHAPES if args.small else ANCHOR_SHAPES
    report = dict(device=str(select(args.device)), rounds=args.rounds, runs=args.runs,
                  date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  command="python " + " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]),
                  shapes=run_shapes(shapes, args.dtypes.split(","), args.rounds, args.runs, args.device),
                  creation=run_creation(args.models, args.rounds))
    text = markdown(report)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "ep_bench.json"), "w") as f:
            json.dump(report, f, indent=1)
        with open(os.path.join(args.out, "ep_bench.md"), "w") as f:
            f.write(text + "\n")
    return 0 if all(r["same_bits"] for r in report["shapes"]) else 1


if __name__ == "__main__":
    sys.exit(main())
