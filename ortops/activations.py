"""Activation functions of the ONNX recurrent operators (RNN, GRU, LSTM).

One module shared by the float64 reference and the GPU kernels, so that both
resolve ``activations`` / ``activation_alpha`` / ``activation_beta`` the same
way. The index of a name in :data:`ACTIVATIONS` is the code the GPU shaders
switch on; do not reorder it.

Resolution rules (checked against ONNX Runtime 1.32 CPU by running it, see
``tests/test_reference.py`` and ``tests/test_validation.py``):

* Names match case-insensitively. ORT's LSTM and GRU do the same; ORT's RNN
  only accepts the canonical spelling (``"tanh"`` is refused there). We accept
  every spelling for all three.
* ``activation_alpha`` and ``activation_beta`` are read in activation order over
  the whole list as given (forward set, then reverse set), with separate
  cursors: only an activation that takes a parameter consumes a value from
  that parameter's list. Affine, ScaledTanh and HardSigmoid take alpha and
  beta; LeakyRelu, ThresholdedRelu and Elu take alpha only. Values left over
  at the end are ignored (ORT ignores them too).
* A parameter with no value left gets ORT's default (docs/design.md, 'Activations':
  here we follow ORT, not the semantics note the project started from): its defaults are LeakyRelu alpha 0.01, HardSigmoid 0.2 / 0.5, Elu
  alpha 1.0, and **0.0 for everything else**, i.e. ThresholdedRelu's
  threshold is 0 (not 1), Affine is ``0 * x + 0`` (not ``1 * x + 0``) and
  ScaledTanh is ``0 * tanh(0 * x)`` (not ``1 * tanh(0 * x)``). We match ORT.
* A bidirectional layer may list one set (used for both directions, its
  alpha/beta values consumed once) or two sets (forward, then reverse). ORT
  1.32 refuses one set for a bidirectional layer of any of the three
  operators ("activations.size() == num_directions * N was false"); accepting
  it is our extension, as docs/design.md ('Activations') specifies.
* ORT's RNN also accepts two names for a single-direction layer (a leftover of
  the old spec default "Tanh, Tanh") and uses the first; we do the same. Unlike
  ORT we still require the second name to be a known activation.
* alpha and beta are stored as the float32 value an ONNX float attribute
  holds, so that the reference, the GPU kernels and ORT compare the same
  thresholds (ThresholdedRelu at 0.1 is not the same test in float32 and
  float64).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from . import _tables
from .cells import CELLS, cell

__all__ = [
    "ACTIVATIONS",
    "DEFAULT_ACTIVATIONS",
    "SLOTS",
    "Activation",
    "resolve_activations",
    "apply",
    "float32_range",
]

#: The activations by shader code (the native core's table, src/core/config/activations.hpp, through
#: the generated ortops/_tables.py).
ACTIVATIONS: Tuple[str, ...] = tuple(row[0] for row in _tables.ACTIVATIONS)

# Number of activation slots per direction (LSTM f, g, h; GRU f, g; RNN f) and ONNX's
# default activations: views of ortops.cells.CELLS.
SLOTS = {name: len(c.slots) for name, c in CELLS.items()}

DEFAULT_ACTIVATIONS = {name: c.default_activations for name, c in CELLS.items()}

_SLOT_NAMES = {name: ", ".join(c.slots) for name, c in CELLS.items()}

_CANONICAL = {name.lower(): name for name in ACTIVATIONS}

# (takes alpha, takes beta), as in ORT's rnn_helpers NameToArgUsageMap, and ORT's defaults
# (every parameter not listed defaults to 0.0): the native table's.
_PARAMETERS = {name: (alpha, beta) for name, alpha, beta, _, _ in _tables.ACTIVATIONS if alpha or beta}
_DEFAULTS = {name: (a, b) for name, _, _, a, b in _tables.ACTIVATIONS if a or b}


def _f32(value: float) -> float:
    return float(np.float32(value))


@dataclass(frozen=True)
class Activation:
    """One resolved activation: canonical ``name`` and its ``alpha``/``beta``.

    Parameters that the activation does not take are 0.0.
    """

    name: str
    alpha: float = 0.0
    beta: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in ACTIVATIONS:
            raise ValueError(
                f"Activation: name must be one of {', '.join(ACTIVATIONS)}, got {self.name!r}"
            )

    @property
    def code(self) -> int:
        """Index of the name in :data:`ACTIVATIONS` (the code used by the GPU shaders)."""
        return ACTIVATIONS.index(self.name)

    @property
    def takes_alpha(self) -> bool:
        """Whether the activation reads ``alpha``."""
        return _PARAMETERS.get(self.name, (False, False))[0]

    @property
    def takes_beta(self) -> bool:
        """Whether the activation reads ``beta``."""
        return _PARAMETERS.get(self.name, (False, False))[1]


def _as_float_list(op: str, argument: str, values) -> list:
    if values is None:
        return []
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{op}: {argument} must be a list of numbers, got {values!r}")
    try:
        out = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(
            f"{op}: {argument} must be a list of numbers, got {values!r}"
        ) from None
    return [_f32(v) for v in out]


def _canonical_name(op: str, index: int, name) -> str:
    if isinstance(name, bytes):
        # ONNX string attributes arrive as bytes through onnx.helper.
        name = name.decode("utf-8", errors="replace")
    if not isinstance(name, str) or name.lower() not in _CANONICAL:
        raise ValueError(
            f"{op}: activations[{index}] must be one of {', '.join(ACTIVATIONS)} "
            f"(case-insensitive), got {name!r}"
        )
    return _CANONICAL[name.lower()]


def resolve_activations(
    op: str,
    num_directions: int,
    activations: Optional[Sequence[str]] = None,
    activation_alpha: Optional[Sequence[float]] = None,
    activation_beta: Optional[Sequence[float]] = None,
) -> Tuple[Tuple[Activation, ...], ...]:
    """Resolve the activation attributes of one recurrent layer.

    Returns one tuple per direction (forward first), each with 3 entries for
    LSTM (f, g, h), 2 for GRU (f, g) and 1 for RNN (f). ``activations`` of
    ``None`` or an empty list means the ONNX defaults (LSTM Sigmoid, Tanh,
    Tanh; GRU Sigmoid, Tanh; RNN Tanh); a single string is taken as a list of
    one name. See the module docstring for how alpha/beta are consumed and
    what their defaults are. Raises ValueError naming the operator and the
    argument.
    """
    cell(op)   # ValueError for an unknown op
    if num_directions not in (1, 2) or isinstance(num_directions, bool):
        raise ValueError(f"{op}: num_directions must be 1 or 2, got {num_directions!r}")
    slots = SLOTS[op]
    alphas = _as_float_list(op, "activation_alpha", activation_alpha)
    betas = _as_float_list(op, "activation_beta", activation_beta)

    if activations is None:
        names = []
    elif isinstance(activations, (str, bytes)):
        names = [activations]
    else:
        names = list(activations)
    if not names:
        names = list(DEFAULT_ACTIVATIONS[op])
    names = [_canonical_name(op, i, n) for i, n in enumerate(names)]

    allowed = [slots, slots * num_directions]
    if op == "RNN" and num_directions == 1:
        allowed.append(2)
    if len(names) not in allowed:
        if num_directions == 2:
            expected = (f"{slots} names ({_SLOT_NAMES[op]}; used for both directions) or "
                        f"{2 * slots} (forward then reverse) for a bidirectional layer")
        elif op == "RNN":
            expected = "1 name (f; 2 are accepted and the first used, as ORT does) for one direction"
        else:
            expected = f"{slots} names ({_SLOT_NAMES[op]}) for one direction"
        raise ValueError(f"{op}: activations must list {expected}, got {len(names)}: {names}")

    alpha_cursor = 0
    beta_cursor = 0
    resolved = []
    for name in names:
        takes_alpha, takes_beta = _PARAMETERS.get(name, (False, False))
        default_alpha, default_beta = _DEFAULTS.get(name, (0.0, 0.0))
        alpha = beta = 0.0
        if takes_alpha:
            if alpha_cursor < len(alphas):
                alpha = alphas[alpha_cursor]
                alpha_cursor += 1
            else:
                alpha = _f32(default_alpha)
        if takes_beta:
            if beta_cursor < len(betas):
                beta = betas[beta_cursor]
                beta_cursor += 1
            else:
                beta = _f32(default_beta)
        resolved.append(Activation(name, alpha, beta))

    if len(resolved) == 2 and slots == 1 and num_directions == 1:
        resolved = resolved[:1]
    if len(resolved) == slots:
        return tuple(tuple(resolved) for _ in range(num_directions))
    return tuple(tuple(resolved[d * slots:(d + 1) * slots]) for d in range(num_directions))


_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_TINY = float(np.finfo(np.float32).smallest_subnormal)


def float32_range(x) -> np.ndarray:
    """``x`` (float64) with every value outside float32's range made what float32 makes it.

    A value whose rounding to float32 overflows (|x| >= 2**128 * (1 - 2**-25)) becomes the
    infinity of its sign, and one that rounds to zero (|x| <= 2**-150, below half the smallest
    denormal) the zero of its sign, as the same operation in float32 arithmetic would give on
    every device; every other value, NaN and float32's denormal range included, is returned
    unchanged, in full float64 precision. The reference applies it after each operation of a
    float32 or float16 layer, so that it overflows and underflows where the float32 arithmetic
    of the kernels and of ONNX Runtime does (docs/special_values.md).
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        a = np.abs(x)
        out = (a > _FLOAT32_MAX) | ((a < _FLOAT32_TINY) & (a > 0))
        if not out.any():
            return x
        rounded = x.astype(np.float32).astype(np.float64)
    return np.where(out & (np.isinf(rounded) | (rounded == 0)), rounded, x)


