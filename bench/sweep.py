"""The sweep: where ortops wins and where cuDNN does, over batch and hidden size.

Bidirectional LSTM, input = hidden, a fixed sequence length, float32 and float16; at each
point, for every numerical mode ortops has (ortops.modes.MODES, read at run time) its GPU time
(Vulkan timestamps), the layer call (numpy in, numpy out) and, where the model is small enough
to be cheap to convert (``session_max_hidden``), a one-node model through
``ortops.InferenceSession``; and cuDNN (torch) in each precision mode of the dtype
(cudnn.py: strict f32 and TF32 for float32, f16 for float16), GPU and end to end.

Runs per figure are adaptive (``runs`` runs, or fewer, at least 3, once ``point_s`` seconds
have passed): the grid's largest point (256 x 1024, 100 steps) runs for about 0.1 s on the H200
and its session for about 0.3 s, so a fixed 20 runs of everything would not fit one device call.
:func:`estimate_s` predicts the time from the H200's measured rates (docs/perf.md) before
anything runs.

``python bench/perf.py --sweep`` writes sweep.json (:func:`check_report` is its schema), sweep.md, the
table between the sweep markers of perf.md and sweep.png.
"""

from __future__ import annotations

import datetime
import gc
import logging
import os
import platform
import re
import statistics
import sys
import time
from dataclasses import asdict, astuple, dataclass, field
from typing import Dict, Optional, Sequence

import numpy as np

from ortops import modes, vocabulary
from ortops.timing import samples, wall_ms
from ortops.tools import measure

import cudnn  # bench/ on sys.path: the script importing this module put it there
from report import pyplot

log = logging.getLogger("ortops.bench")

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
HIDDENS = (128, 256, 512, 1024)
SEQ = 100
#: --small: what lavapipe runs in seconds.
SMALL_BATCHES, SMALL_HIDDENS, SMALL_SEQ = (1, 2), (16,), 8
CELL, DIRECTION = "LSTM", "bidirectional"
SCHEMA = 1
BEGIN, END = "<!-- sweep:begin -->", "<!-- sweep:end -->"


@dataclass
class Config:
    batches: Sequence[int] = BATCHES
    hiddens: Sequence[int] = HIDDENS
    seq: int = SEQ
    dtypes: Sequence[str] = vocabulary.DTYPES
    runs: int = 20                 # at most this many runs per figure ...
    point_s: float = 0.2           # ... or fewer (at least 3) once this many seconds have passed
    session_max_hidden: int = 512  # the session only up to this hidden size (conversion cost)
    errors: bool = False           # scaled errors too (float64 references on the CPU: slow)
    cudnn: bool = True
    device: Optional[str] = None
    warm_s: float = 3.0            # the GPU's clocks up first (measure.warm_gpu)
    modes: Sequence[str] = field(default_factory=lambda: list(modes.MODES))


def points(cfg: Config):
    """(hidden, batch, dtype) in the order they are measured."""
    return points_of(asdict(cfg))


def points_of(config: Dict[str, object]):
    """:func:`points` of a report's config."""
    return [(h, b, d) for h in config["hiddens"] for b in config["batches"] for d in config["dtypes"]]


# -- the time estimate ---------------------------------------------------------------------
# Rates measured on the H200 (docs/perf.md): the 128x128-tile projection 31 TFLOP/s; a
# batched step 5 TFLOP/s (200x64x512: 53 us a step) with a floor of 3.6 us a step (80x1x256:
# 0.315 ms for 80 steps); exact mode 1.6-2.3 x the GPU time (docs/exact.md); the layer call's
# host work 3.3 GB/s (200x64x512: 23.6 ms for 78 MB), the session's 1.7 GB/s (47 ms).
_PROJ_FLOPS, _STEP_FLOPS, _STEP_FLOOR_S = 31e12, 5e12, 3.6e-6
_MODE_FACTOR = {"exact": 2.0}
_CALL_BPS, _SESSION_BPS, _COPY_BPS = 3.3e9, 1.7e9, 5e9
_LAYER_SETUP_S, _SESSION_SETUP_S, _CUDNN_SETUP_S = 0.1, 0.4, 0.1
_F64_FLOPS = 20e9  # the CPU's float64 references (errors only)


