"""The soak checker's broker-side steps, on a real broker: the exactly-once catch-up test
(what lies past the committed offsets of a repartition topic) and the trace of a lost join
through the repartition topic.

Why the catch-up test reads instead of counting offsets: the 5-minute soak in CI once waited
300 s on "repartition topic behind {1: 2}" (one more offset than the commit marker it
allowed for) while every exactly-once output was exact. Past the last committed input an
exactly-once topic can hold markers, aborted records and a dead producer's open transaction,
none of which a read_committed consumer ever sees; only a committed record there means the
application is behind.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from platform_streams.kafka import KafkaAdmin, TopicSpec, create_producer
from soak.app import group_of
from soak.checker import AppChecker, committed_records_after, repartition_topic
from soak.producer import History
from tests.support.kafka import new_group_id, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]


def test_only_a_committed_record_past_the_committed_offset_is_work_left(
    bootstrap_servers: str, admin: KafkaAdmin
) -> None:
    topic = new_topic(admin, partitions=1, prefix="soak-rep")
    tp = (topic, 0)
    conf = {"bootstrap.servers": bootstrap_servers, "transactional.id": new_group_id("tx")}
    producer = create_producer(conf)
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed", b"g0", partition=0)
    producer.commit_transaction(30)  # the record, then its commit marker
    assert committed_records_after(bootstrap_servers, {tp: 0}) == {tp: 0}
    producer.begin_transaction()
    producer.produce(topic, b"aborted", b"g0", partition=0)
    producer.abort_transaction(30)  # an aborted record (Kafka keeps it, Tansu drops it) and a marker
    assert committed_records_after(bootstrap_servers, {tp: 1}) == {}
    producer.begin_transaction()
    producer.produce(topic, b"open", b"g0", partition=0)
    producer.flush(30)  # written, never committed: read_committed stops before it
    try:
        assert committed_records_after(bootstrap_servers, {tp: 1}) == {}
    finally:
        producer.abort_transaction(30)


def test_a_lost_join_is_traced_to_the_hop_that_lost_it(bootstrap_servers: str, admin: KafkaAdmin) -> None:
    app_id = new_group_id("soak-trace")
    spec = SimpleNamespace(guarantee="at_least_once", bootstrap=bootstrap_servers, app_id=app_id)
    app = SimpleNamespace(spec=spec)
    topic = repartition_topic(app)  # type: ignore[arg-type]
    admin.create_topics([TopicSpec(topic, 2)])
    produce(bootstrap_servers, topic, [(group_of("k0"), "k0|5|4242", 1), (group_of("k16"), "k16|7|4343", 1)])
    checker = AppChecker(app, History(), 2, leaky={})  # type: ignore[arg-type]
    checker.trace_lost_joins([("k0", 5), ("k1", 2)])
    traces = [d for d in checker.tally.details if d.startswith("join_lost_trace")]
    assert traces == [
        f"join_lost_trace: k0 seq 5 (g0): in {topic} at partition 1 offset 0 by pid 4242",
        f"join_lost_trace: k1 seq 2 (g1): not in {topic}",
    ]
