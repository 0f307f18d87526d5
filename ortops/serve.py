"""Serving a model with ortops on Ray Serve (the optional extra ``ortops[serve]``).

Each replica loads the model into one :class:`ortops.InferenceSession` on one Vulkan device,
and answers HTTP requests::

    import ray, ortops.serve
    from ray import serve

    ray.init()
    serve.run(ortops.serve.app("models/recognizer.onnx", num_replicas=2), route_prefix="/recognizer")
    # POST http://127.0.0.1:8000/recognizer  {"inputs": {"X": [[[...]]]}}  ->  {"outputs": {"logits": ...}}

Pinning: where NVIDIA GPUs are seen, each replica asks Ray for one GPU (``num_gpus=1``). Ray
then sets ``CUDA_VISIBLE_DEVICES`` in the replica's process, which Vulkan ignores;
:func:`replica_device` maps it to the Vulkan device of that GPU (ortops.visible), so two
replicas on a two-GPU machine run on different GPUs. Without GPUs (lavapipe) replicas take
no GPU from Ray and choose as usual (``device=``, ``ORTOPS_DEVICE``, the default).

Batching: where every input and every output of the model has one symbolic dimension of the
same name (the recognizer's ``batch``: X ``[seq, batch, inp]`` -> logits ``[seq, batch,
classes]``), concurrent requests are stacked along it and run as one (:class:`Batcher`: a
batch is what queued while the previous run ran, so a lone request runs at once); each
request gets its own rows back. Requests whose other dimensions differ run in separate
stacks. Other models run request by request. The rows are copied natively holding the GIL,
and the session runs with one intra-op thread (:data:`INTRA_OP_THREADS`): beside the
replica's busy event loop, numpy's copies and ONNX Runtime's default pool each cost a batch
more than its run (docs/serving.md, "Where the H200 lost it").

Wire formats: a JSON body ``{"inputs": {name: nested lists}}`` (element types from the
model; floats written by ``json`` round-trip float32 exactly) answered with ``{"outputs":
{name: nested lists}}``; or an ``.npz`` body (``Content-Type: application/x-npz``, as
``numpy.savez`` writes) answered with one; or, for a one-input model, an ``.npy`` body
(``application/x-npy``) answered with an ``.npz``. A bad request (unknown or missing input,
wrong element type or dimension) is answered 400 with the reason; the response headers
name the replica (``x-ortops-replica``), its device (``x-ortops-device``), how many
rows ran together (``x-ortops-rows``) and where the replica's time went (``Server-Timing``:
decode, queue, run, back, encode, in ms).

The wire format, the batching and the pinning are plain functions here (tested without
Ray); :func:`app` builds the Ray Serve application.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

log = logging.getLogger("ortops")

__all__ = ["app", "replica_device", "BatchAxes", "batch_axes", "stack", "split", "Batcher",
           "decode_request", "encode_response", "RequestError"]


class RequestError(ValueError):
    """A request the model cannot run (answered 400)."""


# ---------------------------------------------------------------- the model's interface


@dataclass(frozen=True)
class Signature:
    """Inputs and outputs: names, numpy element types and dimensions (int or a name)."""

    inputs: dict
    outputs: dict
    dtypes: dict

    @classmethod
    def of(cls, model) -> "Signature":
        from onnx import helper

        g = model.graph
        initializers = {i.name for i in g.initializer}

        def dims(v):
            return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                         for d in v.type.tensor_type.shape.dim)

        ins = {v.name: dims(v) for v in g.input if v.name not in initializers}
        outs = {v.name: dims(v) for v in g.output}
        dtypes = {v.name: np.dtype(helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type))
                  for v in g.input if v.name in ins}
        return cls(ins, outs, dtypes)


@dataclass(frozen=True)
class BatchAxes:
    """Where the shared batch dimension is in each input and output."""

    name: str
    inputs: dict
    outputs: dict


def batch_axes(model) -> BatchAxes | None:
    """The dimension concurrent requests can be stacked along: a symbolic dimension that every
    input and every output has exactly once (``batch``, ``N`` or ``batch_size`` first if
    several qualify); None if there is none (requests then run one by one)."""
    sig = Signature.of(model)
    tensors = list(sig.inputs.values()) + list(sig.outputs.values())
    if not sig.inputs or not sig.outputs:
        return None
    names = [n for n in dict.fromkeys(d for d in tensors[0] if isinstance(d, str))
             if all(t.count(n) == 1 for t in tensors)]
    if not names:
        return None
    name = next((n for n in ("batch", "N", "batch_size") if n in names), names[0])
    return BatchAxes(name, {k: v.index(name) for k, v in sig.inputs.items()},
                     {k: v.index(name) for k, v in sig.outputs.items()})


def check_feed(feed: dict, sig: Signature) -> dict:
    """``feed`` as arrays of the model's element types; RequestError naming what is wrong."""
    missing = sorted(set(sig.inputs) - set(feed))
    unknown = sorted(set(feed) - set(sig.inputs))
    if missing or unknown:
        raise RequestError(f"inputs: expected {sorted(sig.inputs)}, got {sorted(feed)}")
    out = {}
    for name, value in feed.items():
        want = sig.dtypes[name]
        arr = np.asarray(value)
        if arr.dtype != want:
            if arr.dtype.kind not in "iuf" or (want.kind in "iu" and arr.dtype.kind == "f"):
                raise RequestError(f"input {name!r}: expected element type {want}, got {arr.dtype}")
            arr = arr.astype(want)
        dims = sig.inputs[name]
        if arr.ndim != len(dims) or any(isinstance(d, int) and d > 0 and d != s for d, s in zip(dims, arr.shape)):
            shown = "[" + ", ".join(str(d) for d in dims) + "]"
            raise RequestError(f"input {name!r}: expected shape {shown}, got {list(arr.shape)}")
        out[name] = np.ascontiguousarray(arr)
    return out


