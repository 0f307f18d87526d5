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
