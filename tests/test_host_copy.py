"""The host copies of buffer writes and reads (src/core/vk/hostcopy.hpp): several threads per
copy above a threshold, the same bytes as one memcpy, safe from several Python threads at once."""

import threading

import numpy as np
import pytest

from ortops import _vk
from ortops.device import context


@pytest.fixture
def settings():
    """Set host copy settings for one test; the defaults come back after it."""
    before = _vk.copy_settings()
    yield lambda **kw: _vk.copy_settings(**kw)
    _vk.copy_settings(**before)


def _bytes(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


# Chunk of an odd size, so that chunk boundaries fall at every alignment; 4 threads on the
# 2-core machine, so helpers and caller interleave.
CHUNK = 4099
SIZES = [0, 1, 7, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK - 1, 2 * CHUNK, 2 * CHUNK + 1,
         3 * CHUNK + 5, 7 * CHUNK, 7 * CHUNK + 1, 64 * CHUNK + 3]


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "thread-per-call"])
def test_settings_round_trip_and_clamp(settings, pool):
    got = settings(chunk=CHUNK, threads=4, pool=pool)
    assert got == {"chunk": CHUNK, "threads": 4, "pool": pool}
    assert settings(threads=0)["threads"] == 1
    assert settings(chunk=0)["chunk"] == 1
    assert settings(threads=1000)["threads"] == 64


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "thread-per-call"])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_host_copy_gives_identical_bytes(settings, pool, offset):
    settings(chunk=CHUNK, threads=4, pool=pool)
    for n in SIZES:
        src_all = _bytes(n + offset, seed=n)
        dst_all = np.zeros(n + 2 * offset + 1, np.uint8)
        src = src_all[offset:]                 # unaligned source and target
        dst = dst_all[offset:offset + n]
        _vk.host_copy(dst, src)
        assert np.array_equal(dst, src), n
        # Nothing outside the target was written.
        assert not dst_all[:offset].any() and not dst_all[offset + n:].any(), n


def test_host_copy_float16_at_the_default_threshold(settings):
    """Default settings: below two chunks one memcpy, from there the threads."""
    chunk = _vk.copy_settings()["chunk"]
    for items in (chunk - 1, chunk, chunk + 1, 3 * chunk // 2 + 7):   # 2 bytes an item
        src = np.random.default_rng(items).standard_normal(items).astype(np.float16)
        src[::97] = np.nan
        dst = np.empty_like(src)
        _vk.host_copy(dst, src)
        assert dst.tobytes() == src.tobytes(), items


def test_forked_child_copies_with_a_pool_of_its_own(settings):
    """The parent's pool threads do not exist in a forked child: the child makes its own."""
    import os

    settings(chunk=CHUNK, threads=4, pool=True)
    src = _bytes(50 * CHUNK)
    _vk.host_copy(np.empty_like(src), src)          # the parent's pool exists now
    pid = os.fork()
    if pid == 0:                                     # the child: exit status 0 if the bytes agree
        import signal

        signal.alarm(20)                             # a hang fails the test instead of stalling it
        dst = np.empty_like(src)
        _vk.host_copy(dst, src)
        os._exit(0 if np.array_equal(dst, src) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_host_copy_refuses_mismatch_and_strides():
    a = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="equal sizes, got 64 bytes into 32"):
        _vk.host_copy(np.zeros(8, np.float32), a)
    with pytest.raises(ValueError, match="C-contiguous"):
        _vk.host_copy(np.zeros(8, np.float32), a[::2])


@pytest.mark.parametrize("kind", ["device", "host"])
def test_buffer_write_and_read_round_trip(settings, kind):
    """Memory::write and ::read through the threads, at byte offsets, float16 data."""
    settings(chunk=CHUNK, threads=4)
    _, ctx = context()
    total = 70 * CHUNK
    buf = ctx.buffer(total, "device") if kind == "device" else ctx.host_buffer(total)
    for n_items, offset in ((CHUNK, 0), (CHUNK + 1, 6), (2 * CHUNK + 3, 2), (30 * CHUNK + 1, 10)):
        data = np.random.default_rng(n_items).standard_normal(n_items).astype(np.float16)
        buf.write(data, offset)
        back = np.empty_like(data)
        buf.read(back, offset)
        assert back.tobytes() == data.tobytes(), (n_items, offset)
    whole = np.empty(total, np.uint8)
    buf.read(whole)
    data = np.random.default_rng(1).standard_normal(30 * CHUNK + 1).astype(np.float16)
    buf.write(data, 10)
    buf.read(whole)
    assert whole[10:10 + data.nbytes].tobytes() == data.tobytes()


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "thread-per-call"])
def test_concurrent_writes_and_reads_from_threads(settings, pool):
    """Six Python threads, each copying into and out of its own buffer and between numpy arrays,
    at once: every copy gives its own bytes."""
    settings(chunk=CHUNK, threads=4, pool=pool)
    _, ctx = context()
    errors = []
    barrier = threading.Barrier(6)

    def worker(k):
        try:
            n = 20 * CHUNK + 13 * k
            buf = ctx.buffer(n, "device") if k % 2 else ctx.host_buffer(n)
            barrier.wait()
            for i in range(15):
                data = _bytes(n, seed=100 * k + i)
                buf.write(data)
                back = np.empty(n, np.uint8)
                buf.read(back)
                copy = np.empty(n, np.uint8)
                _vk.host_copy(copy, data)
                if not (np.array_equal(back, data) and np.array_equal(copy, data)):
                    errors.append(f"thread {k} round {i}: bytes differ")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {k}: {e!r}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_layer_results_equal_single_thread_copies(settings):
    """A layer whose inputs and outputs span many chunks gives the bits it gives with one
    memcpy per copy."""
    from ortops.layer import RecurrentLayer

    rng = np.random.default_rng(3)
    hidden, inp, seq, batch = 8, 24, 6, 5
    W = rng.uniform(-0.3, 0.3, (2, 4 * hidden, inp)).astype(np.float32)
    R = rng.uniform(-0.3, 0.3, (2, 4 * hidden, hidden)).astype(np.float32)
    layer = RecurrentLayer("LSTM", W, R, direction="bidirectional")
    X = rng.standard_normal((seq, batch, inp)).astype(np.float32)
    h0 = rng.standard_normal((2, batch, hidden)).astype(np.float32)
    settings(threads=1)
    expected = layer(X, initial_h=h0)
    settings(chunk=61, threads=4)      # X is 2,880 bytes: 48 chunks
    got = layer(X, initial_h=h0)
    for e, g in zip(expected, got):
        assert g.tobytes() == e.tobytes()


