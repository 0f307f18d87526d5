"""What the tests share about generated cases: the operators' tables (the package's one
table of cells, which tests/test_cells.py checks against ONNX's own schemas and the step
shader), stable seeds, activation parameter sets, a fake device and the bit comparison of two runs."""

import zlib

import numpy as np

from ortops import reference
from ortops.activations import ACTIVATIONS
from ortops.cells import CELLS
from ortops.device import Device
from ortops.visible import NVIDIA_VENDOR_ID

GATES = {op: c.gates for op, c in CELLS.items()}
SLOTS = {op: len(c.slots) for op, c in CELLS.items()}    # activation slots per direction
INPUTS = {op: c.inputs for op, c in CELLS.items()}
OUTPUTS = {op: c.outputs for op, c in CELLS.items()}
REFERENCE = {"LSTM": reference.lstm, "GRU": reference.gru, "RNN": reference.rnn}


def seed_of(*key) -> int:
    """A stable seed for a case's key (not Python's hash, which changes between processes), so
    that a failing case is drawn again the same way."""
    return zlib.crc32(repr(key).encode())


def layer_case(seed, op, direction, hidden, batch, dtype, seq, inp=11, zero_row=False):
    """A layer's inputs drawn from ``seed``: X, W, R, B, initial_h (and initial_c, P for an
    LSTM) in ``dtype``, weights uniform in +-1/sqrt(hidden), and int32 sequence lengths with
    row 0 whole; ``zero_row``: row 1 of length 0 where the batch has more than two rows."""
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    s = 1.0 / np.sqrt(hidden)
    arrays = dict(
        X=rng.standard_normal((seq, batch, inp)),
        W=rng.uniform(-s, s, (d, g * hidden, inp)),
        R=rng.uniform(-s, s, (d, g * hidden, hidden)),
        B=rng.uniform(-s, s, (d, 2 * g * hidden)),
        initial_h=rng.uniform(-1, 1, (d, batch, hidden)),
    )
    if op == "LSTM":
        arrays["initial_c"] = rng.uniform(-1, 1, (d, batch, hidden))
        arrays["P"] = rng.uniform(-s, s, (d, 3 * hidden))
    arrays = {k: v.astype(dtype) for k, v in arrays.items()}
    lens = rng.integers(0, seq + 1, batch).astype(np.int32)
    lens[0] = seq
    if zero_row and batch > 2:
        lens[1] = 0                       # a row of length 0: Y_h = Y_c = 0
    return arrays, lens


# (alpha, beta) of the activations that take them, chosen for pre-activations of about +-1:
# ThresholdedRelu's threshold and HardSigmoid's linear range lie inside that range (the
# defaults would make ThresholdedRelu a Relu and Affine zero). activation_params shifts them
# per position so each slot's value is distinct.
ACT_PARAMS = {
    "Affine": (0.7, 0.2),
    "LeakyRelu": (0.15, None),
    "ThresholdedRelu": (0.12, None),
    "ScaledTanh": (1.3, 0.8),
    "HardSigmoid": (0.35, 0.45),
    "Elu": (0.8, None),
}


def activation_params(names):
    """activation_alpha, activation_beta for ``names``, one value per consumer, in order."""
    alphas, betas = [], []
    for k, name in enumerate(names):
        alpha, beta = ACT_PARAMS.get(name, (None, None))
        if alpha is not None:
            alphas.append(alpha + 0.01 * k)
        if beta is not None:
            betas.append(beta - 0.01 * k)
    return alphas, betas


def rotation(op, shift, sets):
    """Activation names starting at ACTIVATIONS[shift]: one set (``sets`` = 1) used for both
    directions, or a forward set and a different reverse set. Over shift = 0..10 every
    activation lands in every slot of both directions."""
    n = SLOTS[op] * sets
    return [ACTIVATIONS[(shift + k) % len(ACTIVATIONS)] for k in range(n)]


#: A plausible discrete GPU's description (an H200's limits), for tests of device handling
#: that need no Vulkan device; ``fake_device(**fields)`` overrides any field.
FAKE_DEVICE = dict(index=0, name="NVIDIA H200", type="discrete", driver="NVIDIA", driver_info="580",
                   api_version="1.4.312", vendor_id=NVIDIA_VENDOR_ID, device_id=0x2335,
                   max_storage_buffer_range=1 << 32, max_workgroup_size=(1024, 1024, 64),
                   max_workgroup_invocations=1024, max_workgroup_count=(2**31 - 1, 65535, 65535),
                   max_shared_memory=49152, max_push_constants_size=256, subgroup_size=32,
                   float16=True, float64=True, nan_preserve_float16=True, nan_preserve_float32=True,
                   denorm_preserve_float32=True, denorm_flush_float32=True, timestamp_period_ns=1.0,
                   timestamps=True, subgroup_size_range=(32, 32))


def fake_device(**fields) -> Device:
    return Device(**{**FAKE_DEVICE, **fields})


def same_bits(a, b) -> bool:
    """Whether two runs' outputs (sequences of arrays) are the same, bit for bit: as many
    arrays, each of the same dtype, shape and bytes."""
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                                    for x, y in zip(a, b))


def max_difference(a, b) -> float:
    """The largest absolute difference between two runs' outputs (for a failure message)."""
    return max((float(np.abs(x.astype(np.float64) - y).max()) for x, y in zip(a, b)
                if x.shape == y.shape and x.size), default=0.0)