def _keep(x):
    return x


def apply(act: Activation, x, *, float32: bool = False, ort_cpu: bool = False) -> np.ndarray:
    """Evaluate ``act`` on ``x`` in float64 and return a new float64 array.

    Definitions (docs/design.md, 'Activations'): Affine alpha*x+beta; LeakyRelu x<0 ? alpha*x : x;
    ThresholdedRelu x>alpha ? x : 0; ScaledTanh alpha*tanh(beta*x);
    HardSigmoid min(1, max(0, alpha*x+beta)); Elu x>=0 ? x : alpha*(exp(x)-1);
    Softsign x/(1+|x|); Softplus log(1+exp(x)) evaluated without overflow;
    Sigmoid 1/(1+exp(-x)) without overflow. Each is its exact value rounded once:
    no intermediate overflows (Softplus(100) is 100), and +-Inf give the limits
    (Sigmoid 1 / 0, Tanh +-1, Softplus Inf / 0, Elu Inf / -alpha, ScaledTanh
    +-alpha, HardSigmoid 1 / 0), except Softsign, whose x/(1+|x|) is Inf/Inf =
    NaN there, as in ONNX Runtime. A NaN input gives NaN except where a
    definition's comparison sends it to a constant branch (ThresholdedRelu:
    ``NaN > alpha`` is false, so 0). Relu and HardSigmoid keep NaN (max and min
    propagate it, as IEEE 754-2019 maximum/minimum, numpy and docs/design.md do) and
    give +0 for -0 (+0 is the larger zero there). ``tanh(-0)`` and the other odd
    functions of -0 give -0.

    ``float32=True`` (a float32 or float16 layer): an intermediate outside
    float32's range is what float32 arithmetic makes it, +-Inf or +-0
    (:func:`float32_range`).

    ``ort_cpu=True`` models where ONNX Runtime 1.32 CPU differs on special
    values (docs/special_values.md; ortops does not follow it): its Relu and
    HardSigmoid give 0 for NaN (``std::max(0.0f, x)``), and its Softplus is
    log(1 + exp(x)) evaluated in float32, +Inf once exp(x) overflows (x >
    88.72). For finite inputs in range ORT and this function agree to float32
    rounding (tests/test_reference.py).
    """
    x = np.array(x, dtype=np.float64)
    rnd = float32_range if float32 else _keep
    name = act.name
    a = act.alpha
    b = act.beta
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and Inf in, NaN and Inf out
        if name == "Sigmoid":
            # exp of -|x| never overflows; pick the algebraically equal form per sign.
            e = np.exp(-np.abs(x))
            return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        if name == "Tanh":
            return np.tanh(x)
        if name == "Relu":
            if ort_cpu:
                return np.where(x > 0, x, 0.0)
            # max(0, x) as IEEE 754-2019 maximum: NaN passes (x <= 0 is false for it), and
            # -0 gives +0 (+0 is the larger zero), so a Relu never outputs -0.
            return np.where(x <= 0, 0.0, x)
        if name == "Affine":
            return rnd(rnd(a * x) + b)
        if name == "LeakyRelu":
            return np.where(x < 0, rnd(a * x), x)
        if name == "ThresholdedRelu":
            return np.where(x > a, x, 0.0)
        if name == "ScaledTanh":
            return a * np.tanh(rnd(b * x))
        if name == "HardSigmoid":
            y = rnd(rnd(a * x) + b)
            if ort_cpu:
                # std::min(1.0f, std::max(0.0f, y)): a NaN fails both compares and gives 0.
                m = np.where(y > 0, y, 0.0)
                return np.where(m < 1, m, 1.0)
            # min(1, max(0, y)) as IEEE 754-2019 maximum/minimum: NaN passes, -0 gives +0.
            return np.where(y <= 0, 0.0, np.where(y > 1, 1.0, y))
        if name == "Elu":
            # Only the negative branch needs exp; clamping keeps exp from overflowing there.
            return np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0.0)))
        if name == "Softsign":
            return x / (1.0 + np.abs(x))
        if name == "Softplus":
            if ort_cpu:
                # log(1 + exp(x)) evaluated in float32: +Inf once exp(x) overflows (x > 88.72),
                # and exactly 0 once exp(x) is below half an ulp of 1 (x < -16.6).
                x32 = x.astype(np.float32)
                return np.log(np.float32(1) + np.exp(x32)).astype(np.float64)
            return np.logaddexp(0.0, x)
    raise AssertionError(f"unhandled activation {name}")  # Activation.__post_init__ forbids this
