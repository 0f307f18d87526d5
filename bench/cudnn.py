"""cuDNN through torch, the benchmark's GPU peer, in each precision mode it offers.

A cuDNN figure means little without its arithmetic: torch runs cuDNN's float32 recurrent
kernels with TensorFloat-32 products by default (10-bit mantissas on the tensor cores), which
is not the float32 contract ortops keeps. So each peer figure names its mode:

- ``strict``: float32, TF32 off for cuDNN and cuBLAS (``torch.backends.cudnn.allow_tf32 =
  torch.backends.cuda.matmul.allow_tf32 = False``, or their ``fp32_precision = "ieee"``
  successors where torch has them);
- ``tf32``: float32, TF32 on for both (torch's default for cuDNN);
- ``float16``: half weights and input (cuDNN's tensor-op math).

and carries its scaled error (:func:`ortops.compare.scaled_error`) against torch's same module in
float64 on the CPU, with the same weights (rounded to the mode's dtype) and the same input.
torch is optional: without it, or without CUDA, :func:`measure` returns None.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import statistics
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from ortops.compare import scaled_error
from ortops.timing import samples, wall_ms

log = logging.getLogger("ortops.bench")

__all__ = ["Precision", "PRECISIONS", "for_dtype", "available", "versions", "precision_settings", "measure"]


@dataclass(frozen=True)
class Precision:
    name: str
    dtype: str           # the weights', input's and output's numpy dtype
    tf32: bool           # TensorFloat-32 allowed (float32 only)
    label: str           # how tables name it


PRECISIONS: Dict[str, Precision] = {p.name: p for p in (
    Precision("strict", "float32", False, "cuDNN strict f32"),
    Precision("tf32", "float32", True, "cuDNN TF32"),
    Precision("float16", "float16", False, "cuDNN f16"),
)}


def for_dtype(dtype) -> List[str]:
    """The precision modes that compare with ortops at ``dtype`` (float32: strict, tf32)."""
    name = np.dtype(dtype).name
    return [p.name for p in PRECISIONS.values() if p.dtype == name]


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def available() -> bool:
    """torch imports and sees a CUDA device."""
    torch = _torch()
    return torch is not None and torch.cuda.is_available()


def versions() -> Dict[str, object]:
    """torch's and cuDNN's versions and the CUDA device's name ({} without torch)."""
    torch = _torch()
    if torch is None:
        return {}
    out: Dict[str, object] = {"torch": torch.__version__}
    if torch.cuda.is_available():
        out["cuDNN"] = torch.backends.cudnn.version()
        out["CUDA device"] = torch.cuda.get_device_name()
    return out


def _new_api(torch) -> bool:
    # torch >= 2.9 has per-backend fp32_precision; mixing it with the legacy allow_tf32 flags
    # raises there, so one of the two is used, never both.
    rnn = getattr(torch.backends.cudnn, "rnn", None)
    return hasattr(rnn, "fp32_precision") and hasattr(torch.backends.cuda.matmul, "fp32_precision")


def precision_settings() -> Dict[str, object]:
    """torch's current TF32 settings for cuDNN and cuBLAS, as the report records them."""
    torch = _torch()
    if torch is None:
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if _new_api(torch):
            return {"cudnn.rnn.fp32_precision": torch.backends.cudnn.rnn.fp32_precision,
                    "cudnn.fp32_precision": torch.backends.cudnn.fp32_precision,
                    "cuda.matmul.fp32_precision": torch.backends.cuda.matmul.fp32_precision}
        return {"cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
                "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32}


@contextlib.contextmanager
def tf32(allow: bool):
    """TF32 on or off for cuDNN and cuBLAS inside the block; the previous settings after it."""
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if _new_api(torch):
            objs = [torch.backends.cudnn.rnn, torch.backends.cudnn, torch.backends.cuda.matmul]
            saved = [o.fp32_precision for o in objs]
            for o in objs:
                o.fp32_precision = "tf32" if allow else "ieee"
            restore = lambda: [setattr(o, "fp32_precision", s) for o, s in zip(objs, saved)]  # noqa: E731
        else:
            saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
            torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = allow
            restore = lambda: (setattr(torch.backends.cudnn, "allow_tf32", saved[0]),  # noqa: E731
                               setattr(torch.backends.cuda.matmul, "allow_tf32", saved[1]))
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            restore()


def build(cell: str, inp: int, hidden: int, bidirectional: bool, precision: str, seed: int = 0,
          device: str = "cuda"):
    """torch's module in the mode's dtype on ``device`` and its float64 twin on the CPU (the
    reference: the same weights after rounding to the mode's dtype)."""
    torch = _torch()
    cls = getattr(torch.nn, cell)   # torch.nn.LSTM, GRU and RNN: ONNX's op names
    torch.manual_seed(seed)
    net = cls(inp, hidden, bidirectional=bidirectional).eval()
    dtype = getattr(torch, PRECISIONS[precision].dtype)
    net = net.to(device=device, dtype=dtype)
    ref = copy.deepcopy(net).to(device="cpu", dtype=torch.float64)
    return net, ref


def error_against_float64(net, ref, X: np.ndarray, device: str = "cuda") -> float:
    """Scaled error of ``net``'s Y on ``X`` against ``ref`` (float64, CPU) on the same X."""
    torch = _torch()
    with torch.no_grad():
        y = net(torch.from_numpy(X).to(device))[0].cpu().numpy()
        want = ref(torch.from_numpy(X.astype(np.float64)))[0].numpy()
    return scaled_error(y, want)


def measure(cell: str, batch: int, inp: int, hidden: int, direction: str, precision: str,
            X: np.ndarray, runs: int, *, budget_s: Optional[float] = None, error: bool = True,
            device: str = "cuda") -> Optional[Dict[str, object]]:
    """GPU ms (CUDA events), end-to-end ms (numpy X in, numpy Y out) and, with ``error``, the
    scaled error of cuDNN in ``precision`` (PRECISIONS); None without torch and CUDA.

    ``X`` (seq, batch, input) must have the mode's dtype.
    """
    torch = _torch()
    if torch is None or not torch.cuda.is_available():
        return None
    p = PRECISIONS[precision]
    if X.dtype != np.dtype(p.dtype):
        raise ValueError(f"cudnn.measure: X must be {p.dtype} for precision {precision!r}, "
                         f"got {X.dtype}")
    torch.backends.cudnn.benchmark = True
    with tf32(p.tf32):
        settings = precision_settings()
        net, ref = build(cell, inp, hidden, direction == "bidirectional", precision, device=device)
        x = torch.from_numpy(X).to(device)
        with torch.no_grad():
            for _ in range(5):
                net(x)
            torch.cuda.synchronize()

            def gpu_ms():
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                net(x)
                b.record()
                torch.cuda.synchronize()
                return a.elapsed_time(b)

            def e2e():
                net(torch.from_numpy(X).to(device))[0].cpu().numpy()
                torch.cuda.synchronize()

            def e2e_ms():
                return wall_ms(e2e)

            gpu = samples(gpu_ms, runs, budget_s)
            e2e_ms()
            e2e = samples(e2e_ms, runs, budget_s)
        err = error_against_float64(net, ref, X, device) if error else None
    return dict(precision=precision, label=p.label, gpu_ms=statistics.median(gpu),
                e2e_ms=statistics.median(e2e), error=err, runs=len(gpu), settings=settings)