# ---------------------------------------------------------------- stacking requests


def _stack_key(feed: dict, axes: BatchAxes) -> tuple:
    """Requests with equal keys can be stacked (same element types, same other dimensions)."""
    return tuple((k, v.dtype.str, v.shape[:axes.inputs[k]] + v.shape[axes.inputs[k] + 1:])
                 for k, v in sorted(feed.items()))


def _native(arrays) -> bool:
    """Whether the native row copies (``_vk.stack_rows``, ``split_rows``) take these arrays:
    C-contiguous numbers. They copy holding the GIL, where numpy lets it go around each
    request's rows and the run's thread then waits a switch interval behind the replica's busy
    event loop to take it back, every time (src/python/bind_rows.cpp; docs/serving.md, "The GIL
    hand-off"). Anything else (strings, views) goes through numpy."""
    return all(isinstance(a, np.ndarray) and a.flags.c_contiguous and a.dtype.kind in "biufc"
               for a in arrays)


def stack(feeds: list[dict], axes: BatchAxes) -> tuple[dict, list[int]]:
    """One feed of ``feeds`` concatenated along the batch axis, and each one's row count."""
    from ortops import _vk

    first = next(iter(axes.inputs))
    sizes = [f[first].shape[axes.inputs[first]] for f in feeds]
    stacked = {}
    for k, a in axes.inputs.items():
        parts = [f[k] for f in feeds]
        stacked[k] = _vk.stack_rows(parts, a) if _native(parts) else np.concatenate(parts, axis=a)
    return stacked, sizes


def split(outputs: dict, axes: BatchAxes, sizes: list[int]) -> list[dict]:
    """The rows of each request, in order, from the outputs of a stacked run."""
    from ortops import _vk

    parts = {}
    for k, v in outputs.items():
        a = axes.outputs[k]
        parts[k] = _vk.split_rows(v, a, sizes) if _native([v]) else np.split(v, np.cumsum(sizes)[:-1], axis=a)
    return [{k: p[i] for k, p in parts.items()} for i in range(len(sizes))]


