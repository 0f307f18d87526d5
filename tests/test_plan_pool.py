"""ortops.plan's key and pool, and ortops.variants' choices: pure Python, no device."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from ortops import variants
from ortops.plan import PlanCache, PlanKey, region_key


def _key(seq, **kw):
    fields = dict(seq=seq, batch=1, steps=seq, has_lens=False, has_h0=False, has_c0=False,
                  outputs=("Y", "Y_h"), xw_region=None, state_region=None)
    fields.update(kw)
    return PlanKey(**fields)


def test_plan_key_is_frozen_and_hashable():
    key = _key(3)
    assert key == _key(3) and hash(key) == hash(_key(3)) and key != _key(3, has_lens=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.seq = 4
    arena = object()
    assert region_key(None) is None and region_key((arena, 8)) == (id(arena), 8)


def test_a_run_owns_its_plan_up_to_the_limit():
    cache = PlanCache(capacity=2)
    key = _key(3)
    pool, plan = cache.acquire(key, 2)
    assert plan is None and pool.count == 1          # the caller builds the first plan
    pool2, plan2 = cache.acquire(key, 2)
    assert pool2 is pool and plan2 is None and pool.count == 2
    got = []
    waiter = threading.Thread(target=lambda: got.append(cache.acquire(key, 2)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not got               # both plans busy: the third run waits
    cache.release(key, pool, "plan A")
    waiter.join(5)
    assert got == [(pool, "plan A")]
    cache.release(key, pool, None)                     # building failed: its place is given back
    assert pool.count == 1 and pool.free == []


def test_eviction_keeps_busy_and_acquired_keys():
    cache = PlanCache(capacity=2)
    held = [(k, *cache.acquire(k, 1)) for k in (_key(1), _key(2), _key(3))]
    assert len(cache.pools) == 3                       # every key busy: the cache may exceed
    for key, pool, _ in held:
        cache.release(key, pool, f"plan {key.seq}")
    assert list(cache.pools) == [_key(2), _key(3)]     # idle least recently used dropped
    pool, plan = cache.acquire(_key(2), 1)
    assert plan == "plan 2"
    cache.acquire(_key(4), 1)                          # key 3 idle: dropped; key 2 busy: kept
    assert list(cache.pools) == [_key(2), _key(4)]


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
