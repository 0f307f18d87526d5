"""No silent fallback (issue 44, item 1): a device selection that matches no device is an error
naming what was asked and listing the devices there are, at every door (``ortops run
--device``, ``ORTOPS_DEVICE``, ``device=`` of every API); where there is no Vulkan device at
all and none is named, a session and ``ortops run`` run on ONNX Runtime CPU and say so;
``ortops run`` names where each node ran, and points to docs/special_values.md where
``--compare`` finds a difference in special values."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortops
from ortops.ort import session as session_mod
from ortops.tools import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECOGNIZER = ROOT / "models" / "recognizer.onnx"


def _listed(text: str) -> None:
    """The message lists every device there is: index, name, type and UUID."""
    found = ortops.devices()
    assert found
    for d in found:
        assert f"[{d.index}] {d.name} ({d.type}) uuid {d.uuid}" in text, text


def _rnn(activation: str = "Tanh", seed: int = 0) -> onnx.ModelProto:
    """A one-node forward RNN, hidden 3 over inputs of 2, constant positive weights."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.uniform(0.1, 0.5, s).astype(np.float32), n)
             for n, s in (("W", (1, 3, 2)), ("R", (1, 3, 3)))]
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], name="rnn", hidden_size=3, activations=[activation])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 1, 2])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


# A name no device has (on the GPU machine "nvidia" names its card).
ABSENT = "no-such-gpu"


@pytest.mark.parametrize("argv, env, asked", [
    (["--device", ABSENT], None, rf"no Vulkan device matches '{ABSENT}' \(an index"),
    (["--device", "7"], None, r"no Vulkan device with index 7;"),
    ([], ABSENT, rf"no Vulkan device matches '{ABSENT}' .*\(from ORTOPS_DEVICE\);"),
])
def test_run_with_a_device_matching_none_is_one_line_with_status_2(argv, env, asked, monkeypatch, capsys):
    if env is None:
        monkeypatch.delenv("ORTOPS_DEVICE", raising=False)
    else:
        monkeypatch.setenv("ORTOPS_DEVICE", env)
    assert cli.main(["run", str(RECOGNIZER), *argv]) == 2
    out = capsys.readouterr()
    assert out.out == ""                              # nothing ran, not even on the CPU
    assert out.err.startswith("ortops: error: ") and out.err.count("\n") == 1, out.err
    assert re.search(asked, out.err), out.err
    _listed(out.err)


def _doors(model, W, R):
    X = np.zeros((4, 1, 2), np.float32)
    return {
        "lstm": lambda d: ortops.lstm(X, np.zeros((1, 12, 2), np.float32), np.zeros((1, 12, 3), np.float32), device=d),
        "gru": lambda d: ortops.gru(X, np.zeros((1, 9, 2), np.float32), np.zeros((1, 9, 3), np.float32), device=d),
        "rnn": lambda d: ortops.rnn(X, W, R, device=d),
        "RecurrentLayer": lambda d: ortops.RecurrentLayer("RNN", W, R, device=d),
        "InferenceSession": lambda d: ortops.InferenceSession(model, device=d),
        "convert": lambda d: ortops.convert(model, device=d),
        "placement": lambda d: session_mod.placement(model, device=d),
    }


@pytest.mark.parametrize("door", ["lstm", "gru", "rnn", "RecurrentLayer", "InferenceSession", "convert", "placement"])
def test_every_api_refuses_a_device_matching_none(door, monkeypatch):
    monkeypatch.delenv("ORTOPS_DEVICE", raising=False)
    m = _rnn()
    W, R = (numpy_helper.to_array(t) for t in m.graph.initializer)
    call = _doors(m, W, R)[door]
    with pytest.raises(ValueError, match=f"no Vulkan device matches '{ABSENT}'") as info:
        call(ABSENT)
    _listed(str(info.value))
    with pytest.raises(ValueError, match="no Vulkan device with index 7;"):
        call(7)
    monkeypatch.setenv("ORTOPS_DEVICE", ABSENT)
    with pytest.raises(ValueError, match=rf"'{ABSENT}' .*\(from ORTOPS_DEVICE\)"):
        call(None)


def test_a_converted_model_names_its_device_by_uuid():
    dev = ortops.devices()[0]
    converted = ortops.convert(_rnn(), device=str(dev.index))
    assert dev.uuid in str(converted.graph.node)


