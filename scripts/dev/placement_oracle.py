"""Placement "auto"'s choices per node on the models the project uses, against a recorded list.

The models: the sample models (scripts/make_models.py -> models/*.onnx), the third-party test
models (tests/models/*.onnx) and silero-vad's (the wheel scripts/setup.sh fetches into
build/deps, as tests/test_silero_vad.py extracts them). For each recurrent node: where
placement "auto" puts it and why (both predictions), through ``ortops.ort.session.placement``,
the Python door (the plugin EP decides with the same core: tests/test_ep_placement.py).

    .venv/bin/python -P scripts/dev/placement_oracle.py record OUT.json   # calibrate, list, write
    .venv/bin/python -P scripts/dev/placement_oracle.py check ORACLE.json  # calibrate, list, compare

Each command measures a fresh calibration (a temporary ORTOPS_COST_CACHE, so the user's cache
is neither read nor written) with the installed ortops, times it, and lists the choices. ``check``
exits 1 when a node's choice differs from the recorded one, naming it with both calibrations'
predictions. The recorded file says how it was made (commit, date, device, calibration and
its time). ``--rounds N`` calibrates N times (each in a fresh cache) and requires every round
to choose as recorded, so that a choice near the boundary shows up as a flip, not by luck.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SILERO_WHEEL = os.path.join(ROOT, "build", "deps", "silero_vad-*-py3-none-any.whl")


def model_paths(tmp: str) -> dict[str, str]:
    """name -> path of every model the oracle covers (silero-vad's extracted into ``tmp``)."""
    paths = {}
    for folder in ("models", os.path.join("tests", "models")):
        for p in sorted(glob.glob(os.path.join(ROOT, folder, "*.onnx"))):
            paths[os.path.relpath(p, ROOT)] = p
    wheels = sorted(glob.glob(SILERO_WHEEL))
    if not wheels:
        raise SystemExit(f"placement_oracle: no silero-vad wheel at {SILERO_WHEEL}: run scripts/setup.sh")
    with zipfile.ZipFile(wheels[-1]) as z:
        for member in z.namelist():
            if member.startswith("silero_vad/data/") and member.endswith(".onnx"):
                out = os.path.join(tmp, os.path.basename(member))
                with open(out, "wb") as f:
                    f.write(z.read(member))
                paths[f"{os.path.basename(wheels[-1])}:{member}"] = out
    if not any(p.startswith("models") for p in paths):
        raise SystemExit("placement_oracle: no models/*.onnx: run scripts/setup.sh (scripts/make_models.py)")
    return paths


def calibrate(cache: str):
    """A fresh calibration of the default device into ``cache``: (calibration, seconds)."""
    from ortops.device import select
    from ortops.ort import costmodel

    os.environ[costmodel.CACHE_ENV] = cache
    t = time.perf_counter()
    cal = costmodel.calibration(select())
    return cal, time.perf_counter() - t


def choices(paths: dict[str, str]) -> dict[str, dict]:
    """"model / node" -> {"where", "reason"} under placement "auto" with the cached calibration."""
    from ortops.ort.session import placement

    out = {}
    for name, path in paths.items():
        for p in placement(path, policy="auto"):
            node = f"{p.path} / {p.name}" if p.path else p.name
            out[f"{name} / {node}"] = {"where": p.where, "reason": p.reason}
    return out


def one_round(paths: dict[str, str]) -> dict:
    from ortops.device import select

    with tempfile.TemporaryDirectory() as tmp:
        cal, seconds = calibrate(os.path.join(tmp, "cost.json"))
        return {"device": str(select()), "calibration": cal.to_dict(), "calibration_s": round(seconds, 2),
                "choices": choices(paths)}


def _commit() -> str:
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def compare(recorded: dict, got: dict) -> list[str]:
    """Lines naming each node whose choice differs (or that one side lacks)."""
    diffs = []
    for node in sorted(set(recorded) | set(got)):
        old, new = recorded.get(node), got.get(node)
        if old is None or new is None:
            diffs.append(f"{node}: {'not recorded' if old is None else 'not found now'}")
        elif old["where"] != new["where"]:
            diffs.append(f"{node}: recorded {old['where']} ({old['reason']}), now {new['where']} ({new['reason']})")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("record", "check"))
    ap.add_argument("file", help="the oracle (JSON): written by record, read by check")
    ap.add_argument("--rounds", type=int, default=1, help="calibrations, each in a fresh cache (default 1)")
    args = ap.parse_args(argv)
    import ortops

    with tempfile.TemporaryDirectory() as tmp:
        paths = model_paths(tmp)
        rounds = []
        for i in range(args.rounds):
            rounds.append(one_round(paths))
            r = rounds[-1]
            print(f"round {i + 1}: calibration {r['calibration_s']} s on {r['device']}, {len(r['choices'])} nodes, "
                  f"{sum(c['where'] == 'gpu' for c in r['choices'].values())} on the device", flush=True)
    if args.command == "record":
        first = rounds[0]
        flips = [d for r in rounds[1:] for d in compare(first["choices"], r["choices"])]
        record = {"made": {"how": "scripts/dev/placement_oracle.py record", "commit": _commit(),
                           "ortops": ortops.__version__, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                               timespec="seconds"), "rounds": args.rounds, "flips_between_rounds": flips},
                  "device": first["device"],
                  "calibrations": [{"calibration": r["calibration"], "seconds": r["calibration_s"]} for r in rounds],
                  "choices": first["choices"]}
        with open(args.file, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
        for node, c in first["choices"].items():
            print(f"  {node}: {c['where']} ({c['reason']})")
        print(f"recorded {len(first['choices'])} nodes in {args.file}"
              + (f"; {len(flips)} choice(s) flipped between rounds: " + "; ".join(flips) if flips else ""))
        return 0
    with open(args.file) as f:
        recorded = json.load(f)
    bad = 0
    for i, r in enumerate(rounds):
        diffs = compare(recorded["choices"], r["choices"])
        for d in diffs:
            print(f"round {i + 1}: DIFFERS {d}")
        bad += len(diffs)
    print(f"{'same choices' if not bad else f'{bad} difference(s)'} as recorded ({recorded['made']['commit']}, "
          f"{recorded['made']['date']}) on {len(recorded['choices'])} nodes over {len(rounds)} round(s); "
          f"calibration {', '.join(str(r['calibration_s']) for r in rounds)} s now, "
          f"{', '.join(str(c['seconds']) for c in recorded['calibrations'])} s recorded")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
