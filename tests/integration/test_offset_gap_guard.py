"""The offset-gap guard with a real consumer on a real broker.

Tansu can answer a fetch with a later batch while an earlier one is still being stored
(docs/brokers.md; ``platform_streams/runtime/workers/offset_gaps.py``). That race cannot be
provoked on demand, so the first test takes the skipped records out of what the consumer
handed over, exactly as the broker's answer would have left them out, and checks that
the guard's seek makes the real consumer fetch them again. The second needs no stand-in:
transaction markers are real gaps in the offsets (on Apache Kafka; Tansu's markers too),
and the guard must let them through after its settle time without losing a record.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder
from platform_streams.config import StreamsConfig
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    TopicPartition,
    create_consumer,
    create_producer,
)
from platform_streams.runtime.workers.input_queues import InputQueues
from platform_streams.runtime.workers.offset_gaps import OffsetGapGuard
from tests.support.kafka import new_group_id, new_topic, produce
from tests.support.workers import idle_worker

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]


def _consumer(bootstrap: str, topic: str) -> Any:
    consumer = create_consumer(
        {"bootstrap.servers": bootstrap, "group.id": new_group_id(), "isolation.level": "read_uncommitted"}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    return consumer


def _route_until(
    consumer: Any, queues: InputQueues, queue: deque[Any], want: int, drop: set[int] | None = None
) -> list[Any]:
    """Consume and route as the worker does (route, take what the task would process,
    pause the backlogged, resume the drained) until ``want`` records came through; records
    whose offsets are in ``drop`` are left out the first time they come (what the racing
    broker does). Returns the records in the order the task got them."""
    out: list[Any] = []
    deadline = time.monotonic() + 60
    while len(out) < want and time.monotonic() < deadline:
        messages = [m for m in consumer.consume(100, 0.2) if m.error() is None]
        if drop:
            kept = [m for m in messages if m.offset() not in drop]
            if len(kept) < len(messages):
                drop = None
            messages = kept
        touched = queues.route(messages, lambda err: None, warn_unassigned=True)
        if queue:
            out.append(queue.popleft())  # the task processes one record per round
        queues.pause_backlogged(consumer, touched)
        queues.resume_drained(consumer)
    return out + list(queue)


@pytest.mark.parametrize("buffered", [1000, 3], ids=["unpaused", "backpressure"])
def test_records_the_broker_skipped_are_fetched_again(
    bootstrap_servers: str, admin: KafkaAdmin, buffered: int
) -> None:
    """With ``buffered=3`` the partition is also paused and resumed around the re-fetch."""
    topic = new_topic(admin, 1)
    produce(bootstrap_servers, topic, [(b"k", f"v{i}".encode(), 0) for i in range(20)])
    consumer = _consumer(bootstrap_servers, topic)
    guard = OffsetGapGuard(frozenset({topic}), lambda tp, o: consumer.seek(TopicPartition(tp[0], tp[1], o)))
    queues = InputQueues(buffered, gap_guard=guard)
    queue: deque[Any] = deque()
    queues.add({(topic, 0): queue})
    try:
        got = _route_until(consumer, queues, queue, 20, drop={5, 6, 7})
    finally:
        consumer.close()
    assert [m.offset() for m in got] == list(range(20))
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(20)]
    assert guard.refetches >= 1 and guard.accepted == 0


def test_transaction_markers_are_accepted_as_real_gaps_and_nothing_is_lost(
    bootstrap_servers: str, admin: KafkaAdmin
) -> None:
    topic = new_topic(admin, 1)
    producer = create_producer(
        {"bootstrap.servers": bootstrap_servers, "transactional.id": new_group_id("tx")}
    )
    producer.init_transactions(30)
    for txn in range(3):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, key=b"k", value=f"t{txn}-{i}".encode(), partition=0)
        producer.commit_transaction(30)
    consumer = _consumer(bootstrap_servers, topic)
    guard = OffsetGapGuard(
        frozenset({topic}), lambda tp, o: consumer.seek(TopicPartition(tp[0], tp[1], o)), settle_s=0.3
    )
    queues = InputQueues(1000, gap_guard=guard)
    queue: deque[Any] = deque()
    queues.add({(topic, 0): queue})
    try:
        records = _route_until(consumer, queues, queue, 15)
    finally:
        consumer.close()
    got = [m.offset() for m in records]
    assert [m.value() for m in records] == [f"t{t}-{i}".encode() for t in range(3) for i in range(5)]
    gaps = sum(1 for a, b in itertools.pairwise(got) if b != a + 1)
    assert gaps == 2 and guard.accepted == 2  # each commit marker takes an offset, on both brokers
    assert queues.consumed[(topic, 0)] == 15


def test_workers_guard_repartition_offsets_only_where_the_broker_can_skip_a_batch(
    bootstrap_servers: str, admin: KafkaAdmin, broker_kind: str, tmp_path: Path
) -> None:
    """The guard is a workaround for one broker's storage (docs/brokers.md): an at-least-once
    worker with a repartition topic builds it where the broker's offsets are not exact
    (Tansu), and not on Apache Kafka, whose high watermark moves only after the append."""
    builder = StreamsBuilder()
    builder.stream("in").group_by(lambda key, value: value).count()
    config = StreamsConfig(
        application_id=new_group_id("gap-guard"), bootstrap_servers=bootstrap_servers, state_dir=str(tmp_path)
    )
    worker = idle_worker(builder.build(), config, {"in": 1})
    external_kafka = broker_kind == "external" and admin.supports("exact_list_offsets")
    kafka_like = broker_kind == "kafka" or external_kafka
    assert (worker.input_queues._gap_guard is None) == kafka_like
