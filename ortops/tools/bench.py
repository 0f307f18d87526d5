"""Benchmark harness: ortops beside stock ORT CPU, cuDNN and ORT's WebGPU EP, in one run.

For each shape and precision it measures, medians of ``--runs`` runs after warm-up:
  gpu_ms        GPU time of the layer, from Vulkan timestamps around its passes;
  e2e_ms        end-to-end latency of a one-node model through ortops.InferenceSession
                (numpy in, numpy out);
  overhead_ms   e2e_ms - gpu_ms - the submit-and-wait round trip of an empty Kompute sequence;
  ort1_ms / ortN_ms  stock ONNX Runtime CPU on the same model, one thread / all cores;
  cudnn_ms / cudnn_e2e_ms  torch's nn.LSTM / nn.GRU on CUDA (cuDNN): GPU time from CUDA events,
                and copy in + compute + copy out, where torch with CUDA imports;
  webgpu_ms     ONNX Runtime's WebGPU plugin EP (onnxruntime-ep-webgpu) end to end, where it
                finds an adapter.
It writes perf.json, the table into perf.md (between its bench markers, keeping the prose)
and, where matplotlib imports, perf.png into ``--out``.

    python scripts/bench.py --out docs            # the five anchor shapes, float32 and float16
    python scripts/bench.py --small --out /tmp/b  # small shapes (lavapipe)
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import statistics
import sys
import time

import numpy as np

from ortops import modes
from ortops.modes import check_mode
from ortops.timing import median_s
from ortops.cells import CELLS

#: Progress (info) and unavailable baselines (warning); main() shows the info lines on stderr,
#: a program calling run() routes or silences them like any "ortops" record.
log = logging.getLogger("ortops.bench")

# cell, seq, batch, input, hidden, direction: the anchor table of the project's notes.
ANCHOR_SHAPES = [
    ("LSTM", 80, 1, 256, 256, "bidirectional"),
    ("LSTM", 48, 8, 192, 96, "bidirectional"),
    ("LSTM", 80, 8, 256, 256, "bidirectional"),
    ("GRU", 80, 1, 256, 256, "bidirectional"),
    ("LSTM", 200, 64, 512, 512, "bidirectional"),
]
SMALL_SHAPES = [
    ("LSTM", 8, 1, 32, 32, "bidirectional"),
    ("GRU", 8, 2, 32, 32, "bidirectional"),
    ("RNN", 8, 2, 32, 32, "forward"),
]


def _median_ms(fn, runs: int) -> float:
    return 1e3 * median_s(fn, runs, warmup_runs=3)


def _weights(cell, inp, hidden, dirs, dtype, seed=0):
    rng = np.random.default_rng(seed)
    g = CELLS[cell].gates
    s = 1.0 / np.sqrt(hidden)
    W = rng.uniform(-s, s, (dirs, g * hidden, inp)).astype(dtype)
    R = rng.uniform(-s, s, (dirs, g * hidden, hidden)).astype(dtype)
    B = rng.uniform(-s, s, (dirs, 2 * g * hidden)).astype(dtype)
    return W, R, B


def one_node_model(cell, seq, batch, inp, hidden, direction, dtype):
    """A model holding one recurrent node with its weights as initializers."""
    from onnx import TensorProto, helper, numpy_helper

    dirs = 2 if direction == "bidirectional" else 1
    W, R, B = _weights(cell, inp, hidden, dirs, dtype)
    elem = TensorProto.FLOAT16 if dtype == np.float16 else TensorProto.FLOAT
    outputs = list(CELLS[cell].outputs)
    node = helper.make_node(cell, ["X", "W", "R", "B"], outputs, hidden_size=hidden,
                            direction=direction)
    graph = helper.make_graph(
        [node], "bench",
        [helper.make_tensor_value_info("X", elem, [seq, batch, inp])],
        [helper.make_tensor_value_info(o, elem, None) for o in outputs],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"),
         numpy_helper.from_array(B, "B")])
    # IR version 8 (opset 14 needs >= 7): loadable by older onnxruntime builds too.
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _gpu_time(cell, seq, batch, inp, hidden, direction, dtype, runs, device, mode=None):
    from ortops.layer import RecurrentLayer

    dirs = 2 if direction == "bidirectional" else 1
    W, R, B = _weights(cell, inp, hidden, dirs, dtype)
    layer = RecurrentLayer(cell, W, R, B, direction=direction, device=device, timestamps=True,
                           mode=mode)
    X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(dtype)
    for _ in range(3):
        layer(X)
    gpu, parts = [], []
    for _ in range(runs):
        layer(X)
        gpu.append(layer.last_gpu_time_ms)
        parts.append(layer.last_gpu_profile)
    profile = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
    layer_e2e = _median_ms(lambda: layer(X), runs)
    memory = layer.memory_bytes(seq, batch)
    sizes = layer.scratch_sizes(seq, batch)
    return (statistics.median(gpu), layer_e2e, memory,
            layer.weight_bytes + sizes.xw + sizes.state, profile)


def _round_trip_ms(device, runs, poll=True):
    """Submit-and-wait of a prerecorded sequence doing nothing: the floor of any run.

    ``poll``: end with the completion marker that layers poll (their path); without it,
    Kompute's plain fence wait."""
    from ortops.device import context

    _, ctx = context(device)
    seq = ctx.sequence()
    seq.barrier("compute", "compute")
    if poll:
        seq.finish()
    return _median_ms(seq.eval, runs)


