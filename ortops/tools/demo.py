"""``ortops demo``: run a chain of GPU passes on the chosen device and check it."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from ortops.tools import chain
from ortops.tools.cli import ArgumentParser
from ortops.device import select


def _positive(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def parser() -> ArgumentParser:
    """The arguments of ``ortops demo`` (errors: one line, exit status 2)."""
    ap = ArgumentParser(prog="ortops demo", description=main.__doc__)
    ap.add_argument("--steps", type=_positive, default=1000, metavar="N", help="dependent dispatches (default 1000)")
    ap.add_argument("--size", type=_positive, default=4096, metavar="N",
                    help="32-bit words each dispatch updates (default 4096; at most what the device's "
                         "storage buffer range and workgroup count allow)")
    ap.add_argument("--device", default=None, help="Vulkan device: index, part of its name, or type")
    return ap


def largest_size(dev) -> int:
    """The most words one chain may hold on ``dev``: one storage buffer of them, and one
    64-invocation workgroup per 64 words within the device's workgroup count."""
    return min(dev.max_storage_buffer_range // 4, dev.max_workgroup_count[0] * chain.GROUP)


def main(argv=None) -> int:
    """Print the device, run 1,000 dependent dispatches, compare with the host's answer."""
    ap = parser()
    args = ap.parse_args(argv)
    dev = select(args.device)
    if args.size > largest_size(dev):
        ap.error(f"argument --size: at most {largest_size(dev)} words on {dev.name}, got {args.size}")
    print(f"device: {dev}")
    start = np.arange(args.size, dtype=np.uint32)
    t0 = time.perf_counter()
    got = chain.run(start, args.steps, device=dev)
    elapsed = time.perf_counter() - t0
    want = chain.expected(start, args.steps)
    ok = np.array_equal(got, want)
    print(f"chain of {args.steps} dependent dispatches over {args.size} words: "
          f"{'exact' if ok else 'WRONG'} (first words {got[:3].tolist()}, "
          f"host {want[:3].tolist()}), {elapsed * 1e3:.1f} ms including set-up")
    return 0 if ok else 1


if __name__ == "__main__":
    from ortops.tools.cli import main as cli_main

    sys.exit(cli_main(["demo", *sys.argv[1:]]))
