"""``ortops.InferenceSession`` runs the model as it is through the ortops execution provider.

What is checked, against ONNX Runtime's own graph-assignment report
(``session.record_ep_graph_assignment_info``, onnxruntime 1.29 and later):

- the session's ORT providers are the ortops EP first, then the caller's (no rewrite: the
  session's graph is the model's, no ``ortops`` domain node);
- the placement report agrees with what the EP does, node for node, both ways (every node the
  report puts on the GPU is assigned to ``OrtopsExecutionProvider``, every other recurrent node
  to another provider), on every model in tests/models and the recognizer, the control-flow
  bodies, silero-vad's models, the quantized LSTMs, float16 / layout 1 / float64 nodes and 30
  seeded mutants of standard nodes (test_ep's cases: the EP's own checks, here through the
  session whose report is the EP's own recorded decisions);
- a node the native checker refuses stays on the CPU provider, is reported so, and
  ``require_gpu`` refuses the session;
- ortops.convert's placement and the EP's agree on every node of those models and the sample
  models (models/*.onnx), with the same reason text for every node; convert logs each node it
  leaves unchanged and ``require_gpu`` lists them;
- the EP reads each node once per GetCapability or Compile call, and each attribute once per
  read (its getter calls counted in the testing build);
- a failing node raises ``NodeRunError`` naming it (a DynamicQuantizeLSTM node too), and a
  fault injected into the core reaches the caller as the node's error;
- threads sharing one session give the serial results bit for bit;
- ``providers``, ``provider_options`` and ``device`` reach ONNX Runtime and the EP as
  documented; the caller's ``sess_options`` is left as it was.
"""

from __future__ import annotations

import threading

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortops
import test_ep as cases
from ortops.compare import scaled_error
from ortops.device import select
from ortops.ep import EP_NAME as EP
from ortops.ort import customop
from ortops.ort.equivalent import cpu_equivalent, cpu_feeds

pytestmark = pytest.mark.gpu

RECURRENT = ("LSTM", "GRU", "RNN", "DynamicQuantizeLSTM")


def _recording() -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    return so


def _assigned(sess: ortops.InferenceSession) -> dict:
    """Recurrent node name -> the provider ONNX Runtime assigned it to (every scope)."""
    return {n.name: s.ep_name for s in sess.get_provider_graph_assignment_info() for n in s.get_nodes()
            if n.op_type in RECURRENT}


def _check_agreement(sess: ortops.InferenceSession, where: str) -> int:
    """The report and ORT's assignment agree on every recurrent node; returns how many the EP took."""
    assigned = _assigned(sess)
    report = {p.name: p.where for p in sess.placement}
    assert set(report) == set(assigned), f"{where}: reported {sorted(report)}, ORT has {sorted(assigned)}"
    for name, placed in report.items():
        on_ep = assigned[name] == EP
        assert on_ep == (placed == "gpu"), f"{where}: {name!r} reported {placed!r}, ORT assigned it to {assigned[name]}"
    return sum(p == "gpu" for p in report.values())


def _stock_refuses(model) -> bool:
    try:
        m = model if isinstance(model, str) else model.SerializeToString()
        ort.InferenceSession(m, providers=["CPUExecutionProvider"])
        return False
    except Exception:
        return True


@pytest.fixture(scope="module")
def every_case(tmp_path_factory) -> dict:
    """test_ep's models: name -> (model, feed sets)."""
    tmp = tmp_path_factory.mktemp("session_ep")
    out = {"model_" + p.rsplit("/", 1)[-1][:-5]: (p, [cases._feeds_for(p)]) for p in cases._models()}
    for op in ("LSTM", "GRU", "RNN"):
        m, f = cases._one_node(op, TensorProto.FLOAT16, seed=1)
        out[f"f16_{op}"] = (m, [f])
        m, f = cases._one_node(op, layout=1, seed=2)
        out[f"layout1_{op}"] = (m, [f])
    out.update(cases._control_flow_cases())
    out.update(cases._silero_cases(str(tmp)))
    for name, (qm, _, f, _) in cases._quantized_cases(tmp).items():
        out[name] = (qm, [f])
    for k, (m, f) in enumerate(cases._mutants(cases.MUTANTS)):
        out[f"mutant{k}"] = (m, [f])
    return out


