#!/usr/bin/env python3
"""Recognizer runs/s on one GPU and on several: threads in one process, and one process per GPU.

Written for the two-GPU machine (nvidia-h200-x2, scripts/gpu_machine.sh stage ``multigpu``);
it runs on whatever there is and says what it could not do (on lavapipe: one device, so the
two-device rows are reported as not run, with the reason).

Devices: the NVIDIA GPUs in CUDA's order (ortops.visible.cuda_order) when there are any, else
every Vulkan device. Configurations, each for ``--seconds`` after a warm-up:

* ``threads``: one process, one session per device, ``T`` threads per device sharing it;
  one device, then every device at once;
* ``processes``: one process per device, each with its own session and ``T`` threads; on
  NVIDIA each child is given its GPU as a scheduler would (``CUDA_VISIBLE_DEVICES=<i>``) and
  picks it through ortops.visible.assigned_device, and the parent checks that it got the
  GPU with that CUDA index (by UUID).

Every run's outputs are compared bit for bit with the serial result of the same feed on the
same device, computed first in the parent; a mismatch fails the script (exit status 1).
Writes multi_gpu.json and multi_gpu.md under ``--out`` (default $OUT, else ./gpu-out).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import pathlib
import sys
import tempfile
import threading
import time

import numpy as np

from ortops.tools.bench import write_report

ROOT = pathlib.Path(__file__).resolve().parents[1]
FEEDS = 8   # distinct inputs, cycled; each checked against its serial result


def _parse_counts(text: str) -> list[int]:
    counts = [int(t) for t in text.split(",") if t.strip()]
    if not counts or min(counts) < 1:
        raise SystemExit(f"multi_gpu: --threads must be positive integers, got {text!r}")
    return counts


def _model_path(args) -> str:
    if args.model:
        return args.model
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_models   # noqa: E402 - the repository's sample models

    path = os.path.join(tempfile.mkdtemp(prefix="ortops-multigpu-"), "recognizer.onnx")
    import onnx

    onnx.save(make_models.recognizer(), path)
    return path


def _feeds(model_path: str, batch: int, seed: int = 7) -> list[dict]:
    import onnx

    x = onnx.load(model_path).graph.input[0]
    dims = [d.dim_value if d.HasField("dim_value") else batch for d in x.type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    return [{x.name: rng.uniform(-1, 1, dims).astype(np.float32)} for _ in range(FEEDS)]


def _devices():
    """(devices used, what they are): NVIDIA GPUs in CUDA order, else every Vulkan device."""
    import ortops
    from ortops.visible import cuda_order

    found = ortops.devices()
    gpus = cuda_order(found, "PCI_BUS_ID")
    return (gpus, "nvidia") if gpus else (found, "vulkan")


def _session(model_path: str, device):
    import ortops

    return ortops.InferenceSession(model_path, providers=["CPUExecutionProvider"], device=device, require_gpu=True)


def _serial(model_path: str, device, feeds) -> list[list[bytes]]:
    sess = _session(model_path, device)
    return [[o.tobytes() for o in sess.run(None, f)] for f in feeds]


def _drive(sessions, feeds, expected, threads, seconds, warmup, start=None):
    """Run ``threads`` threads per session for ``seconds`` (after ``warmup`` s of untimed runs,
    then waiting on ``start`` if given, e.g. the other processes); returns (runs, mismatches,
    elapsed s). ``expected[k]``: serial outputs of session k, by feed index."""
    stop, go = threading.Event(), threading.Event()
    counts, bad = [], []
    lock = threading.Lock()
    ready = threading.Barrier(len(sessions) * threads + 1)

    def worker(k, t):
        sess, want = sessions[k], expected[k]
        i, n, wrong = t, 0, 0
        end_warm = time.perf_counter() + warmup
        while time.perf_counter() < end_warm:
            sess.run(None, feeds[i % FEEDS]); i += 1
        ready.wait()
        go.wait()
        while not stop.is_set():
            out = sess.run(None, feeds[i % FEEDS])
            wrong += [o.tobytes() for o in out] != want[i % FEEDS]
            i += 1; n += 1
        with lock:
            counts.append(n); bad.append(wrong)

    pool = [threading.Thread(target=worker, args=(k, t)) for k in range(len(sessions)) for t in range(threads)]
    for th in pool:
        th.start()
    ready.wait()
    if start is not None:
        start.wait()
    t0 = time.perf_counter()
    go.set()
    time.sleep(seconds)
    stop.set()
    for th in pool:
        th.join()
    return sum(counts), sum(bad), time.perf_counter() - t0


def _threads_row(model_path, devices, feeds, expected, threads, args) -> dict:
    sessions = [_session(model_path, d) for d in devices]
    runs, bad, elapsed = _drive(sessions, feeds, [expected[d.uuid] for d in devices], threads,
                                args.seconds, args.warmup)
    return {"mode": "threads", "devices": len(devices), "threads_per_device": threads, "runs": runs,
            "seconds": round(elapsed, 3), "runs_per_s": round(runs / elapsed, 1), "mismatches": bad}


def _child(model_path, rank, kind, uuid, feeds, expected, threads, seconds, warmup, start, results):
    """One process on one device: pinned as a scheduler would (CUDA_VISIBLE_DEVICES, set by
    the parent before the start) on NVIDIA, by UUID otherwise."""
    try:
        from ortops.visible import assigned_device

        device = assigned_device() if kind == "nvidia" else "GPU-" + uuid
        sess = _session(model_path, device)
        runs, bad, elapsed = _drive([sess], feeds, [expected], threads, seconds, warmup, start)
        results.put({"rank": rank, "uuid": _chosen_uuid(sess), "runs": runs, "mismatches": bad, "seconds": elapsed})
    except BaseException as e:  # noqa: BLE001 - reported by the parent
        try:
            start.abort()
        except Exception:
            pass
        results.put({"rank": rank, "error": f"{type(e).__name__}: {e}"})


def _chosen_uuid(sess) -> str:
    from ortops.ort import customop

    return sess.node_configs[0].device


def _processes_row(model_path, devices, kind, feeds, expected, threads, args) -> dict:
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(len(devices) + 1)
    results = ctx.Queue()
    procs = []
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    try:
        for rank, d in enumerate(devices):
            if kind == "nvidia":
                os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)   # its CUDA index (devices are in CUDA order)
            p = ctx.Process(target=_child, args=(model_path, rank, kind, d.uuid, feeds, expected[d.uuid], threads,
                                                 args.seconds, args.warmup, start, results))
            p.start()
            procs.append(p)
    finally:
        if saved is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved
    try:
        start.wait(timeout=600)
    except threading.BrokenBarrierError:
        pass
    got = [results.get(timeout=args.seconds + 600) for _ in procs]
    for p in procs:
        p.join()
    errors = [g["error"] for g in got if "error" in g]
    if errors:
        return {"mode": "processes", "devices": len(devices), "threads_per_device": threads, "error": "; ".join(errors)}
    wrong_gpu = [g for g in got if g["uuid"] != devices[g["rank"]].uuid]
    runs = sum(g["runs"] for g in got)
    elapsed = max(g["seconds"] for g in got)
    return {"mode": "processes", "devices": len(devices), "threads_per_device": threads, "runs": runs,
            "seconds": round(elapsed, 3), "runs_per_s": round(runs / elapsed, 1),
            "mismatches": sum(g["mismatches"] for g in got),
            "pinning": "ok" if not wrong_gpu else f"wrong device for rank(s) {[g['rank'] for g in wrong_gpu]}"}


def _markdown(report: dict) -> str:
    lines = [f"# Recognizer runs/s on {report['devices_found']} device(s)", "",
             f"Model {report['model']}, batch {report['batch']}, {report['seconds']} s per row after "
             f"{report['warmup']} s warm-up; devices: " + "; ".join(report["device_names"]), "",
             "| mode | devices | threads per device | runs/s | runs | mismatches | note |",
             "|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        note = r.get("error") or r.get("not_run") or r.get("pinning", "")
        lines.append(f"| {r['mode']} | {r['devices']} | {r['threads_per_device']} | {r.get('runs_per_s', '-')} | "
                     f"{r.get('runs', '-')} | {r.get('mismatches', '-')} | {note} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="ONNX model (default: the sample recognizer, scripts/make_models.py)")
    ap.add_argument("--batch", type=int, default=1, help="the batch dimension of the input (default 1)")
    ap.add_argument("--threads", default="1,2,4", help="threads per device, a comma list (default 1,2,4)")
    ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per row (default 5)")
    ap.add_argument("--warmup", type=float, default=1.0, help="untimed seconds of runs first (default 1)")
    ap.add_argument("--devices", type=int, default=2, help="devices to use at most (default 2)")
    ap.add_argument("--no-processes", action="store_true", help="skip the one-process-per-device rows")
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu-out"))
    args = ap.parse_args(argv)
    counts = _parse_counts(args.threads)
    model_path = _model_path(args)
    devices, kind = _devices()
    devices = devices[: args.devices]
    feeds = _feeds(model_path, args.batch)
    expected = {d.uuid: _serial(model_path, d, feeds) for d in devices}
    rows = []
    groups = [devices[:1]] + ([devices] if len(devices) > 1 else [])
    for t in counts:
        for group in groups:
            rows.append(_threads_row(model_path, group, feeds, expected, t, args))
            print(json.dumps(rows[-1]), flush=True)
        if not args.no_processes:
            for group in groups:
                rows.append(_processes_row(model_path, group, kind, feeds, expected, t, args))
                print(json.dumps(rows[-1]), flush=True)
        if len(devices) < 2:
            rows.append({"mode": "threads/processes", "devices": 2, "threads_per_device": t,
                         "not_run": f"only {len(devices)} device(s) ({kind}) here"})
    report = {"model": os.path.basename(model_path), "batch": args.batch, "seconds": args.seconds,
              "warmup": args.warmup, "kind": kind, "devices_found": len(devices),
              "device_names": [f"{d.name} GPU-{d.uuid} {d.pci_bus_id or ''}".strip() for d in devices], "rows": rows}
    write_report(args.out, "multi_gpu", report, _markdown(report))
    print(_markdown(report))
    failed = [r for r in rows if r.get("error") or r.get("mismatches") or r.get("pinning", "ok") != "ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
