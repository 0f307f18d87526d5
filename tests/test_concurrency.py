"""The concurrency contract (docs/onnxruntime.md, "Threads"): many threads on one session, on
separate sessions and on layers give the serial results bit for bit, each failing run raises
its own error, and a lost device surfaces as an exception while the process lives on.

Under ``--vk-validation`` (CI, scripts/gpu_machine.sh) the Khronos layer's thread-safety checks
run too: two threads submitting to one VkQueue without a lock is reported there
(UNASSIGNED-Threading-MultipleThreads) and fails the test through conftest.py. Lavapipe runs
one dispatch at a time and never races; the same tests on a real GPU (scripts/gpu_machine.sh)
are the ones that can show a reused buffer.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest

import ortops
from ortops.ort import customop
from ortops.device import context, device_lost_error

from _cases import same_bits
from _scripts import load_script

pytestmark = pytest.mark.gpu

THREADS = 8
RUNS = 6      # per thread


def _recognizer():
    """Two stacked bidirectional LSTMs and a head (the sample recognizer, small sizes)."""
    return load_script("make_models").recognizer(seq=7, inp=6, hidden=5, classes=4, seed=3)


def _lens_case():
    return load_script("ci/conformance").node_case(
        "lens", "LSTM", direction="bidirectional", seq=4, batch=3, inp=3, hidden=4, bias=True,
        lens="full", rng=np.random.default_rng(12))


def _feeds(n, seed=0, batch=2):
    rng = np.random.default_rng(seed)
    return [{"X": rng.uniform(-1, 1, (7, batch, 6)).astype(np.float32)} for _ in range(n)]


def _hammer(work, jobs, threads=THREADS):
    """Run ``work(job)`` for every job from ``threads`` threads that start together; results
    (or the exception raised) in job order."""
    start = threading.Barrier(threads)

    def wrapped(chunk):
        start.wait()
        out = []
        for job in chunk:
            try:
                out.append((job, work(job), None))
            except Exception as e:  # noqa: BLE001 - compared by the caller
                out.append((job, None, e))
        return out

    chunks = [jobs[t::threads] for t in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        done = [r for f in [pool.submit(wrapped, c) for c in chunks] for r in f.result()]
    done.sort(key=lambda r: r[0])
    return [(r[1], r[2]) for r in done]


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
@pytest.mark.parametrize("batch", [2, 33])
def test_one_session_many_threads_equals_serial(mode, batch):
    # Batch 33: two lane groups of the batched step kernel (ortops.variants.BATCHED_FROM), whose
    # R layout a layer uploads on its first plan of such a batch. The threads run on a session
    # of their own, so that its first plans (and that upload) are built concurrently too.
    so = ort.SessionOptions()
    if mode == "parallel":
        # ORT's parallel executor runs the custom nodes on its own pool threads.
        so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        so.inter_op_num_threads = 4
    model = _recognizer()
    feeds = _feeds(THREADS * RUNS, seed=1, batch=batch)
    sess = ortops.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    serial = [sess.run(None, f) for f in feeds]
    sess = ortops.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    got = _hammer(lambda i: sess.run(None, feeds[i]), list(range(len(feeds))))
    for i, (out, err) in enumerate(got):
        assert err is None, f"run {i}: {err!r}"
        assert same_bits(out, serial[i]), f"run {i} differs from its serial result"


def test_separate_sessions_in_threads_equal_serial():
    model = _recognizer()
    feeds = _feeds(THREADS * 2, seed=2)
    serial = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    want = [serial.run(None, f) for f in feeds]

    def work(i):
        sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
        return [sess.run(None, feeds[j]) for j in (i, (i + 1) % len(feeds))]

    for i, (out, err) in enumerate(_hammer(work, list(range(len(feeds))))):
        assert err is None, f"thread job {i}: {err!r}"
        assert same_bits(out[0], want[i]) and same_bits(out[1], want[(i + 1) % len(feeds)])


def test_mixed_good_and_bad_runs_each_raise_their_own_error():
    case = _lens_case()
    sess = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(4)
    jobs = []
    for i in range(THREADS * RUNS):
        feed = dict(case.feeds, X=rng.uniform(-1, 1, case.feeds["X"].shape).astype(np.float32))
        if i % 5 == 0:
            # Out of range, in a row and with a value that only this run uses.
            lens = np.array(case.feeds["sequence_lens"], np.int32)
            row = i % 3
            lens[row] = 5 + i
            feed["sequence_lens"] = lens
            jobs.append((feed, (row, 5 + i)))
        else:
            jobs.append((feed, None))
    serial = [sess.run(None, f) if bad is None else None for f, bad in jobs]
    got = _hammer(lambda i: sess.run(None, jobs[i][0]), list(range(len(jobs))))
    for i, ((out, err), (_, bad)) in enumerate(zip(got, jobs)):
        if bad is None:
            assert err is None, f"good run {i} raised {err!r}"
            assert same_bits(out, serial[i]), f"good run {i} differs from its serial result"
        else:
            row, value = bad
            assert isinstance(err, customop.NodeRunError), f"bad run {i} gave {err!r}"
            assert f"sequence_lens[{row}] = {value} " in str(err), f"bad run {i} got another run's error: {err}"


def test_one_layer_and_separate_layers_in_threads_equal_serial():
    rng = np.random.default_rng(5)
    D, H, I = 2, 6, 5
    W = rng.uniform(-0.5, 0.5, (D, 3 * H, I)).astype(np.float32)
    R = rng.uniform(-0.5, 0.5, (D, 3 * H, H)).astype(np.float32)
    B = rng.uniform(-0.5, 0.5, (D, 6 * H)).astype(np.float32)
    args = dict(direction="bidirectional", linear_before_reset=0)
    shared = ortops.RecurrentLayer("GRU", W, R, B, **args)
    # Two shapes interleaved, so that plans of different keys are in flight together.
    xs = [rng.uniform(-1, 1, (5, 1 + i % 2, I)).astype(np.float32) for i in range(THREADS * RUNS)]
    want = [shared(x) for x in xs]
    got = _hammer(lambda i: shared(xs[i]), list(range(len(xs))))
    for i, (out, err) in enumerate(got):
        assert err is None and same_bits(out, want[i]), f"shared layer, run {i}: {err!r}"
    own = threading.local()

    def separate(i):
        if not hasattr(own, "layer"):
            own.layer = ortops.RecurrentLayer("GRU", W, R, B, **args)
        return own.layer(xs[i])

    for i, (out, err) in enumerate(_hammer(separate, list(range(len(xs))))):
        assert err is None and same_bits(out, want[i]), f"separate layers, run {i}: {err!r}"


def test_concurrent_runs_of_one_shape_use_their_own_plans():
    rng = np.random.default_rng(6)
    W = rng.uniform(-0.5, 0.5, (1, 4, 3)).astype(np.float32)
    R = rng.uniform(-0.5, 0.5, (1, 4, 4)).astype(np.float32)
    # Coalescing off: runs that are not coalesced (tests/test_coalesce.py) use the plan pool.
    layer = ortops.RecurrentLayer("RNN", W, R, max_concurrent=3, coalesce_rows=1)
    xs = [rng.uniform(-1, 1, (3, 2, 3)).astype(np.float32) for _ in range(24)]
    want = [layer(x) for x in xs]
    assert [p.count for p in layer._plans.values()] == [1]
    got = _hammer(lambda i: layer(xs[i]), list(range(len(xs))), threads=6)
    assert all(err is None and same_bits(out, want[i]) for i, (out, err) in enumerate(got))
    (pool,) = layer._plans.values()
    assert 1 <= pool.count <= 3 and len(pool.free) == pool.count   # bounded, all returned
    with pytest.raises(ValueError, match="max_concurrent must be a positive integer, got 0"):
        ortops.RecurrentLayer("RNN", W, R, max_concurrent=0)
    with pytest.raises(ValueError, match="coalesce_rows must be a positive integer, got 0"):
        ortops.RecurrentLayer("RNN", W, R, coalesce_rows=0)


def test_lost_device_raises_on_its_runs_and_a_new_session_recovers():
    model = _recognizer()
    feeds = _feeds(1, seed=7)[0]
    want = ortops.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    _, ctx = context()
    ctx.simulate_loss()
    lost = device_lost_error()
    assert issubclass(lost, RuntimeError) and ortops.DeviceLostError is lost
    for _ in range(2):   # every later run on the old context raises, none crashes
        with pytest.raises(customop.NodeRunError, match="device is lost|device was lost") as info:
            sess.run(None, feeds)
        assert isinstance(info.value, lost)   # a NodeRunError that is a DeviceLostError too
    fresh = ortops.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert same_bits(fresh.run(None, feeds), want)


@pytest.mark.parametrize("value, expected", [("", 1), ("3", 3), ("0", None), ("many", None)])
def test_queue_count_setting(monkeypatch, value, expected):
    from ortops.device import max_queues

    monkeypatch.setenv("ORTOPS_QUEUES", value)
    if expected is None:
        with pytest.raises(ValueError, match=f"ORTOPS_QUEUES must be a positive integer, got '{value}'"):
            max_queues()
    else:
        assert max_queues() == expected


def test_more_shapes_in_flight_than_the_plan_cache_holds():
    """Runs of more shapes at once than a layer caches plans for: the cache may exceed its
    size while every other shape is busy, and drops idle shapes later (not the one a run is
    acquiring)."""
    from ortops.layer import _PLAN_CACHE

    rng = np.random.default_rng(8)
    W = rng.uniform(-0.5, 0.5, (1, 4, 3)).astype(np.float32)
    R = rng.uniform(-0.5, 0.5, (1, 4, 4)).astype(np.float32)
    layer = ortops.RecurrentLayer("RNN", W, R)
    shapes = _PLAN_CACHE + 4
    xs = [rng.uniform(-1, 1, (2 + i, 1, 3)).astype(np.float32) for i in range(shapes)]
    want = [ortops.RecurrentLayer("RNN", W, R)(x) for x in xs]
    got = _hammer(lambda i: layer(xs[i % shapes]), list(range(3 * shapes)), threads=shapes)
    assert all(err is None and same_bits(out, want[i % shapes]) for i, (out, err) in enumerate(got))
    layer(xs[0])
    assert len(layer._plans) <= _PLAN_CACHE
