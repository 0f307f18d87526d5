#!/usr/bin/env python3
"""Benchmark harness (same as ``ortops bench``); see ortops/tools/bench.py for what it measures."""
import sys

from ortops.tools.bench import main

if __name__ == "__main__":
    sys.exit(main())
