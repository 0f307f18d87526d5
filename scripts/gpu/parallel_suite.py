#!/usr/bin/env python3
"""The test suite in parallel pytest processes, plainly and under validation at once.

    python -P scripts/gpu/parallel_suite.py --out DIR [--shards 6] [--validation-shards 2]
        [--validation-from FILE | --validation-only FILE,...] [--plain-only FILE,...] [--timeout S]
        [--resume DIR]

Why: on the GPU machine one device call may run 10 minutes, and the whole suite takes longer
than that under validation alone, so the gate's two runs (plainly, under validation) do not fit
two calls. The machine has 16 cores and the suite keeps its GPU
mostly idle, so shards run side by side. Files are dealt to shards by their expected seconds
(greedy, longest first; SECONDS, else their test count at SECONDS_A_TEST); a file expected to
take longer than a shard's share splits into parts of its tests (in collection order, each
part a shard's args by node id: its module fixtures then run once a part), so that the
longest file no longer sets the wall time. Each shard writes DIR/<plain|validation>-<i>.txt and a JUnit
report; DIR/file_seconds.txt gives each finished file's seconds (for SECONDS). The script
prints every shard's summary and the totals, and exits
1 if any shard failed, errored or did not finish. ``--validation-from FILE`` runs under
validation only the files from FILE on, in collection order (the rest of a run that a call's
time limit cut; the gate record names both parts); ``--validation-only`` runs those files
(the rest of a shard that was cut). ``--resume DIR`` runs again, each kind in its own
shards, the files of every shard in DIR (an earlier run's --out) that did not finish, so that
the next device call can take the rest at once, on the machine still warm, without anyone
reading the logs first.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import OrderedDict


def collect() -> "OrderedDict[str, list]":
    """Test files in collection order with their tests' node ids."""
    # Without PYTEST_ADDOPTS: options meant for the shards (-v, --durations) change this listing.
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    out = subprocess.run([sys.executable, "-P", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests"], capture_output=True, text=True, env=env).stdout
    files: "OrderedDict[str, list]" = OrderedDict()
    for line in out.splitlines():
        if "::" in line:
            files.setdefault(line.split("::", 1)[0], []).append(line.strip())
    return files


def unfinished(folder: str) -> dict:
    """{kind: [files]} of the shards in an earlier run's folder that did not finish (their log's
    first line names their files; a finished one ends with pytest's summary)."""
    left: dict = {"plain": [], "validation": []}
    for name in sorted(os.listdir(folder)):
        m = re.fullmatch(r"(plain|validation)-\d+\.txt", name)
        if not m:
            continue
        lines = open(os.path.join(folder, name)).read().strip().splitlines()
        done = lines and SUMMARY.search(lines[-1]) and re.search(r"\b(passed|failed)\b", lines[-1])
        if not done:
            header = lines[0][2:] if lines else ""
            left[m.group(1)] += header.split("\t") if "\t" in header else header.split()
    return left


# Seconds a file took plainly on the GPU machine's H100 (2026-12-07, the gate's plain shards'
# JUnit times; under validation up to 1.2 times as long), where its test count misleads: the
# kernel files compile a pipeline for every tiling, most others run in a tenth of a second a
# test (SECONDS_A_TEST: the other 1,745 tests' mean, 0.08 s).
SECONDS = {
    "tests/test_step_kernels.py": 245, "tests/test_sequence_kernel.py": 200, "tests/test_persistent_kernel.py": 104,
    "tests/test_kernels.py": 102, "tests/test_coalesce.py": 81, "tests/test_special_values_exact.py": 79,
    "tests/test_conformance.py": 48, "tests/test_fuzz_smoke.py": 44, "tests/test_special_values.py": 42,
    "tests/test_cpu_projection.py": 36, "tests/test_memory_growth.py": 27, "tests/test_projection_slices.py": 25,
    "tests/test_fast_mode.py": 19, "tests/test_layer_api.py": 16, "tests/test_exact_digests.py": 15,
    "tests/test_ep.py": 14, "tests/test_session_ep.py": 14,
}
SECONDS_A_TEST = 0.1


def units(files: "OrderedDict[str, list]", n: int) -> list:
    """(args, tests, expected seconds) to deal: a file whole, or where it would take more than a
    shard's share of the whole, its tests in that many parts (whole files named by their tests
    stay whole: a resumed run names what it got)."""
    cost = {f: SECONDS.get(f, SECONDS_A_TEST * len(ids)) for f, ids in files.items()}
    share = sum(cost.values()) / max(1, n)
    out = []
    for f, ids in files.items():
        parts = min(len(ids), int(cost[f] // share) + 1) if share > 0 and f.endswith(".py") else 1
        if parts <= 1:
            out.append(([f], len(ids), cost[f]))
            continue
        size = -(-len(ids) // parts)
        for k in range(0, len(ids), size):
            chunk = ids[k:k + size]
            out.append((chunk, len(chunk), cost[f] * len(chunk) / len(ids)))
    return out


def deal(files: "OrderedDict[str, list]", n: int) -> list:
    """The files (or their parts: units) in n shards of about equal expected seconds, the
    longest first; each shard a list of pytest args and its number of tests."""
    shards = [([], 0) for _ in range(max(1, n))]
    load = [0.0] * len(shards)
    for args, tests, seconds in sorted(units(files, n), key=lambda u: -u[2]):
        i = load.index(min(load))
        shards[i] = (shards[i][0] + args, shards[i][1] + tests)
        load[i] += seconds
    return [s for s in shards if s[0]]


def file_seconds(folder: str) -> "dict[str, float]":
    """{file: seconds} over the JUnit reports of the shards in ``folder`` (each kind apart:
    "plain tests/test_cli.py" and "validation tests/test_cli.py")."""
    import xml.etree.ElementTree as ET

    out: "dict[str, float]" = {}
    for name in sorted(os.listdir(folder)):
        m = re.fullmatch(r"(plain|validation)-\d+\.xml", name)
        if not m:
            continue
        try:
            root = ET.parse(os.path.join(folder, name)).getroot()
        except ET.ParseError:   # a shard stopped at the time limit writes none
            continue
        for case in root.iter("testcase"):
            # pytest's classname: tests.test_x or tests.test_x.TestClass
            f = m.group(1) + " " + "/".join(case.get("classname", "").split(".")[:2]) + ".py"
            out[f] = out.get(f, 0.0) + float(case.get("time", 0))
    return out


def only(files: "OrderedDict[str, list]", names: list) -> "OrderedDict[str, list]":
    """The files, or tests by node id, named, as collect() gives them: a node id stands for
    itself (the part of a split file a cut shard ran)."""
    out: "OrderedDict[str, list]" = OrderedDict()
    for name in names:
        out[name] = files[name] if name in files else [name]
    return out


SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shards", type=int, default=6, help="plain shards (0: none)")
    ap.add_argument("--validation-shards", type=int, default=2, help="shards under validation (0: none)")
    ap.add_argument("--validation-from", default=None, help="under validation only the files from this one on")
    ap.add_argument("--validation-only", default=None, help="under validation only these files (comma list)")
    ap.add_argument("--plain-only", default=None, help="plainly only these files (comma list)")
    ap.add_argument("--timeout", type=float, default=540.0, help="seconds before unfinished shards are stopped")
    ap.add_argument("--resume", default=None, help="only the files of the shards in this folder that did not finish")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    files = collect()
    if args.resume:
        left = unfinished(args.resume)
        print(f"parallel_suite: resuming {args.resume}: plainly {left['plain'] or 'nothing'}; "
              f"under validation {left['validation'] or 'nothing'}", flush=True)
        args.plain_only = left["plain"] or None
        args.validation_only = left["validation"] or None
        args.shards = args.shards if left["plain"] else 0
        args.validation_shards = args.validation_shards if left["validation"] else 0
    if not files:
        print("parallel_suite: pytest collected nothing", file=sys.stderr)
        return 1
    # The comma lists of the command line; a resumed run's lists as they are (node ids may hold commas).
    for opt in ("validation_only", "plain_only"):
        if isinstance(getattr(args, opt), str):
            setattr(args, opt, getattr(args, opt).split(","))
    named = [f for opt in (args.validation_only, args.plain_only) if opt for f in opt]
    absent = [f for f in named if f.split("::", 1)[0] not in files]
    if absent:
        print(f"parallel_suite: {absent} collected no tests here (a collection error? run pytest --collect-only "
              "on them)", file=sys.stderr)
        return 1
    vfiles = files
    if args.validation_from:
        names = list(files)
        start = names.index(args.validation_from)
        vfiles = OrderedDict((f, files[f]) for f in names[start:])
    if args.validation_only:
        vfiles = only(files, args.validation_only)
    pfiles = files
    if args.plain_only:
        pfiles = only(files, args.plain_only)
    jobs = []
    for kind, chosen, n in (("plain", pfiles, args.shards), ("validation", vfiles, args.validation_shards)):
        if n <= 0:
            continue
        for i, (shard, count) in enumerate(deal(chosen, n)):
            # -v: a shard cut at the time limit ends its log with the test it was running; -rs: why
            # each skip; --durations: the slow tests, for the next gate's shard sizes.
            cmd = [sys.executable, "-P", "-m", "pytest", "-v", "-rs", "--durations=15", "-p", "no:cacheprovider",
                   f"--junitxml={os.path.join(args.out, f'{kind}-{i}.xml')}", *shard]
            env = dict(os.environ)
            if kind == "plain":
                env.pop("VK_LAYER_PATH", None)   # as the plain run had it: no layer on the path
            if kind == "validation":
                cmd.insert(cmd.index("-v"), "--vk-validation")
            path = os.path.join(args.out, f"{kind}-{i}.txt")
            with open(path, "w") as log:
                log.write("# " + "\t".join(shard) + "\n")   # tabs: a node id may hold spaces
                log.flush()
                jobs.append((kind, i, path, count,
                             subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)))
    print(f"parallel_suite: {len(files)} files, {sum(map(len, files.values()))} tests; "
          f"{sum(1 for j in jobs if j[0] == 'plain')} plain shards, "
          f"{sum(1 for j in jobs if j[0] == 'validation')} validation shards "
          f"({sum(map(len, vfiles.values()))} tests{' from ' + args.validation_from if args.validation_from else ''})",
          flush=True)
    t0 = time.monotonic()
    bad = False
    totals = {"plain": {}, "validation": {}}
    for kind, i, path, count, p in jobs:
        try:
            p.wait(timeout=max(1.0, args.timeout - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        last = open(path).read().strip().splitlines()[-1:] or [""]
        found = {k if not k.startswith("error") else "errors": int(v) for v, k in SUMMARY.findall(last[0])}
        finished = p.returncode in (0, 1) and ("passed" in found or "failed" in found)
        bad |= p.returncode != 0 or not finished
        for k, v in found.items():
            totals[kind][k] = totals[kind].get(k, 0) + v
        state = "" if finished else " NOT FINISHED"
        print(f"{kind} {i} ({count} tests): rc {p.returncode}{state}: {last[0]}", flush=True)
    seconds = file_seconds(args.out)
    with open(os.path.join(args.out, "file_seconds.txt"), "w") as f:
        f.writelines(f"{k} {v:.1f}\n" for k, v in sorted(seconds.items(), key=lambda kv: -kv[1]))
    for kind, t in totals.items():
        if t:
            print(f"{kind} total: " + ", ".join(f"{v} {k}" for k, v in sorted(t.items())) +
                  f" (wall {time.monotonic() - t0:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
