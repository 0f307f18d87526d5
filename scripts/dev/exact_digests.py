"""Exact mode's evidence: SHA-256 digests of exact-mode outputs for a fixed set of seeded cases.

    python -P scripts/dev/exact_digests.py            # rewrite tests/exact_digests.json
    python -P scripts/dev/exact_digests.py --check    # compare with it (exit status 1 on a mismatch)

tests/test_exact_digests.py runs the same cases and requires the committed digests; every
conformant Vulkan device must give them (docs/exact.md). The cases cover every cell (GRU with
linear_before_reset 0 and 1) x direction x precision, with the option sets (sequence_lens,
initial states, peepholes, clip, layout 1, input_forget, no bias) and the activations (the
defaults and every other one, in rotation) spread over them; hidden sizes 7, 33 and 257,
batches 1, 3 and 11.

Inputs depend only on numpy's PCG64 generator (``numpy.random.default_rng(seed)``, whose
bit stream numpy keeps stable across versions and machines), uniform doubles rounded to
float32 (then float16) by numpy: the same bits on every machine. The seed of each case is the
CRC-32 of its name.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np

from ortops.activations import ACTIVATIONS
from ortops.cells import CELLS

ROOT = pathlib.Path(__file__).resolve().parents[2]
DIGESTS = ROOT / "tests" / "exact_digests.json"

# Parameters of the activations that take them (the values tests/_cases.py's ACT_PARAMS uses;
# frozen here: the digests are of these inputs).
PARAMS = {"Affine": (0.7, 0.2), "LeakyRelu": (0.15, None), "ThresholdedRelu": (0.12, None),
          "ScaledTanh": (1.3, 0.8), "HardSigmoid": (0.35, 0.45), "Elu": (0.8, None)}
# The digest cells: the package's cells, GRU once per linear_before_reset.
VARIANTS = {"LSTM": ("LSTM", 0), "GRU": ("GRU", 0), "GRU-lbr": ("GRU", 1), "RNN": ("RNN", 0)}
DIRECTIONS = ("forward", "reverse", "bidirectional")
# Option sets, in rotation over each cell's six cases (direction x precision).
OPTIONS = (("lens", "initial"), ("peepholes", "clip"), ("layout1", "lens"),
           ("input_forget", "initial"), ("no_bias", "clip"), ("lens", "initial", "clip", "peepholes"))
# (hidden, batch, seq, input), in rotation: odd hidden sizes, batch above eight.
SIZES = ((7, 11, 6, 5), (33, 3, 5, 9), (257, 1, 3, 17), (33, 11, 4, 6), (7, 1, 7, 3),
         (257, 3, 2, 10))


@dataclass
class Case:
    name: str
    op: str
    inputs: dict
    attrs: dict = field(default_factory=dict)


def _activations(op, slots, shift, dirs):
    """None (the cell's defaults) at shift 0, else ``slots`` names per direction from the
    rotation (each direction its own set)."""
    if shift == 0:
        return None, None, None
    names = [ACTIVATIONS[(shift + k) % len(ACTIVATIONS)] for k in range(slots * dirs)]
    alphas, betas = [], []
    for k, n in enumerate(names):
        a, b = PARAMS.get(n, (None, None))
        if a is not None:
            alphas.append(a + 0.01 * k)
        if b is not None:
            betas.append(b - 0.01 * k)
    return names, alphas, betas


def cases():
    """The fixed list of digest cases."""
    out, shift = [], 0
    for ci, (cell, (op, lbr)) in enumerate(VARIANTS.items()):
        gates, slots = CELLS[op].gates, len(CELLS[op].slots)
        for i, (direction, dtype) in enumerate((d, t) for d in DIRECTIONS
                                               for t in (np.float32, np.float16)):
            options = set(OPTIONS[(i + ci) % len(OPTIONS)])
            if op != "LSTM":
                options -= {"peepholes", "input_forget"}
            hidden, batch, seq, inp = SIZES[(i + 3 * ci) % len(SIZES)]
            dirs = 2 if direction == "bidirectional" else 1
            name = f"{cell}-{direction}-{np.dtype(dtype).name}-h{hidden}-b{batch}-" + \
                "+".join(sorted(options))
            acts, alphas, betas = _activations(op, slots, shift, dirs)
            shift = (shift + 5) % len(ACTIVATIONS)   # 5 is prime to 11: every shift comes up
            if acts:
                name += "-" + ",".join(acts)
            rng = np.random.default_rng(zlib.crc32(name.encode()))

            def draw(shape, scale):
                return rng.uniform(-scale, scale, shape).astype(np.float32).astype(dtype)

            layout = 1 if "layout1" in options else 0
            t = {"X": draw((seq, batch, inp) if layout == 0 else (batch, seq, inp), 1.0),
                 "W": draw((dirs, gates * hidden, inp), 1.5 / np.sqrt(inp)),
                 "R": draw((dirs, gates * hidden, hidden), 1.5 / np.sqrt(hidden))}
            state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
            B, h0, c0, P = (draw((dirs, 2 * gates * hidden), 0.5), draw(state, 0.8),
                            draw(state, 0.8), draw((dirs, 3 * hidden), 0.8))
            lens = rng.integers(0, seq + 1, batch).astype(np.int32)
            lens[0] = seq
            t["B"] = None if "no_bias" in options else B
            t["sequence_lens"] = lens if "lens" in options else None
            t["initial_h"] = h0 if "initial" in options else None
            attrs = {"direction": direction, "layout": layout}
            if op == "LSTM":
                t["initial_c"] = c0 if "initial" in options else None
                t["P"] = P if "peepholes" in options else None
                attrs["input_forget"] = int("input_forget" in options)
            if op == "GRU":
                attrs["linear_before_reset"] = lbr
            if "clip" in options:
                attrs["clip"] = 0.9
            if acts:
                attrs.update(activations=acts, activation_alpha=alphas, activation_beta=betas)
            out.append(Case(name, op, t, attrs))
    return out


def run(case, device=None):
    """The case's exact-mode outputs (a tuple of arrays)."""
    import ortops

    t = case.inputs
    layer = ortops.RecurrentLayer(case.op, t["W"], t["R"], t["B"], t.get("P"), **case.attrs,
                                  mode="exact", device=device)
    return layer(t["X"], t["sequence_lens"], t["initial_h"], t.get("initial_c"))


def digest(outputs) -> str:
    """SHA-256 of the outputs' bytes (Y, Y_h[, Y_c], each C-ordered), one hex string."""
    h = hashlib.sha256()
    for a in outputs:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def compute(device=None) -> dict:
    return {c.name: digest(run(c, device)) for c in cases()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed digests")
    ap.add_argument("--device", default=None, help="device index or name (default: ortops's)")
    args = ap.parse_args(argv)
    got = compute(args.device)
    if not args.check:
        DIGESTS.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} digests to {DIGESTS}")
        return 0
    want = json.loads(DIGESTS.read_text())
    bad = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
    for k in bad:
        print(f"MISMATCH {k}: got {got.get(k)}, committed {want.get(k)}")
    print(f"{len(got) - len(bad)} of {len(want)} digests match")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