def test_the_report_agrees_with_onnxruntimes_assignment_on_every_case(every_case):
    """Every node the report puts on the GPU is on the ortops EP, every other one is not; the
    session's graph is the model's (ORT's providers: ortops first)."""
    taken = refused_by_stock = 0
    for name, (model, feed_sets) in every_case.items():
        try:
            sess = ortops.InferenceSession(model, _recording(), providers=["CPUExecutionProvider"])
        except Exception as e:
            # ORT refuses the model as stock ORT does (mutants out of ONNX's ranges): not ours
            assert not isinstance(e, customop.NodeRunError) and _stock_refuses(model), f"{name}: {e}"
            refused_by_stock += 1
            continue
        if any(p.where == "gpu" for p in sess.placement):
            assert sess.get_providers()[0] == EP, name
        taken += _check_agreement(sess, name)
        if not name.startswith("mutant"):   # (whether mutants run right: test_ep's business)
            outs = sess.run(None, feed_sets[0])
            assert outs and all(np.isfinite(o).all() for o in outs if o.dtype.kind == "f"), name
    print(f"{len(every_case)} cases, {taken} nodes on the EP, {refused_by_stock} refused as by stock ORT")
    assert taken >= 60 and refused_by_stock < len(every_case) // 4, (taken, refused_by_stock)


def _sample_models() -> dict:
    """scripts/make_models.py's models (models/*.onnx, which scripts/setup.sh writes)."""
    import glob
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sorted(glob.glob(os.path.join(root, "models", "*.onnx")))
    assert len(paths) >= 4, "models/*.onnx: run scripts/setup.sh"
    return {"sample_" + os.path.basename(p)[:-5]: (p, []) for p in paths}


def _refused_cases() -> dict:
    """Models whose nodes the checker refuses for reasons of every kind: float64, an attribute
    value out of range, a quantized node's zero points ORT refuses, its scale not constant."""
    import test_quantized as tq

    out = {"float64": (cases._one_node("LSTM", TensorProto.DOUBLE, seed=4)[0], []),
           "gru_left": (_gru_left_to_cpu()[0], [])}
    _, zero, _, _ = tq._hand_built("forward", np.int8, True, False, False, False, np.random.default_rng(11))
    for t in zero.graph.initializer:
        if t.name == "Wz":
            t.CopyFrom(numpy_helper.from_array(np.full(list(t.dims), 3, np.int8), "Wz"))
    _, varying, _, _ = tq._hand_built("forward", np.int8, False, False, False, False, np.random.default_rng(9))
    rs = next(t for t in varying.graph.initializer if t.name == "Rs")
    varying.graph.input.append(helper.make_tensor_value_info("Rs", TensorProto.FLOAT, list(rs.dims)))
    out.update(quant_zero_points=(zero, []), quant_scale_fed=(varying, []))
    return out


def test_convert_and_the_ep_agree_node_for_node_with_the_same_reasons(every_case):
    """ortops.convert's placement (the core's checker asked from Python) and the EP's (asked in
    GetCapability; ONNX Runtime's assignment report and the session's report, the EP's recorded
    decisions) agree on every recurrent node of every model, with the same reason text."""
    checked = refused = 0
    for name, (model, _) in {**every_case, **_sample_models(), **_refused_cases()}.items():
        try:
            sess = ortops.InferenceSession(model, _recording(), providers=["CPUExecutionProvider"])
        except Exception as e:
            assert not isinstance(e, customop.NodeRunError) and _stock_refuses(model), f"{name}: {e}"
            continue
        assigned = _assigned(sess)
        ep = {p.name: p for p in sess.placement}
        converted = {p.name: p for p in ortops.ort.session.placement(model)}
        assert set(converted) == set(assigned) == set(ep), name
        for node, p in converted.items():
            assert (assigned[node] == EP) == (p.where == "gpu"), f"{name}: {node!r}: convert {p.describe()}"
            assert ep[node].reason == p.reason, f"{name}: {node!r}: EP {ep[node].reason!r}, convert {p.reason!r}"
            assert ep[node].where == p.where
            checked += 1
            refused += p.where != "gpu"
    print(f"{checked} nodes, {refused} refused, the same reason from both doors")
    assert checked >= 75 and refused >= 9, (checked, refused)