# -- reading outputs into given arrays (RecurrentLayer out=) ---------------------------------


def _layer_and_input(dtype=np.float32, seq=6, batch=5, inp=24, hidden=8, seed=3):
    from ortops.layer import RecurrentLayer
    from ortops.tools.measure import weights

    W, R, B = weights("LSTM", inp, hidden, 2, dtype)   # measure.one_node_model's weights
    layer = RecurrentLayer("LSTM", W, R, B, direction="bidirectional")
    X = np.random.default_rng(seed).standard_normal((seq, batch, inp)).astype(dtype)
    return layer, X


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_layer_reads_outputs_into_given_arrays(dtype):
    layer, X = _layer_and_input(dtype)
    expected = layer(X)
    out = {"Y": np.full(expected[0].shape, 7, dtype), "Y_c": np.full(expected[2].shape, 7, dtype)}
    got = layer(X, out=out)
    assert got[0] is out["Y"] and got[2] is out["Y_c"] and got[1] is not None
    for e, g in zip(expected, got):
        assert g.tobytes() == e.tobytes()
    # An output not computed leaves its array alone; an empty batch fills the given arrays.
    y = np.full(expected[0].shape, 7, dtype)
    assert layer(X, outputs="Y_h", out={"Y": y})[0] is None and (y == 7).all()
    h = np.full((2, 0, 8), 7, dtype)
    assert layer(X[:, :0], out={"Y_h": h})[1] is h


def test_layer_out_errors_name_operator_argument_expected_got():
    layer, X = _layer_and_input()
    Y = np.zeros((6, 2, 5, 8), np.float32)
    cases = [
        ([Y], "LSTM: out must be a mapping of output names to arrays, got list"),
        ({"Z": Y}, "LSTM: out may name Y, Y_h, Y_c, got 'Z'"),
        ({"Y": Y.astype(np.float16)}, r"LSTM: out\['Y'\] must have the dtype of W \(float32\), got float16"),
        ({"Y": Y[:5]}, r"LSTM: out\['Y'\] must have shape \[6, 2, 5, 8\] \(the shape of Y\), got \[5, 2, 5, 8\]"),
        ({"Y": np.empty((6, 2, 5, 16), np.float32)[..., ::2]},
         r"LSTM: out\['Y'\] must be a C-contiguous, writeable array, got a non-contiguous array"),
        ({"Y": np.broadcast_to(np.float32(0), Y.shape)},
         r"LSTM: out\['Y'\] must be a C-contiguous, writeable array, got a read-only array"),
        ({"Y": list(Y)}, r"LSTM: out\['Y'\] must be a numpy array, got list"),
    ]
    for out, message in cases:
        with pytest.raises(ValueError, match=message):
            layer(X, out=out)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_session_runs_keep_earlier_results_and_give_the_layers_bits(dtype):
    """Each run's results are ORT's own tensors (the library writes into them), so an earlier
    run's results stay as they were, and every run gives the layer's bits."""
    import ortops
    from ortops.tools.measure import one_node_model

    layer, X1 = _layer_and_input(dtype)
    X2 = (X1 * 0.5).astype(dtype)
    sess = ortops.InferenceSession(one_node_model("LSTM", 6, 5, 24, 8, "bidirectional", dtype)
                                   .SerializeToString())
    first = sess.run(None, {"X": X1})
    kept = [a.copy() for a in first]
    second = sess.run(None, {"X": X2})
    for got, want in ((first, kept), (first, layer(X1)), (second, layer(X2))):
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes()


