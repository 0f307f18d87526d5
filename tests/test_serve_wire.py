"""ortops.serve without Ray or a device: which axis requests are stacked along, stacking and
splitting them back, grouping by the other dimensions, the JSON / .npz / .npy bodies and their
errors, and which device a replica takes (listed in tests/conftest.py NO_DEVICE)."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from onnx import TensorProto, helper

from ortops import _vk, serve
from ortops.serve import RequestError, Signature

from _scripts import load_script
from test_visible import FOUND, A, C

make_models = load_script("make_models")


def _recognizer():
    return make_models.recognizer(seq=6, inp=5, hidden=4, classes=3, seed=1)


def test_batch_axis_of_the_recognizer_and_the_gru():
    axes = serve.batch_axes(_recognizer())
    assert (axes.name, axes.inputs, axes.outputs) == ("batch", {"X": 1}, {"logits": 1})
    gru = serve.batch_axes(make_models.gru(seq=3, inp=2, hidden=2))
    assert gru.inputs == {"X": 1} and gru.outputs == {"Y": 2, "Y_h": 1}


def test_no_shared_symbolic_dimension_means_no_batching():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, "m"])
    model = helper.make_model(helper.make_graph([helper.make_node("Transpose", ["X"], ["Y"])], "t", [x], [y]))
    assert serve.batch_axes(model) is None
    fixed = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["X"], ["Y"])], "r",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])]))
    assert serve.batch_axes(fixed) is None


def test_stack_then_split_gives_each_request_its_rows():
    axes = serve.batch_axes(_recognizer())
    rng = np.random.default_rng(0)
    feeds = [{"X": rng.standard_normal((6, n, 5)).astype(np.float32)} for n in (1, 3, 2)]
    stacked, sizes = serve.stack(feeds, axes)
    assert sizes == [1, 3, 2] and stacked["X"].shape == (6, 6, 5)
    # Outputs that carry the input rows (as a model would) come back to the right request.
    parts = serve.split({"logits": stacked["X"][:, :, :3] * 2}, axes, sizes)
    for f, p in zip(feeds, parts):
        assert np.array_equal(p["logits"], f["X"][:, :, :3] * 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_, np.complex64])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_native_row_copies_equal_numpys(dtype, axis):
    # _vk.stack_rows / split_rows (src/python/bind_rows.cpp): np.concatenate's and np.take's
    # results, for every axis, element type and row count (0 rows included).
    rng = np.random.default_rng(axis)
    rows = [1, 3, 0, 2]
    shape = [4, 3, 5]
    parts = []
    for n in rows:
        shape[axis] = n
        parts.append((rng.standard_normal(shape) * 10).astype(dtype))
    whole = _vk.stack_rows(parts, axis)
    assert whole.dtype == np.dtype(dtype) and whole.flags.c_contiguous
    assert np.array_equal(whole, np.concatenate(parts, axis=axis))
    back = _vk.split_rows(whole, axis, rows)
    assert [b.shape for b in back] == [p.shape for p in parts]
    assert all(b.dtype == np.dtype(dtype) and np.array_equal(b, p) for b, p in zip(back, parts))


def test_native_row_copies_of_large_tensors_release_the_gil_and_stay_equal():
    # 8 requests of 1 MiB: the stacked copy is past the size where the GIL is let go.
    rng = np.random.default_rng(1)
    parts = [rng.standard_normal((64, 1, 4096)).astype(np.float32) for _ in range(8)]
    whole = _vk.stack_rows(parts, 1)
    assert np.array_equal(whole, np.concatenate(parts, axis=1))
    assert all(np.array_equal(b, p) for b, p in zip(_vk.split_rows(whole, 1, [1] * 8), parts))


def test_native_row_copies_refuse_what_they_cannot_copy():
    a = np.zeros((2, 1, 3), np.float32)
    with pytest.raises(ValueError, match=r"match but along axis 1: float32 \[2, 1, 3\] against float32 \[2, 1, 4\]"):
        _vk.stack_rows([a, np.zeros((2, 1, 4), np.float32)], 1)
    with pytest.raises(ValueError, match=r"float32 \[2, 1, 3\] against float64"):
        _vk.stack_rows([a, np.zeros((2, 1, 3))], 1)
    with pytest.raises(ValueError, match="batch axis 3 is outside its shape"):
        _vk.stack_rows([a], 3)
    with pytest.raises(ValueError, match="C-contiguous"):
        _vk.stack_rows([np.zeros((3, 1, 2), np.float32).T], 1)
    with pytest.raises(ValueError, match="must hold numbers, got object"):
        _vk.split_rows(np.array([["a"]], dtype=object), 0, [1])
    with pytest.raises(ValueError, match=r"rows add up to 3, the stacked output \[2, 2, 3\] has 2 along axis 1"):
        _vk.split_rows(np.zeros((2, 2, 3), np.float32), 1, [1, 2])


def test_stack_and_split_take_views_and_strings_through_numpy():
    # What the native copies refuse (a non-contiguous output, strings) still stacks and splits.
    axes = serve.BatchAxes("batch", {"X": 0}, {"Y": 0, "S": 0})
    feeds = [{"X": np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::2]}, {"X": np.ones((1, 2), np.float32)}]
    stacked, sizes = serve.stack(feeds, axes)
    assert sizes == [2, 1] and np.array_equal(stacked["X"], np.concatenate([f["X"] for f in feeds]))
    out = {"Y": np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2], "S": np.array(["a", "b", "c"], dtype=object)}
    parts = serve.split(out, axes, sizes)
    assert np.array_equal(parts[0]["Y"], out["Y"][:2]) and np.array_equal(parts[1]["Y"], out["Y"][2:])
    assert list(parts[0]["S"]) == ["a", "b"] and list(parts[1]["S"]) == ["c"]


def test_session_options_set_the_intra_op_threads_or_keep_onnxruntimes():
    assert serve.session_options(None) is None and serve.session_options(0) is None
    assert serve.session_options(1).intra_op_num_threads == 1


def test_requests_of_other_shapes_or_types_are_not_stacked_together():
    axes = serve.BatchAxes("batch", {"X": 1}, {"Y": 1})
    f = [{"X": np.zeros((6, 1, 5), np.float32)}, {"X": np.zeros((7, 2, 5), np.float32)},
         {"X": np.zeros((6, 4, 5), np.float32)}, {"X": np.zeros((6, 1, 5), np.float16)}]
    assert serve.groups(f, axes) == [[0, 2], [1], [3]]


def test_json_npz_and_npy_bodies():
    sig = Signature.of(_recognizer())
    x = np.random.default_rng(1).uniform(-1, 1, (6, 2, 5)).astype(np.float32)
    feed = serve.decode_request(json.dumps({"inputs": {"X": x.tolist()}}).encode(), "application/json", sig)
    assert feed["X"].dtype == np.float32 and np.array_equal(feed["X"], x)     # exact through JSON
    buf = io.BytesIO()
    np.savez(buf, X=x)
    assert np.array_equal(serve.decode_request(buf.getvalue(), "application/x-npz", sig)["X"], x)
    buf = io.BytesIO()
    np.save(buf, x)
    assert np.array_equal(serve.decode_request(buf.getvalue(), "application/x-npy", sig)["X"], x)
    body, kind = serve.encode_response({"logits": x}, "application/json; charset=utf-8")
    assert kind == "application/json" and np.array_equal(np.asarray(json.loads(body)["outputs"]["logits"], np.float32), x)
    body, kind = serve.encode_response({"logits": x}, "application/x-npz")
    with np.load(io.BytesIO(body)) as z:
        assert kind == "application/x-npz" and np.array_equal(z["logits"], x)


@pytest.mark.parametrize("body, kind, message", [
    (b'{"inputs": {"X": [[[1.0, 2.0, 3.0]]]}}', "application/json", r"input 'X': expected shape \[6, batch, 5\], got \[1, 1, 3\]"),
    (b'{"inputs": {"Y": [1.0]}}', "application/json", r"inputs: expected \['X'\], got \['Y'\]"),
    (b'{"X": [1.0]}', "application/json", 'a JSON body must be {"inputs"'),
    (b"not json", "application/json", "could not read the request body as application/json"),
    (b"not npz", "application/x-npz", "could not read the request body as application/x-npz"),
    (b'{"inputs": {"X": "text"}}', "application/json", "could not read the request body"),
])
def test_bad_bodies_are_request_errors(body, kind, message):
    with pytest.raises(RequestError, match=message):
        serve.decode_request(body, kind, Signature.of(_recognizer()))


def test_feed_types_are_checked():
    sig = Signature.of(_recognizer())
    with pytest.raises(RequestError, match="input 'X': expected element type float32, got <U1"):
        serve.check_feed({"X": np.full((6, 1, 5), "a")}, sig)
    assert serve.check_feed({"X": np.zeros((6, 1, 5), np.float64)}, sig)["X"].dtype == np.float32
    lens = helper.make_tensor_value_info("L", TensorProto.INT32, ["batch"])
    model = helper.make_model(helper.make_graph([helper.make_node("Identity", ["L"], ["O"])], "i", [lens],
                                                [helper.make_tensor_value_info("O", TensorProto.INT32, ["batch"])]))
    with pytest.raises(RequestError, match="input 'L': expected element type int32, got float64"):
        serve.check_feed({"L": np.array([1.5])}, Signature.of(model))


def test_npy_body_needs_a_one_input_model():
    two = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["A", "B"], ["C"])], "add",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch"]) for n in "AB"],
        [helper.make_tensor_value_info("C", TensorProto.FLOAT, ["batch"])]))
    buf = io.BytesIO()
    np.save(buf, np.zeros(2, np.float32))
    with pytest.raises(RequestError, match=r"an .npy body carries one input; this model has \['A', 'B'\]"):
        serve.decode_request(buf.getvalue(), "application/x-npy", Signature.of(two))


def test_replica_device_takes_the_given_one_else_the_assigned_gpu(monkeypatch):
    from ortops import device as device_mod

    monkeypatch.setattr(device_mod, "_devices_cache", list(FOUND))
    assert serve.replica_device("cpu", env={"CUDA_VISIBLE_DEVICES": "2"}) == "cpu"
    assert serve.replica_device(None, env={"CUDA_VISIBLE_DEVICES": "2"}) is C     # Ray gave it GPU 2
    assert serve.replica_device(None, env={"CUDA_VISIBLE_DEVICES": f"GPU-{A.uuid}"}) is A
    assert serve.replica_device(None, env={"CUDA_VISIBLE_DEVICES": ""}) is None    # no GPU: choose as usual
    assert serve.replica_device(None, env={}) is None


# ---------------------------------------------------------------- the replica's batcher


class _Runs:
    """A fake run_many that records each batch and, when gated, holds the run until released."""

    def __init__(self, gated=False):
        import threading

        self.batches, self.started = [], threading.Event()
        self.gate = threading.Event()
        if not gated:
            self.gate.set()

    def __call__(self, feeds):
        self.batches.append(list(feeds))
        self.started.set()
        assert self.gate.wait(10)
        if any(f == "bad" for f in feeds):
            raise ValueError("a bad feed")
        return [f"out {f}" for f in feeds]


def _run(coro):
    import asyncio

    return asyncio.run(asyncio.wait_for(coro, 30))


def test_a_lone_request_runs_at_once_not_after_the_batch_wait():
    """serve.batch held every first request for batch_wait_timeout_s, a lone one included; the
    Batcher's default (0) runs it at once, and a wait is only what is asked for."""
    import asyncio
    import inspect
    import time

    async def one(**kw):
        runs = _Runs()
        b = serve.Batcher(runs, max_batch_size=8, **kw)
        t0 = time.perf_counter()
        result, timings = await b.submit("a")
        return result, timings, time.perf_counter() - t0, runs.batches

    result, timings, took, batches = _run(one())
    assert result == "out a" and batches == [["a"]] and set(timings) == {"queue", "run"}
    assert took < 0.5 and timings["queue"] < 0.5      # not held (a wait of 2 s would show)
    _, timings, took, _ = _run(one(batch_wait_timeout_s=2.0))
    assert took >= 1.9 and timings["queue"] >= 1.9     # held only when asked to
    assert inspect.signature(serve.app).parameters["batch_wait_timeout_s"].default == 0.0
    assert asyncio.iscoroutinefunction(serve.Batcher.submit)


