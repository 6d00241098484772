"""At-least-once with changelogs: sinks and changelogs go through two librdkafka producers.

The sinks' producer reports failures only (``delivery.report.only.error``): a success report
is a Python callback per record that nobody reads. The changelogs' producer reports every
delivery: a checkpoint needs the offset of the last changelog record written. Kafka Streams'
``RecordCollectorImpl.send`` (streams/src/main/java/org/apache/kafka/streams/processor/
internals/RecordCollectorImpl.java) keeps the offsets of acknowledged records in
``offsets`` and hands a failed send to the production exception handler; these tests pin
both halves on the real librdkafka: offsets come only from changelog reports, and a sink
record that fails after the send still reaches the handler.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.runtime.producing.kafka_record_collector import KafkaRecordCollector, ProductionError
from platform_streams.runtime.producing.streams_producer import StreamsProducer
from platform_streams.serde import Long, String
from platform_streams.state import OffsetCheckpoint
from tests.integration.support_apps import app_config, count_app, running_app, wait_until
from tests.support.kafka import consume_all, new_group_id, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S, L = String(), Long()


def _split_producer(bootstrap: str, changelogs: set[str], **callbacks: Any) -> StreamsProducer:
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 2_000}
    return StreamsProducer(
        {**conf, "delivery.report.only.error": True},
        transactional_id=None,
        timeout_s=10,
        changelog_conf=conf,
        changelog_topics=changelogs,
        **callbacks,
    )


def test_only_changelog_records_report_success_and_sink_records_arrive(
    bootstrap_servers: str, admin: KafkaAdmin
) -> None:
    sink, changelog = new_topic(admin, 1, "sink"), new_topic(admin, 1, "changelog")
    reports: list[tuple[Any, str, int]] = []
    producer = _split_producer(
        bootstrap_servers,
        {changelog},
        on_delivery=lambda err, msg: reports.append((err, msg.topic(), msg.offset())),
        on_send_error=lambda record, exc: pytest.fail(f"refused: {exc}"),
    )
    try:
        assert producer.changelog_producer is not producer.producer
        for i in range(5):
            producer.send(sink, b"k%d" % i, b"s%d" % i, 1_000 + i, None, None)
            producer.send(changelog, b"k%d" % i, b"c%d" % i, 1_000 + i, [("h", b"1")], 0)
        producer.flush()
        producer.poll()
    finally:
        producer.close()
    assert reports == [(None, changelog, offset) for offset in range(5)]
    assert producer.sent_by_topic == {sink: 5, changelog: 5}
    assert [r.value for r in consume_all(bootstrap_servers, sink, 5)] == [b"s%d" % i for i in range(5)]
    assert [r.headers for r in consume_all(bootstrap_servers, changelog, 5)] == [[("h", b"1")]] * 5


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_sink_record_that_fails_after_the_send_reaches_the_production_handler() -> None:
    """No broker listens: both records time out in librdkafka (a delivery report with an
    error). The sink record is the production handler's (log_and_continue: skipped and
    counted); the changelog record's failure is fatal at the flush, as in Kafka Streams."""
    bootstrap = f"127.0.0.1:{_unused_port()}"
    collector = KafkaRecordCollector(
        lambda **callbacks: _split_producer(bootstrap, {"app-counts-changelog"}, **callbacks),
        partition_count=lambda topic: 1,
        tracked_topics={"app-counts-changelog"},
        production_policy="log_and_continue",
    )
    collector.send("out", b"k", b"v", 1_000, None, 0)
    collector.send("app-counts-changelog", b"k", b"1", 1_000, None, 0)
    with pytest.raises(ProductionError, match="app-counts-changelog"):
        collector.flush()
    assert collector.records_skipped == 1
    assert collector.offsets == {}
    collector.streams_producer.close(0)


