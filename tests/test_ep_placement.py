"""The plugin execution provider's placement "auto" and default device, from plain onnxruntime
(src/ep/, the core's src/core/placement/placement_policy.hpp, costcache.hpp, calibration.hpp, visible.hpp).

Each case runs in a child process that never imports ortops (plain onnxruntime and the
library's path), as a C# or C++ application would use the EP:

- with a calibration cached (the stub of tests/test_policy.py, under the key the EP computes),
  placement "auto" leaves to the CPU exactly the nodes the core's model says, by ONNX Runtime's
  own graph-assignment report, logs why naming the node, and decides as the Python door does;
- with no calibration, the EP says so and measures one itself (the ORT CPU side through ONNX
  Runtime's C API, ORTOPS_COST_SHAPES=small), caches it under the same key, and places by it; a
  later process reads it and measures nothing;
- CUDA_VISIBLE_DEVICES decides the EP's default device, or the session is refused with the
  rules' error (on lavapipe there is no NVIDIA device: an index or a MIG instance is refused;
  tests/cpp/test_visible.cpp covers the rules on made-up GPU lists);
- under ONNX Runtime's automatic device selection, every policy leaves the recognizer's LSTMs
  where the table of docs/onnxruntime.md says for this machine (a Vulkan GPU: on the EP under
  PREFER_GPU and MAX_PERFORMANCE; lavapipe: on ORT CPU under every policy, by the EP's default
  placement auto there), each EP device on a hardware device of its kind, and no run slower
  than ORT CPU's (within the noise of a shared machine).
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ortops
from _children import run_child
from ortops.compare import scaled_error
from ortops.device import select
from ortops.ort import costmodel, policy
from ortops.ort.nodeconfig import NodeAttrs
from ortops.ort.session import placement
from ortops.visible import assigned_device
from test_policy import _feeds, _stub, _two_node_model

pytestmark = pytest.mark.gpu

EP = "OrtopsExecutionProvider"
CPU = "CPUExecutionProvider"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# argv: library, model, feeds.npz, output folder, runs JSON. Runs the model once per run and
# writes report.json (per run: the assignment, the providers, the run time or the error; the
# EP devices' metadata and hardware device types) and each run's outputs. A run is
# {"options": {...}} (the first ortops EP device with these EP options), {"policy": NAME} (ONNX
# Runtime's automatic device selection under that policy) or {} (no EP: ONNX Runtime CPU);
# "time": N also times N runs (the median, ms).
CHILD = r'''
import json, statistics, sys, time
import numpy as np
import onnxruntime as ort

lib, model, feeds_path, out, runs = sys.argv[1:6]
ort.register_execution_provider_library("ortops", lib)
eps = [d for d in ort.get_ep_devices() if d.ep_name == "OrtopsExecutionProvider"]
report = {"devices": [dict(d.ep_metadata) for d in eps], "hardware": [d.device.type.name for d in eps], "runs": {},
          "imported": sorted(m for m in sys.modules if m.split(".")[0] == "ortops")}
feeds = dict(np.load(feeds_path))
for name, spec in json.loads(runs).items():
    r = report["runs"][name] = {}
    so = ort.SessionOptions()
    so.log_severity_level = 0
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    if "policy" in spec:
        so.set_provider_selection_policy(getattr(ort.OrtExecutionProviderDevicePolicy, spec["policy"]))
    elif "options" in spec:
        so.add_provider_for_devices(eps[:1], spec["options"])
    try:
        # enable_fallback=0: as in C, C++, C# or Java, a refused EP is an error. Otherwise
        # Python's session retries on its fallback providers: with onnxruntime-gpu (the H200's
        # 1.30) the retry took CUDA + CPU and every node went to the CPU, with no error.
        sess = ort.InferenceSession(model, sess_options=so, enable_fallback=0)
    except Exception as e:
        r["error"] = f"{type(e).__name__}: {e}"
        continue
    r["assigned"] = {n.name: s.ep_name for s in sess.get_provider_graph_assignment_info() for n in s.get_nodes()}
    r["providers"] = sess.get_providers()
    np.savez(f"{out}/{name}.npz", *sess.run(None, feeds))
    times = []
    for _ in range(spec.get("time", 0)):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    r["ms"] = statistics.median(times) if times else None
json.dump(report, open(f"{out}/report.json", "w"))
'''


def _child(tmp_path, runs: dict, env_extra: dict, model=None, feeds=None):
    """CHILD's report and output (stdout and stderr: ONNX Runtime's log at verbose level) for
    ``runs`` on ``model`` (default: test_policy's two-node model) fed ``feeds``."""
    model = model or _two_node_model()
    onnx.save(model, str(tmp_path / "model.onnx"))
    np.savez(tmp_path / "feeds.npz", **(feeds if feeds is not None else _feeds()))
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")}
    env.update(env_extra)
    output = run_child(CHILD, ortops.get_library_path(), str(tmp_path / "model.onnx"), str(tmp_path / "feeds.npz"),
                       str(tmp_path), json.dumps(runs), cwd=tmp_path, env=env)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["imported"] == []
    return report, output


def _expected_outputs():
    model = _two_node_model()
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, _feeds())


