"""Exact mode gives the committed bits: SHA-256 digests of exact-mode outputs for the fixed
seeded cases of scripts/dev/exact_digests.py, compared with tests/exact_digests.json.

The digests were produced on lavapipe; the same test runs on the H200 (scripts/gpu_machine.sh,
stage test) against the same file. Each case is also checked against the float64 reference
within the tolerances (docs/design.md, 'Tolerances'), so the committed bits are right ones.
Regenerate with ``python -P scripts/dev/exact_digests.py`` only after a deliberate change to the
exact kernels (docs/exact.md says what changes them).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ortops.compare import TOLERANCE, scaled_error
from _cases import REFERENCE
from _scripts import ROOT, load_script

digests = load_script("dev/exact_digests")
CASES = digests.cases()
COMMITTED = json.loads((ROOT / "tests" / "exact_digests.json").read_text())


def test_cases_cover_every_cell_direction_precision_option_and_activation():
    names = [c.name for c in CASES]
    assert len(set(names)) == len(names) == len(COMMITTED)
    assert set(names) == set(COMMITTED)
    for cell in digests.CELLS:
        for direction in digests.DIRECTIONS:
            for dtype in ("float32", "float16"):
                assert any(n.startswith(f"{cell}-{direction}-{dtype}-") for n in names)
    acts = {a for c in CASES for a in c.attrs.get("activations", ())}
    assert acts == set(digests.ACTIVATIONS)
    assert {c.op for c in CASES if "activations" not in c.attrs} == {"LSTM", "GRU", "RNN"}
    options = {o for n in names for o in n.split("-h")[1].split("-")[2].split("+")}
    assert options >= {"lens", "initial", "peepholes", "clip", "layout1", "input_forget", "no_bias"}
    assert {c.inputs["X"].shape[1 - c.attrs["layout"]] for c in CASES} >= {1, 3, 11}
    assert {c.inputs["R"].shape[-1] for c in CASES} == {7, 33, 257}


def test_inputs_are_reproducible():
    # The inputs depend on numpy's PCG64 stream only: two draws agree, and known values pin
    # the raw stream and the uniform double drawn from it (numpy's (raw >> 11) * 2^-53).
    again = digests.cases()
    for a, b in zip(CASES, again):
        for k, v in a.inputs.items():
            assert (v is None and b.inputs[k] is None) or v.tobytes() == b.inputs[k].tobytes()
    assert np.random.default_rng(1).bit_generator.random_raw() == 9441442522235856127
    assert np.random.default_rng(1).uniform(-1, 1) == float.fromhex("0x1.835ef9bc91700p-6")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_exact_digest(case):
    out = digests.run(case)
    expected = REFERENCE[case.op](**case.inputs, **case.attrs)
    for name, got, ref in zip(("Y", "Y_h", "Y_c"), out, expected):
        err = scaled_error(got, ref)
        assert err <= TOLERANCE[got.dtype], f"{name}: scaled error {err:.3g}"
    assert digests.digest(out) == COMMITTED[case.name], (
        f"{case.name}: exact-mode bits differ from the committed digest")
