"""Ray Serve (ortops.serve, the optional extra ortops[serve]): a local Ray instance, two
replicas on the default Vulkan device (lavapipe in CI), concurrent HTTP requests over
loopback in JSON and .npz, every answer checked against ONNX Runtime's CPU kernels on the
original model; then a clean shutdown.

Ray's worker processes inherit this process's environment, so under ``--vk-validation`` the
replicas run under the validation layer too; their messages are read back through each
replica's ``info`` method and fail the test like the fixture does here.
"""

from __future__ import annotations

import io
import json
import os
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest

from ortops.compare import scaled_error, tolerance

from _scripts import load_script


CLIENTS = 8
REQUESTS = 24
SEQ, INP = 6, 5


def _model():
    return load_script("make_models").recognizer(seq=SEQ, inp=INP, hidden=4, classes=3, seed=21)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray():
    """Ray and Ray Serve; imported here, not at collection, so that a run deselecting these
    tests (-m "not gpu") does not need the extra. Where they are needed and missing, the
    test is skipped, which --fail-on-skip (CI) turns into a failure."""
    ray = pytest.importorskip("ray", reason="Ray Serve is the optional extra ortops[serve] "
                              "(scripts/setup.sh installs it)")
    return ray, pytest.importorskip("ray.serve")


def test_bench_direct_ingress_answers_through_each_replicas_own_port(tmp_path):
    """bench/serve_bench.py --direct (Ray Serve's throughput-optimized mode: each replica
    answers HTTP on its own port, no proxy) in a process of its own, since Ray reads the mode
    when ray.serve is imported: every answer equal to ORT CPU's (the script fails otherwise),
    and the replica's Server-Timing parts in the report; two replicas sharing the one device
    (--replicas-per-gpu 2: two processes, as on one GPU), each found on its own port. First in
    this module: it runs before the module's own Ray instance starts."""
    import subprocess
    import sys

    _ray()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    r = subprocess.run([sys.executable, "-P", os.path.join(root, "bench", "serve_bench.py"), "--tiny", "--direct",
                        "--replicas", "2", "--replicas-per-gpu", "2", "--clients", "1,4", "--seconds", "1",
                        "--warmup", "0.5",
                        "--port", str(_free_port()), "--out", str(tmp_path)],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    report = json.loads((tmp_path / "serve_bench.json").read_text())
    assert report["direct"] and [row["clients"] for row in report["rows_measured"]] == [1, 4]
    for row in report["rows_measured"]:
        assert row["errors"] == 0 and row["requests"] > 0
        assert set(row["replica_p50_ms"]) == {"decode", "queue", "run", "back", "encode"}
        assert row["replicas"] == 2 and row["replicas_per_gpu"] == 2 and len(row["devices"].split(", ")) == 2


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import ortops.serve

    ray, serve = _ray()

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray puts the driver's working directory first on its workers' sys.path: from the
    # repository root the replicas would import the source tree's ortops (no compiled module).
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("ray-cwd"))
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="ortops-test")
    finally:
        os.chdir(here)
    port = _free_port()
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        handle = serve.run(ortops.serve.app(_model(), num_replicas=2, num_gpus=0, max_batch_size=4,
                                            batch_wait_timeout_s=0.02),
                           name="ortops-test", route_prefix="/recognizer")
        yield f"http://127.0.0.1:{port}/recognizer", handle
    finally:
        serve.shutdown()
        ray.shutdown()
    assert not ray.is_initialized()


def _post(url, body: bytes, kind: str):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": kind}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _request(i, rng):
    rows = 1 + i % 3
    x = rng.uniform(-1, 1, (SEQ, rows, INP)).astype(np.float32)
    if i % 2:
        buf = io.BytesIO()
        np.savez(buf, X=x)
        return x, buf.getvalue(), "application/x-npz"
    return x, json.dumps({"inputs": {"X": x.tolist()}}).encode(), "application/json"


def _logits(body: bytes, kind: str) -> np.ndarray:
    if kind.startswith("application/x-npz"):
        with np.load(io.BytesIO(body)) as z:
            return z["logits"]
    return np.asarray(json.loads(body)["outputs"]["logits"], np.float32)


