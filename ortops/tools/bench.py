"""``ortops bench``: recurrent layers on this machine's Vulkan device, beside stock ONNX Runtime CPU.

For each shape and precision it measures, medians of ``--runs`` runs after warm-up:
  gpu_ms        GPU time of the layer, from Vulkan timestamps around its passes;
  layer_call_ms the layer called from numpy (numpy in, numpy out);
  e2e_ms        end-to-end latency of a one-node model through ortops.InferenceSession
                (numpy in, numpy out);
  overhead_ms   e2e_ms - gpu_ms - the submit-and-wait round trip of an empty Kompute sequence;
  error         ortops's scaled error against the float64 reference (ortops.reference);
  ort1_ms / ortN_ms  stock ONNX Runtime CPU on the same model, one thread / all cores (float32:
                it has no float16 recurrent kernels).
It writes bench.json (the figures) and bench.md (the table, also printed) into ``--out``.

    ortops bench                          # the five anchor shapes, float32 and float16
    ortops bench --small --runs 5         # three small shapes (a CPU implementation such as lavapipe)
    ortops bench --shape 0 --dtype float32 --mode exact

The peers of the project's own tables (cuDNN, ORT's WebGPU EP, the batch x hidden sweep) are
the repository's bench/ folder, not part of the package (bench/README.md).
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
from ortops.tools import measure
from ortops.tools.cli import ArgumentParser

#: Progress (info) and unavailable baselines (warning); main() shows the info lines on stderr,
#: a program calling run() routes or silences them like any "ortops" record.
log = logging.getLogger("ortops.bench")

#: Where ``ortops bench`` writes unless ``--out`` says otherwise (relative to the working folder).
DEFAULT_OUT = "ortops-bench"

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
#: --dtype's choices: each layer dtype of the core's vocabulary, or both.
DTYPES = {**{d: [np.dtype(d).type] for d in vocabulary.DTYPES}, "both": [np.dtype(d).type for d in vocabulary.DTYPES]}


def ratio(a, b):
    """a / b, or None where either is missing (or b is 0)."""
    return None if a is None or not b else a / b


def _row(shape, dt, runs, device, mode, trip, baselines):
    cell, seq, batch, inp, hidden, direction = shape
    model = measure.one_node_model(cell, seq, batch, inp, hidden, direction, dt.type)
    X = np.random.default_rng(2).standard_normal((seq, batch, inp)).astype(dt)
    f = measure.layer_figures(cell, seq, batch, inp, hidden, direction, dt.type, runs,
                              device, mode, error=True, X=X)
    e2e = measure.session_ms(model, X, runs, device, mode)
    gpu = f["gpu_ms"]
    row = dict(
        cell=cell, seq=seq, batch=batch, input=inp, hidden=hidden, direction=direction,
        dtype=dt.name, gpu_ms=gpu, layer_call_ms=f["layer_call_ms"], e2e_ms=e2e,
        overhead_ms=None if e2e is None else e2e - gpu - trip, error=f["error"],
        ort1_ms=measure.ort_cpu_ms(model, X, runs, 1) if baselines else None,
        ortN_ms=measure.ort_cpu_ms(model, X, runs, os.cpu_count() or 1) if baselines else None,
        memory_bytes=f["memory_bytes"], memory_budget_bytes=f["memory_budget_bytes"],
        gpu_profile=f["gpu_profile"], bytes_in=f["bytes_in"], bytes_out=f["bytes_out"])
    row["e2e_vs_ortN"] = ratio(e2e, row["ortN_ms"])
    return row, model, X


def run(shapes, dtypes, runs, device=None, progress=True, baselines=True, mode=None, warm_s=3.0,
        peers=None):
    """Measure every shape and dtype in ``mode`` (ortops.modes); return the report (a dict whose
    ``results`` hold one dict a shape and dtype). ``peers(row, model, X)``, where given, returns
    more figures for a row (bench/perf.py's cuDNN and WebGPU columns), measured right after it."""
    from ortops.device import select

    dev = select(device)
    trip = measure.round_trip_ms(device, runs)
    eval_split = measure.eval_split_us(device, runs)
    measure.warm_process(device, runs)
    measure.warm_gpu(max(shapes, key=lambda s: s[1] * s[2] * s[3] * s[4]), device, warm_s)
    rows = []
    for shape in shapes:
        for dtype in dtypes:
            dt = np.dtype(dtype)
            if progress:
                log.info("bench: %s %s", layer_name(dict(zip(SHAPE_KEYS, shape))), dt.name)
            row, model, X = _row(shape, dt, runs, device, mode, trip, baselines)
            if peers is not None:
                row.update(peers(row, model, X))
            rows.append(row)
            if progress:
                log.info("  %s", ", ".join(f"{k}={v:.3f}" for k, v in row.items()
                                           if k.endswith("_ms") and v is not None))
    return dict(device=str(dev), driver=f"{dev.driver} {dev.driver_info}", round_trip_ms=trip,
                round_trip_fence_ms=measure.round_trip_ms(device, runs, poll=False),
                mode=check_mode(mode), eval_split_us=eval_split,
                runs=runs, host=platform.node(), cpus=os.cpu_count(),
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                command=" ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                results=rows)


SHAPE_KEYS = ("cell", "seq", "batch", "input", "hidden", "direction")


def fmt(v, digits=3):
    """A figure of a table ("—" where there is none)."""
    return "—" if v is None else f"{v:.{digits}f}"


def fmt_err(v):
    """A scaled error of a table ("—" where there is none)."""
    return "—" if v is None else f"{v:.1e}"


def layer_name(r):
    """A row's layer as the tables name it: LSTM 80×1×256→256 bidir."""
    return f"{r['cell']} {r['seq']}×{r['batch']}×{r['input']}→{r['hidden']} {r['direction'][:5]}"


def header_lines(report):
    """The lines above a table: device, driver, date, runs, the empty run's round trip."""
    return [
        f"Device: {report['device']}, driver {report['driver']}; {report['cpus']} CPU cores; "
        f"{report['date']}; medians of {report['runs']} runs after warm-up; mode {report.get('mode')}.",
        f"Kompute submit-and-wait round trip (empty sequence): {report['round_trip_ms']:.3f} ms "
        f"polling the completion marker, {report.get('round_trip_fence_ms', float('nan')):.3f} ms "
        "with Kompute's fence wait alone.",
    ]


def markdown(report) -> str:
    """The results as one markdown table: ortops's figures beside ONNX Runtime CPU's."""
    lines = header_lines(report) + [
        f"Command: `{report['command']}`",
        "",
        "| layer | dtype | ortops GPU ms | ortops e2e ms | host overhead ms | layer call ms | error "
        "| ORT CPU 1 thr ms | ORT CPU all ms | e2e ÷ ORT CPU all | memory MiB (budget) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {layer_name(r)} | {r['dtype']} | {fmt(r['gpu_ms'])} | {fmt(r['e2e_ms'])} | "
            f"{fmt(r['overhead_ms'])} | {fmt(r.get('layer_call_ms'))} | {fmt_err(r.get('error'))} | "
            f"{fmt(r['ort1_ms'], 2)} | {fmt(r['ortN_ms'], 2)} | {fmt(r.get('e2e_vs_ortN'), 2)} | "
            f"{r['memory_bytes'] / 2**20:.1f} ({1.5 * r['memory_budget_bytes'] / 2**20:.1f}) |")
    return "\n".join(lines) + "\n"


def write_report(out: str | os.PathLike[str], stem: str, data: object, text: str,
                 text_suffix: str = ".md") -> None:
    """Where a measuring command leaves its results: ``<stem>.json`` (the figures) and the table
    (``<stem>.md``, or ``.txt`` for a log-like report) in the folder ``out``."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, stem + text_suffix), "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")


def _count(least):
    """An argparse type: an integer of at least ``least``."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < least:
            raise argparse.ArgumentTypeError(f"expected an integer of at least {least}, got {v}")
        return v
    return parse


def _seconds(text):
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v >= 0:   # also refuses NaN
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return v


def parser() -> ArgumentParser:
    """The arguments of ``ortops bench`` (errors: one line, exit status 2)."""
    ap = ArgumentParser(prog="ortops bench", description=__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                    help=f"folder for bench.json and bench.md (default: ./{DEFAULT_OUT}/)")
    ap.add_argument("--runs", type=_count(1), default=20, metavar="N", help="timed runs a figure (default 20)")
    ap.add_argument("--small", action="store_true",
                    help=f"the {len(SMALL_SHAPES)} small shapes instead of the {len(ANCHOR_SHAPES)} "
                         "anchor shapes (for a CPU implementation such as lavapipe)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="both")
    ap.add_argument("--device", default=None, help="Vulkan device: index, part of its name, or type")
    ap.add_argument("--shape", type=_count(0), action="append", metavar="I",
                    help=f"index into the shape list: 0 to {len(ANCHOR_SHAPES) - 1} (--small: 0 to "
                         f"{len(SMALL_SHAPES) - 1}); repeatable; default all")
    ap.add_argument("--no-baselines", action="store_true", help="ortops only (no ONNX Runtime CPU)")
    ap.add_argument("--mode", default=modes.DEFAULT, choices=sorted(modes.MODES),
                    help="numerical mode of the layers (docs/modes.md)")
    ap.add_argument("--warm", type=_seconds, default=3.0, metavar="SECONDS",
                    help="seconds of the heaviest shape before timing (GPU clocks; default 3)")
    return ap


def shapes_of(ap: ArgumentParser, args) -> list:
    """The shapes ``--small`` and ``--shape`` pick (a bad index: ``ap.error``)."""
    shapes = SMALL_SHAPES if args.small else ANCHOR_SHAPES
    for i in args.shape or []:
        if i >= len(shapes):
            ap.error(f"argument --shape: expected an index 0 to {len(shapes) - 1} of the "
                     f"{'small' if args.small else 'anchor'} shapes, got {i}")
    return [shapes[i] for i in args.shape] if args.shape else shapes


def logged(fn, stream):
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


def main(argv=None) -> int:
    """Run the benchmark; write bench.json and bench.md into --out and print the table.
    Bad arguments raise CliError (``ortops`` prints it as one line, exit status 2)."""
    ap = parser()
    args = ap.parse_args(argv)
    shapes = shapes_of(ap, args)
    report = logged(lambda: run(shapes, DTYPES[args.dtype], args.runs, args.device,
                                 baselines=not args.no_baselines, mode=args.mode, warm_s=args.warm),
                     sys.stderr)
    table = markdown(report)
    write_report(args.out, "bench", report, table)
    print(table, end="")
    print(f"written: {os.path.join(args.out, 'bench.json')}, {os.path.join(args.out, 'bench.md')}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    from ortops.tools.cli import main as cli_main

    sys.exit(cli_main(["bench", *sys.argv[1:]]))