def test_run_says_where_each_node_ran(tmp_path, capsys):
    path = tmp_path / "rnn.onnx"
    onnx.save(_rnn(), str(path))
    assert cli.main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    name = ortops.InferenceSession(str(path)).device.name
    assert re.search(rf"ortops session: [\d.]+ ms \(1 recurrent node on the Vulkan device {re.escape(name)}\)", out), out


def test_run_a_model_without_recurrent_node_says_so(tmp_path, capsys):
    node = helper.make_node("Add", ["X", "X"], ["Y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    path = tmp_path / "add.onnx"
    onnx.save(m, str(path))
    assert cli.main(["run", str(path), "--compare"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"ortops session: [\d.]+ ms \(the model has no recurrent node: every node ran on ONNX "
                     r"Runtime CPU, none on a Vulkan device\)", out), out
    assert "GPU path" not in out


def test_compare_points_to_the_special_values_rule(tmp_path, capsys):
    # Relu passes +Inf through: both engines give +Inf at the same places, where the scaled
    # error's Inf - Inf is NaN, above any tolerance. The pointer says why and where to read on;
    # a difference in finite values (test_cli's fault injection) gets none.
    path = tmp_path / "relu.onnx"
    onnx.save(_rnn("Relu"), str(path))
    X = np.full((4, 1, 2), 0.5, np.float32)
    X[1, 0, 0] = np.inf
    np.save(tmp_path / "x.npy", X)
    assert cli.main(["run", str(path), "--input", f"X={tmp_path / 'x.npy'}", "--compare"]) == 1
    out = capsys.readouterr().out
    assert "Y: scaled error nan (tolerance 1e-05) ABOVE TOLERANCE" in out, out
    assert re.search(r"\n    the difference is in special values \(NaN, \+-Inf\).*docs/special_values\.md", out), out


_CHILD = """
import logging, sys
import numpy as np
import ortops

path = sys.argv[1]
assert ortops.devices() == []
sess = ortops.InferenceSession(path)
print("device", sess.device, "where", [p.where for p in sess.placement], "providers", sess.get_providers())
print("shape", sess.run(None, {"X": np.zeros((4, 1, 2), np.float32)})[0].shape)
try:
    ortops.InferenceSession(path, require_gpu=True)
except RuntimeError as e:
    print("refused:", e)
"""


def _no_device_env(tmp_path) -> dict:
    """This process's environment with no Vulkan driver for the loader to find (lavapipe hidden)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ORTOPS_DEVICE", "PYTHONSTARTUP")}
    env["VK_ICD_FILENAMES"] = env["VK_DRIVER_FILES"] = str(tmp_path / "no_driver.json")
    return env


def test_no_vulkan_device_runs_on_onnxruntime_cpu_and_says_so(tmp_path):
    path = tmp_path / "rnn.onnx"
    onnx.save(_rnn(), str(path))
    env = _no_device_env(tmp_path)
    proc = subprocess.run([sys.executable, "-P", "-c", _CHILD, str(path)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "device None where ['cpu'] providers ['CPUExecutionProvider']" in proc.stdout
    assert "shape (4, 1, 1, 3)" in proc.stdout
    assert ("no Vulkan device with a compute queue was found" in proc.stderr
            and "ortops.InferenceSession runs every node of the model on ONNX Runtime CPU" in proc.stderr), proc.stderr
    assert re.search(r"refused: ortops.InferenceSession\(require_gpu=True\): ortops: no Vulkan device with a compute "
                     r"queue was found.*mesa-vulkan-drivers", proc.stdout), proc.stdout
    run = subprocess.run([sys.executable, "-P", "-m", "ortops", "run", str(path)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"ortops session: [\d.]+ ms \(1 recurrent node on ONNX Runtime CPU: #0 'rnn' \(ortops: "
                     r"no Vulkan device", run.stdout), run.stdout
    assert "runs every node of the model on ONNX Runtime CPU" in run.stderr, run.stderr
    named = subprocess.run([sys.executable, "-P", "-m", "ortops", "run", str(path), "--device", "0"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert named.returncode == 2 and named.stdout == ""
    assert named.stderr.startswith("ortops: error: no Vulkan device with index 0; devices: none (no Vulkan device")
