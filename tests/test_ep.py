"""The plugin execution provider (src/ep/, ortops/ep.py) from plain onnxruntime.

Every case runs in ONE child process that never imports ortops: plain onnxruntime, the
library's path and nothing else (``CHILD`` below), as a C#, Java or C++ application would use
the EP. The parent builds the models and feeds, and judges the child's outputs against stock
ONNX Runtime CPU with ortops.compare's rule (scaled error within the dtype's tolerance):

- every model in tests/models and models/recognizer.onnx, unmodified, with every recurrent
  node of the main graph assigned to the ortops EP by ONNX Runtime's own report
  (``session.record_ep_graph_assignment_info``), the LSTMs inside scripted_loop_if's Loop/If
  bodies too (ORT asks the EP per body), and test_control_flow's If, Scan and If-in-Loop bodies;
- every LSTM of every silero-vad model (a third-party streaming model, LSTMs in If branches);
- a float16 node and a layout-1 node (which ORT's CPU provider cannot run) on the EP, judged
  against the equivalent float32 / layout-0 model on the CPU;
- com.microsoft DynamicQuantizeLSTM (hand-built and from quantize_dynamic), by the quantized rule;
- weights fed at run time (graph inputs), changed between runs: each run follows its weights;
- threads sharing one session: every result equal to the serial one, bit for bit;
- a bad feed (sequence_lens beyond seq_length): ONNX Runtime's error naming the node, the
  session usable afterwards;
- a node the EP refuses (float64) left to the CPU provider, which answers as stock ORT does;
- sessions created and dropped release their layers (the core's count of layers alive);
- 30 seeded mutants of standard nodes (attributes out of range, wrong counts, unknown names,
  odd clips, no bias, odd lengths): right where stock ORT runs them, refused where it refuses.

Under ``--vk-validation`` the child inherits ORTOPS_VALIDATION and the layer settings, and its
output is searched for validation messages (the layer logs them to stdout, tests/vk_layer_settings.txt).
"""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortops
from _children import run_child
from _scripts import load_script
from ortops.compare import scaled_error, tolerance
from ortops.ort.equivalent import cpu_equivalent, cpu_feeds

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EP = "OrtopsExecutionProvider"
RECURRENT = ("LSTM", "GRU", "RNN")

# The child: plain onnxruntime and the library path. argv: library, job.json, output folder.
CHILD = r'''
import json, sys, threading
import numpy as np
import onnxruntime as ort

lib, job_path, out = sys.argv[1:4]
job = json.load(open(job_path))
ort.register_execution_provider_library("ortops", lib)
eps = [d for d in ort.get_ep_devices() if d.ep_name == "OrtopsExecutionProvider"]
report = {"devices": [dict(d.ep_metadata) for d in eps], "cases": {}}
assert eps, "no ortops EP device"

def session(model):
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    # placement gpu: every node the device can run goes to it, also on lavapipe (whose default
    # placement is auto, which leaves to ORT CPU what it runs faster).
    so.add_provider_for_devices(eps[:1], {"mode": "deterministic", "placement": "gpu"})
    # enable_fallback=0: a refused EP is an error, as in the other bindings (Python's session
    # would otherwise retry on its fallback providers).
    return ort.InferenceSession(model, sess_options=so, enable_fallback=0)

def assigned(sess):
    return [[s.ep_name, [[n.name, n.op_type] for n in s.get_nodes()]] for s in sess.get_provider_graph_assignment_info()]

for case in job:
    name, r = case["name"], {}
    feeds = [dict(np.load(f)) for f in case["feeds"]]
    try:
        sess = session(case["model"])
    except Exception as e:
        report["cases"][name] = {"creation_error": f"{type(e).__name__}: {e}", "assigned": []}
        continue
    r["assigned"] = assigned(sess)
    if case["kind"] == "run":
        try:
            for k, f in enumerate(feeds):
                outs = {f"out{i}": a for i, a in enumerate(sess.run(None, f))}
                np.savez(f"{out}/{name}.npz" if k == 0 else f"{out}/{name}.{k}.npz", **outs)
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {e}"
    elif case["kind"] == "threads":
        serial = [sess.run(None, f) for f in feeds]
        got = [None] * (len(feeds) * 3)
        def work(k):
            got[k] = sess.run(None, feeds[k % len(feeds)])
        threads = [threading.Thread(target=work, args=(k,)) for k in range(len(got))]
        [t.start() for t in threads]
        [t.join() for t in threads]
        r["same"] = [all(np.array_equal(a, b) and a.tobytes() == b.tobytes() for a, b in zip(got[k], serial[k % len(feeds)]))
                     for k in range(len(got))]
    elif case["kind"] == "bad":
        try:
            sess.run(None, feeds[0])
            r["error"] = None
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {e}"
        r["after"] = [a.shape for a in sess.run(None, feeds[1])]
    report["cases"][name] = r
report["imported"] = sorted(m for m in sys.modules if m.split(".")[0] == "ortops")
report["onnxruntime"] = ort.__version__
json.dump(report, open(f"{out}/report.json", "w"))
'''


