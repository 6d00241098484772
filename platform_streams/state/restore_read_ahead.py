"""``RestoreReadAhead``: open the next changelog partitions' readers while one is applied.

Opening a partition reader is a restore's fixed cost per changelog partition: a consumer,
its connection, metadata and the first fetch, 50-100 ms on the embedded broker. Measured on
``bench/run.py``'s count_unique restore (1,000,000 records in 4 partitions, one task each):
0.33 s of the 2.0 s went to waiting for each partition's first batch, one after another.
Kafka Streams hides it with one restore consumer assigned every changelog partition it
restores. Here each partition keeps its own reader -- its starvation escalation
(``kafka/fetch_wait.py``), its offset-out-of-range reset, its end found from fetches -- and
the next partitions of the restore's plan are opened ahead (:data:`DEPTH` of them), in
background threads, so librdkafka is already fetching them when their turn comes. A
partition with few records (a fresh application's empty changelogs: a reader's start is
all it costs) is then read in the time another one starts.

What it costs:

* Memory: at most ``DEPTH + 1`` readers exist at a time. A reader opened ahead prefetches
  up to librdkafka's ``queued.min.messages`` records, in at most
  :data:`AHEAD_QUEUE_KBYTES` (unless the settings name their own
  ``queued.max.messages.kbytes``), for its whole life.
* A reader opened ahead has found its partition's end (the end-of-partition event is
  queued) when it opened, so records appended after that are not read by this restore --
  as Kafka Streams' restore ends at the end offsets it read when the partitions were
  registered. Only a zombie of a previous owner appends to a changelog then, and the
  committed-input filter is there for those records.
* While it waits, a reader opened ahead keeps fetching at the restore's short fetch wait
  and is not watched for starvation (only a reader being read is).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from platform_streams.kafka import PartitionReader

__all__ = ["AHEAD_QUEUE_KBYTES", "DEPTH", "RestoreReadAhead"]

log = logging.getLogger(__name__)

#: partitions opened ahead of the one being read
DEPTH = 3
#: ``queued.max.messages.kbytes`` of a reader opened ahead (librdkafka's default: 65536)
AHEAD_QUEUE_KBYTES = 16384

#: (topic, partition, start offset)
_Read = tuple[str, int, int]
#: a reader opened ahead: what it reads, the settings it was asked with, its opening
_Ahead = tuple[_Read, dict[str, Any], "Future[PartitionReader]"]


class RestoreReadAhead:
    """Readers for a restore's ``plan``, each opened while the ones before it are read.

    :meth:`take` returns the reader of one partition (the one opened ahead when it matches
    the partition, start offset and consumer settings, else a new one) and opens the plan's
    next ``depth`` partitions in the background. A partition taken once is never opened
    ahead again: a retry starts it where the earlier attempt stopped, which the plan does
    not know. A reader opened ahead but never taken (the restore failed, or restarted the
    partition elsewhere) is closed by :meth:`close`, which the owner must call. Not
    thread-safe: one restoring thread uses it.
    """

    def __init__(self, plan: Sequence[_Read], *, depth: int = DEPTH) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self._plan = list(plan)
        self._depth = depth
        self._executor: ThreadPoolExecutor | None = None
        #: readers opened ahead, in plan order
        self._ahead: list[_Ahead] = []
        #: partitions taken so far (their plan start offsets are stale)
        self._taken: set[tuple[str, int]] = set()

    def take(
        self, conf: Mapping[str, Any], topic: str, partition: int, start_offset: int, *, timeout_s: float
    ) -> PartitionReader:
        """The opened reader of ``topic``-``partition`` from ``start_offset``; the caller closes it."""
        read = (topic, partition, start_offset)
        reader = self._take_ahead(read, conf)
        if reader is None:
            reader = PartitionReader(conf, topic, partition, start_offset, timeout_s=timeout_s)
        reader.timeout_s = timeout_s  # opened ahead by another take, perhaps with another one
        self._taken.add((topic, partition))
        try:
            self._open_next(read, conf, timeout_s)
        except BaseException:
            reader.close()
            raise
        return reader

    def close(self) -> None:
        """Close the readers opened ahead and not taken, and stop the opening threads."""
        ahead, self._ahead = self._ahead, []
        _discard(ahead)
        executor, self._executor = self._executor, None
        if executor is not None:
            # openings not started are dropped; running ones finish and close what they opened
            executor.shutdown(wait=True, cancel_futures=True)

    def _take_ahead(self, read: _Read, conf: Mapping[str, Any]) -> PartitionReader | None:
        for i, (what, settings, opening) in enumerate(self._ahead):
            if what == read and settings == conf:
                del self._ahead[i]
                try:
                    return opening.result()
                except Exception as exc:  # the caller opens it again and meets the error itself
                    log.debug("opening %s-%d ahead failed (%s); opening it again", read[0], read[1], exc)
                    return None
                except BaseException:  # interrupted while waiting: whatever it opens is closed
                    _discard([(what, settings, opening)])
                    raise
        return None

    def _open_next(self, read: _Read, conf: Mapping[str, Any], timeout_s: float) -> None:
        """Keep the plan's next ``depth`` partitions after ``read``'s opened (with ``conf``), no others."""
        wanted = [r for r in self._following(read) if r[:2] not in self._taken]
        keep = [a for a in self._ahead if a[0] in wanted and a[1] == conf]
        _discard([a for a in self._ahead if a not in keep])
        self._ahead = keep
        opened = {a[0] for a in keep}
        ahead_conf = {"queued.max.messages.kbytes": AHEAD_QUEUE_KBYTES, **conf}
        for following in wanted:
            if following in opened:
                continue
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self._depth, thread_name_prefix="restore-read-ahead"
                )
            topic, partition, start = following
            opening = self._executor.submit(
                PartitionReader, ahead_conf, topic, partition, start, timeout_s=timeout_s
            )
            keep.append((following, dict(conf), opening))

    def _following(self, read: _Read) -> list[_Read]:
        """The plan's ``depth`` partitions after ``read``'s (a retry from another offset is the
        same turn); none for a partition not in the plan."""
        for i, (topic, partition, _) in enumerate(self._plan):
            if (topic, partition) == read[:2]:
                return self._plan[i + 1 : i + 1 + self._depth]
        return []


def _discard(ahead: list[_Ahead]) -> None:
    """Close these readers once opened, without waiting for openings still running."""
    for _, _, opening in ahead:
        opening.cancel()  # not started yet: never opened
        opening.add_done_callback(_close_opened)


def _close_opened(opening: Future[PartitionReader]) -> None:
    if opening.cancelled() or opening.exception() is not None:
        return  # nothing was opened; nobody needs the error
    try:
        opening.result().close()
    except Exception as exc:  # a consumer that fails to close is gone anyway
        log.debug("closing a reader opened ahead failed: %s", exc)
