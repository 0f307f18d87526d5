"""Kernel variants: the tunables a plan is recorded with, and the native core's heuristics.

The heuristics that choose a variant (rows per thread, units, batch tile, Gemm tile, which
step kernel, and the batched step kernels' tile by element type and batch) live once, in the
native core (``src/core/rnn/variants.hpp``, with the H200 measurements behind them, and its table
of batched tiles, ``BATCHED_TILES``); the functions here ask it. The module-level tunables
are read by :class:`ortops.RecurrentLayer` at each call and passed to its native layer, so
tests and benchmarks may set them (a batched tunable left at None takes the table's value). Every choice changes only how work is split over threads and
workgroups, never the order in which a sum is taken, so every variant gives the same bits
(tests/test_determinism.py, tests/test_step_kernels.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict

from ortops import vocabulary
from ortops.modes import check_mode

GROUP = 64          # local size of the state and output passes (variants.hpp)
MAX_GROUPS = 65535  # workgroups per dispatch dimension every Vulkan device accepts
LARGE_PROJECTION = 1 << 22   # outputs of the input projection from which the 128 x 128 tile is used

# The batched step kernels (glsl/step_batched.comp, v4; glsl/step_tiled.comp, v5's register
# tile). BATCHED_FROM: the batch from which the step runs one (below it the lanes kernel,
# glsl/step.comp): TABLE, the native core's by hidden size (16 from hidden 384, 32 below;
# :func:`batched_from` says a layer's), None never, a number from that batch at every size. Their tile comes from the native core's table of measured tiles
# (BATCHED_TILES in src/core/rnn/variants.hpp, by element type, batch and hidden size;
# :func:`batched_tiles` lists it): float32 2x1x1x8x4, except 2x2x1x8x2 at hidden 384-767 from
# batch 33; float16 2x1x1x8x4 everywhere (UPTxBYxPREFETCHxKSPLITxROWS; measured on the H200,
# docs/perf.md "Kernel choices").
# Each BATCHED_* below overrides one field of that tile; None leaves the table's value (for
# BATCHED_FROM alone None means never). By element type ({"float32": .., "float16": ..}, a
# None value leaving that type's to the table) or one value for both:
#   BATCHED_UPT       units per thread
#   BATCHED_BY        groups of rows x units per workgroup
#   BATCHED_ROWS      batch rows per thread: 1 runs glsl/step_batched.comp (v4, a lane per
#                     batch row); 2, 4 or 8 run glsl/step_tiled.comp (v5, the register tile: a
#                     thread holds rows x units x gates of sums)
# One value for both:
#   BATCHED_PREFETCH  positions whose terms are loaded at once
#   BATCHED_KSPLIT    threads sharing one sum's class walk (1, 2, 4 or 8)
# Tests and bench/step_kernels.py set explicit tilings here; every tiling gives the same bits.
TABLE = "table"
BATCHED_FROM: int | str | None = TABLE
BATCHED_UPT: int | None | Dict[str, int | None] = None
BATCHED_BY: int | None | Dict[str, int | None] = None
BATCHED_PREFETCH: int | None = None
BATCHED_KSPLIT: int | None = None
BATCHED_ROWS: int | None | Dict[str, int | None] = None

# The matrix-unit step kernel (glsl/step_coopmat.comp; mode "fast", float16 layers with the
# default activations, on a device with VK_KHR_cooperative_matrix, docs/modes.md):
#   COOPMAT_STEPS_FROM  the batch from which it runs: TABLE (the native core's table by
#                       hidden size, COOPMAT_STEPS_FROM in variants.hpp: from batch 4, from
#                       2 at hidden 384 up, from 1 at 896 up; :func:`coopmat_steps_from`), None
#                       never, a number from that batch at every size
#   COOPMAT_BLOCKS      16-row batch blocks a workgroup (1, 2 or 4); None: the native rule
#                       (two where the grid keeps COOPMAT_PAIR_GROUPS workgroups, else one)
COOPMAT_STEPS_FROM: int | str | None = TABLE
COOPMAT_BLOCKS: int | None = None

# The whole-sequence kernel (glsl/step_sequence.comp: one dispatch walks every step, a
# workgroup per direction and SEQUENCE_ROWS batch rows; the step kernels' bits):
#   SEQUENCE_STEPS  TABLE (the native core's rules by device class, hidden size and batch,
#                   SEQUENCE_STEPS in variants.hpp, or the environment's ORTOPS_SEQUENCE_STEPS
#                   = 0 / 1 where set), False never, True wherever its state fits shared memory
#   SEQUENCE_ROWS   batch rows a workgroup; None: one
#   SEQUENCE_BROADCAST  with R in registers (CPU devices), h shared by subgroup broadcast: None
#                   the rule (wherever the subgroup size allows), or a bool
SEQUENCE_STEPS: bool | str = TABLE
SEQUENCE_ROWS: int | None = None
SEQUENCE_BROADCAST: bool | None = None
SEQUENCE_UNITS: int | None = None   # with the broadcast, units a thread (1-8); None: the native rule

# The persistent kernel (glsl/step_persistent.comp: every step in one grid of at most a
# workgroup per compute unit, R held in their shared memory, h exchanged through device memory
# each step; the step kernels' bits, and a grid that fails runs again on them: docs/design.md,
# "Passes"):
#   PERSISTENT_STEPS      TABLE (the native core's rules by device class, cell, hidden size and
#                         batch, PERSISTENT_STEPS in variants.hpp: GPUs that report their compute
#                         units, never CPU implementations; the environment's
#                         ORTOPS_PERSISTENT_STEPS=0 switches it off), False never, True wherever
#                         it can run (batch 1-8, not in mode exact, R within the shared memory)
#   PERSISTENT_GROUPS     workgroups dispatched; None: the rule (the device's compute units, else
#                         the fewest whose shared memory holds R)
#   PERSISTENT_UNITS      units whose rows of R a workgroup can hold; None: its shared memory's
#   PERSISTENT_SPINS      polls before a wait gives up; None: the rule
#   PERSISTENT_DISCOVERY  occupancy discovery: None (on) or a bool (False, a test hook: every
#                         dispatched workgroup takes part, whether or not it runs at once)
#   PERSISTENT_DESIGN     the shader's DESIGN bits, 0-31 (glsl/step_persistent.comp; 0: a grid
#                         barrier a step; 16: h exchanged with its step in 64-bit words instead);
#                         None: the rule (GPUs: 28 where its split fits, else 0)
#   PERSISTENT_PIECE      None the whole kernel; "barriers": its barriers only, no arithmetic (a
#                         profile for bench/persistent.py; the results are wrong)
PERSISTENT_STEPS: bool | str = TABLE
PERSISTENT_GROUPS: int | None = None
PERSISTENT_UNITS: int | None = None
PERSISTENT_SPINS: int | None = None
PERSISTENT_DISCOVERY: bool | None = None
PERSISTENT_PIECE: str | None = None
PERSISTENT_DESIGN: int | None = None

# The CPU projection (glsl/input_projection_cpu.comp: a column of Xw an invocation, W's row in
# registers, every row walked; the tiled projection's bits):
#   CPU_PROJECTION         TABLE (CPU implementations of Vulkan, or the environment's
#                          ORTOPS_CPU_PROJECTION = 0 / 1 where set), False never, True always
#   CPU_PROJECTION_ROWS    Xw rows a walk over the input; None: the native rule
#   CPU_PROJECTION_W_REGS  W's row in a private array: None the rule (inputs up to 1024), or a bool
CPU_PROJECTION: bool | str = TABLE
CPU_PROJECTION_ROWS: int | None = None
CPU_PROJECTION_W_REGS: bool | None = None
CPU_PROJECTION_COLUMNS: int | None = None   # columns an invocation; None: the native rule

# The portable projection's staged slices (glsl/input_projection.comp's KT and STAGES; float32
# layers outside mode "exact"; issue 32, item 5: measured attempts, not what ships). None: what
# ships (16 k a slice, one slice in shared memory).
#   PROJECTION_KT      16 or 32 k a staged slice (32 only where the input size is a multiple of 32)
#   PROJECTION_STAGES  1 or 2 slices in shared memory (2: the next one staged while this one is
#                      read, one barrier a slice)
# Each is dropped where the device's shared memory is too small. The sums are unchanged (each
# output in increasing k from +0), so every choice gives the same bits.
PROJECTION_KT: int | None = None
PROJECTION_STAGES: int | None = None
_TABLE = 0   # the native settings' "the table's value" (variants.hpp, BATCHED_TABLE)


def _native():
    from ortops import _vk

    return _vk


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def tunables() -> tuple:
    """The tunables as they stand, cheaply (RecurrentLayer compares them at every call and asks
    :func:`settings` only when they changed)."""
    return (BATCHED_FROM, _by_dtype(BATCHED_UPT), _by_dtype(BATCHED_BY), BATCHED_PREFETCH, BATCHED_KSPLIT,
            _by_dtype(BATCHED_ROWS), COOPMAT_STEPS_FROM, COOPMAT_BLOCKS, SEQUENCE_STEPS, SEQUENCE_ROWS,
            SEQUENCE_BROADCAST, SEQUENCE_UNITS, CPU_PROJECTION, CPU_PROJECTION_ROWS, CPU_PROJECTION_W_REGS,
            CPU_PROJECTION_COLUMNS, PROJECTION_KT, PROJECTION_STAGES, PERSISTENT_STEPS, PERSISTENT_GROUPS,
            PERSISTENT_UNITS, PERSISTENT_SPINS, PERSISTENT_DISCOVERY, PERSISTENT_PIECE, PERSISTENT_DESIGN)


def settings():
    """The batched-kernel tunables now in force as the native ``VariantSettings`` (its fields
    by name, ``FIELDS``; 0 for a field left to the table, the rest the core's defaults)."""
    if BATCHED_KSPLIT not in (None, 1, 2, 4, 8):
        raise ValueError(f"ortops.variants.BATCHED_KSPLIT must be 1, 2, 4 or 8 (or None), got {BATCHED_KSPLIT!r}")
    upt32, upt16 = _by_dtype(BATCHED_UPT)
    by32, by16 = _by_dtype(BATCHED_BY)
    rows32, rows16 = _by_dtype(BATCHED_ROWS)
    if rows32 not in (None, 1, 2, 4, 8) or rows16 not in (None, 1, 2, 4, 8):
        raise ValueError(f"ortops.variants.BATCHED_ROWS must be 1, 2, 4 or 8 (or None), got {BATCHED_ROWS!r}")
    # (PREFETCH 0 has always meant 1.)
    for name, values, least in (("BATCHED_UPT", (upt32, upt16), 1), ("BATCHED_BY", (by32, by16), 1),
                                ("BATCHED_PREFETCH", (BATCHED_PREFETCH,), 0)):
        if any(v is not None and (isinstance(v, bool) or int(v) != v or v < least) for v in values):
            raise ValueError(f"ortops.variants.{name} must be a positive integer (or None), got "
                             f"{globals()[name]!r}")
    if COOPMAT_BLOCKS not in (None, 1, 2, 4) or isinstance(COOPMAT_BLOCKS, bool):
        raise ValueError(f"ortops.variants.COOPMAT_BLOCKS must be 1, 2 or 4 (or None), got {COOPMAT_BLOCKS!r}")
    if SEQUENCE_STEPS not in (TABLE, True, False):
        raise ValueError(f"ortops.variants.SEQUENCE_STEPS must be True, False or ortops.variants.TABLE, got "
                         f"{SEQUENCE_STEPS!r}")
    if SEQUENCE_ROWS is not None and (isinstance(SEQUENCE_ROWS, bool) or not isinstance(SEQUENCE_ROWS, int)
                                      or SEQUENCE_ROWS < 1):
        raise ValueError(f"ortops.variants.SEQUENCE_ROWS must be a positive integer (or None), got {SEQUENCE_ROWS!r}")
    s = _native().VariantSettings()
    s.batched_from = _from_batch("BATCHED_FROM", "batched_from_table")
    s.coopmat_steps_from = _from_batch("COOPMAT_STEPS_FROM", "coopmat_steps_table")
    s.batched_upt_float32, s.batched_upt_float16 = _field(upt32), _field(upt16)
    s.batched_by_float32, s.batched_by_float16 = _field(by32), _field(by16)
    s.batched_rows_float32, s.batched_rows_float16 = _field(rows32), _field(rows16)
    s.batched_prefetch = _field(None if BATCHED_PREFETCH is None else max(1, BATCHED_PREFETCH))
    s.batched_ksplit = _field(BATCHED_KSPLIT)
    s.coopmat_blocks = _field(COOPMAT_BLOCKS)
    s.sequence_steps = (_native_tables()["sequence_steps_table"] if SEQUENCE_STEPS == TABLE
                        else int(SEQUENCE_STEPS))
    s.sequence_rows = _field(SEQUENCE_ROWS)
    s.sequence_broadcast = _field(None if SEQUENCE_BROADCAST is None else 1 + bool(SEQUENCE_BROADCAST))
    s.sequence_units = _field(SEQUENCE_UNITS)
    if CPU_PROJECTION not in (TABLE, True, False):
        raise ValueError(f"ortops.variants.CPU_PROJECTION must be True, False or ortops.variants.TABLE, got "
                         f"{CPU_PROJECTION!r}")
    s.cpu_projection = (_native_tables()["cpu_projection_table"] if CPU_PROJECTION == TABLE
                        else int(CPU_PROJECTION))
    s.cpu_projection_rows = _field(CPU_PROJECTION_ROWS)
    s.cpu_projection_columns = _field(CPU_PROJECTION_COLUMNS)
    s.cpu_projection_w_regs = _field(None if CPU_PROJECTION_W_REGS is None else 1 + bool(CPU_PROJECTION_W_REGS))
    if PROJECTION_KT not in (None, 16, 32) or isinstance(PROJECTION_KT, bool):
        raise ValueError(f"ortops.variants.PROJECTION_KT must be 16 or 32 (or None), got {PROJECTION_KT!r}")
    if PROJECTION_STAGES not in (None, 1, 2) or isinstance(PROJECTION_STAGES, bool):
        raise ValueError(f"ortops.variants.PROJECTION_STAGES must be 1 or 2 (or None), got {PROJECTION_STAGES!r}")
    s.projection_kt = _field(PROJECTION_KT)
    s.projection_stages = _field(PROJECTION_STAGES)
    _persistent_settings(s)
    return s


def _persistent_settings(s) -> None:
    """The PERSISTENT_* tunables, checked, into the native settings ``s``."""
    if PERSISTENT_STEPS not in (TABLE, True, False):
        raise ValueError(f"ortops.variants.PERSISTENT_STEPS must be True, False or ortops.variants.TABLE, got "
                         f"{PERSISTENT_STEPS!r}")
    for name in ("PERSISTENT_GROUPS", "PERSISTENT_UNITS", "PERSISTENT_SPINS"):
        value = globals()[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"ortops.variants.{name} must be a positive integer (or None), got {value!r}")
    if PERSISTENT_DISCOVERY is not None and not isinstance(PERSISTENT_DISCOVERY, bool):
        raise ValueError(f"ortops.variants.PERSISTENT_DISCOVERY must be a bool (or None), got {PERSISTENT_DISCOVERY!r}")
    if PERSISTENT_PIECE not in (None, "barriers"):
        raise ValueError(f"ortops.variants.PERSISTENT_PIECE must be None or 'barriers', got {PERSISTENT_PIECE!r}")
    s.persistent_steps = (_native_tables()["persistent_steps_table"] if PERSISTENT_STEPS == TABLE
                          else int(PERSISTENT_STEPS))
    s.persistent_groups = _field(PERSISTENT_GROUPS)
    s.persistent_units = _field(PERSISTENT_UNITS)
    s.persistent_spins = _field(PERSISTENT_SPINS)
    s.persistent_discovery = _field(None if PERSISTENT_DISCOVERY is None else 1 + PERSISTENT_DISCOVERY)
    s.persistent_piece = 1 if PERSISTENT_PIECE == "barriers" else 0
    if PERSISTENT_DESIGN is not None and (isinstance(PERSISTENT_DESIGN, bool) or not isinstance(PERSISTENT_DESIGN, int)
                                          or not 0 <= PERSISTENT_DESIGN < 32):
        raise ValueError(f"ortops.variants.PERSISTENT_DESIGN must be 0-31 (or None), got {PERSISTENT_DESIGN!r}")
    s.persistent_design = _TABLE if PERSISTENT_DESIGN is None else PERSISTENT_DESIGN + 1


def _field(value) -> int:
    """A tunable as the native settings hold it: None as the table's value."""
    return _TABLE if value is None else int(value)


def coopmat_steps_from(hidden: int) -> int:
    """The batch from which a float16 layer of this hidden size in mode "fast" steps on the
    matrix units (glsl/step_coopmat.comp) where the device can (0: never), under the
    tunables now in force."""
    return _native().coopmat_steps_from(hidden, settings())


@functools.lru_cache(maxsize=None)
def _native_tables() -> dict:
    """The native core's compile-time tables (variants.hpp), read once."""
    return _native().batched_tiles()


def _from_batch(name: str, table_key: str) -> int:
    """A from-batch tunable (BATCHED_FROM, COOPMAT_STEPS_FROM) as the native settings take it:
    TABLE as the native sentinel for its table by hidden size, None as 0 (never), else the
    positive batch itself."""
    value = globals()[name]
    if value == TABLE:
        return _native_tables()[table_key]
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ortops.variants.{name} must be a positive integer, None or "
                         f"ortops.variants.TABLE, got {value!r}")
    return value


