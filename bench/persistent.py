#!/usr/bin/env python3
"""The persistent step kernel on a GPU (issue 45, item 1; glsl/step_persistent.comp): against the
step kernels and cuDNN strict float32, engines alternated in rounds in one process.

    python3 -P bench/persistent.py --out DIR [--rounds 3] [--runs 200] [--no-cudnn] [--no-ep]

1. Layers (bidirectional float32 LSTMs as ortops.RecurrentLayer with GPU timestamps, numpy in and
   out): 80x1x256 (the recognizer's layer; target <= 0.20 ms GPU time) and 48x8x192 -> 96.
   Engines: "persistent" (forced on), "steps" (the step kernels), "table" (what the tables
   choose: the whole-sequence kernel at hidden 96), "barriers" (the persistent kernel's grid
   barriers and set-up without arithmetic: a profile piece, wrong results), "persistent-gG" (the
   grid of G workgroups, --also-groups, default 64: fewer at a barrier, more units each), and cuDNN strict
   (torch, if importable; TF32 off for cuDNN and cuBLAS). Per engine: GPU time of the layer and of
   its steps, per step, and the call, each the median of RUNS calls a round; reported as the
   median of the rounds and their spread (min-max).
2. The recognizer end to end through the EP (models/recognizer.onnx, scripts/make_models.py;
   target <= 0.55 ms): sessions made with the persistent kernel left to the table and with it
   switched off (ORTOPS_PERSISTENT_STEPS=0 while that session records its plans), and cuDNN
   strict on a module of the same shape (two bidirectional LSTM layers and the head).

The persistent kernel must give the step kernels' bits at every layer shape and in the EP (exit
status 1 otherwise), and must have run (exit status 2 where its grid failed and the runs fell
back to the step kernels: those figures are not the kernel's). Writes DIR/persistent.json and
DIR/persistent.md (docs/perf.md, "Persistent kernel").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # bench/'s helpers (python -P leaves it off)
import cudnn  # noqa: E402

import ortops
import ortops.device
from ortops import _vk, variants
from ortops.tools.bench import write_report
from ortops.tools.measure import weights

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = [("80x1x256", 80, 1, 256, 256), ("48x8x192", 48, 8, 192, 96)]
ENGINES = {   # the tunables each ortops engine sets (the rest at their defaults)
    "persistent": dict(PERSISTENT_STEPS=True),
    "steps": dict(PERSISTENT_STEPS=False, SEQUENCE_STEPS=False),
    "table": dict(),
    # the grid barriers of design 0 (the exchange's has none)
    "barriers": dict(PERSISTENT_STEPS=True, PERSISTENT_PIECE="barriers", PERSISTENT_DESIGN=0),
}


class Engine:
    """A layer run under one engine's tunables (RecurrentLayer reads them at each call: they are
    set before each of this layer's calls, so its plans stay recorded)."""

    def __init__(self, name: str, W, R, B):
        self.settings = ENGINES[name]
        self._set()
        self.layer = ortops.RecurrentLayer("LSTM", W, R, B, direction="bidirectional", timestamps=True)

    def _set(self) -> None:
        variants.PERSISTENT_STEPS = variants.TABLE
        variants.SEQUENCE_STEPS = variants.TABLE
        variants.PERSISTENT_PIECE = None
        variants.PERSISTENT_GROUPS = None
        variants.PERSISTENT_DESIGN = None
        for name, value in self.settings.items():
            setattr(variants, name, value)

    def __call__(self, X):
        self._set()
        return self.layer(X)

    def kernels(self) -> list:
        return sorted({p.steps for pool in self.layer._plans.values() for p in pool.free})

    def round(self, X, runs: int) -> dict:
        gpu, steps, call = [], [], []
        for _ in range(runs):
            self._set()
            t = time.perf_counter()
            self.layer(X)
            call.append(1e3 * (time.perf_counter() - t))
            gpu.append(self.layer.last_gpu_time_ms)
            steps.append(self.layer.last_gpu_profile["steps_ms"])
        return dict(gpu=statistics.median(gpu), steps=statistics.median(steps), call=statistics.median(call))


def _summary(values: list) -> list | None:
    values = [v for v in values if v is not None]
    return [statistics.median(values), min(values), max(values)] if values else None


def _cudnn_round(hidden: int, X, runs: int) -> dict | None:
    _, batch, inp = X.shape
    c = cudnn.measure("LSTM", batch, inp, hidden, "bidirectional", "strict", X, runs, error=False)
    return None if c is None else dict(gpu=c["gpu_ms"], steps=None, call=c["e2e_ms"])


