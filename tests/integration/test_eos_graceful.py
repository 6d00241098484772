"""Graceful failures under exactly_once_v2: no update is ever seen twice, none is missing.

While 12,000 records flow into the counting app: the instance is restarted with SIGTERM
several times, a second instance joins and later leaves (two rebalances that move tasks
both ways), and one record makes processing fail once (the worker dies, its transaction
is aborted, the uncaught-exception handler replaces it and the input is read again from
the committed offsets). A read_committed consumer of the output must then see, for every
key, the values 1, 2, ..., n exactly once each.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from tests.integration.eos_support import (
    Feeder,
    RunnerApp,
    duplicate_updates,
    final_counts,
    new_app_id,
    read_updates,
    runners,
)
from tests.integration.support_apps import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka, pytest.mark.streams_protocol]

PARTITIONS = 4
KEYS = 40
TOTAL = 12_000


@pytest.mark.slow
def test_sigterm_restarts_rebalances_and_an_aborted_transaction_leave_no_duplicates(
    bootstrap_servers: str, group_protocol: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app = RunnerApp.create(bootstrap_servers, admin, new_app_id("graceful"), PARTITIONS, group_protocol)
    marker = tmp_path / "failed-once"
    common = app.runner_args(guarantee="exactly_once_v2", delay_us=50, fail_on="v7000", fail_marker=marker)
    a = {**common, "state_dir": tmp_path / "a", "instance_id": "a"}
    # dynamic membership: a static member that leaves keeps its partitions until its session
    # times out on Kafka, and forever on Tansu (it never expires static members)
    b = {**common, "state_dir": tmp_path / "b"}
    feeder = Feeder(bootstrap_servers, app.source, TOTAL, KEYS, chunk=150, pause_s=0.5).start()
    with runners() as started:
        for restart in range(3):  # SIGTERM mid-stream: each close commits, the next run goes on
            runner = started.start(tmp_path / f"a-{restart}.log", **a)
            before = app.committed_total()
            # progress -- or, on a slow machine, the feeder already finished and everything it
            # fed is committed (then there is nothing left to progress on). 90 s: at load 25 a
            # first run joined, went RUNNING after 14 s, missed max.poll.interval.ms (10 s, the
            # tests' GROUP_TIMING) and rejoined, RUNNING again only 38 s after its start.
            wait_until(
                lambda b0=before: (  # type: ignore[misc]
                    app.committed_total() > b0 or (not feeder.is_alive() and app.all_committed())
                ),
                90,
                "progress",
            )
            assert runner.terminate() == 0
        first = started.start(tmp_path / "a-last.log", **a)
        second = started.start(tmp_path / "b.log", **b)  # joins: tasks move to it
        wait_until(lambda: bool(second.last("ACTIVE")), 90, "the second instance runs tasks")
        before = app.committed_total()
        # progress with two instances -- or, on a slow machine, the feeder already finished and
        # everything it fed is committed (then there is nothing left to progress on)
        wait_until(
            lambda: app.committed_total() > before or (not feeder.is_alive() and app.all_committed()),
            120,
            "progress with two instances",
        )
        assert second.terminate() == 0  # leaves: its tasks move back
        expected = feeder.join()
        wait_until(app.all_committed, 90, "every input committed")
        assert first.terminate() == 0
    updates = read_updates(app, committed_only=True)
    assert final_counts(updates) == dict(expected)
    duplicated = duplicate_updates(updates, expected)
    assert not duplicated, f"{len(duplicated)} keys saw an update twice or missed one: {list(duplicated)[:3]}"
    # the failure aborted a transaction: the worker died (and was replaced, unless SIGTERM had
    # already begun the shutdown) with the records of that transaction never committed
    logs = "".join(r.log_path.read_text() for r in started)
    assert marker.exists() and "injected processing failure on 'v7000'" in logs
    app.assert_ran_as_streams_members(logs)
