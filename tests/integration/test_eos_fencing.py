"""Fencing under exactly_once_v2: a zombie cannot commit after its tasks moved.

Two instances share four partitions. One is frozen with SIGSTOP for twice the session
timeout, so the group expels it and the other instance takes all the tasks; then it is
resumed with SIGCONT. Its librdkafka threads and its loop continue where they stopped,
with records of its old tasks in hand: its next commit must fail (the membership check
is rejected, whatever the broker does with stale transactional offset commits), its
tasks must be dropped dirty and it must rejoin and take its share again. The counts must
stay exact. Both instances use dynamic membership: Tansu never expels a static member.
On Apache Kafka the broker alone fences the zombie (its stale transactional offset commit
is refused, KIP-447), so the membership-check commits Tansu needs are switched off there.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from platform_streams.kafka import KafkaAdmin
from tests.integration.eos_support import (
    Feeder,
    Runner,
    RunnerApp,
    final_counts,
    new_app_id,
    read_updates,
    runners,
)
from tests.integration.support_apps import wait_until

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka, pytest.mark.streams_protocol]

PARTITIONS = 4


def _tasks(runner: Runner) -> set[str]:
    return set(runner.last("ACTIVE") or ())


@pytest.mark.slow
def test_a_paused_zombie_cannot_commit_and_rejoins(
    bootstrap_servers: str, broker_kind: str, group_protocol: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app = RunnerApp.create(bootstrap_servers, admin, new_app_id("fence"), PARTITIONS, group_protocol)
    common = app.runner_args(guarantee="exactly_once_v2", delay_us=100)
    feeder = Feeder(bootstrap_servers, app.source, 10_000, 40, chunk=200, pause_s=0.3).start()
    with runners() as started:
        zombie = started.start(tmp_path / "zombie.log", state_dir=tmp_path / "z", **common)
        other = started.start(tmp_path / "other.log", running=False, state_dir=tmp_path / "o", **common)
        wait_until(
            lambda: len(_tasks(other)) == 2 and len(_tasks(zombie)) == 2 and "RUNNING" in other.events,
            60,
            "the two instances share the tasks",
        )
        zombie.signal(signal.SIGSTOP)
        try:
            wait_until(lambda: len(_tasks(other)) == 4, 40, "the group gave every task to the other instance")
            time.sleep(1.0)  # the other instance commits progress on the zombie's former tasks
        finally:
            zombie.signal(signal.SIGCONT)
        wait_until(
            lambda: (zombie.last("FENCED") or 0) >= 1 or "lost" in zombie.log_path.read_text().lower(),
            30,
            "the resumed zombie found out it was expelled",
        )
        wait_until(lambda: len(_tasks(zombie)) == 2 and len(_tasks(other)) == 2, 60, "the zombie rejoined")
        expected = feeder.join()
        wait_until(app.all_committed, 90, "every input committed")
        for runner in started:
            assert runner.terminate() == 0
    log = (tmp_path / "zombie.log").read_text()
    app.assert_ran_as_streams_members(log)
    # refused by the membership check (Tansu), by the broker's answer to its transactional
    # offset commit (Kafka: "send_offsets_to_transaction: the consumer group moved on without
    # this member"), or its client noticed the lost session first; on a loaded machine the
    # pause can outlast transaction.timeout.ms (10 s under EOS), and Kafka's abort of the open
    # transaction then fences the zombie's producer before any of those; on a streams group
    # its heartbeat can hear of the drop first, and the commit then refuses itself
    refused = (
        "membership check",
        "moved on without this member",
        "partitions lost",
        "producer was fenced",
        "the streams group dropped this member",
    )
    assert any(r in log for r in refused), "the zombie's commit was refused"
    if broker_kind == "kafka":
        # Apache Kafka fences the zombie by itself (KIP-447): the workers made no membership-check
        # commits, and the zombie still never committed (the counts below stay exact)
        assert admin.supports("txn_offset_commit_fencing")
        # (whether the broker refused its commit first or its client noticed the lost session
        # first is a race; test_apache_kafka.py shows the broker's refusal on its own)
        assert "(KIP-447): no membership-check commits" in log
        assert "membership check" not in log  # the worker's check ("membership check: ...") never ran
    updates = read_updates(app, committed_only=True)
    assert final_counts(updates) == dict(expected)
