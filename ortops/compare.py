"""How results are judged: the scaled error and the project's tolerances (seed 000)."""

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
