"""Conformance of ortops' recurrent nodes, end to end through ortops.InferenceSession.

Three parts:

1. The 18 recurrent node cases of the ONNX backend test suite
   (test_lstm_*, test_gru_*, test_simple_rnn_*, test_rnn_seq_length),
   checked against the suite's expected outputs, including the three
   *_batchwise (layout 1) cases that ONNX Runtime's CPU kernels refuse.
2. A seeded differential suite against stock ONNX Runtime CPU over cells ×
   directions × layouts × float32/float16, each with rotating option sets:
   sequence_lens (with zeros), initial states, peepholes, clip, input_forget,
   linear_before_reset, activations with alpha/beta, subsets of the outputs,
   opsets 7/14/22, weights fed as graph inputs, and the ``convert`` +
   ``register`` path. Layout-1 and float16 cases are checked against the
   layout-0 float32 equivalent model (``ortops.ort.equivalent``) run by ORT CPU.
   Zero-size cases (seq 0, batch 0) are checked against ``ortops.reference``
   because ORT 1.32 CPU aborts the process on several of them.
3. A markdown report (docs/conformance.md by default).

Every case runs twice and must give identical bits; every recurrent node
must have been placed on the GPU (a node left to ORT's CPU kernel fails its
case: it would only compare ORT with itself). Error measure: scaled error
max|got - expected| / max|expected| (the plain max|got - expected| when the
expected output is all zeros); tolerance 1e-5 for float32, 2e-3 for float16.

Usage: python scripts/ci/conformance.py [--quick] [--jobs N] [--device D] [--out docs/conformance.md]
Importable: ``cases()``, ``run_case()``, ``run()`` -> list of Result, ``write_report()``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:  # the installed package (with its native module); else this checkout
    import ortops  # noqa: F401
except ImportError:
    sys.path.insert(0, ROOT)

from ortops.compare import scaled_error, tolerance  # noqa: E402
from ortops.cells import CELLS  # noqa: E402

_ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
_NP = {"float32": np.float32, "float16": np.float16}


@dataclass
class Case:
    """One conformance case: a model, its feeds, and where its expected
    outputs come from (``expected`` given, or computed by ``oracle``)."""

    name: str
    suite: str
    model: onnx.ModelProto
    feeds: dict
    dtype: str
    oracle: str
    expected: list | None = None
    path: str = "session"  # "session" (ortops.InferenceSession) or "convert" (convert + register)
    reference_args: dict | None = field(default=None, repr=False)  # for the ortops.reference oracle


@dataclass
class Result:
    """Outcome of one case."""

    case: str
    suite: str
    dtype: str
    oracle: str
    path: str
    max_error: float
    tolerance: float
    identical: bool
    passed: bool
    message: str = ""
    seconds: float = 0.0


# -- part 1: ONNX backend node tests ---------------------------------------------

_BACKEND_PREFIXES = ("test_lstm_", "test_gru_", "test_simple_rnn_", "test_rnn_seq_length")


def backend_cases() -> list[Case]:
    """The recurrent node cases of onnx's backend test suite (18 with onnx 1.23).

    ``collect_testcases`` imports (and so generates) every node case of the
    suite, about ten seconds; importing just the lstm, gru and rnn modules
    generates the same cases (each case class reseeds numpy with 0) in a
    fraction of that. The full collection is the fallback.
    """
    import importlib

    from onnx.backend.test.case import node as node_cases

    try:
        for mod in ("lstm", "gru", "rnn"):
            importlib.import_module(f"onnx.backend.test.case.node.{mod}")
        all_cases = list(node_cases._NodeTestCases)
    except (ImportError, AttributeError):
        all_cases = []
    if not any(tc.name.startswith(_BACKEND_PREFIXES) for tc in all_cases):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warnings of unrelated cases' generators
            all_cases = node_cases.collect_testcases()
    out = []
    for tc in all_cases:
        if not tc.name.startswith(_BACKEND_PREFIXES):
            continue
        inits = {t.name for t in tc.model.graph.initializer}
        names = [i.name for i in tc.model.graph.input if i.name not in inits]
        inputs, outputs = tc.data_sets[0]
        feeds = dict(zip(names, inputs))
        out.append(Case(tc.name, "onnx-backend", tc.model, feeds, "float32", "onnx backend data",
                        expected=list(outputs)))
    return sorted(out, key=lambda c: c.name)


# -- part 2: differential cases -------------------------------------------------------

_ACTS = {
    "LSTM": [
        (["HardSigmoid", "LeakyRelu", "ScaledTanh"], [0.3, 0.2, 1.2], [0.4, 0.7]),
        (["Sigmoid", "Softsign", "Softplus"], None, None),
        (["Sigmoid", "Elu", "Tanh"], [0.8], None),
        (["Sigmoid", "Affine", "ThresholdedRelu"], [0.7, 0.1], [0.05]),
    ],
    "GRU": [
        (["Affine", "Elu"], [0.5, 1.1], [0.2]),
        (["HardSigmoid", "Relu"], [0.25], [0.45]),
        (["Sigmoid", "ScaledTanh"], [1.3], [0.8]),
    ],
    "RNN": [
        (["Relu"], None, None), (["LeakyRelu"], [0.05], None), (["ThresholdedRelu"], [0.3], None),
        (["Softsign"], None, None), (["Affine"], [0.9], [-0.1]), (["Elu"], [0.7], None),
        (["Softplus"], None, None), (["ScaledTanh"], [1.1], [0.9]), (["HardSigmoid"], [0.3], [0.6]),
        (["Sigmoid"], None, None),
    ],
}

# Option sets, rotated over the cell × direction × layout × dtype grid.
_PROFILES = {
    "LSTM": [
        dict(tag="defaults"),
        dict(tag="bias+lens0+h0c0", bias=True, lens="zeros", h0=True, c0=True),
        dict(tag="clip+Y", bias=True, clip=0.9, outputs=("Y",)),
        dict(tag="acts+Yh", bias=True, lens="full", acts=True, outputs=("Y_h",)),
        dict(tag="peep+input_forget+c0+Yc", bias=True, peep=True, input_forget=1, c0=True, outputs=("Y_c",)),
        dict(tag="peep+lens0+h0c0+YhYc", peep=True, lens="zeros", h0=True, c0=True, outputs=("Y_h", "Y_c")),
        dict(tag="acts+clip+input_forget", bias=True, acts=True, clip=1.5, input_forget=1, h0=True),
        dict(tag="weights-as-inputs", bias=True, peep=True, h0=True, weights_as_inputs=True),
    ],
    "GRU": [
        dict(tag="defaults"),
        dict(tag="bias+lens0+h0", bias=True, lens="zeros", h0=True),
        dict(tag="lbr+bias+lens0+h0", bias=True, lbr=1, lens="zeros", h0=True),
        dict(tag="lbr+acts+clip+Yh", bias=True, lbr=1, acts=True, clip=1.1, outputs=("Y_h",)),
        dict(tag="acts+Y", bias=True, acts=True, lens="full", outputs=("Y",)),
        dict(tag="clip+h0", clip=0.8, h0=True),
        dict(tag="lbr+weights-as-inputs", bias=True, lbr=1, h0=True, weights_as_inputs=True),
    ],
    "RNN": [
        dict(tag="defaults"),
        dict(tag="bias+lens0+h0", bias=True, lens="zeros", h0=True),
        dict(tag="acts+Y", bias=True, acts=True, outputs=("Y",)),
        dict(tag="acts+clip+Yh", acts=True, clip=0.7, h0=True, outputs=("Y_h",)),
        dict(tag="acts+lens0", bias=True, acts=True, lens="zeros"),
        dict(tag="weights-as-inputs", bias=True, h0=True, weights_as_inputs=True),
    ],
}


def _value(name, dtype, shape):
    return helper.make_tensor_value_info(name, _ELEM[dtype] if dtype in _ELEM else dtype, shape)


def node_case(name, op, *, direction="forward", layout=0, dtype="float32", seq=4, batch=2, inp=3, hidden=5,
              bias=False, lens=None, h0=False, c0=False, peep=False, clip=None, input_forget=0, lbr=0,
              acts=None, outputs=None, opset=22, weights_as_inputs=False, path="session", rng=None,
              oracle=None) -> Case:
    """Build a one-node model with seeded random data.

    lens: None, "full" (all seq) or "zeros" (a mix with zeros); acts: None or
    (activations, alpha, beta); outputs: the requested subset (None: all).
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    dirs = 2 if direction == "bidirectional" else 1
    cell = CELLS[op]
    G = cell.gates
    npdt = _NP[dtype]

    def rand(*shape, scale=1.0):
        return (rng.uniform(-1.0, 1.0, size=shape) * scale).astype(np.float32).astype(npdt)

    w_scale = 1.0 / np.sqrt(max(inp, hidden))
    arrays = {"W": rand(dirs, G * hidden, inp, scale=2 * w_scale), "R": rand(dirs, G * hidden, hidden, scale=2 * w_scale)}
    if bias:
        arrays["B"] = rand(dirs, 2 * G * hidden, scale=0.5)
    if peep:
        arrays["P"] = rand(dirs, 3 * hidden, scale=0.5)
    X = rand(*((batch, seq, inp) if layout else (seq, batch, inp)))
    feeds = {"X": X}
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    if lens == "full":
        feeds["sequence_lens"] = np.full(batch, seq, np.int32)
    elif lens == "zeros":
        feeds["sequence_lens"] = np.array([[seq, 0, max(seq - 1, 0), 1][b % 4] for b in range(batch)], np.int32)
    if h0:
        feeds["initial_h"] = rand(*state)
    if c0:
        feeds["initial_c"] = rand(*state)

    attrs = {"hidden_size": hidden, "direction": direction}
    if opset >= 14:
        attrs["layout"] = layout
    if clip is not None:
        attrs["clip"] = clip
    if "input_forget" in cell.attributes and input_forget:
        attrs["input_forget"] = input_forget
    if "linear_before_reset" in cell.attributes:
        attrs["linear_before_reset"] = lbr
    if acts is not None:
        names, alpha, beta = acts
        if dirs == 2:
            # A different set per direction. Every set lists the parameters of
            # all its parameterised activations, so the alpha/beta cursors run
            # over both sets in order.
            other = _ACTS[op][(_ACTS[op].index(acts) + 1) % len(_ACTS[op])]
            names = names + other[0]
            alpha = ((alpha or []) + (other[1] or [])) or None
            beta = ((beta or []) + (other[2] or [])) or None
        attrs["activations"] = names
        if alpha:
            attrs["activation_alpha"] = alpha
        if beta:
            attrs["activation_beta"] = beta

    order = cell.inputs
    present = set(feeds) | set(arrays)
    node_in = [n if n in present else "" for n in order]
    while node_in[-1] == "":
        node_in.pop()
    wanted = tuple(outputs) if outputs else cell.outputs
    node_out = [o if o in wanted else "" for o in cell.outputs]
    while node_out[-1] == "":
        node_out.pop()
    node = helper.make_node(op, node_in, node_out, name=f"{op.lower()}_node", **attrs)

    inputs = [_value("X", dtype, list(X.shape))]
    if "sequence_lens" in feeds:
        inputs.append(_value("sequence_lens", TensorProto.INT32, [batch]))
    for s in ("initial_h", "initial_c"):
        if s in feeds:
            inputs.append(_value(s, dtype, list(state)))
    inits = []
    for n, a in arrays.items():
        if weights_as_inputs:
            inputs.append(_value(n, dtype, list(a.shape)))
            feeds[n] = a
        else:
            inits.append(numpy_helper.from_array(a, n))
    y_shape = [batch, seq, dirs, hidden] if layout else [seq, dirs, batch, hidden]
    outs = [_value(o, dtype, y_shape if o == "Y" else list(state)) for o in cell.outputs if o in wanted]
    graph = helper.make_graph([node], name, inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 8 if opset < 22 else 10)
    ref_args = dict(op=op, arrays=arrays, feeds={k: v for k, v in feeds.items() if k not in arrays},
                    attrs=attrs, outputs=wanted)
    if oracle is None:
        oracle = "ORT CPU" if dtype == "float32" and layout == 0 else "ORT CPU, layout-0 float32 equivalent"
    return Case(name, "differential", model, feeds, dtype, oracle, path=path, reference_args=ref_args)