def _feeds_for(model_path: str) -> dict:
    """The stored inputs beside the model, else seeded ones (scripts/ci/model_feeds.py)."""
    return load_script("ci/model_feeds").stored_feeds(model_path)


def _models() -> list[str]:
    paths = sorted(glob.glob(os.path.join(ROOT, "tests", "models", "*.onnx")))
    recognizer = os.path.join(ROOT, "models", "recognizer.onnx")
    assert os.path.exists(recognizer), "models/recognizer.onnx: run scripts/setup.sh"
    return paths + [recognizer]


def _one_node(op, dtype=TensorProto.FLOAT, layout=0, seq=5, batch=3, inp=4, hidden=6, lens=False, seed=0):
    """A one-node bidirectional model with constant W, R, B; X (and sequence_lens) fed."""
    rng = np.random.default_rng(seed)
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    npdt = helper.tensor_dtype_to_np_dtype(dtype)
    w = {"W": rng.uniform(-0.5, 0.5, (2, G * hidden, inp)), "R": rng.uniform(-0.5, 0.5, (2, G * hidden, hidden)),
         "B": rng.uniform(-0.5, 0.5, (2, 2 * G * hidden))}
    inits = [numpy_helper.from_array(v.astype(npdt), k) for k, v in w.items()]
    xshape = [batch, seq, inp] if layout else [seq, batch, inp]
    inputs = [helper.make_tensor_value_info("X", dtype, xshape)]
    names = ["X", "W", "R", "B"]
    if lens:
        inputs.append(helper.make_tensor_value_info("L", TensorProto.INT32, [batch]))
        names.append("L")
    node = helper.make_node(op, names, ["Y", "Y_h"], name=f"{op.lower()}_node", hidden_size=hidden,
                            direction="bidirectional", layout=layout)
    g = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", dtype, None),
                                                helper.make_tensor_value_info("Y_h", dtype, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    feeds = {"X": rng.uniform(-1, 1, xshape).astype(npdt)}
    if lens:
        feeds["L"] = np.full(batch, seq, np.int32)
    return m, feeds


def _weights_as_inputs(model, feeds):
    """``model`` with W, R and B as graph inputs instead of initializers, and three feed sets:
    the weights, others, the first again (the EP rebuilds the layer when the fed bits change)."""
    m = onnx.ModelProto.FromString(model.SerializeToString())
    arrays = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    del m.graph.initializer[:]
    for name, a in arrays.items():
        m.graph.input.append(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
    rng = np.random.default_rng(9)
    other = {k: rng.uniform(-0.5, 0.5, a.shape).astype(a.dtype) for k, a in arrays.items()}
    return m, [dict(feeds, **arrays), dict(feeds, **other), dict(feeds, **arrays)]


#: Recurrent nodes in bodies (tests/test_control_flow.py's models): case -> the body nodes.
CONTROL_FLOW = {"cf_if": {"lstm", "gru"}, "cf_scan": {"scan_rnn"}, "cf_if_in_loop": {"inner_gru"}}


def _control_flow_cases() -> dict:
    """An If with an LSTM and a GRU branch (both conditions run), a Scan with a bidirectional
    RNN, a GRU in an If nested in a Loop."""
    import test_control_flow as cf

    rng = np.random.default_rng(11)
    u = lambda *shape: rng.uniform(-1, 1, shape).astype(np.float32)  # noqa: E731
    B, H, I, T = cf.B, cf.H, cf.I, cf.T
    if_feeds = {"X": u(T, B, I), "h_in": u(1, B, H)}
    return {
        "cf_if": (cf._if_model(rng), [dict(if_feeds, cond=np.array(True)), dict(if_feeds, cond=np.array(False))]),
        "cf_scan": (cf._scan_model(rng, 3), [{"h0": u(2, B, H), "Xs": u(3, T, B, I)}]),
        "cf_if_in_loop": (cf._if_in_loop_model(rng, 5), [{"X": u(T, B, I), "h0": u(1, B, H)}]),
    }


def _silero_cases(folder: str) -> dict:
    """silero-vad's models and feeds (scripts/ci/model_feeds.py), named silero_<model>."""
    cases = load_script("ci/model_feeds").silero_cases(folder)
    return {"silero_" + name: case for name, case in cases.items()}


def _quantized_cases(tmp) -> dict:
    """com.microsoft DynamicQuantizeLSTM: test_quantized's hand-built nodes (uint8 / int8, per
    tensor / per channel, lengths, states, peepholes) and a quantize_dynamic model."""
    import test_quantized as tq
    from onnxruntime.quantization import QuantType, quantize_dynamic

    cases = {}
    for case, args in sorted(tq.CASES.items()):
        fm, qm, feeds, ref = tq._hand_built(*args, np.random.default_rng(len(case)))
        cases["quant_" + case] = (qm, fm, feeds, ref)
    fm, _, feeds, _ = tq._hand_built("bidirectional", np.int8, True, True, True, False, np.random.default_rng(3),
                                     seq=9, batch=2, inp=16, hidden=24)
    src, dst = tmp / "qd_float.onnx", tmp / "qd_quant.onnx"
    onnx.save(fm, str(src))
    quantize_dynamic(str(src), str(dst), per_channel=True, weight_type=QuantType.QInt8)
    qm = onnx.load(str(dst))
    node = next(n for n in qm.graph.node if n.op_type == "DynamicQuantizeLSTM")
    consts = {t.name: numpy_helper.to_array(t) for t in qm.graph.initializer}
    ref = dict(W=tq._dequantized(*(consts[node.input[i]] for i in (1, 8, 9))),
               R=tq._dequantized(*(consts[node.input[i]] for i in (2, 10, 11))), B=consts[node.input[3]],
               sequence_lens=feeds["lens"], initial_h=feeds["h0"], initial_c=feeds["c0"], hidden_size=24,
               direction="bidirectional")
    cases["quant_quantize_dynamic"] = (qm, fm, feeds, ref)
    return cases


MUTANTS = 30


def _mutants(n: int) -> list:
    """``n`` seeded one-node models whose standard node has mutated attributes (values out of
    range, wrong counts, unknown names, odd clips), a missing bias or odd sequence lengths:
    the EP must take what it can run right and leave or refuse the rest as ONNX Runtime does."""
    rng = np.random.default_rng(2026)
    names = ["Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid",
             "Elu", "Softsign", "Softplus", "tanh", "Nope"]
    out = []
    for _ in range(n):
        op = str(rng.choice(RECURRENT))
        m, f = _one_node(op, seq=4, batch=2, inp=3, hidden=5, lens=bool(rng.integers(2)), seed=int(rng.integers(1 << 30)))
        node = m.graph.node[0]
        attrs = {a.name: a for a in node.attribute}
        pick = int(rng.integers(8))
        if pick == 0:
            attrs["hidden_size"] = helper.make_attribute("hidden_size", int(rng.choice([0, -1, 4, 6])))
        elif pick == 1:
            attrs["direction"] = helper.make_attribute("direction", str(rng.choice(["forward", "reverse", "sideways"])))
        elif pick == 2:
            attrs["activations"] = helper.make_attribute(
                "activations", [str(x) for x in rng.choice(names, int(rng.integers(1, 7)))])
        elif pick == 3:
            attrs["activation_alpha"] = helper.make_attribute(
                "activation_alpha", rng.uniform(-2, 2, int(rng.integers(1, 70))).astype(np.float32).tolist())
        elif pick == 4:
            attrs["clip"] = helper.make_attribute("clip", float(rng.choice([-1.0, 0.0, 1e-40, 0.5, 3.0, np.inf])))
        elif pick == 5:
            attrs["input_forget" if op == "LSTM" else "linear_before_reset"] = helper.make_attribute(
                "input_forget" if op == "LSTM" else "linear_before_reset", int(rng.choice([0, 1, 2])))
        elif pick == 6:
            del node.input[3:]    # no bias (and no lengths)
            del m.graph.input[1:]
            f = {"X": f["X"]}
        elif "L" in f:
            f["L"] = rng.integers(0, 5, f["L"].shape).astype(np.int32)
        del node.attribute[:]
        node.attribute.extend(attrs.values())
        out.append((m, f))
    return out


def _lstm_names(graph) -> set:
    """Every LSTM of a graph and of its bodies, by name."""
    names = set()
    for node in graph.node:
        if node.op_type == "LSTM":
            names.add(node.name)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                names |= _lstm_names(a.g)
    return names


def _stock(model, feeds):
    """Stock ORT CPU's outputs (through the float32 layout-0 equivalent where it must)."""
    if isinstance(model, str):
        model = onnx.load(model)
    eq = any(v.dtype == np.float16 for v in feeds.values()) or any(
        a.name == "layout" and a.i == 1 for n in model.graph.node for a in n.attribute)
    m = cpu_equivalent(model) if eq else model
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, cpu_feeds(feeds) if eq else feeds)


def _recurrent_names(model_path_or_proto) -> list[str]:
    m = onnx.load(model_path_or_proto) if isinstance(model_path_or_proto, str) else model_path_or_proto
    return [n.name for n in m.graph.node if n.op_type in RECURRENT and n.domain in ("", "ai.onnx")]


def _on_ep(assigned) -> set:
    return {name for ep, nodes in assigned if ep == EP for name, _ in nodes}


def _on(assigned, ep_name) -> set:
    return {name for ep, nodes in assigned if ep == ep_name for name, _ in nodes}


@pytest.fixture(scope="module")
def child(tmp_path_factory):
    """Builds every case, runs the child once, returns (cases, report)."""
    tmp = tmp_path_factory.mktemp("ep")
    cases, job = {}, []

    def add(name, kind, model, feeds_list, **extra):
        path = model if isinstance(model, str) else str(tmp / f"{name}.onnx")
        if not isinstance(model, str):
            onnx.save(model, path)
        files = []
        for k, f in enumerate(feeds_list):
            files.append(str(tmp / f"{name}.feeds{k}.npz"))
            np.savez(files[-1], **f)
        cases[name] = dict(model=model, path=path, feeds=feeds_list, **extra)
        job.append({"name": name, "kind": kind, "model": path, "feeds": files})

    for path in _models():
        add("model_" + os.path.basename(path)[:-5], "run", path, [_feeds_for(path)])
    for op in RECURRENT:
        m, f = _one_node(op, TensorProto.FLOAT16, seed=1)
        add(f"f16_{op}", "run", m, [f], dtype=np.float16)
        m, f = _one_node(op, layout=1, seed=2)
        add(f"layout1_{op}", "run", m, [f])
    m, f = _one_node("LSTM", TensorProto.DOUBLE, seed=4)
    add("float64", "run", m, [f], dtype=np.float64)
    for name, (m, feeds_list) in _control_flow_cases().items():
        add(name, "run", m, feeds_list)
    for name, (path, feeds_list) in _silero_cases(str(tmp)).items():
        add(name, "run", path, feeds_list)
    for name, (qm, fm, f, ref) in _quantized_cases(tmp).items():
        add(name, "run", qm, [f], float_model=fm, ref_args=ref)
    for k, (m, f) in enumerate(_mutants(MUTANTS)):
        add(f"mutant{k}", "run", m, [f])
    m, f = _one_node("GRU", seed=8)
    m, weight_feeds = _weights_as_inputs(m, f)
    add("fed_weights", "run", m, weight_feeds)
    m, _ = _one_node("LSTM", lens=True, seq=6, batch=4, seed=5)
    rng = np.random.default_rng(6)
    lens_feeds = [{"X": rng.uniform(-1, 1, (6, 4, 4)).astype(np.float32),
                   "L": np.array([6, 1, 0, 4][:4], np.int32) if k % 2 else rng.integers(0, 7, 4).astype(np.int32)}
                  for k in range(4)]
    add("threads", "threads", m, lens_feeds)
    bad = dict(lens_feeds[0], L=np.array([6, 9, 1, 2], np.int32))    # 9 > seq_length 6
    add("bad", "bad", m, [bad, lens_feeds[0]])

    (tmp / "job.json").write_text(json.dumps(job))
    run_child(CHILD, ortops.get_library_path(), str(tmp / "job.json"), str(tmp), cwd=tmp)
    report = json.loads((tmp / "report.json").read_text())
    return cases, report, tmp


def test_the_child_never_imported_ortops_and_saw_a_device(child):
    _, report, _ = child
    assert report["imported"] == []
    assert report["onnxruntime"] == ort.__version__    # the one under test (CI: also the oldest admitted)
    assert report["devices"], "the EP offered no device"
    for meta in report["devices"]:
        assert len(meta["vulkan_uuid"]) == 36 and meta["vulkan_device_name"] and "vulkan_driver" in meta


@pytest.mark.parametrize("path", _models(), ids=lambda p: os.path.basename(p)[:-5])
def test_unmodified_model_runs_on_the_ep_within_tolerance(child, path):
    cases, report, tmp = child
    name = "model_" + os.path.basename(path)[:-5]
    r = report["cases"][name]
    on_ep = _on_ep(r["assigned"])
    main = _recurrent_names(path)
    assert set(main) <= on_ep, f"recurrent nodes not on {EP}: {set(main) - on_ep}; report {r['assigned']}"
    if not main:   # scripted_loop_if: its LSTMs are in Loop/If bodies, which ORT offers the EP too
        assert any(op in RECURRENT for ep, nodes in r["assigned"] if ep == EP for _, op in nodes), r["assigned"]
    got = np.load(tmp / f"{name}.npz")
    want = _stock(path, cases[name]["feeds"][0])
    assert len(got.files) == len(want)
    for k, w in enumerate(want):
        g = got[f"out{k}"]
        assert g.shape == w.shape and g.dtype == w.dtype
        err = scaled_error(g, w)
        assert err <= tolerance(w.dtype), f"output {k}: scaled error {err:.3g}"


@pytest.mark.parametrize("name", [f"{k}_{op}" for k in ("f16", "layout1") for op in RECURRENT])
def test_float16_and_layout1_nodes_run_on_the_ep(child, name):
    cases, report, tmp = child
    c, r = cases[name], report["cases"][name]
    assert _recurrent_names(c["model"]) and set(_recurrent_names(c["model"])) <= _on_ep(r["assigned"])
    got = np.load(tmp / f"{name}.npz")
    for k, w in enumerate(_stock(c["model"], c["feeds"][0])):
        g = got[f"out{k}"]
        assert g.shape == w.shape
        assert scaled_error(g, w) <= tolerance(c.get("dtype", np.float32)), f"output {k}"


@pytest.mark.parametrize("name", sorted(CONTROL_FLOW))
def test_recurrent_nodes_in_if_loop_and_scan_bodies_run_on_the_ep(child, name):
    cases, report, tmp = child
    c, r = cases[name], report["cases"][name]
    assert "error" not in r, r.get("error")
    assert CONTROL_FLOW[name] <= _on_ep(r["assigned"]), r["assigned"]
    for k, feeds in enumerate(c["feeds"]):
        got = np.load(tmp / (f"{name}.npz" if k == 0 else f"{name}.{k}.npz"))
        for i, w in enumerate(_stock(c["model"], feeds)):
            assert scaled_error(got[f"out{i}"], w) <= 1e-5, f"run {k} output {i}"


def test_every_lstm_of_every_silero_vad_model_runs_on_the_ep(child):
    cases, report, tmp = child
    names = sorted(n for n in cases if n.startswith("silero_"))
    assert len(names) >= 3
    placed = 0
    for name in names:
        c, r = cases[name], report["cases"][name]
        assert "error" not in r, f"{name}: {r.get('error')}"
        lstms = _lstm_names(onnx.load(c["path"]).graph)
        # (silero_vad_op18_ifless has its LSTM unrolled into elementwise nodes: none to take)
        assert lstms <= _on_ep(r["assigned"]), f"{name}: {r['assigned']}"
        placed += len(lstms)
        for k, feeds in enumerate(c["feeds"]):
            got = np.load(tmp / (f"{name}.npz" if k == 0 else f"{name}.{k}.npz"))
            for i, w in enumerate(_stock(c["path"], feeds)):
                err = scaled_error(got[f"out{i}"], w)
                assert err <= tolerance(w.dtype), f"{name} run {k} output {i}: {err:.3g}"
    assert placed >= 8


def test_dynamic_quantize_lstm_runs_on_the_ep_by_the_quantized_rule(child):
    """Judged as the custom-op door's quantized nodes are (ortops.compare.quantized_problems):
    within float32's tolerance of the dequantized model, and within a margin of ORT's own
    quantization error of its quantized kernel."""
    import test_quantized as tq
    from ortops import reference
    from ortops.compare import quantized_problems

    cases, report, tmp = child
    names = sorted(n for n in cases if n.startswith("quant_"))
    assert len(names) == len(tq.CASES) + 1
    for name in names:
        c, r = cases[name], report["cases"][name]
        assert "error" not in r, f"{name}: {r.get('error')}"
        assert [op for ep, nodes in r["assigned"] if ep == EP for _, op in nodes] == ["DynamicQuantizeLSTM"], name
        got = np.load(tmp / f"{name}.npz")
        feeds = c["feeds"][0]
        exact = reference.lstm(feeds["X"], **c["ref_args"])
        ort_q, ort_f = tq._ort(c["model"], feeds), tq._ort(c["float_model"], feeds)
        for i, (e, q, f) in enumerate(zip(exact, ort_q, ort_f)):
            assert quantized_problems(got[f"out{i}"], e, q, f) == [], f"{name} output {i}"


def test_mutated_standard_nodes_run_right_or_fail_as_in_stock_ort(child):
    """Each mutant: where stock ONNX Runtime runs it, the EP session runs it within tolerance
    (on the EP or left to the CPU); where stock refuses the model, the EP session is refused
    too; where stock fails at run time, the EP session fails or runs (never crashes: the
    child lives)."""
    cases, report, tmp = child
    taken = stock_ok = 0
    for k in range(MUTANTS):
        name = f"mutant{k}"
        c, r = cases[name], report["cases"][name]
        try:
            want = _stock(c["model"], c["feeds"][0])
        except Exception as e:
            stock_error = str(e)
        else:
            stock_error = None
        if r.get("creation_error"):
            assert stock_error is not None, f"{name}: the EP session was refused, stock ran: {r['creation_error']}"
            continue
        taken += bool(_on_ep(r["assigned"]))
        if stock_error is None:
            stock_ok += 1
            assert "error" not in r, f"{name}: {r['error']}"
            got = np.load(tmp / f"{name}.npz")
            for i, w in enumerate(want):
                assert scaled_error(got[f"out{i}"], w) <= 1e-5, f"{name} output {i}"
    assert taken >= MUTANTS // 4 and stock_ok >= MUTANTS // 4, (taken, stock_ok)


def test_weights_fed_at_run_time_follow_each_run(child):
    cases, report, tmp = child
    c, r = cases["fed_weights"], report["cases"]["fed_weights"]
    assert _on_ep(r["assigned"]) == {"gru_node"} and "error" not in r
    runs = [np.load(tmp / ("fed_weights.npz" if k == 0 else f"fed_weights.{k}.npz")) for k in range(3)]
    for k, feeds in enumerate(c["feeds"]):
        for i, w in enumerate(_stock(c["model"], feeds)):
            assert scaled_error(runs[k][f"out{i}"], w) <= 1e-5, f"run {k} output {i}"
    assert not np.array_equal(runs[0]["out0"], runs[1]["out0"])
    assert np.array_equal(runs[0]["out0"], runs[2]["out0"])


def test_threads_sharing_one_session_get_the_serial_results(child):
    _, report, _ = child
    r = report["cases"]["threads"]
    assert _on_ep(r["assigned"]) == {"lstm_node"}
    assert len(r["same"]) == 12 and all(r["same"]), r["same"]


def test_a_bad_feed_fails_naming_the_node_and_the_session_survives(child):
    _, report, _ = child
    r = report["cases"]["bad"]
    assert r["error"] is not None and "ortops: LSTM node 'lstm_node':" in r["error"], r["error"]
    assert "sequence_lens" in r["error"]
    assert r["after"] == [[6, 2, 4, 6], [2, 4, 6]]


def test_a_node_the_ep_refuses_stays_on_the_cpu(child):
    """float64: the EP leaves it (the GPU path takes float32 and float16) and the CPU provider
    gets it, which refuses to run it as stock ONNX Runtime does (its LSTM has no double kernel
    body: "LSTM operator does not support double yet"), not ortops."""
    cases, report, tmp = child
    r = report["cases"]["float64"]
    assert "lstm_node" in _on(r["assigned"], "CPUExecutionProvider") and not _on_ep(r["assigned"])
    with pytest.raises(Exception) as stock:
        _stock(cases["float64"]["model"], cases["float64"]["feeds"][0])
    assert r["error"] is not None and "ortops" not in r["error"]
    assert str(stock.value).split("Status Message:")[-1] in r["error"]


def test_sessions_created_and_dropped_release_their_layers():
    """Each EP session's layers (one per claimed node) go when the session goes: the core
    counts layers alive in this process, which the EP shares with ortops._vk (one library)."""
    import gc

    from ortops import _vk

    m, f = _one_node("LSTM", seed=13)
    before = _vk.core_counters()["layers_alive"]
    for _ in range(5):
        sess = ort.InferenceSession(m.SerializeToString(), sess_options=ortops.ep_session_options(placement="gpu"))
        sess.run(None, f)
        assert _vk.core_counters()["layers_alive"] == before + 1
        del sess
        gc.collect()
        assert _vk.core_counters()["layers_alive"] == before


def test_one_library_exports_both_doors():
    """The EP and the custom ops are one file: get_library_path() is library_path()."""
    import ctypes

    assert ortops.get_library_path() == ortops.library_path()
    lib = ctypes.CDLL(ortops.get_library_path())
    for symbol in ("CreateEpFactories", "ReleaseEpFactory", "RegisterCustomOps"):
        assert hasattr(lib, symbol), symbol


def test_ep_session_options_puts_ortops_first(capsys):
    so = ortops.ep_session_options(mode="exact", placement="gpu")
    m, f = _one_node("GRU", seed=7)
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    sess = ort.InferenceSession(m.SerializeToString(), sess_options=so)
    assert sess.get_providers()[0] == EP
    assert _on_ep([[s.ep_name, [[n.name, n.op_type] for n in s.get_nodes()]]
                   for s in sess.get_provider_graph_assignment_info()]) == {"gru_node"}
    for g, w in zip(sess.run(None, f), _stock(m, f)):
        assert scaled_error(g, w) <= 1e-5
    # The options through plain onnxruntime: a device by index, a bad mode refused at creation.
    dev = ortops.ep.ep_devices()[0]
    so = ort.SessionOptions()
    so.add_provider_for_devices([dev], {"device": dev.ep_metadata["vulkan_index"], "mode": "fast", "placement": "gpu"})
    sess = ort.InferenceSession(m.SerializeToString(), sess_options=so)
    for g, w in zip(sess.run(None, f), _stock(m, f)):
        assert scaled_error(g, w) <= 1e-5
    so = ort.SessionOptions()
    so.add_provider_for_devices([dev], {"mode": "quick"})
    message = "OrtopsExecutionProvider: option 'mode' must be one of 'deterministic', 'exact', 'fast', got 'quick'"
    try:
        fallback = ort.InferenceSession(m.SerializeToString(), sess_options=so)
    except Exception as e:          # onnxruntime 1.32: the session is refused
        assert message in str(e)
    else:                           # 1.29's Python binding prints the EP error and retries on the CPU
        assert message in capsys.readouterr().out and EP not in fallback.get_providers()
    with pytest.raises(ValueError, match="mode must be one of"):
        ortops.ep_session_options(mode="quick")
    with pytest.raises(ValueError, match="no Vulkan device matches 'no such device name'"):
        ortops.ep_session_options(device="no such device name")
