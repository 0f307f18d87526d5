#!/usr/bin/env python3
"""Requests/s and latency of ortops.serve on Ray Serve: 1 replica, then one replica per GPU.

For the two-GPU machine (nvidia-h200-x2, scripts/gpu_machine.sh stage ``serve``); runs on
lavapipe too, with one replica (it says why the rest was not run). A local Ray instance serves
the recognizer (scripts/make_models.py) over HTTP on loopback; ``--clients`` concurrent
clients (asyncio + aiohttp, keep-alive connections, in this process) each send one
``.npz`` request of ``--rows`` rows at a time for ``--seconds``. Every answer is compared with
ONNX Runtime's CPU result for the same input (scaled error within the float32 tolerance,
ortops.compare); a wrong answer or an HTTP error fails the script (exit status 1).

With NVIDIA GPUs each replica asks Ray for one GPU, and the script checks through each
replica's ``info`` that two replicas run on two different Vulkan devices (by UUID).
Writes serve_bench.json and serve_bench.md under ``--out`` (default $OUT, else ./gpu-out).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

from ortops.tools.report import write_report

ROOT = pathlib.Path(__file__).resolve().parents[1]
FEEDS = 16


def _model(small: bool):
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_models   # noqa: E402 - the repository's sample models

    # --small: a recognizer lavapipe runs in milliseconds, to try the script on a CPU.
    return make_models.recognizer(seq=20, inp=16, hidden=16, classes=8) if small else make_models.recognizer()


def _requests(model, rows: int):
    """FEEDS request bodies (.npz) and ORT CPU's logits for each."""
    import onnxruntime as ort

    x = model.graph.input[0]
    dims = [d.dim_value if d.HasField("dim_value") else rows for d in x.type.tensor_type.shape.dim]
    cpu = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    bodies, want = [], []
    for _ in range(FEEDS):
        a = rng.uniform(-1, 1, dims).astype(np.float32)
        buf = io.BytesIO()
        np.savez(buf, **{x.name: a})
        bodies.append(buf.getvalue())
        want.append(cpu.run(None, {x.name: a})[0])
    return bodies, want


async def _load(url, bodies, want, clients: int, seconds: float, warmup: float) -> dict:
    """``clients`` concurrent clients for ``warmup`` + ``seconds``; latencies of the timed part."""
    import aiohttp

    from ortops.compare import scaled_error, tolerance

    tol = tolerance(np.float32)
    lat, rows_seen, errors = [], [], []
    t_start = time.perf_counter() + warmup
    t_end = t_start + seconds

    async def client(k, session):
        i = k
        while True:
            now = time.perf_counter()
            if now >= t_end:
                return
            body = bodies[i % FEEDS]
            t0 = time.perf_counter()
            async with session.post(url, data=body, headers={"Content-Type": "application/x-npz"}) as r:
                payload = await r.read()
                status, rows = r.status, r.headers.get("x-ortops-rows")
            t1 = time.perf_counter()
            if status != 200:
                errors.append(f"HTTP {status}: {payload[:200]!r}")
            else:
                with np.load(io.BytesIO(payload)) as z:
                    err = scaled_error(z[z.files[0]], want[i % FEEDS])
                if not err <= tol:
                    errors.append(f"answer {i % FEEDS}: scaled error {err:.3g} > {tol:g}")
            if t0 >= t_start and t1 <= t_end:
                lat.append(t1 - t0)
                rows_seen.append(int(rows or 0))
            i += clients

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as session:
        await asyncio.gather(*(client(k, session) for k in range(clients)))
    ms = np.array(lat) * 1e3
    return {"requests": len(lat), "requests_per_s": round(len(lat) / seconds, 1),
            "p50_ms": round(float(np.percentile(ms, 50)), 2) if len(ms) else None,
            "p99_ms": round(float(np.percentile(ms, 99)), 2) if len(ms) else None,
            "mean_rows_per_run": round(float(np.mean(rows_seen)), 2) if rows_seen else None,
            "errors": len(errors), "first_errors": errors[:3]}


def _replica_devices(handle, replicas: int) -> dict:
    """Each replica's device UUID, by replica tag (asks until all answered, at most 100 calls)."""
    seen = {}
    for _ in range(100):
        info = handle.info.remote().result(timeout_s=120)
        seen[info["replica"]] = info["device"]
        if len(seen) == replicas:
            break
    return seen


