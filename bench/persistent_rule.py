#!/usr/bin/env python3
"""The persistent kernel's GPU rule (PERSISTENT_STEPS in src/core/rnn/variants.hpp), measured: per
layer, what the tables choose beside the persistent kernel forced off
(`ortops.variants.PERSISTENT_STEPS = False`) and forced on (`True`), alternated in rounds in one
process, GPU time from the layers' timestamps, the bits of all three compared (they must agree:
exit status 1 otherwise).

    python3 -P bench/persistent_rule.py --out DIR [--rounds 3] [--runs 100]
        [--layer CELL,SEQ,BATCH,INPUT,HIDDEN,DTYPE ...]

Bidirectional layers, seeded weights. Writes DIR/persistent_rule.json and .md; prints the table.
"""
from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

import ortops
import ortops.device
from ortops import variants
from ortops.tools.bench import write_report
from ortops.tools.measure import weights

LAYERS = ["LSTM,48,8,192,96,float16", "LSTM,48,8,192,96,float32", "LSTM,48,8,192,64,float32",
          "LSTM,48,8,192,32,float32", "LSTM,48,1,192,64,float32", "LSTM,48,1,192,96,float32",
          "LSTM,48,4,192,96,float32", "LSTM,80,1,128,128,float32", "LSTM,80,8,128,128,float32",
          "LSTM,80,1,256,256,float16", "LSTM,80,6,256,256,float32", "LSTM,80,8,256,256,float16",
          "LSTM,80,8,256,256,float32", "LSTM,80,1,384,384,float32", "LSTM,80,8,384,384,float32",
          "GRU,80,1,256,256,float32", "GRU,80,4,256,256,float16", "GRU,80,8,256,256,float32"]


ENGINES = {"table": variants.TABLE, "off": False, "persistent": True}


def _engine(name: str) -> None:
    variants.PERSISTENT_STEPS = ENGINES[name]


def _kernels(layer) -> list:
    return sorted({p.steps for pool in layer._plans.values() for p in pool.free})


def measure(spec: str, rounds: int, runs: int) -> dict:
    cell, seq, batch, inp, hidden, dtype = spec.split(",")
    seq, batch, inp, hidden = map(int, (seq, batch, inp, hidden))
    W, R, B = weights(cell, inp, hidden, 2, np.dtype(dtype))
    X = np.random.default_rng(1).standard_normal((seq, batch, inp)).astype(dtype)
    layers, bits, gpu = {}, {}, {name: [] for name in ENGINES}
    for name in gpu:
        _engine(name)
        layers[name] = ortops.RecurrentLayer(cell, W, R, B, direction="bidirectional", timestamps=True)
        bits[name] = [np.asarray(y).tobytes() for y in layers[name](X)]
    for _ in range(rounds):
        for name, layer in layers.items():
            _engine(name)
            times = []
            for _ in range(runs):
                layer(X)
                times.append(layer.last_gpu_time_ms)
            gpu[name].append(statistics.median(times))
    _engine("table")
    row = dict(layer=f"{cell} {seq}x{batch}x{inp}->{hidden}", dtype=dtype,
               same_bits=bits["table"] == bits["persistent"] == bits["off"],
               kernels={name: _kernels(layer) for name, layer in layers.items()})
    for name, values in gpu.items():
        row[name] = [statistics.median(values), min(values), max(values)]
    return row


def markdown(rows: list) -> str:
    lines = ["| layer | dtype | table GPU ms | persistent off GPU ms | persistent forced GPU ms | the table's kernels "
             "| same bits |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = " | ".join(f"{r[n][0]:.4f} ({r[n][1]:.4f}–{r[n][2]:.4f})" for n in ENGINES)
        lines.append(f"| {r['layer']} | {r['dtype']} | {cells} | {', '.join(r['kernels']['table'])} "
                     f"| {'yes' if r['same_bits'] else 'NO'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--layer", action="append", default=None, metavar="CELL,SEQ,BATCH,INPUT,HIDDEN,DTYPE",
                    help="a layer (instead of the list above)")
    a = ap.parse_args(argv)
    rows = [measure(spec, a.rounds, a.runs) for spec in (a.layer or LAYERS)]
    text = markdown(rows)
    print(text)
    write_report(a.out, "persistent_rule", dict(device=str(ortops.device.select(None)), rows=rows), text)
    if not all(r["same_bits"] for r in rows):
        print("persistent_rule: NOT the same bits", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