def run_layer(name: str, seq: int, batch: int, inp: int, hidden: int, rounds: int, runs: int, use_cudnn: bool):
    W, R, B = weights("LSTM", inp, hidden, 2, np.float32)
    X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(np.float32)
    layers = {e: Engine(e, W, R, B) for e in ENGINES}
    outputs = {e: [np.asarray(y) for y in layer(X)] for e, layer in layers.items()}   # records the plans
    device = layers["persistent"].layer.device.index
    before = _vk.persistent_state(device)
    figures: dict = {e: [] for e in list(ENGINES) + (["cudnn"] if use_cudnn else [])}
    for _ in range(rounds):
        for e, layer in layers.items():
            figures[e].append(layer.round(X, runs))
        if use_cudnn:
            figures["cudnn"].append(_cudnn_round(hidden, X, runs))
    after = _vk.persistent_state(device)
    # Every persistent grid but the barriers-only piece gives the step kernels' bits.
    same = all(a.tobytes() == b.tobytes() for e in outputs if e.startswith("persistent")
               for a, b in zip(outputs[e], outputs["steps"]))
    same_table = all(a.tobytes() == b.tobytes() for a, b in zip(outputs["table"], outputs["steps"]))
    row = dict(shape=f"{seq}x{batch}x{inp}->{hidden}", same_bits=same, table_same_bits=same_table,
               kernels={e: layer.kernels() for e, layer in layers.items()},
               fallbacks=after["fallbacks"] - before["fallbacks"], grid=after["last_taken"], why=after["why"])
    for e, vals in figures.items():
        for k in ("gpu", "steps", "call"):
            row[f"{e}_{k}"] = _summary([None if v is None else v[k] for v in vals])
    row["persistent_step_us"] = 1e3 * row["persistent_steps"][0] / seq
    row["steps_step_us"] = 1e3 * row["steps_steps"][0] / seq
    row["barrier_step_us"] = 1e3 * row["barriers_steps"][0] / seq
    print(json.dumps(row), flush=True)
    return row


def _recognizer_model(path: str):
    import onnx

    if not os.path.exists(path):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        from make_models import build   # the sample models, seeded (scripts/make_models.py)

        os.makedirs(os.path.dirname(path), exist_ok=True)
        onnx.save(build("recognizer"), path)
    return onnx.load(path)


def _ep_session(model, switched_off: bool, X):
    import onnxruntime as ort

    saved = os.environ.pop("ORTOPS_PERSISTENT_STEPS", None)
    if switched_off:
        os.environ["ORTOPS_PERSISTENT_STEPS"] = "0"   # read as each plan is recorded: the warm-up
    try:
        sess = ort.InferenceSession(model.SerializeToString(), ortops.ep_session_options())
        out = None
        for _ in range(5):
            out = sess.run(None, {"X": X})
    finally:
        os.environ.pop("ORTOPS_PERSISTENT_STEPS", None)
        if saved is not None:
            os.environ["ORTOPS_PERSISTENT_STEPS"] = saved
    return sess, out


def _torch_recognizer():
    """cuDNN strict float32 on a module of the recognizer's shape (weights of its own)."""
    torch = cudnn._torch()
    if torch is None or not torch.cuda.is_available():
        return None
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    lstm = torch.nn.LSTM(256, 256, num_layers=2, bidirectional=True).cuda().eval()
    head = torch.nn.Linear(512, 80).cuda().eval()

    def run(X):
        with torch.no_grad():
            y = head(lstm(torch.from_numpy(X).cuda())[0])
            return y.cpu().numpy()
    return run


def _median_call(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t))
    return statistics.median(times)


def run_recognizer(rounds: int, runs: int, use_cudnn: bool) -> dict:
    model = _recognizer_model(os.path.join(ROOT, "models", "recognizer.onnx"))
    X = np.random.default_rng(2).standard_normal((80, 1, 256)).astype(np.float32)
    device = ortops.device.select(None).index
    before = _vk.persistent_state(device)
    table, out_table = _ep_session(model, False, X)
    ran = _vk.persistent_state(device)["runs"] - before["runs"]
    steps, out_steps = _ep_session(model, True, X)
    engines = {"EP table": lambda: table.run(None, {"X": X}), "EP steps": lambda: steps.run(None, {"X": X})}
    torch_run = _torch_recognizer() if use_cudnn else None
    if torch_run is not None:
        torch_run(X)
        engines["cuDNN strict"] = lambda: torch_run(X)
    times: dict = {e: [] for e in engines}
    for _ in range(rounds):
        for e, fn in engines.items():
            times[e].append(_median_call(fn, runs))
    after = _vk.persistent_state(device)
    row = dict(model="recognizer 80x1x256, 2 BiLSTM + head", persistent_in_table=ran > 0,
               same_bits=all(a.tobytes() == b.tobytes() for a, b in zip(out_table, out_steps)),
               fallbacks=after["fallbacks"] - before["fallbacks"], why=after["why"],
               **{f"{e}_call": _summary(t) for e, t in times.items()})
    print(json.dumps(row), flush=True)
    return row


