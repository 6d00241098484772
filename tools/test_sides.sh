#!/usr/bin/env bash
# `make test`: the whole suite as three pytest processes side by side.
#
# Why: most broker and server tests wait -- group joins, session timeouts, JVMs (Apache
# Kafka, a secured node, a Schema Registry, Spark) that idle between requests. Run one after
# another they would take well over an hour on two cores; side by side they share the CPU.
# tests/conftest.py splits the suite by PLATFORM_STREAMS_TEST_SIDE (tansu | kafka | servers;
# `side_of` says which test goes where); each process starts its own brokers and servers.
# The other sides' output is printed after the Tansu side's, and the exit status is
# non-zero when any side failed. pytest's "no tests collected" (5, e.g. PYTEST_ARGS
# selected nothing on one side) counts as success.
#
# Usage: tools/test_sides.sh <python> [pytest args...]
set -u
python=$1
shift
declare -A logs pids
trap 'rm -f "${logs[@]}"' EXIT
started=$SECONDS

# --durations: every CI log lists each side's slowest tests (where the budget goes)
for side in kafka servers; do
  logs[$side]=$(mktemp -t "pytest-$side-side.XXXXXX")
  PLATFORM_STREAMS_TEST_SIDE=$side "$python" -m pytest -q -ra --durations=25 -p no:cacheprovider "$@" \
    >"${logs[$side]}" 2>&1 &
  pids[$side]=$!
done
PLATFORM_STREAMS_TEST_SIDE=tansu "$python" -m pytest -q -ra --durations=25 "$@"
tansu_status=$?
echo "make test: the Tansu side finished in $((SECONDS - started))s (status $tansu_status)"

statuses=("$tansu_status")
for side in kafka servers; do
  wait "${pids[$side]}"
  side_status=$?
  statuses+=("$side_status")
  echo "==================== the $side side (status $side_status, done by $((SECONDS - started))s) ===================="
  cat "${logs[$side]}"
done
echo "make test: all sides done in $((SECONDS - started))s"

status=0
collected=0
for s in "${statuses[@]}"; do
  if [ "$s" -ne 0 ] && [ "$s" -ne 5 ]; then status=$s; fi
  if [ "$s" -ne 5 ]; then collected=1; fi
done
if [ "$collected" -eq 0 ]; then
  echo "make test: pytest collected no tests"
fi
exit "$status"
