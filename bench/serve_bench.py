#!/usr/bin/env python3
"""Requests/s and latency of ortops.serve on Ray Serve: 1 replica, then one replica per GPU.

For the two-GPU machine (nvidia-h200-x2, scripts/gpu_machine.sh stage ``serve``); runs on
lavapipe too, with one replica (it says why the rest was not run). A local Ray instance serves
the recognizer (scripts/make_models.py) over HTTP on loopback; ``--clients`` concurrent
clients (asyncio + aiohttp, keep-alive connections, in this process) each send one
``.npz`` request of ``--rows`` rows at a time for ``--seconds``. Every answer is compared with
ONNX Runtime's CPU result for the same input (scaled error within the float32 tolerance,
ortops.compare); a wrong answer or an HTTP error fails the script (exit status 1).

Each row also gives the median of the replica's own parts (its Server-Timing header: decode,
queue, run, back, encode). ``--handle`` calls ``predict`` through a DeploymentHandle instead
(no HTTP, no Ray proxy); ``--direct`` runs Ray Serve's throughput-optimized mode and posts to
each replica's own port (direct ingress); ``--tiny`` serves a recognizer whose run on lavapipe
is as short as the full one's on the H200. docs/serving.md, "Where a request's time goes".

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

from ortops.tools.bench import write_report

ROOT = pathlib.Path(__file__).resolve().parents[1]
FEEDS = 16


def _model(small: bool, tiny: bool = False):
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_models   # noqa: E402 - the repository's sample models

    # --small: a recognizer lavapipe runs in milliseconds, to try the script on a CPU.
    # --tiny: one whose run on lavapipe (about 1.8 ms) is as short as the full recognizer's on
    # the H200 (1.1 ms), so that the serving path's own cost shows as it does there.
    if tiny:
        return make_models.recognizer(seq=2, inp=4, hidden=4, classes=2)
    return make_models.recognizer(seq=20, inp=16, hidden=16, classes=8) if small else make_models.recognizer()


def _requests(model, rows: int):
    """FEEDS request bodies (.npz), ORT CPU's logits for each and the feeds themselves."""
    import onnxruntime as ort

    x = model.graph.input[0]
    dims = [d.dim_value if d.HasField("dim_value") else rows for d in x.type.tensor_type.shape.dim]
    cpu = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    bodies, want, feeds = [], [], []
    for _ in range(FEEDS):
        a = rng.uniform(-1, 1, dims).astype(np.float32)
        buf = io.BytesIO()
        np.savez(buf, **{x.name: a})
        bodies.append(buf.getvalue())
        feeds.append({x.name: a})
        want.append(cpu.run(None, {x.name: a})[0])
    return bodies, want, feeds


async def _load(urls, bodies, want, clients: int, seconds: float, warmup: float) -> dict:
    """``clients`` concurrent clients for ``warmup`` + ``seconds``; latencies of the timed part.
    Client k posts to ``urls[k % len(urls)]`` (one URL, or each replica's own with --direct)."""
    import aiohttp

    from ortops.compare import scaled_error, tolerance

    tol = tolerance(np.float32)
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
            async with session.post(urls[k % len(urls)], data=body, headers={"Content-Type": "application/x-npz"}) as r:
                payload = await r.read()
                status, rows, timing = r.status, r.headers.get("x-ortops-rows"), r.headers.get("server-timing")
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
                parts.append(_server_timing(timing))
            i += clients

    lat, rows_seen, errors, parts = [], [], [], []
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as session:
        await asyncio.gather(*(client(k, session) for k in range(clients)))
    return _summary(lat, rows_seen, errors, parts, seconds)


def _server_timing(value: str | None) -> dict:
    """``{name: ms}`` from a Server-Timing header (the replica's decode, queue, run, back, encode)."""
    out = {}
    for part in (value or "").split(","):
        name, _, dur = part.strip().partition(";dur=")
        if dur:
            out[name] = float(dur)
    return out