def differential_cases(seed: int = 20261129, quick: bool = False) -> list[Case]:
    """The seeded differential suite (about 120 cases; ``quick`` keeps a third)."""
    rng = np.random.default_rng(seed)
    out = []
    counter = 0
    for op in CELLS:
        profiles = _PROFILES[op]
        k = acts_k = 0
        for direction in ("forward", "reverse", "bidirectional"):
            for layout in (0, 1):
                for dtype in ("float32", "float16"):
                    per_base = 1 if quick else 3
                    for _ in range(per_base):
                        prof = dict(profiles[k % len(profiles)])
                        k += 1
                        counter += 1
                        tag = prof.pop("tag")
                        if prof.pop("acts", False):  # cycle through every activation set
                            prof["acts"] = _ACTS[op][acts_k % len(_ACTS[op])]
                            acts_k += 1
                        opsets = (7, 14, 22) if layout == 0 else (14, 22)
                        opset = opsets[counter % len(opsets)]
                        path = "convert" if counter % 4 == 0 else "session"
                        dims = dict(seq=int(rng.integers(1, 7)), batch=int(rng.integers(1, 5)),
                                    inp=int(rng.integers(1, 6)), hidden=int(rng.integers(1, 7)))
                        name = f"{op}-{direction}-layout{layout}-{dtype}-{tag}-opset{opset}-{path}"
                        out.append(node_case(name, op, direction=direction, layout=layout, dtype=dtype,
                                             opset=opset, path=path, rng=rng, **dims, **prof))
    # Sizes that cross kernel boundaries: hidden not a multiple of 32, batch above 8.
    for op in CELLS:
        for dtype in ("float32", "float16"):
            out.append(node_case(f"{op}-bidirectional-{dtype}-hidden33-batch9", op, direction="bidirectional",
                                 dtype=dtype, seq=3, batch=9, inp=7, hidden=33, bias=True, lens="zeros", h0=True,
                                 c0="initial_c" in CELLS[op].inputs, rng=rng))
    # Zero sizes: ORT 1.32 CPU aborts on some of them, so ortops.reference is the oracle.
    for op in CELLS:
        for seq, batch in ((0, 2), (3, 0)):
            out.append(node_case(f"{op}-forward-seq{seq}-batch{batch}", op, seq=seq, batch=batch, bias=True,
                                 h0=True, c0="initial_c" in CELLS[op].inputs, rng=rng, oracle="ortops.reference"))
    return out


