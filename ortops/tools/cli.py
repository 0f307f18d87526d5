"""The ``ortops`` command.

    ortops run MODEL [--input NAME=FILE.npy ...] [--dim NAME=N ...] [--compare] [--repeat N]
               [--warmup SECONDS] [--threads N,N,...] [--intra-op-threads N] [--device D]
               [--mode deterministic|exact|fast]
    ortops info MODEL [--device D]
    ortops devices
    ortops bench [--small] [--shape I ...] [--dtype D] [--mode M] [--runs N] [--out DIR] ...
    ortops demo [--steps N] [--size N] [--device D]
    ortops --version

``run`` runs MODEL with its recurrent nodes on the GPU. Inputs not given
with ``--input`` are generated: floats uniform in [-1, 1) (seed ``--seed``),
an int32 input that is a recurrent node's ``sequence_lens`` filled with the
full sequence length, other integer inputs zeros, booleans False. A dynamic
dimension is 1 unless set with ``--dim NAME=N`` (NAME is the symbolic
dimension's name as the model declares it, e.g. ``--dim batch=8``).

``--compare`` also runs the model on stock ONNX Runtime CPU and prints, per
output, the scaled error max|a - b| / max|b| and both timings; the exit
status is 1 when an error is above the tolerance (1e-5 for float32 outputs,
2e-3 for float16). ONNX Runtime CPU refuses layout-1 and float16 recurrent
nodes, so for such models it runs the equivalent layout-0 float32 model
(``ortops.ort.equivalent``) on the inputs widened to float32.

``--threads 1,2,4,8`` then runs the session from that many threads at once
(each thread ``--repeat`` runs on inputs of its own), prints runs/s for each
count, and checks every result against the serial result of the same inputs,
bit for bit (exit status 1 on a difference or a failed run).
``--intra-op-threads N`` gives the session N intra-op threads for the model's
other nodes (ONNX Runtime's ``intra_op_num_threads``; 0, the default, its own
pool).

``bench`` and ``demo`` parse their own arguments (ortops/tools/bench.py, demo.py); a bad one
is a line ``ortops bench: error: ...`` and exit status 2, as any other bad usage.

Exit status: 0 success, 1 comparison above tolerance or a concurrent result
that differs from the serial one, 2 bad usage or an error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import NoReturn

import numpy as np

import ortops
from ortops.cells import CELLS
from ortops.timing import warm
from ortops.compare import QUANTIZED_MARGIN, scaled_error, tolerance
from ortops import vocabulary
from ortops.modes import DEFAULT as DEFAULT_MODE, MODES
from ortops.tools import threads

_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int32)": np.int32, "tensor(int64)": np.int64, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8,
    "tensor(int16)": np.int16, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


class CliError(Exception):
    """An error to print as ``PROG: error: ...`` with exit status 2 (PROG: ``ortops``, or the
    subcommand whose arguments were bad, e.g. ``ortops bench``)."""

    def __init__(self, message: str, prog: str = "ortops"):
        super().__init__(message)
        self.prog = prog


class ArgumentParser(argparse.ArgumentParser):
    """The parser of a subcommand that parses its own arguments (bench, demo): a bad argument
    is a CliError (one line, exit status 2), not argparse's usage text and exit."""

    def error(self, message: str) -> NoReturn:
        raise CliError(message, self.prog)


# -- progress ----------------------------------------------------------------------


class Progress:
    """A plain stderr progress bar (only drawn when there is more than one step)."""

    def __init__(self, total: int, label: str, stream=None, width: int = 30):
        self.total, self.label, self.width = total, label, width
        self.stream = stream or sys.stderr
        self.enabled = total > 1
        self._last = -1

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        filled = self.width * done // self.total
        if filled == self._last and done != self.total:
            return  # redraw only when the bar moves
        self._last = filled
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total}")
        if done == self.total:
            self.stream.write("\n")
        self.stream.flush()


# -- inputs ------------------------------------------------------------------------------


def _parse_pairs(items, what: str) -> dict:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise CliError(f"{what} must look like NAME=VALUE, got {item!r}")
        out[name] = value
    return out


def _load_inputs(pairs: dict) -> dict:
    feeds = {}
    for name, path in pairs.items():
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise CliError(f"cannot read --input {name}={path}: {e}") from None
    return feeds