def _summary(lat, rows_seen, errors, parts, seconds) -> dict:
    ms = np.array(lat) * 1e3
    names = dict.fromkeys(k for p in parts for k in p)
    return {"requests": len(lat), "requests_per_s": round(len(lat) / seconds, 1),
            "p50_ms": round(float(np.percentile(ms, 50)), 2) if len(ms) else None,
            "p99_ms": round(float(np.percentile(ms, 99)), 2) if len(ms) else None,
            "mean_rows_per_run": round(float(np.mean(rows_seen)), 2) if rows_seen else None,
            # The replica's own share of a request (Server-Timing), median ms of each part.
            "replica_p50_ms": {k: round(float(np.median([p.get(k, 0.0) for p in parts])), 3) for k in names},
            "errors": len(errors), "first_errors": errors[:3]}


async def _load_handle(handle, feeds, want, clients: int, seconds: float, warmup: float) -> dict:
    """As _load, through a DeploymentHandle's ``predict`` (arrays, no HTTP, no Ray proxy)."""
    from ortops.compare import scaled_error, tolerance

    tol = tolerance(np.float32)
    t_start = time.perf_counter() + warmup
    t_end = t_start + seconds
    lat, errors = [], []

    async def client(k):
        i = k
        while time.perf_counter() < t_end:
            t0 = time.perf_counter()
            try:
                out = await handle.predict.remote(feeds[i % FEEDS])
            except Exception as e:  # noqa: BLE001 - counted and shown
                errors.append(repr(e)[:200])
                out = None
            t1 = time.perf_counter()
            if out is not None:
                err = scaled_error(next(iter(out.values())), want[i % FEEDS])
                if not err <= tol:
                    errors.append(f"answer {i % FEEDS}: scaled error {err:.3g} > {tol:g}")
            if t0 >= t_start and t1 <= t_end:
                lat.append(t1 - t0)
            i += clients

    await asyncio.gather(*(client(k) for k in range(clients)))
    return _summary(lat, [], errors, [], seconds)


