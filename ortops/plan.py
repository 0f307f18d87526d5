"""Plans: the buffers, programs and one recorded Kompute sequence of a run of one shape,
and the per-layer pool they are kept in.

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
from typing import Optional, Tuple

import numpy as np

from ortops import validation, variants
from ortops import fast, modes
from ortops.cells import CELLS
from ortops.limits import Limits
from ortops.shaders import spirv
from ortops.specialization import bits, pack
from ortops.variants import ceil_div

PLAN_CACHE = 8      # shapes whose plans a layer keeps (least recently used dropped)


# ---------------------------------------------------------------------------- keys and pool

@dataclass(frozen=True)
class PlanKey:
    """What a plan is recorded for: a run of another key needs another plan.

    ``outputs``: the requested outputs, in the op's order. ``xw_region`` and
    ``state_region``: a caller scratch region as (id of its buffer, byte offset), or None
    when the plan owns its scratch (see :func:`region_key`).
    """

    seq: int
    batch: int
    steps: int
    has_lens: bool
    has_h0: bool
    has_c0: bool
    outputs: Tuple[str, ...]
    xw_region: Optional[Tuple[int, int]]
    state_region: Optional[Tuple[int, int]]
    mode: str = modes.DEFAULT       # ortops.modes: which compiled variant of each pass


def region_key(region):
    """A caller scratch region ``(buffer, byte_offset)`` as it enters a :class:`PlanKey`."""
    if region is None:
        return None
    buf, offset = region
    return (id(buf), int(offset))


@dataclass
class Plan:
    sequence: object
    x: object
    lens: object
    h0: object
    c0: object
    outputs: dict     # name -> host-cached readback buffer
    keep: list        # buffers and programs the recorded sequence refers to
    timestamps: bool
    projection: str = fast.PORTABLE   # the input projection shader recorded (ortops.fast)


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


class PlanCache:
    """A layer's plans: a :class:`_PlanPool` per :class:`PlanKey`, for at most ``capacity``
    keys (least recently used idle ones dropped). ``pools`` is the ordered key -> pool map."""

    def __init__(self, capacity: int = PLAN_CACHE):
        self.capacity = capacity
        self.pools: OrderedDict[PlanKey, _PlanPool] = OrderedDict()
        self._lock = threading.Condition()

    def acquire(self, key, limit):
        """(pool, a free plan of ``key``), or (pool, None) when the caller is to build one.

        Waits while ``limit`` plans of the key are all in use.
        """
        with self._lock:
            while True:
                pool = self.pools.get(key)
                if pool is None:
                    pool = self.pools[key] = _PlanPool(limit)
                    self.evict(keep=key)
                self.pools.move_to_end(key)
                if pool.free:
                    return pool, pool.free.pop()
                if pool.count < pool.limit:
                    pool.count += 1
                    return pool, None
                self._lock.wait()

    def release(self, key, pool, plan):
        """Give a plan back (or, when building it failed, its place in the pool)."""
        with self._lock:
            if plan is None:
                pool.count -= 1
            elif self.pools.get(key) is pool:
                pool.free.append(plan)
            # else: the key was evicted while this run held the plan; it is dropped here.
            self.evict(keep=key)   # shapes kept beyond the cache while they were busy
            self._lock.notify_all()

    def evict(self, keep):
        """Keep plans for at most ``capacity`` shapes: drop the least recently used idle ones
        (never ``keep``, the key being acquired; while runs hold plans of every other key the
        cache may hold more for a while). Called with the lock held."""
        for old in list(self.pools):
            if len(self.pools) <= self.capacity:
                break
            pool = self.pools[old]
            if old != keep and len(pool.free) == pool.count:   # no run holds one of its plans
                del self.pools[old]


# ---------------------------------------------------------------------------- recording

@dataclass(frozen=True)
class Recorder:
    """What a layer lends the recording of its plans: its context, spec, device-resident
    weights (``dummy`` binds in place of an absent optional input), the limits to check and
    the threshold of the large projection tile (see ortops.variants)."""

    ctx: object
    spec: object
    weights: dict
    dummy: object
    limits: Limits
    large_projection: int = variants.LARGE_PROJECTION
    timestamps: bool = False
    device: object = None     # ortops.device.Device: mode "fast" asks it for matrix hardware


def upload_weights(ctx, arrays: dict, limits: Limits) -> dict:
    """Weights go to device-only memory: staged, then copied by a compute pass (Kompute's
    device-only tensors are storage buffers, not transfer destinations)."""
    seq = ctx.sequence()
    staging, stored, keep = [], {}, []
    for name, a in arrays.items():
        limits.check_binding(name, a.nbytes)
        host = ctx.buffer(a.nbytes, "device")
        host.write(a)
        staging.append(host)
        stored[name] = ctx.buffer(a.nbytes, "storage")
    seq.upload(staging)
    seq.barrier("transfer", "compute")
    for host, dev in zip(staging, stored.values()):
        words = ceil_div(dev.nbytes, 4)
        copy = ctx.program(spirv("copy_words"), [host, dev], pack("copy_words"), 1)
        keep.append(copy)
        seq.dispatch(copy, variants.grid_groups(words, limits.max_groups), 1, 1, [words])
    seq.barrier("compute", "compute")
    seq.eval()
    return stored


def batched_r(R: np.ndarray) -> np.ndarray:
    """R [dirs, gates * hidden, hidden] in the batched step kernel's layout
    RB[dir][position][unit][gate] (glsl/step_batched.comp): position p = t * NI + i holds
    k = l + 32 i of the class l at tree position t (l = t with its five bits reversed), so a
    thread reads its sums' terms in order; positions past the hidden size hold 0 (never read)."""
    dirs, rows, hidden = R.shape
    gates, ni = rows // hidden, variants.classes_length(hidden)
    t = np.arange(32)
    classes = np.array([int(f"{v:05b}"[::-1], 2) for v in t])
    k = (classes[:, None] + 32 * np.arange(ni)[None, :]).reshape(-1)
    valid = k < hidden
    taken = R.reshape(dirs, gates, hidden, hidden)[..., np.where(valid, k, 0)]
    taken[..., ~valid] = 0
    return np.ascontiguousarray(taken.transpose(0, 3, 2, 1))


