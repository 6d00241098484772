"""Broker helpers for tests: fresh topics and groups, produce-and-flush, read-everything.

Tests run against the embedded Tansu broker or a real cluster (``PLATFORM_STREAMS_BOOTSTRAP_SERVERS``),
so the helpers stick to behaviour both share: topics are created explicitly (never
auto-created), reading uses ``assign()`` (no group join, which Tansu holds for about half
the session timeout), and every test uses fresh topic and group names because Tansu keeps
state for the whole session and mixes badly with reused groups.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from platform_streams.errors import BrokerError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    KafkaError,
    Message,
    TopicPartition,
    TopicSpec,
    create_consumer,
    create_producer,
    is_fatal,
)

__all__ = [
    "GROUP_TIMING",
    "ConsumedRecord",
    "consume_all",
    "new_group_id",
    "new_topic",
    "produce",
]

# Consumer-group timings for every test that subscribe()s. Tansu holds a JoinGroup for
# about session.timeout.ms / 2 (~23 s with the 45 s default, ~3 s with 6 s), and a group
# keeps its first member's session timeout (a member with another one never joins), so
# all members of a test group must use exactly these values. max.poll.interval.ms must
# stay >= session.timeout.ms. Fresh group ids per test keep old members out.
GROUP_TIMING: Final[dict[str, int]] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "max.poll.interval.ms": 10000,
}

Bytesish = bytes | str | None


class ConsumedRecord(NamedTuple):
    """A consumed record as plain data (``headers`` is ``[]`` when the record had none)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes | None]]


def new_topic(
    admin: KafkaAdmin, partitions: int = 4, prefix: str = "t", *, config: Mapping[str, str] | None = None
) -> str:
    """Create a uniquely named topic and return its name (ready for produce on return)."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    admin.create_topics([TopicSpec(name, partitions, config=dict(config or {}))])
    return name


def new_group_id(prefix: str = "g") -> str:
    """A consumer group id never used before."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _as_bytes(value: Bytesish) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[Bytesish, Bytesish] | tuple[Bytesish, Bytesish, int | None]],
    *,
    timestamp_ms: int | Sequence[int] | None = None,
    partitioner: str = "murmur2_random",
    headers: Sequence[tuple[str, bytes | None]] | None = None,
    conf: Mapping[str, Any] | None = None,
) -> list[tuple[int, int]]:
    """Produce ``(key, value)`` or ``(key, value, partition)`` records and flush.

    ``timestamp_ms`` is one timestamp for all records or one per record (None: now).
    ``partitioner`` defaults to Java's (murmur2; random for null keys). Returns the
    ``(partition, offset)`` of every record in input order; raises :class:`BrokerError`
    if any delivery failed.
    """
    producer = create_producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "partitioner": partitioner, **(conf or {})}
    )
    items = list(records)
    if isinstance(timestamp_ms, Sequence) and len(timestamp_ms) != len(items):
        raise ValueError(f"{len(timestamp_ms)} timestamps for {len(items)} records")
    placed: list[tuple[int, int] | None] = [None] * len(items)
    errors: list[str] = []

    def on_delivery(index: int) -> Any:
        def callback(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(f"record {index}: {err.name()} {err.str()}")
            else:
                placed[index] = (msg.partition() or 0, msg.offset() or 0)

        return callback

    for index, record in enumerate(items):
        kwargs: dict[str, Any] = {"key": _as_bytes(record[0]), "value": _as_bytes(record[1])}
        if len(record) == 3 and record[2] is not None:
            kwargs["partition"] = record[2]
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms if isinstance(timestamp_ms, int) else timestamp_ms[index]
        if headers is not None:
            kwargs["headers"] = list(headers)
        while True:
            try:
                producer.produce(topic, on_delivery=on_delivery(index), **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(30)
    if remaining:
        errors.append(f"{remaining} record(s) not delivered within 30 s")
    if errors:
        raise BrokerError(f"produce to {topic} failed: {'; '.join(errors[:5])}")
    return [p for p in placed if p is not None]


def _headers(msg: Message) -> list[tuple[str, bytes | None]]:
    raw = msg.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return [(k, _as_bytes(v)) for k, v in pairs]


def consume_all(
    bootstrap: str,
    topic: str,
    expected: int,
    timeout_s: float = 60,
    isolation: str = "read_uncommitted",
    conf: Mapping[str, Any] | None = None,
) -> list[ConsumedRecord]:
    """Read ``topic`` from the beginning (all partitions, no group) until ``expected``
    records arrived or ``timeout_s`` passed; returns what it has (the test asserts).
    ``conf``: more client settings (security)."""
    consumer = create_consumer(
        {
            **(conf or {}),
            "bootstrap.servers": bootstrap,
            "group.id": new_group_id("consume-all"),
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 10,
            "fetch.queue.backoff.ms": 10,
        }
    )
    out: list[ConsumedRecord] = []
    try:
        # All-topics metadata (a named lookup could auto-create the topic); it also lets
        # librdkafka resolve OFFSET_BEGINNING without its 500 ms leader-wait timer.
        meta = consumer.list_topics(timeout=10).topics.get(topic)
        if meta is None:
            raise BrokerError(f"topic {topic} does not exist")
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(meta.partitions)])
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.05):
                err = msg.error()
                if err is not None:
                    if is_fatal(err):
                        raise BrokerError(f"consume {topic}: {err.str()}", code=err.name())
                    continue
                _type, ts = msg.timestamp()
                out.append(
                    ConsumedRecord(
                        msg.topic() or topic,
                        msg.partition() or 0,
                        msg.offset() or 0,
                        msg.key(),
                        msg.value(),
                        ts,
                        _headers(msg),
                    )
                )
    finally:
        consumer.close()
    return out