def test_the_ep_reads_each_attribute_once_per_getcapability_or_compile_call():
    """The EP's one reader (src/ep/read.cpp) counts its ONNX Runtime getter calls in the testing
    build: per node, one read per GetCapability call that met it and one per Compile, and per
    read each attribute's name, type and value read once (a string or list value: ReadOpAttr's
    size probe, then the read)."""
    from ortops import _vk

    m, feeds = cases._one_node("LSTM", lens=True, seed=14)
    extra = {"activations": ["Sigmoid", "Tanh", "Tanh"] * 2, "clip": 9.0, "input_forget": 0}
    m.graph.node[0].attribute.extend(helper.make_attribute(k, v) for k, v in extra.items())
    g, _ = cases._one_node("GRU", seed=15)
    gru = g.graph.node[0]
    gru.input[0] = "X"
    for t in g.graph.initializer:
        t.name = "g" + t.name
    names = ["g" + i for i in gru.input[1:]]
    del gru.input[1:], gru.output[:]
    gru.input.extend(names)
    gru.output.extend(["gY", "gY_h"])
    m.graph.initializer.extend(t for t in g.graph.initializer)
    m.graph.node.append(gru)
    m.graph.output.append(helper.make_tensor_value_info("gY_h", TensorProto.FLOAT, None))
    _vk.take_test_counts()
    sess = ortops.InferenceSession(m, require_gpu=True)
    counts = _vk.take_test_counts()
    assert len(sess.run(None, feeds)) == 3
    for node in m.graph.node:
        n = node.name
        reads, found = counts[f"ep.node_reads:{n}"], counts[f"ep.capability:{n}"]
        assert found >= 1 and counts[f"ep.compile:{n}"] == 1 and reads == found + 1, (n, counts)
        # ONNX Runtime hands over the model's attributes and the defaults it fills in (a GRU's
        # linear_before_reset, an INT): k per read.
        k = counts[f"ep.attributes:{n}"] // reads
        assert k >= len(node.attribute) and counts[f"ep.attributes:{n}"] == k * reads, (n, counts)
        for getter in ("OpAttr_GetName", "OpAttr_GetType"):
            assert counts[f"ep.{getter}:{n}"] == k * reads, (n, getter, counts)
        lists = sum(a.type not in (onnx.AttributeProto.INT, onnx.AttributeProto.FLOAT) for a in node.attribute)
        assert counts[f"ep.ReadOpAttr:{n}"] == (k + lists) * reads, (n, counts)


def test_convert_logs_each_node_it_leaves_unchanged_and_require_gpu_lists_them(caplog):
    m, _ = _gru_left_to_cpu()
    reason = "ortops node config: node 'gru_left': attrs.linear_before_reset must be 0 or 1, got 2"
    with caplog.at_level("WARNING", logger="ortops"):
        converted = ortops.convert(m)
    assert [n.domain for n in converted.graph.node] == ["ortops", ""]
    left = [r for r in caplog.records if r.name == "ortops" and "gru_left" in r.getMessage()]
    assert len(left) == 1 and left[0].levelname == "WARNING" and reason in left[0].getMessage()
    assert "lstm_node" not in caplog.text
    with pytest.raises(ValueError, match=r"ortops.convert: recurrent node\(s\) not taken by the GPU path: "
                                         r"#1 'gru_left': .*linear_before_reset must be 0 or 1, got 2"):
        ortops.convert(m, require_gpu=True)