def scratch_region(r: Recorder, what, region, nbytes):
    """(buffer, offset in floats) for a scratch region, owned or caller-supplied."""
    if region is None:
        r.limits.check_binding(what, nbytes)
        return r.ctx.buffer(nbytes, "storage"), 0
    buf, offset = region
    offset = int(offset)
    if offset < 0 or offset % 4:
        raise ValueError(f"{r.spec.op}: {what} offset must be a non-negative multiple of "
                         f"4 bytes, got {offset}")
    if offset + nbytes > buf.nbytes:
        raise ValueError(f"{r.spec.op}: {what} needs {nbytes} bytes at offset {offset}, "
                         f"but its buffer holds {buf.nbytes}")
    r.limits.check_binding(f"{what} (its whole buffer is bound)", buf.nbytes)
    return buf, offset // 4


def activation_constants(spec):
    """(GENERAL, the step shader's ACT/ALPHA/BETA constants by name) for a layer: per
    direction the f, g, h slots (a cell with fewer slots repeats its last; one direction's
    list serves both)."""
    acts = list(spec.activations)
    if len(acts) == 1:
        acts = acts * 2
    defaults = CELLS[spec.op].default_activations
    general = any(tuple(a.name for a in d) != defaults for d in spec.activations)
    values = {}
    for d in range(2):
        slots = list(acts[d]) + [acts[d][-1]] * (3 - len(acts[d]))
        for slot, a in zip("FGH", slots):
            values[f"ACT{d}_{slot}"] = a.code
            values[f"ALPHA{d}_{slot}"] = bits(a.alpha)
            values[f"BETA{d}_{slot}"] = bits(a.beta)
    return general, values


