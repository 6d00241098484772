"""The Kafka boundary (platform_streams.kafka) against a real broker, plus its pure parts.

Assertions state Apache Kafka's contract where Tansu agrees, and the contract both honour
where they differ (e.g. an unknown group is DEAD on Kafka and EMPTY on Tansu), so the
file passes on the embedded broker and on PLATFORM_STREAMS_BOOTSTRAP_SERVERS alike.
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from platform_streams.dev.brokers import EmbeddedBroker, find_free_port
from platform_streams.errors import BrokerError, StreamsConfigError, StreamsTimeoutError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    FetchWaitEscalation,
    KafkaAdmin,
    KafkaError,
    KafkaException,
    TopicPartition,
    TopicSpec,
    create_consumer,
    create_producer,
    empty_partitions,
    fetch_wait,
    high_watermark_from_fetch,
    is_fatal,
    is_fenced,
    is_retriable,
    is_txn_requires_abort,
    log_end_offsets,
    read_partition_range,
    redact_config,
    to_broker_error,
)
from platform_streams.kafka.fetch_wait import LONG_FETCH_WAIT_MS
from platform_streams.processor.partitioner import default_partition
from tests.support.kafka import GROUP_TIMING, consume_all, new_group_id, new_topic, produce

# broker tests here also run on Apache Kafka ([kafka]); the pure ones run once
pytestmark = pytest.mark.apache_kafka

# --------------------------------------------------------------------------- pure parts


def test_error_classification() -> None:
    assert is_fenced(KafkaError(KafkaError.PRODUCER_FENCED))
    assert is_fenced(KafkaError(KafkaError.INVALID_PRODUCER_EPOCH))
    assert is_fenced(KafkaError(KafkaError._FENCED))
    assert is_fenced(KafkaError(KafkaError._FATAL, "Producer fenced by newer instance", fatal=True))
    assert not is_fenced(KafkaError(KafkaError._TRANSPORT))
    assert is_retriable(KafkaError(KafkaError._TRANSPORT))
    assert is_retriable(KafkaError(KafkaError.UNKNOWN, retriable=True))
    assert not is_retriable(KafkaError(KafkaError.REQUEST_TIMED_OUT, fatal=True))
    assert not is_retriable(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS))
    assert is_fatal(KafkaError(KafkaError._FATAL)) and is_fatal(KafkaError(KafkaError.UNKNOWN, fatal=True))
    assert is_txn_requires_abort(KafkaError(KafkaError.UNKNOWN, txn_requires_abort=True))
    assert not is_txn_requires_abort(KafkaError(KafkaError.UNKNOWN))


def test_to_broker_error_keeps_name_and_retriability() -> None:
    err = to_broker_error(KafkaException(KafkaError(KafkaError.NOT_COORDINATOR, "moved")), "commit")
    assert isinstance(err, BrokerError)
    assert (err.code, err.retriable) == ("NOT_COORDINATOR", True)
    assert "commit" in str(err) and "moved" in str(err)
    other = to_broker_error(RuntimeError("boom"))
    assert other.code is None and not other.retriable and "boom" in str(other)


def test_client_config_errors_name_the_callers_key() -> None:
    with pytest.raises(StreamsConfigError, match=r"'no\.such\.key'"):
        create_producer({"no.such.key": 1})
    # librdkafka reports the alias' canonical name; the error names what the caller wrote.
    with pytest.raises(StreamsConfigError, match="'acks'") as info:
        create_producer({"bootstrap.servers": "localhost:1", "acks": "sometimes"})
    assert isinstance(info.value, ValueError)
    with pytest.raises(StreamsConfigError, match=r"group\.id"):
        create_consumer({"bootstrap.servers": "localhost:1"})
    with pytest.raises(StreamsConfigError, match="must be str"):
        create_producer({1: "x"})  # type: ignore[dict-item]


def test_config_is_logged_redacted(caplog: pytest.LogCaptureFixture) -> None:
    assert redact_config({"sasl.password": "hunter2", "linger.ms": 5}) == {
        "sasl.password": "[redacted]",
        "linger.ms": 5,
    }
    with caplog.at_level(logging.DEBUG, logger="platform_streams.kafka.clients"):
        create_producer({"bootstrap.servers": "localhost:1", "sasl.password": "hunter2"})
    assert "localhost:1" in caplog.text and "hunter2" not in caplog.text


def test_topic_spec_validates() -> None:
    with pytest.raises(ValueError):
        TopicSpec("x", 0)
    with pytest.raises(ValueError):
        TopicSpec("x", 1, replication_factor=0)
    assert TopicSpec("x", 2).replication_factor == -1


# --------------------------------------------------------------------------- embedded broker


def _port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


@pytest.mark.broker
def test_embedded_broker_starts_and_stops() -> None:
    started = time.monotonic()
    with EmbeddedBroker() as broker:
        assert time.monotonic() - started < 10
        assert broker.is_running() and broker.pid is not None
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        with KafkaAdmin(broker.bootstrap_servers) as admin:
            name = new_topic(admin, 2)
            assert admin.list_topics()[name] == 2
        # the port is taken: a second broker on it must fail fast, not answer for the first
        with pytest.raises(BrokerError, match="in use"):
            EmbeddedBroker(port=broker.port).start()
        assert broker.is_running()
    assert not broker.is_running()
    assert not _port_open(broker.host, broker.port)
    broker.stop()  # idempotent


@pytest.mark.broker
def test_embedded_broker_on_requested_port_with_log(tmp_path: Path) -> None:
    port = find_free_port()
    log_path = tmp_path / "b.log"
    broker = EmbeddedBroker(port=port, log_path=log_path).start()
    try:
        assert broker.bootstrap_servers.endswith(f":{port}")
        assert log_path.exists() and "tansu" in broker.log_tail().lower()
    finally:
        broker.stop()
    assert not broker.is_running()
    assert log_path.exists()  # a caller-chosen log is kept


@pytest.mark.broker
def test_run_embedded_broker_forever_until_sigterm() -> None:
    code = "from platform_streams.dev.brokers import run_embedded_broker_forever as run; run()"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready, "no output from the broker process"
        line = proc.stdout.readline()
        match = re.search(r"bootstrap\.servers=(\S+)", line)
        assert match, line
        with KafkaAdmin(match.group(1)) as admin:
            assert isinstance(admin.list_topics(), dict)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        host, port = match.group(1).rsplit(":", 1)
        assert not _port_open(host, int(port))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --------------------------------------------------------------------------- admin


@pytest.mark.broker
def test_create_topics_is_idempotent_and_visible_at_once(admin: KafkaAdmin) -> None:
    name = f"create-{new_group_id()}"
    spec = TopicSpec(name, 3, config={"cleanup.policy": "compact", "retention.ms": "123456"})
    assert admin.create_topics([spec]) == {name: "created"}
    assert admin.partition_counts([name]) == {name: 3}
    assert admin.create_topics([spec]) == {name: "exists"}
    configs = admin.describe_topic_configs([name, f"missing-{name}"])
    assert set(configs) == {name}
    # Kafka lists defaults too, Tansu only what was set: check what both return.
    assert configs[name]["cleanup.policy"] == "compact"
    assert configs[name]["retention.ms"] == "123456"


@pytest.mark.broker
def test_partition_counts_does_not_create_missing_topics(admin: KafkaAdmin) -> None:
    missing = f"missing-{new_group_id()}"
    present = new_topic(admin, 2)
    assert admin.partition_counts([missing, present]) == {missing: None, present: 2}
    assert admin.describe_topic_configs([missing]) == {}
    time.sleep(0.2)
    assert missing not in admin.list_topics()
    assert admin.partition_counts([missing]) == {missing: None}


@pytest.mark.broker
def test_delete_topics(admin: KafkaAdmin) -> None:
    name = new_topic(admin, 2)
    missing = f"missing-{new_group_id()}"
    assert admin.delete_topics([name, missing]) == {name: "deleted", missing: "missing"}
    assert name not in admin.list_topics()
    assert admin.partition_counts([name]) == {name: None}
    assert admin.delete_topics([name]) == {name: "missing"}


@pytest.mark.broker
def test_list_topics_hides_internal_topics(admin: KafkaAdmin) -> None:
    name = new_topic(admin, 1)
    topics = admin.list_topics()
    assert topics[name] == 1
    assert not [t for t in topics if t.startswith("__")]


@pytest.mark.broker
def test_committed_offsets_and_group_state(bootstrap_servers: str, admin: KafkaAdmin) -> None:
    topic = new_topic(admin, 3)
    produce(bootstrap_servers, topic, [(b"k", b"v", p) for p in range(3) for _ in range(10)])
    group = new_group_id()
    assert admin.committed_offsets(group, [(topic, 0)]) == {(topic, 0): None}
    assert admin.group_state(group) in {"DEAD", "EMPTY"}  # unknown group: Kafka DEAD, Tansu EMPTY

    member = create_consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": group, "enable.auto.commit": False}
        | GROUP_TIMING
    )
    member.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.1)
        assert len(member.assignment()) == 3
        state = admin.group_state(group)
        while state != "STABLE" and time.monotonic() < deadline:
            member.poll(0.1)
            state = admin.group_state(group)
        assert state == "STABLE"
        member.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 2, 7)], asynchronous=False)
    finally:
        member.close()

    wanted = [(topic, 0), (topic, 1), (topic, 2)]
    assert admin.committed_offsets(group, wanted) == {(topic, 0): 4, (topic, 1): None, (topic, 2): 7}
    assert admin.committed_offsets(group) == {(topic, 0): 4, (topic, 2): 7}
    deadline = time.monotonic() + 15
    while admin.group_state(group) != "EMPTY" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert admin.group_state(group) == "EMPTY"


@pytest.mark.broker
def test_supports_delete_records_is_a_safe_cached_probe(admin: KafkaAdmin) -> None:
    before = set(admin.list_topics())
    verdict = admin.supports("delete_records")  # Kafka: True, Tansu: False (drops the connection)
    assert isinstance(verdict, bool)
    started = time.monotonic()
    assert admin.supports("delete_records") is verdict
    assert time.monotonic() - started < 0.1  # cached
    after = set(admin.list_topics())  # the admin still works, and the scratch topic is gone
    assert not [t for t in after - before if "probe-delete-records" in t]
    with pytest.raises(ValueError):
        admin.supports("time_travel")


# --------------------------------------------------------------------------- produce / consume


@pytest.mark.broker
def test_produce_consume_round_trip(bootstrap_servers: str, admin: KafkaAdmin) -> None:
    topic = new_topic(admin, 2)
    base = 1_700_000_000_000
    records = [(f"k{i}".encode(), f"v{i}".encode(), i % 2) for i in range(10)]
    headers = [("h1", b"a"), ("h1", b"b"), ("empty", b"")]
    placed = produce(
        bootstrap_servers, topic, records, timestamp_ms=[base + i for i in range(10)], headers=headers
    )
    assert [p for p, _ in placed] == [i % 2 for i in range(10)]
    produce(bootstrap_servers, topic, [(None, b"no-key", 0)])

    got = consume_all(bootstrap_servers, topic, expected=11, timeout_s=30)
    assert len(got) == 11
    by_value = {r.value: r for r in got}
    for i in range(10):
        rec = by_value[f"v{i}".encode()]
        expected = (topic, i % 2, f"k{i}".encode(), base + i)
        assert (rec.topic, rec.partition, rec.key, rec.timestamp) == expected
        assert rec.headers == headers
        assert (rec.partition, rec.offset) == placed[i]
    assert by_value[b"no-key"].key is None and by_value[b"no-key"].headers == []
    # per-partition order is produce order
    p0 = [r.value for r in sorted(got, key=lambda r: r.offset) if r.partition == 0]
    assert p0 == [f"v{i}".encode() for i in range(0, 10, 2)] + [b"no-key"]


@pytest.mark.broker
def test_murmur2_random_matches_default_partition(bootstrap_servers: str, admin: KafkaAdmin) -> None:
    partitions = 7
    topic = new_topic(admin, partitions)
    rng = random.Random(42)
    keys = [f"key-{i}".encode() for i in range(150)] + [rng.randbytes(rng.randint(1, 40)) for _ in range(50)]
    keys = list(dict.fromkeys(keys))
    placed = produce(bootstrap_servers, topic, [(k, b"x") for k in keys], partitioner="murmur2_random")
    for key, (partition, _offset) in zip(keys, placed, strict=True):
        assert partition == default_partition(key, partitions), key
    got = consume_all(bootstrap_servers, topic, expected=len(keys), timeout_s=30)
    assert len(got) == len(keys)
    assert all(r.key is not None and r.partition == default_partition(r.key, partitions) for r in got)
    assert len({r.partition for r in got}) == partitions


# --------------------------------------------------------------------------- log reader


@pytest.fixture
def log_topic(bootstrap_servers: str, admin: KafkaAdmin) -> str:
    """A 2-partition topic: 30 records on partition 0, written in several batches
    (Tansu's ListOffsets is wrong exactly then), partition 1 empty."""
    topic = new_topic(admin, 2)
    for chunk in range(3):
        produce(bootstrap_servers, topic, [(b"k", f"{chunk * 10 + i}".encode(), 0) for i in range(10)])
    return topic


def _offsets(bootstrap: str, topic: str, partition: int, start: int, **kwargs: object) -> list[int]:
    conf = {"bootstrap.servers": bootstrap}
    return [m.offset() or 0 for m in read_partition_range(conf, topic, partition, start, **kwargs)]  # type: ignore[arg-type]


@pytest.mark.broker
def test_log_reader_reads_exactly_the_range(bootstrap_servers: str, log_topic: str) -> None:
    assert _offsets(bootstrap_servers, log_topic, 0, 5, end_offset=17) == list(range(5, 17))
    assert _offsets(bootstrap_servers, log_topic, 0, 5, end_offset=500, max_records=3) == [5, 6, 7]
    assert _offsets(bootstrap_servers, log_topic, 0, 29, end_offset=30) == [29]
    assert _offsets(bootstrap_servers, log_topic, 0, 12, end_offset=12) == []


@pytest.mark.broker
def test_log_reader_stops_at_partition_eof(bootstrap_servers: str, log_topic: str) -> None:
    started = time.monotonic()
    assert _offsets(bootstrap_servers, log_topic, 0, 10) == list(range(10, 30))
    assert _offsets(bootstrap_servers, log_topic, 0, OFFSET_BEGINNING) == list(range(30))
    assert _offsets(bootstrap_servers, log_topic, 0, 30) == []
    assert _offsets(bootstrap_servers, log_topic, 1, OFFSET_BEGINNING) == []
    assert time.monotonic() - started < 10
    conf = {"bootstrap.servers": bootstrap_servers}
    values = [m.value() for m in read_partition_range(conf, log_topic, 0, 0)]
    assert values == [str(i).encode() for i in range(30)]


@contextlib.contextmanager
def _five_more_records_after(bootstrap: str, topic: str, delay_s: float) -> Iterator[None]:
    """Offsets 30-34 appended to partition 0 of ``log_topic`` ``delay_s`` into the block."""

    def later() -> None:
        time.sleep(delay_s)
        produce(bootstrap, topic, [(b"k", f"{30 + i}".encode(), 0) for i in range(5)])

    writer = threading.Thread(target=later)
    writer.start()
    try:
        yield
    finally:
        writer.join()


@pytest.mark.broker
def test_log_reader_waits_for_records_up_to_end_offset(bootstrap_servers: str, log_topic: str) -> None:
    with _five_more_records_after(bootstrap_servers, log_topic, 0.5):
        got = _offsets(bootstrap_servers, log_topic, 0, 25, end_offset=35, timeout_s=20)
    assert got == list(range(25, 35))


@pytest.mark.broker
def test_log_reader_fails_instead_of_hanging(bootstrap_servers: str, log_topic: str) -> None:
    started = time.monotonic()
    with pytest.raises(StreamsTimeoutError):
        _offsets(bootstrap_servers, log_topic, 0, 25, end_offset=40, timeout_s=1.0)
    # Kafka: OFFSET_OUT_OF_RANGE via auto.offset.reset=error; Tansu stalls silently and the
    # reader detects it from the fetch-side high watermark.
    with pytest.raises(BrokerError) as info:
        _offsets(bootstrap_servers, log_topic, 0, 40, timeout_s=10.0)
    assert info.value.code == "OFFSET_OUT_OF_RANGE"
    assert time.monotonic() - started < 8


@pytest.mark.broker
def test_fetch_wait_escalation_keeps_positions(
    bootstrap_servers: str, log_topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consumer recreated with the long fetch wait resumes where the old one was: no
    record lost or repeated (idle_s=0 escalates at the first empty round, i.e. before,
    during or after the first fetch, whatever the broker's speed). Watched on every broker
    here, as on one that starves a short wait."""
    monkeypatch.setattr(fetch_wait, "_answers_when_wait_expires", lambda conf: False)
    conf = {"bootstrap.servers": bootstrap_servers, "group.id": new_group_id(), "enable.partition.eof": True}
    starts = {(log_topic, 0): OFFSET_BEGINNING, (log_topic, 1): OFFSET_BEGINNING}
    guard = FetchWaitEscalation({**conf, "fetch.wait.max.ms": 10}, starts, reader="test", idle_s=0.0)
    offsets: list[int] = []
    at_end: set[int] = set()
    try:
        guard.assign()
        deadline = time.monotonic() + 60
        while at_end != {0, 1} and time.monotonic() < deadline:
            messages = guard.consumer.consume(5, 0.05)
            guard.after_consume(messages)
            for msg in messages:
                err = msg.error()
                if err is None:
                    offsets.append(msg.offset() or 0)
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition() or 0)
    finally:
        guard.close()
    assert guard.escalated and guard.conf["fetch.wait.max.ms"] == LONG_FETCH_WAIT_MS
    assert offsets == list(range(30)) and at_end == {0, 1}


@pytest.mark.broker
def test_fetch_wait_is_watched_only_where_the_broker_can_starve_a_short_wait(
    bootstrap_servers: str, admin: KafkaAdmin, broker_kind: str, log_topic: str
) -> None:
    """The escalation is a workaround for one broker's storage (docs/brokers.md): once the
    process knows its broker's offsets are exact (Apache Kafka answers a fetch with what it
    has when the wait runs out), a reader with the short wait is not watched and rounds
    without progress change nothing; elsewhere the first such round escalates (idle_s=0)."""
    kafka_like = admin.supports("exact_list_offsets")
    assert kafka_like == (broker_kind == "kafka") or broker_kind == "external"
    conf = {"bootstrap.servers": bootstrap_servers, "group.id": new_group_id(), "fetch.wait.max.ms": 10}
    reader = FetchWaitEscalation(conf, {(log_topic, 0): OFFSET_BEGINNING}, reader="test", idle_s=0.0)
    try:
        reader.after_consume([])
        reader.after_consume([])
    finally:
        reader.close()
    assert reader.escalated != kafka_like
    assert reader.conf["fetch.wait.max.ms"] == (10 if kafka_like else LONG_FETCH_WAIT_MS)


@pytest.mark.broker
def test_log_reader_escalates_its_fetch_wait_and_reads_on(
    bootstrap_servers: str, log_topic: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A reader that sees neither a record nor an EOF for STARVATION_S (here: waiting for
    records up to end_offset) switches to the long fetch wait once, warns, and still reads
    the range exactly; log_end_offsets answers through the same helper. Watched on every
    broker here, as on one that starves a short wait."""
    monkeypatch.setattr(fetch_wait, "STARVATION_S", 0.2)
    monkeypatch.setattr(fetch_wait, "_answers_when_wait_expires", lambda conf: False)

    with (
        _five_more_records_after(bootstrap_servers, log_topic, 1.0),
        caplog.at_level(logging.WARNING, logger="platform_streams.kafka.fetch_wait"),
    ):
        got = _offsets(bootstrap_servers, log_topic, 0, 25, end_offset=35, timeout_s=30)
    assert got == list(range(25, 35))
    assert any("fetch.wait.max.ms=10" in r.getMessage() for r in caplog.records)
    conf = {"bootstrap.servers": bootstrap_servers}
    assert log_end_offsets(conf, [(log_topic, 0), (log_topic, 1)]) == {(log_topic, 0): 35, (log_topic, 1): 0}


@pytest.mark.broker
def test_empty_partitions_from_list_offsets(
    bootstrap_servers: str, admin: KafkaAdmin, log_topic: str
) -> None:
    """``empty_partitions``: only a log without any record is empty, on both brokers. Partition
    0 holds three batches, where Tansu's ListOffsets(latest) answers wrongly (not 30) but not
    0; a partition with one record is not empty either; partitions of two topics in one call."""
    other = new_topic(admin, 2)
    produce(bootstrap_servers, other, [(b"k", b"v", 1)])
    asked = [(log_topic, 0), (log_topic, 1), (other, 0), (other, 1)]
    assert empty_partitions(admin, asked) == {(log_topic, 1), (other, 0)}
    assert empty_partitions(admin, []) == set()


@pytest.mark.broker
def test_high_watermark_from_fetch(bootstrap_servers: str, log_topic: str) -> None:
    consumer = create_consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": new_group_id(),
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        }
    )
    tp = TopicPartition(log_topic, 0)
    try:
        assert high_watermark_from_fetch(consumer, tp) is None  # nothing fetched yet
        consumer.assign([TopicPartition(log_topic, 0, 28)])
        deadline = time.monotonic() + 10
        eof = False
        while not eof and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.05):
                err = msg.error()
                eof = eof or (err is not None and err.code() == KafkaError._PARTITION_EOF)
        assert eof
        assert high_watermark_from_fetch(consumer, tp) == 30
    finally:
        consumer.close()
