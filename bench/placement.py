"""The placement policy on this machine: the cost model's calibration, the "auto" decisions for
the sample models, and a sweep of LSTM shapes where the predicted winner is checked against the
measured one.

    python bench/placement.py [--models models] [--quick] [--recalibrate]

Run by ``STAGE=placement bash scripts/gpu_machine.sh`` on the GPU machine (docs/onnxruntime.md,
"Placement policy", records what it printed there). ``--quick``: small calibration shapes and a
small sweep (lavapipe, CI).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

import numpy as np

from ortops.timing import median_s


def sweep(device, cal, shapes, budget: float) -> int:
    """Predicted and measured times of one forward LSTM per shape; returns how many winners the
    model got wrong."""
    from ortops.ort import costmodel

    print(f"{'seq':>5} {'batch':>5} {'hidden':>6}  {'pred dev':>9} {'pred cpu':>9}  {'meas dev':>9} "
          f"{'meas cpu':>9}  winner (predicted/measured)")
    wrong = 0
    rng = np.random.default_rng(0)
    runners = {}
    for seq, batch, hidden in shapes:
        w = costmodel.work("LSTM", seq, batch, hidden, hidden, 1)
        pd, pc = cal.device.predict(w), cal.cpu.predict(w)
        if hidden not in runners:
            runners[hidden] = (costmodel._device_runner(device, hidden, hidden), costmodel._cpu_runner(hidden, hidden))
        dev_run, cpu_run = runners[hidden]
        x = rng.uniform(-1, 1, (seq, batch, hidden)).astype(np.float32)
        md, mc = (median_s(r, 20, budget_s=budget) for r in (lambda: dev_run(x), lambda: cpu_run(x)))
        pw, mw = ("device" if pd <= pc else "cpu"), ("device" if md <= mc else "cpu")
        wrong += pw != mw
        print(f"{seq:5d} {batch:5d} {hidden:6d}  {pd * 1e3:9.3f} {pc * 1e3:9.3f}  {md * 1e3:9.3f} {mc * 1e3:9.3f}  "
              f"{pw}/{mw}{'' if pw == mw else '  <- mispredicted'}")
    return wrong


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="models", help="folder of sample models (scripts/make_models.py)")
    ap.add_argument("--quick", action="store_true", help="small calibration and sweep (lavapipe)")
    ap.add_argument("--recalibrate", action="store_true", help="measure even if a calibration is cached")
    args = ap.parse_args(argv)

    from ortops.device import select
    from ortops.ort import costmodel, session

    device = select()
    shapes = "small" if args.quick else costmodel.table(device)
    if args.recalibrate or args.quick:
        cal = costmodel.measure(device, shapes)
        costmodel.store(cal)
    else:
        cal = costmodel.calibration(device)
    print(f"calibration ({shapes} shapes {costmodel.SHAPES[shapes]}; cache {costmodel.cache_path()}):")
    print(cal.describe())
    for path in sorted(glob.glob(os.path.join(args.models, "*.onnx"))):
        print(f"== {path} (placement auto)")
        for p in session.placement(path, device=device, policy="auto"):
            print(p.describe())
    if args.quick:
        grid = [(s, b, h) for s in (1, 16) for b in (1,) for h in (16, 64)]
    else:
        grid = [(s, b, h) for s in (1, 8, 64, 256) for b in (1, 16) for h in (64, 256, 1024)]
    print("== sweep: forward LSTM, input = hidden")
    wrong = sweep(device, cal, grid, 0.05 if args.quick else 1.0)
    print(f"winner mispredicted for {wrong} of {len(grid)} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
