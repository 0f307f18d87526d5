"""Kernel variants and the heuristics that choose them, with the measurements behind them.

Every choice here changes only how work is split over threads and workgroups, never the
order in which a sum is taken, so every variant gives the same bits
(tests/test_determinism.py runs each against the others).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

GROUP = 64          # local size of the state and output passes
MAX_GROUPS = 65535  # workgroups per dispatch dimension every Vulkan device accepts
MAX_ROWS = 8        # R rows per step workgroup (x 32 lanes = 256 invocations at most)
MAX_NB = 8          # batch rows per step workgroup
LARGE_PROJECTION = 1 << 22   # outputs of the input projection from which the 128 x 128 tile is used


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def grid_groups(n: int, max_groups: int = MAX_GROUPS) -> int:
    """Workgroups of a grid-stride pass over n items (copy, state and output passes)."""
    return min(ceil_div(n, GROUP), max_groups)


def projection_tpt(outputs: int, large: int = LARGE_PROJECTION) -> int:
    """Outputs per thread in each dimension of the input projection (its TPT constant).

    Large products take the 128 x 128 tile; small ones the 64 x 64 tile, which gives
    four times as many workgroups to spread over the device. ``outputs`` counts the
    projection's outputs (steps x batch x gates x hidden x directions).
    """
    return 8 if outputs >= large else 4


def projection_tile(tpt: int) -> int:
    """Rows (and columns) of Xw one projection workgroup computes: 16 x 16 threads x tpt."""
    return 16 * tpt


# The batched step kernel (glsl/step_batched.comp): from which batch it runs (None: never),
# and its tiling (units per thread, by element type or one for both; groups of them per
# workgroup; positions loaded at once; threads sharing a sum's class walk). Read at each plan
# build, so tests and benchmarks may set them. Both kernels give the same bits, so these choose
# speed only. On the H200 (docs/perf.md, "Batched steps"; 2026-11-30, GPU ms of a BiLSTM,
# float32 / float16): the walk split over 8 threads beats step.comp from batch 32 up —
# 200x32x512 4.41 / 5.11 against 6.69 / 7.15, 200x64x512 7.86 / 8.77 against 12.51 / 13.35,
# 100x64x1024 17.0 / 17.8 against 24.7 / 23.3, 100x64x256 1.43 / 1.60 against 2.11 / 2.24 —
# and ties or loses at 16 (3.80 / 4.34 against 3.72 / 3.95), where a 32-row tile is half
# empty. Two units per thread gain 5-11 % in float16 (8.77 against 9.27 ms at 200x64x512); in
# float32 they measured within -4 % to +6 % of one unit (but at 200x64x512, where a clock dip
# made them 60 % slower in that run: docs/perf.md), so float32 keeps one.
BATCHED_FROM: int | None = 32
BATCHED_UPT: int | Dict[str, int] = {"float32": 1, "float16": 2}
BATCHED_BY = 2
BATCHED_PREFETCH = 1
BATCHED_KSPLIT = 8


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
    """The batched step kernel's split: 32 batch rows per workgroup (one per lane), ``by``
    groups of ``upt`` units each; a workgroup covers ``units`` = upt * by units."""

    upt: int
    by: int
    prefetch: int = 1     # positions whose terms a thread loads at once
    ksplit: int = 1       # threads sharing one sum's class walk (1, 2, 4 or 8)

    @property
    def units(self) -> int:
        return self.upt * self.by


def step_kernel(batch: int) -> str:
    """Which step kernel a batch runs: "step" (lanes split each product; latency-bound
    small batches) or "step_batched" (a thread per whole product; see its shader)."""
    return "step_batched" if BATCHED_FROM is not None and batch >= BATCHED_FROM else "step"


def batched_variant(hidden: int, dtype: str = "float32") -> BatchedVariant:
    """The batched kernel's tiling for a layer of this hidden size and element type (never
    more units per workgroup than the layer has, at most 1,024 invocations: 32 x by x ksplit)."""
    if BATCHED_KSPLIT not in (1, 2, 4, 8):
        raise ValueError(f"ortops.variants.BATCHED_KSPLIT must be 1, 2, 4 or 8, got {BATCHED_KSPLIT!r}")
    upt = BATCHED_UPT[dtype] if isinstance(BATCHED_UPT, dict) else BATCHED_UPT
    upt = max(1, min(upt, hidden))
    by = max(1, min(BATCHED_BY, ceil_div(hidden, upt), 32 // BATCHED_KSPLIT))
    return BatchedVariant(upt=upt, by=by, prefetch=max(1, BATCHED_PREFETCH), ksplit=BATCHED_KSPLIT)


def classes_length(hidden: int) -> int:
    """Positions per class in the batched kernel's layouts: ceil(hidden / 32)."""
    return ceil_div(hidden, 32)


def padded_batch(batch: int) -> int:
    """Batch rows of a transposed state plane: the batch rounded up to the 32 lanes."""
    return 32 * ceil_div(batch, 32)


def transposed_planes(op: str, linear_before_reset: int) -> int:
    """Transposed state planes the batched kernel keeps: h of this step and of the next, and
    a GRU's r * h between its two passes."""
    return 3 if op == "GRU" and not linear_before_reset else 2


def transposed_floats(op: str, linear_before_reset: int, dirs: int, hidden: int, batch: int) -> int:
    """Floats of the transposed planes (0 where the step runs the lanes kernel)."""
    if step_kernel(batch) != "step_batched":
        return 0
    return (transposed_planes(op, linear_before_reset) * dirs * 32 * classes_length(hidden)
            * padded_batch(batch))


def step_variant(batch: int, gates_in_pass: int) -> StepVariant:
    """The lanes step kernel's variant for a batch and a pass computing ``gates_in_pass`` gates."""
    # Batch rows per workgroup: a one-row kernel for a batch of one (carrying eight rows
    # through the product when one is used costs registers and occupancy), else up to 8.
    nb = min(batch, MAX_NB)
    if batch <= MAX_NB:
        # Latency-bound: one R row per thread, the most threads and the shortest
        # chain per step (on the H200, 48x8x192->96 took 0.26 ms this way against
        # 0.35 ms with a unit's gates per thread).
        units = max(1, MAX_ROWS // gates_in_pass)
        rpt = 1
    else:
        # Throughput-bound: all gates of a unit per thread, so each load feeds
        # NB x gates multiply-adds. 128 threads a workgroup.
        rpt = gates_in_pass
        units = 4
    return StepVariant(nb=nb, units=units, rpt=rpt, rows=gates_in_pass * units)


def step_passes(op: str, gates: int, linear_before_reset: int):
    """(PASS constant, gates computed) of each step pass: a GRU with linear_before_reset = 0
    runs two (z and r first, since r is applied to h before the product with R_h; then h),
    every other layer one pass of all its gates."""
    if op == "GRU" and not linear_before_reset:
        return [(1, 2), (2, 1)]
    return [(0, gates)]
