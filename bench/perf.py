#!/usr/bin/env python3
"""docs/perf.md's tables: ``ortops bench``'s figures beside cuDNN and ORT's WebGPU EP, and the sweep.

Per shape and precision, what ``ortops bench`` measures (ortops/tools/bench.py: GPU time,
layer call, session end to end, host overhead, scaled error, ORT CPU on 1 thread / all cores),
and right after each row:
  host_work_ms  layer_call_ms - gpu_ms, against host_bound_ms (hostcopy.py: 0.05 ms + 1.2 x
                bytes in and out / one thread's memcpy bandwidth, measured in the same run);
  cudnn         torch's nn.LSTM / nn.GRU on CUDA in each precision mode of the dtype (cudnn.py:
                strict f32 and TF32 for float32, f16 for float16): GPU time from CUDA events,
                copy in + compute + copy out, and its scaled error against the same module in
                float64, where torch with CUDA imports;
  gpu_vs_cudnn, e2e_vs_cudnn_e2e  the ratios the targets read (cuDNN strict f32 for float32
                rows, cuDNN f16 for float16 rows);
  webgpu_ms     ONNX Runtime's WebGPU plugin EP (onnxruntime-ep-webgpu) end to end, where it
                finds an adapter.
It writes perf.json, the tables into perf.md (between its bench markers, keeping the prose) and,
where matplotlib imports, perf.png into ``--out``. ``--sweep`` runs the batch x hidden sweep
instead (sweep.py: sweep.json, sweep.md, sweep.png, perf.md's sweep markers); ``--from-json``
writes the tables of saved results without measuring.

    python bench/perf.py --out /tmp/b --write-docs docs/perf.md   # the anchor shapes
    python bench/perf.py --small --out /tmp/b                     # small shapes (lavapipe)
    python bench/perf.py --sweep --estimate    # the sweep's expected time on an H200
    python bench/perf.py --sweep --out /tmp/s  # the sweep
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))   # bench/'s helpers (python -P leaves it off)

from ortops import modes   # noqa: E402
from ortops.timing import median_s   # noqa: E402
from ortops.tools import bench   # noqa: E402

import cudnn   # noqa: E402
import hostcopy   # noqa: E402
import sweep   # noqa: E402
from report import plot_safely, pyplot, write_table   # noqa: E402

log = logging.getLogger("ortops.bench")

#: cuDNN's precision mode that the ratio columns divide by, per ortops dtype: the one that keeps
#: the same arithmetic contract (float32 products for float32; half for float16).
RATIO_PEER = {"float32": "strict", "float16": "float16"}
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def webgpu_ms(model, X, runs):
    """ONNX Runtime's WebGPU plugin EP (onnxruntime-ep-webgpu), or None where it finds no adapter."""
    try:
        import onnxruntime as ort
        import onnxruntime_ep_webgpu as wg
    except ImportError:
        return None
    try:
        name = wg.get_ep_name()
        if not getattr(webgpu_ms, "registered", False):
            ort.register_execution_provider_library(name, wg.get_library_path())
            webgpu_ms.registered = True
        devs = [d for d in ort.get_ep_devices() if d.ep_name == name]
        if not devs:
            return None
        so = ort.SessionOptions()
        so.add_provider_for_devices(devs, {})
        sess = ort.InferenceSession(model.SerializeToString(), so)
        return 1e3 * median_s(lambda: sess.run(None, {"X": X}), runs, warmup_runs=3)
    except Exception as exc:  # no adapter, or an older onnxruntime without plugin EPs
        log.warning("webgpu EP unavailable: %s", exc)
        return None


def cudnn_figures(cell, batch, inp, hidden, direction, X, runs, *, budget_s=None, error=True):
    """cuDNN in every precision mode of X's dtype: {mode: figures or None} ({} for RNN)."""
    if cell == "RNN":  # no anchor shape is an RNN; cuDNN is measured for LSTM and GRU
        return {}
    return {p: cudnn.measure(cell, batch, inp, hidden, direction, p, X, runs, budget_s=budget_s,
                             error=error)
            for p in cudnn.for_dtype(X.dtype)}