def test_recognizer_nodes_are_on_the_ep_and_the_graph_is_unmodified():
    path = cases._models()[-1]
    with ortops.InferenceSession(path, _recording(), require_gpu=True) as sess:
        assert sess.get_providers() == [EP, "CPUExecutionProvider"]
        assert _check_agreement(sess, "recognizer") == 2
        nodes = {n.op_type for s in sess.get_provider_graph_assignment_info() for n in s.get_nodes()}
        assert "LSTM" in nodes and not any(c.domain == customop.DOMAIN for c in onnx.load(path).opset_import)
        assert [c.device for c in sess.node_configs] == [select().uuid] * 2


def test_onnxruntimes_threads_do_not_spin_on_a_cpu_device_unless_the_caller_says():
    # On a CPU implementation of Vulkan the layers share the cores with ONNX Runtime's
    # intra-op threads, which spin while they wait by default (session._cpu_device_options).
    path = cases._models()[-1]
    key = "session.intra_op.allow_spinning"
    on_cpu = select().type == "cpu"
    with ortops.InferenceSession(path) as sess:
        options = sess.ort_session.get_session_options()
        if on_cpu:
            assert options.get_session_config_entry(key) == "0"
        else:   # unset (onnxruntime raises for a key it does not hold)
            with pytest.raises(Exception):
                options.get_session_config_entry(key)
    mine = ort.SessionOptions()
    mine.add_session_config_entry(key, "1")
    with ortops.InferenceSession(path, mine) as sess:
        assert sess.ort_session.get_session_options().get_session_config_entry(key) == "1"


def _gru_left_to_cpu():
    """An LSTM the device takes and a GRU the native checker refuses (linear_before_reset 2:
    ONNX says 0 or 1, ORT CPU runs it as 1), reading the same X."""
    rng = np.random.default_rng(10)
    m, feeds = cases._one_node("LSTM", seed=3)
    g = m.graph
    w = {"gW": rng.uniform(-0.5, 0.5, (1, 12, 4)), "gR": rng.uniform(-0.5, 0.5, (1, 12, 4))}
    g.initializer.extend(numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items())
    g.node.append(helper.make_node("GRU", ["X", "gW", "gR"], ["gY", "gY_h"], name="gru_left", hidden_size=4,
                                   linear_before_reset=2))
    g.output.append(helper.make_tensor_value_info("gY_h", TensorProto.FLOAT, None))
    return m, feeds


def test_a_node_the_checker_refuses_stays_on_the_cpu_provider_and_require_gpu_refuses():
    m, feeds = _gru_left_to_cpu()
    sess = ortops.InferenceSession(m, _recording())
    where = {p.name: p for p in sess.placement}
    assert where["lstm_node"].where == "gpu"
    assert where["gru_left"].where == "cpu" and "linear_before_reset must be 0 or 1, got 2" in where["gru_left"].reason
    assert _assigned(sess) == {"lstm_node": EP, "gru_left": "CPUExecutionProvider"}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, ref in zip(sess.run(None, feeds), want):
        assert scaled_error(got, ref) <= 1e-5
    with pytest.raises(ValueError, match=r"not taken by the GPU path: .*'gru_left'.*linear_before_reset"):
        ortops.InferenceSession(m, require_gpu=True)


def test_a_failing_node_raises_node_run_error_naming_it():
    m, _ = cases._one_node("GRU", lens=True, seq=4, batch=3, seed=5)
    sess = ortops.InferenceSession(m)
    X = np.zeros((4, 3, 4), np.float32)
    with pytest.raises(customop.NodeRunError, match=r"GRU node 'gru_node': .*sequence_lens.*batch row 1") as info:
        sess.run(None, {"X": X, "L": np.array([4, 9, 1], np.int32)})
    assert info.value.node == "gru_node" and info.value.op == "GRU"
    assert sess.run(None, {"X": X, "L": np.array([4, 2, 1], np.int32)})[0].shape == (4, 2, 3, 6)


