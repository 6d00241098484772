"""A group whose rebalance never completes: the application says what it waits for.

The broker behaviour (Tansu 0.6.0, docs/brokers.md; tools/group_rejoin_probe.py measures it
on a whole stop-and-restart): when the group's leader leaves while the group is
rebalancing, the coordinator keeps pointing at the departed leader; no member can ever
become leader again, so every JoinGroup/SyncGroup ends in REBALANCE_IN_PROGRESS -- for
plain consumers too. The group is wedged here deliberately and deterministically: the
leader stops serving its rebalance callbacks (no poll), a second member joins (the group
starts rebalancing, waiting for the leader), then the leader closes (LeaveGroup).

On Tansu a client that got no assignment for a while logs a WARN naming the group, its
member id, generation and the time waited (before, it sat in REBALANCING without a word),
then, once the group stayed unchanged for longer than the rebalance timeout, repairs it
(saves the committed offsets in a backup group, deletes it, rejoins) and
reads on from the committed offsets. On Apache Kafka the same steps complete the rebalance (the
leader's leave hands the leadership on) and the application just runs.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, State, StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.kafka import KafkaAdmin, create_consumer, group_membership
from platform_streams.runtime.membership.rebalance_wait import backup_group
from platform_streams.serde import String
from tests.conftest import BOOTSTRAP_ENV
from tests.integration.support_apps import APP_TIMING, app_config, new_app_id, wait_until
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.slow]


def _member(bootstrap: str, group: str, topic: str, assigned: list[Any]) -> Any:
    consumer = create_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "partition.assignment.strategy": "range",
            "session.timeout.ms": APP_TIMING["session_timeout_ms"],
            "heartbeat.interval.ms": APP_TIMING["heartbeat_interval_ms"],
            "max.poll.interval.ms": APP_TIMING["max_poll_interval_ms"],
        }
    )
    consumer.subscribe([topic], on_assign=lambda c, parts: assigned.append(parts))
    return consumer


def _leader_leaves_mid_rebalance(bootstrap: str, group: str, topic: str) -> None:
    """The leader closes while a newcomer waits for it to rejoin (see the module docstring).

    Each consumer is polled from this thread only (librdkafka's group metadata call blocks
    while another thread polls the same consumer)."""
    leader_assigned: list[Any] = []
    leader = _member(bootstrap, group, topic, leader_assigned)
    wait_until(lambda: leader.poll(0.1) is None and leader_assigned, 60, "the first member assigned")
    leader_generation = group_membership(leader)[1] or 0
    newcomer = _member(bootstrap, group, topic, [])
    try:
        # the newcomer joined a newer generation: the group now waits for its leader,
        # which does not poll, so it does not rejoin
        wait_until(
            lambda: newcomer.poll(0.1) is None and (group_membership(newcomer)[1] or -1) > leader_generation,
            60,
            "the newcomer joined",
        )
        leader.close()  # LeaveGroup while the group rebalances
    finally:
        newcomer.close()


@pytest.mark.kafka_side  # make test's time split: a long wait on group joins
def test_a_client_in_a_group_that_does_not_rebalance_says_so_and_repairs_it(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source, sink = new_topic(admin, 2, "wedge-in"), new_topic(admin, 2, "wedge-out")
    produce(bootstrap_servers, source, [(f"k{p}", f"p{p}-{i}", p) for p in (0, 1) for i in range(10)])
    app_id = new_app_id("wedge")
    admin.alter_committed_offsets(app_id, {(source, 0): 5, (source, 1): 5})  # progress to keep
    _leader_leaves_mid_rebalance(bootstrap_servers, app_id, source)

    streams = KafkaStreams(_forward_app(source, sink), app_config(bootstrap_servers, tmp_path, app_id))
    caplog.set_level(logging.WARNING, logger="platform_streams.runtime.membership.rebalance_wait")
    streams.start()

    def logged(text: str) -> list[str]:
        return [r.getMessage() for r in caplog.records if text in r.getMessage()]

    try:
        wait_until(
            lambda: logged("no partitions assigned after waiting") or streams.state() is State.RUNNING,
            120,
            "an assignment or a WARN saying why not",
        )
        if not os.environ.get(BOOTSTRAP_ENV):  # embedded Tansu: wedged, the client says so ...
            message = logged("no partitions assigned after waiting")[0]
            assert f"group {app_id!r}" in message and "member " in message and "generation " in message
            assert "docs/brokers.md" in message
            assert streams.state() is State.REBALANCING
            # ... and repairs the group once it has seen it unchanged for longer than the
            # rebalance timeout: offsets saved, group deleted, rejoined
            streams.wait_for_state(State.RUNNING, timeout_s=150)
            assert logged("saved its committed offsets of 2 partitions")
            assert admin.committed_offsets(backup_group(app_id), [(source, 0), (source, 1)]) == {
                (source, 0): 5,
                (source, 1): 5,
            }
        # a real cluster: the leader's leave handed the leadership on, nothing to say or repair
        out = consume_all(bootstrap_servers, sink, 10, timeout_s=60)
        assert sorted((r.value or b"").decode() for r in out) == sorted(
            f"p{p}-{i}" for p in (0, 1) for i in range(5, 10)
        )
    finally:
        assert streams.close(timeout_s=60)


def _forward_app(source: str, sink: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=String(), value_serde=String())).to(
        sink, Produced(key_serde=String(), value_serde=String())
    )
    return builder


@pytest.mark.apache_kafka
def test_a_member_of_a_recreated_group_starts_from_the_saved_offsets_not_from_auto_offset_reset(
    bootstrap_servers: str,
    admin: KafkaAdmin,
    broker_kind: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The race the soak run found: a member joined the re-created group before the repair
    wrote the offsets back, found none, and read everything again from auto.offset.reset
    (earliest). Here the group is already deleted and the offsets are only in the backup
    group, as a repair leaves them before its write-back: the application reads on from
    them. On Apache Kafka, whose coordinator lists the group's members and elects a new
    leader itself, no group is ever repaired: the backup group is not read, and the
    application starts from auto.offset.reset like Kafka Streams."""
    source, sink = new_topic(admin, 2, "saved-in"), new_topic(admin, 2, "saved-out")
    produce(bootstrap_servers, source, [(f"k{p}", f"p{p}-{i}", p) for p in (0, 1) for i in range(10)])
    app_id = new_app_id("saved")
    admin.alter_committed_offsets(backup_group(app_id), {(source, 0): 5, (source, 1): 7})
    caplog.set_level(logging.WARNING, logger="platform_streams.runtime.membership.rebalance_wait")
    streams = KafkaStreams(_forward_app(source, sink), app_config(bootstrap_servers, tmp_path, app_id))
    streams.start()
    try:
        # an external cluster: Apache Kafka is the one whose probes find Kafka's features
        external_kafka = broker_kind == "external" and admin.supports("exact_list_offsets")
        kafka_like = broker_kind == "kafka" or external_kafka
        first = (0, 0) if kafka_like else (5, 7)
        expected = sorted([f"p0-{i}" for i in range(first[0], 10)] + [f"p1-{i}" for i in range(first[1], 10)])
        out = consume_all(bootstrap_servers, sink, len(expected), timeout_s=90)
        assert sorted((r.value or b"").decode() for r in out) == expected
        assert ("not from auto.offset.reset" in caplog.text) != kafka_like
    finally:
        assert streams.close(timeout_s=60)
