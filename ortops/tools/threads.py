"""``ortops run --threads``: one session shared by several threads, its runs/s for each count
of threads and every result checked against the serial one, bit for bit (docs/onnxruntime.md,
"Threads"), with where the layers' host time went (the core's counters)."""

from __future__ import annotations

import argparse
import threading
import time

from ortops.device import _native
from ortops.timing import warm


def counts(text: str) -> list[int]:
    try:
        counts = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected thread counts such as 1,2,4,8, got {text!r}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"thread counts must be >= 1, got {text!r}")
    return counts


def layer_run_split(before: dict, after: dict, elapsed: float) -> str:
    """Where the layer runs' host time went between two core_counters() readings: writing
    inputs, submitting and waiting for the device, reading outputs (each a mean per layer run),
    and the time the layers' in-flight slots were held (src/core/rnn/coalesce.hpp) as a share of
    the wall time, summed over the layers."""
    d = {k: after[k] - before[k] for k in ("runs", "write_ns", "wait_ns", "read_ns", "slot_runs", "slot_ns")}
    runs = max(d["runs"], 1)
    us = {k: d[k] / runs / 1e3 for k in ("write_ns", "wait_ns", "read_ns")}
    held = d["slot_ns"] / 1e9 / elapsed if elapsed > 0 else 0.0
    return (f"a layer run: write {us['write_ns']:.0f} us, submit and wait {us['wait_ns']:.0f} us, "
            f"read {us['read_ns']:.0f} us; in-flight slots held {held:.2f} of the wall time "
            f"({d['slot_runs']} runs through the coalescer)")


def scaling(sess, make_feeds_for, counts, repeat, seed, warmup) -> int:
    """Runs/s of ``sess`` from each count of threads; every result checked against the serial
    result of the same inputs, bit for bit. Returns 1 if any differs or fails, else 0."""
    most = max(counts)
    feeds = [make_feeds_for(seed + 1 + t) for t in range(most)]   # one input set per thread
    serial = [sess.run(None, f) for f in feeds]
    bad = 0
    for n in counts:
        start = threading.Barrier(n + 1)
        failures = []

        def worker(t):
            start.wait()
            for _ in range(repeat):
                try:
                    out = sess.run(None, feeds[t])
                except Exception as e:  # noqa: BLE001 - counted and reported
                    failures.append(f"thread {t}: {type(e).__name__}: {e}")
                    continue
                if any(a.tobytes() != b.tobytes() for a, b in zip(out, serial[t])):
                    failures.append(f"thread {t}: result differs from the serial result")

        # Warm up from n threads, as the timed runs go: coalesced runs of each batch record
        # their plans now (src/core/rnn/coalesce.hpp), not inside the timed runs.
        until = time.perf_counter() + warmup
        warmers = [threading.Thread(target=lambda t=t: warm(lambda: sess.run(None, feeds[t]),
                                                             max(0.0, until - time.perf_counter())))
                   for t in range(n)]
        for th in warmers:
            th.start()
        for th in warmers:
            th.join()
        before = _native().core_counters()
        threads = [threading.Thread(target=worker, args=(t,)) for t in range(n)]
        for th in threads:
            th.start()
        start.wait()
        t0 = time.perf_counter()
        for th in threads:
            th.join()
        elapsed = time.perf_counter() - t0
        runs = n * repeat
        verdict = "every result equal to the serial one" if not failures else \
            f"{len(failures)} BAD: {failures[0]}"
        after = _native().core_counters()
        layer_runs = after["runs"] - before["runs"]
        carried = after["coalesced_requests"] - before["coalesced_requests"]
        together = after["coalesced_runs"] - before["coalesced_runs"]
        print(f"threads {n}: {runs / elapsed:.1f} runs/s ({runs} runs in {elapsed:.3f} s; {verdict}); "
              f"layer runs {layer_runs}, of which {together} carried {carried} coalesced requests")
        print("  " + layer_run_split(before, after, elapsed))
        bad += len(failures)
    return 1 if bad else 0