def test_a_stateful_app_splits_its_producers_and_checkpoints_what_the_changelog_reported(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """A count app: the worker runs the two producers, and the checkpoints a clean close writes
    hold the last changelog offset of each partition (the log end minus one): the offsets
    came from the changelog producer's reports alone."""
    source, sink = new_topic(admin, 2, "in"), new_topic(admin, 2, "out")
    builder = count_app(source, sink)
    produce(bootstrap_servers, source, [(f"k{i % 7}", "v") for i in range(70)])
    config = app_config(bootstrap_servers, tmp_path / "state", commit_interval_ms=200)
    changelog = f"{config.application_id}-counts-changelog"
    with running_app(builder, config) as streams:
        worker = streams.workers[0]
        split = worker.collector.streams_producer
        assert split.changelog_producer is not split.producer

        def counted() -> dict[bytes | None, int]:
            latest = {r.key: L.deserialize(r.value) for r in consume_all(bootstrap_servers, sink, 7, 5)}
            return latest if sum(latest.values()) == 70 else {}

        wait_until(counted, 60, "every record counted")
    ends = log_end_offsets({"bootstrap.servers": bootstrap_servers}, [(changelog, p) for p in range(2)])
    root = Path(config.state_dir) / config.application_id
    checkpoints = [OffsetCheckpoint(path).read() for path in root.glob("*/.checkpoint")]
    checkpointed = {tp: offset for offsets in checkpoints for tp, offset in offsets.items()}
    assert {tp: offset + 1 for tp, offset in checkpointed.items()} == {tp: e for tp, e in ends.items() if e}


@pytest.mark.parametrize("eager", [False, True], ids=["deferred", "eager"])
def test_exactly_once_reports_the_last_changelog_delivery_of_a_commit(
    bootstrap_servers: str, admin: KafkaAdmin, eager: bool
) -> None:
    """Exactly-once keeps one (transactional) producer. Holding records for the commit, it asks
    for a delivery report on the last record of each changelog partition only, and the
    committed transaction holds every record. (Kafka Streams' ``StreamsProducer`` under EOS
    v2: one producer per thread.)"""
    sink, changelog = new_topic(admin, 1, "sink"), new_topic(admin, 1, "changelog")
    reports: list[tuple[Any, str, int]] = []
    transactional_id = new_group_id("txn")
    producer = StreamsProducer(
        {"bootstrap.servers": bootstrap_servers, "linger.ms": 5, "transactional.id": transactional_id},
        transactional_id=transactional_id,
        timeout_s=30,
        eager=eager,
        changelog_topics={changelog},
        changelog_reports_only=True,
        on_delivery=lambda err, msg: reports.append((err, msg.topic(), msg.offset())),
        on_send_error=lambda record, exc: pytest.fail(f"refused: {exc}"),
    )
    try:
        for i in range(4):
            producer.send(sink, b"k%d" % i, b"s%d" % i, 1_000 + i, None, None)
            producer.send(changelog, b"k%d" % i, b"c%d" % i, 1_000 + i, None, 0)
        assert producer.commit([], None, before_commit=lambda: None, check_delivery=lambda: None)
        producer.poll()
    finally:
        producer.close()
    # records held for the commit (deferred) ask for a report on the last record of each
    # changelog partition only; a producer sending as records come (eager) reports them all
    if eager:
        assert sorted((topic, offset) for _, topic, offset in reports) == sorted(
            [(sink, i) for i in range(4)] + [(changelog, i) for i in range(4)]
        )
    else:
        assert reports == [(None, changelog, 3)]
    committed = consume_all(bootstrap_servers, sink, 4, isolation="read_committed")
    assert [r.value for r in committed] == [b"s%d" % i for i in range(4)]


def test_cache_flushes_send_changelog_records_without_reports_and_the_checkpoint_holds(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """A cache small enough to flush every few records: each flush reports its last changelog
    record only, the others are proved written by their offsets (runtime/producing/quiet_changelogs.py),
    and what a clean close checkpoints is still the log end minus one. The changelog holds
    every count (a restore from it gives the right table)."""
    source, sink = new_topic(admin, 2, "in"), new_topic(admin, 2, "out")
    builder = count_app(source, sink)
    produce(bootstrap_servers, source, [(f"k{i % 300}", "v") for i in range(30_000)])
    config = app_config(
        bootstrap_servers, tmp_path / "state", commit_interval_ms=500, statestore_cache_max_bytes=4_000
    )
    changelog = f"{config.application_id}-counts-changelog"
    with running_app(builder, config) as streams:
        collector = streams.workers[0].collector

        def counted() -> dict[bytes | None, int]:
            latest = {r.key: L.deserialize(r.value) for r in consume_all(bootstrap_servers, sink, 30_000, 5)}
            return latest if sum(latest.values()) == 30_000 else {}

        wait_until(counted, 60, "every record counted")
        # the first flushes of a partition report every record (until one is acknowledged)
        assert collector.records_sent_quietly > 1_000
    ends = log_end_offsets({"bootstrap.servers": bootstrap_servers}, [(changelog, p) for p in range(2)])
    root = Path(config.state_dir) / config.application_id
    checkpoints = [OffsetCheckpoint(path).read() for path in root.glob("*/.checkpoint")]
    checkpointed = {tp: offset for offsets in checkpoints for tp, offset in offsets.items()}
    assert {tp: offset + 1 for tp, offset in checkpointed.items()} == {tp: e for tp, e in ends.items() if e}
    records = consume_all(bootstrap_servers, changelog, sum(ends.values()), 10)
    table = {r.key: r.value for r in records}
    assert len(table) == 300
    assert sorted(int.from_bytes(v[-8:], "big") for v in table.values()) == [100] * 300
