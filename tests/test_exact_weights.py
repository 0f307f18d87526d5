"""Exact mode's R on the device (src/core/rnn/layer.cpp's exactR, glsl/exact.glsl's LOADR).

The exact step kernels read R (and the batched kernels' RB) as float32 words in both
precisions, prepared once at upload by the integer rules the kernels used to apply at every
load: a float16 element widened by half_to_float_'s rule, a float32 element with its
denormals flushed by ftz_'s. These tests hold the host's rules to a line-by-line transcription
of the GLSL functions on every half and on float32 edge patterns (so the kernels' bits cannot
have changed: tests/test_exact_digests.py checks that end to end), and check that an exact
layer's R really is float32 on the device, and a default-mode one's is not.
"""

from __future__ import annotations

import numpy as np
import pytest

from ortops import _vk


def half_to_float_(h: int) -> int:
    """glsl/exact.glsl's half_to_float_, on integers (returns the float32 bits)."""
    s = (h & 0x8000) << 16
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 0x1F:
        return s | 0x7F800000 | (m << 13)          # Inf, NaN
    if e != 0:
        return s | ((e + 112) << 23) | (m << 13)
    if m == 0:
        return s
    p = m.bit_length() - 1                         # findMSB
    return s | ((p + 103) << 23) | ((m << (23 - p)) & 0x7FFFFF)


def ftz_(u: int) -> int:
    """glsl/exact.glsl's ftz_, on the bits."""
    return u & 0x80000000 if u & 0x7F800000 == 0 else u


ALL_HALVES = np.arange(65536, dtype=np.uint32).astype(np.uint16)
WANT = np.array([half_to_float_(int(h)) for h in ALL_HALVES], dtype=np.uint32)


def test_every_half_widens_as_the_kernels_decoded_it():
    got = _vk.exact_r(ALL_HALVES.view(np.float16).reshape(2, 128, 256))
    assert got.dtype == np.uint32 and got.shape == (2, 128, 256)
    bad = np.nonzero(got.ravel() != WANT)[0]
    assert not len(bad), [(hex(int(ALL_HALVES[i])), hex(int(got.ravel()[i])), hex(int(WANT[i])))
                          for i in bad[:5]]
    # No widened half is a float32 denormal, so a flush (ftz_) on the load could change no bit.
    assert np.all(WANT == np.array([ftz_(int(u)) for u in WANT], dtype=np.uint32))
    # The rule's corners: subnormals become normal float32s, Inf and NaN keep sign and payload
    # (a signaling NaN stays signaling: no quiet bit is set).
    for h, bits in [(0x0001, 0x33800000), (0x03FF, 0x387FC000), (0x8001, 0xB3800000),
                    (0x7C00, 0x7F800000), (0xFC00, 0xFF800000), (0x7C01, 0x7F802000),
                    (0x7E00, 0x7FC00000), (0xFFFF, 0xFFFFE000), (0x8000, 0x80000000)]:
        assert WANT[h] == bits and got.ravel()[h] == bits


def test_numpy_widens_halves_the_same_way():
    # numpy's float16 -> float32 agrees bit for bit here (NaN payloads and signaling NaNs
    # included), so host tools that widen with numpy see the values the kernels use.
    np_bits = ALL_HALVES.view(np.float16).astype(np.float32).view(np.uint32)
    bad = np.nonzero(np_bits != WANT)[0]
    assert not len(bad), [(hex(int(ALL_HALVES[i])), hex(int(np_bits[i]))) for i in bad[:5]]


def test_float32_r_is_flushed_as_the_kernels_flushed_it():
    edge = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00400000, 0x00800000, 0x80800000,
            0x3F800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFFFFFFF,
            0x7FBFFFFF, 0x34000000]
    rng = np.random.default_rng(5)
    words = np.concatenate([np.array(edge, dtype=np.uint32),
                            rng.integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32),
                            rng.integers(0, 0x00800000, 1024, dtype=np.uint32)])   # denormals
    got = _vk.exact_r(words.view(np.float32))
    want = np.array([ftz_(int(u)) for u in words], dtype=np.uint32)
    assert np.array_equal(got, want)
    assert np.array_equal(got[:4], [0, 0x80000000, 0, 0x80000000])


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_exact_layer_keeps_r_as_float32_words(dtype):
    # The exact step kernels read R and RB as float32 words (LOADR): the device copies must
    # be float32-sized in both precisions; the default mode keeps the layer's dtype.
    import ortops

    hidden, inp, gates, dirs = 33, 5, 4, 2
    rng = np.random.default_rng(3)
    W = rng.uniform(-0.5, 0.5, (dirs, gates * hidden, inp)).astype(dtype)
    R = rng.uniform(-0.5, 0.5, (dirs, gates * hidden, hidden)).astype(dtype)
    from ortops import variants

    # The batch from which this hidden size runs the batched kernel (its R layout RB).
    X = rng.uniform(-1, 1, (4, variants.batched_from(hidden), inp)).astype(dtype)
    item = np.dtype(dtype).itemsize
    for mode, r_item in (("exact", 4), ("deterministic", item)):
        layer = ortops.RecurrentLayer("LSTM", W, R, direction="bidirectional", mode=mode)
        layer(X)
        sizes = dict(layer._native.weight_bytes())
        assert sizes["W"] == W.size * item
        assert sizes["R"] == R.size * r_item, (mode, sizes)
        if "RB" in sizes:
            assert sizes["RB"] == dirs * 32 * ((hidden + 31) // 32) * hidden * gates * r_item, (mode, sizes)
        assert mode != "exact" or "RB" in sizes, sizes
