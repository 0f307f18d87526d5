#!/usr/bin/env bash
# The README's test timings, measured as the README states them: a fresh clone of this
# checkout's HEAD (git clone into a temporary folder: commit first), its scripts/setup.sh timed,
# then scripts/test.sh twice with XDG_CACHE_HOME an empty folder (no Mesa shader cache, no cost
# cache: the first run, as on CI), the second run with the cache the first left. Prints each
# time (wall, and the CPU time of the command and its children: on a machine shared with other
# work, compare CPU time) and the load average before and after (uptime).
#
#   scripts/dev/time_tests.sh [--keep] [--rev REV]
#
# --keep: leave the clone and cache folders; --rev REV: clone that branch or commit instead of
# HEAD (a baseline: the same measurement of an earlier tree, on the same machine).
#
# Set-up installs the Python dependencies into the clone's own .venv (pip's cache is the
# user's usual one, not the empty folder: set-up's time is reported beside the tests', not in
# them). The tests' own arguments are scripts/test.sh's defaults (the whole quick command).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
keep=0
rev=HEAD
while [ $# -gt 0 ]; do
  case $1 in
    --keep) keep=1 ;;
    --rev) rev=${2:?"time_tests.sh: --rev needs a branch or commit"}; shift ;;
    *) echo "time_tests.sh: unknown argument '$1' (--keep, --rev REV)" >&2; exit 2 ;;
  esac
  shift
done
commit=$(git -C "$root" rev-parse --verify "$rev^{commit}")
work=$(mktemp -d "${TMPDIR:-/tmp}/ortops-time.XXXXXX")
cache=$(mktemp -d "${TMPDIR:-/tmp}/ortops-time-cache.XXXXXX")
cleanup() {
  if [ "$keep" -eq 0 ]; then
    rm -rf "$work" "$cache"
  else
    echo "time_tests: kept $work (the clone) and $cache (XDG_CACHE_HOME)"
  fi
}
trap cleanup EXIT

# timed SLUG LABEL COMMAND...: runs the command in the clone, its output in $work/SLUG.log;
# prints one line: wall and CPU seconds (the command and the children it waited for).
timed() {
  local slug=$1 label=$2
  shift 2
  local status=0
  (cd "$work/ortops" && /usr/bin/time -f "%e %U %S" -o "$work/$slug.time" "$@") >"$work/$slug.log" 2>&1 || status=$?
  # GNU time writes "Command exited with non-zero status N" first when the command fails.
  tail -n 1 "$work/$slug.time" | awk -v label="$label:" -v status="$status" -v logfile="$work/$slug.log" '{
    printf "%-27s %6.0f s wall, %6.0f s CPU (user %.0f + sys %.0f)%s\n", label, $1, $2 + $3, $2, $3,
           status == 0 ? "" : ", FAILED (status " status ", " logfile ")" }'
  return "$status"
}

echo "time_tests: ${commit:0:10} ($rev) of $root; load before: $(uptime)"
git clone -q "$root" "$work/ortops"
git -C "$work/ortops" checkout -q "$commit"
status=0
timed setup "set-up (scripts/setup.sh)" scripts/setup.sh || status=1
if [ "$status" -eq 0 ]; then
  for run in first second; do
    timed "$run" "$run run ($([ $run = first ] && echo empty || echo same) cache)" \
      env XDG_CACHE_HOME="$cache" scripts/test.sh || status=1
    grep -E "^test: |passed|failed" "$work/$run.log" | tail -n 4 | sed 's/^/    /' || true
  done
fi
echo "time_tests: load after: $(uptime)"
exit "$status"