def _eval_split_us(device, runs):
    """Median microseconds of an empty run in submit, until its marker lands, in the fence wait."""
    from ortops.device import context

    _, ctx = context(device)
    seq = ctx.sequence()
    seq.barrier("compute", "compute")
    seq.finish()
    splits = [seq.profile_eval() for _ in range(runs + 3)][3:]
    return {k: statistics.median(s[i] for s in splits)
            for i, k in enumerate(("submit", "until_marker", "fence_wait"))}


def _ortops_session_ms(model, X, runs, device, mode=None):
    try:
        from ortops.ort.session import InferenceSession
    except ImportError:
        return None
    sess = InferenceSession(model.SerializeToString(), device=device, mode=mode)
    return _median_ms(lambda: sess.run(None, {"X": X}), runs)


def _ort_cpu_ms(model, X, runs, threads):
    import onnxruntime as ort

    if X.dtype != np.float32:
        return None  # stock ORT CPU has no float16 recurrent kernels
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return _median_ms(lambda: sess.run(None, {"X": X}), runs)


def _webgpu_ms(model, X, runs):
    try:
        import onnxruntime as ort
        import onnxruntime_ep_webgpu as wg
    except ImportError:
        return None
    try:
        name = wg.get_ep_name()
        if not getattr(_webgpu_ms, "registered", False):
            ort.register_execution_provider_library(name, wg.get_library_path())
            _webgpu_ms.registered = True
        devs = [d for d in ort.get_ep_devices() if d.ep_name == name]
        if not devs:
            return None
        so = ort.SessionOptions()
        so.add_provider_for_devices(devs, {})
        sess = ort.InferenceSession(model.SerializeToString(), so)
        return _median_ms(lambda: sess.run(None, {"X": X}), runs)
    except Exception as exc:  # no adapter, or an older onnxruntime without plugin EPs
        log.warning("webgpu EP unavailable: %s", exc)
        return None


def _cudnn_ms(cell, seq, batch, inp, hidden, direction, dtype, runs):
    try:
        import torch
    except ImportError:
        return None, None
    if cell == "RNN" or not torch.cuda.is_available():
        return None, None
    torch.backends.cudnn.benchmark = True
    cls = torch.nn.LSTM if cell == "LSTM" else torch.nn.GRU
    tdtype = torch.float16 if dtype == np.float16 else torch.float32
    net = cls(inp, hidden, bidirectional=direction == "bidirectional").cuda().to(tdtype).eval()
    x_host = torch.randn(seq, batch, inp, dtype=tdtype)
    x = x_host.cuda()
    with torch.no_grad():
        for _ in range(5):
            net(x)
        torch.cuda.synchronize()
        gpu = []
        for _ in range(runs):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            net(x)
            b.record()
            torch.cuda.synchronize()
            gpu.append(a.elapsed_time(b))

        def e2e():
            y, _ = net(x_host.cuda())
            y.cpu()
            torch.cuda.synchronize()

        return statistics.median(gpu), _median_ms(e2e, runs)


