#!/usr/bin/env python3
"""Real models beside every peer, end to end through ONNX Runtime (issue 45, item 3).

Rows: the third-party models the tests use (silero-vad's detector, one 16 kHz frame with a
state; the CRNN and the two two-layer BiLSTM exports of tests/models, fed their saved inputs;
the quantized LSTM as tests/test_quantized.py makes it, onnxruntime's ``quantize_dynamic`` of a
bidirectional LSTM, per-channel int8) and offline work: a stacked two-layer BiLSTM (input and
hidden 256, sequence ``--seq``; scripts/make_models.py's recognizer, seeded) at each batch of
``--batches``.

Engines: ONNX Runtime's CPU provider on every core (``intra_op_num_threads = os.cpu_count()``);
the ortops EP with ``placement`` gpu and auto (``ortops.ep_session_options``); ONNX Runtime's
WebGPU plugin EP (onnxruntime-ep-webgpu) and onnxruntime-ggml with ``device=gpu`` (ggml's
Vulkan backend in its Linux wheel) and ``partial=1`` (it takes the nodes it supports; without
it, a graph holding one node it lacks stays whole on the CPU). An engine that cannot start
here is reported with its message, not measured.

Method: every engine's session is made and warmed (one run, then ``--warmup`` seconds); then
``--rounds`` rounds, the engines alternated inside each round (the order rotated round by
round), each round's figure the median of ``--runs`` session.run calls (fewer once ``--budget``
seconds have passed, at least one: the stacked BiLSTM takes 2-5 s a run on lavapipe) after
``--settle`` seconds of untimed runs (none where a run takes longer). Reported per engine: the
median of the rounds and their spread (min-max), the scaled error of its outputs against ORT CPU's
(ortops.compare), and the recurrent nodes each EP took (ONNX Runtime's graph-assignment report,
``session.record_ep_graph_assignment_info``); per row, placement auto against the faster of ORT
CPU and placement gpu (target: within 1.1x).

    python -P bench/real_models.py [--rounds 3] [--runs 200] [--budget 2] [--warmup 1] [--settle 0.2]
        [--seq 200] [--batches 32,64] [--models crnn,stacked] [--engines "ORT CPU,ortops gpu"] [--out DIR]

Writes DIR/real_models.json and DIR/real_models.md. Exit status 1 when an ortops engine fails
or its outputs break the project's rule against ORT CPU (the float32 tolerance; the quantized
rule for the quantized LSTM); times, peers' errors and the 1.1x target do not decide it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# stream_bench (silero-vad's wheel and frames) is beside this file; make_models (the stacked
# BiLSTM) in scripts/.
sys.path[:0] = [HERE, os.path.join(ROOT, "scripts")]

import make_models  # noqa: E402
import stream_bench  # noqa: E402

from ortops.compare import quantized_problems, scaled_error, tolerance  # noqa: E402
from ortops.ep import EP_NAME, ep_session_options  # noqa: E402
from ortops.timing import samples, wall_ms, warm  # noqa: E402

from ortops.tools.bench import write_report  # noqa: E402

ENGINES = ("ORT CPU", "ortops gpu", "ortops auto", "WebGPU EP", "ggml Vulkan")
ORTOPS_ENGINES = ("ortops gpu", "ortops auto")
PEERS = ("WebGPU EP", "ggml Vulkan")
RECURRENT = {"LSTM", "GRU", "RNN", "DynamicQuantizeLSTM"}
EXPORTS = ("crnn", "lstm2_bidirectional_h0c0_batch_first", "dynamo_lstm2_bidirectional")
MODELS = ("silero_vad",) + EXPORTS + ("quantized_lstm", "stacked")
GGML_OPTIONS = {"device": "gpu", "partial": "1"}
os.environ.setdefault("ORT_GGML_LOG", "warn")   # its default, info, logs every session and run
TARGET = 1.1


_registered: set[str] = set()


class NotHere(Exception):
    """An engine that does not start on this machine; its message goes into the table."""


@dataclass
class Row:
    name: str
    model: bytes
    feeds: dict
    #: The quantized row: (ORT CPU's result of the dequantized model, of the float model).
    quantized_refs: tuple | None = None
    result: dict = field(default_factory=dict)


def _options() -> ort.SessionOptions:
    """Every engine's: ONNX Runtime's CPU provider on every core for the nodes it runs (so that
    a placement is compared, not a thread count), the graph-assignment report on."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = os.cpu_count() or 1
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    return so


