"""Exact mode's own functions, measured on the device against float64 (docs/exact.md, 'Error
bounds'), and its float16 rounding and denormal flush checked bit for bit.

Each activation is read through an RNN with one hidden unit, W = 1, R = 0 and no bias, so that
the pre-activation is the input itself (x * 1 + 0 is exact) and Y = f(x): the device's exact
activation code on dense samples (every float32 in [-1, 1] with a stride, a log-spaced sweep
of both signs up to 1e4 and down to 1e-30, and the saturation regions). The error is counted
in units in the last place of the float64 result rounded to float32 (ulp), or as an absolute
error where the documented bound is absolute (Elu near 0, Softplus of very negative x). The
bounds asserted here are the ones docs/exact.md states.
"""

from __future__ import annotations

import numpy as np
import pytest

import ortops

TINY = np.finfo(np.float32).tiny


def samples() -> np.ndarray:
    grid = np.linspace(-1.0, 1.0, 1 << 15)
    sweep = np.logspace(-30, 4, 1 << 14)
    wide = np.linspace(-110.0, 110.0, 1 << 14)
    x = np.concatenate([grid, sweep, -sweep, wide, [0.0, 0.3, -0.3, 20.0, 88.7, -87.3, -88.0]])
    return np.unique(x.astype(np.float32))


X = samples()


def device_activation(name, x, alpha=None, beta=None, mode="exact", dtype=np.float32, w=1.0):
    """Y of a one-unit RNN with W = w, R = 0: the activation of x * w in ``mode``."""
    W = np.full((1, 1, 1), w, dtype)
    R = np.zeros((1, 1, 1), dtype)
    kw = {}
    if alpha is not None:
        kw["activation_alpha"] = [alpha]
    if beta is not None:
        kw["activation_beta"] = [beta]
    Y, _ = ortops.rnn(np.asarray(x, dtype).reshape(1, -1, 1), W, R, activations=[name],
                      mode=mode, **kw)
    return Y.reshape(-1)


def ulps(got, ref):
    """|got - ref| in ulps of ref rounded to float32 (where ref is a normal float32)."""
    r32 = np.abs(ref).astype(np.float32)
    unit = np.spacing(np.maximum(r32, TINY)).astype(np.float64)
    return np.abs(got.astype(np.float64) - ref) / unit


x64 = X.astype(np.float64)
# name: (alpha, float64 reference, bound in ulps, where the bound applies, absolute bound elsewhere)
FUNCTIONS = {
    "Sigmoid": (None, lambda x: np.exp(-np.logaddexp(0.0, -x)), 4, lambda x: np.abs(x) >= 0, 0),
    "Tanh": (None, np.tanh, 4, lambda x: np.abs(x) >= 0, 0),
    "Softsign": (None, lambda x: x / (1 + np.abs(x)), 4, lambda x: np.abs(x) >= 0, 0),
    "Softplus": (None, lambda x: np.logaddexp(0.0, x), 4, lambda x: x > -87, 1e-38),
    "Elu": (1.0, lambda x: np.where(x >= 0, x, np.expm1(np.minimum(x, 0))), 3, lambda x: np.abs(x) >= 0, 0),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_function_error_bound(name):
    alpha, ref_fn, bound, where, absolute = FUNCTIONS[name]
    got = device_activation(name, X, alpha=alpha)
    ref = ref_fn(x64)
    # Results the float32 format cannot hold as normal numbers are flushed (denormals: ±0).
    normal = np.abs(ref) >= TINY
    inside = where(x64) & normal
    err = ulps(got, ref)
    worst = err[inside].max()
    assert worst <= bound, f"{name}: {worst:.2f} ulp at x = {X[inside][np.argmax(err[inside])]!r}"
    outside = ~inside
    if outside.any():
        abs_err = np.abs(got[outside].astype(np.float64) - ref[outside])
        assert abs_err.max() <= max(absolute, TINY), f"{name}: absolute error {abs_err.max():.3g}"


def test_special_inputs():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 100.0, -100.0], np.float32)
    s = device_activation("Sigmoid", x)
    # sigmoid(-100) = 3.7e-44 is a float32 denormal: flushed to 0 (docs/exact.md, 'Denormals').
    np.testing.assert_array_equal(s[1:], [1, 0, 0.5, 0.5, 1, 0, 1, 0])
    t = device_activation("Tanh", x)
    assert np.isnan(s[0]) and np.isnan(t[0])
    np.testing.assert_array_equal(t[1:], [1, -1, -0.0, 0, 1, -1, 1, -1])
    assert np.signbit(device_activation("Tanh", np.array([0.5, -1e-30], np.float32))[1])
    sp = device_activation("Softplus", x)
    np.testing.assert_array_equal(sp[1:3], [np.inf, 0])
    assert np.isnan(device_activation("Softsign", x)[1:3]).all()


