"""Reading an output topic to its end in one pass, record by record (an hour of output does
not fit in memory as objects), and remembering per key which process first wrote each update.
"""

from __future__ import annotations

import time
import uuid
from array import array
from collections.abc import Callable

from platform_streams.kafka import OFFSET_BEGINNING, FetchWaitEscalation
from soak.connection import client_conf

_PARTITION_EOF = -191


def scan(
    bootstrap: str,
    topic: str,
    partitions: int,
    on_record: Callable[..., None],
    *,
    committed_only: bool,
    stall_s: float = 120.0,
    with_offsets: bool = False,
) -> int:
    """Call ``on_record(key, value, partition)`` for every record of ``topic`` up to the end
    found by fetching (read_committed: up to the last stable offset); returns the count.
    ``with_offsets``: ``on_record(key, value, partition, offset)``. Raises if no partition
    advances for ``stall_s``."""
    reader = FetchWaitEscalation(
        {
            **client_conf(bootstrap),
            "group.id": f"soak-check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "fetch.wait.max.ms": 10,  # escalated when a large Tansu partition starves it
            "fetch.queue.backoff.ms": 10,
            "allow.auto.create.topics": False,
        },
        {(topic, p): OFFSET_BEGINNING for p in range(partitions)},
        reader=f"soak scan of {topic}",
    )
    count = 0
    try:
        reader.assign()
        at_end: set[int] = set()
        last_progress = time.monotonic()
        while len(at_end) < partitions:
            if time.monotonic() - last_progress > stall_s:
                raise TimeoutError(
                    f"reading {topic}: no progress for {stall_s:.0f}s (at end: {sorted(at_end)})"
                )
            messages = reader.consumer.consume(5000, 0.5)
            reader.after_consume(messages)
            for msg in messages:
                err, partition = msg.error(), msg.partition() or 0
                if err is not None:
                    if err.code() == _PARTITION_EOF:
                        at_end.add(partition)
                        last_progress = time.monotonic()
                    continue
                at_end.discard(partition)
                last_progress = time.monotonic()
                key, value = msg.key(), msg.value()
                fields = (key.decode() if key else "", value.decode() if value else "", partition)
                if with_offsets:
                    on_record(*fields, msg.offset())
                else:
                    on_record(*fields)
                count += 1
    finally:
        reader.close()
    return count


class Writers:
    """Which process first wrote update ``i`` of a key: a small index per pid, in one
    ``array`` per key (2 bytes per update)."""

    def __init__(self) -> None:
        self._index: dict[int, int] = {}
        self.pids: list[int] = [0]
        self._first: dict[str, array[int]] = {}

    def _pid_index(self, pid: int) -> int:
        index = self._index.get(pid)
        if index is None:
            index = self._index[pid] = len(self.pids)
            self.pids.append(pid)
        return index

    def seen(self, key: str, i: int) -> int | None:
        """The pid that first wrote update ``i`` of ``key`` (None: not seen yet)."""
        first = self._first.get(key)
        if first is None or i >= len(first) or first[i] == 0:
            return None
        return self.pids[first[i]]

    def mark(self, key: str, i: int, pid: int) -> None:
        first = self._first.setdefault(key, array("H"))
        if i >= len(first):
            first.extend([0] * (i + 1 - len(first) + 1024))
        first[i] = self._pid_index(pid)

    def missing(self, key: str, upto: int) -> int:
        """How many of updates ``1..upto`` of ``key`` were never seen."""
        first = self._first.get(key)
        if first is None:
            return upto
        return sum(1 for i in range(1, upto + 1) if i >= len(first) or first[i] == 0)

    def missing_updates(self, key: str, upto: int, limit: int) -> list[int]:
        """The first ``limit`` of updates ``1..upto`` of ``key`` never seen (what a lost-record
        trace follows)."""
        first = self._first.get(key)
        gone = (i for i in range(1, upto + 1) if first is None or i >= len(first) or first[i] == 0)
        return [i for _, i in zip(range(limit), gone, strict=False)]
