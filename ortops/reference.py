"""Float64 numpy reference for the ONNX recurrent operators LSTM, GRU and RNN.

Written from the operator definitions (ONNX Operators.md) and the semantics
settled in seed 001, with the same signatures as the public GPU API. Inputs
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
  absent), as seed 001 settles, even when sequence_lens (necessarily all 0)
  is given. ORT 1.32 CPU differs: its LSTM and RNN return Y_h = 0 whatever the
  initial state (LSTM's Y_c was seen to hold uninitialised memory), and its GRU
  aborts the process.
* batch_size = 0: every output is empty. ORT 1.32 CPU's RNN agrees; its LSTM
  and GRU abort the process.
* layout = 1: X [batch, seq, input], initial states and Y_h / Y_c [batch,
  num_directions, hidden], Y [batch, seq, num_directions, hidden]. ORT's CPU
  kernels refuse layout 1; the result is the layout-0 result transposed.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from . import activations as _act
from .validation import LayerSpec, check_inputs, check_layer

__all__ = ["lstm", "gru", "rnn"]

_DTYPES = (np.float32, np.float16, np.float64)


def _f64(a) -> Optional[np.ndarray]:
    return None if a is None else np.asarray(a, dtype=np.float64)


def _clip(spec: LayerSpec, pre: np.ndarray) -> np.ndarray:
    if spec.clip is None:
        return pre
    c = spec.clip
    # Explicit comparisons rather than np.clip so the NaN pass-through is visible.
    return np.where(pre > c, c, np.where(pre < -c, -c, pre))


def _run(spec: LayerSpec, X, W, R, B, sequence_lens, initial_h, initial_c, P):
    """Run a checked layer; every array argument is float64 and in layout 0."""
    seq, batch, _ = X.shape
    D, H, G = spec.num_directions, spec.hidden_size, spec.gates
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
    rows = np.arange(batch)

    for d in range(D):
        reverse = spec.direction == "reverse" or d == 1
        acts = spec.activations[d]
        f = acts[0]
        Wd, Rd = W[d], R[d]
        if B is not None:
            Wb, Rb = B[d, : G * H], B[d, G * H:]
        else:
            Wb = Rb = np.zeros(G * H)
        xw = X @ Wd.T  # [seq, batch, G*H]
        h = np.zeros((batch, H)) if initial_h is None else initial_h[d].copy()
        c = np.zeros((batch, H)) if initial_c is None else initial_c[d].copy()
        if P is not None:
            Pi, Po, Pf = P[d, :H], P[d, H:2 * H], P[d, 2 * H:]

        for t in range(seq):
            active = t < lens
            if not active.any():
                break
            # Each row walks its own valid prefix; inactive rows read a dummy step 0.
            step = np.where(active, (lens - 1 - t) if reverse else t, 0)
            x_t = xw[step, rows]  # [batch, G*H]

            if spec.op == "LSTM":
                pre = ((x_t + h @ Rd.T) + Wb) + Rb
                pre_i, pre_o, pre_f, pre_c = (pre[:, k * H:(k + 1) * H] for k in range(4))
                if P is not None:
                    pre_i = pre_i + Pi * c
                    pre_f = pre_f + Pf * c
                i = _act.apply(f, _clip(spec, pre_i))
                if spec.input_forget:
                    fg = 1.0 - i
                else:
                    fg = _act.apply(f, _clip(spec, pre_f))
                ct = _act.apply(acts[1], _clip(spec, pre_c))
                c_new = fg * c + i * ct
                if P is not None:
                    pre_o = pre_o + Po * c_new
                o = _act.apply(f, _clip(spec, pre_o))
                h_new = o * _act.apply(acts[2], c_new)
                c = np.where(active[:, None], c_new, c)
            elif spec.op == "GRU":
                Rz_r = Rd[: 2 * H]
                Rh = Rd[2 * H:]
                pre_zr = ((x_t[:, : 2 * H] + h @ Rz_r.T) + Wb[: 2 * H]) + Rb[: 2 * H]
                zr = _act.apply(f, _clip(spec, pre_zr))
                z, r = zr[:, :H], zr[:, H:]
                if spec.linear_before_reset:
                    pre_h = (x_t[:, 2 * H:] + r * (h @ Rh.T + Rb[2 * H:])) + Wb[2 * H:]
                else:
                    pre_h = ((x_t[:, 2 * H:] + (r * h) @ Rh.T) + Wb[2 * H:]) + Rb[2 * H:]
                ht = _act.apply(acts[1], _clip(spec, pre_h))
                h_new = (1.0 - z) * ht + z * h
            else:
                pre = ((x_t + h @ Rd.T) + Wb) + Rb
                h_new = _act.apply(f, _clip(spec, pre))

            h = np.where(active[:, None], h_new, h)
            Y[step[active], d, rows[active]] = h_new[active]

        ran = (lens > 0)[:, None]
        Y_h[d] = np.where(ran, h, 0.0)
        Y_c[d] = np.where(ran, c, 0.0)
    return Y, Y_h, Y_c


def _layer(op, X, W, R, B, sequence_lens, initial_h, initial_c, P, **attrs):
    spec = check_layer(op, W, R, B, P, allowed_dtypes=_DTYPES, **attrs)
    check_inputs(spec, X, sequence_lens, initial_h, initial_c)
    X, W, R, B, P = (_f64(a) for a in (X, W, R, B, P))
    initial_h, initial_c = _f64(initial_h), _f64(initial_c)
    if spec.layout == 1:
        X = X.transpose(1, 0, 2)
        initial_h = None if initial_h is None else initial_h.transpose(1, 0, 2)
        initial_c = None if initial_c is None else initial_c.transpose(1, 0, 2)
    Y, Y_h, Y_c = _run(spec, X, W, R, B, sequence_lens, initial_h, initial_c, P)
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
        linear_before_reset=linear_before_reset,
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
) -> Tuple[np.ndarray, np.ndarray]:
    """ONNX RNN in float64: returns ``(Y, Y_h)`` as float64 arrays.

    Arguments and attributes are those of the ONNX operator (``None`` for an
    absent optional input); see :func:`lstm` and the module docstring.
    """
    Y, Y_h, _ = _layer(
        "RNN", X, W, R, B, sequence_lens, initial_h, None, None,
        hidden_size=hidden_size, direction=direction, layout=layout,
        activations=activations, activation_alpha=activation_alpha,
        activation_beta=activation_beta, clip=clip,
    )
    return Y, Y_h