def test_a_quantized_node_error_names_the_node(tmp_path):
    name, (qm, _, feeds, _) = next(iter(sorted(cases._quantized_cases(tmp_path).items())))
    node = next(n for n in qm.graph.node if n.op_type == "DynamicQuantizeLSTM")
    sess = ortops.InferenceSession(qm)
    assert [p.where for p in sess.placement] == ["gpu"], name
    lens = next(k for k in feeds if feeds[k].dtype == np.int32)
    bad = dict(feeds, **{lens: np.full_like(feeds[lens], 10_000)})
    with pytest.raises(customop.NodeRunError, match=rf"DynamicQuantizeLSTM node '{node.name}': .*sequence_lens") as info:
        sess.run(None, bad)
    assert info.value.node == node.name and info.value.op == "DynamicQuantizeLSTM"


def test_a_core_fault_reaches_the_caller_as_the_nodes_error(inject_fault):
    m, feeds = cases._one_node("RNN", seed=6)
    sess = ortops.InferenceSession(m)
    inject_fault("fail")
    with pytest.raises(customop.NodeRunError, match=r"RNN node 'rnn_node'") as info:
        sess.run(None, feeds)
    assert info.value.node == "rnn_node"
    inject_fault("")
    assert sess.run(None, feeds)[0].shape == (5, 2, 3, 6)


def test_threads_sharing_one_session_get_the_serial_results_bit_for_bit():
    m, _ = cases._one_node("LSTM", lens=True, seq=6, batch=4, seed=7)
    sess = ortops.InferenceSession(m, require_gpu=True)
    rng = np.random.default_rng(8)
    feeds = [{"X": rng.uniform(-1, 1, (6, 4, 4)).astype(np.float32), "L": rng.integers(0, 7, 4).astype(np.int32)}
             for _ in range(4)]
    serial = [sess.run(None, f) for f in feeds]
    got: list = [None] * 16
    start = threading.Barrier(len(got))

    def work(k):
        start.wait()
        got[k] = sess.run(None, feeds[k % len(feeds)])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(got))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, outs in enumerate(got):
        assert all(a.tobytes() == b.tobytes() for a, b in zip(outs, serial[k % len(feeds)])), f"run {k}"


def test_providers_follow_ortops_and_sess_options_is_left_as_it_was():
    m, feeds = cases._one_node("GRU", seed=9)
    so = ort.SessionOptions()
    a = ortops.InferenceSession(m, so)
    assert a.get_providers() == [EP, "CPUExecutionProvider"] and not so.has_providers()
    # ortops named among the caller's providers is not added twice; the session's mode wins
    b = ortops.InferenceSession(m, so, providers=[(EP, {"mode": "exact"}), "CPUExecutionProvider"], mode="fast")
    assert b.get_providers() == [EP, "CPUExecutionProvider"]
    assert b.get_provider_options()[EP]["mode"] == "fast" and not so.has_providers()
    c = ortops.InferenceSession(m, providers=["CPUExecutionProvider"], provider_options=[{}])
    assert c.get_providers() == [EP, "CPUExecutionProvider"]
    for s in (a, b, c):
        assert s.run(None, feeds)[0].shape == (5, 2, 3, 6)
    with pytest.raises(ValueError, match="provider_options has 2 entries for 1 providers"):
        ortops.InferenceSession(m, providers=["CPUExecutionProvider"], provider_options=[{}, {}])


