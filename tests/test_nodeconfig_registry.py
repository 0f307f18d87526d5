"""The custom node's config (ortops.ort.nodeconfig) and the registry the custom nodes reach
(ortops.ort.registry), without a device: a round trip that keeps float32 attributes exact,
clear errors for malformed configs, and the registry's per-key and per-run bookkeeping."""

import json
import threading

import numpy as np
import pytest

from ortops import modes

from ortops.ort.nodeconfig import CONFIG_VERSION, NodeAttrs, NodeConfig, encode
from ortops.ort import registry
from ortops.ort.registry import Registry


def _config(**changes):
    attrs = NodeAttrs(hidden_size=5, direction="bidirectional", activations=("Sigmoid", "Tanh", "Tanh"),
                      activation_alpha=(float(np.float32(0.1)),), clip=float(np.float32(1.7)))
    fields = dict(key="tag/0", node="lstm_node", op="LSTM", dtype="float32", attrs=attrs, weights="registry",
                  absent=("P",), outputs=("Y", "Y_h"), gate="Y")
    fields.update(changes)
    return NodeConfig(**fields)


def test_round_trip_keeps_every_field_and_float32_values_exactly():
    cfg = _config()
    back = NodeConfig.from_json(cfg.to_json())
    assert back == cfg
    assert np.float32(back.attrs.clip) == np.float32(1.7) and back.attrs.clip == float(np.float32(1.7))
    assert encode(cfg) == encode(cfg.to_dict()) == cfg.to_json()   # one encoding, sorted keys


@pytest.mark.parametrize("text, message", [
    ("{not json", "config attribute is not JSON"),
    (json.dumps({"v": CONFIG_VERSION - 1}), f"config version {CONFIG_VERSION - 1} is not the supported"),
    (json.dumps([1, 2]), "config version None is not the supported"),
])
def test_malformed_configs_are_clear_errors(text, message):
    with pytest.raises(ValueError, match=message):
        NodeConfig.from_json(text)


def test_missing_field_unknown_op_and_bad_attrs_are_named():
    d = _config().to_dict()
    for name in ("key", "gate"):
        broken = {k: v for k, v in d.items() if k != name}
        with pytest.raises(ValueError, match=f"config lacks '{name}'"):
            NodeConfig.from_json(encode(broken))
    with pytest.raises(ValueError, match="unsupported op/dtype LSTMX/float32"):
        NodeConfig.from_json(encode(dict(d, op="LSTMX")))
    with pytest.raises(ValueError, match="config attrs is not an object"):
        NodeConfig.from_json(encode(dict(d, attrs=[1])))


def test_registry_layers_are_per_key_and_forgotten_with_their_session():
    reg = Registry()
    reg.add_session({"a/0": "layer a0", "a/1": "layer a1"}, {"a/2": "device"})
    reg.add_session({"b/0": "layer b0"}, {})
    assert "a/0" in reg and reg.prebuilt("b/0") == "layer b0" and "a/2" not in reg
    reg.forget(["a/0", "a/1", "a/2"])
    assert "a/0" not in reg and reg.prebuilt("a/1") is None and reg.prebuilt("b/0") == "layer b0"


def test_registry_rebuilds_an_inline_layer_only_when_the_weight_bits_change():
    reg, builds = Registry(), []

    def build(op, weights, attrs, device, mode):
        assert mode == "deterministic"
        builds.append(device)
        return object()

    cfg = _config(weights="inputs", device="dev")
    W = np.ones((1, 4, 3), np.float32)
    first = reg.layer_for(cfg, {"W": W, "R": W}, build)
    assert reg.layer_for(cfg, {"W": W.copy(), "R": W}, build) is first       # same bits
    W2 = W.copy()
    W2.view(np.uint32)[0, 0, 0] ^= 1                                          # the last bit
    assert reg.layer_for(cfg, {"W": W2, "R": W}, build) is not first         # one bit differs
    assert builds == ["dev", "dev"]