def _check_outputs(tmp_path, name):
    got = np.load(tmp_path / f"{name}.npz")
    expected = _expected_outputs()
    assert scaled_error(got["arr_0"], expected[0]) <= 1e-5
    assert scaled_error(got["arr_1"], expected[1]) <= 1e-5


def test_auto_leaves_to_the_cpu_what_the_model_says_and_logs_why(tmp_path, monkeypatch):
    cache = tmp_path / "cost.json"
    costmodel.store(_stub(costmodel.key(select())), str(cache))
    report, output = _child(tmp_path, {"auto": {"options": {"placement": "auto"}},
                                       "gpu": {"options": {"placement": "gpu"}}},
                            {costmodel.CACHE_ENV: str(cache)})
    auto, gpu = report["runs"]["auto"], report["runs"]["gpu"]
    assert "error" not in auto and "error" not in gpu, report
    assert auto["assigned"]["big_gru"] == EP and auto["assigned"]["small_rnn"] == "CPUExecutionProvider"
    assert gpu["assigned"]["big_gru"] == EP and gpu["assigned"]["small_rnn"] == EP
    assert ("ortops: RNN node 'small_rnn': left to the next execution provider under placement auto: "
            "ORT CPU: predicted 0.011 ms vs device 1.01 ms") in output
    assert "ortops: GRU node 'big_gru': taken under placement auto: predicted 1.53 ms vs ORT CPU 3.01 ms" in output
    _check_outputs(tmp_path, "auto")
    # The Python door decides the same with the same cache.
    monkeypatch.setenv(costmodel.CACHE_ENV, str(cache))
    where = {p.name: p.where for p in placement(_two_node_model(), policy="auto")}
    assert where == {"big_gru": "gpu", "small_rnn": "cpu"}


def test_without_a_calibration_the_ep_measures_caches_and_places_by_it(tmp_path):
    cache = tmp_path / "sub" / "cost.json"
    report, output = _child(tmp_path, {"auto": {"options": {"placement": "auto"}}},
                            {costmodel.CACHE_ENV: str(cache), "ORTOPS_COST_SHAPES": "small"})
    run = report["runs"]["auto"]
    assert "error" not in run, report
    cal = costmodel.load(costmodel.key(select()), str(cache))
    assert cal is not None, f"the EP cached nothing under {costmodel.key(select())!r}: {cache.read_text()}"
    for side in (cal.device, cal.cpu):
        assert all(np.isfinite(v) and v >= 0 for v in side.astuple())
        assert side.per_run + side.per_step > 0
    model = _two_node_model()
    shapes = {"big_gru": ("GRU", 128, [50, 4, 64], [1, 384, 64]), "small_rnn": ("RNN", 8, [1, 1, 8], [1, 8, 8])}
    for name, (op, hidden, x, w) in shapes.items():
        gpu, why = policy.choose(op, NodeAttrs(hidden_size=hidden), x, w, None, cal)
        assert run["assigned"][name] == (EP if gpu else "CPUExecutionProvider"), (name, why)
        assert f"node '{name}': " in output and why in output
    assert [n.name for n in model.graph.node] == ["big_gru", "small_rnn"]
    _check_outputs(tmp_path, "auto")
    # It said so first, on ONNX Runtime's log at warning level: the device, the points, the cache.
    assert f"calibrating the cost model for {select().name} once" in output and f"cached in {cache} " in output
    # A later process reads the cache: it measures nothing, says nothing of it, places alike.
    stored = cache.read_text()
    report, output = _child(tmp_path, {"auto": {"options": {"placement": "auto"}}},
                            {costmodel.CACHE_ENV: str(cache), "ORTOPS_COST_SHAPES": "small"})
    assert "calibrat" not in output and cache.read_text() == stored
    assert report["runs"]["auto"]["assigned"] == run["assigned"]


def _assignment(value):
    """What the Python door's rules say CUDA_VISIBLE_DEVICES=value assigns here: a device, None
    (nothing), or the error's message."""
    try:
        return assigned_device({"CUDA_VISIBLE_DEVICES": value})
    except ValueError as e:
        return str(e)


