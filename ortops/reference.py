"""Float64 numpy reference for the ONNX recurrent operators LSTM, GRU and RNN.

Written from the operator definitions (ONNX Operators.md) and the semantics
settled in docs/design.md ('Semantics'), with the same signatures as the public GPU API. Inputs
may be float32, float16 or float64 (all the same dtype); everything is
computed in float64 and **the outputs are float64** whatever the input dtype
(callers cast when they need to).

Semantics:

* Gate order inside W, R, B: LSTM i, o, f, c; GRU z, r, h. B holds the W
  biases then the R biases; P is i, o, f.
* pre = ((x·Wᵀ + h·Rᵀ) + Wb) + Rb. LSTM peepholes add Pi*c and Pf*c with the
  previous cell state and Po*c with the new one. ``clip`` then clamps every
  gate's pre-activation to [-clip, clip] (a NaN passes through).
* LSTM: i = f(pre_i), forget = f(pre_f) or 1 - i with input_forget,
  c = forget*c_prev + i*g(pre_c), o = f(pre_o), h = o*h(c).
* GRU: z = f(pre_z), r = f(pre_r); linear_before_reset = 0:
  pre_h = x·Whᵀ + (r*h_prev)·Rhᵀ + Wbh + Rbh; linear_before_reset = 1:
  pre_h = x·Whᵀ + r*(h_prev·Rhᵀ + Rbh) + Wbh; h = (1-z)*g(pre_h) + z*h_prev.
* RNN: h = f(pre).
* sequence_lens: row b runs its first len_b steps (the reverse direction
  starts at step len_b - 1); Y is zero at steps >= len_b; Y_h / Y_c are the
  state after the row's last valid step; a row of length 0 has Y_h = Y_c = 0
  (not the initial state). ORT 1.32 CPU does exactly this.
* seq_length = 0: Y is empty and Y_h / Y_c are the initial states (zeros when
  absent), as docs/design.md ('Zero sizes') settles, even when sequence_lens (necessarily all 0)
  is given. ORT 1.32 CPU differs: its LSTM and RNN return Y_h = 0 whatever the
  initial state (LSTM's Y_c was seen to hold uninitialised memory), and its GRU
  aborts the process.
* batch_size = 0: every output is empty. ORT 1.32 CPU's RNN agrees; its LSTM
  and GRU abort the process.
* layout = 1: X [batch, seq, input], initial states and Y_h / Y_c [batch,
  num_directions, hidden], Y [batch, seq, num_directions, hidden]. ORT's CPU
  kernels refuse layout 1; the result is the layout-0 result transposed.

Special values (docs/special_values.md):

* NaN, +-Inf and -0 follow IEEE arithmetic in the order above (0 * Inf and
  Inf - Inf are NaN); each activation is its exact value, with its limits at
  +-Inf (:func:`ortops.activations.apply`).
* A float32 or float16 layer is float32 arithmetic on every device and in ORT:
  the reference keeps float64 precision but float32's range, so that a result
  beyond it is +-Inf and one below half the smallest denormal is +-0 after
  every operation (:func:`ortops.activations.float32_range`). A float64 layer
  has float64's range.
* ``ort_cpu=True`` models ONNX Runtime 1.32 CPU where ortops deliberately
  differs from it (its LSTM and GRU clamp every pre-activation, NaN becoming
  +clip when B is given; its Relu and HardSigmoid turn NaN into 0; its
  Softplus overflows; its gates saturate exactly early (MLAS) or never (the
  GRU's tanh approximation)). The tests compare ORT with this model and the
  device with the default; ortops itself never uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from . import activations as _act
from . import vocabulary
from .validation import LayerSpec, check_inputs, check_layer

__all__ = ["lstm", "gru", "rnn"]

_DTYPES = (np.float32, np.float16, np.float64)


def _f64(a) -> Optional[np.ndarray]:
    return None if a is None else np.asarray(a, dtype=np.float64)


_FLOAT32_MAX = float(np.finfo(np.float32).max)

# ONNX Runtime's GRU evaluates its reset gate (f = Sigmoid or Tanh) and its candidate
# (g = Sigmoid or Tanh) with one rational approximation of tanh (rnn_helpers.cc,
# gru_reset_gate_* / gru_output_gate_*), in float32, on an input clamped to +-10 (Tanh) or
# +-20 (Sigmoid, through 0.5 * (1 + tanh(x / 2))). It never saturates exactly: |tanh| reaches
# 1.00000048, so the gate is never exactly 0 or 1 (used by ort_cpu=True only).
_ORT_P = tuple(np.float32(v) for v in (-2.76076847742355e-16, 2.00018790482477e-13,
                                       -8.60467152213735e-11, 5.12229709037114e-08,
                                       1.48572235717979e-05, 6.37261928875436e-04,
                                       4.89352455891786e-03))
_ORT_Q = tuple(np.float32(v) for v in (1.19825839466702e-06, 1.18534705686654e-04,
                                       2.26843463243900e-03, 4.89352518554385e-03))


def _odd_rational(x: np.ndarray, bound: float, P: tuple, Q: tuple) -> np.ndarray:
    """x * P(x^2) / Q(x^2) in float32 by Horner's rule, x clamped to [-bound, bound] first:
    the form of both ONNX Runtime approximations modelled here (a float32 product is the same
    whichever operand comes first, so one evaluation order serves both)."""
    x = x.astype(np.float32)
    x = np.where(x < -bound, np.float32(-bound), np.where(x > bound, np.float32(bound), x))
    x2 = x * x
    p = x2 * P[0] + P[1]
    for c in P[2:]:
        p = x2 * p + c
    q = x2 * Q[0] + Q[1]
    for c in Q[2:]:
        q = x2 * q + c
    return (x * p) / q


def _ort_gru_tanh(x: np.ndarray, bound: float) -> np.ndarray:
    return _odd_rational(x, bound, _ORT_P, _ORT_Q)


# MLAS's logistic (MlasComputeLogistic, the Sigmoid of ORT's LSTM gates and GRU update
# gate): a rational function of x clamped to +-18, plus 0.5, clamped to [0, 1]. It is exactly
# 0 at -18 and below and 1 at 18 and above, where the true value is not. Evaluated here in
# float32 without fused multiply-adds it reaches 0 / 1 from about -16.5 / 16; ORT's AVX kernel
# (FMA) was seen to give 8.9e-8 at -17, so values between 16 and 18 are not modelled exactly.
_MLAS_P = tuple(np.float32(v) for v in (4.37031012579801e-11, 1.15627324459942e-07,
                                        6.08574864600143e-05, 8.51377133304701e-03,
                                        2.48287947061529e-01))
_MLAS_Q = tuple(np.float32(v) for v in (6.10247389755681e-13, 5.76102136993427e-09,
                                        6.29106785017040e-06, 1.70198817374094e-03,
                                        1.16817656904453e-01, 9.93151921023180e-01))


def _ort_mlas_logistic(x: np.ndarray) -> np.ndarray:
    y = _odd_rational(x, 18, _MLAS_P, _MLAS_Q) + np.float32(0.5)
    return np.where(y < 0, np.float32(0), np.where(y > 1, np.float32(1), y)).astype(np.float64)


def _ort_activation(op: str, slot: str, act, x: np.ndarray) -> np.ndarray:
    """ONNX Runtime 1.32 CPU's activation ``act`` in one place of its kernels (ort_cpu=True).

    ``slot``: "f" (LSTM i, f, o; GRU z), "r" (GRU reset gate), "g" (LSTM candidate, GRU
    candidate), "h" (LSTM output). ORT's LSTM takes Sigmoid from MLAS, and Relu too in f and
    g; its GRU takes Sigmoid and Relu from MLAS for z, and Sigmoid and Tanh from its own tanh
    approximation for r and the candidate; its RNN and every other activation use the plain
    formulas of rnn_activation_functors.h, modelled by :func:`ortops.activations.apply` with
    ``ort_cpu=True``.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        mlas = op == "LSTM" and slot in ("f", "g") or op == "GRU" and slot == "f"
        if act.name == "Sigmoid" and (mlas or op == "LSTM"):
            return _ort_mlas_logistic(x)
        if act.name == "Relu" and mlas:
            # MLAS's Relu (MlasActivation): _mm_max_ps(0, x), i.e. 0 > x ? 0 : x, which keeps
            # NaN and -0. ORT's other Relus (LSTM h, GRU r and candidate, RNN) turn NaN into 0.
            return np.where(x < 0, 0.0, x)
        if op == "GRU" and slot in ("r", "g"):
            if act.name == "Tanh":
                return _ort_gru_tanh(x, 10.0).astype(np.float64)
            if act.name == "Sigmoid":
                t = _ort_gru_tanh(np.float32(0.5) * x.astype(np.float32), 10.0)
                return (np.float32(0.5) * (np.float32(1) + t)).astype(np.float64)
    return _act.apply(act, x, float32=True, ort_cpu=True)


