"""How results are judged: the scaled error and the project's tolerances (docs/design.md, 'Tolerances'), and the
rule for IEEE special values (:func:`special_mismatches`, docs/special_values.md)."""

from __future__ import annotations

import numpy as np

#: Largest scaled error accepted, per output dtype: float32 results against a float64
#: reference, float16 results (float32 arithmetic, outputs rounded to half).
TOLERANCE = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2e-3}


def tolerance(dtype) -> float:
    """The tolerance for outputs of ``dtype`` (float32's for anything else)."""
    return TOLERANCE.get(np.dtype(dtype), TOLERANCE[np.dtype(np.float32)])


def scaled_error(got, expected) -> float:
    """max|got - expected| / max|expected| (max|got - expected| where expected is all 0).

    A shape mismatch or a NaN in one but not the other is infinitely wrong; NaNs in the same
    places compare equal.
    """
    g = np.asarray(got, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape:
        return float("inf")
    if g.size == 0:
        return 0.0
    if np.isnan(g).any() or np.isnan(e).any():
        if not np.array_equal(np.isnan(g), np.isnan(e)):
            return float("inf")
        g, e = np.nan_to_num(g), np.nan_to_num(e)
    with np.errstate(invalid="ignore"):   # Inf - Inf: NaN, above any tolerance (special_value_difference)
        diff = float(np.max(np.abs(g - e)))
    scale = float(np.max(np.abs(e)))
    return diff / scale if scale > 0 else diff


def _classes(a: np.ndarray):
    return np.isnan(a), np.isposinf(a), np.isneginf(a)


def _where(mask: np.ndarray, got, expected, limit: int = 3) -> str:
    idx = np.argwhere(mask)[:limit]
    shown = ", ".join(f"{tuple(int(i) for i in ix)}: got {float(got[tuple(ix)])!r}, "
                      f"expected {float(expected[tuple(ix)])!r}" for ix in idx)
    more = "" if mask.sum() <= limit else f" (and {int(mask.sum()) - limit} more)"
    return shown + more


def special_mismatches(got, expected, other=None, *, tol=None) -> list:
    """How ``got`` breaks ortops's rule for special values against ``expected``; [] if it keeps it.

    ``got`` is a device result (float32 or float16), ``expected`` the float64 reference (or
    any oracle), ``other`` optionally a second oracle (ONNX Runtime CPU) that decides which
    signed zeros bind. The rule (docs/special_values.md):

    * ``expected`` and ``other`` are first rounded to got's dtype: a float64 value beyond the
      dtype's range is the infinity that the dtype's result of it is;
    * NaN at exactly the positions where the rounded ``expected`` has NaN;
    * +Inf and -Inf at exactly the positions (and signs) where it has them;
    * the finite values within the scaled error max|got - expected| / max|expected|, both
      over the finite elements only, at most ``tol`` (default :func:`tolerance` of got's
      dtype; ``expected`` unrounded);
    * where ``expected`` is an exact zero (and, when given, ``other`` is an exact zero of the
      same sign) and got is an exact zero too, it has that sign. A non-zero got there is a
      finite value like any other, judged by the scaled error: a device that fuses a multiply
      and an add (NVIDIA does) can leave a residue of one rounding where two large products
      cancel exactly in the reference. Where the two oracles disagree on the sign, either is
      accepted.

    Each entry of the returned list is one sentence naming the rule, how many elements break
    it and the first few of them.
    """
    g = np.asarray(got)
    e = np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape:
        return [f"shape {g.shape}, expected {e.shape}"]
    dtype = g.dtype if g.dtype.kind == "f" else np.dtype(np.float64)
    tol = tolerance(dtype) if tol is None else tol
    g = g.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        er = e.astype(dtype).astype(np.float64)
    problems = []
    for label, gm, em in zip(("NaN", "+Inf", "-Inf"), _classes(g), _classes(er)):
        if (gm & ~em).any():
            problems.append(f"{label} where expected has none: " + _where(gm & ~em, g, e))
        if (em & ~gm).any():
            problems.append(f"no {label} where expected has {label}: " + _where(em & ~gm, g, e))
    finite = np.isfinite(g) & np.isfinite(er)
    if finite.any():
        gf, ef = g[finite], e[finite]
        diff = float(np.max(np.abs(gf - ef)))
        scale = float(np.max(np.abs(ef)))
        err = diff / scale if scale > 0 else diff
        if not err <= tol:
            worst = np.zeros(g.shape, bool)
            worst[finite] = np.abs(gf - ef) == diff
            problems.append(f"finite values: scaled error {err:.3g} above {tol:g}: " + _where(worst, g, e, 1))
    zero = e == 0
    if other is not None:
        o = np.asarray(other, dtype=np.float64)
        zero &= (o == 0) & (np.signbit(o) == np.signbit(e))
    wrong_sign = zero & (g == 0) & (np.signbit(g) != np.signbit(e))
    if wrong_sign.any():
        problems.append("sign of zero: " + _where(wrong_sign, g, e))
    return problems


def special_value_difference(got, expected) -> bool:
    """Whether ``got`` differs from ``expected`` in IEEE special values, which the scaled error
    cannot measure: either holds a NaN or +-Inf and they differ in where (or which) they hold
    them, or they agree on them and the scaled error is above :func:`tolerance` only through
    them (Inf - Inf is NaN) while the elements finite in both are within it. ``expected`` is first rounded to got's dtype, as :func:`special_mismatches`
    does. The rule such results are judged by is docs/special_values.md."""
    g = np.asarray(got)
    e = np.asarray(expected, dtype=np.float64)
    if g.shape != e.shape:
        return False
    dtype = g.dtype if g.dtype.kind == "f" else np.dtype(np.float64)
    g = g.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        er = e.astype(dtype).astype(np.float64)
    finite = np.isfinite(g) & np.isfinite(er)
    if finite.all():
        return False
    if any((a != b).any() for a, b in zip(_classes(g), _classes(er))):
        return True
    tol = tolerance(dtype)
    return not scaled_error(got, expected) <= tol and scaled_error(g[finite], e[finite]) <= tol


# -- quantized models -------------------------------------------------------------------------
#
# A com.microsoft.DynamicQuantizeLSTM runs on the device as the LSTM of its dequantized weights
# (ortops.ort.quantized): exact to float32's tolerance. ONNX Runtime's own kernel also quantizes
# X and the hidden state to uint8 at every step, so the two differ by ORT's activation
# quantization. Measured on 42 outputs (Y, Y_h, Y_c of forward, reverse and bidirectional LSTMs,
# hidden 32 to 256, quantize_dynamic per tensor and per channel, hand-built uint8/int8 nodes;
# docs/onnxruntime.md, "Quantized LSTM"): ORT's result against the float model 3.5e-3 to 8.6e-3,
# ortops' (the dequantized model's) 2.3e-3 to 6.3e-3, the two against each other 2.5e-3 to
# 6.1e-3, at most 1.06 times ORT's own error.

#: The dequantized model's distance from ORT's quantized result may be at most this multiple of
#: ORT's own quantization error (its result against the float model). 2 is the triangle
#: inequality's bound when the dequantized model is no farther from the float model than ORT
#: is (it quantizes less); measured: at most 1.06.
QUANTIZED_MARGIN = 2.0
#: Largest scaled error accepted between ORT's quantized result and the dequantized model when
#: the float model is not known (``ortops run --compare``): 2^-5, about three times the largest
#: measured (1.09e-2, the logits of the quantized recognizer, whose MatMulInteger head quantizes
#: once more; 7.2e-3 at an LSTM's output; 8-bit quantization's step is 2^-8 of the range). Weights read otherwise
#: than ORT reads them (transposed, zero point ignored, scales on the wrong axis) give 0.1 to 1
#: (tests/test_quantized.py).
QUANTIZATION_BOUND = 2.0 ** -5


def quantized_problems(got, exact, ort_quantized, float_result=None, *, tol=None, downstream=False) -> list:
    """How ortops' result ``got`` for one output of a quantized model breaks the rule; [] if it
    keeps it.

    ``exact``: the dequantized model's result (the float64 reference, or ONNX Runtime CPU's
    float32 result of ``ortops.ort.quantized.dequantized_model``); ``ort_quantized``: ONNX
    Runtime CPU's result of the quantized model; ``float_result``: the float model's (before
    quantization), when known. The rule:

    * ``scaled_error(got, exact)`` at most ``tol`` (default :func:`tolerance` of got's dtype):
      the device computes the dequantized model as exactly as any float32 model;
    * ORT's quantization error ``q = scaled_error(ort_quantized, float_result)``; without a
      float model, ``q = scaled_error(ort_quantized, exact)``, which must then be at most
      :data:`QUANTIZATION_BOUND` (ortops reads the quantized weights as ORT does);
    * ``scaled_error(got, ort_quantized)`` at most ``QUANTIZED_MARGIN * q + tol``.

    ``downstream=True`` is for an output computed from the recurrent node's outputs by further
    dynamically quantized nodes (the MatMulInteger head of a quantized recognizer): the first
    condition is not applied to it, since a float32 rounding difference in such a node's input
    can move its output by a whole quantization step (4.7e-4 measured on the recognizer's
    logits); the recurrent node's own outputs are judged by all three.
    """
    g = np.asarray(got)
    tol = tolerance(g.dtype) if tol is None else tol
    problems = []
    exact_err = scaled_error(got, exact)
    if not downstream and not exact_err <= tol:
        problems.append(f"scaled error {exact_err:.3g} against the dequantized model, above {tol:g}")
    q = scaled_error(ort_quantized, exact if float_result is None else float_result)
    if float_result is None and not q <= QUANTIZATION_BOUND:
        problems.append(f"ONNX Runtime's quantized result is {q:.3g} from the dequantized model, above "
                        f"{QUANTIZATION_BOUND:g}: the weights are not read as ONNX Runtime reads them, or ONNX "
                        "Runtime's int8 products saturated (x86 without VNNI: quantize with reduce_range=True)")
    diff = scaled_error(got, ort_quantized)
    if not diff <= QUANTIZED_MARGIN * q + tol:
        problems.append(f"scaled error {diff:.3g} against ONNX Runtime's quantized result, above "
                        f"{QUANTIZED_MARGIN:g} x its own quantization error {q:.3g} + {tol:g}")
    return problems