def _by_dtype(value) -> tuple:
    """(float32, float16) of a tunable given by element type or as one value for both."""
    return tuple(value.get(d) for d in vocabulary.DTYPES) if isinstance(value, dict) else (value, value)


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


def step_kernel(batch: int, hidden: int) -> str:
    """Which step kernel a batch of a layer of this hidden size runs: "step" (lanes split each
    product; latency-bound small batches) or "step_batched" (whole products in a thread's
    registers, R and h in the batched layouts; :func:`batched_variant`'s ``shader`` says which
    of the two kernels, by element type, hidden size and batch)."""
    return _native().step_kernel(batch, hidden, settings())


def batched_from(hidden: int) -> int:
    """The batch from which a layer of this hidden size runs a batched kernel under the
    settings in force (0: never)."""
    return int(_native().batched_from(hidden, settings()))


def batched_variant(hidden: int, dtype: str = "float32", *, batch: int) -> BatchedVariant:
    """The batched kernel's tiling for a layer of this hidden size and element type at this
    batch: the native table's tile (:func:`batched_tiles`), each field a BATCHED_* tunable
    sets replaced, clamped to the layer (no more units than it has) and to what every device
    allows (1024 invocations, the register tile's shared memory within 16 KiB)."""
    return BatchedVariant(*_native().batched_variant(hidden, batch, dtype == "float16", settings()))


