"""Benchmark harness: ortops beside stock ORT CPU, cuDNN and ORT's WebGPU EP, in one run.

For each shape and precision it measures, medians of ``--runs`` runs after warm-up:
  gpu_ms        GPU time of the layer, from Vulkan timestamps around its passes;
  layer_call_ms the layer called from numpy (numpy in, numpy out); host_work_ms = it - gpu_ms,
                against host_bound_ms (ortops/tools/hostcopy.py: 0.05 ms + 1.2 x bytes in and
                out / one thread's memcpy bandwidth, measured in the same run);
  e2e_ms        end-to-end latency of a one-node model through ortops.InferenceSession
                (numpy in, numpy out);
  overhead_ms   e2e_ms - gpu_ms - the submit-and-wait round trip of an empty Kompute sequence;
  error         ortops's scaled error against the float64 reference (ortops.reference);
  ort1_ms / ortN_ms  stock ONNX Runtime CPU on the same model, one thread / all cores;
  cudnn         torch's nn.LSTM / nn.GRU on CUDA in each precision mode of the dtype
                (ortops/tools/cudnn.py: strict f32 and TF32 for float32, f16 for float16):
                GPU time from CUDA events, copy in + compute + copy out, and its scaled error
                against the same module in float64, where torch with CUDA imports;
  gpu_vs_cudnn, e2e_vs_cudnn_e2e, e2e_vs_ortN  the ratios the targets read (cuDNN strict f32
                for float32 rows, cuDNN f16 for float16 rows);
  webgpu_ms     ONNX Runtime's WebGPU plugin EP (onnxruntime-ep-webgpu) end to end, where it
                finds an adapter.
It writes perf.json, the tables into perf.md (between its bench markers, keeping the prose)
and, where matplotlib imports, perf.png into ``--out``. ``--sweep`` runs the batch x hidden
sweep instead (ortops/tools/sweep.py: sweep.json, sweep.md, sweep.png, perf.md's sweep
markers); ``--from-json`` writes the tables of saved results without measuring.

    python scripts/gpu/bench.py --out docs            # the five anchor shapes, float32 and float16
    python scripts/gpu/bench.py --small --out /tmp/b  # small shapes (lavapipe)
    python scripts/gpu/bench.py --sweep --estimate    # the sweep's expected time on an H200
    python scripts/gpu/bench.py --sweep --out /tmp/s  # the sweep
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import sys

import numpy as np

from ortops import modes, vocabulary
from ortops.modes import check_mode
from ortops.tools import cudnn, hostcopy, measure, sweep
from ortops.tools.report import plot_safely, pyplot, write_report, write_table

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


#: cuDNN's precision mode that the ratio columns divide by, per ortops dtype: the one that keeps
#: the same arithmetic contract (float32 products for float32; half for float16).
RATIO_PEER = {d: cudnn.for_dtype(d)[0] for d in vocabulary.DTYPES}


def _cudnn_figures(cell, batch, inp, hidden, direction, X, runs, *, budget_s=None, error=True):
    """cuDNN in every precision mode of X's dtype: {mode: figures or None} ({} for RNN)."""
    if cell == "RNN":  # no anchor shape is an RNN; cuDNN is measured for LSTM and GRU
        return {}
    return {p: cudnn.measure(cell, batch, inp, hidden, direction, p, X, runs, budget_s=budget_s,
                             error=error)
            for p in cudnn.for_dtype(X.dtype)}


def _ratio(a, b):
    return None if a is None or not b else a / b


def _targets(row):
    """The derived columns the issue's targets read: ratios to the peers and host work."""
    peer = (row.get("cudnn") or {}).get(RATIO_PEER.get(row["dtype"], "")) or {}
    host = row["layer_call_ms"] - row["gpu_ms"]
    return dict(gpu_vs_cudnn=_ratio(row["gpu_ms"], peer.get("gpu_ms")),
                e2e_vs_cudnn_e2e=_ratio(row["e2e_ms"], peer.get("e2e_ms")),
                e2e_vs_ortN=_ratio(row["e2e_ms"], row["ortN_ms"]),
                host_work_ms=host)