def _ort_cpu():
    return _options(), ["CPUExecutionProvider"]


def _ortops(placement: str):
    return lambda: (ep_session_options(placement=placement, sess_options=_options()), None)


def _plugin(module: str, name_of, library_of, options: dict):
    """A plugin EP from its Python package: registered once, its devices first, CPU after."""
    def make():
        try:
            pkg = __import__(module)
        except ImportError as exc:
            raise NotHere(f"{module} is not installed ({exc})") from exc
        name = name_of(pkg)
        if name not in _registered:
            _registered.add(name)   # once, whatever came of it (a second try is refused)
            try:
                ort.register_execution_provider_library(name, library_of(pkg))
            except Exception as exc:  # noqa: BLE001 -- the library's own words are the note
                raise NotHere(f"{name}: {exc}") from exc
        devices = [d for d in ort.get_ep_devices() if d.ep_name == name]
        if not devices:
            raise NotHere(f"{name} registered, but offers no device (onnxruntime.get_ep_devices lists none)")
        so = _options()
        so.add_provider_for_devices(devices, options)
        return so, None
    return make


FACTORIES = {
    "ORT CPU": _ort_cpu,
    "ortops gpu": _ortops("gpu"),
    "ortops auto": _ortops("auto"),
    "WebGPU EP": _plugin("onnxruntime_ep_webgpu", lambda p: p.get_ep_name(), lambda p: p.get_library_path(), {}),
    "ggml Vulkan": _plugin("onnxruntime_ggml", lambda p: p.EP_NAME, lambda p: p.library_path(), GGML_OPTIONS),
}


def _cpu_run(model: bytes, feeds: dict) -> list:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def silero_row(tmp: str) -> Row:
    """silero-vad's 16 kHz detector on one frame of a stream: the frame of stream_bench's signal
    ORT CPU finds most like speech (p 0.58 in its first 2 s), with the state the stream brought."""
    path = stream_bench.extract_models(stream_bench.find_wheel(), tmp)["silero_vad"]
    sig = stream_bench.signal(2.0, 16000)
    probs, states, _ = stream_bench.stream(ort.InferenceSession(path, providers=["CPUExecutionProvider"]),
                                           sig, 16000)
    k = int(np.argmax(probs))
    feeds = {"input": list(stream_bench.frames(sig, 16000))[k], "state": states[k - 1],
             "sr": np.array(16000, np.int64)}
    return Row("silero_vad (16 kHz frame)", open(path, "rb").read(), feeds)


def export_row(name: str) -> Row:
    """A torch export of tests/models with its saved inputs."""
    folder = os.path.join(ROOT, "tests", "models")
    data = np.load(os.path.join(folder, f"{name}.npz"))
    model = open(os.path.join(folder, f"{name}.onnx"), "rb").read()
    names = {i.name for i in ort.InferenceSession(model, providers=["CPUExecutionProvider"]).get_inputs()}
    feeds = {k[len("input."):]: data[k] for k in data.files if k[len("input."):] in names}
    return Row(name, model, feeds)


