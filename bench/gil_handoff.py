"""How long a batch's run takes on a worker thread beside an idle and a busy Python thread, at
two GIL switch intervals (docs/serving.md, "The GIL hand-off"): ortops.serve's Replica, the
recognizer (--tiny: the one serve_bench.py --tiny serves), a batch of --rows requests of one row
run --runs times through a one-thread pool, the medians in ms, and where the time went: the
worker's wake (submit to its first line), stacking the rows, ``Replica.run`` (ONNX Runtime's
session.run, the GIL released inside), splitting the outputs, and the caller's wake (the
worker's last line to ``result()`` returning). --intra-op alternates the session's
intra_op_num_threads too (0: ONNX Runtime's default, a thread per core); --copies the stack's and
split's copies: "native" (ortops.serve's, _vk.stack_rows / split_rows, the GIL kept) or "numpy"
(np.concatenate / np.take, as before them, the GIL let go around each request's rows).

    python -P bench/gil_handoff.py [--tiny] [--rows 8] [--runs 300] [--intervals 5,0.5] [--intra-op 0]
        [--copies native,numpy]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_bench   # noqa: E402 - the same models as the serving bench

from ortops.serve import Replica, groups, session_options, split, stack   # noqa: E402

PHASES = ("total", "wake", "stack", "run", "split", "back")


def _busy(stop: threading.Event) -> None:
    """Python work that holds the GIL, as a replica's event loop does under many clients."""
    doc = {"a": list(range(200))}
    while not stop.is_set():
        json.loads(json.dumps(doc))


def _numpy_stack(feeds: list, axes) -> tuple[dict, list]:
    """ortops.serve.stack as it was before the native copies (np.concatenate)."""
    first = next(iter(axes.inputs))
    return ({k: np.concatenate([f[k] for f in feeds], axis=a) for k, a in axes.inputs.items()},
            [f[first].shape[axes.inputs[first]] for f in feeds])


def _numpy_split(outputs: dict, axes, sizes: list) -> list:
    """ortops.serve.split as it was before the native copies (np.take)."""
    bounds = np.cumsum([0] + sizes)
    return [{k: np.take(v, np.arange(lo, hi), axis=axes.outputs[k]) for k, v in outputs.items()}
            for lo, hi in zip(bounds[:-1], bounds[1:])]


COPIES = {"native": (stack, split), "numpy": (_numpy_stack, _numpy_split)}


def _batch(replica: Replica, feeds: list, copies: str) -> list[float]:
    """One batch as Replica.run_many runs it (one group: every feed has the same shape), with
    the times between its steps."""
    stack_, split_ = COPIES[copies]
    t = [time.perf_counter()]
    stacked, sizes = stack_(feeds, replica.axes)
    t.append(time.perf_counter())
    out = replica.run(stacked)
    t.append(time.perf_counter())
    split_(out, replica.axes, sizes)
    t.append(time.perf_counter())
    return t


def _medians_ms(replica: Replica, feeds: list, runs: int, busy: bool, copies: str = "native") -> dict:
    """Medians over `runs` batches of the whole (submit to result) and of each phase."""
    assert len(groups(feeds, replica.axes)) == 1, "the feeds must stack into one batch"
    pool = ThreadPoolExecutor(1)
    stop = threading.Event()
    other = threading.Thread(target=_busy, args=(stop,)) if busy else None
    if other:
        other.start()
    times: dict = {p: [] for p in PHASES}
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            t = pool.submit(_batch, replica, feeds, copies).result()
            t5 = time.perf_counter()
            for name, value in zip(PHASES, (t5 - t0, t[0] - t0, t[1] - t[0], t[2] - t[1], t[3] - t[2], t5 - t[3])):
                times[name].append(value)
    finally:
        stop.set()
        if other:
            other.join()
        pool.shutdown()
    return {p: statistics.median(v) * 1e3 for p, v in times.items()}


def _replica(model, intra_op: int) -> Replica:
    return Replica(model, sess_options=session_options(intra_op))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--intervals", default="5,0.5", help="switch intervals in ms, a comma list")
    ap.add_argument("--intra-op", default="0",
                    help="the session's intra_op_num_threads, a comma list (0: ONNX Runtime's default)")
    ap.add_argument("--copies", default="native", help="the stack's and split's copies, a comma list of "
                    + " and ".join(COPIES))
    args = ap.parse_args(argv)
    copies = args.copies.split(",")
    if any(c not in COPIES for c in copies):
        ap.error(f"--copies: expected a comma list of {sorted(COPIES)}, got {args.copies!r}")
    model = serve_bench._model(False, args.tiny)
    replicas = {n: _replica(model, n) for n in [int(t) for t in args.intra_op.split(",")]}
    first = next(iter(replicas.values()))
    name, dims = next(iter(first.signature.inputs.items()))
    shape = [d if isinstance(d, int) else 1 for d in dims]
    rng = np.random.default_rng(0)
    feeds = [{name: rng.uniform(-1, 1, shape).astype(np.float32)} for _ in range(args.rows)]
    for replica in replicas.values():
        _medians_ms(replica, feeds, 50, False)   # warm-up (and the GPU's clocks)
    print("| round | switch interval ms | intra-op threads | copies | beside | "
          + " | ".join(f"{p} ms" for p in PHASES) + " |")
    print("|---|---|---|---|---|" + "---|" * len(PHASES))
    for rnd in range(1, args.rounds + 1):
        for ms in [float(t) for t in args.intervals.split(",")]:
            sys.setswitchinterval(ms / 1e3)
            for n, replica in replicas.items():
                for c in copies:
                    for busy in (False, True):
                        m = _medians_ms(replica, feeds, args.runs, busy, c)
                        cells = " | ".join(f"{m[p]:.3f}" for p in PHASES)
                        beside = "a busy thread" if busy else "an idle thread"
                        print(f"| {rnd} | {ms:g} | {n or 'default'} | {c} | {beside} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