def run(shapes, dtypes, runs, device=None, progress=True, baselines=True, mode=None):
    """Measure every shape and dtype in ``mode`` (ortops.modes); return a list of result dicts."""
    from ortops.device import select

    dev = select(device)
    trip = _round_trip_ms(device, runs)
    eval_split = _eval_split_us(device, runs)
    # Warm the process (ORT's and onnxruntime-extensions' first-session set-up, the CPU's
    # clocks) so that the first shape of the table is measured like the others.
    warm = one_node_model("LSTM", 4, 1, 16, 16, "forward", np.float32)
    _ortops_session_ms(warm, np.zeros((4, 1, 16), np.float32), runs, device)
    # ... and the GPU's clocks: a few seconds of the heaviest shape before anything is timed
    # (on the H200 the first row measured 1.1 ms of GPU time after a second of light load,
    # 0.31 ms once the GPU had run heavy work).
    heaviest = max(shapes, key=lambda s: s[1] * s[2] * s[3] * s[4])
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 3.0:
        _gpu_time(*heaviest, np.float32, 3, device)
    rows = []
    for cell, seq, batch, inp, hidden, direction in shapes:
        for dtype in dtypes:
            dt = np.dtype(dtype)
            label = f"{cell} {seq}x{batch}x{inp}->{hidden} {direction} {dt.name}"
            if progress:
                log.info("bench: %s", label)
            model = one_node_model(cell, seq, batch, inp, hidden, direction, dt.type)
            X = np.random.default_rng(2).standard_normal((seq, batch, inp)).astype(dt)
            gpu, layer_e2e, memory, budget, profile = _gpu_time(cell, seq, batch, inp, hidden, direction,
                                                        dt.type, runs, device, mode)
            e2e = _ortops_session_ms(model, X, runs, device, mode)
            cudnn, cudnn_e2e = (_cudnn_ms(cell, seq, batch, inp, hidden, direction, dt.type, runs)
                                if baselines else (None, None))
            row = dict(
                cell=cell, seq=seq, batch=batch, input=inp, hidden=hidden, direction=direction,
                dtype=dt.name, gpu_ms=gpu, layer_call_ms=layer_e2e, e2e_ms=e2e,
                overhead_ms=None if e2e is None else e2e - gpu - trip,
                ort1_ms=_ort_cpu_ms(model, X, runs, 1) if baselines else None,
                ortN_ms=_ort_cpu_ms(model, X, runs, os.cpu_count() or 1) if baselines else None,
                cudnn_ms=cudnn, cudnn_e2e_ms=cudnn_e2e,
                webgpu_ms=_webgpu_ms(model, X, runs) if baselines else None,
                memory_bytes=memory, memory_budget_bytes=budget, gpu_profile=profile,
            )
            rows.append(row)
            if progress:
                log.info("  %s", ", ".join(f"{k}={v:.3f}" for k, v in row.items()
                                           if k.endswith("_ms") and v is not None))
    return dict(device=str(dev), driver=f"{dev.driver} {dev.driver_info}", round_trip_ms=trip,
                round_trip_fence_ms=_round_trip_ms(device, runs, poll=False), mode=check_mode(mode),
                eval_split_us=eval_split,
                runs=runs, host=platform.node(), cpus=os.cpu_count(),
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                command="python " + " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                results=rows)


def _fmt(v, digits=3):
    return "—" if v is None else f"{v:.{digits}f}"


def markdown(report) -> str:
    """The results as a markdown table."""
    lines = [
        f"Device: {report['device']}, driver {report['driver']}; {report['cpus']} CPU cores; "
        f"{report['date']}; medians of {report['runs']} runs after warm-up.",
        f"Kompute submit-and-wait round trip (empty sequence): {report['round_trip_ms']:.3f} ms "
        f"polling the completion marker, {report.get('round_trip_fence_ms', float('nan')):.3f} ms "
        "with Kompute's fence wait alone.",
        f"Command: `{report['command']}`",
        "",
        "| layer | dtype | ortops GPU ms | ortops e2e ms | host overhead ms | ORT CPU 1 thr ms "
        "| ORT CPU all ms | cuDNN GPU ms | cuDNN e2e ms | WebGPU EP ms | memory MiB (budget) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        name = f"{r['cell']} {r['seq']}×{r['batch']}×{r['input']}→{r['hidden']} {r['direction'][:5]}"
        lines.append(
            f"| {name} | {r['dtype']} | {_fmt(r['gpu_ms'])} | {_fmt(r['e2e_ms'])} | "
            f"{_fmt(r['overhead_ms'])} | {_fmt(r['ort1_ms'], 2)} | {_fmt(r['ortN_ms'], 2)} | "
            f"{_fmt(r['cudnn_ms'])} | {_fmt(r['cudnn_e2e_ms'])} | {_fmt(r['webgpu_ms'], 1)} | "
            f"{r['memory_bytes'] / 2**20:.1f} ({1.5 * r['memory_budget_bytes'] / 2**20:.1f}) |")
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def write_table(path, table):
    """Put the table between the bench markers of ``path``, keeping the prose around it."""
    text = open(path).read() if os.path.exists(path) else f"# Performance\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(path, "w") as f:
        f.write(f"{head}{BEGIN}\n{table}{END}{tail}")


def plot(report, path):
    """A bar chart of GPU and end-to-end times per layer (skipped without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = report["results"]
    keys = [("gpu_ms", "ortops GPU"), ("e2e_ms", "ortops e2e"), ("ortN_ms", "ORT CPU all cores"),
            ("cudnn_ms", "cuDNN GPU"), ("cudnn_e2e_ms", "cuDNN e2e"), ("webgpu_ms", "WebGPU EP")]
    labels = [f"{r['cell']} {r['seq']}×{r['batch']}×{r['input']}→{r['hidden']}\n{r['dtype']}"
              for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(rows)), 5))
    width = 0.8 / len(keys)
    for i, (k, name) in enumerate(keys):
        xs = [j + i * width for j, r in enumerate(rows) if r.get(k)]
        ys = [r[k] for r in rows if r.get(k)]
        ax.bar(xs, ys, width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))])
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_title(report["device"])
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None) -> int:
    """Run the benchmark and write perf.json, perf.md and perf.png."""
    parser = argparse.ArgumentParser(prog="ortops bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="docs")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--small", action="store_true", help="small shapes (for lavapipe)")
    parser.add_argument("--dtype", choices=["float32", "float16", "both"], default="both")
    parser.add_argument("--device", default=None)
    parser.add_argument("--shape", type=int, action="append",
                        help="index into the shape list (repeatable; default all)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="ortops only (no ORT CPU, cuDNN, WebGPU EP): for sweeps")
    parser.add_argument("--mode", default=modes.DEFAULT, choices=sorted(modes.MODES),
                        help="numerical mode of the layers (ortops.modes; docs/exact.md)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    shapes = SMALL_SHAPES if args.small else ANCHOR_SHAPES
    if args.shape:
        shapes = [shapes[i] for i in args.shape]
    dtypes = {"float32": [np.float32], "float16": [np.float16]}.get(args.dtype, [np.float32, np.float16])
    # The command shows run()'s progress lines on stderr, for its run only.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    saved = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        report = run(shapes, dtypes, args.runs, args.device, baselines=not args.no_baselines,
                     mode=args.mode)
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "perf.json"), "w") as f:
        json.dump(report, f, indent=1)
    table = markdown(report)
    write_table(os.path.join(args.out, "perf.md"), table)
    plot(report, os.path.join(args.out, "perf.png"))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