def _sequence_lens_inputs(model) -> dict:
    """Graph inputs feeding a recurrent node's sequence_lens -> (X name, seq axis)."""
    inputs = {i.name for i in model.graph.input}
    out = {}
    for n in model.graph.node:
        # Any domain: an ortops custom node (float32: the same op type) takes ONNX's inputs too.
        if n.op_type not in CELLS:
            continue
        k = CELLS[n.op_type].inputs.index("sequence_lens")
        if len(n.input) > k and n.input[k] in inputs:
            layout = next((a.i for a in n.attribute if a.name == "layout"), 0)
            out[n.input[k]] = (n.input[0], 1 if layout else 0)
    return out


def make_feeds(sess, model, given: dict, dims: dict, seed: int) -> dict:
    """Feeds for every graph input: ``given`` ones as they are, the rest
    generated as the module docstring says."""
    rng = np.random.default_rng(seed)
    infos = {i.name: i for i in sess.get_inputs()}
    unknown = sorted(set(given) - set(infos))
    if unknown:
        raise CliError(f"--input names {unknown} are not inputs of the model; its inputs: {sorted(infos)}")
    feeds = dict(given)
    lens_inputs = _sequence_lens_inputs(model)
    shapes = {}
    for name, info in infos.items():
        shape = []
        for d in info.shape:
            if isinstance(d, int) and d >= 0:
                shape.append(d)
            elif isinstance(d, str) and d in dims:
                shape.append(dims[d])
            else:
                shape.append(1)  # documented default for a dynamic dimension
        shapes[name] = shape
    for name, info in infos.items():
        if name in feeds:
            continue
        dt = _ORT_TYPES.get(info.type)
        if dt is None:
            raise CliError(f"input {name!r} has type {info.type}; give it with --input")
        shape = shapes[name]
        if name in lens_inputs:
            x_name, axis = lens_inputs[name]
            x = feeds.get(x_name)
            seq = x.shape[axis] if x is not None and x.ndim > axis else \
                (shapes[x_name][axis] if x_name in shapes and len(shapes[x_name]) > axis else 1)
            feeds[name] = np.full(shape, seq, dtype=dt)
        elif np.issubdtype(dt, np.floating):
            feeds[name] = rng.uniform(-1.0, 1.0, size=shape).astype(dt)
        else:
            feeds[name] = np.zeros(shape, dtype=dt)
    return feeds


# -- commands -----------------------------------------------------------------------------


def _timed(run, repeat: int, label: str):
    bar = Progress(repeat, label)
    times, out = [], None
    for i in range(repeat):
        t0 = time.perf_counter()
        out = run()
        times.append(time.perf_counter() - t0)
        bar.update(i + 1)
    return out, times


def _fmt_times(times) -> str:
    ms = np.array(times) * 1e3
    if len(ms) == 1:
        return f"{ms[0]:.3f} ms"
    return f"median {np.median(ms):.3f} ms, min {ms.min():.3f} ms, mean {ms.mean():.3f} ms over {len(ms)} runs"


def cmd_run(args) -> int:
    from ortops.ort import rewrite
    from ortops.ort.session import InferenceSession, intra_op_options

    if args.repeat < 1:
        raise CliError("--repeat must be at least 1")
    if args.intra_op_threads < 0:
        raise CliError(f"--intra-op-threads must be 0 (ONNX Runtime's pool) or a positive count, got "
                       f"{args.intra_op_threads}")
    if not args.warmup >= 0:  # also refuses NaN
        raise CliError(f"--warmup must be a number of seconds >= 0, got {args.warmup}")
    model = rewrite.load_model(args.model)
    dims = {k: _positive_int(v, f"--dim {k}") for k, v in _parse_pairs(args.dim, "--dim").items()}
    device = _run_device(args.device)
    # A quantized model's recurrent outputs are compared too (_compare_quantized): run them out.
    probe = _quantized_probe(model) if args.compare else model
    sess = InferenceSession(probe, sess_options=intra_op_options(args.intra_op_threads),
                            providers=["CPUExecutionProvider"], device=device,
                            placement=args.placement, mode=args.mode)
    for p in sess.placement:
        print(p.describe())
    feeds = make_feeds(sess, model, _load_inputs(_parse_pairs(args.input, "--input")), dims, args.seed)
    names = [o.name for o in sess.get_outputs()]
    warm(lambda: sess.run(None, feeds), args.warmup)
    outputs, times = _timed(lambda: sess.run(None, feeds), args.repeat, "ortops")
    print(f"ortops session: {_fmt_times(times)} ({_where_it_ran(sess, model)})")
    note = _cpu_only_note() if sess.on_gpu else ""
    if note:
        print(note)
    for name, value in zip(names, outputs):
        summary = f"min {value.min():.6g} max {value.max():.6g}" if value.size and value.dtype.kind == "f" else ""
        print(f"  {name}: {value.dtype} {list(value.shape)} {summary}")
    if args.save:
        os.makedirs(args.save, exist_ok=True)
        for name, value in zip(names, outputs):
            np.save(os.path.join(args.save, f"{_safe(name)}.npy"), value)
    status = 0
    if args.threads:
        make = lambda seed: make_feeds(sess, model, _load_inputs(_parse_pairs(args.input, "--input")),  # noqa: E731
                                       dims, seed)
        status = threads.scaling(sess, make, args.threads, args.repeat, args.seed, args.warmup)
    if not args.compare:
        return status
    if _quantized_taken(sess.placement):
        return status if _compare_quantized(probe, sess.placement, feeds, names, outputs, args) else 1
    return status if _compare_with_cpu(model, sess.placement, feeds, names, outputs, args) else 1