def targets(row):
    """The derived columns the issue's targets read: ratios to cuDNN and the host work."""
    peer = (row.get("cudnn") or {}).get(RATIO_PEER.get(row["dtype"], "")) or {}
    return dict(gpu_vs_cudnn=bench.ratio(row["gpu_ms"], peer.get("gpu_ms")),
                e2e_vs_cudnn_e2e=bench.ratio(row["e2e_ms"], peer.get("e2e_ms")),
                host_work_ms=row["layer_call_ms"] - row["gpu_ms"])


def peers(runs, bandwidth, baselines):
    """The ``peers`` of ``ortops.tools.bench.run``: this table's columns for a measured row."""
    def figures(row, model, X):
        extra = dict(
            cudnn=(cudnn_figures(row["cell"], row["batch"], row["input"], row["hidden"], row["direction"],
                                 X, runs) if baselines else {}),
            webgpu_ms=webgpu_ms(model, X, runs) if baselines else None,
            host_bound_ms=hostcopy.host_bound_ms(row["bytes_in"], row["bytes_out"], bandwidth["warm"]),
            host_bound_fresh_ms=hostcopy.host_bound_ms(row["bytes_in"], row["bytes_out"], bandwidth["fresh"]))
        extra.update(targets(dict(row, **extra)))
        for c in extra["cudnn"].values():
            if c:
                log.info("  %s: GPU %.3f ms, e2e %.3f ms, error %.2e", c["label"], c["gpu_ms"], c["e2e_ms"],
                         c["error"])
        return extra
    return figures