def cases(quick: bool = False) -> list[Case]:
    """Every case: the ONNX backend cases then the differential suite."""
    return backend_cases() + differential_cases(quick=quick)


# -- running ------------------------------------------------------------------------------


def oracle_outputs(case: Case) -> list[np.ndarray]:
    """Expected outputs of a case, in the model's output order."""
    if case.expected is not None:
        return case.expected
    if case.oracle == "ortops.reference":
        from ortops import reference

        a = case.reference_args
        f = getattr(reference, a["op"].lower())
        arr, fd = a["arrays"], a["feeds"]
        common = (fd["X"], arr["W"], arr["R"], arr.get("B"), fd.get("sequence_lens"), fd.get("initial_h"))
        cell = CELLS[a["op"]]
        extra = (fd.get("initial_c"), arr.get("P")) if "P" in cell.inputs else ()   # LSTM's
        res = f(*common, *extra, **a["attrs"])
        return [r for n, r in zip(cell.outputs, res) if n in a["outputs"]]
    import onnxruntime as ort

    from ortops.ort.equivalent import cpu_equivalent, cpu_feeds

    model = case.model if case.oracle == "ORT CPU" else cpu_equivalent(case.model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, cpu_feeds(case.feeds))


def _ortops_session(case: Case, device):
    import onnxruntime as ort

    import ortops

    if case.path == "convert":
        converted = ortops.convert(case.model, device=device)
        sess = ort.InferenceSession(converted.SerializeToString(), ortops.register(ort.SessionOptions()),
                                    providers=["CPUExecutionProvider"])
        placed = [n for n in converted.graph.node if n.domain == "ortops"]
        standard = [n for n in converted.graph.node if n.op_type in CELLS and n.domain in ("", "ai.onnx")]
        where = None if not standard else f"{len(standard)} recurrent node(s) left to ORT CPU"
        if not placed and not standard:
            where = "no recurrent node found"
        return sess, where
    sess = ortops.InferenceSession(case.model, providers=["CPUExecutionProvider"], device=device)
    cpu = [p.describe() for p in sess.placement if p.where != "gpu"]
    return sess, ("; ".join(cpu) if cpu else None)


