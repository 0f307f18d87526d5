"""RecurrentLayer: one ONNX RNN, GRU or LSTM layer on a Vulkan device, planned once per shape.

A layer uploads its weights once. For each input shape (and set of optional inputs and
requested outputs: a :class:`~ortops.plan.PlanKey`) it builds a plan: buffers, pipelines and
one Kompute sequence recorded with every pass and barrier of a run (ortops.plan, which also
lists the passes). A call then only writes the inputs into mapped memory, submits that
sequence once and copies the outputs out.

The pieces live by concern: argument checks here and in ortops.validation; plans, their
recording and their pool in ortops.plan; kernel variants and their heuristics in
ortops.variants; each shader's named specialization constants in ortops.specialization;
device limits in ortops.limits.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Collection, Mapping

import numpy as np

from ortops import plan as _plan
from ortops import validation, variants
from ortops._typing import Array, ArrayIn, DeviceSpec, Floats, Names
from ortops.cells import CELLS, NAMES
from ortops.device import context, require_mode
from ortops.modes import check_mode
from ortops.limits import Limits, UnsupportedLayerError
from ortops.plan import PlanKey, region_key

__all__ = ["RecurrentLayer", "ScratchSizes", "UnsupportedLayerError"]

# Tunables read each time a layer is made or a plan built, so tests may lower them here.
_MAX_GROUPS = variants.MAX_GROUPS              # cap on every dispatch dimension
_LARGE_PROJECTION = variants.LARGE_PROJECTION  # projection outputs from which the 128 x 128 tile is used
_PLAN_CACHE = _plan.PLAN_CACHE  # shapes whose plans a layer keeps (least recently used dropped)
_MAX_CONCURRENT = 8  # default bound on runs of one shape in flight at once (one plan each)

# Older names, kept for callers of the module's internals.
_Plan = _plan.Plan
_PlanPool = _plan._PlanPool


@dataclass(frozen=True)
class ScratchSizes:
    """Bytes of the two scratch regions a run needs (docs/design.md, 'Scratch').

    ``xw``: the input projection of every step and direction, float32
    [dirs, seq, batch, gates * hidden]. ``state``: every step's hidden state
    [seq + 1, dirs, batch, hidden], then the LSTM cell state [dirs, batch, hidden], or for a
    GRU with linear_before_reset = 0 its z and r * h (two more [dirs, batch, hidden] planes).
    """

    xw: int
    state: int


class RecurrentLayer:
    """One RNN, GRU or LSTM layer with its weights on a Vulkan device.

    ``op`` is "LSTM", "GRU" or "RNN"; weights and attributes are ONNX's (W, R as stored:
    [dirs, gates * hidden, input] and [dirs, gates * hidden, hidden], gate order LSTM i, o, f,
    c and GRU z, r, h; B [dirs, 2 * gates * hidden]; P [dirs, 3 * hidden] in the order i, o, f).
    Tensors are float32 or float16 (all the same type); arithmetic and state are float32.
    Every shape and attribute is checked before anything is recorded; bad ones raise
    ValueError naming the operator, the argument, what was expected and what came.

    Call the layer with X (and optionally sequence_lens, initial_h, initial_c) to run it;
    see :meth:`__call__`. ``timestamps=True`` records GPU timestamps around the passes and
    leaves the last run's GPU time in :attr:`last_gpu_time_ms` and its split (projection and
    state set-up, steps, outputs) in :attr:`last_gpu_profile`.

    A layer may be called from many threads at once: each concurrent run of a shape uses its
    own plan (at most ``max_concurrent`` per shape, default 8; further runs wait), so results
    equal serial results bit for bit. Runs given caller scratch regions are serialised, since
    they may share one arena.

    ``mode`` (ortops.modes): "deterministic" (default; the same bits run to run on one device)
    or "exact" (the same bits on every conformant Vulkan device, docs/exact.md) or "fast"
    (float16 input projection on matrix hardware where the device has it, docs/modes.md).
    """

    def __init__(self, op: str, W: ArrayIn, R: ArrayIn, B: ArrayIn | None = None,
                 P: ArrayIn | None = None, *, hidden_size: int | None = None,
                 direction: str = "forward", layout: int = 0, activations: Names = None,
                 activation_alpha: Floats = None, activation_beta: Floats = None,
                 clip: float | None = None, input_forget: int = 0, linear_before_reset: int = 0,
                 device: DeviceSpec = None, timestamps: bool = False,
                 max_concurrent: int = _MAX_CONCURRENT,
                 mode: str | None = None) -> None:
        op = str(op).upper()
        if op not in CELLS:
            raise ValueError(f"ortops: op must be one of {NAMES}, got {op!r}")
        self.spec = validation.check_layer(
            op, W, R, B, P, hidden_size=hidden_size, direction=direction, layout=layout,
            activations=activations, activation_alpha=activation_alpha,
            activation_beta=activation_beta, clip=clip, input_forget=input_forget,
            linear_before_reset=linear_before_reset,
            allowed_dtypes=(np.float32, np.float16))
        self.mode = check_mode(mode, op)
        self.device, self._ctx = context(device)
        # The kernels rely on NaN/Inf/-0 being preserved; exact mode names itself if refused.
        require_mode(self.device, self.mode)
        self.timestamps = bool(timestamps) and self.device.timestamps
        self.last_gpu_time_ms = None
        self.last_gpu_profile = None
        if int(max_concurrent) != max_concurrent or max_concurrent < 1:
            raise ValueError(f"{op}: max_concurrent must be a positive integer, got {max_concurrent!r}")
        self.max_concurrent = int(max_concurrent)
        self._cache = _plan.PlanCache(_PLAN_CACHE)
        self._scratch_lock = threading.Lock()
        self._limit = self.device.max_storage_buffer_range
        tensors = {"W": W, "R": R}
        if B is not None:
            tensors["B"] = B
        if P is not None:
            tensors["P"] = P
        self._weights = _plan.upload_weights(
            self._ctx, {k: np.ascontiguousarray(v) for k, v in tensors.items()}, self._limits())
        self.weight_bytes = sum(np.asarray(v).nbytes for v in tensors.values())
        # R in the batched step kernel's layout, uploaded when a plan first needs it (a layer
        # run only at small batches never holds the second copy).
        self._host_r: np.ndarray | None = np.ascontiguousarray(R)
        self._batched_lock = threading.Lock()
        # Absent optional inputs bind a one-word buffer the shader never reads.
        self._dummy = self._ctx.buffer(4, "storage")

    # ------------------------------------------------------------------ public helpers

    @property
    def op(self) -> str:
        return self.spec.op

    def scratch_sizes(self, seq: int, batch: int) -> ScratchSizes:
        """The two scratch regions a run of this shape needs, in bytes."""
        s = self.spec
        plane = s.num_directions * batch * s.hidden_size
        extra = CELLS[s.op].extra_state_planes(s.linear_before_reset) * plane
        transposed = variants.transposed_floats(s.op, s.linear_before_reset, s.num_directions,
                                                s.hidden_size, batch)
        return ScratchSizes(
            xw=4 * s.num_directions * seq * batch * s.gates * s.hidden_size,
            state=4 * ((seq + 1) * plane + extra + transposed),
        )

    def allocate(self, nbytes: int):
        """A device-only buffer on this layer's device, e.g. an arena for both scratch regions."""
        return self._ctx.buffer(int(nbytes), "storage")

    def memory_bytes(self, seq: int, batch: int) -> int:
        """Device memory of a run of this shape: weights, scratch, inputs and outputs."""
        s = self.spec
        scratch = self.scratch_sizes(seq, batch)
        item = s.dtype.itemsize
        io = item * seq * batch * (s.input_size + s.num_directions * s.hidden_size)
        io += item * 3 * s.num_directions * batch * s.hidden_size
        return self.weight_bytes + scratch.xw + scratch.state + io

    # ------------------------------------------------------------------ running

    def __call__(self, X: ArrayIn, sequence_lens: ArrayIn | None = None,
                 initial_h: ArrayIn | None = None, initial_c: ArrayIn | None = None, *,
                 outputs: str | Collection[str] | None = None, max_length: int | None = None,
                 xw_scratch: Any = None, state_scratch: Any = None,
                 out: Mapping[str, Array] | None = None) -> tuple[Array | None, ...]:
        """Run the layer; return (Y, Y_h) for GRU/RNN or (Y, Y_h, Y_c) for LSTM.

        Outputs are numpy arrays in the weights' dtype with ONNX's shapes for the layout. An
        output not named in ``outputs`` (a collection of "Y", "Y_h", "Y_c"; default all) is
        not computed and comes back as None; a single name may be given as a string. ``max_length`` is a host-side bound on the
        sequence lengths (docs/design.md, 'MaxLength'): the loop runs that many steps; it must be at
        least every sequence length. ``xw_scratch`` and ``state_scratch`` are optional
        ``(buffer, byte_offset)`` regions (buffers from :meth:`allocate`; both may be the same
        arena) of at least :meth:`scratch_sizes` bytes; by default the plan owns its scratch.
        ``out`` maps output names to arrays to read those outputs into (C-contiguous, writeable,
        the output's shape and dtype), returned in their places: a caller that reuses them
        skips the page faults of a fresh array on every run (docs/perf.md, "Host path").
        """
        s = self.spec
        names = validation.OUTPUTS[s.op]
        if outputs is None:
            wanted = names
        else:
            wanted = (outputs,) if isinstance(outputs, str) else tuple(outputs)
            for name in wanted:
                if name not in names:
                    raise ValueError(f"{s.op}: outputs may name {', '.join(names)}, got {name!r}")
        seq, batch = validation.check_inputs(s, X, sequence_lens, initial_h, initial_c)
        lens = None if sequence_lens is None else np.ascontiguousarray(sequence_lens, dtype=np.int32)
        steps = self._steps(seq, lens, max_length)
        shapes = validation.output_shapes(s, seq, batch)
        if out is not None:
            validation.check_out(s, out, shapes)
        if seq == 0 or batch == 0:
            return _into(self._empty(shapes, names, wanted, initial_h, initial_c), names, out)

        key = PlanKey(seq, batch, steps, has_lens=lens is not None,
                      has_h0=initial_h is not None, has_c0=initial_c is not None,
                      outputs=tuple(n for n in names if n in wanted),
                      xw_region=region_key(xw_scratch), state_region=region_key(state_scratch),
                      mode=self.mode)
        caller_scratch = xw_scratch is not None or state_scratch is not None
        pool, plan = self._cache.acquire(key, 1 if caller_scratch else self.max_concurrent)
        try:
            if plan is None:
                plan = self._build(key, xw_scratch, state_scratch)
            if not caller_scratch:
                return self._run(plan, shapes, names, X, lens, initial_h, initial_c, out)
            # Caller regions may be one arena shared by this layer's shapes: one such run at a
            # time (sharing an arena between layers is the caller's to serialise).
            with self._scratch_lock:
                return self._run(plan, shapes, names, X, lens, initial_h, initial_c, out)
        finally:
            self._cache.release(key, pool, plan)   # plan None: building it failed

    @property
    def _plans(self):
        """The plan pools by key (least recently used first): each has ``count`` and ``free``."""
        return self._cache.pools

    def _run(self, plan, shapes, names, X, lens, initial_h, initial_c, out=None):
        """The hot path: write the inputs, submit once, read the outputs (the plan is ours).

        X is written as given when C-contiguous (ascontiguousarray is then the array itself;
        its dtype was checked): one copy in, and one copy out of each output, both on the
        native side's copy threads (src/hostcopy.hpp)."""
        s = self.spec
        plan.x.write(np.ascontiguousarray(X))
        if lens is not None:
            plan.lens.write(lens)
        if initial_h is not None:
            plan.h0.write(np.ascontiguousarray(initial_h))
        if initial_c is not None:
            plan.c0.write(np.ascontiguousarray(initial_c))
        plan.sequence.eval()
        if plan.timestamps:
            t = plan.sequence.timestamps()
            self.last_gpu_time_ms = (t[3] - t[0]) * 1e-6
            self.last_gpu_profile = {"projection_ms": (t[1] - t[0]) * 1e-6,
                                     "steps_ms": (t[2] - t[1]) * 1e-6,
                                     "outputs_ms": (t[3] - t[2]) * 1e-6}
        result = []
        for name in names:
            if name in plan.outputs:
                target = out.get(name) if out is not None else None
                if target is None:
                    target = np.empty(shapes[name], dtype=s.dtype)
                plan.outputs[name].read(target)
                result.append(target)
            else:
                result.append(None)
        return tuple(result)

    # ------------------------------------------------------------------ internals

    def _steps(self, seq, lens, max_length) -> int:
        s = self.spec
        if max_length is None:
            return seq
        steps = int(max_length)
        if steps != max_length or not 0 <= steps <= seq:
            raise ValueError(f"{s.op}: max_length must be an integer in [0, {seq}] (the sequence "
                             f"length), got {max_length!r}")
        longest = seq if lens is None else (int(lens.max()) if lens.size else 0)
        if steps < longest:
            what = "the sequence length (no sequence_lens)" if lens is None else \
                f"sequence_lens[{int(np.argmax(lens))}] = {longest}"
            raise ValueError(f"{s.op}: max_length = {steps} is shorter than {what}")
        return steps

    def _empty(self, shapes, names, wanted, initial_h, initial_c):
        """seq = 0 or batch = 0: nothing runs; final states are the initial states or zeros."""
        s = self.spec
        initial = {"Y_h": initial_h, "Y_c": initial_c}
        result = []
        for name in names:
            if name not in wanted:
                result.append(None)
            elif name == "Y" or initial.get(name) is None:
                result.append(np.zeros(shapes[name], dtype=s.dtype))
            else:
                result.append(np.array(initial[name], dtype=s.dtype, copy=True))
        return tuple(result)

    def _upload_batched_r(self) -> None:
        with self._batched_lock:
            if "RB" not in self._weights:
                assert self._host_r is not None   # dropped only once RB is uploaded
                rb = _plan.batched_r(self._host_r)
                self._weights.update(_plan.upload_weights(self._ctx, {"RB": rb}, self._limits()))
                self.weight_bytes += rb.nbytes
                self._host_r = None

    def _limits(self) -> Limits:
        """The device limits plans are checked against (``_limit`` and ``_MAX_GROUPS`` read now,
        so that tests may lower them)."""
        return Limits(self.spec.op, self.device.name, self._limit,
                      tuple(self.device.max_workgroup_count), _MAX_GROUPS)

    def _build(self, key: PlanKey, xw_region, state_region):
        """Record the plan of ``key`` (see ortops.plan)."""
        if variants.step_kernel(key.batch) == "step_batched":
            self._upload_batched_r()
        recorder = _plan.Recorder(self._ctx, self.spec, self._weights, self._dummy,
                                  self._limits(), _LARGE_PROJECTION, self.timestamps,
                                  self.device)
        return _plan.record(recorder, key, self.scratch_sizes(key.seq, key.batch),
                            xw_region, state_region)


def _into(result, names, out):
    """``result`` with each output named in ``out`` copied into ``out``'s array, returned in
    its place."""
    if out is None:
        return result
    placed = []
    for name, value in zip(names, result):
        if value is not None and out.get(name) is not None:
            out[name][...] = value
            value = out[name]
        placed.append(value)
    return tuple(placed)