class _Arith:
    """The arithmetic of one run: float64, with float32's range for a float32 or float16
    layer (every result beyond it is +-Inf, :func:`ortops.activations.float32_range`), and
    optionally ONNX Runtime CPU's special-value behaviour (``ort_cpu``)."""

    def __init__(self, spec: LayerSpec, float32: bool, ort_cpu: bool):
        self.spec = spec
        self.float32 = float32
        self.ort_cpu = ort_cpu
        self.r = _act.float32_range if float32 else (lambda x: x)

    def add(self, a, b):
        return self.r(a + b)

    def mul(self, a, b):
        return self.r(a * b)

    def dot(self, a, b):
        # a @ b.T; numpy's matmul propagates NaN and Inf (0 * Inf = NaN included).
        return self.r(a @ b.T)

    def act(self, act, x, slot="f"):
        if self.ort_cpu:
            return self.r(_ort_activation(self.spec.op, slot, act, x))
        return self.r(_act.apply(act, x, float32=self.float32))

    def clip(self, pre: np.ndarray) -> np.ndarray:
        spec = self.spec
        if self.ort_cpu and spec.op != "RNN":
            # ORT's LSTM and GRU (every cell but RNN) always clamp, at FLT_MAX without clip (so +-Inf become
            # +-FLT_MAX). With B, clip_add_bias does std::max(-c, std::min(c, x)), where
            # std::min(c, NaN) is c: a NaN becomes +c. Without B, compares: NaN passes.
            c = spec.clip if spec.clip is not None else _FLOAT32_MAX
            if spec.has_bias:
                m = np.where(pre < c, pre, c)
                return np.where(-c < m, m, -c)
            return np.where(pre > c, c, np.where(pre < -c, -c, pre))
        if spec.clip is None:
            return pre
        c = spec.clip
        # Explicit comparisons rather than np.clip so the NaN pass-through is visible.
        return np.where(pre > c, c, np.where(pre < -c, -c, pre))


