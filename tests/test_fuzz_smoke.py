"""Fixed-seed, time-bounded runs of scripts/ci/fuzz_python.py (docs/security.md): mutated models
through load_model / rewrite / InferenceSession, and mutated weights, attributes and feeds
through RecurrentLayer and ortops.lstm / gru / rnn. Each run is the script's own driver: a
worker process with a bounded address space, so that a crash, a hang or an attempt to
materialise a huge array is caught and named instead of taking pytest down. A case passes if it
succeeds or raises a clean error (ValueError and its subclasses, onnx's ValidationError,
RuntimeError, ONNX Runtime's exceptions); findings already reported (the script's KNOWN) are
printed, not failed. Needs a Vulkan device (lavapipe will do): about 40 s there. The long
version is ``python scripts/ci/fuzz_python.py 600``.
"""

from __future__ import annotations

import json

from _scripts import load_script

fuzz_python = load_script("ci/fuzz_python")


def _run(tmp_path, part: str, seconds: int, seed: int) -> dict:
    out = tmp_path / part
    status = fuzz_python.main([str(seconds), "--part", part, "--seed", str(seed), "--out", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    for key, cases in summary["known"].items():
        print(f"known finding {key}: {len(cases)} case(s), e.g. {cases[0]['what']}: {fuzz_python.KNOWN[key]}")
    findings = {k: v[:3] for k, v in summary["findings"].items()}
    assert not findings and not summary["crashes"], (findings, summary["crashes"])
    assert status == 0
    return summary


def test_mutated_models_give_clean_errors(tmp_path):
    summary = _run(tmp_path, "models", 25, seed=11)
    assert summary["cases"] >= 30, summary["cases"]
    assert summary["sessions"] >= 2
    assert summary["clean_errors"] > 0


def test_mutated_feeds_give_clean_errors_and_leave_the_layers_right(tmp_path):
    # The layer bench checks every 25 cases and at the end that each layer still gives the
    # bits of its first run, which match ortops.reference.
    summary = _run(tmp_path, "layer", 15, seed=12)
    assert summary["cases"] >= 100, summary["cases"]
    assert summary["ok"] > 0 and summary["clean_errors"] > 0


# Device-free checks of what the fuzzer found in ortops/validation.py (tests/conftest.py's
# NO_DEVICE lists these two by name).


def test_huge_zero_stride_views_are_refused_before_any_copy():
    import numpy as np
    import pytest

    from ortops import validation
    from ortops.limits import UnsupportedLayerError

    H, I = 1 << 20, 3
    W = np.broadcast_to(np.float32(0.1), (1, 4 * H, I))
    R = np.broadcast_to(np.float32(0.1), (1, 4 * H, H))    # 16 TiB if materialised
    with pytest.raises(UnsupportedLayerError, match=r"LSTM: R of shape \[1, 4194304, 1048576\] is 17592186044416 "
                                                    r"bytes, more than any Vulkan device binds"):
        validation.check_layer("LSTM", W, R)
    spec = validation.check_layer("LSTM", np.zeros((1, 20, I), np.float32), np.zeros((1, 20, 5), np.float32))
    X = np.broadcast_to(np.float32(0.5), (1 << 31, 2, I))
    with pytest.raises(UnsupportedLayerError, match=r"LSTM: X of shape \[2147483648, 2, 3\] is 51539607552 bytes"):
        validation.check_inputs(spec, X)
    h0 = np.broadcast_to(np.float32(0), (1, 2, 5))
    assert validation.check_inputs(spec, np.zeros((4, 2, I), np.float32), initial_h=h0) == (4, 2)


def test_activations_of_the_wrong_type_are_a_value_error():
    import numpy as np
    import pytest

    from ortops import validation

    W, R = np.zeros((1, 1, 2), np.float32), np.zeros((1, 1, 1), np.float32)
    for bad in (5, 1.5, object()):
        with pytest.raises(ValueError, match="RNN: activations must be a list of names, got"):
            validation.check_layer("RNN", W, R, activations=bad)
    assert validation.check_layer("RNN", W, R, activations="relu").activations[0][0].name == "Relu"