def run(shapes, dtypes, runs, device=None, baselines=True, mode=None, warm_s=3.0):
    """``ortops bench``'s report with this table's columns, one thread's memcpy bandwidth at the
    largest call's size (fresh and warm destination) and torch's versions."""
    bandwidth = hostcopy.memcpy_bandwidth(max(hostcopy.io_bytes(s, d) for s in shapes for d in dtypes))
    report = bench.run(shapes, dtypes, runs, device, baselines=baselines, mode=mode, warm_s=warm_s,
                       peers=peers(runs, bandwidth, baselines))
    report.update(memcpy_bandwidth=bandwidth, torch=cudnn.versions(),
                  command="python " + " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]))
    return report


def _peer_cell(c):
    """A cuDNN figure: GPU / e2e ms (scaled error)."""
    if not c:
        return "—"
    return f"{bench.fmt(c['gpu_ms'])} / {bench.fmt(c['e2e_ms'])} ({bench.fmt_err(c.get('error'))})"


def header_lines(report):
    lines = bench.header_lines(report)
    bw = report.get("memcpy_bandwidth")
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
    fmt = bench.fmt
    lines = header_lines(report) + [
        "",
        "| layer | dtype | ortops GPU ms | ortops e2e ms | host overhead ms | layer call ms "
        "| host work ms (bound) | ORT CPU 1 thr ms | ORT CPU all ms | WebGPU EP ms "
        "| memory MiB (budget) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {bench.layer_name(r)} | {r['dtype']} | {fmt(r['gpu_ms'])} | {fmt(r['e2e_ms'])} | "
            f"{fmt(r['overhead_ms'])} | {fmt(r.get('layer_call_ms'))} | "
            f"{fmt(r.get('host_work_ms'))} ({fmt(r.get('host_bound_ms'))}) | {fmt(r['ort1_ms'], 2)} | "
            f"{fmt(r['ortN_ms'], 2)} | {fmt(r['webgpu_ms'], 1)} | "
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
        cells = [_peer_cell((r.get("cudnn") or {}).get(p)) for p in cudnn.PRECISIONS]
        lines.append(
            f"| {bench.layer_name(r)} | {r['dtype']} | {bench.fmt_err(r.get('error'))} | " + " | ".join(cells)
            + f" | {fmt(r.get('gpu_vs_cudnn'), 2)} | {fmt(r.get('e2e_vs_cudnn_e2e'), 2)} | "
            f"{fmt(r.get('e2e_vs_ortN'), 2)} |")
    return "\n".join(lines) + "\n"


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
    parser = argparse.ArgumentParser(prog="bench/perf.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="bench-out",
                        help="folder of perf.json, perf.md, perf.png or sweep.* (default ./bench-out)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--small", action="store_true", help="small shapes (for lavapipe)")
    parser.add_argument("--dtype", choices=sorted(bench.DTYPES), default="both")
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
    sweep_args = parser.add_argument_group("sweep (sweep.py)")
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


def _sweep_config(args, parser):
    small = args.small
    dtypes = {"float32": ["float32"], "float16": ["float16"]}.get(args.dtype, ["float32", "float16"])
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


def publish(report, out, docs=None):
    """Write a bench or sweep report into ``out`` and return its table: perf.json and perf.png,
    or the sweep's sweep.json, sweep.md and sweep.png; the table goes between the report's
    markers of ``docs`` (default out/perf.md, the prose around them kept)."""
    docs = docs or os.path.join(out, "perf.md")
    os.makedirs(out, exist_ok=True)
    if report.get("kind") == "sweep":
        sweep.check_report(report)
        table = sweep.markdown(report)
        bench.write_report(out, "sweep", report, table)
        write_table(docs, table, sweep.BEGIN, sweep.END)
        plot_safely(sweep.plot, report, os.path.join(out, "sweep.png"))
        return table
    table = markdown(report)
    with open(os.path.join(out, "perf.json"), "w") as f:
        json.dump(report, f, indent=1)
    write_table(docs, table, BEGIN, END)
    plot_safely(plot, report, os.path.join(out, "perf.png"))
    return table


def _from_json(args, parser):
    reports = []
    for path in args.from_json:
        with open(path) as f:
            reports.append(json.load(f))
    if len(reports) > 1 and any(r.get("kind") != "sweep" for r in reports):
        parser.error("--from-json: only sweep.json files can be joined")
    report = sweep.merge(reports) if len(reports) > 1 else reports[0]
    print(bench.logged(lambda: publish(report, args.out, args.write_docs), sys.stderr))
    return 0


def _sweep(args, parser):
    cfg = _sweep_config(args, parser)
    if args.estimate:  # (sweep.run() logs the same line before it starts)
        print(f"sweep: {len(sweep.points(cfg))} points, modes {', '.join(cfg.modes)}; "
              f"expected {sweep.estimate_s(cfg) / 60:.1f} min on an H200")
        return 0
    partial = os.path.join(args.out, "sweep.partial.json")
    os.makedirs(args.out, exist_ok=True)

    def save(so_far):  # what ran, should the device call end before the sweep does
        with open(partial, "w") as f:
            json.dump(so_far, f, indent=1)

    report = bench.logged(lambda: sweep.run(cfg, on_point=save), sys.stderr)
    print(bench.logged(lambda: publish(report, args.out, args.write_docs), sys.stderr))
    if os.path.exists(partial):
        os.remove(partial)  # sweep.json has it all now
    return 0


def main(argv=None) -> int:
    """Run the benchmark (or the sweep) and write its json, markdown table and plot."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.warm < 0:
        parser.error("--warm must be at least 0")
    if args.from_json:
        return _from_json(args, parser)
    if args.sweep or args.estimate:
        return _sweep(args, parser)
    shapes = bench.SMALL_SHAPES if args.small else bench.ANCHOR_SHAPES
    if args.shape:
        if not all(0 <= i < len(shapes) for i in args.shape):
            parser.error(f"--shape: an index 0 to {len(shapes) - 1}, got {args.shape}")
        shapes = [shapes[i] for i in args.shape]
    report = bench.logged(lambda: run(shapes, bench.DTYPES[args.dtype], args.runs, args.device,
                                       baselines=not args.no_baselines, mode=args.mode, warm_s=args.warm),
                           sys.stderr)
    print(bench.logged(lambda: publish(report, args.out, args.write_docs), sys.stderr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