@pytest.mark.parametrize("spec", ["index", "name", "device", "uuid", "env"])
def test_the_device_argument_reaches_the_ep_as_its_uuid(spec, monkeypatch):
    dev = select()
    device = {"index": dev.index, "name": dev.name[:6], "device": dev, "uuid": "GPU-" + dev.uuid, "env": None}[spec]
    if spec == "env":
        monkeypatch.setenv("ORTOPS_DEVICE", str(dev.index))
    m, _ = cases._one_node("LSTM", seed=10)
    sess = ortops.InferenceSession(m, device=device)
    assert sess.get_provider_options()[EP]["device"] == dev.uuid
    assert [c.device for c in sess.node_configs] == [dev.uuid]


def test_a_bad_device_is_an_error_naming_it_and_the_devices():
    # No silent fallback (issue 44): a device named that matches none is refused, naming what
    # was asked and listing the devices there are, not run on ONNX Runtime CPU.
    m, _ = cases._one_node("RNN", seed=11)
    with pytest.raises(ValueError, match="no Vulkan device matches 'no such device'") as info:
        ortops.InferenceSession(m, device="no such device")
    for d in ortops.devices():
        assert f"[{d.index}] {d.name} ({d.type}) uuid {d.uuid}" in str(info.value)


def test_float16_and_layout1_through_the_session_match_stock_on_the_equivalent():
    for dtype, layout in ((TensorProto.FLOAT16, 0), (TensorProto.FLOAT, 1)):
        m, feeds = cases._one_node("GRU", dtype, layout=layout, seed=12)
        got = ortops.InferenceSession(m, require_gpu=True).run(None, feeds)
        want = ort.InferenceSession(cpu_equivalent(m).SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, cpu_feeds(feeds))
        tol = 2e-3 if dtype == TensorProto.FLOAT16 else 1e-5
        for g, w in zip(got, want):
            assert g.dtype == (np.float16 if dtype == TensorProto.FLOAT16 else np.float32)
            assert scaled_error(g.astype(np.float32), w) <= tol


def test_device_none_is_ortops_device_then_the_assigned_gpu_then_the_preferred(monkeypatch):
    """The core's choice (ortops.device.select, what a session's device=None becomes) on a
    made-up machine: two NVIDIA GPUs enumerated out of PCI order and lavapipe.
    CUDA_VISIBLE_DEVICES counts in CUDA's (PCI) order; ORTOPS_DEVICE wins over it; with no NVIDIA
    device, CUDA's variables are not read."""
    from _cases import fake_device

    from ortops import device as device_mod

    session_device = device_mod.select

    b = fake_device(index=0, uuid="8c1b9a00-aaaa-bbbb-cccc-ddddeeeeffff", pci_bus_id="0000:9a:00.0")
    a = fake_device(index=1, uuid="8c1b2f3e-1111-2222-3333-444455556666", pci_bus_id="0000:18:00.0")
    lava = fake_device(index=2, name="llvmpipe", type="cpu", vendor_id=0x10005, device_id=0,
                       uuid="6d657361-3232-2e33-2e36-000000000000")
    monkeypatch.setattr(device_mod, "devices", lambda: [b, a, lava])
    for name in ("ORTOPS_DEVICE", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.delenv(name, raising=False)
    assert session_device() is b                        # the preferred: the first discrete GPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert session_device() is a                        # CUDA's GPU 0 in PCI order: a (0000:18)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8c1b9a00,0")
    assert session_device() is b                        # the first one listed, by UUID
    assert session_device(lava) is lava and session_device("llvm") is lava   # an explicit device wins
    monkeypatch.setenv("ORTOPS_DEVICE", "2")
    assert session_device() is lava                     # ORTOPS_DEVICE wins over CUDA's variables
    monkeypatch.delenv("ORTOPS_DEVICE")
    monkeypatch.setattr(device_mod, "devices", lambda: [lava])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")     # no NVIDIA device: not read, no error
    assert session_device() is lava
    with pytest.raises(ValueError, match=r"no Vulkan device matches 'no such device'.*\[2\] llvmpipe \(cpu\) uuid 6d657361"):
        session_device("no such device")                # an error naming it and the devices
