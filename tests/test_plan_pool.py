"""ortops.variants' choices, the native core's heuristics (src/core/rnn/variants.hpp): no device.
The plan pool itself (a run owns its plan, the cache keeps busy keys) is tested through
layers in tests/test_concurrency.py and tests/test_layer_api.py."""

from __future__ import annotations

import pytest

from ortops import variants


@pytest.mark.parametrize("batch, gates, dtype, mode, expected", [
    (1, 4, "float32", "deterministic", (1, 2, 1, 8)),    # latency-bound LSTM: one R row per thread, 2 units
    (8, 3, "float16", "deterministic", (8, 2, 1, 6)),    # float16: up to 8 batch rows a workgroup
    (5, 1, "float16", "exact", (5, 8, 1, 8)),
    (8, 4, "float32", "deterministic", (2, 2, 1, 8)),    # float32: 2 (variants.hpp, LANES_FLOAT32_NB)
    (5, 1, "float32", "fast", (2, 8, 1, 8)),
    (8, 4, "float32", "exact", (8, 2, 1, 8)),            # but mode exact keeps up to 8
    (5, 1, "float32", "exact", (5, 8, 1, 8)),
    (9, 4, "float32", "deterministic", (8, 4, 4, 16)),   # throughput-bound: a unit's gates per thread, 4 units
    (64, 2, "float16", "fast", (8, 4, 2, 8)),
])
def test_step_variants(batch, gates, dtype, mode, expected):
    v = variants.step_variant(batch, gates, dtype, mode)
    assert (v.nb, v.units, v.rpt, v.rows) == expected and v.ty * v.rpt == v.rows


def test_step_variant_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="ortops.variants.step_variant: mode must be one of deterministic, exact, "
                                         "fast, got 'strict'"):
        variants.step_variant(4, 4, "float32", "strict")


def test_projection_tile_and_passes():
    assert variants.projection_tpt(variants.LARGE_PROJECTION - 1) == 4
    assert variants.projection_tpt(variants.LARGE_PROJECTION) == 8
    assert variants.projection_tile(8) == 128 and variants.projection_tile(4) == 64
    assert variants.step_passes("GRU", 3, 0) == [(1, 2), (2, 1)]
    assert variants.step_passes("GRU", 3, 1) == [(0, 3)]
    assert variants.step_passes("LSTM", 4, 0) == [(0, 4)]
    assert variants.grid_groups(64 * 70000) == variants.MAX_GROUPS
    assert variants.grid_groups(65, max_groups=2) == 2 and variants.grid_groups(1) == 1


# The measured table (src/core/rnn/variants.hpp, BATCHED_TILES; docs/perf.md "Kernel choices"):
# UPT x BY x PREFETCH x KSPLIT x ROWS.
F32 = (2, 1, 1, 8, 4)         # float32: 4 rows x 2 units (100x64x1024 11.47 ms, 2x2x1x8x2 11.80)
F32_H512 = (2, 2, 1, 8, 2)    # float32 at hidden 384-767 from batch 33: 2 rows x 2 units x 2 groups
                              # (200x48x512 5.12, 2x1x1x8x4 5.79)
F16 = (2, 1, 1, 8, 4)         # float16 everywhere (200x64x512 6.25, 2x2x1x8x2 7.32)


def _tile(v):
    return (v.upt, v.by, v.prefetch, v.ksplit, v.rows)


@pytest.mark.parametrize("hidden, batch, dtype, expected", [
    (512, 16, "float32", F32), (512, 32, "float32", F32), (512, 33, "float32", F32_H512),
    (512, 64, "float32", F32_H512), (512, 256, "float32", F32_H512),
    (383, 64, "float32", F32), (384, 64, "float32", F32_H512), (767, 64, "float32", F32_H512),
    (768, 64, "float32", F32), (1024, 64, "float32", F32), (1024, 128, "float32", F32),
    (256, 96, "float32", F32),
    (512, 16, "float16", F16), (512, 64, "float16", F16), (1024, 64, "float16", F16),
    (512, 256, "float16", F16),
])
def test_the_table_picks_what_the_h200_measured(hidden, batch, dtype, expected):
    # From batch 16 at hidden 384 up (v5's 4-row tile beat the lanes kernel at 200x16x512 by
    # 21 % in float32, 16 % in float16) and from 32 below, the batched kernel, with the measured
    # tile of its element type, hidden size and batch; at these sizes nothing is clamped, so
    # the tile is the table's as written.
    assert variants.BATCHED_FROM == variants.TABLE
    assert variants.default_batched_from() == [(0, 32), (384, 16)]
    assert variants.step_kernel(batch, hidden) == ("step_batched" if batch >= variants.batched_from(hidden)
                                                   else "step")
    v = variants.batched_variant(hidden, dtype, batch=batch)
    assert _tile(v) == expected and v.shader == "step_tiled" and v.units == 8
    # The Python view of the table says the same: the last matching row of the element type.
    rule = [r for r in variants.batched_tiles() if r.dtype == dtype and r.matches(hidden, batch)][-1]
    assert _tile(rule.tile) == expected


