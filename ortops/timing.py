"""Wall-clock timing, one way for the benchmark, the placement cost model, the CLI and the
measuring scripts."""

from __future__ import annotations

import statistics
import time
from typing import Callable, List, Optional


def warm(run: Callable[[], object], seconds: float) -> int:
    """One untimed run always (pipelines, caches), then runs for ``seconds``: a GPU that idled
    drops its clocks (the H200 to 345 of 1980 MHz) and a light model alone raises them only
    after a few hundred ms of work (docs/perf.md, "GPU clocks"). Returns the runs made."""
    t0 = time.perf_counter()
    run()
    n = 1
    while time.perf_counter() - t0 < seconds:
        run()
        n += 1
    return n


def median_s(run: Callable[[], object], repeat: int, *, warmup_runs: int = 1,
             budget_s: float | None = None) -> float:
    """Median wall-clock seconds of ``run`` over ``repeat`` runs after ``warmup_runs`` untimed
    ones; with ``budget_s``, stop once that many seconds have passed (after at least 3 runs)."""
    for _ in range(warmup_runs):
        run()
    return 1e-3 * statistics.median(samples(lambda: wall_ms(run), repeat, budget_s))


def samples(fn: Callable[[], float], runs: int, budget_s: Optional[float] = None,
            min_runs: int = 3) -> List[float]:
    """``fn()``'s values (times, say) over ``runs`` calls, or fewer (at least
    ``min_runs``) once ``budget_s`` seconds have passed: large sweep points cost 0.1-0.3 s a
    run on the H200, 20 of them per engine and mode would not fit one device call."""
    out: List[float] = []
    end = None if budget_s is None else time.perf_counter() + budget_s
    while len(out) < runs and (end is None or len(out) < min_runs or time.perf_counter() < end):
        out.append(fn())
    return out


def wall_ms(run: Callable[[], object]) -> float:
    """Milliseconds of one call of ``run`` (for :func:`samples`)."""
    t0 = time.perf_counter()
    run()
    return 1e3 * (time.perf_counter() - t0)