def _shape_costs(hidden, batch, seq, dtype):
    """(GPU seconds, bytes in + out, FLOPs) of one run of the sweep's layer at this point."""
    dirs, g = 2, 4
    flops_proj = 2.0 * seq * batch * g * hidden * hidden * dirs
    flops_step = 2.0 * batch * g * hidden * hidden * dirs
    gpu = flops_proj / _PROJ_FLOPS + seq * max(_STEP_FLOOR_S, flops_step / _STEP_FLOPS)
    io = np.dtype(dtype).itemsize * (seq * batch * hidden + dirs * batch * hidden * (seq + 2))
    return gpu, io, flops_proj + seq * flops_step


def _figure_s(t_run, cfg, warmup=3):
    n = min(cfg.runs, max(3, int(cfg.point_s / max(t_run, 1e-9)) + 1))
    return (n + warmup) * t_run


def estimate_s(cfg: Config, with_cudnn: Optional[bool] = None) -> float:
    """Predicted seconds of the sweep on an H200-class GPU (a model of its measured rates, not
    a measurement: a slower device takes longer), warm-up included."""
    with_cudnn = cfg.cudnn and cudnn.available() if with_cudnn is None else with_cudnn
    total = cfg.warm_s
    for hidden, batch, dtype in points(cfg):
        gpu, io, flops = _shape_costs(hidden, batch, cfg.seq, dtype)
        for mode in cfg.modes:
            g = gpu * _MODE_FACTOR.get(mode, 1.0)
            total += _LAYER_SETUP_S + _figure_s(g, cfg) + _figure_s(g + io / _CALL_BPS, cfg)
            if hidden <= cfg.session_max_hidden:
                total += _SESSION_SETUP_S + _figure_s(g + io / _SESSION_BPS, cfg)
            if cfg.errors:
                total += flops / _F64_FLOPS
        if with_cudnn:
            for _ in cudnn.for_dtype(dtype):
                total += _CUDNN_SETUP_S + _figure_s(gpu, cfg, 5) + _figure_s(gpu + io / _COPY_BPS, cfg)
                if cfg.errors:
                    total += flops / _F64_FLOPS
    return total


# -- measuring -----------------------------------------------------------------------------
def _ortops_point(hidden, batch, dtype, mode, X, cfg: Config):
    f = measure.layer_figures(CELL, cfg.seq, batch, hidden, hidden, DIRECTION, np.dtype(dtype).type,
                              cfg.runs, cfg.device, mode, budget_s=cfg.point_s, error=cfg.errors,
                              X=X)
    session = None
    if hidden <= cfg.session_max_hidden:
        session = _session_ms(hidden, batch, dtype, mode, X, cfg)
    return dict(gpu_ms=f["gpu_ms"], call_ms=f["layer_call_ms"], session_ms=session,
                error=f["error"], runs=f["runs"], gpu_profile=f["gpu_profile"],
                step_kernel=f["step_kernel"])


def _session_ms(hidden, batch, dtype, mode, X, cfg: Config):
    from ortops.ort.session import InferenceSession

    model = measure.one_node_model(CELL, cfg.seq, batch, hidden, hidden, DIRECTION,
                                   np.dtype(dtype).type)
    sess = InferenceSession(model.SerializeToString(), device=cfg.device, mode=mode)
    feed = {"X": X}
    for _ in range(2):
        sess.run(None, feed)
    return statistics.median(samples(lambda: wall_ms(lambda: sess.run(None, feed)), cfg.runs,
                                     cfg.point_s))


