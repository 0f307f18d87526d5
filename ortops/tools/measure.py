"""Measuring one recurrent layer, the helpers ``ortops bench`` (bench.py) and the repository's
measuring scripts (bench/) share: seeded weights and one-node models, a layer's GPU time and
call (Vulkan timestamps; numpy in, numpy out), the session's and stock ONNX Runtime CPU's
end-to-end times, the empty run's floor, and warming the GPU's clocks and the process before
anything is timed."""

from __future__ import annotations

import statistics

import numpy as np

from ortops.cells import CELLS
from ortops.timing import median_s, samples, wall_ms, warm


def median_ms(fn, runs: int) -> float:
    """Median wall-clock ms of ``fn`` over ``runs`` runs after 3 untimed ones."""
    return 1e3 * median_s(fn, runs, warmup_runs=3)


def weights(cell, inp, hidden, dirs, dtype, seed=0):
    """Seeded uniform W, R, B (ONNX layout) of a layer, in +-1/sqrt(hidden) as torch draws them."""
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
    W, R, B = weights(cell, inp, hidden, dirs, dtype)
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


def layer_figures(cell, seq, batch, inp, hidden, direction, dtype, runs, device, mode=None, *,
                   budget_s=None, error=False, X=None):
    """One RecurrentLayer of the shape in ``mode``: GPU time (median of its timestamps), the
    layer call (numpy in, numpy out), memory, its budget, the GPU split, the bytes in and out
    of a call and, with ``error``, the scaled error of Y against the float64 reference.
    ``budget_s``: fewer runs (at least 3) once that many seconds have passed (the sweep)."""
    from ortops import reference
    from ortops.compare import scaled_error
    from ortops.layer import RecurrentLayer

    dirs = 2 if direction == "bidirectional" else 1
    W, R, B = weights(cell, inp, hidden, dirs, dtype)
    layer = RecurrentLayer(cell, W, R, B, direction=direction, device=device, timestamps=True,
                           mode=mode)
    if X is None:
        X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(dtype)
    for _ in range(3):
        outputs = layer(X)
    parts = []

    def gpu_ms():
        layer(X)
        parts.append(layer.last_gpu_profile)
        return layer.last_gpu_time_ms

    gpu = samples(gpu_ms, runs, budget_s)
    profile = {k: statistics.median(p[k] for p in parts) for k in parts[0]}
    layer_call = statistics.median(samples(lambda: wall_ms(lambda: layer(X)), runs, budget_s))
    sizes = layer.scratch_sizes(seq, batch)
    err = None
    if error:
        ref = getattr(reference, cell.lower())(X, W, R, B, hidden_size=hidden, direction=direction)
        err = scaled_error(outputs[0], ref[0])
    # The step kernel the plan recorded (mode "fast" may record the matrix-unit one).
    steps = next((plan.steps for pool in layer._plans.values() for plan in pool.free), None)
    return dict(gpu_ms=statistics.median(gpu), layer_call_ms=layer_call, step_kernel=steps,
                memory_bytes=layer.memory_bytes(seq, batch),
                memory_budget_bytes=layer.weight_bytes + sizes.xw + sizes.state,
                gpu_profile=profile, bytes_in=X.nbytes,
                bytes_out=sum(np.asarray(o).nbytes for o in outputs), error=err, runs=len(gpu))


def gpu_time(cell, seq, batch, inp, hidden, direction, dtype, runs, device, mode=None):
    """(GPU ms, layer call ms, memory bytes, memory budget bytes, GPU split) of one layer."""
    f = layer_figures(cell, seq, batch, inp, hidden, direction, dtype, runs, device, mode)
    return (f["gpu_ms"], f["layer_call_ms"], f["memory_bytes"], f["memory_budget_bytes"],
            f["gpu_profile"])


def round_trip_ms(device, runs, poll=True):
    """Submit-and-wait of a prerecorded sequence doing nothing: the floor of any run.

    ``poll``: end with the completion marker that layers poll (their path); without it,
    Kompute's plain fence wait."""
    from ortops.device import context

    _, ctx = context(device)
    seq = ctx.sequence()
    seq.barrier("compute", "compute")
    if poll:
        seq.finish()
    return median_ms(seq.eval, runs)


def eval_split_us(device, runs):
    """Median microseconds of an empty run in submit, until its marker lands, in the fence wait."""
    from ortops.device import context

    _, ctx = context(device)
    seq = ctx.sequence()
    seq.barrier("compute", "compute")
    seq.finish()
    splits = [seq.profile_eval() for _ in range(runs + 3)][3:]
    return {k: statistics.median(s[i] for s in splits)
            for i, k in enumerate(("submit", "until_marker", "fence_wait"))}


def session_ms(model, X, runs, device, mode=None):
    """A one-node model through ortops.InferenceSession, numpy in and out."""
    try:
        from ortops.ort.session import InferenceSession
    except ImportError:
        return None
    sess = InferenceSession(model.SerializeToString(), device=device, mode=mode)
    return median_ms(lambda: sess.run(None, {"X": X}), runs)


def ort_cpu_ms(model, X, runs, threads):
    """Stock ONNX Runtime CPU on ``threads`` intra-op threads (None for float16: no kernels)."""
    import onnxruntime as ort

    if X.dtype != np.float32:
        return None  # stock ORT CPU has no float16 recurrent kernels
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return median_ms(lambda: sess.run(None, {"X": X}), runs)


def warm_gpu(shape, device, seconds=3.0):
    """A few seconds of the heaviest shape before anything is timed: on the H200 the first row
    measured 1.1 ms of GPU time after a second of light load, 0.31 ms once the GPU had run
    heavy work."""
    warm(lambda: gpu_time(*shape, np.float32, 3, device), seconds)


def warm_process(device, runs):
    """ONNX Runtime's first-session set-up (the custom-op library's registration included),
    the CPU's clocks: so that the first shape of a table is measured like the others."""
    model = one_node_model("LSTM", 4, 1, 16, 16, "forward", np.float32)
    session_ms(model, np.zeros((4, 1, 16), np.float32), runs, device)