def run(shapes, dtypes, runs, device=None, progress=True, baselines=True, mode=None, warm_s=3.0):
    """Measure every shape and dtype in ``mode`` (ortops.modes); return a list of result dicts."""
    from ortops.device import select

    dev = select(device)
    trip = measure.round_trip_ms(device, runs)
    eval_split = measure.eval_split_us(device, runs)
    measure.warm_process(device, runs)
    # One thread's memcpy speed at the largest call's size (fresh and warm destination): the
    # yardstick of the host-work bound (ortops/tools/hostcopy.py).
    bandwidth = hostcopy.memcpy_bandwidth(max(measure.io_bytes(s, d) for s in shapes for d in dtypes))
    measure.warm_gpu(max(shapes, key=lambda s: s[1] * s[2] * s[3] * s[4]), device, warm_s)
    rows = []
    for cell, seq, batch, inp, hidden, direction in shapes:
        for dtype in dtypes:
            dt = np.dtype(dtype)
            label = f"{cell} {seq}x{batch}x{inp}->{hidden} {direction} {dt.name}"
            if progress:
                log.info("bench: %s", label)
            model = measure.one_node_model(cell, seq, batch, inp, hidden, direction, dt.type)
            X = np.random.default_rng(2).standard_normal((seq, batch, inp)).astype(dt)
            f = measure.layer_figures(cell, seq, batch, inp, hidden, direction, dt.type, runs,
                                      device, mode, error=True, X=X)
            e2e = measure.session_ms(model, X, runs, device, mode)
            gpu = f["gpu_ms"]
            row = dict(
                cell=cell, seq=seq, batch=batch, input=inp, hidden=hidden, direction=direction,
                dtype=dt.name, gpu_ms=gpu, layer_call_ms=f["layer_call_ms"], e2e_ms=e2e,
                overhead_ms=None if e2e is None else e2e - gpu - trip,
                error=f["error"],
                ort1_ms=measure.ort_cpu_ms(model, X, runs, 1) if baselines else None,
                ortN_ms=measure.ort_cpu_ms(model, X, runs, os.cpu_count() or 1) if baselines else None,
                cudnn=(_cudnn_figures(cell, batch, inp, hidden, direction, X, runs)
                       if baselines else {}),
                webgpu_ms=measure.webgpu_ms(model, X, runs) if baselines else None,
                memory_bytes=f["memory_bytes"], memory_budget_bytes=f["memory_budget_bytes"],
                gpu_profile=f["gpu_profile"], bytes_in=f["bytes_in"], bytes_out=f["bytes_out"],
                host_bound_ms=hostcopy.host_bound_ms(f["bytes_in"], f["bytes_out"],
                                                     bandwidth["warm"]),
                host_bound_fresh_ms=hostcopy.host_bound_ms(f["bytes_in"], f["bytes_out"],
                                                           bandwidth["fresh"]),
            )
            row.update(_targets(row))
            rows.append(row)
            if progress:
                log.info("  %s", ", ".join(f"{k}={v:.3f}" for k, v in row.items()
                                           if k.endswith("_ms") and v is not None))
                for p, c in row["cudnn"].items():
                    if c:
                        log.info("  %s: GPU %.3f ms, e2e %.3f ms, error %.2e", c["label"],
                                 c["gpu_ms"], c["e2e_ms"], c["error"])
    return dict(device=str(dev), driver=f"{dev.driver} {dev.driver_info}", round_trip_ms=trip,
                round_trip_fence_ms=measure.round_trip_ms(device, runs, poll=False),
                mode=check_mode(mode),
                eval_split_us=eval_split, memcpy_bandwidth=bandwidth, torch=cudnn.versions(),
                runs=runs, host=platform.node(), cpus=os.cpu_count(),
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                command="python " + " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                results=rows)


def _fmt(v, digits=3):
    return "—" if v is None else f"{v:.{digits}f}"


def _fmt_err(v):
    return "—" if v is None else f"{v:.1e}"


def _peer_cell(c):
    """A cuDNN figure: GPU / e2e ms (scaled error)."""
    if not c:
        return "—"
    return f"{_fmt(c['gpu_ms'])} / {_fmt(c['e2e_ms'])} ({_fmt_err(c.get('error'))})"


def _layer_name(r):
    return f"{r['cell']} {r['seq']}×{r['batch']}×{r['input']}→{r['hidden']} {r['direction'][:5]}"


def header_lines(report):
    bw = report.get("memcpy_bandwidth")
    lines = [
        f"Device: {report['device']}, driver {report['driver']}; {report['cpus']} CPU cores; "
        f"{report['date']}; medians of {report['runs']} runs after warm-up.",
        f"Kompute submit-and-wait round trip (empty sequence): {report['round_trip_ms']:.3f} ms "
        f"polling the completion marker, {report.get('round_trip_fence_ms', float('nan')):.3f} ms "
        "with Kompute's fence wait alone.",
    ]
    if bw:
        lines.append(f"One thread's numpy memcpy of {bw['bytes'] / 2**20:.2f} MiB: "
                     f"{bw['fresh'] / 1e9:.2f} GB/s into fresh memory, {bw['warm'] / 1e9:.2f} GB/s "
                     f"into touched memory (the host-work bound uses the latter: "
                     f"{hostcopy.FIXED_MS} ms + {hostcopy.FACTOR} × bytes in and out / bandwidth).")
    if report.get("torch"):
        lines.append("cuDNN through " + ", ".join(f"{k} {v}" for k, v in report["torch"].items()) + ".")
    lines.append(f"Command: `{report['command']}`")
    return lines


def markdown(report) -> str:
    """The results as two markdown tables: ortops's figures, then ortops beside its peers."""
    lines = header_lines(report) + [
        "",
        "| layer | dtype | ortops GPU ms | ortops e2e ms | host overhead ms | layer call ms "
        "| host work ms (bound) | ORT CPU 1 thr ms | ORT CPU all ms | WebGPU EP ms "
        "| memory MiB (budget) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        host = r.get("host_work_ms")
        bound = r.get("host_bound_ms")
        lines.append(
            f"| {_layer_name(r)} | {r['dtype']} | {_fmt(r['gpu_ms'])} | {_fmt(r['e2e_ms'])} | "
            f"{_fmt(r['overhead_ms'])} | {_fmt(r.get('layer_call_ms'))} | "
            f"{_fmt(host)} ({_fmt(bound)}) | {_fmt(r['ort1_ms'], 2)} | {_fmt(r['ortN_ms'], 2)} | "
            f"{_fmt(r['webgpu_ms'], 1)} | "
            f"{r['memory_bytes'] / 2**20:.1f} ({1.5 * r['memory_budget_bytes'] / 2**20:.1f}) |")
    labels = [p.label for p in cudnn.PRECISIONS.values()]
    lines += [
        "",
        "Beside the peers, each in its precision mode: cuDNN cells are GPU ms / e2e ms (scaled "
        "error against torch's float64 module with the same weights and input); ortops's error "
        "is against ortops.reference (float64). Ratios divide by cuDNN strict f32 for float32 "
        "rows and by cuDNN f16 for float16 rows; e2e is the session for ortops, copy in + run + "
        "copy out for cuDNN.",
        "",
        "| layer | dtype | ortops error | " + " | ".join(f"{l} GPU / e2e ms (error)" for l in labels)
        + " | GPU ÷ cuDNN | e2e ÷ cuDNN e2e | e2e ÷ ORT CPU all |",
        "|---|---|---|" + "---|" * len(labels) + "---|---|---|",
    ]
    for r in report["results"]:
        peers = r.get("cudnn") or {}
        cells = [_peer_cell(peers.get(p)) for p in cudnn.PRECISIONS]
        lines.append(
            f"| {_layer_name(r)} | {r['dtype']} | {_fmt_err(r.get('error'))} | "
            + " | ".join(cells)
            + f" | {_fmt(r.get('gpu_vs_cudnn'), 2)} | {_fmt(r.get('e2e_vs_cudnn_e2e'), 2)} | "
            f"{_fmt(r.get('e2e_vs_ortN'), 2)} |")
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def _peer(key, precision):
    return lambda r: ((r.get("cudnn") or {}).get(precision) or {}).get(key)


def plot(report, path):
    """A bar chart of GPU and end-to-end times per layer (skipped without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return False
    rows = report["results"]
    keys = [(lambda r: r.get("gpu_ms"), "ortops GPU"), (lambda r: r.get("e2e_ms"), "ortops e2e"),
            (lambda r: r.get("ortN_ms"), "ORT CPU all cores")]
    for p in cudnn.PRECISIONS.values():
        keys += [(_peer("gpu_ms", p.name), f"{p.label} GPU"), (_peer("e2e_ms", p.name), f"{p.label} e2e")]
    keys.append((lambda r: r.get("webgpu_ms"), "WebGPU EP"))
    keys = [(get, name) for get, name in keys if any(get(r) for r in rows)]
    labels = [f"{r['cell']} {r['seq']}×{r['batch']}×{r['input']}→{r['hidden']}\n{r['dtype']}"
              for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(rows)), 5))
    width = 0.8 / max(1, len(keys))
    for i, (get, name) in enumerate(keys):
        xs = [j + i * width for j, r in enumerate(rows) if get(r)]
        ys = [get(r) for r in rows if get(r)]
        ax.bar(xs, ys, width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("ms (log scale)")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))])
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_title(report["device"])
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _ints(text):
    try:
        out = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}")
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return out


def _parser():
    parser = argparse.ArgumentParser(prog="ortops bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="docs")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--small", action="store_true", help="small shapes (for lavapipe)")
    parser.add_argument("--dtype", choices=[*vocabulary.DTYPES, "both"], default="both")
    parser.add_argument("--device", default=None)
    parser.add_argument("--shape", type=int, action="append",
                        help="index into the shape list (repeatable; default all)")
    parser.add_argument("--no-baselines", action="store_true",
                        help="ortops only (no ORT CPU, cuDNN, WebGPU EP)")
    parser.add_argument("--mode", default=modes.DEFAULT, choices=sorted(modes.MODES),
                        help="numerical mode of the layers (ortops.modes; docs/exact.md)")
    parser.add_argument("--warm", type=float, default=3.0, metavar="SECONDS",
                        help="seconds of the heaviest shape before timing (GPU clocks; default 3)")
    parser.add_argument("--write-docs", metavar="MD", default=None,
                        help="the markdown file whose markers get the table (default OUT/perf.md)")
    parser.add_argument("--from-json", metavar="JSON", action="append",
                        help="measure nothing: write the table of a saved perf.json or sweep.json "
                             "into --write-docs (and its plot into --out, with matplotlib); "
                             "repeated, sweep.json files of one sweep run in parts are joined")
    sweep_args = parser.add_argument_group("sweep (ortops/tools/sweep.py)")
    sweep_args.add_argument("--sweep", action="store_true",
                            help="the batch x hidden sweep instead of the anchor shapes")
    sweep_args.add_argument("--sweep-batches", type=_ints, default=None,
                            help=f"comma list (default {','.join(map(str, sweep.BATCHES))})")
    sweep_args.add_argument("--sweep-hiddens", type=_ints, default=None,
                            help=f"comma list (default {','.join(map(str, sweep.HIDDENS))})")
    sweep_args.add_argument("--sweep-seq", type=int, default=None,
                            help=f"sequence length (default {sweep.SEQ}; --small {sweep.SMALL_SEQ})")
    sweep_args.add_argument("--sweep-seconds", type=float, default=0.2,
                            help="per figure: stop before --runs runs once this many seconds "
                                 "passed (at least 3 runs)")
    sweep_args.add_argument("--sweep-session-max-hidden", type=int, default=512,
                            help="through the session only up to this hidden size")
    sweep_args.add_argument("--sweep-modes", default=None,
                            help="comma list of ortops modes (default every mode of ortops.modes)")
    sweep_args.add_argument("--sweep-errors", action="store_true",
                            help="scaled errors against float64 references too (CPU time)")
    sweep_args.add_argument("--estimate", action="store_true",
                            help="print the sweep's expected time and stop")
    return parser


def _dtypes(choice: str) -> list:
    """The dtype names ``--dtype`` asks for: one, or every one for "both"."""
    return list(vocabulary.DTYPES) if choice == "both" else [choice]


def _sweep_config(args, parser):
    small = args.small
    dtypes = _dtypes(args.dtype)
    chosen = None
    if args.sweep_modes:
        chosen = [m.strip() for m in args.sweep_modes.split(",") if m.strip()]
        for m in chosen:
            if m not in modes.MODES:
                parser.error(f"--sweep-modes: mode must be one of {', '.join(modes.MODES)}, got {m!r}")
    seq = args.sweep_seq or (sweep.SMALL_SEQ if small else sweep.SEQ)
    if seq < 1 or args.sweep_seconds <= 0:
        parser.error("--sweep-seq and --sweep-seconds must be positive")
    return sweep.Config(
        batches=args.sweep_batches or (sweep.SMALL_BATCHES if small else sweep.BATCHES),
        hiddens=args.sweep_hiddens or (sweep.SMALL_HIDDENS if small else sweep.HIDDENS),
        seq=seq, dtypes=dtypes, runs=args.runs, point_s=args.sweep_seconds,
        session_max_hidden=args.sweep_session_max_hidden, errors=args.sweep_errors,
        cudnn=not args.no_baselines, device=args.device, warm_s=args.warm,
        **({"modes": chosen} if chosen else {}))


def _logged(fn, stream):
    """Run ``fn`` with the bench's progress lines shown on ``stream`` (main's stderr), for
    this command only."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    saved = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        return fn()
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]