def _run_device(spec):
    """The device ``--device`` (else ORTOPS_DEVICE, else the scheduler's GPU, else the preferred)
    names, the native core's choice: one that matches none is a CliError (one line, exit status
    2) naming what was asked and listing the devices there are. None where there is no Vulkan
    device at all and none was named: the session then runs on ONNX Runtime CPU, warning so."""
    from ortops.device import no_device_error, select

    try:
        return select(spec)
    except no_device_error():
        return None
    except ValueError as e:
        raise CliError(str(e).removeprefix("ortops: ")) from e


def _where_it_ran(sess, model) -> str:
    """For the timing line: where the recurrent nodes ran (the Vulkan device by name, or ONNX
    Runtime CPU with each node's reason from the session's placement report), and the other
    nodes; or that the model has no recurrent node."""
    placement = sess.placement
    if not placement:
        return "the model has no recurrent node: every node ran on ONNX Runtime CPU, none on a Vulkan device"
    on_device = [p for p in placement if p.where == "gpu"]
    left = [p for p in placement if p.where != "gpu"]
    parts = []
    if on_device:
        parts.append(f"{_nodes(len(on_device))} on the Vulkan device {sess.device.name}")
    if left:
        why: dict[str, list[str]] = {}   # each reason once, after the nodes it holds for
        for p in left:
            why.setdefault(p.reason, []).append(f"#{p.index} {p.name!r}")
        parts.append(f"{_nodes(len(left))} on ONNX Runtime CPU: "
                     + "; ".join(f"{', '.join(nodes)} ({reason})" for reason, nodes in why.items()))
    if len(model.graph.node) > sum(1 for p in placement if not p.path):
        parts.append("the other nodes on ONNX Runtime CPU")
    return "; ".join(parts)


def _nodes(count: int) -> str:
    return f"{count} recurrent node{'s' if count != 1 else ''}"


def _compare_with_cpu(model, placement, feeds, names, outputs, args) -> bool:
    """``--compare`` against stock ONNX Runtime CPU (the layout-0 float32 equivalent model for
    layout-1 or float16 models); whether every output is within tolerance. An output above it
    because of special values (ortops.compare.special_value_difference) points to their rule."""
    import onnxruntime as ort

    from ortops.compare import special_value_difference
    from ortops.ort.equivalent import cpu_equivalent, cpu_feeds

    equivalent = any(p.layout == 1 or p.dtype == "float16" for p in placement) or any(
        v.dtype == np.float16 for v in feeds.values())
    ref_model = cpu_equivalent(model) if equivalent else model
    ref_feeds = cpu_feeds(feeds) if equivalent else feeds
    cpu = ort.InferenceSession(ref_model.SerializeToString(), providers=["CPUExecutionProvider"])
    warm(lambda: cpu.run(None, ref_feeds), args.warmup)
    expected, cpu_times = _timed(lambda: cpu.run(None, ref_feeds), args.repeat, "ORT CPU")
    what = "ONNX Runtime CPU" + (" (layout-0 float32 equivalent model)" if equivalent else "")
    print(f"{what}: {_fmt_times(cpu_times)}")
    worst_ok = True
    for name, got, exp in zip(names, outputs, expected):
        tol = tolerance(got.dtype)
        err = scaled_error(got, exp)
        ok = err <= tol
        worst_ok &= ok
        print(f"  {name}: scaled error {err:.3g} (tolerance {tol:g}) {'OK' if ok else 'ABOVE TOLERANCE'}")
        if not ok and special_value_difference(got, exp):
            print("    the difference is in special values (NaN, +-Inf), which the scaled error does not measure: "
                  "docs/special_values.md says what ortops promises for them")
    return worst_ok


