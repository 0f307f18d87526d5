"""A calibrated cost model of one recurrent node: the device against ONNX Runtime CPU.

Each side is modelled as ``per_run + per_step * steps + per_flop * flops`` (seconds):

* ``per_run``: what a run costs whatever its size (the device: a submission, its fence, the
  copies of the custom op; the CPU: ORT's kernel set-up);
* ``per_step``: what each sequential step costs beyond its arithmetic (the device: a dispatch
  and a barrier per step; the CPU: the per-step GEMM call) — ``steps`` counts a step per
  direction (``seq_length * num_directions``);
* ``per_flop``: the inverse of the throughput (``flops = 2 * directions * seq * batch * gates *
  hidden * (input + hidden)``, the two matrix products).

:func:`measure` times both sides once per device, with an LSTM on the device (the core's
``Layer``) and the same LSTM in a small ORT model on this machine's thread count, at three points
chosen to isolate the three terms (:data:`SHAPES`: one step and all the steps of a small layer,
then a wide one; the table by device class, :func:`table`). The result is cached on disk
(:func:`cache_path`; ``ORTOPS_COST_CACHE`` relocates it) under a key naming the device, its
driver, the versions of ortops and onnxruntime and the thread count, so it is measured once per
such combination; :func:`calibration` reads it or measures it, saying so first (a warning on
the ``ortops`` logger: the first ``placement="auto"`` session waits for it). Writers take a file
lock and replace the file atomically, so processes calibrating at once leave a whole file.

The model (prediction, fit, key, the calibration shapes) and the cache are the native core's
(``src/core/placement/costmodel.hpp``, ``costcache.hpp``, through ``_vk``), the ones the plugin
execution provider decides and caches with, so both doors read one calibration and leave the
same nodes to the CPU; what stays here is the Python door's measurement.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass

import numpy as np

from ortops.cells import CELLS

log = logging.getLogger("ortops")



def _native():
    from ortops.device import _native as native

    return native()


CACHE_ENV = "ORTOPS_COST_CACHE"
FORMAT = 1
GATES = {name: c.gates for name, c in CELLS.items()}


def __getattr__(name: str):
    """``SHAPES``: the calibration tables by name ("wide" for GPUs, "small" for CPU devices and
    tests), each point (seq, batch, input, hidden, steps): an LSTM of ``seq`` steps run for its
    first ``steps``. The core's tables (costmodel.hpp), read on first use."""
    if name == "SHAPES":
        return {n: tuple(_native().calibration_shapes(n)) for n in ("wide", "small")}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Side:
    """One side's costs, in seconds."""

    per_run: float
    per_step: float
    per_flop: float

    def predict(self, work: "Work") -> float:
        return _native().cost_predict(self.astuple(), work.astuple())

    def astuple(self) -> tuple[float, float, float]:
        return (self.per_run, self.per_step, self.per_flop)


@dataclass(frozen=True)
class Work:
    """What one run of a node costs in the model's terms; ``assumed`` says which dimensions
    were dynamic and what was assumed for them."""

    steps: int
    flops: float
    assumed: str = ""

    def astuple(self) -> tuple[int, float, str]:
        return (self.steps, self.flops, self.assumed)


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
        return _native().cost_describe(self.key, self.device.astuple(), self.cpu.astuple())


def work(op: str, seq: int, batch: int, inp: int, hidden: int, directions: int, assumed: str = "") -> Work:
    """The :class:`Work` of one run of an ``op`` node of these sizes."""
    return Work(*_native().cost_work(GATES[op], seq, batch, inp, hidden, directions, assumed))


# -- the cache ---------------------------------------------------------------------------


def cache_path() -> str:
    """``$ORTOPS_COST_CACHE`` if set, else ``costmodel.json`` in the user's cache directory
    (``$XDG_CACHE_HOME/ortops``, by default ``~/.cache/ortops``)."""
    return _native().cost_cache_path()


