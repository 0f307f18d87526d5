"""ortops.variants' choices, the native core's heuristics (src/core/variants.hpp): no device.
The plan pool itself (a run owns its plan, the cache keeps busy keys) is tested through
layers in tests/test_concurrency.py and tests/test_layer_api.py."""

from __future__ import annotations

import pytest

from ortops import variants


@pytest.mark.parametrize("batch, gates, expected", [
    (1, 4, (1, 2, 1, 8)),     # latency-bound LSTM: one R row per thread, 2 units
    (8, 3, (8, 2, 1, 6)),
    (5, 1, (5, 8, 1, 8)),
    (9, 4, (8, 4, 4, 16)),    # throughput-bound: a unit's gates per thread, 4 units
    (64, 2, (8, 4, 2, 8)),
])
def test_step_variants(batch, gates, expected):
    v = variants.step_variant(batch, gates)
    assert (v.nb, v.units, v.rpt, v.rows) == expected and v.ty * v.rpt == v.rows


def test_projection_tile_and_passes():
    assert variants.projection_tpt(variants.LARGE_PROJECTION - 1) == 4
    assert variants.projection_tpt(variants.LARGE_PROJECTION) == 8
    assert variants.projection_tile(8) == 128 and variants.projection_tile(4) == 64
    assert variants.step_passes("GRU", 3, 0) == [(1, 2), (2, 1)]
    assert variants.step_passes("GRU", 3, 1) == [(0, 3)]
    assert variants.step_passes("LSTM", 4, 0) == [(0, 4)]
    assert variants.grid_groups(64 * 70000) == variants.MAX_GROUPS
    assert variants.grid_groups(65, max_groups=2) == 2 and variants.grid_groups(1) == 1


def test_batched_kernel_choice_follows_the_tunables(monkeypatch):
    assert variants.step_kernel(31) == "step" and variants.step_kernel(32) == "step_batched"
    monkeypatch.setattr(variants, "BATCHED_FROM", None)
    assert variants.step_kernel(4096) == "step"
    v = variants.batched_variant(512, "float16")
    assert (v.upt, v.by, v.ksplit, v.units) == (2, 2, 8, 4)
    assert variants.batched_variant(1, "float32").units == 1   # never more units than the layer has
    assert v.rows == 1 and v.shader == "step_batched"          # v5 is not a default yet
    # More than one batch row a thread: the register tile (glsl/step_tiled.comp), rows x upt
    # units a unit group, its shared memory within 16 KiB (rows x upt x by x ksplit / 2 <= 32).
    monkeypatch.setattr(variants, "BATCHED_ROWS", {"float32": 4, "float16": 1})
    monkeypatch.setattr(variants, "BATCHED_UPT", 2)
    monkeypatch.setattr(variants, "BATCHED_BY", 4)
    v = variants.batched_variant(512, "float32")
    assert (v.rows, v.upt, v.by, v.units, v.shader) == (4, 2, 1, 8, "step_tiled")
    assert variants.batched_variant(512, "float16").shader == "step_batched"
    monkeypatch.setattr(variants, "BATCHED_KSPLIT", 2)
    assert variants.batched_variant(512, "float32").by == 4
    monkeypatch.setattr(variants, "BATCHED_ROWS", 8)
    monkeypatch.setattr(variants, "BATCHED_KSPLIT", 8)
    v = variants.batched_variant(512, "float32")
    assert (v.rows, v.upt, v.by, v.units) == (8, 1, 1, 8)
    assert variants.batched_variant(7, "float16").units == 8   # one unit group (8 lanes) covers 7 units
    monkeypatch.setattr(variants, "BATCHED_ROWS", 3)
    with pytest.raises(ValueError, match="BATCHED_ROWS must be 1, 2, 4 or 8, got 3"):
        variants.batched_variant(64)
    monkeypatch.setattr(variants, "BATCHED_ROWS", 1)
    monkeypatch.setattr(variants, "BATCHED_KSPLIT", 3)
    with pytest.raises(ValueError, match="BATCHED_KSPLIT must be 1, 2, 4 or 8, got 3"):
        variants.batched_variant(64)