@pytest.mark.parametrize("value", ["0", "MIG-5f2a1c3e-aaaa-bbbb-cccc-dddddddddddd", ""])
def test_cuda_visible_devices_chooses_the_ep_device_or_is_refused_clearly(tmp_path, value):
    # placement gpu: the device's default placement (auto on lavapipe) would calibrate first.
    report, output = _child(tmp_path, {"default": {"options": {"placement": "gpu"}},
                                       "explicit": {"options": {"device": select().uuid, "placement": "gpu"}}},
                            {"CUDA_VISIBLE_DEVICES": value})
    want = _assignment(value)
    default, explicit = report["runs"]["default"], report["runs"]["explicit"]
    assert "error" not in explicit, explicit   # an explicit device option needs no assignment
    if isinstance(want, str):
        assert want.removeprefix("ortops: ") in default.get("error", ""), (want, default)
        # the factory warns already when it lists the devices (ORT's log, warning level)
        assert f"{want} (a session without the EP option 'device' will be refused)" in output
        return
    assert "error" not in default, default
    first = report["devices"][0]["vulkan_uuid"]
    assert first == (want.uuid if want is not None else select().uuid)


#: ONNX Runtime's automatic device selection policies (SessionOptions.set_provider_selection_policy).
POLICIES = ("PREFER_CPU", "PREFER_NPU", "PREFER_GPU", "MAX_PERFORMANCE", "MAX_EFFICIENCY", "MIN_OVERALL_POWER",
            "DEFAULT")
#: Where the recognizer's two LSTMs go, by machine (docs/onnxruntime.md, "Automatic device
#: selection"): under each policy, and with the EP device added by hand without options
#: ("explicit"). ONNX Runtime's policies pick EP devices by hardware device type
#: (provider_policy_context.cc): PREFER_GPU and MAX_PERFORMANCE the first GPU device's, every
#: other the first CPU device's (PREFER_NPU, MAX_EFFICIENCY and MIN_OVERALL_POWER an NPU's first,
#: where there is one). The factory puts a Vulkan GPU's EP device on a GPU hardware device and
#: lavapipe's on the CPU one, where the EP's default placement is auto: the cost model, with
#: ORT CPU faster, leaves the LSTMs to it.
TABLE = {
    "GPU": {**dict.fromkeys(POLICIES, CPU), "PREFER_GPU": EP, "MAX_PERFORMANCE": EP, "explicit": EP},
    "lavapipe": {**dict.fromkeys(POLICIES, CPU), "explicit": CPU},
}


def _row(report) -> str:
    """The table's row for this machine: "GPU" where the EP offers a Vulkan GPU, "lavapipe"
    where it offers only CPU implementations of Vulkan. Under the GPU machine's run
    (ORTOPS_GPU_MACHINE=1, scripts/gpu_machine.sh) a machine without a Vulkan GPU fails."""
    kinds = {d.uuid: d.type for d in ortops.devices()}
    types = [kinds[m["vulkan_uuid"]] for m in report["devices"]]
    assert types, "no ortops EP device"
    for vulkan_type, hardware in zip(types, report["hardware"]):
        assert hardware == ("CPU" if vulkan_type == "cpu" else "GPU"), (types, report["hardware"])
    row = "lavapipe" if set(types) == {"cpu"} else "GPU"
    if os.environ.get("ORTOPS_GPU_MACHINE", "") not in ("", "0"):
        assert row == "GPU", f"ORTOPS_GPU_MACHINE is set but the EP offers no Vulkan GPU (devices: {types})"
    return row


def test_selection_policies_leave_the_lstms_where_they_run_fastest(tmp_path):
    recognizer = os.path.join(ROOT, "models", "recognizer.onnx")
    assert os.path.exists(recognizer), "models/recognizer.onnx: run scripts/setup.sh"
    feeds = {"X": np.random.default_rng(3).uniform(-1, 1, (80, 1, 256)).astype(np.float32)}
    runs = {**{p: {"policy": p} for p in POLICIES}, "explicit": {"options": {}}, "ORT CPU": {}}
    env = {costmodel.CACHE_ENV: str(tmp_path / "cost.json"), "ORTOPS_COST_SHAPES": "small"}
    report, _ = _child(tmp_path, runs, env, model=onnx.load(recognizer), feeds=feeds)
    row = TABLE[_row(report)]
    expected = np.load(tmp_path / "ORT CPU.npz")
    for name, want in row.items():
        r = report["runs"][name]
        assert "error" not in r, (name, r)
        lstms = {n: ep for n, ep in r["assigned"].items() if n in ("lstm1", "lstm2")}
        assert lstms == {"lstm1": want, "lstm2": want}, (name, r["providers"], r["assigned"])
        got = np.load(tmp_path / f"{name}.npz")
        for key in expected.files:
            assert scaled_error(got[key], expected[key]) <= 1e-5, (name, key)

