"""Concurrent runs coalesced into one batched run (src/core/rnn/coalesce.hpp).

A request carried in a coalesced run must get exactly the bits it gets alone: every batch row
is computed by the same operations in the same order whatever the batch, across the step
variants the batch picks (latency-bound rows from batch 1, throughput-bound from 9, the
batched kernel from 16, its float32 tile changing at 64). ``Layer.run_coalesced`` runs requests as one batch the way the
coalescer does (inputs concatenated along the batch axis, outputs split back), so the bits are
checked deterministically here; the threaded tests then check that coalescing really happens
under load and that every threaded result equals the serial one.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import ortops
from ortops import variants
from ortops.device import _native

from _cases import same_bits, seed_of

pytestmark = pytest.mark.gpu

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _layer(op, dtype, layout, mode=None, *, inp=5, hidden=7, direction="bidirectional", peepholes=True,
           **kw):
    rng = np.random.default_rng(seed_of(op, dtype, layout, mode))
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    W = rng.uniform(-0.5, 0.5, (dirs, g * hidden, inp)).astype(dtype)
    R = rng.uniform(-0.5, 0.5, (dirs, g * hidden, hidden)).astype(dtype)
    B = rng.uniform(-0.5, 0.5, (dirs, 2 * g * hidden)).astype(dtype)
    P = rng.uniform(-0.5, 0.5, (dirs, 3 * hidden)).astype(dtype) if op == "LSTM" and peepholes else None
    return ortops.RecurrentLayer(op, W, R, B, P, hidden_size=hidden, direction=direction, layout=layout,
                                 mode=mode, **kw)


def _request(layer, seq, batch, rng, *, lens=True, states=True):
    s = layer.spec
    dt = s.dtype
    x_shape = (seq, batch, s.input_size) if s.layout == 0 else (batch, seq, s.input_size)
    st_shape = ((s.num_directions, batch, s.hidden_size) if s.layout == 0
                else (batch, s.num_directions, s.hidden_size))
    X = rng.uniform(-1, 1, x_shape).astype(dt)
    L = rng.integers(0, seq + 1, batch).astype(np.int32) if lens else None
    h0 = rng.uniform(-1, 1, st_shape).astype(dt) if states else None
    c0 = rng.uniform(-1, 1, st_shape).astype(dt) if states and s.op == "LSTM" else None
    return (X, L, h0, c0)


def _alone(layer, req):
    return layer._native(*req)


def _check_coalesced_equals_alone(layer, batches, seq=4, pad_to=0, **kw):
    rng = np.random.default_rng(seed_of(layer.spec.op, tuple(batches), seq))
    reqs = [_request(layer, seq, b, rng, **kw) for b in batches]
    together = layer._native.run_coalesced(reqs, pad_to)
    assert len(together) == len(reqs)
    for r, (req, got) in enumerate(zip(reqs, together)):
        want = _alone(layer, req)
        for name, a, b in zip(("Y", "Y_h", "Y_c"), got, want):
            assert (a is None) == (b is None), (r, name)
            if a is not None:
                assert a.shape == b.shape and same_bits(a, b), (
                    f"{layer.spec.op} request {r} (batch {batches[r]}): {name} differs from its run alone")


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_coalesced_requests_get_their_own_bits(op, dtype, layout):
    layer = _layer(op, dtype, layout)
    # Totals 6 (latency-bound step variant; alone each is below it too), 12 (throughput-bound,
    # from batch 9) and 35 (the batched step kernel, from batch 16).
    for batches in ([1, 3, 2], [1, 1, 8, 2], [20, 1, 14]):
        _check_coalesced_equals_alone(layer, batches)
    # Padded with zero rows to the next power of two, as the coalescer runs them.
    _check_coalesced_equals_alone(layer, [1, 3, 2], pad_to=8)
    _check_coalesced_equals_alone(layer, [9, 1], pad_to=32)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_coalesced_requests_exact_mode(op):
    layer = _layer(op, np.float32, 0, mode="exact")
    _check_coalesced_equals_alone(layer, [1, 2, 30])


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_coalesced_requests_fast_mode_matrix_steps(op, monkeypatch):
    # Mode "fast", float16, the matrix-unit steps from batch 1 (glsl/step_coopmat.comp where
    # the device has the hardware, else the portable kernels): a batch row's sums do not
    # depend on the other rows or the number of batch blocks a workgroup.
    monkeypatch.setattr(variants, "COOPMAT_STEPS_FROM", 1)
    layer = _layer(op, np.float16, 0, mode="fast", hidden=20)
    layer._sync_settings()
    for batches in ([1, 3, 2], [20, 1, 14], [40, 30]):
        _check_coalesced_equals_alone(layer, batches)
    _check_coalesced_equals_alone(layer, [9, 1], pad_to=32)


def test_requests_below_the_matrix_steps_are_not_coalesced_into_them(monkeypatch):
    # From batch 4 mode "fast" steps on the matrix units (its own bits): batch-1 requests from
    # threads are coalesced only into runs of at most 3 rows, so each gets its serial bits.
    monkeypatch.setattr(variants, "COOPMAT_STEPS_FROM", 4)
    layer = _layer("LSTM", np.float16, 0, mode="fast", hidden=16, inp=8)
    layer._sync_settings()
    rng = np.random.default_rng(7)
    jobs = [_request(layer, 6, 1, rng) for _ in range(8)]
    serial = [_alone(layer, j) for j in jobs]
    got, _ = _run_threads(layer, jobs, _request(layer, 3000, 1, rng))
    for want, have in zip(serial, got):
        for a, b in zip(want, have):
            assert (a is None and b is None) or same_bits(a, b)


@pytest.mark.parametrize("lens, states", [(False, False), (True, False), (False, True)])
def test_coalesced_requests_without_optional_inputs(lens, states):
    layer = _layer("LSTM", np.float32, 0, direction="forward", peepholes=False)
    _check_coalesced_equals_alone(layer, [2, 1, 3], lens=lens, states=states)


@pytest.mark.parametrize("rows, max_rows, expected", [
    (2, 32, 2), (3, 32, 4), (5, 32, 8), (9, 32, 16), (17, 32, 32), (32, 32, 32),
    (20, 24, 24), (24, 24, 24), (3, 3, 3), (7, 1, 7),
])
def test_coalesced_runs_are_padded_to_a_power_of_two(rows, max_rows, expected):
    # At most one plan per power of two for coalesced runs; never past max_rows, never below
    # the requests' rows.
    assert _native().coalesced_rows(rows, max_rows) == expected


def test_requests_of_another_shape_are_refused():
    layer = _layer("GRU", np.float32, 0)
    rng = np.random.default_rng(1)
    a = _request(layer, 4, 2, rng)
    b = _request(layer, 5, 2, rng)
    with pytest.raises(ValueError, match="request 1 differs from request 0 in more than its batch size"):
        layer._native.run_coalesced([a, b])
    c = _request(layer, 4, 2, rng, lens=False)
    with pytest.raises(ValueError, match="request 1 differs"):
        layer._native.run_coalesced([a, c])


def test_coalescing_settings_are_checked():
    layer = _layer("RNN", np.float32, 0)
    settings = layer._native.settings
    assert settings.coalesce_rows >= 1
    settings.coalesce_rows = 0
    with pytest.raises(ValueError, match="coalesce_rows and coalesce_in_flight must be positive, got 0 and 1"):
        layer._native.settings = settings


def _counters():
    c = _native().core_counters()
    return c["coalesced_runs"], c["coalesced_requests"]


def _run_threads(layer, jobs, long_job=None):
    """Run every job (a request) from a thread of its own, all released together; after
    ``long_job`` (run first, alone) is in flight when
    given. Results in job order."""
    results = [None] * len(jobs)
    errors = []
    go = threading.Event()

    def work(i):
        go.wait()
        try:
            results[i] = _alone(layer, jobs[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    long_result = []
    if long_job is not None:
        first = threading.Thread(target=lambda: long_result.append(_alone(layer, long_job)))
        first.start()
        time.sleep(0.05)   # the long run is in flight: the jobs below must wait for it
    go.set()
    for t in threads:
        t.join()
    if long_job is not None:
        first.join()
    assert not errors, errors
    return results, long_result


def test_requests_waiting_behind_a_run_are_coalesced_with_serial_bits():
    layer = _layer("LSTM", np.float32, 0, hidden=16, inp=8)
    rng = np.random.default_rng(5)
    jobs = [_request(layer, 6, 1 + i % 3, rng) for i in range(6)]
    # A run long enough on any device that the six requests arrive while it is in flight
    # (lavapipe: about a second; the H200: tens of milliseconds, still longer than the
    # threads take to start).
    long_job = _request(layer, 3000, 1, rng)
    serial = [_alone(layer, j) for j in jobs]
    long_serial = _alone(layer, long_job)
    runs0, reqs0 = _counters()
    got, long_got = _run_threads(layer, jobs, long_job)
    runs1, reqs1 = _counters()
    assert runs1 > runs0 and reqs1 - reqs0 >= 2, "no request was coalesced"
    held = _native().core_counters()
    assert held["slot_runs"] >= 2 and held["slot_ns"] > 0 and held["wait_ns"] > 0
    for want, have in zip(serial + [long_serial], got + long_got):
        for a, b in zip(want, have):
            assert (a is None and b is None) or same_bits(a, b)


def test_coalescing_switched_off_runs_each_request_alone():
    layer = _layer("GRU", np.float32, 1, coalesce_rows=1)
    rng = np.random.default_rng(6)
    jobs = [_request(layer, 5, 1, rng) for _ in range(6)]
    serial = [_alone(layer, j) for j in jobs]
    before = _counters()
    got, _ = _run_threads(layer, jobs, _request(layer, 2000, 1, rng))
    assert _counters() == before
    for want, have in zip(serial, got):
        for a, b in zip(want, have):
            assert (a is None and b is None) or same_bits(a, b)
