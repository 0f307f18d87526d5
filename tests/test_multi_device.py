"""Sessions on several Vulkan devices at once in one process (docs/serving.md): each device has
its own context (ortops.device.context), each session its own layers on the device it was
pinned to, and every result equals the serial result of the same session on the same device.

These run on whatever devices exist: on lavapipe (one device) the "devices" are one, pinned by
UUID, with several sessions and threads on it; on the two-GPU machine (scripts/gpu_machine.sh,
stage test) the same code puts sessions on both GPUs at once.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import ortops
from ortops import device as device_mod

from _cases import same_bits
from _scripts import load_script

THREADS_PER_DEVICE = 2
RUNS = 4


def _model():
    return load_script("make_models").recognizer(seq=6, inp=5, hidden=4, classes=3, seed=11)


def _feeds(n, seed):
    rng = np.random.default_rng(seed)
    return [{"X": rng.uniform(-1, 1, (6, 2, 5)).astype(np.float32)} for _ in range(n)]


def test_sessions_pinned_by_uuid_live_on_their_devices_at_once():
    """A session per device, all alive together, each pinned by ``GPU-<uuid>``: every layer
    is on the device asked for, through that device's own context, and each runs."""
    found = ortops.devices()
    sessions = {d.index: ortops.InferenceSession(_model(), providers=["CPUExecutionProvider"],
                                                 device="GPU-" + d.uuid, require_gpu=True) for d in found}
    for d in found:
        sess = sessions[d.index]
        configs = sess.node_configs
        assert len(configs) == 2 and all(c.device == d.uuid for c in configs)   # the two LSTM nodes
        out = sess.run(None, _feeds(1, seed=d.index)[0])
        assert out[0].shape == (6, 2, 3) and np.isfinite(out[0]).all()
    # Each device's own context. Asked for here: the sessions' EP takes its contexts from the
    # native core directly, and the report that would have made the Python door's context is
    # built on first read (it was in a shard where no earlier test had: KeyError, gate 8).
    assert len({id(device_mod.context(d)[1]) for d in found}) == len(found)


def test_threads_with_a_session_per_device_equal_serial():
    """Every device gets THREADS_PER_DEVICE threads, each with its own session pinned to it;
    all start together; each result equals that device's serial result bit for bit."""
    model = _model()
    found = ortops.devices()
    feeds = _feeds(RUNS, seed=5)
    serial = {}
    for d in found:
        sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"], device=d, require_gpu=True)
        serial[d.index] = [sess.run(None, f) for f in feeds]
    jobs = [d for d in found for _ in range(THREADS_PER_DEVICE)]
    start = threading.Barrier(len(jobs))

    def work(d):
        sess = ortops.InferenceSession(model, providers=["CPUExecutionProvider"], device=d.uuid, require_gpu=True)
        start.wait()
        return d, [sess.run(None, f) for f in feeds]

    with ThreadPoolExecutor(len(jobs)) as pool:
        results = [f.result() for f in [pool.submit(work, d) for d in jobs]]
    assert len(results) == len(jobs)
    for d, outs in results:
        for i, out in enumerate(outs):
            assert same_bits(out, serial[d.index][i]), f"{d}: run {i} differs from its serial result"


def test_converted_model_names_its_device_by_uuid():
    """A converted model keeps its device in each node's config: by UUID, since GPUs of one
    model share a name (by name, every node would go to the first of them); it runs there."""
    import onnx
    import onnxruntime as ort

    from ortops.ort.nodeconfig import NodeConfig

    d = ortops.devices()[-1]
    converted = ortops.convert(_model(), device=d)
    configs = [NodeConfig.from_json(onnx.helper.get_attribute_value(a).decode())
               for n in converted.graph.node if n.domain.startswith("ortops") for a in n.attribute
               if a.name == "config"]
    assert len(configs) == 2 and {c.device for c in configs} == {d.uuid}
    sess = ort.InferenceSession(converted.SerializeToString(), ortops.register(), providers=["CPUExecutionProvider"])
    feed = _feeds(1, seed=3)[0]
    want = ortops.InferenceSession(_model(), providers=["CPUExecutionProvider"], device=d).run(None, feed)
    assert same_bits(sess.run(None, feed), want)


def test_multi_gpu_script_runs_what_the_devices_allow(tmp_path):
    """bench/multi_gpu.py (the two-GPU measurement) on whatever is here: threads and a
    process per device, every run equal to its device's serial result; with one device the
    two-device rows are reported as not run."""
    import json
    import os
    import subprocess
    import sys

    import onnx

    from _scripts import ROOT

    model = tmp_path / "small.onnx"
    onnx.save(_model(), str(model))
    done = subprocess.run([sys.executable, "-P", str(ROOT / "bench" / "multi_gpu.py"), "--model", str(model),
                           "--batch", "2", "--threads", "1,2", "--seconds", "0.3", "--warmup", "0.1",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "multi_gpu.json").read_text())
    ran = [r for r in report["rows"] if "runs" in r]
    assert {(r["mode"], r["threads_per_device"]) for r in ran} >= {("threads", 1), ("threads", 2),
                                                                   ("processes", 1), ("processes", 2)}
    assert all(r["runs"] > 0 and r["mismatches"] == 0 for r in ran)
    assert all(r.get("pinning", "ok") == "ok" for r in ran)
    if len(ortops.devices()) == 1:
        # The kind is how the script found its devices: "nvidia" where nvidia-smi lists them
        # (a one-GPU NVIDIA machine), "vulkan" elsewhere.
        assert [r["not_run"] for r in report["rows"] if "not_run" in r] == \
            [f"only 1 device(s) ({report['kind']}) here"] * 2 and report["kind"] in ("nvidia", "vulkan")
    assert "| threads | 1 | 1 |" in (tmp_path / "multi_gpu.md").read_text()
