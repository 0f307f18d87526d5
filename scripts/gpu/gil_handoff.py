"""How long a batch's run takes on a worker thread beside an idle and a busy Python thread, at
two GIL switch intervals (docs/serving.md, "The GIL hand-off"): ortops.serve's Replica, the
recognizer (--tiny: the one serve_bench.py --tiny serves), a batch of --rows requests of one row
run --runs times through a one-thread pool, the medians in ms.

    python -P scripts/gpu/gil_handoff.py [--tiny] [--rows 8] [--runs 300] [--intervals 5,0.5]
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

from ortops.serve import Replica   # noqa: E402


def _busy(stop: threading.Event) -> None:
    """Python work that holds the GIL, as a replica's event loop does under many clients."""
    doc = {"a": list(range(200))}
    while not stop.is_set():
        json.loads(json.dumps(doc))


def _median_ms(replica: Replica, feeds: list, runs: int, busy: bool) -> float:
    pool = ThreadPoolExecutor(1)
    stop = threading.Event()
    other = threading.Thread(target=_busy, args=(stop,)) if busy else None
    if other:
        other.start()
    times = []
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            pool.submit(replica.run_many, feeds).result()
            times.append(time.perf_counter() - t0)
    finally:
        stop.set()
        if other:
            other.join()
        pool.shutdown()
    return statistics.median(times) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--intervals", default="5,0.5", help="switch intervals in ms, a comma list")
    args = ap.parse_args(argv)
    replica = Replica(serve_bench._model(False, args.tiny))
    name, dims = next(iter(replica.signature.inputs.items()))
    shape = [d if isinstance(d, int) else 1 for d in dims]
    rng = np.random.default_rng(0)
    feeds = [{name: rng.uniform(-1, 1, shape).astype(np.float32)} for _ in range(args.rows)]
    _median_ms(replica, feeds, 50, False)   # warm-up (and the GPU's clocks)
    print("| round | switch interval ms | beside an idle thread, ms | beside a busy one, ms |")
    print("|---|---|---|---|")
    for rnd in range(1, args.rounds + 1):
        for ms in [float(t) for t in args.intervals.split(",")]:
            sys.setswitchinterval(ms / 1e3)
            idle = _median_ms(replica, feeds, args.runs, False)
            busy = _median_ms(replica, feeds, args.runs, True)
            print(f"| {rnd} | {ms:g} | {idle:.3f} | {busy:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