def groups(feeds: list[dict], axes: BatchAxes) -> list[list[int]]:
    """Indices of ``feeds`` that can be stacked together, first-come order kept."""
    by_key: dict = {}
    for i, f in enumerate(feeds):
        by_key.setdefault(_stack_key(f, axes), []).append(i)
    return list(by_key.values())


# ---------------------------------------------------------------- wire format

NPZ = "application/x-npz"
NPY = "application/x-npy"


def decode_request(body: bytes, content_type: str | None, sig: Signature) -> dict:
    """The feed of a request body (JSON, .npz or, for one input, .npy); RequestError if bad."""
    kind = (content_type or "application/json").split(";")[0].strip().lower()
    try:
        if kind == NPZ:
            with np.load(io.BytesIO(body), allow_pickle=False) as z:
                feed = {k: z[k] for k in z.files}
        elif kind in (NPY, "application/octet-stream"):
            if len(sig.inputs) != 1:
                raise RequestError(f"an .npy body carries one input; this model has {sorted(sig.inputs)} "
                                   f"(send {NPZ})")
            feed = {next(iter(sig.inputs)): np.load(io.BytesIO(body), allow_pickle=False)}
        else:
            doc = json.loads(body or b"null")
            if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), dict):
                raise RequestError('a JSON body must be {"inputs": {name: nested lists}}')
            feed = {k: np.asarray(v, dtype=sig.dtypes.get(k)) for k, v in doc["inputs"].items()}
    except RequestError:
        raise
    except Exception as e:  # noqa: BLE001 - every malformed body is the client's error
        raise RequestError(f"could not read the request body as {kind}: {e}") from None
    return check_feed(feed, sig)


