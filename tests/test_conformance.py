"""Conformance: scripts/ci/conformance.py run in full (small shapes).

test_backend_suite_all_pass and test_differential_suite_all_pass run the same suites as the
conformance job (``python scripts/ci/conformance.py``); they are marked ``conformance``
(tests/conftest.py) and CI's scripts/test_full.sh, which runs the job, deselects them from its
pytest runs (as the quick scripts/test.sh does) so that each suite runs once. The other tests here are unit tests of the script.

The ONNX backend cases and the seeded differential suite must all pass: the
node on the GPU, two runs with identical bits, scaled error within 1e-5
(float32) / 2e-3 (float16) of the oracle.
"""

import collections

import numpy as np
import onnxruntime as ort
import pytest

from _scripts import load_script




conformance = load_script("ci/conformance")


def _failures(results):
    return "\n".join(f"{r.case}: {r.message}" for r in results if not r.passed)


@pytest.fixture(scope="module")
def backend_results():
    cases = conformance.backend_cases()
    return cases, conformance.run(cases)


@pytest.fixture(scope="module")
def differential_cases():
    return conformance.differential_cases()


@pytest.fixture(scope="module")
def differential_results(differential_cases):
    return differential_cases, conformance.run(differential_cases)


def test_backend_suite_all_pass(backend_results):
    cases, results = backend_results
    names = {c.name for c in cases}
    assert len(cases) == 18
    assert {"test_lstm_batchwise", "test_gru_batchwise", "test_simple_rnn_batchwise",
            "test_lstm_with_peepholes", "test_gru_seq_length", "test_rnn_seq_length"} <= names
    assert all(r.passed for r in results), _failures(results)
    assert all(r.identical for r in results)


def test_differential_suite_all_pass(differential_results):
    cases, results = differential_results
    assert all(r.passed for r in results), _failures(results)


def test_differential_suite_covers_the_grid(differential_cases):
    cases = differential_cases
    seen = collections.defaultdict(set)
    for c in cases:
        node = c.model.graph.node[0]
        attrs = {a.name: a for a in node.attribute}
        seen["op"].add(node.op_type)
        seen["direction"].add(attrs["direction"].s.decode())
        seen["layout"].add(attrs["layout"].i if "layout" in attrs else 0)
        seen["dtype"].add(c.dtype)
        seen["path"].add(c.path)
        seen["opset"].add(c.model.opset_import[0].version)
        seen["oracle"].add(c.oracle)
        for name in ("clip", "input_forget", "activation_alpha", "activation_beta"):
            if name in attrs:
                seen["attr"].add(name)
        if "linear_before_reset" in attrs and attrs["linear_before_reset"].i == 1:
            seen["attr"].add("linear_before_reset")
        if node.op_type == "LSTM" and len(node.input) > 7 and node.input[7]:
            seen["attr"].add("peepholes")
        lens = c.feeds.get("sequence_lens")
        if lens is not None and (lens == 0).any():
            seen["lens"].add("zeros")
        for s in ("initial_h", "initial_c"):
            if s in c.feeds:
                seen["state"].add(s)
        if "W" in c.feeds:
            seen["weights"].add("graph input")
        seen["outputs"].add(tuple(o for o in node.output if o))
        for a in attrs.get("activations", None).strings if "activations" in attrs else []:
            seen["activation"].add(a.decode())
    assert seen["op"] == {"LSTM", "GRU", "RNN"}
    assert seen["direction"] == {"forward", "reverse", "bidirectional"}
    assert seen["layout"] == {0, 1} and seen["dtype"] == {"float32", "float16"}
    assert seen["path"] == {"session", "convert"} and seen["opset"] == {7, 14, 22}
    assert seen["attr"] >= {"clip", "input_forget", "activation_alpha", "activation_beta",
                            "linear_before_reset", "peepholes"}
    assert "zeros" in seen["lens"] and seen["state"] == {"initial_h", "initial_c"}
    assert "graph input" in seen["weights"]
    assert {("Y",), ("Y_h",), ("Y_c",), ("Y_h", "Y_c"), ("Y", "Y_h", "Y_c"), ("Y", "Y_h")} <= seen["outputs"]
    assert seen["activation"] >= {"Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu", "ThresholdedRelu",
                                  "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus"}
    assert "ORT CPU, layout-0 float32 equivalent" in seen["oracle"] and "ORT CPU" in seen["oracle"]


def test_equivalent_model_is_a_faithful_oracle():
    # The layout-0 float32 equivalent run by ORT CPU must agree with the
    # float64 reference on a layout-1 case, or the suite would prove nothing.
    from ortops import reference

    case = conformance.node_case("eq", "LSTM", direction="bidirectional", layout=1, seq=4, batch=3, inp=3,
                                 hidden=4, bias=True, peep=True, lens="zeros", h0=True, c0=True,
                                 rng=np.random.default_rng(0))
    got = conformance.oracle_outputs(case)
    a, f = case.reference_args["arrays"], case.feeds
    want = reference.lstm(f["X"], a["W"], a["R"], a["B"], f["sequence_lens"], f["initial_h"], f["initial_c"],
                          a["P"], **case.reference_args["attrs"])
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert conformance.scaled_error(g, w) <= 1e-5


def test_scaled_error_detects_what_it_must():
    e = np.array([1.0, -2.0])
    assert conformance.scaled_error(e, e) == 0.0
    assert conformance.scaled_error(e + [0, 2e-5], e) == pytest.approx(1e-5)
    assert conformance.scaled_error(np.zeros(3), np.zeros(2)) == float("inf")
    assert conformance.scaled_error(np.array([np.nan, 1.0]), np.array([0.0, 1.0])) == float("inf")


def test_a_wrong_result_fails_its_case(inject_fault):
    inject_fault("scale", 1.001)
    case = conformance.node_case("skew", "RNN", seq=3, batch=2, inp=2, hidden=3, bias=True,
                                 rng=np.random.default_rng(1))
    r = conformance.run_case(case)
    assert not r.passed and "above" in r.message


def test_report_table(tmp_path):
    # Two backend cases are enough for the table's format (the suites themselves run in
    # test_*_suite_all_pass and in scripts/ci/conformance.py).
    results = conformance.run(conformance.backend_cases()[:2])
    out = tmp_path / "conformance.md"
    conformance.write_report(results, str(out))
    text = out.read_text()
    assert f"{sum(r.passed for r in results)} of {len(results)} cases passed" in text
    assert text.count("| test_") == len(results)
    assert f"onnxruntime {ort.__version__}" in text