def _guarded(what, failures, fn):
    """``fn()``, or None with the failure logged and listed: one point that a device refuses
    (a limit, memory) must not cost the figures of the others."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 -- recorded in the report, named in the log
        log.warning("sweep: %s failed: %s: %s", what, type(exc).__name__, exc)
        failures.append(f"{what}: {type(exc).__name__}: {exc}")
        return None


def measure_point(hidden, batch, dtype, cfg: Config, with_cudnn: bool, failures=None):
    """Every engine and mode at one point: the point's dict of the report (a figure that
    failed is None, its reason appended to ``failures``)."""
    failures = [] if failures is None else failures
    X = np.random.default_rng(2).standard_normal((cfg.seq, batch, hidden)).astype(dtype)
    name = np.dtype(dtype).name
    out = dict(hidden=hidden, batch=batch, input=hidden, seq=cfg.seq, dtype=name,
               ortops={}, cudnn={})
    where = f"hidden {hidden} batch {batch} {name}"
    for mode in cfg.modes:
        out["ortops"][mode] = _guarded(f"{where} ortops {mode}", failures,
                                       lambda: _ortops_point(hidden, batch, dtype, mode, X, cfg))
        gc.collect()  # the layer's and session's device memory, before the next mode's
    for p in cudnn.for_dtype(dtype) if with_cudnn else ():
        out["cudnn"][p] = _guarded(
            f"{where} {cudnn.PRECISIONS[p].label}", failures,
            lambda: cudnn.measure(CELL, batch, hidden, hidden, DIRECTION, p, X, cfg.runs,
                                  budget_s=cfg.point_s, error=cfg.errors))
    return out


def run(cfg: Config, progress: bool = True, on_point=None) -> Dict[str, object]:
    """Measure the grid; the report (see :func:`check_report`). ``on_point(report so far)``
    after each point: the command saves it, so that a device call cut short keeps what ran."""
    from ortops.device import select

    for m in cfg.modes:
        modes.check_mode(m, "bench/perf.py --sweep")
    dev = select(cfg.device)
    with_cudnn = cfg.cudnn and cudnn.available()
    if cfg.cudnn and not with_cudnn:
        log.warning("sweep: torch with CUDA not available: no cuDNN figures")
    expected = estimate_s(cfg, with_cudnn)
    grid = points(cfg)
    log.info("sweep: %d points x %d ortops modes (%s)%s; expected %.1f min on an H200",
             len(grid), len(cfg.modes), ", ".join(cfg.modes),
             " + cuDNN" if with_cudnn else "", expected / 60)
    measure.warm_process(cfg.device, 3)
    hmax, bmax = max(cfg.hiddens), max(cfg.batches)
    measure.warm_gpu((CELL, cfg.seq, bmax, hmax, hmax, DIRECTION), cfg.device, cfg.warm_s)
    t0 = time.perf_counter()
    settings = {k: (list(v) if isinstance(v, (tuple, list)) else v) for k, v in asdict(cfg).items()}
    report = dict(kind="sweep", schema=SCHEMA, cell=CELL, direction=DIRECTION,
                  device=str(dev), driver=f"{dev.driver} {dev.driver_info}",
                  torch=cudnn.versions(), config=settings, modes=list(cfg.modes),
                  cudnn_precisions=([p for d in cfg.dtypes for p in cudnn.for_dtype(d)]
                                    if with_cudnn else []),
                  expected_s=expected, elapsed_s=0.0, host=platform.node(), cpus=os.cpu_count(),
                  date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  command="python " + " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                  kernels=kernels(), complete=False, failures=[], points=[])
    for i, (hidden, batch, dtype) in enumerate(grid):
        report["points"].append(measure_point(hidden, batch, dtype, cfg, with_cudnn,
                                              report["failures"]))
        gc.collect()
        report["elapsed_s"] = time.perf_counter() - t0
        if progress:
            log.info("sweep %d/%d: hidden %d batch %d %s: %s (%.0f s so far)", i + 1, len(grid),
                     hidden, batch, dtype, _summary(report["points"][-1]), report["elapsed_s"])
        if on_point is not None:
            on_point(report)
    report["complete"] = True
    return report


def kernels() -> Dict[str, object]:
    """The kernel choices in effect (module settings a run may change): fast mode's float16
    projection (ortops.fast.ENABLED, ORTOPS_COOPMAT=1) and the batch from which the step runs
    glsl/step_batched.comp (glsl/step_tiled.comp for more than one row a thread), with its
    tiling by element type and batch (ortops.variants; at hidden 1024, where no tile is
    clamped): "2x1x1x8x4, from batch 33 at hidden 384-767 2x2x1x8x2"."""
    from ortops import fast, variants

    return {"fast_projection": fast.KERNEL if fast.ENABLED else fast.PORTABLE,
            "fast_steps": _fast_steps(),
            "batched_from": _batched_from(),
            "batched_tiling": {d: _tiling_by_batch(d) for d in vocabulary.DTYPES}}


def _fast_steps():
    """Fast mode's float16 matrix-unit steps as the report names them: None (off), or
    "glsl/step_coopmat.comp from batch 4, from 2 at hidden 384 up, from 1 at hidden 896 up" (the native table, or the
    tunable's one batch)."""
    from ortops import _vk, fast, variants

    if not fast.ENABLED or variants.COOPMAT_STEPS_FROM is None:
        return None
    if variants.COOPMAT_STEPS_FROM != variants.TABLE:
        return f"{fast.STEP_KERNEL}.comp from batch {variants.COOPMAT_STEPS_FROM}"
    rows = _vk.batched_tiles()["coopmat_steps_from"]
    return f"{fast.STEP_KERNEL}.comp " + ", ".join(f"from {b} at hidden {h} up" if h else f"from batch {b}"
                                                    for h, b in rows)


def _batched_from():
    """BATCHED_FROM as the report names it: None (never), a batch, or the native table's rows
    as "16 at hidden 384 up, 32 below" (the kernels line reads "from batch 16 at ...")."""
    from ortops import variants

    if variants.BATCHED_FROM != variants.TABLE:
        return variants.BATCHED_FROM
    rows = variants.default_batched_from()
    return ", ".join(f"{b} at hidden {h} up" if h else f"{b} below" for h, b in reversed(rows))


def _tiling_by_batch(dtype) -> str:
    """The table's tiles of an element type (ortops.variants.batched_tiles), as
    "UPTxBYxPREFETCHxKSPLITxROWS[, from batch N at hidden A-B ...]"."""
    from ortops import variants

    parts = []
    for r in variants.batched_tiles():
        if r.dtype != dtype:
            continue
        tile = "x".join(map(str, astuple(r.tile)))
        if not parts:
            parts.append(tile)
            continue
        hidden = f"{r.from_hidden}-{r.below_hidden - 1}" if r.below_hidden else f"{r.from_hidden} up"
        parts.append(f"from batch {max(r.from_batch, variants.batched_from(r.from_hidden) or 1)} at hidden "
                     f"{hidden} {tile}")
    return ", ".join(parts)


def _summary(p):
    parts = [f"{m} {f['gpu_ms']:.3f}/{f['call_ms']:.3f}" for m, f in p["ortops"].items() if f]
    parts += [f"{k} {c['gpu_ms']:.3f}/{c['e2e_ms']:.3f}" for k, c in p["cudnn"].items() if c]
    return ", ".join(parts) + " ms (GPU/e2e)"


# -- the report's schema -------------------------------------------------------------------
_TOP = {"kind": str, "schema": int, "device": str, "modes": list, "cudnn_precisions": list,
        "config": dict, "points": list, "date": str, "command": str, "expected_s": float,
        "elapsed_s": float}
_POINT = {"hidden": int, "batch": int, "input": int, "seq": int, "dtype": str, "ortops": dict,
          "cudnn": dict}
_ORTOPS = {"gpu_ms": float, "call_ms": float, "runs": int}
_CUDNN = {"gpu_ms": float, "e2e_ms": float, "runs": int}


def _check(obj, spec, where):
    if not isinstance(obj, dict):
        raise ValueError(f"sweep report: {where} must be an object, got {type(obj).__name__}")
    for key, typ in spec.items():
        if key not in obj:
            raise ValueError(f"sweep report: {where} lacks {key!r}")
        ok = isinstance(obj[key], (int, float)) if typ is float else isinstance(obj[key], typ)
        if not ok or (typ is int and isinstance(obj[key], bool)):
            raise ValueError(f"sweep report: {where}.{key} must be {typ.__name__}, "
                             f"got {obj[key]!r}")


def check_report(report) -> None:
    """Raise ValueError naming the first thing ``report`` lacks of the sweep.json schema."""
    _check(report, _TOP, "report")
    if report["kind"] != "sweep" or report["schema"] != SCHEMA:
        raise ValueError(f"sweep report: kind/schema must be 'sweep'/{SCHEMA}, "
                         f"got {report['kind']!r}/{report['schema']!r}")
    for i, p in enumerate(report["points"]):
        _check(p, _POINT, f"points[{i}]")
        if set(p["ortops"]) != set(report["modes"]):
            raise ValueError(f"sweep report: points[{i}].ortops has modes {sorted(p['ortops'])}, "
                             f"expected {sorted(report['modes'])}")
        for m, f in p["ortops"].items():
            if f is None:
                continue  # failed at this point (report["failures"] says why)
            _check(f, _ORTOPS, f"points[{i}].ortops.{m}")
            if f.get("session_ms") is not None and not isinstance(f["session_ms"], (int, float)):
                raise ValueError(f"sweep report: points[{i}].ortops.{m}.session_ms must be a "
                                 f"number or null, got {f['session_ms']!r}")
        for k, c in p["cudnn"].items():
            if k not in cudnn.PRECISIONS:
                raise ValueError(f"sweep report: points[{i}].cudnn has unknown precision {k!r}")
            if c is not None:
                _check(c, _CUDNN, f"points[{i}].cudnn.{k}")


def merge(reports) -> Dict[str, object]:
    """One report of sweeps run in parts (e.g. a device call per hidden size): the same
    device and modes; points and grid joined, times summed."""
    for r in reports:
        check_report(r)
    first = reports[0]
    for r in reports[1:]:
        for key in ("device", "modes", "cell", "direction"):
            if r[key] != first[key]:
                raise ValueError(f"sweep merge: {key} differs: {first[key]!r} and {r[key]!r}")
        if r["config"]["seq"] != first["config"]["seq"]:
            raise ValueError(f"sweep merge: seq differs: {first['config']['seq']} and "
                             f"{r['config']['seq']}")
    out = dict(first)
    config = dict(first["config"])
    for key in ("batches", "hiddens", "dtypes"):
        seen = [v for r in reports for v in r["config"][key]]
        config[key] = sorted(set(seen), key=seen.index) if key == "dtypes" else sorted(set(seen))
    out["config"] = config
    out["cudnn_precisions"] = sorted({p for r in reports for p in r["cudnn_precisions"]},
                                     key=list(cudnn.PRECISIONS).index)
    # A point measured twice (a part rerun): the later file's.
    latest = {(p["hidden"], p["batch"], p["dtype"]): p for r in reports for p in r["points"]}
    out["points"] = list(latest.values())
    out["points"].sort(key=lambda p: (p["hidden"], p["batch"], config["dtypes"].index(p["dtype"])))
    out["expected_s"] = sum(r["expected_s"] for r in reports)
    out["elapsed_s"] = sum(r["elapsed_s"] for r in reports)
    out["command"] = " ; ".join(r["command"] for r in reports)
    out["failures"] = [f for r in reports for f in r.get("failures", [])]
    out["complete"] = all(r.get("complete", True) for r in reports)
    # Parts run with different kernel choices: every part's (each point names its step kernel).
    kerns = [r.get("kernels") for r in reports]
    if len({repr(k) for k in kerns}) > 1:
        out["kernels"] = dict(kerns[-1] or {}, parts=kerns)
    return out


# -- the table and the plot ----------------------------------------------------------------
def _f(v):
    return "—" if v is None else f"{v:.3f}"


def _engines(report, dtype):
    """(label, GPU ms getter, e2e ms getter) of every line of a dtype's table and plot."""
    out = []
    for m in report["modes"]:
        out.append((f"ortops {m}", lambda p, m=m: (p["ortops"].get(m) or {}).get("gpu_ms"),
                    lambda p, m=m: (p["ortops"].get(m) or {}).get("call_ms")))
    for k in cudnn.for_dtype(dtype):
        if k in report["cudnn_precisions"]:
            out.append((cudnn.PRECISIONS[k].label,
                        lambda p, k=k: (p["cudnn"].get(k) or {}).get("gpu_ms"),
                        lambda p, k=k: (p["cudnn"].get(k) or {}).get("e2e_ms")))
    return out


def _fastest(engines, p, which):
    figs = [(get(p), label) for label, *gets in engines for get in [gets[which]]]
    figs = [(v, label) for v, label in figs if v is not None]
    return min(figs)[1] if figs else "—"


def markdown(report) -> str:
    """Per dtype a table: hidden, batch, each engine's GPU / e2e ms, the fastest of each."""
    cfg = report["config"]
    lines = [
        f"Device: {report['device']}, driver {report['driver']}; {report['cpus']} CPU cores; "
        f"{report['date']}. {report['cell']} {report['direction']}, input = hidden, "
        f"{cfg['seq']} steps; medians of up to {cfg['runs']} runs per figure (fewer, at least 3, "
        f"after {cfg['point_s']} s). Sweep took {report['elapsed_s'] / 60:.1f} min "
        f"(expected {report['expected_s'] / 60:.1f}).",
        "Cells: GPU ms / e2e ms; ortops's e2e is the layer call (numpy in, numpy out), its "
        f"session (hidden ≤ {cfg['session_max_hidden']}) is the third figure; cuDNN's e2e "
        "copies X in and Y out.",
    ]
    parts = (report.get("kernels") or {}).get("parts")
    if parts:
        lines.append(f"Run in {len(parts)} parts with different kernels (a point measured in "
                     "two shows the later part's figures; sweep.json names each point's step "
                     "kernel):")
    for i, kern in enumerate(parts or [report.get("kernels")]):
        if kern:
            lines.append((f"Part {i + 1}: " if parts else "") + _kernels_line(kern))
    if report.get("torch"):
        lines.append("cuDNN through " + ", ".join(f"{k} {v}" for k, v in report["torch"].items()) + ".")
    if not report.get("complete", True):
        lines.append(f"**Incomplete**: {len(report['points'])} of {len(points_of(cfg))} points ran.")
    for failure in report.get("failures", []):
        lines.append(f"Failed (—): {failure}.")
    lines.append(f"Command: `{report['command']}`")
    for dtype in cfg["dtypes"]:
        eng = _engines(report, dtype)
        pts = [p for p in report["points"] if p["dtype"] == dtype]
        if not pts:
            continue
        lines += ["", f"**{dtype}**", "",
                  "| hidden | batch | " + " | ".join(e[0] for e in eng)
                  + " | fastest GPU | fastest e2e |",
                  "|---|---|" + "---|" * len(eng) + "---|---|"]
        for p in pts:
            cells = []
            for label, gpu, e2e in eng:
                cell = f"{_f(gpu(p))} / {_f(e2e(p))}"
                if label.startswith("ortops "):
                    s = (p["ortops"].get(label[len("ortops "):]) or {}).get("session_ms")
                    cell += f" / {_f(s)}" if s is not None else ""
                cells.append(cell)
            lines.append(f"| {p['hidden']} | {p['batch']} | " + " | ".join(cells)
                         + f" | {_fastest(eng, p, 0)} | {_fastest(eng, p, 1)} |")
    return "\n".join(lines) + "\n"


def _kernels_line(kern) -> str:
    tiling = kern["batched_tiling"]
    if isinstance(tiling, dict):
        tiling = "; ".join(f"{d} {t}" for d, t in tiling.items())
    # Reports made before the register tile (v5) have four fields; a fifth is batch rows per
    # thread, and above 1 the kernel is glsl/step_tiled.comp. Since the tile depends on the
    # batch (ortops.variants.batched_tiles) a type's tiling may list several.
    fields = "units per thread x groups x prefetch x split"
    if any(t.count("x") == 4 for t in re.findall(r"\d+(?:x\d+)+", tiling)):
        fields += " x rows per thread (above 1: glsl/step_tiled.comp)"
    step = ("glsl/step.comp at every batch" if kern["batched_from"] is None else
            f"glsl/step_batched.comp from batch {kern['batched_from']} ({fields}: {tiling}), "
            f"glsl/step.comp below")
    fast_steps = kern.get("fast_steps")   # older reports lack it
    fast = f"; fast mode's float16 steps glsl/{fast_steps} where the device can" if fast_steps else ""
    return f"Kernels: fast mode's float16 projection {kern['fast_projection']}{fast}; step {step}."


def plot(report, path) -> bool:
    """GPU time and e2e against batch, a panel per hidden, log axes (needs matplotlib)."""
    plt = pyplot()
    if plt is None:
        return False
    cfg = report["config"]
    hiddens = list(cfg["hiddens"])
    fig, axes = plt.subplots(2, len(hiddens), figsize=(4.2 * len(hiddens), 7.5), squeeze=False)
    styles = dict(zip(vocabulary.DTYPES, ("-", "--")))
    # One colour per engine and mode in both dtypes (dtype: the line style).
    names = [f"ortops {m}" for m in report["modes"]] + [p.label for p in cudnn.PRECISIONS.values()]
    colour = {n: f"C{i}" for i, n in enumerate(names)}
    for col, hidden in enumerate(hiddens):
        for dtype in cfg["dtypes"]:
            pts = sorted((p for p in report["points"] if p["hidden"] == hidden
                          and p["dtype"] == dtype), key=lambda p: p["batch"])
            for i, (label, gpu, e2e) in enumerate(_engines(report, dtype)):
                for row, get in ((0, gpu), (1, e2e)):
                    xy = [(p["batch"], get(p)) for p in pts if get(p) is not None]
                    if xy:
                        name = label if label.startswith("cuDNN") else f"{label} {dtype}"
                        axes[row][col].plot(*zip(*xy), styles.get(dtype, "-"), marker="o",
                                            markersize=3, label=name, color=colour.get(label))
        for row, what in ((0, "GPU ms"), (1, "e2e ms (numpy in/out)")):
            ax = axes[row][col]
            ax.set_xscale("log", base=2)
            ax.set_xticks(list(cfg["batches"]), [str(b) for b in cfg["batches"]], fontsize=7)
            ax.set_yscale("log")
            ax.set_title(f"hidden {hidden}: {what}", fontsize=9)
            ax.set_xlabel("batch")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{report['cell']} {report['direction']}, {cfg['seq']} steps, input = hidden; "
                 f"{report['device']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