def run_case(case: Case, device=None) -> Result:
    """Run one case twice through ortops and compare with its oracle."""
    tol = tolerance(case.dtype)
    t0 = time.perf_counter()

    def result(err, identical, passed, msg=""):
        return Result(case.name, case.suite, case.dtype, case.oracle, case.path, err, tol, identical, passed, msg,
                      time.perf_counter() - t0)

    try:
        sess, not_gpu = _ortops_session(case, device)
        if not_gpu:
            return result(float("nan"), False, False, f"not on the GPU: {not_gpu}")
        first = sess.run(None, case.feeds)
        second = sess.run(None, case.feeds)
    except Exception as e:  # a failing case is reported, the suite goes on
        return result(float("nan"), False, False, f"{type(e).__name__}: {e}")
    identical = all(a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
                    for a, b in zip(first, second))
    expected = oracle_outputs(case)
    want_dt = _NP[case.dtype]
    msgs = []
    errs = []
    for i, (got, exp) in enumerate(zip(first, expected)):
        if got.dtype != want_dt:
            msgs.append(f"output {i} has dtype {got.dtype}, expected {np.dtype(want_dt).name}")
        if got.shape != np.shape(exp):
            msgs.append(f"output {i} has shape {got.shape}, expected {np.shape(exp)}")
        errs.append(scaled_error(got, exp))
    if len(first) != len(expected):
        msgs.append(f"{len(first)} outputs, expected {len(expected)}")
    if not identical:
        msgs.append("the two runs differ in their bits")
    err = max(errs) if errs else 0.0
    if err > tol:
        msgs.append(f"scaled error {err:.3g} above {tol:g}")
    return result(err, identical, not msgs, "; ".join(msgs))