def test_the_table_and_its_limits():
    # The batched kernel from batch 16 at hidden 384 up, from 32 below (variants.hpp's
    # BATCHED_FROM: at hidden 128-256 step.comp won at batch 16 on the H200).
    assert variants.step_kernel(15, 384) == "step" and variants.step_kernel(16, 384) == "step_batched"
    assert variants.step_kernel(31, 383) == "step" and variants.step_kernel(32, 383) == "step_batched"
    assert variants.batched_from(1) == 32 and variants.batched_from(4096) == 16
    tiles = [(r.dtype, r.from_batch, r.from_hidden, r.below_hidden, _tile(r.tile))
             for r in variants.batched_tiles()]
    assert tiles == [("float32", 0, 0, None, F32), ("float32", 33, 384, 768, F32_H512),
                     ("float16", 0, 0, None, F16)]
    for t in (r.tile for r in variants.batched_tiles()):
        # Portable: within Vulkan's guaranteed 16 KiB of shared memory (the register tile's
        # parts meet in max(ksplit / 2, 1) slots of by x 32 threads x rows x upt x 4 floats;
        # both tiles use all of it) and 1024 invocations (32 x by x ksplit: 256 and 512).
        slots = max(t.ksplit // 2, 1)
        assert t.rows * t.upt * t.by * 32 * 4 * 4 * slots <= 16384
        assert 32 * t.by * t.ksplit <= 1024
    # Every field left to the table by default; the native settings' 0 means the table's.
    s = variants.settings()
    tunables = {k: getattr(s, k) for k in s.FIELDS if k.startswith(("batched_", "coopmat_", "sequence_"))}
    tables = ("batched_from", "coopmat_steps_from", "sequence_steps")
    assert len(tunables) == 15 and all(tunables[k] == 0xFFFFFFFF for k in tables)
    assert all(v == 0 for k, v in tunables.items() if k not in tables), tunables
    # A small layer: the table's tile clamped to it (one unit group: rows lanes along the units).
    assert _tile(variants.batched_variant(1, "float32", batch=16)) == (1, 1, 1, 8, 4)
    assert _tile(variants.batched_variant(1, "float32", batch=64)) == (1, 1, 1, 8, 4)
    assert _tile(variants.batched_variant(400, "float32", batch=64)) == (2, 2, 1, 8, 2)
    assert variants.batched_variant(7, "float16", batch=16).units == 8


def test_batched_kernel_choice_follows_the_tunables(monkeypatch):
    monkeypatch.setattr(variants, "BATCHED_FROM", 32)
    assert variants.step_kernel(31, 512) == "step" and variants.step_kernel(32, 512) == "step_batched"
    monkeypatch.setattr(variants, "BATCHED_FROM", None)
    assert variants.step_kernel(4096, 512) == "step"
    monkeypatch.setattr(variants, "BATCHED_FROM", 0)
    with pytest.raises(ValueError, match="BATCHED_FROM"):
        variants.settings()
    monkeypatch.setattr(variants, "BATCHED_FROM", variants.TABLE)
    # BATCHED_ROWS = 1 is v4 (glsl/step_batched.comp), the rest of the tile the table's.
    monkeypatch.setattr(variants, "BATCHED_ROWS", 1)
    v = variants.batched_variant(512, "float32", batch=64)
    assert _tile(v) == (2, 2, 1, 8, 1) and v.shader == "step_batched" and v.units == 4
    assert variants.batched_variant(1, "float32", batch=64).units == 1   # never more units than the layer has
    # By element type, None leaving a type to the table.
    monkeypatch.setattr(variants, "BATCHED_ROWS", {"float32": 1, "float16": None})
    assert variants.batched_variant(512, "float16", batch=64).shader == "step_tiled"
    monkeypatch.setattr(variants, "BATCHED_BY", {"float32": 3})
    assert _tile(variants.batched_variant(512, "float32", batch=16)) == (2, 3, 1, 8, 1)
    assert _tile(variants.batched_variant(512, "float16", batch=16)) == F16
    # v4's shipped tilings (until issue 22) set in full, as bench/step_kernels.py does.
    monkeypatch.setattr(variants, "BATCHED_UPT", {"float32": 1, "float16": 2})
    monkeypatch.setattr(variants, "BATCHED_BY", 2)
    monkeypatch.setattr(variants, "BATCHED_PREFETCH", 1)
    monkeypatch.setattr(variants, "BATCHED_KSPLIT", 8)
    monkeypatch.setattr(variants, "BATCHED_ROWS", 1)
    assert _tile(variants.batched_variant(512, "float32", batch=256)) == (1, 2, 1, 8, 1)
    assert _tile(variants.batched_variant(512, "float16", batch=16)) == (2, 2, 1, 8, 1)
    # More than one batch row a thread: the register tile (glsl/step_tiled.comp), rows x upt
    # units a unit group, its shared memory within 16 KiB (rows x upt x by x ksplit / 2 <= 32).
    monkeypatch.setattr(variants, "BATCHED_ROWS", {"float32": 4, "float16": 1})
    monkeypatch.setattr(variants, "BATCHED_UPT", 2)
    monkeypatch.setattr(variants, "BATCHED_BY", 4)
    v = variants.batched_variant(512, "float32", batch=64)
    assert (v.rows, v.upt, v.by, v.units, v.shader) == (4, 2, 1, 8, "step_tiled")
    assert variants.batched_variant(512, "float16", batch=64).shader == "step_batched"
    monkeypatch.setattr(variants, "BATCHED_KSPLIT", 2)
    assert variants.batched_variant(512, "float32", batch=64).by == 4
    monkeypatch.setattr(variants, "BATCHED_ROWS", 8)
    monkeypatch.setattr(variants, "BATCHED_KSPLIT", 8)
    v = variants.batched_variant(512, "float32", batch=64)
    assert (v.rows, v.upt, v.by, v.units) == (8, 1, 1, 8)
    assert variants.batched_variant(7, "float16", batch=64).units == 8   # one unit group (8 lanes) covers 7 units
    monkeypatch.setattr(variants, "BATCHED_ROWS", 3)
    with pytest.raises(ValueError, match="BATCHED_ROWS must be 1, 2, 4 or 8"):
        variants.batched_variant(64, batch=64)
    monkeypatch.setattr(variants, "BATCHED_ROWS", 1)
    monkeypatch.setattr(variants, "BATCHED_KSPLIT", 3)
    with pytest.raises(ValueError, match="BATCHED_KSPLIT must be 1, 2, 4 or 8"):
        variants.batched_variant(64, batch=64)
    monkeypatch.setattr(variants, "BATCHED_KSPLIT", None)
    monkeypatch.setattr(variants, "BATCHED_BY", {"float16": 0})
    with pytest.raises(ValueError, match="BATCHED_BY must be a positive integer"):
        variants.batched_variant(64, batch=64)


def test_the_settings_structs_are_bound_by_name_once():
    # LayerSettings and VariantSettings (src/python/bind_settings.cpp): each field bound by
    # name, listed once in FIELDS, which equality and repr follow; a copy is its own.
    from ortops import _vk

    s = _vk.LayerSettings()
    assert s.FIELDS == ("variants", "plan_cache", "storage_range", "workgroup_count", "max_concurrent",
                        "timestamps", "coopmat", "coalesce_rows", "coalesce_in_flight")
    assert set(_vk.VariantSettings.FIELDS) >= {"batched_from", "coopmat_blocks", "large_projection", "max_groups"}
    assert all(hasattr(s, f) for f in s.FIELDS) and all(hasattr(s.variants, f) for f in s.variants.FIELDS)
    copy = _vk.LayerSettings(s)
    assert copy == s and copy is not s
    copy.variants.batched_ksplit = 4           # a nested field, changed in place
    copy.workgroup_count = (8, 8, 8)
    assert copy != s and copy.variants.batched_ksplit == 4 and copy.workgroup_count == [8, 8, 8]
    assert "batched_ksplit=4" in repr(copy) and repr(copy).startswith("LayerSettings(variants=VariantSettings(")
    assert (s == 3) is False
    # ortops.variants fills the variant fields by these names: every one it sets is the table's
    # by default (tests above), and tunables() changes exactly when settings() does.
    before = variants.tunables()
    variants.BATCHED_KSPLIT = 2
    try:
        assert variants.tunables() != before and variants.settings().batched_ksplit == 2
    finally:
        variants.BATCHED_KSPLIT = None
    assert variants.tunables() == before