def _markdown(report: dict) -> str:
    lines = [f"# ortops.serve on Ray Serve ({report['kind']}, {report['gpus']} NVIDIA GPU(s))", "",
             f"Recognizer{' (small)' if report['small'] else ''}, {report['rows']} row(s) a request as .npz over loopback HTTP, {report['seconds']} s "
             f"per row after {report['warmup']} s warm-up; serve.batch max {report['max_batch_size']} requests, "
             f"wait {report['batch_wait_ms']} ms; ray {report['ray']}.", "",
             "| replicas | clients | requests/s | p50 ms | p99 ms | rows per run | errors | devices |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["rows_measured"]:
        if "not_run" in r:
            lines.append(f"| {r['replicas']} | - | - | - | - | - | - | not run: {r['not_run']} |")
            continue
        lines.append(f"| {r['replicas']} | {r['clients']} | {r['requests_per_s']} | {r['p50_ms']} | {r['p99_ms']} | "
                     f"{r['mean_rows_per_run']} | {r['errors']} | {r['devices']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", default="1,2", help="replica counts, a comma list (default 1,2)")
    ap.add_argument("--clients", default="1,8,32", help="concurrent clients, a comma list (default 1,8,32)")
    ap.add_argument("--rows", type=int, default=1, help="rows (batch) of each request (default 1)")
    ap.add_argument("--seconds", type=float, default=10.0, help="timed seconds per row (default 10)")
    ap.add_argument("--warmup", type=float, default=2.0, help="untimed seconds first (default 2)")
    ap.add_argument("--max-batch-size", type=int, default=8, help="serve.batch's max_batch_size (default 8)")
    ap.add_argument("--batch-wait-ms", type=float, default=2.0, help="serve.batch's wait, ms (default 2)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--small", action="store_true", help="a small recognizer (to try the script on lavapipe)")
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    args = ap.parse_args(argv)

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray import serve

    import ortops.serve

    gpus = ortops.serve.nvidia_gpus()
    kind = "nvidia" if gpus else "no NVIDIA GPU (replicas share the default Vulkan device)"
    model = _model(args.small)
    bodies, want = _requests(model, args.rows)
    here = os.getcwd()
    os.chdir(tempfile.mkdtemp(prefix="ortops-ray-"))   # Ray puts the driver's cwd on workers' sys.path
    try:
        ray.init(num_cpus=os.cpu_count(), num_gpus=gpus, include_dashboard=False, log_to_driver=False)
    finally:
        os.chdir(here)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    url = f"http://127.0.0.1:{args.port}/bench"
    rows, failed = [], False
    try:
        for replicas in [int(t) for t in args.replicas.split(",")]:
            if gpus and replicas > gpus:
                rows.append({"replicas": replicas, "not_run": f"{gpus} GPU(s) here, one per replica"})
                continue
            if not gpus and replicas > 1:
                rows.append({"replicas": replicas, "not_run": "no NVIDIA GPUs: replicas would share one device"})
                continue
            handle = serve.run(ortops.serve.app(model, num_replicas=replicas, max_batch_size=args.max_batch_size,
                                                batch_wait_timeout_s=args.batch_wait_ms / 1e3),
                               name="bench", route_prefix="/bench")
            devices = _replica_devices(handle, replicas)
            pinned = len(set(devices.values())) == replicas or not gpus
            failed |= not pinned
            for clients in [int(t) for t in args.clients.split(",")]:
                r = asyncio.run(_load(url, bodies, want, clients, args.seconds, args.warmup))
                r.update(replicas=replicas, clients=clients,
                         devices=", ".join(sorted(u[:8] for u in devices.values())) + ("" if pinned else " (NOT one per GPU)"))
                failed |= bool(r["errors"])
                rows.append(r)
                print(json.dumps(r), flush=True)
            serve.delete("bench")
    finally:
        serve.shutdown()
        ray.shutdown()
    report = {"kind": kind, "small": args.small, "gpus": gpus, "rows": args.rows, "seconds": args.seconds, "warmup": args.warmup,
              "max_batch_size": args.max_batch_size, "batch_wait_ms": args.batch_wait_ms,
              "ray": ray.__version__, "rows_measured": rows}
    write_report(args.out, "serve_bench", report, _markdown(report))
    print(_markdown(report))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
