#!/usr/bin/env python3
"""Benchmark harness (same as ``ortops bench``); see ortops/bench.py for what it measures."""
import sys

from ortops.bench import main

if __name__ == "__main__":
    sys.exit(main())