def test_two_replicas_answer_concurrent_requests_like_ort_cpu(served):
    url, _ = served
    rng = np.random.default_rng(3)
    jobs = [_request(i, rng) for i in range(REQUESTS)]
    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(lambda j: _post(url, j[1], j[2]), jobs))
    cpu = ort.InferenceSession(_model().SerializeToString(), providers=["CPUExecutionProvider"])
    replicas, stacked = set(), 0
    for (x, _, kind), (status, headers, body) in zip(jobs, answers):
        assert status == 200, body[:300]
        got = _logits(body, headers["content-type"])
        want = cpu.run(None, {"X": x})[0]
        assert got.shape == want.shape
        assert scaled_error(got, want) <= tolerance(np.float32), (kind, x.shape[1])
        replicas.add(headers["x-ortops-replica"])
        # The replica's share of the request, for bench/serve_bench.py's breakdown.
        assert [p.split(";")[0].strip() for p in headers["server-timing"].split(",")] == \
            ["decode", "queue", "run", "back", "encode"]
        stacked += int(headers["x-ortops-rows"]) > x.shape[1]
    assert len(replicas) == 2, f"answers came from {replicas} only"
    assert stacked > 0, "no request was batched with another"


def test_bad_request_is_answered_400_naming_the_input(served):
    url, _ = served
    status, _, body = _post(url, json.dumps({"inputs": {"X": [[[0.0] * 3]]}}).encode(), "application/json")
    assert status == 400 and "input 'X': expected shape [6, batch, 5], got [1, 1, 3]" in json.loads(body)["error"]
    status, _, body = _post(url, json.dumps({"inputs": {"Y": [1.0]}}).encode(), "application/json")
    assert status == 400 and "inputs: expected ['X'], got ['Y']" in json.loads(body)["error"]
    status, _, body = _post(url, b"not json", "application/json")
    assert status == 400 and "could not read the request body as application/json" in json.loads(body)["error"]


def test_deployment_handle_predict_matches_ort_cpu(served):
    """``predict`` for Python callers (a DeploymentHandle): arrays in, outputs by name out."""
    _, handle = served
    x = np.random.default_rng(8).uniform(-1, 1, (SEQ, 2, INP)).astype(np.float32)
    got = handle.predict.remote({"X": x}).result(timeout_s=120)
    want = ort.InferenceSession(_model().SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    assert set(got) == {"logits"} and scaled_error(got["logits"], want) <= tolerance(np.float32)


def test_replicas_take_the_gil_back_within_the_switch_interval(served):
    """Each replica's process runs at ortops.serve's GIL switch interval, not Python's 5 ms, and
    its session with ortops.serve's intra-op threads (INTRA_OP_THREADS): a
    batch's worker thread takes the GIL back twice a run from the busy event loop, and waits
    up to the interval each time (docs/serving.md, "The GIL hand-off")."""
    _, handle = served
    import ortops.serve

    seen = {}
    for _ in range(40):
        info = handle.info.remote().result(timeout_s=60)
        seen[info["replica"]] = (info["switch_interval_s"], info["intra_op_threads"])
        if len(seen) == 2:
            break
    assert len(seen) == 2 and all(abs(v - ortops.serve.SWITCH_INTERVAL_S) < 1e-9 and n == ortops.serve.INTRA_OP_THREADS
                                  for v, n in seen.values()), seen


def test_replicas_ran_clean_under_validation(served):
    """Last: each replica's validation messages from everything above (when the layer is on)."""
    _, handle = served
    from ortops.device import validation_enabled

    seen = {}
    for _ in range(40):
        info = handle.info.remote().result(timeout_s=60)
        assert info["validation"] == validation_enabled()   # the layer is on there when it is here
        seen.setdefault(info["replica"], []).extend(info["validation_messages"])
        if len(seen) == 2:
            break
    assert len(seen) == 2
    assert not any(seen.values()), {k: v[:3] for k, v in seen.items()}
