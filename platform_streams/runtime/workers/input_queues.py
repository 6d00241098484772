"""Where consumed records wait for their task, and the backpressure that keeps that bounded.

A worker's consumer hands out batches mixing the partitions of all its tasks. Each record
goes to its partition's queue (owned by the task's ``PartitionGroup``, which picks the
next record by timestamp across its partitions). A partition whose queue stays over
``buffered_records_per_partition`` after the tasks ran is paused in the consumer and
resumed once it drained to half of that, as Kafka Streams does with
``buffered.records.per.partition``.

It also counts what each partition received (Kafka Streams' topic-level
``records-consumed-total``, KIP-613): one addition per run of a partition's records, none
per record. Bytes (``bytes-consumed-total``) need a length per record, so they are counted
only when ``count_bytes`` is on (metrics at DEBUG).

With a ``gap_guard``, each run of a guarded topic's records is checked for skipped offsets
first (:mod:`~platform_streams.runtime.workers.offset_gaps`: a broker that answers a fetch before
storing an earlier batch).

Records a partition delivered already are dropped. librdkafka can hand out a partition's
records a second time without being asked: an answer to a logical-offset lookup (the reset
policy's beginning) that arrives after the partition was assigned again is outdated, and
librdkafka retries it 500 ms later for the current assignment, moving the position back to
the old logical start (``rd_kafka_toppar_handle_Offset``). The cooperative path assigns kept
partitions again several times per rebalance, which is where it happens. Java's consumer
never moves a position back by itself, and Kafka Streams relies on that; so the queues keep,
per partition, the offset the next record must at least have -- set where the worker
positions the consumer (:meth:`positioned`), advanced by every run queued -- and a run
starting below it loses its records below it. Only the worker moves a position back (an
assignment, a seek), never a fetch.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from itertools import groupby, repeat
from operator import is_
from typing import Any

from platform_streams.kafka import Message, TopicPartition
from platform_streams.runtime.workers.offset_gaps import OffsetGapGuard

__all__ = ["InputQueues"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


class InputQueues:
    """The assigned partitions' queues and which of them are paused."""

    def __init__(
        self, max_buffered: int, *, count_bytes: bool = False, gap_guard: OffsetGapGuard | None = None
    ) -> None:
        self._max_buffered = max_buffered
        self._gap_guard = gap_guard
        self.queues: dict[TP, deque[Any]] = {}
        self.paused: set[TP] = set()
        #: records (and, with ``count_bytes``, key + value bytes) received per partition since
        #: the worker started; kept across rebalances (counters)
        self.consumed: dict[TP, int] = {}
        self.consumed_bytes: dict[TP, int] | None = {} if count_bytes else None
        #: per partition, the lowest offset the next record may have (module docstring);
        #: absent after a position this worker does not know (a committed or reset offset)
        self._due: dict[TP, int] = {}
        #: records dropped because their partition had delivered them already
        self.redelivered = 0

    def add(self, queues: dict[TP, deque[Any]]) -> None:
        """Route the records of these partitions to these queues (a new task's)."""
        self.queues.update(queues)
        for tp in queues:
            self._due.pop(tp, None)
        if self._gap_guard is not None:
            self._gap_guard.forget(queues)

    def positioned(self, consumer: Any, starts: Mapping[TP, int | None]) -> None:
        """The consumer was just assigned (or sought to) these offsets (None: not known).

        Every partition is resumed: librdkafka keeps a pause through unassign and assign
        (Java's consumer drops it for revoked partitions), but :meth:`clear` forgot it with
        the tasks, so nothing would resume it and the partition would never be read again.
        The gap guard checks that the first records start at the given offsets.
        """
        if starts:
            consumer.resume([TopicPartition(t, p) for t, p in starts])
        due = self._due
        for tp, offset in starts.items():
            if offset is not None and offset >= 0:
                due[tp] = offset
            else:
                due.pop(tp, None)
        if self._gap_guard is not None:
            self._gap_guard.expect(starts)

    def clear(self) -> None:
        """Forget every partition (the tasks were closed)."""
        self.queues.clear()
        self.paused.clear()
        self._due.clear()
        if self._gap_guard is not None:
            self._gap_guard.forget()

    def backlog(self) -> bool:
        """True when a queue still holds records (then the loop must not wait in a poll)."""
        return any(self.queues.values())

    def route(
        self, messages: list[Any], on_error: Callable[[Any], None], *, warn_unassigned: bool
    ) -> set[TP]:
        """Append records to their partition queues; returns the partitions that got records.

        A consumed batch is made of runs of one partition's records (librdkafka hands out
        whole fetched message sets), so each run goes to its queue with one ``extend``
        instead of a lookup and an ``append`` per record. Error events go to ``on_error``.
        """
        touched: set[TP] = set()
        if self._gap_guard is not None:
            self._gap_guard.new_batch()
        if messages and self._route_one_topic(messages, touched, warn_unassigned):
            return touched
        run_tp: TP | None = None
        run_start = 0
        for i, msg in enumerate(messages):
            if msg.error() is None:
                tp: TP | None = (msg.topic(), msg.partition())
                if tp == run_tp:
                    continue
            else:
                tp = None
            if run_tp is not None:
                self._append_run(run_tp, messages, run_start, i, touched, warn_unassigned)
            run_tp, run_start = tp, i
            if tp is None:
                on_error(msg.error())
        if run_tp is not None:
            self._append_run(run_tp, messages, run_start, len(messages), touched, warn_unassigned)
        return touched

    def _route_one_topic(self, messages: list[Any], touched: set[TP], warn: bool) -> bool:
        """Route a batch of one topic's records with no error event (the usual batch): its
        runs of one partition found by C-level iteration (the message type's own ``error``,
        ``topic`` and ``partition`` mapped over the batch, ``groupby``), not a Python step a
        record (~25-60 ns a record less: bench/RESULTS.md).
        False, having routed nothing, for any other batch (the loop of :meth:`route`),
        among them any batch with a record that is not the client's ``Message`` (test
        doubles: the C methods refuse other types with a TypeError)."""
        if type(messages[0]) is not Message:
            return False
        try:
            errors = list(map(Message.error, messages))
            # str and int: an error event (None in both) sends the batch to the loop below
            topics: list[Any] = list(map(Message.topic, messages))
            partitions: list[Any] = list(map(Message.partition, messages))
        except TypeError:  # a record of another type further on
            return False
        topic = topics[0]
        # ``is None`` each (C-level): a KafkaError compared with ``==`` raises in its C code
        if not all(map(is_, errors, repeat(None))) or topics.count(topic) != len(messages):
            return False
        start = 0
        for partition, run in groupby(partitions):
            end = start + len(list(run))
            self._append_run((topic, partition), messages, start, end, touched, warn)
            start = end
        return True

    def _append_run(
        self, tp: TP, messages: list[Any], start: int, end: int, touched: set[TP], warn: bool
    ) -> None:
        queue = self.queues.get(tp)
        if queue is None:
            if warn:
                log.warning("dropping %d record(s) of unassigned partition %s-%d", end - start, *tp)
            return
        run = messages if start == 0 and end == len(messages) else messages[start:end]
        due = self._due.get(tp)
        if due is not None and run[0].offset() < due:
            run = self._drop_delivered(tp, run, due)
            if not run:
                return
        guard = self._gap_guard
        if guard is not None and tp[0] in guard.topics:
            run = guard.admit(tp, run)
            if not run:
                return
        queue.extend(run)
        self._due[tp] = run[-1].offset() + 1
        touched.add(tp)
        consumed = self.consumed
        consumed[tp] = consumed.get(tp, 0) + len(run)
        sizes = self.consumed_bytes
        if sizes is not None:
            sizes[tp] = sizes.get(tp, 0) + sum(len(m.key() or b"") + len(m.value() or b"") for m in run)

    def _drop_delivered(self, tp: TP, run: list[Any], due: int) -> list[Any]:
        """The records of ``run`` from offset ``due`` on: the ones before it were queued (and
        perhaps processed and committed) already."""
        kept = next((i for i, msg in enumerate(run) if msg.offset() >= due), len(run))
        self.redelivered += kept
        log.warning(
            "%s-%d: the consumer delivered offsets %d..%d again (the next one due was %d); "
            "dropped %d record(s) this worker had read already",
            tp[0],
            tp[1],
            run[0].offset(),
            run[kept - 1].offset(),
            due,
            kept,
        )
        return run[kept:]

    def pause_backlogged(self, consumer: Any, touched: Iterable[TP]) -> None:
        """Pause partitions whose queue is still over the limit *after* processing.

        Checked after the tasks ran, not on arrival: a batch larger than the limit that is
        processed in the same iteration is no backlog, and pausing in librdkafka drops the
        partition's prefetched records (refetched after resume), which cost more than half
        the throughput when every batch paused and resumed its partition.
        """
        queues = self.queues
        for tp in touched:
            queue = queues.get(tp)
            if queue is not None and len(queue) > self._max_buffered and tp not in self.paused:
                consumer.pause([TopicPartition(tp[0], tp[1])])
                self.paused.add(tp)

    def resume_drained(self, consumer: Any) -> None:
        """Resume paused partitions whose queue drained to half the limit."""
        low = self._max_buffered // 2
        ready = [tp for tp in self.paused if len(self.queues.get(tp, ())) <= low]
        if ready:
            consumer.resume([TopicPartition(t, p) for t, p in ready])
            self.paused.difference_update(ready)

    def pause_all(self, consumer: Any) -> None:
        """``KafkaStreams.pause()``: pause the whole assignment (again each time: a rebalance
        may have assigned new partitions); the normal loop resumes them as they drain."""
        assignment = consumer.assignment()
        if assignment:
            consumer.pause(assignment)
            self.paused.update((tp.topic, tp.partition) for tp in assignment)