def load(key: str, path: str | None = None) -> Calibration | None:
    """The cached calibration of ``key`` (None if there is none; an unreadable file is
    warned about and counts as empty)."""
    path = path or cache_path()
    found, problem = _native().cost_cache_load(key, path)
    if problem:
        log.warning("ortops: %s", problem)
    if found is None:
        return None
    k, device, cpu = found
    return Calibration(k, Side(*device), Side(*cpu))


def store(cal: Calibration, path: str | None = None) -> None:
    """Add ``cal`` to the cache file (under its lock; written to a temporary file and renamed)."""
    _native().cost_cache_store(cal.key, cal.device.astuple(), cal.cpu.astuple(), path or cache_path())


# -- measuring ------------------------------------------------------------------------------


def cpu_threads() -> int:
    """The thread count ORT CPU's sessions use here (its default: one per core it may use)."""
    return _native().cpu_threads()


def key(device) -> str:
    """The cache key of a device (an ``ortops.Device``): the one the plugin EP computes."""
    import onnxruntime as ort

    import ortops

    return _native().calibration_key(device.name, device.driver, device.driver_info, ortops.__version__,
                                     ort.__version__, cpu_threads())


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
    """An ORT CPU session of the LSTM of :func:`_device_runner`'s weights (bench/placement.py)."""
    W, R = _weights(np.random.default_rng(0), inp, hidden)
    return _cpu_session(inp, hidden, W, R)


def fit(points) -> Side:
    """The :class:`Side` through three measurements ``(Work, seconds)`` taken at :data:`SHAPES`
    (one step, many steps of the same size, a wide one): the system solved by least squares
    (exactly for three points), a term that comes out negative (timing noise on a side where it
    is negligible) set to 0 and the others fitted again without it (the core's fit)."""
    return Side(*_native().cost_fit([(w.astuple(), float(s)) for w, s in points]))


def _cpu_session(inp: int, hidden: int, W, R):
    """The ORT CPU side of the core's measurement: the LSTM of these weights in an ORT CPU
    session, returned as ``run(x)``."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=hidden)
    graph = helper.make_graph([node], "calibration",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["seq", "batch", inp])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(W), "W"), numpy_helper.from_array(np.asarray(R), "R")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda x: sess.run(None, {"X": x})


def table(device) -> str:
    """The name of the :data:`SHAPES` table ``device`` is calibrated with: "small" on a CPU
    implementation of Vulkan (or anywhere with ``ORTOPS_COST_SHAPES=small``), else "wide"."""
    return _native().calibration_table(device.uuid)


def measure(device, shapes: str | None = None, max_runs: int | None = None) -> Calibration:
    """Measure both sides on ``device`` (an ``ortops.Device``) with the core's measurement (the
    plugin EP's): the device side through the native layer, the ORT CPU side in this process's
    onnxruntime, at the points of ``SHAPES[shapes]`` (by default the device's table,
    :func:`table`), each timed over up to ``max_runs`` runs (by default the core's
    CALIBRATION_MAX_RUNS; fewer once they take its budget, calibration.hpp)."""
    limit = {"max_runs": max_runs} if max_runs else {}
    k, dev, cpu = _native().measure_calibration(device.uuid, key(device), shapes or "default", _cpu_session,
                                                **limit)
    return Calibration(k, Side(*dev), Side(*cpu))


def calibration(device) -> Calibration:
    """The calibration of ``device`` (an ``ortops.Device``): cached, else measured (announced
    on the ``ortops`` logger as a warning, reported at info level) and cached."""
    k = key(device)
    cal = load(k)
    if cal is None:
        log.warning("%s", _native().calibration_notice(device.uuid, cache_path()))
        start = time.perf_counter()
        cal = measure(device)
        log.info("%s", _native().calibration_report(cal.key, cal.device.astuple(), cal.cpu.astuple(),
                                                   time.perf_counter() - start))
        store(cal)
    return cal
