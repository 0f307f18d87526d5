"""Kernel variants: the tunables a plan is recorded with, and the native core's heuristics.

The heuristics that choose a variant (rows per thread, units, batch tile, Gemm tile, which
step kernel) live once, in the native core (``src/core/variants.hpp``, with the H200
measurements behind them); the functions here ask it. The module-level tunables are read by
:class:`ortops.RecurrentLayer` at each call and passed to its native layer, so tests and
benchmarks may set them. Every choice changes only how work is split over threads and
workgroups, never the order in which a sum is taken, so every variant gives the same bits
(tests/test_determinism.py, tests/test_step_kernels.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

GROUP = 64          # local size of the state and output passes (variants.hpp)
MAX_GROUPS = 65535  # workgroups per dispatch dimension every Vulkan device accepts
LARGE_PROJECTION = 1 << 22   # outputs of the input projection from which the 128 x 128 tile is used

# The batched step kernel (glsl/step_batched.comp): from which batch it runs (None: never),
# its tiling (units per thread, by element type or one for both; groups of them per
# workgroup; positions loaded at once; threads sharing a sum's class walk). The defaults are
# the native core's (variants.hpp says what the H200 measured).
BATCHED_FROM: int | None = 32
BATCHED_UPT: int | Dict[str, int] = {"float32": 1, "float16": 2}
BATCHED_BY = 2
BATCHED_PREFETCH = 1
BATCHED_KSPLIT = 8
# Batch rows per thread (by element type or one for both): 1 runs glsl/step_batched.comp (v4, a
# lane per batch row); 2, 4 or 8 run glsl/step_tiled.comp (v5, the register tile: a thread
# holds rows x units x gates of sums). v5 is not the default until the H200 has measured it
# (docs/perf.md, "Batched steps"); tests and scripts/step_kernels.py select it here.
BATCHED_ROWS: int | Dict[str, int] = 1


def _native():
    from ortops import _vk

    return _vk


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def settings() -> dict:
    """The batched-kernel tunables now in force, as the native layer settings take them."""
    if BATCHED_KSPLIT not in (1, 2, 4, 8):
        raise ValueError(f"ortops.variants.BATCHED_KSPLIT must be 1, 2, 4 or 8, got {BATCHED_KSPLIT!r}")
    upt32, upt16 = _by_dtype(BATCHED_UPT)
    rows32, rows16 = _by_dtype(BATCHED_ROWS)
    if rows32 not in (1, 2, 4, 8) or rows16 not in (1, 2, 4, 8):
        raise ValueError(f"ortops.variants.BATCHED_ROWS must be 1, 2, 4 or 8, got {BATCHED_ROWS!r}")
    # The order is the native settings' (ortops.layer sends the values in it).
    return {"batched_from": BATCHED_FROM or 0, "batched_upt_float32": upt32, "batched_upt_float16": upt16,
            "batched_by": BATCHED_BY, "batched_prefetch": max(1, BATCHED_PREFETCH),
            "batched_ksplit": BATCHED_KSPLIT, "batched_rows_float32": rows32, "batched_rows_float16": rows16}


def _by_dtype(value) -> tuple:
    """(float32, float16) of a tunable given by element type or as one value for both."""
    return (value["float32"], value["float16"]) if isinstance(value, dict) else (value, value)


def grid_groups(n: int, max_groups: int = MAX_GROUPS) -> int:
    """Workgroups of a grid-stride pass over n items (copy, state and output passes)."""
    return _native().grid_groups(n, max_groups)


def projection_tpt(outputs: int, large: int = LARGE_PROJECTION) -> int:
    """Outputs per thread in each dimension of the input projection (its TPT constant)."""
    return _native().projection_tpt(outputs, large)


def projection_tile(tpt: int) -> int:
    """Rows (and columns) of Xw one projection workgroup computes: 16 x 16 threads x tpt."""
    return 16 * tpt


@dataclass(frozen=True)
class StepVariant:
    """How one step pass splits its work: ``nb`` batch rows and ``units`` hidden units per
    workgroup, ``rpt`` R rows per thread; ``rows`` (gates of the pass x units) R rows per
    workgroup, over ``ty`` = rows / rpt threads per lane column."""

    nb: int
    units: int
    rpt: int
    rows: int

    @property
    def ty(self) -> int:
        return self.rows // self.rpt


@dataclass(frozen=True)
class BatchedVariant:
    """The batched step kernels' split: 32 batch rows per workgroup, ``by`` groups of
    ``rows`` x ``upt`` units (a thread: ``rows`` batch rows x ``upt`` units; one row a thread
    is glsl/step_batched.comp, more the register tile glsl/step_tiled.comp), ``ksplit``
    threads sharing a sum's class walk; a workgroup covers ``units`` = upt * by * rows units."""

    upt: int
    by: int
    prefetch: int = 1
    ksplit: int = 1
    rows: int = 1

    @property
    def units(self) -> int:
        return self.upt * self.by * self.rows

    @property
    def shader(self) -> str:
        return "step_tiled" if self.rows > 1 else "step_batched"


def step_kernel(batch: int) -> str:
    """Which step kernel a batch runs: "step" (lanes split each product; latency-bound
    small batches) or "step_batched" (whole products in a thread's registers, R and h in the
    batched layouts; :func:`batched_variant`'s ``shader`` says which of the two kernels)."""
    return _native().step_kernel(batch, settings())


def batched_variant(hidden: int, dtype: str = "float32") -> BatchedVariant:
    """The batched kernel's tiling for a layer of this hidden size and element type."""
    return BatchedVariant(*_native().batched_variant(hidden, dtype == "float16", settings()))


def step_variant(batch: int, gates_in_pass: int) -> StepVariant:
    """The lanes step kernel's variant for a batch and a pass computing ``gates_in_pass`` gates."""
    return StepVariant(*_native().step_variant(batch, gates_in_pass))


def step_passes(op: str, gates: int, linear_before_reset: int):
    """(PASS constant, gates computed) of each step pass: a GRU with linear_before_reset = 0
    runs two, every other layer one."""
    return [tuple(p) for p in _native().step_passes(op == "GRU" and not linear_before_reset, gates)]
