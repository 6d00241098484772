"""``RestoreReadAhead``: open the next changelog partition's reader while the current one is applied.

Opening a partition reader is a restore's fixed cost per changelog partition: a consumer,
its connection, metadata and the first fetch, 50-100 ms on the embedded broker. Measured on
``bench/run.py``'s count_unique restore (1,000,000 records in 4 partitions, one task each):
0.33 s of the 2.0 s went to waiting for each partition's first batch, one after another.
Kafka Streams hides it with one restore consumer assigned every changelog partition it
restores. Here each partition keeps its own reader -- its starvation escalation
(``kafka/fetch_wait.py``), its offset-out-of-range reset, its end found from fetches -- and
the next partition of the restore's plan is opened one ahead, in a background thread, so
librdkafka is already fetching it when its turn comes. At most two readers (two
consumers, two fetch queues) exist at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from platform_streams.kafka import PartitionReader

__all__ = ["RestoreReadAhead"]

log = logging.getLogger(__name__)

#: (topic, partition, start offset)
_Read = tuple[str, int, int]


class RestoreReadAhead:
    """Readers for a restore's ``plan``, each opened while the one before it is read.

    :meth:`take` returns the reader of one partition (the one opened ahead when it matches
    the partition, start offset and consumer settings, else a new one) and opens the plan's
    next partition in the background. A reader opened ahead but never taken (the restore
    failed, or restarted the partition elsewhere) is closed by :meth:`close`, which the
    owner must call. Not thread-safe: one restoring thread uses it.
    """

    def __init__(self, plan: Sequence[_Read]) -> None:
        self._plan = list(plan)
        self._executor: ThreadPoolExecutor | None = None
        #: the reader opened ahead: what it reads, its settings, the opening
        self._ahead: tuple[_Read, dict[str, Any], Future[PartitionReader]] | None = None

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
        """Close a reader opened ahead and not taken, and stop the opening thread."""
        self._discard_ahead()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _take_ahead(self, read: _Read, conf: Mapping[str, Any]) -> PartitionReader | None:
        ahead = self._ahead
        if ahead is None or ahead[0] != read or ahead[1] != conf:
            return None
        self._ahead = None
        try:
            return ahead[2].result()
        except Exception as exc:  # the caller opens it again and meets the error itself
            log.debug("opening %s-%d ahead failed (%s); opening it again", read[0], read[1], exc)
            return None

    def _open_next(self, read: _Read, conf: Mapping[str, Any], timeout_s: float) -> None:
        following = self._after(read)
        if following is None:
            return
        if self._ahead is not None and self._ahead[0] == following and self._ahead[1] == conf:
            return
        self._discard_ahead()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="restore-read-ahead")
        topic, partition, start = following
        opening = self._executor.submit(PartitionReader, conf, topic, partition, start, timeout_s=timeout_s)
        self._ahead = (following, dict(conf), opening)

    def _after(self, read: _Read) -> _Read | None:
        """The plan's partition after ``read``'s (a retry from another offset is the same turn)."""
        for i, (topic, partition, _) in enumerate(self._plan[:-1]):
            if (topic, partition) == read[:2]:
                return self._plan[i + 1]
        return None

    def _discard_ahead(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return
        try:
            reader = ahead[2].result()
        except Exception:  # nothing was opened; nobody needs the error
            return
        reader.close()
