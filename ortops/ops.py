"""The functional API: ``ortops.lstm``, ``ortops.gru``, ``ortops.rnn``.

Each call builds a :class:`ortops.RecurrentLayer` (uploading the weights) and runs it once;
for repeated calls with the same weights, keep a RecurrentLayer instead. ``mode`` is
"deterministic" (default) or "exact" (the same bits on every Vulkan device, docs/exact.md).
"""

from __future__ import annotations

from typing import cast

from ortops._typing import Array, ArrayIn, DeviceSpec, Floats, Names
from ortops.layer import RecurrentLayer


def lstm(X: ArrayIn, W: ArrayIn, R: ArrayIn, B: ArrayIn | None = None,
         sequence_lens: ArrayIn | None = None, initial_h: ArrayIn | None = None,
         initial_c: ArrayIn | None = None, P: ArrayIn | None = None, *,
         hidden_size: int | None = None, direction: str = "forward", layout: int = 0,
         activations: Names = None, activation_alpha: Floats = None,
         activation_beta: Floats = None, clip: float | None = None, input_forget: int = 0,
         device: DeviceSpec = None, mode: str | None = None) -> tuple[Array, Array, Array]:
    """ONNX LSTM on the GPU; returns (Y, Y_h, Y_c) in the input's dtype (float32 or float16).

    Gate order i, o, f, c; P is [dirs, 3 * hidden] in the order i, o, f. Semantics follow
    ONNX Runtime's CPU kernel (see ortops.reference for the points the specification leaves
    open); layout 1 and float16, which stock ORT CPU refuses, are supported.
    """
    layer = RecurrentLayer("LSTM", W, R, B, P, hidden_size=hidden_size, direction=direction,
                           layout=layout, activations=activations,
                           activation_alpha=activation_alpha, activation_beta=activation_beta,
                           clip=clip, input_forget=input_forget, device=device, mode=mode)
    return cast("tuple[Array, Array, Array]", layer(X, sequence_lens, initial_h, initial_c))


def gru(X: ArrayIn, W: ArrayIn, R: ArrayIn, B: ArrayIn | None = None,
        sequence_lens: ArrayIn | None = None, initial_h: ArrayIn | None = None, *,
        hidden_size: int | None = None, direction: str = "forward", layout: int = 0,
        activations: Names = None, activation_alpha: Floats = None,
        activation_beta: Floats = None, clip: float | None = None,
        linear_before_reset: int = 0, device: DeviceSpec = None,
        mode: str | None = None) -> tuple[Array, Array]:
    """ONNX GRU on the GPU; returns (Y, Y_h) in the input's dtype. Gate order z, r, h."""
    layer = RecurrentLayer("GRU", W, R, B, hidden_size=hidden_size, direction=direction,
                           layout=layout, activations=activations,
                           activation_alpha=activation_alpha, activation_beta=activation_beta,
                           clip=clip, linear_before_reset=linear_before_reset, device=device, mode=mode)
    return cast("tuple[Array, Array]", layer(X, sequence_lens, initial_h))


def rnn(X: ArrayIn, W: ArrayIn, R: ArrayIn, B: ArrayIn | None = None,
        sequence_lens: ArrayIn | None = None, initial_h: ArrayIn | None = None, *,
        hidden_size: int | None = None, direction: str = "forward", layout: int = 0,
        activations: Names = None, activation_alpha: Floats = None,
        activation_beta: Floats = None, clip: float | None = None,
        device: DeviceSpec = None,
        mode: str | None = None) -> tuple[Array, Array]:
    """ONNX RNN on the GPU; returns (Y, Y_h) in the input's dtype."""
    layer = RecurrentLayer("RNN", W, R, B, hidden_size=hidden_size, direction=direction,
                           layout=layout, activations=activations,
                           activation_alpha=activation_alpha, activation_beta=activation_beta,
                           clip=clip, device=device, mode=mode)
    return cast("tuple[Array, Array]", layer(X, sequence_lens, initial_h))