def quantized_row(tmp: str) -> Row:
    """A bidirectional LSTM (9 x 2 x 16 -> 24, the size tests/test_quantized.py quantizes)
    through ``quantize_dynamic``, per-channel int8 weights."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from ortops.ort import quantized
    from ortops.tools.measure import one_node_model

    src, dst = os.path.join(tmp, "float.onnx"), os.path.join(tmp, "quantized.onnx")
    onnx.save(one_node_model("LSTM", 9, 2, 16, 24, "bidirectional", np.float32), src)
    quantize_dynamic(src, dst, per_channel=True, weight_type=QuantType.QInt8)
    model = onnx.load(dst)
    feeds = {"X": np.random.default_rng(3).uniform(-1, 1, (9, 2, 16)).astype(np.float32)}
    refs = (_cpu_run(quantized.dequantized_model(model).SerializeToString(), feeds),
            _cpu_run(open(src, "rb").read(), feeds))
    return Row("quantized LSTM (int8 per channel)", model.SerializeToString(), feeds, refs)


def stacked_rows(seq: int, batches: list[int]) -> list[Row]:
    """The stacked two-layer BiLSTM (input and hidden 256, a linear head) at each batch."""
    model = make_models.recognizer(seq=seq).SerializeToString()
    rng = np.random.default_rng(1)
    return [Row(f"stacked BiLSTM {seq}x{b}x256", model,
                {"X": rng.uniform(-1, 1, (seq, b, 256)).astype(np.float32)}) for b in batches]


def rows(names: list[str], seq: int, batches: list[int], tmp: str) -> list[Row]:
    out = []
    for name in names:
        if name == "silero_vad":
            out.append(silero_row(tmp))
        elif name == "quantized_lstm":
            out.append(quantized_row(tmp))
        elif name == "stacked":
            out += stacked_rows(seq, batches)
        else:
            out.append(export_row(name))
    return out


def taken(sess) -> dict:
    """Recurrent nodes by the EP ONNX Runtime assigned them to (its graph-assignment report)."""
    out: dict = {}
    for sub in sess.get_provider_graph_assignment_info():
        for node in sub.get_nodes():
            if node.op_type in RECURRENT:
                out.setdefault(sub.ep_name, []).append(node.name)
    return out


def judge(row: Row, got: list, want: list, nodes: dict) -> list:
    """The project's rule for ortops' outputs against ORT CPU's; [] when kept. The quantized
    rule where the ortops EP took the quantized node; where ORT's kernel ran it, the float one."""
    if row.quantized_refs is not None and nodes.get(EP_NAME):
        exact, floats = row.quantized_refs
        return [f"output {i}: {p}" for i, (g, e, q, f) in enumerate(zip(got, exact, want, floats))
                for p in quantized_problems(g, e, q, f)]
    return [f"output {i}: scaled error {scaled_error(g, w):.3g} above {tolerance(w.dtype):g}"
            for i, (g, w) in enumerate(zip(got, want)) if not scaled_error(g, w) <= tolerance(w.dtype)]


def start(row: Row, name: str, want: list, warmup_s: float):
    """(run, figures) of engine ``name`` on ``row``: its session made, checked and warmed;
    run is None where it did not start or failed its first run."""
    try:
        so, providers = FACTORIES[name]()
        sess = ort.InferenceSession(row.model, so, providers=providers, enable_fallback=0)
        got = sess.run(None, row.feeds)
    except NotHere as exc:
        return None, {"runs_here": False, "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 -- an engine's failure is a figure of the table
        # The engine's own words: ONNX Runtime's prefixes ("[ONNXRuntimeError] : 11 : EP_FAIL : ") cut
        text = re.sub(r"^.*\] : \d+ : [A-Z_]+ : ", "", str(exc).splitlines()[0])
        return None, {"runs_here": False, "message": f"{type(exc).__name__}: {text}"}
    figures = {"runs_here": True, "nodes": taken(sess),
               "scaled_error": max((scaled_error(g, w) for g, w in zip(got, want)), default=0.0)}
    if name in ORTOPS_ENGINES:
        figures["problems"] = judge(row, got, want, figures["nodes"])

    def run():
        return sess.run(None, row.feeds)
    t0 = time.perf_counter()
    runs = warm(run, warmup_s)
    figures["warm_run_ms"] = 1e3 * (time.perf_counter() - t0) / runs
    return run, figures


def settle(run, seconds: float, run_ms: float) -> None:
    """Untimed runs for ``seconds`` before an engine's round, so that the engine before is no
    longer at work (H100, silero's frame with ORT CPU's placement: 0.196 ms in a round of 20
    runs right after the GPU path's, 0.122 in the round it opened; docs/real_models.md). None
    where one run takes longer (the stacked BiLSTM on lavapipe)."""
    if run_ms <= 1e3 * seconds:
        warm(run, seconds)


def measure(row: Row, engines: list[str], args) -> None:
    """Fill ``row.result``: per engine its figures and round times, then auto's ratio."""
    want = _cpu_run(row.model, row.feeds)
    runs = {}
    for name in engines:
        run, row.result[name] = start(row, name, want, args.warmup)
        if run is not None:
            runs[name] = run
    order = list(runs)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.rounds if order else 0):
        for name in order[r % len(order):] + order[:r % len(order)]:   # rotated round by round
            settle(runs[name], args.settle, times[name][-1] if times[name] else row.result[name]["warm_run_ms"])
            times[name].append(statistics.median(samples(lambda: wall_ms(runs[name]), args.runs, args.budget,
                                                         min_runs=1)))
    for name, t in times.items():
        row.result[name].update(median_ms=statistics.median(t), spread_ms=[min(t), max(t)], rounds_ms=t)
    if {"ORT CPU", "ortops gpu", "ortops auto"} <= set(times):
        ms = {n: row.result[n]["median_ms"] for n in times}
        ratio = ms["ortops auto"] / min(ms["ORT CPU"], ms["ortops gpu"])
        row.result["auto_vs_best"] = {"ratio": ratio, "within_target": ratio <= TARGET}


