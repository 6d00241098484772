"""Kafka offset ranges: planned on the driver, and read per Spark task with confluent-kafka.

The plan serves both readers of :mod:`.kafka_source`; the per-task confluent-kafka read
is the fallback where Spark's own Kafka source (a separate connector) is not loaded, and
does what that connector does:

1. the driver plans ``OffsetRange(topic, partition, start, end)`` per partition: the start
   from ListOffsets(earliest) (right on every broker), or a time lookup; the end from
   *fetch responses* (:func:`~platform_streams.kafka.log_end_offsets`), never from
   ListOffsets(latest), which some brokers get wrong. Large ranges are split so that several
   tasks read one partition in parallel;
2. each range becomes one Spark partition, read by
   :func:`~platform_streams.kafka.read_partition_range`, which stops at the first offset
   >= ``end`` or at the fetch-side log end, counting no offsets (they are not dense).

Records travel through Spark as plain tuples (:data:`RawRecord`): confluent-kafka messages
do not pickle. This module has no pyspark import: it is plain Python that Spark runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from platform_streams.errors import BrokerError
from platform_streams.kafka import KafkaAdmin, log_end_offsets, offsets_for_time, read_partition_range
from platform_streams.kafka.authorized import missing_operations, not_allowed

__all__ = [
    "OffsetRange",
    "RawRecord",
    "admin_conf",
    "plan_offset_ranges",
    "read_offset_ranges",
    "reader_conf",
    "visible_end",
]

log = logging.getLogger(__name__)

#: (topic, partition, offset, key, value, timestamp ms, headers)
RawRecord = tuple[str, int, int, bytes | None, bytes | None, int, list[tuple[str, bytes | None]] | None]

#: "earliest"/"latest", a timestamp in ms, or explicit offsets per (topic, partition)
Position = Literal["earliest", "latest"] | int | Mapping[tuple[str, int], int]


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one partition, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def reader_conf(consumer_conf: Mapping[str, Any], isolation_level: str) -> dict[str, Any]:
    """A group-less reader's settings: the caller's connection settings, fast fetch timing."""
    conf = {
        k: v
        for k, v in consumer_conf.items()
        if k
        not in ("group.id", "group.instance.id", "client.id", "enable.partition.eof", "auto.offset.reset")
    }
    conf["isolation.level"] = isolation_level
    conf.setdefault("allow.auto.create.topics", False)
    return conf


def admin_conf(consumer_conf: Mapping[str, Any]) -> dict[str, Any]:
    """The connection and security settings of a consumer config, for an admin client."""
    prefixes = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.dns.", "socket.")
    return {k: v for k, v in consumer_conf.items() if k.startswith(prefixes)}


def plan_offset_ranges(
    consumer_conf: Mapping[str, Any],
    topics: Sequence[str],
    *,
    partitions: Iterable[int] | None = None,
    start: Position = "earliest",
    end: Position = "latest",
    max_offsets_per_range: int = 2_000_000,
    timeout_s: float = 30.0,
    strict_start: bool = False,
) -> list[OffsetRange]:
    """Offset ranges covering ``topics`` between ``start`` and ``end``; empty ranges are left out.

    ``partitions`` limits every topic to those partition numbers. ``end="latest"`` is the
    log end seen by fetching now: a consistent point to read up to while producers go on.
    A ``start`` offset below a partition's log start is raised to it, or, with
    ``strict_start`` (a read that continues a snapshot: the records in between are gone),
    refused with ``ValueError``.
    """
    if max_offsets_per_range <= 0:
        raise ValueError("max_offsets_per_range must be > 0")
    with KafkaAdmin(admin_conf(consumer_conf)) as admin:
        counts = admin.partition_counts(topics, timeout=timeout_s)
        missing = sorted(t for t, n in counts.items() if not n)
        if missing:
            # a topic the principal may not DESCRIBE is hidden as if it did not exist
            denied = missing_operations(admin, {t: ["READ"] for t in missing}, {})
            if denied:
                raise BrokerError(not_allowed(denied, "spark"), code="TOPIC_AUTHORIZATION_FAILED")
            raise ValueError(f"topics not found: {missing}")
        wanted = set(partitions) if partitions is not None else None
        tps = [
            (topic, p) for topic in topics for p in range(counts[topic] or 0) if wanted is None or p in wanted
        ]
        earliest = {
            tp: off for tp, (off, _ts) in admin.list_offsets(tps, "earliest", timeout=timeout_s).items()
        }
        ends = log_end_offsets(consumer_conf, tps, timeout_s=timeout_s, admin=admin)
        bounds = {tp: (max(earliest[tp], 0), ends[tp]) for tp in tps}
        if strict_start and isinstance(start, Mapping):
            _refuse_below_start(start, bounds)
        starts = _resolve(admin, consumer_conf, start, bounds, lower=True, timeout_s=timeout_s)
        stops = _resolve(admin, consumer_conf, end, bounds, lower=False, timeout_s=timeout_s)
    ranges: list[OffsetRange] = []
    for tp in tps:
        lo, hi = starts[tp], min(stops[tp], bounds[tp][1])
        while lo < hi:
            step = min(hi, lo + max_offsets_per_range)
            ranges.append(OffsetRange(tp[0], tp[1], lo, step))
            lo = step
    log.info(
        "planned %d offset ranges over %d partitions of %s (%d offsets)",
        len(ranges),
        len(tps),
        ", ".join(topics),
        sum(r.size for r in ranges),
    )
    return ranges


def _refuse_below_start(
    start: Mapping[tuple[str, int], int], bounds: Mapping[tuple[str, int], tuple[int, int]]
) -> None:
    gone = [
        f"{tp[0]}-{tp[1]} from offset {start[tp]} (the log now starts at {bounds[tp][0]})"
        for tp in sorted(bounds)
        if tp in start and int(start[tp]) < bounds[tp][0]
    ]
    if gone:
        raise ValueError(
            f"cannot read {', '.join(gone)}: the records in between were deleted (a truncation "
            "since the read was planned); nothing was read"
        )


def _resolve(
    admin: KafkaAdmin,
    consumer_conf: Mapping[str, Any],
    position: Position,
    bounds: Mapping[tuple[str, int], tuple[int, int]],
    *,
    lower: bool,
    timeout_s: float,
) -> dict[tuple[str, int], int]:
    if position == "earliest":
        return {tp: b[0] for tp, b in bounds.items()}
    if position == "latest":
        return {tp: b[1] for tp, b in bounds.items()}
    if isinstance(position, Mapping):
        default = 0 if lower else None
        out = {}
        for tp, (lo, hi) in bounds.items():
            given = position.get(tp, default)
            out[tp] = hi if given is None else min(max(int(given), lo), hi)
        return out
    lookups, warnings = offsets_for_time(admin, consumer_conf, int(position), bounds, timeout_s=timeout_s)
    for warning in warnings:
        log.warning("%s", warning)
    return {tp: lookup.offset for tp, lookup in lookups.items()}


def read_offset_ranges(
    consumer_conf: Mapping[str, Any], ranges: Iterable[OffsetRange], *, timeout_s: float = 60.0
) -> Iterator[RawRecord]:
    """Every record of ``ranges`` as a :data:`RawRecord` (run inside a Spark task)."""
    for rng in ranges:
        started = time.monotonic()
        count = 0
        records = read_partition_range(
            consumer_conf, rng.topic, rng.partition, rng.start, end_offset=rng.end, timeout_s=timeout_s
        )
        try:
            for msg in records:
                raw_headers: Any = msg.headers()
                headers = list(raw_headers.items()) if isinstance(raw_headers, dict) else raw_headers
                yield (
                    rng.topic,
                    rng.partition,
                    msg.offset() or 0,
                    msg.key(),
                    msg.value(),
                    msg.timestamp()[1],
                    headers,
                )
                count += 1
        finally:
            getattr(records, "close")()  # noqa: B009  # a generator: close its consumer now
        log.info(
            "read %s-%d offsets [%d, %d): %d records in %.2fs",
            rng.topic,
            rng.partition,
            rng.start,
            rng.end,
            count,
            time.monotonic() - started,
        )


def visible_end(
    conf: Mapping[str, Any], topic: str, partition: int, start: int, end: int, *, timeout_s: float = 60.0
) -> int:
    """One past the last record of ``[start, end)`` a reader with ``conf`` gets (``start``: none).

    The offsets after it are invisible: transaction markers, aborted records. Spark's Kafka
    source, asked to read up to ``end``, polls for them and waits its whole poll timeout
    (``kafkaConsumer.pollTimeoutMs``, 120 s by default) before it accepts that nothing
    comes -- at the end of nearly every exactly-once changelog. Reading it up to this offset
    instead gives the same records without the wait. Reads back from ``end`` in growing
    windows (1, 64, 4096, ... offsets).
    """
    window = 1
    while True:
        low = max(start, end - window)
        last = None
        records = read_partition_range(conf, topic, partition, low, end_offset=end, timeout_s=timeout_s)
        for msg in records:
            last = msg.offset()
        if last is not None:
            return int(last) + 1
        if low <= start:
            return start
        window *= 64