@dataclass(frozen=True)
class TileRule:
    """One row of the native table of default tiles: layers of ``dtype`` from batch
    ``from_batch`` up at hidden sizes in [``from_hidden``, ``below_hidden``) (None: no upper
    bound) get ``tile``; the last matching row of the element type decides."""
    dtype: str
    from_batch: int
    from_hidden: int
    below_hidden: int | None
    tile: BatchedVariant

    def matches(self, hidden: int, batch: int) -> bool:
        return (batch >= self.from_batch and hidden >= self.from_hidden
                and (self.below_hidden is None or hidden < self.below_hidden))


def batched_tiles() -> list:
    """The native core's table of default tiles (src/core/rnn/variants.hpp, BATCHED_TILES, with
    the H200 measurements behind it), as :class:`TileRule` rows in the table's order (each
    element type's first row matches every layer; from BATCHED_FROM on: below, the lanes
    kernel runs)."""
    return [TileRule(dtype, int(b), int(h0), None if h1 is None else int(h1), BatchedVariant(*tile))
            for dtype, b, h0, h1, tile in _native().batched_tiles()["tiles"]]


def default_batched_from() -> list:
    """The native core's default BATCHED_FROM table (src/core/rnn/variants.hpp): (from hidden,
    batch) rows, the last whose hidden size is at most a layer's deciding."""
    return [tuple(int(v) for v in r) for r in _native().batched_tiles()["batched_from"]]


def step_variant(batch: int, gates_in_pass: int, dtype: str = "float32",
                 mode: str = "deterministic") -> StepVariant:
    """The lanes step kernel's variant for a batch and a pass computing ``gates_in_pass`` gates
    of a ``dtype`` ("float32" or "float16") layer in ``mode`` (docs/modes.md)."""
    mode = check_mode(mode, "ortops.variants.step_variant")
    return StepVariant(*_native().step_variant(batch, gates_in_pass, dtype == "float16", mode))


def step_passes(op: str, gates: int, linear_before_reset: int):
    """(PASS constant, gates computed) of each step pass: a GRU with linear_before_reset = 0
    runs two, every other layer one."""
    return [tuple(p) for p in _native().step_passes(op == "GRU" and not linear_before_reset, gates)]