def _quantized_taken(placement) -> bool:
    from ortops.ort import quantized

    return any(p.op == quantized.OP and p.where == "gpu" for p in placement)


def _quantized_probe(model):
    """``model``, also outputting its DynamicQuantizeLSTM nodes' outputs when it has any."""
    from ortops.ort import quantized

    extra = quantized.recurrent_outputs(model)
    return quantized.with_outputs(model, extra) if extra else model


def _compare_quantized(model, placement, feeds, names, outputs, args) -> bool:
    """``--compare`` for a model whose DynamicQuantizeLSTM nodes ran on the device: each output
    against ONNX Runtime CPU's results of the dequantized model and of the quantized model, by
    ``ortops.compare.quantized_problems``. True when every output keeps the rule."""
    import onnxruntime as ort

    from ortops.compare import quantized_problems
    from ortops.ort import quantized

    cpu = lambda m: ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])  # noqa: E731
    which = [p.where == "gpu" for p in placement if p.op == quantized.OP]
    quant, exact = cpu(model), cpu(quantized.dequantized_model(model, which))
    warm(lambda: quant.run(None, feeds), args.warmup)
    ort_q, cpu_times = _timed(lambda: quant.run(None, feeds), args.repeat, "ORT CPU")
    print(f"ONNX Runtime CPU (the quantized model): {_fmt_times(cpu_times)}")
    dequantized = exact.run(None, feeds)
    recurrent = {o for n in model.graph.node if quantized.is_quantized(n) for o in n.output}
    print(f"  quantized rule (ortops.compare.quantized_problems): within {tolerance(np.float32):g} of the "
          f"dequantized model (ORT CPU) and within {QUANTIZED_MARGIN:g} x ORT's quantization error of its result")
    ok = True
    for name, got, deq, q in zip(names, outputs, dequantized, ort_q):
        downstream = name not in recurrent
        problems = quantized_problems(got, deq, q, downstream=downstream)
        ok &= not problems
        print(f"  {name}: scaled error {scaled_error(got, deq):.3g} against the dequantized model"
              f"{' (after quantized nodes: not judged)' if downstream else ''}, {scaled_error(got, q):.3g} "
              f"against ORT's quantized result, whose quantization error is {scaled_error(q, deq):.3g} "
              + ("OK" if not problems else "FAILS: " + "; ".join(problems)))
    return ok


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def _positive_int(text: str, what: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise CliError(f"{what} must be an integer, got {text!r}") from None
    if v < 0:
        raise CliError(f"{what} must be >= 0, got {v}")
    return v


def cmd_info(args) -> int:
    from ortops.ort import rewrite, session

    model = rewrite.load_model(args.model)
    print(f"{args.model}: IR {model.ir_version}, ai.onnx opset {rewrite.default_opset(model)}, "
          f"{len(model.graph.node)} nodes")
    inits = {t.name for t in model.graph.initializer}
    for i in model.graph.input:
        if i.name not in inits:
            print(f"  input  {i.name}: {_type_text(i.type)}")
    for o in model.graph.output:
        print(f"  output {o.name}: {_type_text(o.type)}")
    placement = session.placement(model, device=args.device, policy=args.placement)
    if not placement:
        print("no RNN/GRU/LSTM node in the main graph")
    for p in placement:
        print(p.describe())
    return 0


def _type_text(tp) -> str:
    from onnx import TensorProto

    tt = tp.tensor_type
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    return f"{TensorProto.DataType.Name(tt.elem_type).lower()} [{', '.join(dims)}]"


def _cpu_only_note() -> str:
    """One line for `ortops run` where every Vulkan device is a CPU implementation (lavapipe):
    the "GPU path" then runs on the CPU, and its time is not a GPU's."""
    from ortops.device import devices

    found = devices()
    if found and all(d.type == "cpu" for d in found):
        names = ", ".join(sorted({d.name for d in found}))
        return (f"  (the only Vulkan device is a CPU implementation, {names}: the GPU path ran on the CPU, "
                f"with no GPU)")
    return ""


def cmd_devices(args) -> int:
    from ortops.device import devices

    found = devices()
    if not found:
        print("no Vulkan device with a compute queue was found")
        return 1
    for d in found:
        print(d.describe() if hasattr(d, "describe") else str(d))
    return 0


def cmd_bench(bench_args) -> int:
    from ortops.tools.bench import main as bench_main

    return int(bench_main(list(bench_args)) or 0)


def cmd_demo(demo_args) -> int:
    from ortops.tools.demo import main as demo_main

    return int(demo_main(list(demo_args)) or 0)


_RUN_HELP = """Run MODEL with its recurrent nodes on the GPU.

Inputs not given with --input are generated: floats uniform in [-1, 1),
a recurrent node's sequence_lens input the full sequence length, other
integers zeros. A dynamic dimension is 1 unless set with --dim NAME=N.
--compare also runs stock ONNX Runtime CPU (the layout-0 float32
equivalent model for layout-1 or float16 models) and exits 1 when a scaled
error max|a-b|/max|b| is above 1e-5 (float32) or 2e-3 (float16)."""


def _placement_argument(ap) -> None:
    ap.add_argument("--placement", choices=vocabulary.PLACEMENTS, default=vocabulary.PLACEMENTS[0],
                    help="gpu (default): every recurrent node the device can run goes to it; auto: a "
                         "node stays on ORT CPU where the calibrated cost model predicts it faster "
                         "(docs/onnxruntime.md, 'Placement policy')")


def parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ortops`` command."""
    ap = argparse.ArgumentParser(prog="ortops", description="ONNX RNN/GRU/LSTM on the GPU through Vulkan.")
    ap.add_argument("--version", action="version", version=f"ortops {ortops.__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a model with its recurrent nodes on the GPU",
                       description=_RUN_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("model")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="an input from a .npy file")
    r.add_argument("--dim", action="append", metavar="NAME=N", help="value of a dynamic dimension (default 1)")
    r.add_argument("--compare", action="store_true", help="also run on stock ONNX Runtime CPU and compare")
    r.add_argument("--repeat", type=int, default=1, help="timed runs (after one untimed warm-up run)")
    r.add_argument("--warmup", type=float, default=0.0, metavar="SECONDS",
                   help="keep running untimed this long before timing (lets an idle GPU's clocks "
                        "rise; default 0: one warm-up run)")
    r.add_argument("--threads", type=threads.counts, default=None, metavar="N,N,...",
                   help="also run from N threads at once (each --repeat runs), per count: runs/s, "
                        "results checked against serial ones")
    r.add_argument("--intra-op-threads", type=int, default=0, metavar="N",
                   help="ONNX Runtime's intra-op threads for the model's other nodes (default 0: its own pool)")
    r.add_argument("--device", default=None,
                   help="Vulkan device: index, part of its name, type or UUID (default: ORTOPS_DEVICE, else the "
                        "GPU CUDA_VISIBLE_DEVICES assigns, else the preferred); one that matches none is an error")
    _placement_argument(r)
    r.add_argument("--seed", type=int, default=0, help="seed of generated inputs")
    r.add_argument("--mode", default=DEFAULT_MODE, choices=sorted(MODES),
                   help="numerical mode of the recurrent nodes: deterministic (default), exact "
                        "(the same bits on every Vulkan device, docs/exact.md) or fast (float16 "
                        "input projections on matrix hardware where offered, docs/modes.md)")
    r.add_argument("--save", metavar="DIR", help="write each output to DIR/NAME.npy")
    r.set_defaults(func=cmd_run)
    i = sub.add_parser("info", help="recurrent nodes of a model and where each runs")
    i.add_argument("model")
    i.add_argument("--device", default=None)
    _placement_argument(i)
    i.set_defaults(func=cmd_info)
    d = sub.add_parser("devices", help="list Vulkan devices")
    d.set_defaults(func=cmd_devices)
    # bench's and demo's arguments are their own; main() hands them over unparsed
    sub.add_parser("bench", help="time recurrent layers on the device beside ONNX Runtime CPU "
                                 "(writes ./ortops-bench/; ortops bench --help)")
    sub.add_parser("demo", help="a chain of 1,000 dependent GPU passes, checked on the host")
    return ap


def main(argv=None) -> int:
    """Entry point of the ``ortops`` command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["bench"]:
            return cmd_bench(argv[1:])
        if argv[:1] == ["demo"]:
            return cmd_demo(argv[1:])
        args = parser().parse_args(argv)
        return args.func(args)
    except CliError as e:
        print(f"{e.prog}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - ORT's exceptions derive from Exception only
        # Model, input and device errors: one readable line, no traceback.
        print(f"ortops: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
