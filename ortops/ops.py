"""The functional API: ``ortops.lstm``, ``ortops.gru``, ``ortops.rnn``.

Each call builds a :class:`ortops.RecurrentLayer` (uploading the weights) and runs it once;
for repeated calls with the same weights, keep a RecurrentLayer instead. ``mode`` is
"deterministic" (default) or "exact" (the same bits on every Vulkan device, docs/exact.md).
"""

from __future__ import annotations

from ortops.layer import RecurrentLayer


def lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *,
         hidden_size=None, direction="forward", layout=0, activations=None,
         activation_alpha=None, activation_beta=None, clip=None, input_forget=0, device=None, mode=None):
    """ONNX LSTM on the GPU; returns (Y, Y_h, Y_c) in the input's dtype (float32 or float16).

    Gate order i, o, f, c; P is [dirs, 3 * hidden] in the order i, o, f. Semantics follow
    ONNX Runtime's CPU kernel (see ortops.reference for the points the specification leaves
    open); layout 1 and float16, which stock ORT CPU refuses, are supported.
    """
    layer = RecurrentLayer("LSTM", W, R, B, P, hidden_size=hidden_size, direction=direction,
                           layout=layout, activations=activations,
                           activation_alpha=activation_alpha, activation_beta=activation_beta,
                           clip=clip, input_forget=input_forget, device=device, mode=mode)
    return layer(X, sequence_lens, initial_h, initial_c)


def gru(X, W, R, B=None, sequence_lens=None, initial_h=None, *, hidden_size=None,
        direction="forward", layout=0, activations=None, activation_alpha=None,
        activation_beta=None, clip=None, linear_before_reset=0, device=None, mode=None):
    """ONNX GRU on the GPU; returns (Y, Y_h) in the input's dtype. Gate order z, r, h."""
    layer = RecurrentLayer("GRU", W, R, B, hidden_size=hidden_size, direction=direction,
                           layout=layout, activations=activations,
                           activation_alpha=activation_alpha, activation_beta=activation_beta,
                           clip=clip, linear_before_reset=linear_before_reset, device=device, mode=mode)
    return layer(X, sequence_lens, initial_h)


def rnn(X, W, R, B=None, sequence_lens=None, initial_h=None, *, hidden_size=None,
        direction="forward", layout=0, activations=None, activation_alpha=None,
        activation_beta=None, clip=None, device=None, mode=None):
    """ONNX RNN on the GPU; returns (Y, Y_h) in the input's dtype."""
    layer = RecurrentLayer("RNN", W, R, B, hidden_size=hidden_size, direction=direction,
                           layout=layout, activations=activations,
                           activation_alpha=activation_alpha, activation_beta=activation_beta,
                           clip=clip, device=device, mode=mode)
    return layer(X, sequence_lens, initial_h)