def aborts(model: str, engine: str, args) -> str | None:
    """Why a peer ends the process on ``model`` (an assert, a signal), else None: a child runs
    the model on that engine alone first, so that a peer's crash becomes a cell of the table
    (onnxruntime-ggml 0.2.0 aborts on a GGML_ASSERT on the H100) rather than the end of it."""
    cmd = [sys.executable, "-P", os.path.abspath(__file__), "--models", model, "--engines", engine,
           "--rounds", "3", "--runs", "1", "--budget", "0", "--warmup", "0", "--seq", str(args.seq),
           "--batches", args.batches, "--no-probe"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode in (0, 1):
        return None
    lines = p.stderr.splitlines()
    said = [re.sub(r"^.*\.(?:c|cc|cpp|h):\d+: ", "", l) for l in lines if re.search(r"ASSERT|[Aa]bort|[Ff]atal", l)]
    return f"ends the process (exit status {p.returncode}): {(said or lines or ['no message'])[0].strip()}"


def failures(report: dict) -> list[str]:
    """What fails the exit status: an ortops engine that did not run or broke the rule."""
    out = []
    for row in report["rows"]:
        for name in ORTOPS_ENGINES:
            r = row["engines"].get(name)
            if r is not None and not r["runs_here"]:
                out.append(f"{row['name']}: {name} did not run: {r['message']}")
            elif r is not None:
                out += [f"{row['name']}: {name}: {p}" for p in r["problems"]]
    return out


def _nodes_cell(r: dict) -> str:
    nodes = r["nodes"]
    total = sum(len(v) for v in nodes.values())
    on_ep = sum(len(v) for ep, v in nodes.items() if ep != "CPUExecutionProvider")
    return f"{on_ep}/{total}"


def _cells(r: dict | None, notes: list[str]) -> tuple[str, str]:
    """(time cell, error and nodes cell) of one engine on one row."""
    if r is None:
        return "", ""
    if not r["runs_here"]:
        if r["message"] not in notes:
            notes.append(r["message"])
        mark = f"does not run here [{notes.index(r['message']) + 1}]"
        return mark, mark
    lo, hi = r["spread_ms"]
    return f"{r['median_ms']:.3g} ({lo:.3g}–{hi:.3g})", f"{r['scaled_error']:.1e} · {_nodes_cell(r)}"


def markdown(report: dict) -> str:
    engines, notes = report["engines"], list[str]()
    head = "| model | " + " | ".join(engines)
    times = [head + " | auto / min(CPU, gpu) |", "|---" * (len(engines) + 2) + "|"]
    errors = [head + " |", "|---" * (len(engines) + 1) + "|"]
    for row in report["rows"]:
        cells = [_cells(row["engines"].get(e), notes) for e in engines]
        a = row.get("auto_vs_best")
        ratio = f"{a['ratio']:.2f} ({'within' if a['within_target'] else 'not within'} {TARGET}×)" if a else "—"
        times.append(f"| {row['name']} | " + " | ".join(c[0] for c in cells) + f" | {ratio} |")
        errors.append(f"| {row['name']} | " + " | ".join(c[1] for c in cells) + " |")
    lines = [f"{report['device']}; {report['cpus']} CPUs; onnxruntime {report['onnxruntime']}; peers: "
             + ", ".join(f"{k} {v}" for k, v in report["peers"].items()) + ".",
             f"`{report['command']}`, {report['date']}: {report['rounds']} rounds, engines alternated, "
             f"each round the median of up to {report['runs']} runs ({report['budget_s']:g} s budget).", "",
             "End-to-end session.run, ms: median of the rounds (min–max).", "", *times, "",
             "Scaled error against ORT CPU · recurrent nodes the engine's EP took / recurrent nodes.", "",
             *errors]
    lines += ([""] + [f"[{i + 1}] {m}" for i, m in enumerate(notes)] if notes else [])
    return "\n".join(lines)


def _peers() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("onnxruntime-ep-webgpu", "onnxruntime-ggml"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list of {', '.join(MODELS)}")
    ap.add_argument("--engines", default=",".join(ENGINES), help=f"comma list of {', '.join(ENGINES)}")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=200, help="runs of an engine in a round, at most")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds an engine's round takes, about (at least a run)")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of untimed runs per engine first")
    ap.add_argument("--settle", type=float, default=0.2,
                    help="seconds of untimed runs of an engine before each of its rounds (none where a run takes longer)")
    ap.add_argument("--seq", type=int, default=200, help="the stacked BiLSTM's sequence length")
    ap.add_argument("--batches", default="32,64", help="the stacked BiLSTM's batch sizes")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-probe", action="store_true", help="run the peers in this process without a child first")
    return ap


def _check(ap, args) -> tuple[list[str], list[str]]:
    models, engines = args.models.split(","), args.engines.split(",")
    for given, known, what in ((models, MODELS, "--models"), (engines, ENGINES, "--engines")):
        bad = [g for g in given if g not in known]
        if bad:
            ap.error(f"{what}: expected names from {', '.join(known)}, got {', '.join(bad)}")
    if args.rounds < 3:
        ap.error(f"--rounds must be 3 or more (a median and a spread), got {args.rounds}")
    return models, engines


def main(argv=None) -> int:
    from ortops.device import select

    ap = _parser()
    args = ap.parse_args(argv)
    models, engines = _check(ap, args)
    report = dict(device=str(select()), cpus=os.cpu_count(), host=platform.node(), onnxruntime=ort.__version__,
                  peers=_peers(), rounds=args.rounds, runs=args.runs, budget_s=args.budget, engines=engines,
                  command="python -P bench/real_models.py " + " ".join(sys.argv[1:] if argv is None else argv),
                  date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), rows=[])
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            ended = {} if args.no_probe else {e: why for e in engines if e in PEERS
                                                 for why in [aborts(model, e, args)] if why}
            for row in rows([model], args.seq, [int(b) for b in args.batches.split(",")], tmp):
                measure(row, [e for e in engines if e not in ended], args)
                row.result.update({e: {"runs_here": False, "message": why} for e, why in ended.items()})
                report["rows"].append({"name": row.name, "engines": {e: row.result[e] for e in engines},
                                       "auto_vs_best": row.result.get("auto_vs_best")})
                print(f"{row.name}: " + ", ".join(f"{e} {row.result[e].get('median_ms', float('nan')):.3g} ms"
                                                  for e in engines), flush=True)
    report["failures"] = failures(report)
    text = markdown(report)
    print(text)
    if args.out:
        write_report(args.out, "real_models", report, text)
    for f in report["failures"]:
        print(f"FAILED: {f}", file=sys.stderr)
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