def test_inline_cache_keeps_the_most_recently_used_layers_only(monkeypatch):
    # Nothing says when a converted model's last session is gone: the cache is bounded
    # (docs/memory.md), and a dropped layer still in use is rebuilt on its next run.
    monkeypatch.setattr(registry, "INLINE_LAYERS", 3)
    reg, builds = Registry(), []

    def build(op, weights, attrs, device, mode):
        builds.append(device)
        return object()

    W = np.ones((1, 4, 3), np.float32)
    cfgs = [_config(key=f"convert-x/{i}", weights="inputs", device=str(i)) for i in range(4)]
    layers = [reg.layer_for(c, {"W": W, "R": W}, build) for c in cfgs[:3]]
    assert reg.layer_for(cfgs[0], {"W": W, "R": W}, build) is layers[0]      # 0 is now the newest
    reg.layer_for(cfgs[3], {"W": W, "R": W}, build)                          # 1, the oldest, goes
    assert len(reg._inline) == 3 and builds == ["0", "1", "2", "3"]
    assert reg.layer_for(cfgs[2], {"W": W, "R": W}, build) is layers[2]
    assert reg.layer_for(cfgs[1], {"W": W, "R": W}, build) is not layers[1]  # rebuilt
    reg.seed_inline("convert-y/0", {"W": W, "R": W}, object())               # seeding counts too
    assert len(reg._inline) == 3 and "convert-x/1" in reg._inline and "convert-x/0" not in reg._inline


def test_run_errors_belong_to_their_token_under_threads():
    reg = Registry()
    tokens = [reg.new_token() for _ in range(64)]
    assert 0 not in tokens and len(set(tokens)) == len(tokens)
    start = threading.Barrier(8)

    def record(chunk):
        start.wait()
        for t in chunk:
            reg.record_error(t, ValueError(f"error of {t}"))

    threads = [threading.Thread(target=record, args=(tokens[i::8],)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for t in tokens:
        (err,) = reg.take_errors(t)
        assert str(err) == f"error of {t}"
        assert reg.take_errors(t) == []


def test_mode_round_trips_and_an_unknown_mode_is_refused():
    cfg = _config(mode="exact")
    assert NodeConfig.from_json(cfg.to_json()).mode == "exact"
    assert _config().mode == "deterministic"
    d = cfg.to_dict()
    d["mode"] = "fastest"
    valid = ", ".join(sorted(modes.MODES))
    with pytest.raises(ValueError, match=f"mode must be one of {valid}, got 'fastest'"):
        NodeConfig.from_json(encode(d))
    del d["mode"]
    with pytest.raises(ValueError, match="config lacks 'mode'"):
        NodeConfig.from_json(encode(d))


def test_forget_from_a_finalizer_inside_a_locked_section_does_not_wait_for_itself():
    # The garbage collector may run a session's finalizer (Registry.forget) at any allocation,
    # also while this thread holds the registry's lock (seen in CI inside seed_inline). It
    # must not deadlock, and the keys go when the section ends.
    import threading
    import weakref

    reg = Registry()
    reg.add_session({"s/0": "layer"}, {})

    class Session:
        pass

    done = threading.Event()

    def body():
        owner = Session()
        weakref.finalize(owner, reg.forget, ["s/0"])
        with reg._lock:               # what seed_inline, layer_for, ... hold
            del owner                 # refcount 0: the finalizer runs here, on this thread
            assert "s/0" in reg._layers   # deferred, not dropped under the caller's feet
        done.set()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(10)
    assert done.is_set(), "forget() from a finalizer inside a locked section deadlocked"
    assert "s/0" not in reg and reg.prebuilt("s/0") is None


def test_forget_from_another_thread_waits_for_the_lock_and_drops_at_once():
    import threading

    reg = Registry()
    reg.add_session({"a": 1, "b": 2}, {"a": "dev"})
    t = threading.Thread(target=reg.forget, args=(["a"],))
    with reg._lock:
        t.start()
        t.join(0.2)
        assert t.is_alive()           # blocked on the lock this thread holds
    t.join(10)
    assert not t.is_alive() and "a" not in reg and "b" in reg
