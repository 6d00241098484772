"""Read one partition over an offset range, ending at the log end seen by *fetching*.

This is the building block of changelog restore (and of tools that dump a partition):
"give me every record of topic-p from offset A up to B, or up to whatever the end of the
log is right now".

Why the end is found from fetch responses and never from ListOffsets:

* On Tansu, ListOffsets(latest) -- what ``Consumer.query_watermark_offsets`` /
  ``get_watermark_offsets(cached=False)`` send -- returns the *start offset of the last
  batch + 1*, not the high watermark (20 records written in batches: 14). A restore that
  stopped there would silently lose the tail of the changelog. ListOffsets with
  READ_COMMITTED returns 0 there instead of the last stable offset.
* The high watermark carried in every Fetch response is right on both Tansu and Kafka.
  librdkafka surfaces it as the partition-EOF event (``enable.partition.eof``) and as the
  cached watermark (``get_watermark_offsets(cached=True)``), see
  :func:`high_watermark_from_fetch`.
* Offsets are not dense: transaction markers take an offset on Kafka, and aborted records
  are removed on Tansu. So "done" means "reached an offset >= end" *or* "the fetch says
  the log ends at >= end", never "counted end - start records".
* Fetching beyond the log end makes Tansu stall silently (no OFFSET_OUT_OF_RANGE, no
  reset); Kafka answers OFFSET_OUT_OF_RANGE. With ``auto.offset.reset=error`` (our
  default here) Kafka reports it, and for Tansu the reader compares its position with
  the fetch-side high watermark itself; both end in a :class:`BrokerError` with
  ``code="OFFSET_OUT_OF_RANGE"`` instead of a hang.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from operator import methodcaller
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from platform_streams.errors import BrokerError, StreamsTimeoutError
from platform_streams.kafka.errors import is_fatal, to_broker_error
from platform_streams.kafka.fetch_wait import FetchWaitEscalation

__all__ = [
    "LogEndListener",
    "PartitionReader",
    "high_watermark_from_fetch",
    "read_partition_batches",
    "read_partition_range",
]

#: Called with ``(log_start, log_end)`` as fetch responses report them: once the first fetch
#: answered, and again whenever the end moved (checked once per consumed batch, not per record).
LogEndListener = Callable[[int, int], None]

_log = logging.getLogger(__name__)

# Consumer errors after which waiting cannot help: the range cannot be read.
_TERMINAL_CODES: frozenset[int] = frozenset(
    {
        KafkaError._AUTO_OFFSET_RESET,
        KafkaError.OFFSET_OUT_OF_RANGE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }
)

# Defaults for a read-only, assign()-based reader; the caller's consumer_conf wins.
_READER_DEFAULTS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "error",
    # librdkafka pauses fetching for fetch.queue.backoff.ms (1 s) whenever its local queue
    # is full; 10 ms more than doubles restore throughput (Tansu, one consumer: ~200k -> ~500k rec/s).
    "fetch.queue.backoff.ms": 10,
    # The fetch that discovers the log end waits up to fetch.wait.max.ms (500 ms default)
    # for data that will not come; every partition restore pays it once. A reader that
    # Tansu starves with it (a large partition) escalates, see kafka/fetch_wait.py.
    "fetch.wait.max.ms": 10,
}


def high_watermark_from_fetch(consumer: Consumer, tp: TopicPartition) -> int | None:
    """Return the high watermark of ``tp`` as carried by the last Fetch response, if any.

    This is the watermark librdkafka caches from fetching (no request is sent), so it is
    only known after the consumer fetched from that partition. It is correct on Tansu,
    unlike ``query_watermark_offsets`` (ListOffsets), see the module docstring.
    """
    _low, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), cached=True)
    return high if high >= 0 else None


def read_partition_range(
    consumer_conf: Mapping[str, Any],
    topic: str,
    partition: int,
    start_offset: int,
    *,
    end_offset: int | None = None,
    max_records: int | None = None,
    timeout_s: float = 30.0,
    batch_size: int = 1000,
    on_log_end: LogEndListener | None = None,
) -> Iterator[Message]:
    """Yield the records of ``topic``-``partition`` from ``start_offset`` on, in order.

    Stops (without yielding it) at the first record with offset >= ``end_offset``, or,
    when the fetch-side log end is already >= ``end_offset``, at that end. With
    ``end_offset=None`` it stops at the partition end reported by the first partition-EOF
    event. ``max_records`` caps the number of records yielded. ``start_offset`` may be a
    logical offset (``OFFSET_BEGINNING``).

    ``timeout_s`` bounds the time *without progress* (no record arrived), not the total
    time, so large restores are not cut short; exceeding it raises
    :class:`StreamsTimeoutError` (e.g. ``end_offset`` lies beyond what will ever be
    written, or a read_committed reader is blocked by an open transaction). Starting
    outside the log (past its end; on Kafka also before its start, after retention)
    raises :class:`BrokerError` with ``code="OFFSET_OUT_OF_RANGE"``.

    ``consumer_conf`` needs ``bootstrap.servers``; ``isolation.level`` is the caller's
    choice. No group is joined and nothing is committed. It is a generator: exhaust it or
    close it (``contextlib.closing``) to close the consumer promptly. ``on_log_end`` learns
    the fetch-side log start and end (what a restore has left to read; see
    :data:`LogEndListener`).
    """
    if max_records is not None and max_records <= 0:
        return
    yielded = 0
    for batch in read_partition_batches(
        consumer_conf,
        topic,
        partition,
        start_offset,
        end_offset=end_offset,
        timeout_s=timeout_s,
        batch_size=batch_size,
        on_log_end=on_log_end,
    ):
        if max_records is not None and yielded + len(batch) >= max_records:
            yield from batch[: max_records - yielded]
            return
        yield from batch
        yielded += len(batch)


def read_partition_batches(
    consumer_conf: Mapping[str, Any],
    topic: str,
    partition: int,
    start_offset: int,
    *,
    end_offset: int | None = None,
    timeout_s: float = 30.0,
    batch_size: int = 1000,
    on_log_end: LogEndListener | None = None,
) -> Generator[list[Message], None, None]:
    """:func:`read_partition_range` without ``max_records``, a non-empty list of records at a time.

    What a restore reads with: the per-record work of the reader (checks, the progress
    clock) runs once per consumed batch here, and the caller loops over plain lists.
    """
    if end_offset is not None and start_offset >= 0 and end_offset <= start_offset:
        return
    reader = PartitionReader(consumer_conf, topic, partition, start_offset, timeout_s=timeout_s)
    try:
        yield from reader.batches(end_offset=end_offset, batch_size=batch_size, on_log_end=on_log_end)
    finally:
        reader.close()


class PartitionReader:
    """One partition's reader, opened: the consumer exists and is assigned at ``start_offset``.

    Opening is where a read's fixed cost is (a consumer, its connection, metadata and the
    first fetch: ~50-100 ms on Tansu), and librdkafka fetches in the background from the
    moment of :meth:`__init__`. A restore opens the next changelog partition's reader while
    it applies the current one (``platform_streams.state.restore``'s read-ahead), so only the
    first partition waits for it. :meth:`batches` reads as :func:`read_partition_batches`;
    :meth:`close` closes the consumer (the owner's job, also for a reader never read).
    """

    def __init__(
        self,
        consumer_conf: Mapping[str, Any],
        topic: str,
        partition: int,
        start_offset: int,
        *,
        timeout_s: float,
    ) -> None:
        conf: dict[str, Any] = {**_READER_DEFAULTS, **consumer_conf}
        conf.setdefault("group.id", f"platform-streams-log-reader-{uuid.uuid4().hex[:12]}")
        conf["enable.partition.eof"] = True  # the end-of-log signal this reader relies on
        self.tp = TopicPartition(topic, partition)
        self.start_offset = start_offset
        self.timeout_s = timeout_s
        self._fetch = FetchWaitEscalation(
            conf, {(topic, partition): start_offset}, reader=f"reading {topic}-{partition}"
        )
        try:
            if start_offset < 0:
                # A logical start offset is resolved by a ListOffsets request that librdkafka
                # only sends once it knows the partition leader; when metadata is not cached
                # yet it retries on a 500 ms timer. All-topics metadata first (never a named
                # request: it could create the topic) makes the lookup immediate.
                _warm_metadata(self._fetch.consumer, timeout_s)
            self._fetch.assign()
        except BaseException:
            self._fetch.close()
            raise

    def batches(
        self,
        *,
        end_offset: int | None = None,
        batch_size: int = 1000,
        on_log_end: LogEndListener | None = None,
    ) -> Iterator[list[Message]]:
        """Non-empty lists of records up to ``end_offset`` or the log end (read once)."""
        self._fetch.watch_from_now()  # an opened reader may have waited its turn: not starvation
        return _read(
            self._fetch, self.tp, self.start_offset, end_offset, self.timeout_s, batch_size, on_log_end
        )

    def close(self) -> None:
        self._fetch.close()


def _read(
    reader: FetchWaitEscalation,
    tp: TopicPartition,
    start_offset: int,
    end_offset: int | None,
    timeout_s: float,
    batch_size: int,
    on_log_end: LogEndListener | None = None,
) -> Iterator[list[Message]]:
    """The poll loop of :func:`read_partition_batches` (the consumer is already assigned)."""
    where = f"{tp.topic}-{tp.partition}"
    next_offset = start_offset  # only meaningful once >= 0
    last_progress = time.monotonic()
    log_end = -1
    while True:
        consumer = reader.consumer
        # What is ready now; when nothing is, wait for the next event only: consume(n, t)
        # waits the whole timeout unless n records arrive, which made every partition pay
        # 50 ms to see its EOF (and a restore pay it per partition, even an empty one).
        messages = consumer.consume(num_messages=batch_size, timeout=0)
        if not messages:
            first = consumer.poll(0.05)
            messages = [] if first is None else [first]
        reader.after_consume(messages)  # starved by short fetch waits: a new consumer
        consumer = reader.consumer
        if on_log_end is not None and messages:
            log_start, fetched_end = consumer.get_watermark_offsets(tp, cached=True)
            if fetched_end >= 0 and fetched_end != log_end:
                log_end = fetched_end
                on_log_end(max(log_start, 0), fetched_end)
        # the common case, a list of records with no event among them: judged by C calls (no
        # Python statement per record); offsets ascend, so the last one bounds them all
        if (
            messages
            and not any(map(_error_of, messages))
            and (end_offset is None or (messages[-1].offset() or 0) < end_offset)
        ):
            next_offset = (messages[-1].offset() or 0) + 1
            last_progress = time.monotonic()
            yield messages
            continue
        records: list[Message] = []
        for msg in messages:
            err = msg.error()
            if err is not None:
                if records:  # what came before the event, first
                    next_offset = (records[-1].offset() or 0) + 1
                    last_progress = time.monotonic()
                    yield records
                    records = []
                if err.code() == KafkaError._PARTITION_EOF:
                    eof_at = msg.offset() or 0
                    if end_offset is None or eof_at >= end_offset:
                        return
                    continue  # the log may still grow up to end_offset
                _handle_error(err, where)
                continue
            if end_offset is not None and (msg.offset() or 0) >= end_offset:
                if records:
                    yield records
                return
            records.append(msg)
        if records:
            next_offset = (records[-1].offset() or 0) + 1
            last_progress = time.monotonic()
            yield records
        if messages:
            continue
        high = high_watermark_from_fetch(consumer, tp)
        if high is not None and next_offset >= 0 and next_offset > high:
            raise BrokerError(
                f"{where}: start offset {next_offset} is beyond the log end {high}",
                code="OFFSET_OUT_OF_RANGE",
            )
        if time.monotonic() - last_progress > timeout_s:
            target = "the partition end" if end_offset is None else f"offset {end_offset}"
            raise StreamsTimeoutError(
                f"{where}: no progress for {timeout_s:.1f}s reading from offset {next_offset} "
                f"towards {target} (log end seen by fetch: {high})"
            )


#: a record's error (None for a record, a ``KafkaError`` for an event), as a C callable for map()
_error_of = methodcaller("error")


def _warm_metadata(consumer: Consumer, timeout_s: float) -> None:
    try:
        consumer.list_topics(timeout=min(timeout_s, 10.0))
    except KafkaException as exc:
        raise to_broker_error(exc, "fetch metadata before reading") from exc


def _handle_error(err: KafkaError, where: str) -> None:
    """Raise for errors that make the range unreadable; log the transient ones."""
    if err.code() in _TERMINAL_CODES:
        code = "OFFSET_OUT_OF_RANGE" if err.code() == KafkaError._AUTO_OFFSET_RESET else err.name()
        raise BrokerError(f"{where}: {err.str()}", code=code, retriable=False)
    if is_fatal(err):
        raise to_broker_error(err, f"reading {where}")
    _log.debug("transient consumer error while reading %s: %s", where, err)