def test_requests_arriving_during_a_run_form_the_next_batch_up_to_its_size():
    import asyncio

    async def go():
        runs = _Runs(gated=True)
        b = serve.Batcher(runs, max_batch_size=4)
        first = asyncio.ensure_future(b.submit(0))
        await asyncio.to_thread(runs.started.wait, 10)      # 0 runs alone, straight away
        rest = [asyncio.ensure_future(b.submit(i)) for i in range(1, 7)]
        await asyncio.sleep(0.05)
        assert runs.batches == [[0]]                        # one run at a time
        runs.gate.set()
        answers = await asyncio.gather(first, *rest)
        return runs.batches, answers

    batches, answers = _run(go())
    assert batches == [[0], [1, 2, 3, 4], [5, 6]]
    assert [a[0] for a in answers] == [f"out {i}" for i in range(7)]


def test_a_failed_run_fails_its_batch_and_a_cancelled_request_is_not_run():
    import asyncio

    async def go():
        runs = _Runs(gated=True)
        b = serve.Batcher(runs, max_batch_size=8)
        first = asyncio.ensure_future(b.submit("x"))
        await asyncio.to_thread(runs.started.wait, 10)
        gone = asyncio.ensure_future(b.submit("gone"))
        bad = [asyncio.ensure_future(b.submit(f)) for f in ("y", "bad")]
        await asyncio.sleep(0.01)
        gone.cancel()
        runs.gate.set()
        assert (await first)[0] == "out x"
        for f in bad:
            with pytest.raises(ValueError, match="a bad feed"):
                await f
        assert (await b.submit("z"))[0] == "out z"          # the batcher goes on after a failure
        return runs.batches

    assert _run(go()) == [["x"], ["y", "bad"], ["z"]]


def test_concurrent_runs_run_batches_side_by_side():
    import asyncio
    import threading

    both = threading.Barrier(2, timeout=10)

    def run_many(feeds):
        both.wait()                  # returns only when two runs are in flight at once
        return feeds

    async def go():
        b = serve.Batcher(run_many, max_batch_size=1, concurrent_runs=2)
        return [r for r, _ in await asyncio.gather(b.submit(1), b.submit(2))]

    assert _run(go()) == [1, 2]
    with pytest.raises(ValueError):
        serve.Batcher(run_many, max_batch_size=0)