class _Recording:
    """One plan being built: its buffers, its programs (kept alive in ``keep``) and then
    its sequence."""

    def __init__(self, r: Recorder, key: PlanKey, sizes, xw_region, state_region):
        s = self.spec = r.spec
        self.r, self.key, self.ctx = r, key, r.ctx
        self.item = s.dtype.itemsize
        self.xw, self.xw_off = scratch_region(r, "the input projection scratch", xw_region, sizes.xw)
        self.st, self.st_off = scratch_region(r, "the state scratch", state_region, sizes.state)
        self.keep = [self.xw, self.st]
        D, H, batch = s.num_directions, s.hidden_size, key.batch
        shapes = validation.output_shapes(s, key.seq, batch)
        self.x = self._io("X", key.seq * batch * s.input_size)
        self.lens = r.ctx.buffer(4 * batch, "device") if key.has_lens else None
        self.h0 = self._io("initial_h", D * batch * H) if key.has_h0 else None
        self.c0 = self._io("initial_c", D * batch * H) if key.has_c0 else None
        self.outs = {name: self._io(name, int(np.prod(shapes[name]))) for name in key.outputs}
        self.readback = {name: r.ctx.host_buffer(buf.nbytes) for name, buf in self.outs.items()}
        self.lens_b = self.lens if self.lens is not None else r.dummy
        self.reverse0 = 1 if s.direction == "reverse" else 0
        self.projection_shader = fast.projection_kernel(key.mode, s.dtype, r.device, r.ctx)
        # Which step kernel, decided once for the whole recording (state_init and the step
        # passes must agree on the transposed planes).
        self.batched = variants.step_kernel(key.batch) == "step_batched"

    def _io(self, name, n_elems):
        nbytes = n_elems * self.item
        self.r.limits.check_binding(name, nbytes)
        return self.ctx.buffer(nbytes, "device")

    def program(self, shader, buffers, push_words=0, **constants):
        p = self.ctx.program(spirv(shader, self.spec.dtype, self.key.mode), buffers,
                             pack(shader, **constants),
                             push_words)
        self.keep.append(p)
        return p

    def _shape(self):
        """The constants every state and output pass shares."""
        s, key = self.spec, self.key
        return dict(DIRS=s.num_directions, BATCH=key.batch, HIDDEN=s.hidden_size, SEQ=key.seq,
                    LAYOUT=s.layout)

    # -- programs

    def projection(self):
        """(program, tile): the input projection Gemm and its tile edge."""
        s, key = self.spec, self.key
        G, H, D = s.gates, s.hidden_size, s.num_directions
        if self.projection_shader == fast.KERNEL:
            prog = self.program(fast.KERNEL, [self.x, self.r.weights["W"], self.xw], 2,
                                N=G * H, K=s.input_size, SEQ=key.seq, BATCH=key.batch,
                                LAYOUT=s.layout, XW_OFFSET=self.xw_off)
            return prog, fast.TILE
        tpt = variants.projection_tpt(key.steps * key.batch * G * H * D, self.r.large_projection)
        prog = self.program("input_projection", [self.x, self.r.weights["W"], self.xw], 2,
                            N=G * H, K=s.input_size, SEQ=key.seq, BATCH=key.batch,
                            LAYOUT=s.layout, XW_OFFSET=self.xw_off, TPT=tpt)
        return prog, variants.projection_tile(tpt)

    def _transposed(self):
        """The batched step kernel's transposed state planes, as the shaders' constants:
        they follow the state slots and the cell's extra planes in the state scratch."""
        s, key = self.spec, self.key
        plane = s.num_directions * key.batch * s.hidden_size
        extra = CELLS[s.op].extra_state_planes(s.linear_before_reset)
        return dict(NI=variants.classes_length(s.hidden_size),
                    B32=variants.padded_batch(key.batch),
                    HT_OFFSET=self.st_off + (key.seq + 1 + extra) * plane)

    def state_init(self):
        key = self.key
        transposed = dict(TRANSPOSED=1, **self._transposed()) if self.batched else {}
        return self.program("state_init", [self.h0 or self.r.dummy, self.c0 or self.r.dummy, self.st],
                            **self._shape(), HAS_H0=int(key.has_h0), HAS_C0=int(key.has_c0),
                            HAS_CELL=int("initial_c" in CELLS[self.spec.op].inputs),
                            STATE_OFFSET=self.st_off, **transposed)

    def step_passes(self):
        """[(program, workgroups)] of the step passes of one time step."""
        s = self.spec
        general, acts = activation_constants(s)
        clip = s.clip
        common = dict(
            CELL=CELLS[s.op].code, GENERAL=int(general), HAS_BIAS=int(s.has_bias),
            HAS_PEEP=int(s.has_peepholes), HAS_CLIP=int(clip is not None),
            CLIP_BITS=bits(clip) if clip is not None else 0, INPUT_FORGET=int(s.input_forget),
            LBR=int(s.linear_before_reset), HAS_LENS=int(self.key.has_lens),
            HIDDEN=s.hidden_size, BATCH=self.key.batch, SEQ=self.key.seq, DIRS=s.num_directions,
            REVERSE0=self.reverse0, XW_OFFSET=self.xw_off, STATE_OFFSET=self.st_off, **acts)
        return [self._step(pass_, gates, common)
                for pass_, gates in variants.step_passes(s.op, s.gates, s.linear_before_reset)]

    def _step(self, pass_, gates_in_pass, common):
        s, w, batch = self.spec, self.r.weights, self.key.batch
        if self.batched:
            return self._step_batched(pass_, common)
        v = variants.step_variant(batch, gates_in_pass)
        buffers = [self.xw, w["R"], w.get("B", self.r.dummy), w.get("P", self.r.dummy),
                   self.lens_b, self.st]
        groups = (ceil_div(s.hidden_size, v.units), s.num_directions, ceil_div(batch, v.nb))
        self.r.limits.check_groups("the step pass", groups)
        prog = self.program("step", buffers, 1, **common, PASS=pass_, NB=v.nb, UNITS=v.units,
                            ROWS=v.rows, TY=v.ty, RPT=v.rpt)
        return prog, groups

    def _step_batched(self, pass_, common):
        s, w, batch = self.spec, self.r.weights, self.key.batch
        v = variants.batched_variant(s.hidden_size, s.dtype.name)
        buffers = [self.xw, w["RB"], w.get("B", self.r.dummy), w.get("P", self.r.dummy),
                   self.lens_b, self.st]
        groups = (ceil_div(s.hidden_size, v.units), s.num_directions, ceil_div(batch, 32))
        self.r.limits.check_groups("the step pass", groups)
        prog = self.program("step_batched", buffers, 1, **common, PASS=pass_, UPT=v.upt, BY=v.by,
                            PREFETCH=v.prefetch, KSPLIT=v.ksplit, **self._transposed())
        return prog, groups

    # -- the sequence

    def record(self) -> Plan:
        gemm, tile = self.projection()
        init = self.state_init()
        passes = self.step_passes()
        r, key = self.r, self.key
        sequence = self.ctx.sequence(4 if r.timestamps else 0)
        # Write-after-read against the previous run's last reads of the input buffers.
        sequence.barrier("compute", "transfer")
        sequence.upload([b for b in (self.x, self.lens, self.h0, self.c0) if b is not None])
        sequence.barrier("transfer", "compute")
        if r.timestamps:
            sequence.timestamp(0)
        self._record_projection(sequence, gemm, tile, init)
        if r.timestamps:
            sequence.timestamp(1)
        for step in range(key.steps):
            for prog, groups in passes:
                sequence.dispatch(prog, *groups, [step])
                sequence.barrier("compute", "compute")
        if r.timestamps:
            sequence.timestamp(2)
        self._record_outputs(sequence)
        if r.timestamps:
            sequence.timestamp(3)
        # Results go to host-cached memory (fast to read), then the end-of-run marker that
        # eval() polls; its barriers make the copies visible to the host.
        sequence.barrier("compute", "transfer")
        for name, buf in self.outs.items():
            sequence.copy(buf, self.readback[name], size=buf.nbytes)
        sequence.finish()
        self.keep += list(self.outs.values())
        return Plan(sequence, self.x, self.lens, self.h0, self.c0, self.readback, self.keep,
                    r.timestamps, self.projection_shader)

    def _record_projection(self, sequence, gemm, tile, init):
        s, key, max_groups = self.spec, self.key, self.r.limits.max_groups
        G, H, D = s.gates, s.hidden_size, s.num_directions
        # Row tiles in dispatches of at most max_groups (the shader offsets by tile0).
        row_tiles = ceil_div(key.steps * key.batch, tile)
        for tile0 in range(0, row_tiles, max_groups):
            sequence.dispatch(gemm, ceil_div(G * H, tile), min(max_groups, row_tiles - tile0), D,
                              [key.steps * key.batch, tile0])
        sequence.dispatch(init, variants.grid_groups(D * key.batch * H, max_groups), 1, 1, [])
        sequence.barrier("compute", "compute")

    def _record_outputs(self, sequence):
        s, key, max_groups = self.spec, self.key, self.r.limits.max_groups
        D, H, batch = s.num_directions, s.hidden_size, key.batch
        for name, buf in self.outs.items():
            if name == "Y":
                words = ceil_div(key.seq * D * batch * H * self.item, 4)
                prog = self.program("output_sequence", [self.st, self.lens_b, buf], **self._shape(),
                                    HAS_LENS=int(key.has_lens), REVERSE0=self.reverse0,
                                    STATE_OFFSET=self.st_off)
                sequence.dispatch(prog, variants.grid_groups(words, max_groups), 1, 1, [])
            else:
                words = ceil_div(D * batch * H * self.item, 4)
                prog = self.program("output_state", [self.st, self.lens_b, buf], 1, **self._shape(),
                                    HAS_LENS=int(key.has_lens), CELL_STATE=int(name == "Y_c"),
                                    STATE_OFFSET=self.st_off, ZERO_EMPTY=1)
                sequence.dispatch(prog, variants.grid_groups(words, max_groups), 1, 1, [key.steps])


def record(r: Recorder, key: PlanKey, sizes, xw_region=None, state_region=None) -> Plan:
    """Build the plan of ``key``: its buffers (scratch from the regions given, else owned;
    ``sizes`` from the layer's scratch_sizes), programs and recorded sequence."""
    return _Recording(r, key, sizes, xw_region, state_region).record()