def test_float32_denormals_are_flushed_in_both_directions():
    # Denormal inputs act as zero, and a product below FLT_MIN is zero: the behaviour every
    # device gives in exact mode (docs/exact.md, 'Denormals'), whatever its own mode.
    # (Lavapipe's own mode keeps them: the deterministic kernels give 1e-40 * 1 and the
    # products -3e-40 and 2e-39 here.)
    x = np.array([1e-40, -1e-40, 1e-20, -3e-20, 2e-19, 3e-18], np.float32)
    y = device_activation("LeakyRelu", x, alpha=1.0, w=1e-20)
    np.testing.assert_array_equal(y, [0, 0, 0, 0, 0, np.float32(3e-18) * np.float32(1e-20)])
    y1 = device_activation("LeakyRelu", x, alpha=1.0)
    np.testing.assert_array_equal(y1, [0, 0, *x[2:]])


@pytest.mark.parametrize("w", [1.0, 1.0009765625, 0.333251953125, 2.0 ** -14 * 1.5, 300.0])
def test_float16_rounding_is_round_to_nearest_even_for_every_half(w):
    # Every finite half times w in float32, rounded to half by the kernel's integer code: as
    # numpy rounds (to nearest, ties to even; subnormal halves; beyond 65504, Inf).
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    h = h[np.isfinite(h)]
    got = device_activation("LeakyRelu", h, alpha=1.0, dtype=np.float16, w=w)
    with np.errstate(over="ignore"):     # beyond 65504: Inf, the expected value
        want = (h.astype(np.float32) * np.float32(np.float16(w))).astype(np.float16)
    zero = want == 0     # -0 * 1 + 0 is +0 in the kernel's sum: compare zeros by value
    assert np.array_equal(got[~zero].view(np.uint16), want[~zero].view(np.uint16))
    assert (got[zero] == 0).all()


def test_float16_nan_and_inf_are_kept():
    h = np.array([np.nan, np.inf, -np.inf, 65504, -65504], np.float16)
    got = device_activation("LeakyRelu", h, alpha=1.0, dtype=np.float16)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:], h[1:])


def test_nan_leaves_as_the_canonical_quiet_nan():
    # A NaN's sign and payload are each device's choice (0 * Inf is 0xFFC00000 on x86,
    # 0x7FFFFFFF on NVIDIA): exact mode writes every NaN as 0x7FC00000 (float16: 0x7E00).
    x = np.array([0xFFC00001, 0x7F800001, 0x7F800000], np.uint32).view(np.float32)
    y = device_activation("LeakyRelu", x, alpha=1.0)
    assert (y[:2].view(np.uint32) == 0x7FC00000).all()
    z = device_activation("Affine", x[2:], alpha=0.0, beta=0.0)      # 0 * Inf
    assert z.view(np.uint32)[0] == 0x7FC00000
    h = np.array([0xFE01, 0x7C01, 0x7D00], np.uint16).view(np.float16)
    yh = device_activation("LeakyRelu", h, alpha=1.0, dtype=np.float16)
    assert (yh.view(np.uint16) == 0x7E00).all()
    assert not (device_activation("LeakyRelu", x, alpha=1.0, mode="deterministic")[:2].view(np.uint32)
                == 0x7FC00000).all()   # the default mode passes the payload through


@pytest.mark.parametrize("mode", ("exact", "deterministic"))
def test_zero_activation_parameters_follow_ieee(mode):
    # alpha = 0 or beta = 0 are constants the driver's compiler sees; lavapipe folded 0 * x to 0
    # (the default mode gave LeakyRelu_0(-Inf) = 0 there): both modes write IEEE's result out
    # for a zero parameter (mulc_, addc_ in glsl/common.glsl): 0 * ±Inf is NaN, 0 * -2 is -0,
    # and -0 + 0 is +0.
    x = np.array([np.inf, -np.inf, -2.0, 3.0], np.float32)
    leaky = device_activation("LeakyRelu", x, alpha=0.0, mode=mode)
    assert np.isnan(leaky[1]) and leaky[0] == np.inf and leaky[3] == 3.0
    assert leaky[2] == 0 and np.signbit(leaky[2])
    affine = device_activation("Affine", x, alpha=0.0, beta=0.0, mode=mode)
    assert np.isnan(affine[:2]).all() and (affine[2:] == 0).all() and not np.signbit(affine[2:]).any()
    scaled = device_activation("ScaledTanh", x, alpha=0.0, beta=0.0, mode=mode)   # 0 * tanh(0 * ±Inf) = NaN
    assert np.isnan(scaled[:2]).all() and (scaled[2:] == 0).all()