def _direct_ports(body: bytes, replicas: int) -> list[int]:
    """The HTTP ports of the replicas themselves under Ray Serve's direct ingress (each ingress
    replica listens on one port of RAY_SERVE_DIRECT_INGRESS_MIN/MAX_HTTP_PORT, 30000-31000 by
    default; Ray does not tell the driver which): the ports there that answer the bench's route
    with an ortops replica's header, one a replica."""
    import socket
    import urllib.request

    low = int(os.environ.get("RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT", "30000"))
    high = int(os.environ.get("RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT", "31000"))
    for _ in range(60):
        found = {}
        for port in range(low, high):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) != 0:
                    continue
            req = urllib.request.Request(f"http://127.0.0.1:{port}/bench", data=body, method="POST",
                                         headers={"Content-Type": "application/x-npz"})
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    tag = r.headers.get("x-ortops-replica")
            except OSError:
                continue
            if tag:
                found.setdefault(tag, port)
        if len(found) >= replicas:
            return sorted(found.values())
        time.sleep(1)
    raise SystemExit(f"--direct: found {len(found)} of {replicas} replicas' ports in {low}-{high}")


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
             f"Recognizer{' (tiny)' if report.get('tiny') else ' (small)' if report['small'] else ''}, {report['rows']} row(s) a request "
             + ("as arrays through a DeploymentHandle's predict (no HTTP)" if report.get("handle")
                else "as .npz over loopback HTTP" + (" straight to the replicas (direct ingress)" if report.get("direct")
                                                     else " through Ray's proxy"))
             + f", {report['seconds']} s per row after {report['warmup']} s warm-up; batches of at most "
             f"{report['max_batch_size']} requests, wait {report['batch_wait_ms']} ms, "
             f"{report.get('concurrent_runs', 1)} run(s) at once; ray {report['ray']}. Replica ms: the median "
             "of the replica's Server-Timing parts (decode, queue, run, back, encode).", "",
             "| round | switch ms | intra-op | replicas | clients | requests/s | p50 ms | p99 ms | rows per run | replica ms | errors | devices |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows_measured"]:
        if "not_run" in r:
            lines.append(f"| - | - | - | {r['replicas']} | - | - | - | - | - | - | - | not run: {r['not_run']} |")
            continue
        parts = " ".join(f"{k} {v:g}" for k, v in (r.get("replica_p50_ms") or {}).items()) or "-"
        shared = f" ({r['replicas_per_gpu']} a GPU)" if r.get("replicas_per_gpu", 1) > 1 else ""
        lines.append(f"| {r.get('round', 1)} | {r.get('switch_interval_ms', '-')} | {r.get('intra_op') or 'default'} | {r['replicas']}{shared} | {r['clients']} | {r['requests_per_s']} | {r['p50_ms']} | {r['p99_ms']} | "
                     f"{r['mean_rows_per_run']} | {parts} | {r['errors']} | {r['devices']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", default="1,2", help="replica counts, a comma list (default 1,2)")
    ap.add_argument("--clients", default="1,8,32", help="concurrent clients, a comma list (default 1,8,32)")
    ap.add_argument("--rows", type=int, default=1, help="rows (batch) of each request (default 1)")
    ap.add_argument("--seconds", type=float, default=10.0, help="timed seconds per row (default 10)")
    ap.add_argument("--warmup", type=float, default=2.0, help="untimed seconds first (default 2)")
    ap.add_argument("--max-batch-size", type=int, default=8, help="requests a batch holds at most (default 8)")
    ap.add_argument("--batch-wait-ms", type=float, default=0.0,
                    help="how long a batch's first request waits for more, ms (default 0: none)")
    ap.add_argument("--concurrent-runs", type=int, default=1, help="batches a replica runs at once (default 1)")
    ap.add_argument("--replicas-per-gpu", type=int, default=1,
                    help="replicas sharing one GPU (Ray's num_gpus = 1 / N; two processes, two GILs, one "
                         "device; default 1). Without NVIDIA GPUs: replicas up to N share the default device")
    ap.add_argument("--switch-interval-ms", default="0.5",
                    help="the replicas' GIL switch interval in ms, a comma list run in turn (default 0.5, "
                         "ortops.serve's; 5 is Python's own; 0 leaves Python's)")
    ap.add_argument("--intra-op", default="1",
                    help="the replica session's intra_op_num_threads, a comma list run in turn inside each switch "
                         "interval (default 1, ortops.serve's; 0: ONNX Runtime's default, a thread per core)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="times the whole list of switch intervals is run, alternating (default 1)")
    ap.add_argument("--handle", action="store_true",
                    help="call the replicas' predict through a DeploymentHandle (no HTTP, no Ray proxy) "
                         "instead of POSTing .npz; separates the proxy's cost")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--small", action="store_true", help="a small recognizer (to try the script on lavapipe)")
    ap.add_argument("--direct", action="store_true",
                    help="Ray Serve's throughput-optimized mode (RAY_SERVE_THROUGHPUT_OPTIMIZED=1: direct "
                         "ingress, gRPC between Serve's processes); clients post to each replica's own port, "
                         "not to Ray's proxy")
    ap.add_argument("--tiny", action="store_true",
                    help="a tiny recognizer (its run on lavapipe is about as short as the full one's on the H200)")
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    args = ap.parse_args(argv)

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if args.direct:
        # Read when ray.serve is imported, here and (inherited) in Ray's processes. The router
        # stays in its own loop: this script calls handles outside asyncio too (info).
        os.environ["RAY_SERVE_THROUGHPUT_OPTIMIZED"] = "1"
        os.environ.setdefault("RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP", "1")
        # A replica with direct ingress drains 30 s before it stops (ray 2.60), which made
        # every replica count's teardown here take 33 s; nothing is in flight by then.
        os.environ.setdefault("RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S", "1")
    import ray
    from ray import serve

    import ortops.serve

    gpus = ortops.serve.nvidia_gpus()
    kind = "nvidia" if gpus else "no NVIDIA GPU (replicas share the default Vulkan device)"
    model = _model(args.small, args.tiny)
    bodies, want, feeds = _requests(model, args.rows)
    here = os.getcwd()
    os.chdir(tempfile.mkdtemp(prefix="ortops-ray-"))   # Ray puts the driver's cwd on workers' sys.path
    try:
        ray.init(num_cpus=os.cpu_count(), num_gpus=gpus, include_dashboard=False, log_to_driver=False)
    finally:
        os.chdir(here)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    urls = [f"http://127.0.0.1:{args.port}/bench"]
    rows, failed = [], False
    try:
        settings = [(rnd, float(t), int(n)) for rnd in range(1, args.rounds + 1)
                    for t in args.switch_interval_ms.split(",") for n in args.intra_op.split(",")]
        for (rnd, switch_ms, intra_op), replicas in ((s, n) for s in settings for n in [int(t) for t in args.replicas.split(",")]):
            share = args.replicas_per_gpu
            if gpus and replicas > gpus * share:
                rows.append({"replicas": replicas, "not_run": f"{gpus} GPU(s) here, {share} replica(s) a GPU"})
                continue
            if not gpus and replicas > share:
                rows.append({"replicas": replicas, "not_run": "no NVIDIA GPUs: replicas would share one device"})
                continue
            num_gpus = 1 / share if gpus else None
            handle = serve.run(ortops.serve.app(model, num_replicas=replicas, num_gpus=num_gpus,
                                                max_batch_size=args.max_batch_size,
                                                batch_wait_timeout_s=args.batch_wait_ms / 1e3,
                                                concurrent_runs=args.concurrent_runs,
                                                switch_interval_s=switch_ms / 1e3 or None,
                                                intra_op_threads=intra_op),
                               name="bench", route_prefix="/bench")
            devices = _replica_devices(handle, replicas)
            # Pinned: as many devices as the replicas need, none holding more than its share.
            per_device = [list(devices.values()).count(d) for d in set(devices.values())]
            pinned = not gpus or (len(per_device) == min(gpus, -(-replicas // share)) and max(per_device) <= share)
            failed |= not pinned
            for clients in [int(t) for t in args.clients.split(",")]:
                if args.handle:
                    r = asyncio.run(_load_handle(handle, feeds, want, clients, args.seconds, args.warmup))
                else:
                    if args.direct:
                        urls = [f"http://127.0.0.1:{p}/bench" for p in _direct_ports(bodies[0], replicas)]
                    r = asyncio.run(_load(urls, bodies, want, clients, args.seconds, args.warmup))
                r.update(replicas=replicas, clients=clients, round=rnd, switch_interval_ms=switch_ms, intra_op=intra_op,
                         replicas_per_gpu=share,
                         devices=", ".join(sorted(u[:8] for u in devices.values()))
                         + ("" if pinned else f" (NOT {share} a GPU)"))
                failed |= bool(r["errors"])
                rows.append(r)
                print(json.dumps(r), flush=True)
            serve.delete("bench")
    finally:
        serve.shutdown()
        ray.shutdown()
    report = {"kind": kind, "small": args.small, "tiny": args.tiny, "gpus": gpus, "rows": args.rows, "seconds": args.seconds, "warmup": args.warmup,
              "max_batch_size": args.max_batch_size, "batch_wait_ms": args.batch_wait_ms,
              "concurrent_runs": args.concurrent_runs, "handle": args.handle, "direct": args.direct, "ray": ray.__version__, "rows_measured": rows}
    write_report(args.out, "serve_bench", report, _markdown(report))
    print(_markdown(report))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