@dataclass(frozen=True)
class _Weights:
    """One direction's weights: R, W's and R's biases, the peepholes, the activations."""

    R: np.ndarray
    Wb: np.ndarray
    Rb: np.ndarray
    P: Optional[np.ndarray]
    acts: tuple


def _lstm_step(ar: _Arith, x_t, h, c, w: _Weights):
    """One LSTM step of every row: (h, c) of the next step."""
    add, mul, act, clip = ar.add, ar.mul, ar.act, ar.clip
    spec, H, f = ar.spec, ar.spec.hidden_size, w.acts[0]
    pre = add(add(add(x_t, ar.dot(h, w.R)), w.Wb), w.Rb)
    pre_i, pre_o, pre_f, pre_c = (pre[:, k * H:(k + 1) * H] for k in range(4))
    if w.P is not None:
        pre_i = add(pre_i, mul(w.P[:H], c))
        pre_f = add(pre_f, mul(w.P[2 * H:], c))
    i = act(f, clip(pre_i))
    if spec.input_forget:
        fg = 1.0 - i
    else:
        fg = act(f, clip(pre_f))
    ct = act(w.acts[1], clip(pre_c), "g")
    c_new = add(mul(fg, c), mul(i, ct))
    if w.P is not None:
        pre_o = add(pre_o, mul(w.P[H:2 * H], c_new))
    o = act(f, clip(pre_o))
    return mul(o, act(w.acts[2], c_new, "h")), c_new


