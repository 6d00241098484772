"""A partition paused by backpressure and handed back in a rebalance is read again.

librdkafka keeps a partition's pause through unassign and assign (Java's consumer drops it
for partitions revoked from the member, which Kafka Streams relies on: its
``buffered.records.per.partition`` pause lives in the task's ``RecordQueue``, which closes
with the task). A worker whose backlogged partitions were paused when a rebalance took
them, and that got them back, never read them again, without a log line: the 5-minute
soak's exactly-once application stood still after its third worker scaled down (CI at
b086cb2; ``platform_streams/runtime/workers/worker_rebalance.py``, ``_start_tasks``).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from platform_streams import KafkaStreams, StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.kafka import KafkaAdmin, TopicPartition, create_consumer
from platform_streams.serde import String
from tests.integration.support_apps import app_config, join_then_leave, running_app, wait_until
from tests.support.kafka import consume_all, new_group_id, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S = String()
RECORDS = 3_000


def _app(source: str, other: str, sink: str) -> StreamsBuilder:
    """One sub-topology reading two topics: its tasks wait (``max_task_idle_ms``) while one
    of their partitions is empty, so the other's queue grows and is paused."""
    builder = StreamsBuilder()
    consumed = Consumed(key_serde=S, value_serde=S)
    builder.stream(source, consumed).merge(builder.stream(other, consumed)).map_values(str.upper).to(
        sink, Produced(key_serde=S, value_serde=S)
    )
    return builder


def _paused(streams: KafkaStreams) -> set[tuple[str, int]]:
    return {tp for worker in streams.workers for tp in worker._input.paused}


def test_partitions_paused_by_backpressure_are_read_after_a_rebalance_hands_them_back(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, other, sink = new_topic(admin, 2, "in"), new_topic(admin, 2, "other"), new_topic(admin, 2, "out")
    produce(bootstrap_servers, source, [(f"k{i}", f"v{i}") for i in range(RECORDS)])
    waiting = {"buffered_records_per_partition": 5, "max_task_idle_ms": 600_000}
    first_config = app_config(bootstrap_servers, tmp_path / "a", **waiting)
    second = KafkaStreams(
        _app(source, other, sink),
        app_config(bootstrap_servers, tmp_path / "b", app_id=first_config.application_id, **waiting),
    )
    with running_app(_app(source, other, sink), first_config) as first:
        wait_until(lambda: len(_paused(first)) == 2, 30, "backpressure paused both input partitions")
        join_then_leave(first, second, first_keeps=1, total=2, timeout_s=60)
        # records on the other topic let the tasks process the waiting ones (by timestamp,
        # the first topic's come first; the other's then wait in turn, so only the first
        # topic's are checked)
        produce(bootstrap_servers, other, [(f"k{i}", f"o{i}") for i in range(200)])
        want = {f"V{i}".encode() for i in range(RECORDS)}
        expected = len(want)
        while True:  # at-least-once: a rebalance may repeat records, never lose one
            records = consume_all(bootstrap_servers, sink, expected, timeout_s=60)
            missing = want - {r.value for r in records}
            if not missing or len(records) < expected:
                break
            expected = len(records) + len(missing)
    assert not missing, f"{len(missing)} of {len(want)} records never came out, e.g. {sorted(missing)[:3]}"


@pytest.mark.parametrize("incremental", [False, True], ids=["assign", "incremental_assign"])
def test_librdkafka_keeps_a_pause_through_unassign_and_assign(
    bootstrap_servers: str, admin: KafkaAdmin, incremental: bool
) -> None:
    """The premise of the resume on every assignment (worker) and on every standby task
    opened (``runtime/restore/standby.py``, incremental assignment): without ``resume`` a partition
    paused before it was unassigned delivers nothing after it is assigned again."""
    topic = new_topic(admin, 1)
    produce(bootstrap_servers, topic, [(b"k", f"v{i}".encode(), 0) for i in range(10)])
    consumer = create_consumer({"bootstrap.servers": bootstrap_servers, "group.id": new_group_id()})
    assign = consumer.incremental_assign if incremental else consumer.assign
    unassign = (
        (lambda: consumer.incremental_unassign([TopicPartition(topic, 0)]))
        if incremental
        else consumer.unassign
    )

    def read(seconds: float) -> list[int]:
        got: list[int] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got += [m.offset() for m in consumer.consume(10, 0.2) if m.error() is None]
        return got

    try:
        assign([TopicPartition(topic, 0, 0)])
        wait_until(lambda: read(0.2), 30, "the first records")
        consumer.pause([TopicPartition(topic, 0)])
        unassign()
        assign([TopicPartition(topic, 0, 5)])
        assert read(3.0) == []  # still paused
        consumer.resume([TopicPartition(topic, 0)])
        assert read(3.0) == [5, 6, 7, 8, 9]
    finally:
        consumer.close()
