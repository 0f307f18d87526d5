"""A calibrated cost model of one recurrent node: the device against ONNX Runtime CPU.

Each side is modelled as ``per_run + per_step * steps + per_flop * flops`` (seconds):

* ``per_run``: what a run costs whatever its size (the device: a submission, its fence, the
  copies of the custom op; the CPU: ORT's kernel set-up);
* ``per_step``: what each sequential step costs beyond its arithmetic (the device: a dispatch
  and a barrier per step; the CPU: the per-step GEMM call) — ``steps`` counts a step per
  direction (``seq_length * num_directions``);
* ``per_flop``: the inverse of the throughput (``flops = 2 * directions * seq * batch * gates *
  hidden * (input + hidden)``, the two matrix products).

:func:`calibrate` measures both sides once per device, with an LSTM on the device
(``ortops.RecurrentLayer``) and the same LSTM in a small ORT model on this machine's thread
count, at three shapes chosen to isolate the three terms (:data:`SHAPES`). The result is cached
on disk (:func:`cache_path`; ``ORTOPS_COST_CACHE`` relocates it) under a key naming the device,
its driver, the versions of ortops and onnxruntime and the thread count, so it is measured once
per such combination; :func:`calibration` reads it or measures it. Writers take a file lock and
replace the file atomically, so processes calibrating at once leave a whole file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass

import numpy as np

from ortops.timing import median_s

log = logging.getLogger("ortops")

CACHE_ENV = "ORTOPS_COST_CACHE"
FORMAT = 1
#: Calibration shapes (seq, batch, input, hidden): one step of a small LSTM (fixed cost per
#: run), many steps of it (cost per step), a short wide one (throughput).
SHAPES = {"default": ((1, 1, 32, 32), (64, 1, 32, 32), (8, 16, 512, 512)),
          "small": ((1, 1, 8, 8), (16, 1, 8, 8), (4, 4, 64, 64))}
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


@dataclass(frozen=True)
class Side:
    """One side's costs, in seconds."""

    per_run: float
    per_step: float
    per_flop: float

    def predict(self, work: "Work") -> float:
        return self.per_run + self.per_step * work.steps + self.per_flop * work.flops


@dataclass(frozen=True)
class Work:
    """What one run of a node costs in the model's terms; ``assumed`` says which dimensions
    were dynamic and what was assumed for them."""

    steps: int
    flops: float
    assumed: str = ""


@dataclass(frozen=True)
class Calibration:
    """Both sides' costs on one device (``key``: what they were measured for)."""

    key: str
    device: Side
    cpu: Side

    def to_dict(self) -> dict:
        return {"key": self.key, "device": asdict(self.device), "cpu": asdict(self.cpu)}

    @classmethod
    def from_dict(cls, d: dict) -> "Calibration":
        return cls(d["key"], Side(**d["device"]), Side(**d["cpu"]))

    def describe(self) -> str:
        def side(s: Side) -> str:
            gflops = 1e-9 / s.per_flop if s.per_flop > 0 else float("inf")
            return f"{s.per_run * 1e3:.3f} ms per run, {s.per_step * 1e6:.1f} us per step, {gflops:.1f} GFLOP/s"

        return f"{self.key}\n  device:  {side(self.device)}\n  ORT CPU: {side(self.cpu)}"


def work(op: str, seq: int, batch: int, inp: int, hidden: int, directions: int, assumed: str = "") -> Work:
    """The :class:`Work` of one run of an ``op`` node of these sizes."""
    flops = 2.0 * directions * seq * batch * GATES[op] * hidden * (inp + hidden)
    return Work(seq * directions, flops, assumed)


# -- the cache ---------------------------------------------------------------------------


def cache_path() -> str:
    """``$ORTOPS_COST_CACHE`` if set, else ``costmodel.json`` in the user's cache directory
    (``$XDG_CACHE_HOME/ortops``, by default ``~/.cache/ortops``)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ortops", "costmodel.json")


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.warning("ortops: cost model cache %s unreadable (%s); calibrating again", path, e)
        return {}
    return data.get("calibrations", {}) if isinstance(data, dict) and data.get("format") == FORMAT else {}


@contextlib.contextmanager
def _locked(path: str):
    """An exclusive lock on ``path + '.lock'`` (fcntl; where there is none, no lock: the atomic
    replace still leaves a whole file)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".lock", "a") as f:
        try:
            import fcntl
        except ImportError:  # not POSIX
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def load(key: str, path: str | None = None) -> Calibration | None:
    """The cached calibration of ``key`` (None if there is none)."""
    entry = _read(path or cache_path()).get(key)
    try:
        return None if entry is None else Calibration.from_dict(entry)
    except (KeyError, TypeError):
        return None