def _cell(t) -> str:
    return "—" if t is None else "%.3f (%.3f–%.3f)" % tuple(t)


def markdown(layers: list, recognizer: dict | None) -> str:
    cols = [e for e in list(ENGINES) + ["cudnn"] if f"{e}_gpu" in layers[0]]
    lines = ["| shape (BiLSTM f32) | " + " | ".join(f"{e} GPU ms" for e in cols) +
             " | persistent / steps / barriers-only µs a step | same bits |", "|---" * (len(cols) + 3) + "|"]
    for r in layers:
        per_step = "%.2f / %.2f / %.2f" % (r["persistent_step_us"], r["steps_step_us"], r["barrier_step_us"])
        lines.append(f"| {r['shape']} | " + " | ".join(_cell(r[f"{e}_gpu"]) for e in cols) +
                     f" | {per_step} | {'yes' if r['same_bits'] else 'NO'} |")
    lines += ["", "| shape | " + " | ".join(f"{e} call ms" for e in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for r in layers:
        lines.append(f"| {r['shape']} | " + " | ".join(_cell(r[f"{e}_call"]) for e in cols) + " |")
    if recognizer:
        names = [k[:-5] for k in recognizer if k.endswith("_call")]
        lines += ["", "| recognizer end to end | " + " | ".join(f"{n} ms" for n in names) +
                  " | persistent in the table's session | same bits |", "|---" * (len(names) + 3) + "|",
                  "| through the EP | " + " | ".join(_cell(recognizer[f"{n}_call"]) for n in names) +
                  f" | {'yes' if recognizer['persistent_in_table'] else 'no'}"
                  f" | {'yes' if recognizer['same_bits'] else 'NO'} |"]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--no-cudnn", action="store_true")
    ap.add_argument("--no-ep", action="store_true")
    ap.add_argument("--layer", action="append", default=None, metavar="SEQ,BATCH,INPUT,HIDDEN",
                    help="another layer shape (instead of the two above; a smoke test on lavapipe)")
    ap.add_argument("--groups", type=int, default=None,
                    help="the persistent grid's workgroups (PERSISTENT_GROUPS; default: the device's rule)")
    ap.add_argument("--also-groups", default="64", metavar="G,G,...",
                    help="more persistent engines, with these many workgroups each (fewer at a barrier, more "
                         "units each; '' none)")
    ap.add_argument("--designs", default="", metavar="D,D,...",
                    help="more persistent engines, with these DESIGN bits each (glsl/step_persistent.comp), and "
                         "their barriers-only pieces (bits 1 and 2)")
    a = ap.parse_args(argv)
    for e in ("persistent", "barriers"):
        ENGINES[e]["PERSISTENT_GROUPS"] = a.groups
    for d in filter(None, a.designs.split(",")):
        ENGINES[f"persistent-d{int(d)}"] = dict(PERSISTENT_STEPS=True, PERSISTENT_DESIGN=int(d), PERSISTENT_GROUPS=a.groups)
        if int(d) < 4:
            ENGINES[f"barriers-d{int(d)}"] = dict(PERSISTENT_STEPS=True, PERSISTENT_PIECE="barriers",
                                                 PERSISTENT_DESIGN=int(d), PERSISTENT_GROUPS=a.groups)
    for g in filter(None, a.also_groups.split(",")):
        ENGINES[f"persistent-g{int(g)}"] = dict(PERSISTENT_STEPS=True, PERSISTENT_GROUPS=int(g))
    shapes = LAYERS if not a.layer else [("x".join(v.split(",")[:3]), *map(int, v.split(","))) for v in a.layer]
    dev = ortops.device.select(None)
    print(f"device: {dev} compute units {dev.compute_units}, memory model at device scope "
          f"{dev.memory_model_device_scope}", flush=True)
    layers = [run_layer(*shape, a.rounds, a.runs, not a.no_cudnn) for shape in shapes]
    recognizer = None if a.no_ep else run_recognizer(a.rounds, a.runs, not a.no_cudnn)
    text = markdown(layers, recognizer)
    print(text)
    write_report(a.out, "persistent", dict(device=str(dev), layers=layers, recognizer=recognizer), text)
    same = all(r["same_bits"] for r in layers) and (recognizer is None or recognizer["same_bits"])
    ran = all(r["fallbacks"] == 0 and all(k == ["step_persistent"] for e, k in r["kernels"].items()
                                          if e.startswith("persistent")) for r in layers)
    if not same:
        print("persistent: NOT the step kernels' bits", file=sys.stderr)
        return 1
    if not ran:
        print("persistent: the grid did not run (fell back or not chosen): " +
              "; ".join(r["why"] or str(r["kernels"]) for r in layers), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
