"""ortops.compare.special_mismatches: each part of the special-value rule catches what it must."""

import numpy as np

from ortops.compare import special_mismatches

REF = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -2.0, 1e39])


def _float(dtype):
    with np.errstate(over="ignore"):   # 1e39 is +Inf in float32, as the rule expects
        return REF.astype(dtype)


def _device(**changes):
    got = _float(np.float32)
    for index, value in changes.items():
        got[int(index[1:])] = value
    return got


def test_the_reference_itself_passes():
    assert special_mismatches(_device(), REF) == []
    assert special_mismatches(_float(np.float16), REF) == []


def test_nan_positions():
    assert any("no NaN" in p for p in special_mismatches(_device(i0=0.0), REF))
    assert any(p.startswith("NaN where") for p in special_mismatches(_device(i5=np.nan), REF))


def test_inf_positions_and_signs():
    assert any("-Inf" in p for p in special_mismatches(_device(i1=-np.inf), REF))
    assert any("+Inf" in p for p in special_mismatches(_device(i1=3e38), REF))
    # Beyond the dtype's range the expected value is the infinity its rounding gives.
    assert any("+Inf" in p for p in special_mismatches(_device(i7=3e38), REF))
    half = np.array([7e4, 6e4], np.float64)
    assert special_mismatches(np.array([np.inf, 6e4], np.float16), half) == []


def test_finite_values_scaled_over_the_finite_elements():
    assert special_mismatches(_device(i6=-2.0 + 1e-5), REF) == []            # 5e-6 of max 2
    assert any("scaled error" in p for p in special_mismatches(_device(i6=-2.0 + 1e-4), REF))
    assert special_mismatches(_device(i6=-2.0 + 1e-4), REF, tol=1e-4) == []


def test_signed_zeros():
    assert any("sign of zero" in p for p in special_mismatches(_device(i3=0.0), REF))
    assert any("sign of zero" in p for p in special_mismatches(_device(i4=-0.0), REF))
    # Where the second oracle gives the other sign (or a non-zero), either sign is accepted.
    other = REF.copy()
    other[3] = 0.0
    assert special_mismatches(_device(i3=0.0), REF, other) == []
    assert special_mismatches(_device(i3=-0.0), REF, other) == []
    other[4] = 1e-30
    assert special_mismatches(_device(i4=-0.0), REF, other) == []
    # A non-zero result where the reference has an exact zero is judged by the scaled error
    # only (an FMA's residue where two products cancel exactly in float64).
    assert special_mismatches(_device(i4=-1e-6), REF) == []
    assert any("scaled error" in p for p in special_mismatches(_device(i4=-1e-4), REF))


def test_shape_mismatch():
    assert special_mismatches(np.zeros(3, np.float32), np.zeros(4)) != []


def test_special_value_difference_says_when_special_values_make_the_error():
    from ortops.compare import scaled_error, special_value_difference

    a = np.array([1.0, np.inf, np.nan, -2.0], np.float32)
    assert not special_value_difference(a, a.astype(np.float64))     # no difference at all
    # The same +Inf and no NaN: the scaled error is NaN (Inf - Inf), the finite values agree.
    inf = np.array([1.0, np.inf, -2.0], np.float32)
    assert np.isnan(scaled_error(inf, inf.astype(np.float64))) and special_value_difference(inf, inf.astype(np.float64))
    # NaN, +Inf or -Inf where the other has something else.
    for i, v in ((0, np.nan), (0, np.inf), (1, -np.inf), (1, 5.0), (2, 0.0)):
        b = a.astype(np.float64)
        b[i] = v
        assert special_value_difference(a, b), (i, v)
    # Finite values alone: not a special-value difference, with or without special values around.
    assert not special_value_difference(np.float32([1, 2]), np.float64([1, 3]))
    b = a.astype(np.float64)
    b[3] = -3.0
    assert not special_value_difference(a, b)
    # Rounded to got's dtype first: 7e4 is +Inf in float16.
    assert special_value_difference(np.float16([np.inf, 1]), np.float64([np.inf, 1]))
    assert not special_value_difference(np.float16([np.inf, 1]), np.float64([7e4, 3]))
    assert not special_value_difference(np.float32([1]), np.float64([1, 2]))   # shapes differ