def _gru_step(ar: _Arith, x_t, h, c, w: _Weights):
    """One GRU step of every row (gates z, r, h; ``c`` passes through)."""
    add, mul, act, dot = ar.add, ar.mul, ar.act, ar.dot
    H, f = ar.spec.hidden_size, w.acts[0]
    Rz_r, Rh = w.R[: 2 * H], w.R[2 * H:]
    pre_zr = ar.clip(add(add(add(x_t[:, : 2 * H], dot(h, Rz_r)), w.Wb[: 2 * H]), w.Rb[: 2 * H]))
    z = act(f, pre_zr[:, :H])
    r = act(f, pre_zr[:, H:], "r")
    if ar.spec.linear_before_reset:
        pre_h = add(add(x_t[:, 2 * H:], mul(r, add(dot(h, Rh), w.Rb[2 * H:]))), w.Wb[2 * H:])
    else:
        pre_h = add(add(add(x_t[:, 2 * H:], dot(mul(r, h), Rh)), w.Wb[2 * H:]), w.Rb[2 * H:])
    ht = act(w.acts[1], ar.clip(pre_h), "g")
    return add(mul(1.0 - z, ht), mul(z, h)), c


def _rnn_step(ar: _Arith, x_t, h, c, w: _Weights):
    """One RNN step of every row (``c`` passes through)."""
    add = ar.add
    pre = add(add(add(x_t, ar.dot(h, w.R)), w.Wb), w.Rb)
    return ar.act(w.acts[0], ar.clip(pre)), c


#: The cell update of one step, per op: (arith, X·Wᵀ of the step, h, c, weights) -> (h, c).
_STEPS = {op: globals()[f"_{op.lower()}_step"] for op in vocabulary.OPS}


def _direction(spec: LayerSpec, d: int, X, W, R, B, P, h, c, lens, Y, ar: _Arith):
    """Run direction ``d`` over the sequence, writing its rows of ``Y``: its last (h, c)."""
    G, H = spec.gates, spec.hidden_size
    reverse = spec.direction == "reverse" or d == 1
    Wb, Rb = (B[d, : G * H], B[d, G * H:]) if B is not None else (np.zeros(G * H),) * 2
    w = _Weights(R[d], Wb, Rb, None if P is None else P[d], spec.activations[d])
    cell = _STEPS[spec.op]
    xw = ar.dot(X, W[d])  # [seq, batch, G*H]
    rows = np.arange(X.shape[1])
    for t in range(X.shape[0]):
        active = t < lens
        if not active.any():
            break
        # Each row walks its own valid prefix; inactive rows read a dummy step 0.
        step = np.where(active, (lens - 1 - t) if reverse else t, 0)
        h_new, c_new = cell(ar, xw[step, rows], h, c, w)
        h = np.where(active[:, None], h_new, h)
        c = np.where(active[:, None], c_new, c)
        Y[step[active], d, rows[active]] = h_new[active]
    return h, c


def _run(spec: LayerSpec, X, W, R, B, sequence_lens, initial_h, initial_c, P, ar: _Arith):
    """Run a checked layer; every array argument is float64 and in layout 0."""
    seq, batch, _ = X.shape
    D, H = spec.num_directions, spec.hidden_size
    Y = np.zeros((seq, D, batch, H))
    Y_h = np.zeros((D, batch, H))
    Y_c = np.zeros((D, batch, H))
    if batch == 0:
        return Y, Y_h, Y_c
    if seq == 0:
        if initial_h is not None:
            Y_h[...] = initial_h
        if initial_c is not None:
            Y_c[...] = initial_c
        return Y, Y_h, Y_c
    lens = np.full(batch, seq, dtype=np.int64) if sequence_lens is None else sequence_lens.astype(np.int64)
    ran = (lens > 0)[:, None]
    for d in range(D):
        h = np.zeros((batch, H)) if initial_h is None else initial_h[d].copy()
        c = np.zeros((batch, H)) if initial_c is None else initial_c[d].copy()
        h, c = _direction(spec, d, X, W, R, B, P, h, c, lens, Y, ar)
        Y_h[d] = np.where(ran, h, 0.0)
        Y_c[d] = np.where(ran, c, 0.0)
    return Y, Y_h, Y_c


