#!/usr/bin/env bash
# `make test`: the whole suite as two pytest processes side by side.
#
# Why: the tests that talk to Apache Kafka (the [kafka] copies of `apache_kafka`-marked
# tests, tests/integration/test_apache_kafka.py, the demo on Kafka) spend most of their
# time waiting on group joins, session timeouts and an idle JVM broker. Run after the
# Tansu suite they added ~10 minutes to CI on two cores; beside it they add little.
# tests/conftest.py splits the suite by PLATFORM_STREAMS_TEST_SIDE (tansu | kafka); each
# process starts its own brokers. The Kafka side's output is printed after the Tansu
# side's, and the exit status is non-zero when either side failed. pytest's "no tests
# collected" (5, e.g. PYTEST_ARGS selected nothing on one side) counts as success.
#
# Usage: tools/test_sides.sh <python> [pytest args...]
set -u
python=$1
shift
log=$(mktemp -t pytest-kafka-side.XXXXXX)
trap 'rm -f "$log"' EXIT

# --durations: every CI log lists each side's slowest tests (where the budget goes)
PLATFORM_STREAMS_TEST_SIDE=kafka "$python" -m pytest -q -ra --durations=25 -p no:cacheprovider "$@" >"$log" 2>&1 &
kafka_pid=$!
started=$SECONDS
PLATFORM_STREAMS_TEST_SIDE=tansu "$python" -m pytest -q -ra --durations=25 "$@"
tansu_status=$?
echo "make test: the Tansu side finished in $((SECONDS - started))s (status $tansu_status)"
wait "$kafka_pid"
kafka_status=$?
echo "==================== the Apache Kafka side (status $kafka_status) ===================="
cat "$log"
echo "make test: both sides done in $((SECONDS - started))s"

status=0
for s in "$tansu_status" "$kafka_status"; do
  if [ "$s" -ne 0 ] && [ "$s" -ne 5 ]; then status=$s; fi
done
if [ "$tansu_status" -eq 5 ] && [ "$kafka_status" -eq 5 ]; then
  echo "make test: pytest collected no tests"
fi
exit "$status"
