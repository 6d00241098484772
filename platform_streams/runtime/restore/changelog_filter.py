"""Which changelog records a restore may apply: those written for committed input.

The other half of :mod:`platform_streams.processor.source_position`. A changelog record
whose ``__ps_src`` positions are not all below the committed offsets of the task's input
partitions was written for input that will be processed again (a crash before the commit,
a transaction the broker did not abort); applying it would count that input twice.

Records without the header (written by another tool, or by Kafka Streams) are applied.
When a store's changelog *is* one of the task's source topics (a KTable source reused as
changelog), the record's own offset decides: only what the committed offset covers.

The same judge serves the active restore (skip what is not committed) and standby tasks
(stop at the first record not committed yet, and go on once the active owner commits).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from platform_streams.kafka import TopicPartition
from platform_streams.processor.source_position import (
    SOURCE_HEADER,
    canonical_partitions,
    decode_positions,
    find_header,
    is_committed,
)
from platform_streams.runtime.broker_calls import retrying

__all__ = ["CommittedInputFilter", "fetch_committed"]

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]


def fetch_committed(
    consumer: Any, partitions: Iterable[TopicPartitionKey], timeout_s: float
) -> dict[TopicPartitionKey, int | None]:
    """Committed offsets (next offset to read) of the application's group; None where none.

    ``consumer`` must use the application's group id (the main consumer, or any consumer
    with that ``group.id`` that never subscribes). Retries through broker outages.
    """
    wanted = [TopicPartition(t, p) for t, p in partitions]
    if not wanted:
        return {}

    def call() -> list[Any]:
        result: list[Any] = consumer.committed(wanted, timeout=10)
        return result

    result = retrying(call, "fetch committed offsets", timeout_s)
    return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in result}


class CommittedInputFilter:
    """``record_filter`` for :class:`~platform_streams.state.restore.ChangelogReader`."""

    def __init__(
        self,
        source_partitions: Iterable[TopicPartitionKey],
        committed: Mapping[TopicPartitionKey, int | None],
    ) -> None:
        self.partitions = canonical_partitions(source_partitions)
        self._sources = set(self.partitions)
        self.update(committed)
        #: records judged not committed so far
        self.skipped = 0
        #: changelog partition -> ``[start, end)`` applied without reading headers
        #: (:mod:`platform_streams.runtime.restore.restore_ranges`)
        self.trusted: dict[TopicPartitionKey, tuple[int, int]] = {}
        #: records applied unread because a trusted range held them
        self.trusted_records = 0

    def update(self, committed: Mapping[TopicPartitionKey, int | None]) -> None:
        """Take newer committed offsets (standby tasks refresh them as the owner commits);
        a partition without a commit counts as 0: nothing of it is committed."""
        self.committed = {tp: committed.get(tp) or 0 for tp in self.partitions}
        self._limits = [self.committed[tp] for tp in self.partitions]

    def is_committed(self, msg: Any) -> bool:
        """True if ``msg`` (a changelog record) reflects committed input only."""
        tp = (msg.topic(), msg.partition())
        if tp in self._sources:
            return bool(msg.offset() < self.committed[tp])
        value = find_header(msg.headers())
        if value is None:
            return True
        limits = self._limits
        if len(limits) == 1:
            # one input partition (the common case, once per restored record): one number
            try:
                return int(value) < limits[0]
            except ValueError:
                pass  # another shape: judged (or reported) below
        try:
            positions = decode_positions(value)
        except ValueError:
            log.warning(
                "unreadable source-position header %r at %s-%d@%d: applying the record",
                value,
                *tp,
                msg.offset(),
            )
            return True
        return is_committed(positions, self._limits)

    def for_partition(self, topic: str, partition: int) -> Callable[[Any], bool]:
        """This filter for the records of one changelog partition (the restore's per-record test).

        For a changelog that is not a source topic, of a task with one input partition (the
        common case), the header is found and compared inline: no tuple, lookup or helper
        call per record. Anything else, or a header of another shape, takes :meth:`__call__`.
        """
        if (topic, partition) in self._sources or len(self._limits) != 1:
            return self

        def judge(msg: Any) -> bool:
            headers = msg.headers()
            if not headers:
                return True
            for name, value in headers:
                if name == SOURCE_HEADER:
                    try:
                        if int(value) < self._limits[0]:
                            return True
                    except (TypeError, ValueError):
                        return self(msg)  # judged (or reported) there
                    self.skipped += 1
                    return False
            return True

        return judge

    def trust(self, ranges: Mapping[TopicPartitionKey, tuple[int, int]]) -> None:
        """Apply the records of these changelog offset ranges without judging them (a restore's
        trusted commit ranges; see :mod:`platform_streams.runtime.restore.restore_ranges`)."""
        # a source topic reused as changelog is judged by its committed offset alone (cheap)
        self.trusted = {
            tp: (start, end) for tp, (start, end) in ranges.items() if start < end and tp not in self._sources
        }

    def batch_for_partition(self, topic: str, partition: int) -> Callable[[list[Any]], list[Any]]:
        """:meth:`_judged_batches` of one changelog partition, with the records of a trusted
        range (:meth:`trust`) applied unread: a whole batch inside it by one comparison of its
        first and last offsets."""
        judged = self._judged_batches(topic, partition)
        trusted = self.trusted.get((topic, partition))
        if trusted is None:
            return judged
        start, end = trusted
        judge = self.for_partition(topic, partition)

        def select(messages: list[Any]) -> list[Any]:
            if not messages:
                return messages
            first, last = messages[0].offset(), messages[-1].offset()
            if start <= first and last < end:
                self.trusted_records += len(messages)
                return messages
            if last < start or first >= end:
                return judged(messages)
            kept = []
            for msg in messages:  # the batch that crosses a bound of the range
                if start <= msg.offset() < end:
                    self.trusted_records += 1
                    kept.append(msg)
                elif judge(msg):
                    kept.append(msg)
            return kept

        return select

    def _judged_batches(self, topic: str, partition: int) -> Callable[[list[Any]], list[Any]]:
        """:meth:`for_partition` over a consumed batch: the records to apply, in order.

        In the common case every record carries just the source header with a position below
        the committed offset; one comprehension finds that without a Python call per record.
        A batch where any record is not that (a header of another shape, a record to skip)
        is judged record by record instead, so what is kept and counted is the same.
        """
        judge = self.for_partition(topic, partition)
        if judge is self:
            return lambda messages: [msg for msg in messages if judge(msg)]
        header = SOURCE_HEADER

        def select(messages: list[Any]) -> list[Any]:
            limit = self._limits[0]  # read per batch: standby tasks update the limits
            try:
                kept = [
                    msg
                    for msg in messages
                    if (headers := msg.headers()) is None
                    # the position header comes first (a timestamped store's marker follows it)
                    or (headers and headers[0][0] == header and int(headers[0][1]) < limit)
                ]
            except (TypeError, ValueError):
                kept = []
            if len(kept) == len(messages):
                return kept
            return [msg for msg in messages if judge(msg)]

        return select

    def __call__(self, msg: Any) -> bool:
        keep = self.is_committed(msg)
        if not keep:
            self.skipped += 1
        return keep
