"""A guard against a fetch that skips records the broker had not finished storing.

The embedded broker (``docs/brokers.md``: "a fetch can skip a batch still being stored")
stores a produced batch in two steps: it advances the partition's high watermark, then
writes the batch (``dynostore.rs``, ``produce``). A fetch that runs between the two steps
of one producer's request, after a second producer's later batch was stored, lists the
batches below the new watermark, does not find the first one yet and answers with the
later one. The consumer takes the later records and fetches on from after them: the
earlier batch is never delivered. Apache Kafka appends under the partition lock and moves
the high watermark only after the append, so it never does this. A read_committed reader
is far less exposed: the last stable offset stops at an open transaction's first write,
which the broker registers right after the watermark (the window left is that gap).

Kafka Streams reads its repartition topics with read_uncommitted under at-least-once,
and every upstream task writes to every repartition partition: the exact pattern that
loses records on that broker (a soak run lost three joins in five minutes). On a
repartition topic written without transactions, offsets are contiguous (no transaction
markers, no compaction, and purging moves only the log start below the committed
offset), so a gap in what the consumer hands out is the broker skipping records. The
guard keeps the records before the gap, drops the rest and seeks back to the first
missing offset, so the next fetch reads the batch once it is stored. A gap that is
still there after ``settle_s`` of re-fetching is real (for example transaction markers
an earlier exactly-once run of the application left) and is accepted with a log line.

The check costs one comparison per run of a partition's records (a consumed batch is
made of runs, see :class:`~platform_streams.runtime.workers.input_queues.InputQueues`); the
records of a run are only looked at one by one when its first and last offsets say it
has a gap.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["OffsetGapGuard"]

log = logging.getLogger(__name__)

TP = tuple[str, int]

#: how long a gap must persist while re-fetching before it is taken as real
SETTLE_S = 0.5


class OffsetGapGuard:
    """Checks that the guarded topics' records arrive without skipped offsets.

    ``seek(tp, offset)`` is called to re-fetch from a gap; the owner passes the consumer's
    seek. The expected offset of a partition is forgotten with :meth:`forget` whenever the
    consumer is repositioned by someone else (assignment, the tasks closed).
    """

    def __init__(
        self,
        topics: frozenset[str],
        seek: Callable[[TP, int], None],
        *,
        settle_s: float = SETTLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topics = topics
        self._seek = seek
        self._settle_s = settle_s
        self._clock = clock
        #: the next offset each guarded partition must deliver (absent: not known yet)
        self._next: dict[TP, int] = {}
        #: partitions re-fetching from a gap: the missing offset, when the gap was first seen,
        #: and the consumed batch of the first seek made once ``settle_s`` had passed
        self._waiting: dict[TP, tuple[int, float, int | None]] = {}
        #: consumed batches so far (:meth:`new_batch`): a run of a later batch than a seek's
        #: was fetched after that seek (a seek is synchronous and drops what was prefetched)
        self._batch = 0
        #: how many times a gap was re-fetched, and how many gaps were accepted as real
        self.refetches = 0
        self.accepted = 0
        self._warned = False

    def new_batch(self) -> None:
        """A new consumed batch begins (called before its runs are admitted)."""
        self._batch += 1

    def expect(self, starts: Mapping[TP, int | None]) -> None:
        """The consumer was positioned at these ``{tp: offset}``: the first records must start
        there (a fetch from the committed offset can skip, too)."""
        for tp, offset in starts.items():
            if tp[0] in self.topics and offset is not None and offset >= 0:
                self._next[tp] = offset
                self._waiting.pop(tp, None)

    def forget(self, tps: Iterable[TP] | None = None) -> None:
        """Forget the expected offsets of ``tps`` (all partitions when None)."""
        if tps is None:
            self._next.clear()
            self._waiting.clear()
            return
        for tp in tps:
            self._next.pop(tp, None)
            self._waiting.pop(tp, None)

    def admit(self, tp: TP, run: list[Any]) -> list[Any]:
        """The records of ``run`` (one partition's, in offset order) that may be queued.

        All of them when the partition is not guarded or the offsets follow on; otherwise
        the records before the first gap not yet accepted as real, after seeking back to it.
        """
        if tp[0] not in self.topics:
            return run
        expected = self._next.get(tp)
        first = run[0].offset()
        if expected is None or first < expected:
            # the first records after an assignment without a committed offset, or a
            # position this guard did not set: nothing to compare the start with, but a gap
            # inside the run still counts
            expected = first
        if first == expected and run[-1].offset() - first == len(run) - 1:
            self._next[tp] = first + len(run)
            if self._waiting:
                self._waiting.pop(tp, None)
            return run
        for i, msg in enumerate(run):
            offset = msg.offset()
            if offset != expected and not self._gap_is_real(tp, expected, offset):
                self._next[tp] = expected
                return run[:i]
            expected = offset + 1
        self._next[tp] = expected
        self._waiting.pop(tp, None)
        return run

    def _gap_is_real(self, tp: TP, missing: int, found: int) -> bool:
        """True when offsets ``missing``..``found - 1`` are still missing from a fetch made
        after they had been missing for ``settle_s``; otherwise seek back to ``missing`` so
        that the next fetch reads them."""
        now = self._clock()
        waiting = self._waiting.get(tp)
        if waiting is None or waiting[0] != missing:
            waiting = (missing, now, None)
            level = logging.DEBUG if self._warned else logging.WARNING
            self._warned = True
            log.log(
                level,
                "%s-%d: the broker returned offset %d when %d was next (it answered a fetch "
                "before storing an earlier batch, see docs/brokers.md); fetching again from %d",
                tp[0],
                tp[1],
                found,
                missing,
                missing,
            )
        elif waiting[2] is not None and self._batch > waiting[2]:
            del self._waiting[tp]
            self.accepted += 1
            log.info(
                "%s-%d: offsets %d..%d are still missing after %.1fs of fetching again; going "
                "on from %d (transaction markers or deleted records)",
                tp[0],
                tp[1],
                missing,
                found - 1,
                now - waiting[1],
                found,
            )
            return True
        elif waiting[2] is None and now - waiting[1] >= self._settle_s:
            waiting = (missing, waiting[1], self._batch)  # the fetch after this seek decides
        self._waiting[tp] = waiting
        try:
            self._seek(tp, missing)
        except Exception as exc:
            # the records after the gap are dropped but never committed: retried next time
            log.warning("%s-%d: could not seek back to %d (%s); trying again", tp[0], tp[1], missing, exc)
            self._waiting[tp] = (missing, waiting[1], None)
            return False
        self.refetches += 1
        return False
