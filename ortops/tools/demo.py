"""``python -m ortops.tools.demo``: run a chain of GPU passes on the chosen device and check it."""

from __future__ import annotations

import sys
import time

import numpy as np

from ortops.tools import chain
from ortops.device import select


def main(argv=None) -> int:
    """Print the device, run 1,000 dependent dispatches, compare with the host's answer."""
    import argparse

    parser = argparse.ArgumentParser(prog="ortops demo", description=main.__doc__)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    dev = select(args.device)
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
    sys.exit(main())