# -- float32 -> float16 narrowing (the float16 custom nodes' inputs) ----------------------------

_EDGES = np.array([0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x38800000, 0x387FFFFF, 0x33000000,
                   0x33000001, 0x32FFFFFF, 0x7F800000, 0xFF800000, 0x80000000, 1, 0x00800000, 0x7FC00001,
                   0xFFC12345], np.uint32)


@pytest.mark.parametrize("chunk", [28, 4099, None], ids=["scalar", "f16c-chunks", "default"])
def test_narrow_to_half_equals_numpy(settings, chunk):
    """Round to nearest even as numpy's astype, at the overflow, subnormal and tie edges; NaN
    stays NaN. Chunks of 7 values run the portable conversion only (under F16C's 8)."""
    if chunk is not None:
        settings(chunk=chunk, threads=4)
    bits = np.concatenate([_EDGES, np.random.default_rng(5).integers(0, 2**32, 200_003, dtype=np.uint64)
                           .astype(np.uint32), np.arange(65536, dtype=np.uint16).view(np.float16)
                           .astype(np.float32).view(np.uint32)])
    src = bits.view(np.float32)
    with np.errstate(all="ignore"):
        want = src.astype(np.float16)
    got = np.empty(src.shape, np.float16)
    _vk.narrow_to_half(got, src)
    nan = np.isnan(src)
    assert np.array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(got[nan]).all() and np.array_equal(np.signbit(got[nan]), np.signbit(src[nan]))
    # A quiet NaN keeps the top bits of its payload, as numpy's astype does.
    quiet = src[nan][(bits[nan] & 0x400000) != 0]
    with np.errstate(all="ignore"):
        assert np.array_equal(np.array(quiet).astype(np.float16).view(np.uint16),
                              got[nan][(bits[nan] & 0x400000) != 0].view(np.uint16))


def test_narrow_to_half_refuses_wrong_types_and_sizes():
    with pytest.raises(ValueError, match="float32 source and a float16 target, got d into e"):
        _vk.narrow_to_half(np.zeros(4, np.float16), np.zeros(4, np.float64))
    with pytest.raises(ValueError, match="as many values in the target, got 4 into 3"):
        _vk.narrow_to_half(np.zeros(3, np.float16), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        _vk.narrow_to_half(np.zeros(2, np.float16), np.zeros(4, np.float32)[::2])


def test_host_path_script_reports_every_figure(tmp_path, capsys):
    import json

    from _scripts import load_bench

    host_path = load_bench("host_path")
    assert host_path.main(["--shape", "LSTM,4,2,8,8,bidirectional", "--runs", "3", "--warmup", "0",
                           "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "host_path.json").read_text())
    assert set(report["settings"]) == {"chunk", "threads", "pool"}
    assert [r["dtype"] for r in report["results"]] == ["float32", "float16"]
    for r in report["results"]:
        assert set(r["copy_modes"]) == set(host_path.COPY_MODES) | {"pool, out= reused"}
        io = r["bytes_in"] + r["bytes_out"]
        assert io == (4 * 2 * 8 + 4 * 2 * 2 * 8 + 2 * 2 * 2 * 8) * np.dtype(r["dtype"]).itemsize
        one_copy = io / r["memcpy_gbs"]["warm"] * 1e-6
        assert r["host_bound_ms"] == pytest.approx(0.05 + 1.2 * one_copy)
        assert r["session_bound_ms"] == pytest.approx(0.05 + one_copy)
        assert r["host_ok"] == (r["host_ms"] <= r["host_bound_ms"])
        assert r["session_ms"] > 0 and r["copy_modes"]["pool"]["gpu_ms"] > 0
    text = (tmp_path / "host_path.md").read_text()
    assert text.count("| LSTM 4x2x8->8 bi |") == 2 and text == capsys.readouterr().out
