"""Feeds for the models the EP is checked with, in one place for the tests
(tests/test_ep.py, tests/test_session_ep.py) and the C++ example's data
(examples/cpp/make_data.py), so that both run the same inputs.

- :func:`stored_feeds`: a model of tests/models with its stored inputs (the .npz beside it,
  "input.<name>"), else seeded uniform float32 ones of its declared shapes.
- :func:`silero_cases`: silero-vad's models (the wheel scripts/setup.sh downloads into
  build/deps; LSTMs inside If branches in most), each fed a speech-like frame with its context
  as its wrapper does and a small state; silero_vad also at 8 kHz (the If's other branch).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def stored_feeds(model_path: str) -> dict:
    """The stored inputs beside the model, else seeded random ones of the declared shapes (a
    dynamic dimension 3)."""
    npz = model_path[:-5] + ".npz"
    if os.path.exists(npz):
        z = np.load(npz)
        return {k[len("input."):]: z[k] for k in z.files if k.startswith("input.")}
    import onnx

    rng = np.random.default_rng(3)
    feeds = {}
    for i in onnx.load(model_path).graph.input:
        dims = [d.dim_value or 3 for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.uniform(-1, 1, dims).astype(np.float32)
    return feeds


def _stream_bench():
    spec = importlib.util.spec_from_file_location("_ortops_stream_bench",
                                                  os.path.join(ROOT, "bench", "stream_bench.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def silero_cases(folder: str) -> dict:
    """{model name: (path, [feeds at 16 kHz, and at 8 kHz for silero_vad])}, the models
    extracted into ``folder``. FileNotFoundError when the wheel is absent."""
    import onnxruntime as ort

    bench = _stream_bench()
    models = bench.extract_models(bench.find_wheel(), folder)
    rng = np.random.default_rng(12)
    sig = {sr: bench.signal(0.2, sr) for sr in bench.FRAMES}
    cases = {}
    for name, path in sorted(models.items()):
        inputs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_inputs()
        feed_sets = []
        for sr in ([16000, 8000] if name == "silero_vad" else [16000]):
            frame, context = bench.FRAMES[sr]
            rows = 3 if "sequence" in name else 1
            f = {}
            for i in inputs:
                if i.name == "sr":
                    f["sr"] = np.array(sr, np.int64)
                elif i.name == "input":
                    f["input"] = np.stack([sig[sr][k * frame:k * frame + frame + context] for k in range(rows)])
                else:
                    f[i.name] = rng.uniform(-0.5, 0.5, [d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
            feed_sets.append(f)
        cases[name] = (path, feed_sets)
    return cases
