#!/usr/bin/env bash
# How many pytest-xdist processes the test commands use: ORTOPS_TEST_JOBS, else one per core, at
# most 4 (lavapipe compiles a pipeline on one core; more processes than cores only queue, and
# the timing tests are written for a machine that is not oversubscribed; docs/ci.md). Printed
# as pytest's -n value: 1 prints 0, pytest's own process with no worker.
set -euo pipefail
n=${ORTOPS_TEST_JOBS:-$(nproc)}
if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ]; then
  echo "test_jobs.sh: ORTOPS_TEST_JOBS must be a whole number of processes, 1 or more, got '$n'" >&2
  exit 2
fi
[ "$n" -gt 4 ] && n=4
[ "$n" -eq 1 ] && n=0
echo "$n"
