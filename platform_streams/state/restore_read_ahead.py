"""``RestoreReadAhead``: open the next changelog partition's reader while the current one is applied.

Opening a partition reader is a restore's fixed cost per changelog partition: a consumer,
its connection, metadata and the first fetch, 50-100 ms on the embedded broker. Measured on
``bench/run.py``'s count_unique restore (1,000,000 records in 4 partitions, one task each):
0.33 s of the 2.0 s went to waiting for each partition's first batch, one after another.
Kafka Streams hides it with one restore consumer assigned every changelog partition it
restores. Here each partition keeps its own reader -- its starvation escalation
(``kafka/fetch_wait.py``), its offset-out-of-range reset, its end found from fetches -- and
the next partitions of the restore's plan are opened ahead (:data:`DEPTH` of them), in a
background thread, so librdkafka is already fetching them when their turn comes. A
partition with few records (a fresh application's empty changelogs: a reader's start is
all it costs) is then read in the time another one starts, so a task's turn does not cost
a reader's start each. At most ``DEPTH + 1`` readers (consumers, fetch queues: librdkafka's
``queued.min.messages`` / ``queued.max.messages.kbytes`` bound each) exist at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from platform_streams.kafka import PartitionReader

__all__ = ["DEPTH", "RestoreReadAhead"]

log = logging.getLogger(__name__)

#: partitions opened ahead of the one being read
DEPTH = 3

#: (topic, partition, start offset)
_Read = tuple[str, int, int]


class RestoreReadAhead:
    """Readers for a restore's ``plan``, each opened while the ones before it are read.

    :meth:`take` returns the reader of one partition (the one opened ahead when it matches
    the partition, start offset and consumer settings, else a new one) and opens the plan's
    next ``depth`` partitions in the background. A reader opened ahead but never taken (the
    restore failed, or restarted the partition elsewhere) is closed by :meth:`close`, which
    the owner must call. Not thread-safe: one restoring thread uses it.
    """

    def __init__(self, plan: Sequence[_Read], *, depth: int = DEPTH) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self._plan = list(plan)
        self._depth = depth
        self._executor: ThreadPoolExecutor | None = None
        #: readers opened ahead, in plan order: what each reads, its settings, the opening
        self._ahead: list[tuple[_Read, dict[str, Any], Future[PartitionReader]]] = []

    def take(
        self, conf: Mapping[str, Any], topic: str, partition: int, start_offset: int, *, timeout_s: float
    ) -> PartitionReader:
        """The opened reader of ``topic``-``partition`` from ``start_offset``; the caller closes it."""
        read = (topic, partition, start_offset)
        reader = self._take_ahead(read, conf)
        if reader is None:
            reader = PartitionReader(conf, topic, partition, start_offset, timeout_s=timeout_s)
        self._open_next(read, conf, timeout_s)
        return reader

    def close(self) -> None:
        """Close the readers opened ahead and not taken, and stop the opening thread."""
        self._discard(self._ahead)
        self._ahead = []
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _take_ahead(self, read: _Read, conf: Mapping[str, Any]) -> PartitionReader | None:
        for i, (what, settings, opening) in enumerate(self._ahead):
            if what == read and settings == conf:
                del self._ahead[i]
                try:
                    return opening.result()
                except Exception as exc:  # the caller opens it again and meets the error itself
                    log.debug("opening %s-%d ahead failed (%s); opening it again", read[0], read[1], exc)
                    return None
        return None

    def _open_next(self, read: _Read, conf: Mapping[str, Any], timeout_s: float) -> None:
        """Keep the plan's ``depth`` partitions after ``read``'s opened (with ``conf``), no others."""
        wanted = self._following(read)
        keep = [a for a in self._ahead if a[0] in wanted and a[1] == conf]
        self._discard([a for a in self._ahead if a not in keep])
        opened = {a[0] for a in keep}
        for following in wanted:
            if following in opened:
                continue
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self._depth, thread_name_prefix="restore-read-ahead"
                )
            topic, partition, start = following
            opening = self._executor.submit(
                PartitionReader, conf, topic, partition, start, timeout_s=timeout_s
            )
            keep.append((following, dict(conf), opening))
        self._ahead = keep

    def _following(self, read: _Read) -> list[_Read]:
        """The plan's ``depth`` partitions after ``read``'s (a retry from another offset is the
        same turn); none for a partition not in the plan."""
        for i, (topic, partition, _) in enumerate(self._plan):
            if (topic, partition) == read[:2]:
                return self._plan[i + 1 : i + 1 + self._depth]
        return []

    @staticmethod
    def _discard(ahead: list[tuple[_Read, dict[str, Any], Future[PartitionReader]]]) -> None:
        for _, _, opening in ahead:
            try:
                reader = opening.result()
            except Exception:  # nothing was opened; nobody needs the error
                continue
            reader.close()
