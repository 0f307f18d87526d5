"""RecurrentLayer: one ONNX RNN, GRU or LSTM layer on a Vulkan device, planned once per shape.

A layer uploads its weights once. For each input shape (and set of optional inputs and
requested outputs) it builds a plan: buffers, pipelines and one Kompute sequence recorded
with every pass and barrier of a run. A call then only writes the inputs into mapped
memory, submits that sequence once and copies the outputs out.

How a run is recorded (see glsl/ for each pass):
  1. input_projection: Xw = X . W^T for every step and direction (one batched Gemm);
  2. state_init: state slot 0 and the cell state from initial_h / initial_c or zeros;
  3. step, once per time step (twice for a GRU with linear_before_reset = 0), each followed
     by a compute-to-compute barrier, since step s + 1 reads the hidden state step s wrote;
  4. output_sequence (Y) and output_state (Y_h, Y_c), for the requested outputs only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ortops import validation
from ortops.cells import CELLS, NAMES
from ortops.device import context, require_ieee
from ortops.shaders import spirv
from ortops.specialization import bits as _bits
from ortops.specialization import pack

_GROUP = 64          # local size of the state and output passes
_MAX_GROUPS = 65535  # workgroups per dispatch dimension every Vulkan device accepts
_MAX_ROWS = 8        # R rows per step workgroup (x 32 lanes = 256 invocations at most)
_PLAN_CACHE = 8      # shapes whose plans a layer keeps (least recently used dropped)
_MAX_CONCURRENT = 8  # default bound on runs of one shape in flight at once (one plan each)
_LARGE_PROJECTION = 1 << 22   # outputs of the input projection from which the 128 x 128 tile is used


class UnsupportedLayerError(ValueError):
    """The layer is valid ONNX but does not fit this device (e.g. a storage binding limit)."""


def _words(nbytes: int) -> int:
    return (nbytes + 3) // 4


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _groups(n: int) -> int:
    """Workgroups of a grid-stride pass over n items (copy, state and output passes)."""
    return min(_ceil(n, _GROUP), _MAX_GROUPS)


@dataclass(frozen=True)
class ScratchSizes:
    """Bytes of the two scratch regions a run needs (seed 000's XwLength and StateLength).

    ``xw``: the input projection of every step and direction, float32
    [dirs, seq, batch, gates * hidden]. ``state``: every step's hidden state
    [seq + 1, dirs, batch, hidden], then the LSTM cell state [dirs, batch, hidden], or for a
    GRU with linear_before_reset = 0 its z and r * h (two more [dirs, batch, hidden] planes).
    """

    xw: int
    state: int


class _PlanPool:
    """The plans of one shape key: each serves one run at a time.

    Concurrency contract: a run owns its plan (inputs, scratch, outputs, readback, recorded
    sequence) from writing its inputs until it has read its outputs, so no buffer is reused
    by one run while another still owns it. A second concurrent run of the same shape gets a
    second plan, built on first need, up to ``limit``; beyond that it waits for a free one.
    Runs of different plans proceed in parallel: host copies and the wait release the GIL, and
    their sequences go to different device queues where the device has several.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.free: list = []
        self.count = 0      # plans built (or being built) for this key


@dataclass
class _Plan:
    sequence: object
    x: object
    lens: object
    h0: object
    c0: object
    outputs: dict     # name -> host-cached readback buffer
    keep: list        # buffers and programs the recorded sequence refers to
    timestamps: bool


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
    """

    def __init__(self, op, W, R, B=None, P=None, *, hidden_size=None, direction="forward",
                 layout=0, activations=None, activation_alpha=None, activation_beta=None,
                 clip=None, input_forget=0, linear_before_reset=0, device=None,
                 timestamps=False, max_concurrent=_MAX_CONCURRENT):
        op = str(op).upper()
        if op not in CELLS:
            raise ValueError(f"ortops: op must be one of {NAMES}, got {op!r}")
        self.spec = validation.check_layer(
            op, W, R, B, P, hidden_size=hidden_size, direction=direction, layout=layout,
            activations=activations, activation_alpha=activation_alpha,
            activation_beta=activation_beta, clip=clip, input_forget=input_forget,
            linear_before_reset=linear_before_reset,
            allowed_dtypes=(np.float32, np.float16))
        self.device, self._ctx = context(device)
        require_ieee(self.device)   # the kernels rely on NaN/Inf/-0 being preserved
        self.timestamps = bool(timestamps) and self.device.timestamps
        self.last_gpu_time_ms = None
        self.last_gpu_profile = None
        if int(max_concurrent) != max_concurrent or max_concurrent < 1:
            raise ValueError(f"{op}: max_concurrent must be a positive integer, got {max_concurrent!r}")
        self.max_concurrent = int(max_concurrent)
        self._lock = threading.Condition()
        self._scratch_lock = threading.Lock()
        self._plans: OrderedDict[tuple, _PlanPool] = OrderedDict()
        self._limit = self.device.max_storage_buffer_range
        tensors = {"W": W, "R": R}
        if B is not None:
            tensors["B"] = B
        if P is not None:
            tensors["P"] = P
        self._weights = self._upload({k: np.ascontiguousarray(v) for k, v in tensors.items()})
        self.weight_bytes = sum(np.asarray(v).nbytes for v in tensors.values())
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
        return ScratchSizes(
            xw=4 * s.num_directions * seq * batch * s.gates * s.hidden_size,
            state=4 * ((seq + 1) * plane + extra),
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

    def __call__(self, X, sequence_lens=None, initial_h=None, initial_c=None, *, outputs=None,
                 max_length=None, xw_scratch=None, state_scratch=None):
        """Run the layer; return (Y, Y_h) for GRU/RNN or (Y, Y_h, Y_c) for LSTM.

        Outputs are numpy arrays in the weights' dtype with ONNX's shapes for the layout. An
        output not named in ``outputs`` (a collection of "Y", "Y_h", "Y_c"; default all) is
        not computed and comes back as None; a single name may be given as a string. ``max_length`` is a host-side bound on the
        sequence lengths (seed 000's MaxLength): the loop runs that many steps; it must be at
        least every sequence length. ``xw_scratch`` and ``state_scratch`` are optional
        ``(buffer, byte_offset)`` regions (buffers from :meth:`allocate`; both may be the same
        arena) of at least :meth:`scratch_sizes` bytes; by default the plan owns its scratch.
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
        if seq == 0 or batch == 0:
            return self._empty(shapes, names, wanted, initial_h, initial_c)

        key = (seq, batch, steps, lens is not None, initial_h is not None,
               initial_c is not None, tuple(n for n in names if n in wanted),
               self._region_key(xw_scratch), self._region_key(state_scratch))
        caller_scratch = xw_scratch is not None or state_scratch is not None
        pool, plan = self._acquire(key, 1 if caller_scratch else self.max_concurrent)
        try:
            if plan is None:
                plan = self._build(seq, batch, steps, lens is not None, initial_h is not None,
                                   initial_c is not None, key[6], xw_scratch, state_scratch)
            if not caller_scratch:
                return self._run(plan, shapes, names, X, lens, initial_h, initial_c)
            # Caller regions may be one arena shared by this layer's shapes: one such run at a
            # time (sharing an arena between layers is the caller's to serialise).
            with self._scratch_lock:
                return self._run(plan, shapes, names, X, lens, initial_h, initial_c)
        finally:
            self._release(key, pool, plan)   # plan None: building it failed

    def _acquire(self, key, limit):
        """(pool, a free plan of ``key``), or (pool, None) when the caller is to build one.

        Waits while ``limit`` plans of the key are all in use.
        """
        with self._lock:
            while True:
                pool = self._plans.get(key)
                if pool is None:
                    pool = self._plans[key] = _PlanPool(limit)
                    self._evict(keep=key)
                self._plans.move_to_end(key)
                if pool.free:
                    return pool, pool.free.pop()
                if pool.count < pool.limit:
                    pool.count += 1
                    return pool, None
                self._lock.wait()

    def _release(self, key, pool, plan):
        """Give a plan back (or, when building it failed, its place in the pool)."""
        with self._lock:
            if plan is None:
                pool.count -= 1
            elif self._plans.get(key) is pool:
                pool.free.append(plan)
            # else: the key was evicted while this run held the plan; it is dropped here.
            self._evict(keep=key)   # shapes kept beyond the cache while they were busy
            self._lock.notify_all()

    def _evict(self, keep):
        """Keep plans for at most _PLAN_CACHE shapes: drop the least recently used idle ones
        (never ``keep``, the key being acquired; while runs hold plans of every other key the
        cache may hold more for a while)."""
        for old in list(self._plans):
            if len(self._plans) <= _PLAN_CACHE:
                break
            pool = self._plans[old]
            if old != keep and len(pool.free) == pool.count:   # no run holds one of its plans
                del self._plans[old]

    def _run(self, plan, shapes, names, X, lens, initial_h, initial_c):
        """The hot path: write the inputs, submit once, read the outputs (the plan is ours)."""
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
                out = np.empty(shapes[name], dtype=s.dtype)
                plan.outputs[name].read(out)
                result.append(out)
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

    @staticmethod
    def _region_key(region):
        if region is None:
            return None
        buf, offset = region
        return (id(buf), int(offset))

    def _check_binding(self, what: str, nbytes: int):
        if nbytes > self._limit:
            raise UnsupportedLayerError(
                f"{self.spec.op}: unsupported layer on {self.device.name}: {what} needs "
                f"{nbytes} bytes in one storage binding, above the device's "
                f"maxStorageBufferRange of {self._limit} bytes")

    def _check_groups(self, what: str, groups):
        limit = self.device.max_workgroup_count
        if any(g > m for g, m in zip(groups, limit)):
            raise UnsupportedLayerError(
                f"{self.spec.op}: unsupported layer on {self.device.name}: {what} needs "
                f"{' x '.join(map(str, groups))} workgroups, above the device's "
                f"maxComputeWorkGroupCount of {' x '.join(map(str, limit))}")

    def _region(self, what, region, nbytes):
        """(buffer, offset in floats) for a scratch region, owned or caller-supplied."""
        if region is None:
            self._check_binding(what, nbytes)
            return self._ctx.buffer(nbytes, "storage"), 0
        buf, offset = region
        offset = int(offset)
        if offset < 0 or offset % 4:
            raise ValueError(f"{self.spec.op}: {what} offset must be a non-negative multiple of "
                             f"4 bytes, got {offset}")
        if offset + nbytes > buf.nbytes:
            raise ValueError(f"{self.spec.op}: {what} needs {nbytes} bytes at offset {offset}, "
                             f"but its buffer holds {buf.nbytes}")
        self._check_binding(f"{what} (its whole buffer is bound)", buf.nbytes)
        return buf, offset // 4

    def _upload(self, arrays: dict) -> dict:
        """Weights go to device-only memory: staged, then copied by a compute pass (Kompute's
        device-only tensors are storage buffers, not transfer destinations)."""
        ctx = self._ctx
        seq = ctx.sequence()
        staging, stored, keep = [], {}, []
        for name, a in arrays.items():
            self._check_binding(name, a.nbytes)
            host = ctx.buffer(a.nbytes, "device")
            host.write(a)
            staging.append(host)
            stored[name] = ctx.buffer(a.nbytes, "storage")
        seq.upload(staging)
        seq.barrier("transfer", "compute")
        for host, dev in zip(staging, stored.values()):
            words = _words(dev.nbytes)
            copy = ctx.program(spirv("copy_words"), [host, dev], pack("copy_words"), 1)
            keep.append(copy)
            seq.dispatch(copy, _groups(words), 1, 1, [words])
        seq.barrier("compute", "compute")
        seq.eval()
        return stored

    def _activation_constants(self):
        """(GENERAL, the step shader's ACT/ALPHA/BETA constants by name): per direction the
        f, g, h slots (a cell with fewer slots repeats its last; one direction's list serves
        both)."""
        s = self.spec
        acts = list(s.activations)
        if len(acts) == 1:
            acts = acts * 2
        defaults = CELLS[s.op].default_activations
        general = any(tuple(a.name for a in d) != defaults for d in s.activations)
        values = {}
        for d in range(2):
            slots = list(acts[d]) + [acts[d][-1]] * (3 - len(acts[d]))
            for slot, a in zip("FGH", slots):
                values[f"ACT{d}_{slot}"] = a.code
                values[f"ALPHA{d}_{slot}"] = _bits(a.alpha)
                values[f"BETA{d}_{slot}"] = _bits(a.beta)
        return general, values

    def _build(self, seq, batch, steps, has_lens, has_h0, has_c0, wanted, xw_region, state_region):
        s = self.spec
        ctx, dtype = self._ctx, s.dtype
        D, H, G = s.num_directions, s.hidden_size, s.gates
        item = dtype.itemsize
        sizes = self.scratch_sizes(seq, batch)
        xw_buf, xw_off = self._region("the input projection scratch", xw_region, sizes.xw)
        st_buf, st_off = self._region("the state scratch", state_region, sizes.state)
        shapes = validation.output_shapes(s, seq, batch)

        def io(name, n_elems):
            nbytes = n_elems * item
            self._check_binding(name, nbytes)
            return ctx.buffer(nbytes, "device")

        x = io("X", seq * batch * s.input_size)
        lens = ctx.buffer(4 * batch, "device") if has_lens else None
        h0 = io("initial_h", D * batch * H) if has_h0 else None
        c0 = io("initial_c", D * batch * H) if has_c0 else None
        outs = {name: io(name, int(np.prod(shapes[name]))) for name in wanted}
        readback = {name: ctx.host_buffer(buf.nbytes) for name, buf in outs.items()}
        dummy = self._dummy
        lens_b = lens if lens is not None else dummy
        reverse0 = 1 if s.direction == "reverse" else 0
        keep = [xw_buf, st_buf]

        def program(name, buffers, push_words=0, **constants):
            p = ctx.program(spirv(name, dtype), buffers, pack(name, **constants), push_words)
            keep.append(p)
            return p

        shape = dict(DIRS=D, BATCH=batch, HIDDEN=H, SEQ=seq, LAYOUT=s.layout)

        # Large products take the 128 x 128 tile; small ones the 64 x 64 tile, which gives
        # four times as many workgroups to spread over the device.
        tpt = 8 if steps * batch * G * H * D >= _LARGE_PROJECTION else 4
        tile = 16 * tpt
        gemm = program("input_projection", [x, self._weights["W"], xw_buf], 2,
                       N=G * H, K=s.input_size, SEQ=seq, BATCH=batch, LAYOUT=s.layout,
                       XW_OFFSET=xw_off, TPT=tpt)
        init = program("state_init", [h0 or dummy, c0 or dummy, st_buf], **shape,
                       HAS_H0=int(has_h0), HAS_C0=int(has_c0),
                       HAS_CELL=int("initial_c" in CELLS[s.op].inputs), STATE_OFFSET=st_off)

        general, act_consts = self._activation_constants()
        # Batch rows per workgroup: a one-row kernel for a batch of one (carrying eight rows
        # through the product when one is used costs registers and occupancy), else up to 8.
        nb = min(batch, 8)
        clip = s.clip
        common = dict(CELL=CELLS[s.op].code, NB=nb, GENERAL=int(general), HAS_BIAS=int(s.has_bias),
                      HAS_PEEP=int(s.has_peepholes), HAS_CLIP=int(clip is not None),
                      CLIP_BITS=_bits(clip) if clip is not None else 0,
                      INPUT_FORGET=int(s.input_forget), LBR=int(s.linear_before_reset),
                      HAS_LENS=int(has_lens), HIDDEN=H, BATCH=batch, SEQ=seq, DIRS=D,
                      REVERSE0=reverse0, XW_OFFSET=xw_off, STATE_OFFSET=st_off, **act_consts)

        def step_program(pass_, gates_in_pass):
            if batch <= 8:
                # Latency-bound: one R row per thread, the most threads and the shortest
                # chain per step (on the H200, 48x8x192->96 took 0.26 ms this way against
                # 0.35 ms with a unit's gates per thread).
                units = max(1, _MAX_ROWS // gates_in_pass)
                rpt = 1
            else:
                # Throughput-bound: all gates of a unit per thread, so each load feeds
                # NB x gates multiply-adds. 128 threads a workgroup.
                rpt = gates_in_pass
                units = 4
            rows = gates_in_pass * units
            buffers = [xw_buf, self._weights["R"], self._weights.get("B", dummy),
                       self._weights.get("P", dummy), lens_b, st_buf]
            groups = (_ceil(H, units), D, _ceil(batch, nb))
            self._check_groups("the step pass", groups)
            return program("step", buffers, 1, **common, PASS=pass_, UNITS=units, ROWS=rows,
                           TY=rows // rpt, RPT=rpt), groups

        if s.op == "GRU" and not s.linear_before_reset:
            passes = [step_program(1, 2), step_program(2, 1)]
        else:
            passes = [step_program(0, G)]

        sequence = ctx.sequence(4 if self.timestamps else 0)
        # Write-after-read against the previous run's last reads of the input buffers.
        sequence.barrier("compute", "transfer")
        sequence.upload([b for b in (x, lens, h0, c0) if b is not None])
        sequence.barrier("transfer", "compute")
        if self.timestamps:
            sequence.timestamp(0)
        # Row tiles in dispatches of at most _MAX_GROUPS (the shader offsets by tile0).
        row_tiles = _ceil(steps * batch, tile)
        for tile0 in range(0, row_tiles, _MAX_GROUPS):
            sequence.dispatch(gemm, _ceil(G * H, tile), min(_MAX_GROUPS, row_tiles - tile0), D,
                              [steps * batch, tile0])
        sequence.dispatch(init, _groups(D * batch * H), 1, 1, [])
        sequence.barrier("compute", "compute")
        if self.timestamps:
            sequence.timestamp(1)
        for step in range(steps):
            for prog, groups in passes:
                sequence.dispatch(prog, *groups, [step])
                sequence.barrier("compute", "compute")
        if self.timestamps:
            sequence.timestamp(2)
        for name, buf in outs.items():
            if name == "Y":
                words = _ceil(seq * D * batch * H * item, 4)
                prog = program("output_sequence", [st_buf, lens_b, buf], **shape,
                               HAS_LENS=int(has_lens), REVERSE0=reverse0, STATE_OFFSET=st_off)
                sequence.dispatch(prog, _groups(words), 1, 1, [])
            else:
                words = _ceil(D * batch * H * item, 4)
                prog = program("output_state", [st_buf, lens_b, buf], 1, **shape,
                               HAS_LENS=int(has_lens), CELL_STATE=int(name == "Y_c"),
                               STATE_OFFSET=st_off, ZERO_EMPTY=1)
                sequence.dispatch(prog, _groups(words), 1, 1, [steps])
        if self.timestamps:
            sequence.timestamp(3)
        # Results go to host-cached memory (fast to read), then the end-of-run marker that
        # eval() polls; its barriers make the copies visible to the host.
        sequence.barrier("compute", "transfer")
        for name, buf in outs.items():
            sequence.copy(buf, readback[name], size=buf.nbytes)
        sequence.finish()
        keep += list(outs.values())
        return _Plan(sequence, x, lens, h0, c0, readback, keep, self.timestamps)
