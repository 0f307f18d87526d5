"""Session creation time: ``ortops.InferenceSession`` through the EP against the rewrite path it
replaced (load, ``rewrite``, the custom-op library registered, ORT session on the rewritten
model), and the EP alone (``ortops.ep_session_options``, no placement survey).

The engines alternate in one process, several rounds (the machine may be loaded by other
work); medians and the spread (min-max) per engine, in milliseconds. Issue 30's target: EP
session creation <= the rewrite path's.

    .venv/bin/python -P scripts/dev/session_creation.py [--rounds N] MODEL [MODEL ...]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import onnxruntime as ort

import ortops
from ortops.ort.rewrite import load_model, rewrite
from ortops.ort.session import register


def rewrite_path(path: str):
    """What ortops.InferenceSession did before the EP (placement "gpu")."""
    rw = rewrite(load_model(path))
    return ort.InferenceSession(rw.model.SerializeToString(), register(ort.SessionOptions()),
                                providers=["CPUExecutionProvider"])


def ep_session(path: str):
    return ortops.InferenceSession(path, providers=["CPUExecutionProvider"])


def ep_alone(path: str):
    return ort.InferenceSession(path, ortops.ep_session_options(placement="gpu"))   # no cost model


ENGINES = {"rewrite + custom ops": rewrite_path, "InferenceSession (EP)": ep_session, "EP alone": ep_alone}


def measure(path: str, rounds: int) -> dict:
    times: dict[str, list[float]] = {name: [] for name in ENGINES}
    for name, make in ENGINES.items():   # warm: Vulkan context, pipelines cache, imports
        make(path)
    for _ in range(rounds):
        for name, make in ENGINES.items():
            gc.collect()
            t = time.perf_counter()
            sess = make(path)
            times[name].append((time.perf_counter() - t) * 1e3)
            del sess
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    for path in args.models:
        print(path)
        for name, ts in measure(path, args.rounds).items():
            print(f"  {name:24s} median {statistics.median(ts):8.1f} ms  (min {min(ts):.1f}, max {max(ts):.1f}; "
                  f"{len(ts)} rounds)")


if __name__ == "__main__":
    main()