def _layer(op, X, W, R, B, sequence_lens, initial_h, initial_c, P, *, ort_cpu=False, **attrs):
    spec = check_layer(op, W, R, B, P, allowed_dtypes=_DTYPES, **attrs)
    check_inputs(spec, X, sequence_lens, initial_h, initial_c)
    # A float32 or float16 layer is float32 arithmetic (the kernels, ORT): its range.
    ar = _Arith(spec, float32=spec.dtype != np.float64, ort_cpu=bool(ort_cpu))
    X, W, R, B, P = (_f64(a) for a in (X, W, R, B, P))
    initial_h, initial_c = _f64(initial_h), _f64(initial_c)
    if spec.layout == 1:
        X = X.transpose(1, 0, 2)
        initial_h = None if initial_h is None else initial_h.transpose(1, 0, 2)
        initial_c = None if initial_c is None else initial_c.transpose(1, 0, 2)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and Inf are values here
        Y, Y_h, Y_c = _run(spec, X, W, R, B, sequence_lens, initial_h, initial_c, P, ar)
    if spec.layout == 1:
        Y = Y.transpose(2, 0, 1, 3)
        Y_h = Y_h.transpose(1, 0, 2)
        Y_c = Y_c.transpose(1, 0, 2)
    # Contiguous copies so callers never hold views into the transposed buffers.
    return np.ascontiguousarray(Y), np.ascontiguousarray(Y_h), np.ascontiguousarray(Y_c)


def lstm(
    X,
    W,
    R,
    B=None,
    sequence_lens=None,
    initial_h=None,
    initial_c=None,
    P=None,
    *,
    hidden_size: Optional[int] = None,
    direction: str = "forward",
    layout: int = 0,
    activations: Optional[Sequence[str]] = None,
    activation_alpha: Optional[Sequence[float]] = None,
    activation_beta: Optional[Sequence[float]] = None,
    clip: Optional[float] = None,
    input_forget: int = 0,
    ort_cpu: bool = False,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ONNX LSTM in float64: returns ``(Y, Y_h, Y_c)`` as float64 arrays.

    Arguments and attributes are those of the ONNX operator (``None`` for an
    absent optional input); shapes are checked by
    :func:`ortops.validation.check_layer` / :func:`~ortops.validation.check_inputs`
    with float32, float16 or float64 inputs. See the module docstring for the
    semantics.
    """
    return _layer(
        "LSTM", X, W, R, B, sequence_lens, initial_h, initial_c, P,
        hidden_size=hidden_size, direction=direction, layout=layout,
        activations=activations, activation_alpha=activation_alpha,
        activation_beta=activation_beta, clip=clip, input_forget=input_forget,
        ort_cpu=ort_cpu,
    )


def gru(
    X,
    W,
    R,
    B=None,
    sequence_lens=None,
    initial_h=None,
    *,
    hidden_size: Optional[int] = None,
    direction: str = "forward",
    layout: int = 0,
    activations: Optional[Sequence[str]] = None,
    activation_alpha: Optional[Sequence[float]] = None,
    activation_beta: Optional[Sequence[float]] = None,
    clip: Optional[float] = None,
    linear_before_reset: int = 0,
    ort_cpu: bool = False,
) -> Tuple[np.ndarray, np.ndarray]:
    """ONNX GRU in float64: returns ``(Y, Y_h)`` as float64 arrays.

    Arguments and attributes are those of the ONNX operator (``None`` for an
    absent optional input); see :func:`lstm` and the module docstring.
    """
    Y, Y_h, _ = _layer(
        "GRU", X, W, R, B, sequence_lens, initial_h, None, None,
        hidden_size=hidden_size, direction=direction, layout=layout,
        activations=activations, activation_alpha=activation_alpha,
        activation_beta=activation_beta, clip=clip,
        linear_before_reset=linear_before_reset, ort_cpu=ort_cpu,
    )
    return Y, Y_h


def rnn(
    X,
    W,
    R,
    B=None,
    sequence_lens=None,
    initial_h=None,
    *,
    hidden_size: Optional[int] = None,
    direction: str = "forward",
    layout: int = 0,
    activations: Optional[Sequence[str]] = None,
    activation_alpha: Optional[Sequence[float]] = None,
    activation_beta: Optional[Sequence[float]] = None,
    clip: Optional[float] = None,
    ort_cpu: bool = False,
) -> Tuple[np.ndarray, np.ndarray]:
    """ONNX RNN in float64: returns ``(Y, Y_h)`` as float64 arrays.

    Arguments and attributes are those of the ONNX operator (``None`` for an
    absent optional input); see :func:`lstm` and the module docstring.
    """
    Y, Y_h, _ = _layer(
        "RNN", X, W, R, B, sequence_lens, initial_h, None, None,
        hidden_size=hidden_size, direction=direction, layout=layout,
        activations=activations, activation_alpha=activation_alpha,
        activation_beta=activation_beta, clip=clip, ort_cpu=ort_cpu,
    )
    return Y, Y_h