def encode_response(outputs: dict, content_type: str | None) -> tuple[bytes, str]:
    """The body of an answer: .npz for a binary request, JSON otherwise."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind in (NPZ, NPY, "application/octet-stream"):
        buf = io.BytesIO()
        np.savez(buf, **outputs)
        return buf.getvalue(), NPZ
    return json.dumps({"outputs": {k: v.tolist() for k, v in outputs.items()}}).encode(), "application/json"


# ---------------------------------------------------------------- pinning


def replica_device(device=None, env=None):
    """The device a replica runs on: ``device`` if given; else the GPU the scheduler assigned
    (``CUDA_VISIBLE_DEVICES``, which Ray sets for a replica given ``num_gpus``; see
    ortops.visible); else None (``ORTOPS_DEVICE`` or the default device)."""
    if device is not None:
        return device
    from ortops.visible import assigned_device

    return assigned_device(env)


def nvidia_gpus() -> int:
    """How many NVIDIA Vulkan devices this process sees (the replicas' GPU count default)."""
    import ortops
    from ortops.visible import NVIDIA_VENDOR_ID

    return sum(d.vendor_id == NVIDIA_VENDOR_ID for d in ortops.devices())


# ---------------------------------------------------------------- the replica


class Replica:
    """What one Ray Serve replica holds: the session on its device and the batch axes. The Ray
    deployment class (:func:`_deployment_class`) wraps it; usable without Ray too."""

    def __init__(self, model, *, device=None, providers=None, sess_options=None):
        import ortops
        from ortops.device import select
        from ortops.ort.rewrite import load_model

        proto = load_model(model)
        self.signature = Signature.of(proto)
        self.axes = batch_axes(proto)
        self.device = replica_device(device)
        self.session = ortops.InferenceSession(proto, sess_options, providers=providers or ["CPUExecutionProvider"],
                                               device=self.device, require_gpu=True)
        chosen = select(self.device)
        self.device_uuid = chosen.uuid
        self.output_names = [o.name for o in self.session.get_outputs()]
        log.info("ortops.serve: replica on %s (uuid %s), batch axis %s", chosen, chosen.uuid,
                 self.axes.name if self.axes else "none")

    def run(self, feed: dict) -> dict:
        return dict(zip(self.output_names, self.session.run(None, feed)))

    def run_many(self, feeds: list[dict]) -> list[tuple[dict, int]]:
        """Each feed's outputs and the rows they ran with: stacked where the model allows."""
        if self.axes is None:
            return [(self.run(f), 1) for f in feeds]
        done: list = [None] * len(feeds)
        for group in groups(feeds, self.axes):
            stacked, sizes = stack([feeds[i] for i in group], self.axes)
            for i, out in zip(group, split(self.run(stacked), self.axes, sizes)):
                done[i] = (out, sum(sizes))
        return done


class Batcher:
    """Runs queued requests in batches, one batch at a time (``concurrent_runs``) on worker
    threads of its own: a batch is what is queued (up to ``max_batch_size``) when a run slot
    frees, so a lone request at an idle replica runs at once, and under load a batch holds
    what arrived during the previous run. ``batch_wait_timeout_s`` > 0 also holds the first
    request of a batch that long for more (Ray's ``serve.batch`` rule) while fewer than
    ``max_batch_size`` are queued.

    Why not ``serve.batch``: it waits ``batch_wait_timeout_s`` after every first request, a
    lone one included (2.2 ms a request with the bench's 2 ms wait and one client on
    lavapipe; app()'s default was 5 ms), and it forms the next batch during the current run,
    then queues it for the run slot: a batch closes after its short wait however long the run
    takes, so under load small batches queued one behind another (1.0 rows a run at 8 clients,
    1.9 at 32, with the small recognizer on lavapipe; 4.5 and 8.0 with this, and 2.7 x and
    2.5 x the requests/s: docs/serving.md, "Where a request's time goes").

    ``run_many(feeds)`` returns one result per feed (Replica.run_many); ``submit`` answers
    ``(result, timings)``, timings being seconds queued and seconds the batch ran.
    """

    def __init__(self, run_many, *, max_batch_size: int = 8, batch_wait_timeout_s: float = 0.0,
                 concurrent_runs: int = 1):
        if max_batch_size < 1 or concurrent_runs < 1 or batch_wait_timeout_s < 0:
            raise ValueError("max_batch_size and concurrent_runs must be at least 1, batch_wait_timeout_s not negative")
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        self.run_many = run_many
        self.max_batch_size = max_batch_size
        self.batch_wait_timeout_s = batch_wait_timeout_s
        self.concurrent_runs = concurrent_runs
        # Threads made once (not one a request): the same thread runs a replica's session.
        self._executor = ThreadPoolExecutor(concurrent_runs, thread_name_prefix="ortops-run")
        self._queue: deque = deque()
        self._loop = None
        self._task = None
        self._arrived = None     # set when a request is queued
        self._slots = None       # run slots free
        self._running: set = set()   # the runs' tasks (the loop keeps only weak references)

    async def submit(self, feed):
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._task is None or self._task.done():
            self._start(loop)
        future = loop.create_future()
        self._queue.append((feed, future, time.perf_counter()))
        self._arrived.set()
        return await future

    def _start(self, loop):
        self._loop = loop
        self._arrived = asyncio.Event()
        self._slots = asyncio.Semaphore(self.concurrent_runs)
        self._task = loop.create_task(self._serve())

    async def _serve(self):
        while True:
            await self._slots.acquire()
            while not self._queue:
                self._arrived.clear()
                await self._arrived.wait()
            if self.batch_wait_timeout_s > 0:
                deadline = time.perf_counter() + self.batch_wait_timeout_s
                while len(self._queue) < self.max_batch_size and (left := deadline - time.perf_counter()) > 0:
                    self._arrived.clear()
                    try:
                        await asyncio.wait_for(self._arrived.wait(), left)
                    except asyncio.TimeoutError:
                        break
            batch = []
            while self._queue and len(batch) < self.max_batch_size:
                item = self._queue.popleft()
                if not item[1].done():       # a request cancelled while queued is not run
                    batch.append(item)
            if not batch:
                self._slots.release()
                continue
            task = self._loop.create_task(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _run(self, batch):
        start = time.perf_counter()
        try:
            results = await self._loop.run_in_executor(self._executor, self.run_many, [b[0] for b in batch])
        except Exception as e:  # noqa: BLE001 - every request of the batch gets the error
            for _, future, _ in batch:
                if not future.done():
                    future.set_exception(e)
            return
        finally:
            self._slots.release()
        ran = time.perf_counter() - start
        for (_, future, queued), result in zip(batch, results):
            if not future.done():
                future.set_result((result, {"queue": start - queued, "run": ran}))


def server_timing(timings: dict) -> str:
    """A ``Server-Timing`` header value (milliseconds) from seconds by name."""
    return ", ".join(f"{k};dur={v * 1e3:.3f}" for k, v in timings.items())


def _deployment_class():
    """The Ray Serve deployment (built on first use: Ray is an optional dependency)."""
    from ray import serve
    from starlette.responses import Response

    class OrtopsDeployment:
        def __init__(self, model, device=None, max_batch_size=8, batch_wait_timeout_s=0.0,
                     providers=None, concurrent_runs=1, switch_interval_s=SWITCH_INTERVAL_S,
                     intra_op_threads=INTRA_OP_THREADS):
            if switch_interval_s:
                sys.setswitchinterval(switch_interval_s)   # the replica's process: SWITCH_INTERVAL_S
            self.intra_op_threads = intra_op_threads or 0
            self.replica = Replica(model, device=device, providers=providers,
                                   sess_options=session_options(intra_op_threads))
            # Models without a batch axis run one request a batch, through the same queue
            # (Replica.run_many runs such feeds one by one; a batch of one keeps each answer
            # from waiting for the others).
            self.batcher = Batcher(self.replica.run_many, max_batch_size=max_batch_size if self.replica.axes else 1,
                                   batch_wait_timeout_s=batch_wait_timeout_s if self.replica.axes else 0.0,
                                   concurrent_runs=concurrent_runs)
            try:
                self.tag = serve.get_replica_context().replica_tag
            except Exception:  # noqa: BLE001 - outside a replica (tests)
                self.tag = str(os.getpid())

        async def predict(self, feed: dict) -> dict:
            """For DeploymentHandle callers: a feed of arrays -> the outputs by name."""
            feed = check_feed(feed, self.replica.signature)
            (out, _), _ = await self.batcher.submit(feed)
            return out

        def info(self) -> dict:
            """The replica's tag, device UUID and the validation messages since the last call."""
            from ortops.device import validation_enabled, validation_messages

            return {"replica": self.tag, "device": self.replica.device_uuid, "pid": os.getpid(),
                    "switch_interval_s": sys.getswitchinterval(), "intra_op_threads": self.intra_op_threads,
                    "validation": validation_enabled(), "validation_messages": validation_messages()}

        async def __call__(self, request) -> Response:
            kind = request.headers.get("content-type")
            body = await request.body()
            t0 = time.perf_counter()
            try:
                feed = decode_request(body, kind, self.replica.signature)
                t1 = time.perf_counter()
                (out, rows), timings = await self.batcher.submit(feed)
            except (RequestError, ValueError) as e:
                return Response(json.dumps({"error": str(e)}), status_code=400, media_type="application/json")
            t2 = time.perf_counter()
            body, media = encode_response(out, kind)
            t3 = time.perf_counter()
            # decode, queue (waiting for a run slot), run (the batch's run_many on the worker
            # thread), back (the hand-back from that thread to this loop), encode: in ms.
            timing = server_timing({"decode": t1 - t0, "queue": timings["queue"], "run": timings["run"],
                                    "back": (t2 - t1) - timings["queue"] - timings["run"], "encode": t3 - t2})
            return Response(body, media_type=media, headers={
                "x-ortops-replica": self.tag, "x-ortops-device": self.replica.device_uuid,
                "x-ortops-rows": str(rows), "server-timing": timing})

    return OrtopsDeployment


#: Requests a replica accepts at once by default. Below the concurrent clients, the rest wait
#: in Ray Serve's proxy, which retries a full replica with backoff, and a replica's requests a
#: second collapse (docs/serving.md). Keep it above the concurrent requests a replica is
#: expected to hold.
MAX_ONGOING_REQUESTS = 256

#: The replica process's GIL switch interval (``sys.setswitchinterval``; Python's default is
#: 5 ms). A batch's run is ONNX Runtime's ``run``, which releases the GIL while the session
#: runs, but the worker thread must take the GIL back twice a batch: when it wakes for the
#: batch and when the session returns. While the replica's event loop is busy (decoding,
#: encoding, Ray's request handling: under many clients it always is), each of those waits
#: until the loop is made to let go, after the switch interval, which at Python's 5 ms made a
#: batch's run several times slower beside a busy loop (docs/serving.md, "The GIL hand-off").
#: None keeps Python's setting.
SWITCH_INTERVAL_S = 0.0005

#: The replica session's ``intra_op_num_threads`` (ONNX Runtime's threads for the model's CPU
#: nodes; None or 0: ONNX Runtime's default, a thread per core). One: beside a busy event loop
#: the default pool stalls a batch's ``session.run``, and under many clients a replica with one
#: intra-op thread answered about twice the requests a second (docs/serving.md, "The GIL
#: hand-off"). The model's CPU nodes here are small; a model with heavy ones may want more.
INTRA_OP_THREADS = 1


def session_options(intra_op_threads: int | None):
    """The replica session's options: ONNX Runtime's defaults, or ``intra_op_threads`` threads
    for its CPU nodes (None or 0: ONNX Runtime's default, a thread per core)."""
    from ortops.ort.session import intra_op_options

    return intra_op_options(intra_op_threads)


def app(model, *, num_replicas: int = 1, num_gpus: float | None = None, device=None, max_batch_size: int = 8,
        batch_wait_timeout_s: float = 0.0, concurrent_runs: int = 1, max_ongoing_requests: int | None = None,
        name: str = "ortops", providers=None, switch_interval_s: float | None = SWITCH_INTERVAL_S,
        intra_op_threads: int | None = INTRA_OP_THREADS):
    """A Ray Serve application serving ``model`` (a path, bytes or ModelProto).

    num_gpus: GPUs Ray gives each replica; default 1 where this process sees NVIDIA Vulkan
    devices (Ray then pins each replica to its own GPU and :func:`replica_device` maps it),
    else 0 (every replica on the default or ``device``). max_ongoing_requests: requests a
    replica accepts at once (default :data:`MAX_ONGOING_REQUESTS`): they wait in the replica's
    batch queue, which costs nothing while they wait; requests beyond it wait in Ray's proxy,
    whose retries with backoff against a full replica collapsed throughput (docs/serving.md).
    max_batch_size, batch_wait_timeout_s, concurrent_runs: the replica's :class:`Batcher` (a
    batch is what queued while the previous run ran; a lone request runs at once unless
    batch_wait_timeout_s asks to hold it for company). switch_interval_s: the replica
    process's GIL switch interval (:data:`SWITCH_INTERVAL_S`; None keeps Python's 5 ms).
    intra_op_threads: the replica session's ``intra_op_num_threads`` for the model's nodes that
    run on the CPU (:data:`INTRA_OP_THREADS`, 1; None or 0: ONNX Runtime's default, a thread
    per core).
    """
    from ray import serve

    from ortops.ort.rewrite import load_model

    if num_gpus is None:
        num_gpus = 1 if nvidia_gpus() else 0
    # A path travels as an absolute one (a replica's working directory is Ray's), else bytes.
    body = (os.path.abspath(os.fspath(model)) if isinstance(model, (str, os.PathLike))
            else load_model(model).SerializeToString())
    deployment = serve.deployment(
        _deployment_class(), name=name, num_replicas=num_replicas,
        ray_actor_options={"num_cpus": 0, "num_gpus": num_gpus},
        max_ongoing_requests=max_ongoing_requests or MAX_ONGOING_REQUESTS)
    return deployment.bind(body, device, max_batch_size, batch_wait_timeout_s, providers, concurrent_runs,
                           switch_interval_s, intra_op_threads)