def publish(report, out, docs=None):
    """Write a bench or sweep report into ``out`` and return its table: the bench's perf.json
    and perf.png, the sweep's sweep.json, sweep.md and sweep.png; the table goes between the
    report's markers of ``docs`` (default out/perf.md, the prose around them kept)."""
    docs = docs or os.path.join(out, "perf.md")
    os.makedirs(out, exist_ok=True)
    if report.get("kind") == "sweep":
        sweep.check_report(report)
        table = sweep.markdown(report)
        write_report(out, "sweep", report, table)
        write_table(docs, table, sweep.BEGIN, sweep.END)
        plot_safely(sweep.plot, report, os.path.join(out, "sweep.png"))
        return table
    table = markdown(report)
    with open(os.path.join(out, "perf.json"), "w") as f:
        json.dump(report, f, indent=1)
    write_table(docs, table, BEGIN, END)
    plot_safely(plot, report, os.path.join(out, "perf.png"))
    return table


def main(argv=None) -> int:
    """Run the benchmark (or the sweep) and write its json, markdown table and plot."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.warm < 0:
        parser.error("--warm must be at least 0")
    if args.from_json:
        reports = []
        for path in args.from_json:
            with open(path) as f:
                reports.append(json.load(f))
        if len(reports) > 1 and any(r.get("kind") != "sweep" for r in reports):
            parser.error("--from-json: only sweep.json files can be joined")
        report = sweep.merge(reports) if len(reports) > 1 else reports[0]
        print(_logged(lambda: publish(report, args.out, args.write_docs), sys.stderr))
        return 0
    if args.sweep or args.estimate:
        cfg = _sweep_config(args, parser)
        if args.estimate:  # (run() logs the same line before it starts)
            print(f"sweep: {len(sweep.points(cfg))} points, modes {', '.join(cfg.modes)}; "
                  f"expected {sweep.estimate_s(cfg) / 60:.1f} min on an H200")
            return 0
        partial = os.path.join(args.out, "sweep.partial.json")
        os.makedirs(args.out, exist_ok=True)

        def save(so_far):  # what ran, should the device call end before the sweep does
            with open(partial, "w") as f:
                json.dump(so_far, f, indent=1)

        report = _logged(lambda: sweep.run(cfg, on_point=save), sys.stderr)
        print(_logged(lambda: publish(report, args.out, args.write_docs), sys.stderr))
        if os.path.exists(partial):
            os.remove(partial)  # sweep.json has it all now
        return 0
    shapes = SMALL_SHAPES if args.small else ANCHOR_SHAPES
    if args.shape:
        shapes = [shapes[i] for i in args.shape]
    dtypes = [np.dtype(d).type for d in _dtypes(args.dtype)]
    report = _logged(lambda: run(shapes, dtypes, args.runs, args.device,
                                 baselines=not args.no_baselines, mode=args.mode, warm_s=args.warm),
                     sys.stderr)
    print(_logged(lambda: publish(report, args.out, args.write_docs), sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