def run(selected: list[Case] | None = None, device=None, quick: bool = False, progress=None) -> list[Result]:
    """Run ``selected`` (default: :func:`cases`) and return the results."""
    selected = cases(quick=quick) if selected is None else selected
    results = []
    for i, c in enumerate(selected):
        results.append(run_case(c, device=device))
        if progress:
            progress(i + 1, len(selected), results[-1])
    return results


# -- running in several processes ------------------------------------------------------------
# On lavapipe most of a case is compiling its pipelines, one CPU core each (the driver compiles
# a pipeline on the thread that creates it): CI's 2-core machine runs the 138 cases in about
# half the time in two processes (docs/ci.md). Each worker process builds the same seeded case
# list once and runs the cases it is handed by index; its validation messages come back with
# each result, since every process has its own Vulkan instance.

_WORKER: dict = {}


def _worker_init(quick: bool, device) -> None:
    _WORKER["cases"] = cases(quick=quick)
    _WORKER["device"] = device


def _worker_run(index: int) -> tuple[int, Result, list[str]]:
    from ortops.device import validation_enabled, validation_messages

    result = run_case(_WORKER["cases"][index], device=_WORKER["device"])
    return index, result, (validation_messages() if validation_enabled() else [])


def run_parallel(jobs: int, device=None, quick: bool = False, progress=None) -> tuple[list[Result], list[str]]:
    """Every case of :func:`cases` in ``jobs`` processes: (results in case order, the
    validation messages of every process)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    n = len(cases(quick=quick))
    results: list[Result | None] = [None] * n
    messages: list[str] = []
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_worker_init, initargs=(quick, device)) as pool:
        futures = [pool.submit(_worker_run, i) for i in range(n)]
        for done, f in enumerate(as_completed(futures), 1):
            index, result, found = f.result()
            results[index] = result
            messages += found
            if progress:
                progress(done, n, result)
    return [r for r in results if r is not None], messages


def _device_text(device) -> str:
    try:
        from ortops import device as dev

        return str(dev.select(device))
    except Exception as e:
        return f"unknown ({e})"


def write_report(results: list[Result], path: str, device=None) -> None:
    """Write the markdown table of ``results`` to ``path``."""
    import onnxruntime as ort

    import ortops

    passed = sum(r.passed for r in results)
    lines = [
        "# Conformance",
        "",
        "Generated by `python scripts/ci/conformance.py` (do not edit by hand).",
        "",
        f"- ortops {ortops.__version__}, onnxruntime {ort.__version__}, onnx {onnx.__version__}",
        f"- device: {_device_text(device)}",
        f"- {passed} of {len(results)} cases passed; every case ran twice and must give identical bits, "
        "and every recurrent node must run on the GPU.",
        "- error: max|ortops - expected| / max|expected|; tolerance 1e-5 for float32, 2e-3 for float16.",
        "- oracles: the ONNX backend suite's expected outputs; stock ONNX Runtime CPU; for layout-1 and "
        "float16 cases ONNX Runtime CPU on the layout-0 float32 equivalent model; for zero sizes "
        "ortops.reference (ONNX Runtime 1.32 CPU aborts on some of them).",
        "- path: `session` is ortops.InferenceSession (weights uploaded once), `convert` is "
        "ortops.convert + register with a plain onnxruntime session.",
        "",
        "| case | suite | oracle | path | max error | tolerance | identical bits | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        verdict = "pass" if r.passed else f"**FAIL** {r.message}"
        lines.append(f"| {r.case} | {r.suite} | {r.oracle} | {r.path} | {r.max_error:.3g} | {r.tolerance:g} | "
                     f"{'yes' if r.identical else 'no'} | {verdict} |")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    """Command line: run everything, print failures, write the report; exit 1 on any failure."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one option set per grid point instead of three")
    ap.add_argument("--device", default=None, help="Vulkan device (index, name part or type)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "conformance.md"), help="markdown report path")
    ap.add_argument("--no-report", action="store_true", help="do not write the markdown report")
    ap.add_argument("--jobs", type=int, default=1,
                    help="processes running cases at once (default 1; CI: 2, one per core of its machine)")
    args = ap.parse_args(argv)

    def progress(i, n, r):
        if not r.passed:
            print(f"\nFAIL {r.case}: {r.message}", file=sys.stderr)
        print(f"\r[{i}/{n}]", end="", file=sys.stderr, flush=True)

    from ortops.device import validation_enabled, validation_messages

    if args.jobs < 1:
        ap.error(f"--jobs must be 1 or more, got {args.jobs}")
    if args.jobs == 1:
        results = run(device=args.device, quick=args.quick, progress=progress)
        messages = []
    else:
        results, messages = run_parallel(args.jobs, device=args.device, quick=args.quick, progress=progress)
    print(file=sys.stderr)
    failed = [r for r in results if not r.passed]
    # Under ORTOPS_VALIDATION=1 (as CI runs it) any validation message fails the job.
    messages += validation_messages() if validation_enabled() else []
    for m in messages[:5]:
        print(f"validation: {m[:400]}", file=sys.stderr)
    if not args.no_report:
        write_report(results, args.out, args.device)
        print(f"report: {args.out}")
    if validation_enabled():
        print(f"synchronization validation: {len(messages)} message(s)")
    print(f"conformance: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed or messages else 0


if __name__ == "__main__":
    sys.exit(main())