def store(cal: Calibration, path: str | None = None) -> None:
    """Add ``cal`` to the cache file (under its lock; written to a temporary file and renamed)."""
    path = path or cache_path()
    with _locked(path):
        entries = _read(path)
        entries[cal.key] = cal.to_dict()
        fd, tmp = tempfile.mkstemp(prefix=".costmodel-", dir=os.path.dirname(os.path.abspath(path)))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"format": FORMAT, "calibrations": entries}, f, indent=1, sort_keys=True)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


# -- measuring ------------------------------------------------------------------------------


def cpu_threads() -> int:
    """The thread count ORT CPU's sessions use here (its default: one per core it may use)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def key(device) -> str:
    """The cache key of a device (an ``ortops.Device``)."""
    import onnxruntime as ort

    import ortops

    return (f"{device.name} | {device.driver} {device.driver_info} | ortops {ortops.__version__} | "
            f"onnxruntime {ort.__version__} | {cpu_threads()} CPU threads")


def _weights(rng, inp: int, hidden: int):
    b = 1.0 / np.sqrt(hidden)
    return (rng.uniform(-b, b, (1, 4 * hidden, inp)).astype(np.float32),
            rng.uniform(-b, b, (1, 4 * hidden, hidden)).astype(np.float32))


def _device_runner(device, inp: int, hidden: int):
    from ortops.layer import RecurrentLayer

    W, R = _weights(np.random.default_rng(0), inp, hidden)
    layer = RecurrentLayer("LSTM", W, R, device=device)
    return lambda x: layer(x, outputs=("Y",))


def _cpu_runner(inp: int, hidden: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    W, R = _weights(np.random.default_rng(0), inp, hidden)
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=hidden)
    graph = helper.make_graph([node], "calibration",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["seq", "batch", inp])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda x: sess.run(None, {"X": x})


def fit(points) -> Side:
    """The :class:`Side` through three measurements ``(Work, seconds)`` taken at :data:`SHAPES`
    (one step, many steps of the same size, a wide one): the 3x3 system solved exactly, a term
    that comes out negative (timing noise on a side where it is negligible) set to 0 and the
    others fitted again without it."""
    a = np.array([[1.0, w.steps, w.flops] for w, _ in points])
    t = np.array([s for _, s in points])
    free = [0, 1, 2]
    while True:
        x = np.zeros(3)
        x[free] = np.linalg.lstsq(a[:, free], t, rcond=None)[0]
        if (x >= 0).all() or len(free) == 1:
            return Side(*(float(max(v, 0.0)) for v in x))
        free.remove(int(np.argmin(np.where(np.isin(np.arange(3), free), x, np.inf))))


def measure(device, shapes: str = "default", repeat: int = 20) -> Calibration:
    """Measure both sides on ``device`` (an ``ortops.Device``) at ``SHAPES[shapes]``."""
    rng = np.random.default_rng(1)
    points = {"device": [], "cpu": []}
    runners = {}
    for seq, batch, inp, hidden in SHAPES[shapes]:
        if (inp, hidden) not in runners:
            runners[inp, hidden] = (_device_runner(device, inp, hidden), _cpu_runner(inp, hidden))
        x = rng.uniform(-1, 1, (seq, batch, inp)).astype(np.float32)
        w = work("LSTM", seq, batch, inp, hidden, 1)
        for side, run in zip(("device", "cpu"), runners[inp, hidden]):
            points[side].append((w, median_s(lambda: run(x), repeat)))
    cal = Calibration(key(device), fit(points["device"]), fit(points["cpu"]))
    log.info("ortops: cost model calibrated: %s", cal.describe())
    return cal


def calibration(device) -> Calibration:
    """The calibration of ``device`` (an ``ortops.Device``): cached, else measured and cached."""
    k = key(device)
    cal = load(k)
    if cal is None:
        cal = measure(device)
        store(cal)
    return cal
