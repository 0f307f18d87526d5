"""RecurrentLayer: one ONNX RNN, GRU or LSTM layer on a Vulkan device, planned once per shape.

The Python door to the native core's layer (``src/core/rnn/layer.hpp``, the same code the
custom-op library runs): the arguments are checked by the core (ortops.validation: the
config the custom-op library's nodes carry, read by the same decoder, and the layer's spec),
then the native layer uploads the weights once, records a plan per input shape (and set of
optional inputs, requested outputs, steps and scratch regions) — buffers, pipelines and one
sequence with every pass and barrier of a run — and each call only writes the inputs, submits
that sequence once and copies the outputs out, with the GIL released.

The tunables the native plans read (``ortops.variants``' batched-kernel settings, the
projection tile threshold, the dispatch cap, the plan cache, the storage-binding limit) are
taken from this module and ``ortops.variants`` at each call, so that tests and benchmarks may
change them, and sent as the native ``LayerSettings`` (its fields by name, bound once in
``src/python/bind_settings.cpp``) when they change.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Collection, Mapping

import numpy as np

from ortops import fast, validation, variants
from ortops._typing import Array, ArrayIn, DeviceSpec, Floats, Names
from ortops.cells import CELLS, NAMES
from ortops.device import _native, context, require_mode
from ortops.modes import check_mode
from ortops.limits import UnsupportedLayerError

__all__ = ["RecurrentLayer", "ScratchSizes", "UnsupportedLayerError"]

# Tunables read each time a layer is made or a plan built, so tests may lower them here.
_MAX_GROUPS = variants.MAX_GROUPS              # cap on every dispatch dimension
_LARGE_PROJECTION = variants.LARGE_PROJECTION  # projection outputs from which the 128 x 128 tile is used
_PLAN_CACHE = 8      # shapes whose plans a layer keeps (least recently used dropped)
_MAX_CONCURRENT = 8  # default bound on runs of one shape in flight at once (one plan each)


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

    A layer may be called from many threads at once, and results equal serial results bit for
    bit. Runs that arrive while one of the layer is in flight wait and go as one batched run
    of at most ``coalesce_rows`` batch rows (default: the environment's ORTOPS_COALESCE_ROWS,
    else 32; 1 switches it off): each gets its own rows, the same bits as alone, at several
    times the throughput where runs are bound by the GPU's latency (docs/onnxruntime.md,
    "Threads"). Runs that are not coalesced (larger batches, caller scratch regions,
    timestamps) each use a plan of their own (at most ``max_concurrent`` per shape, default 8;
    further runs wait). Runs given caller scratch regions are serialised, since they may share
    one arena.

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
                 mode: str | None = None, coalesce_rows: int | None = None) -> None:
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
        self.last_gpu_time_ms: float | None = None
        self.last_gpu_profile: dict[str, float] | None = None
        if int(max_concurrent) != max_concurrent or max_concurrent < 1:
            raise ValueError(f"{op}: max_concurrent must be a positive integer, got {max_concurrent!r}")
        self.max_concurrent = int(max_concurrent)
        if coalesce_rows is not None and (int(coalesce_rows) != coalesce_rows or coalesce_rows < 1):
            raise ValueError(f"{op}: coalesce_rows must be a positive integer, got {coalesce_rows!r}")
        self._limit = self.device.max_storage_buffer_range
        tensors = {"W": W, "R": R}
        if B is not None:
            tensors["B"] = B
        if P is not None:
            tensors["P"] = P
        arrays = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
        self.weight_bytes = sum(a.nbytes for a in arrays.values())
        self._sent = self._tunables()
        first = self._settings(_native().LayerSettings())
        if coalesce_rows is not None:
            first.coalesce_rows = int(coalesce_rows)
        config = validation.layer_config(self.spec, mode=self.mode, device=self.device.uuid or None)
        try:
            self._native = _native().Layer(config, arrays["W"], arrays["R"], arrays.get("B"), arrays.get("P"),
                                           first)
        except _native().UnsupportedLayerError as e:
            raise UnsupportedLayerError(str(e)) from None

    # ------------------------------------------------------------------ public helpers

    @property
    def op(self) -> str:
        return self.spec.op

    def scratch_sizes(self, seq: int, batch: int) -> ScratchSizes:
        """The two scratch regions a run of this shape needs, in bytes (the native core's
        sizes, under the tunables in force now)."""
        self._sync_settings()
        return ScratchSizes(*self._native.scratch_sizes(int(seq), int(batch)))

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
        skips the page faults of a fresh array on every run (docs/perf.md, "Kernel choices").
        """
        s = self.spec
        names = validation.OUTPUTS[s.op]
        if outputs is None:
            wanted = names
        else:
            try:
                wanted = (outputs,) if isinstance(outputs, str) else tuple(outputs)
            except TypeError:
                raise ValueError(f"{s.op}: outputs must be a name or a collection of names of "
                                 f"{', '.join(names)}, got {outputs!r}") from None
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

        xw_region = self._region("the input projection scratch", xw_scratch)
        state_region = self._region("the state scratch", state_scratch)
        self._sync_settings()
        native = _native()
        try:
            result = self._native(
                np.ascontiguousarray(X), lens,
                None if initial_h is None else np.ascontiguousarray(initial_h),
                None if initial_c is None else np.ascontiguousarray(initial_c),
                steps=steps, outputs=[n in wanted for n in names], xw_scratch=xw_region,
                state_scratch=state_region,
                out=None if out is None else [out.get(n) for n in names])
        except native.UnsupportedLayerError as e:
            raise UnsupportedLayerError(str(e)) from None
        if self.timestamps:
            p = self._native.last_profile
            if p is not None:
                self.last_gpu_time_ms = p["total_ms"]
                self.last_gpu_profile = {k: p[k] for k in ("projection_ms", "steps_ms", "outputs_ms")}
        return tuple(result[:len(names)])

    @property
    def _plans(self):
        """The plans held per shape (least recently used first), as the native core reports
        them: key -> an object with ``count`` (plans built) and ``free`` (idle plans, each
        with the ``projection`` shader and the ``steps`` kernel it recorded)."""
        pools = OrderedDict()
        for p in self._native.plan_pools():
            key = (p["seq"], p["batch"], p["steps"], p["has_lens"], p["has_h0"], p["has_c0"], p["outputs"])
            pools[key] = SimpleNamespace(count=p["count"],
                                         free=[SimpleNamespace(projection=f, steps=k)
                                               for f, k in zip(p["free"], p["free_steps"])])
        return pools

    @property
    def _weights(self) -> frozenset:
        """The names of the weights on the device (W, R, B, P; RB once the batched step
        kernel's layout of R is uploaded)."""
        return frozenset(self._native.weight_names())

    # ------------------------------------------------------------------ internals

    def _steps(self, seq, lens, max_length) -> int:
        s = self.spec
        if max_length is None:
            return seq
        integral = isinstance(max_length, (int, np.integer)) and not isinstance(max_length, bool) or (
            isinstance(max_length, (float, np.floating)) and float(max_length).is_integer())
        steps = int(max_length) if integral else -1   # inf, NaN, strings: refused below
        if not integral or steps != max_length or not 0 <= steps <= seq:
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

    def _tunables(self) -> tuple:
        """The tunables in force now (module values, read at each call so that tests may set
        them; compared with the last sent, so the native settings are built only on a change)."""
        return (variants.tunables(), _LARGE_PROJECTION, _MAX_GROUPS, _PLAN_CACHE, self._limit,
                self.max_concurrent, self.timestamps, fast.ENABLED)

    def _settings(self, base):
        """``base`` (a native LayerSettings, whose other fields are kept) with the tunables in
        force."""
        base.variants = variants.settings()
        base.variants.large_projection = _LARGE_PROJECTION
        base.variants.max_groups = _MAX_GROUPS
        base.plan_cache = _PLAN_CACHE
        base.storage_range = self._limit
        base.max_concurrent = self.max_concurrent
        base.timestamps = self.timestamps
        base.coopmat = fast.ENABLED
        base.workgroup_count = tuple(self.device.max_workgroup_count)
        return base

    def _sync_settings(self) -> None:
        now = self._tunables()
        if now != self._sent:
            self._native.settings = self._settings(self._native.settings)
            self._sent = now

    def _region(self, what: str, region):
        """A caller scratch region ``(buffer, byte_offset)`` as the native core takes it (its
        offset checked here: a negative one cannot cross into native code)."""
        if region is None:
            return None
        buf, offset = region
        if isinstance(offset, bool) or int(offset) != offset or int(offset) < 0 or int(offset) % 4:
            raise ValueError(f"{self.spec.op}: {what} offset must be a non-negative multiple of "
                             f"4 bytes, got {offset}")
        return (buf, int(offset))


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
