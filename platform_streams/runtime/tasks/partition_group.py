"""Per-task input buffers and the choice of which record to process next.

A task reading several partitions (co-partitioned topics, merged streams) must
process in timestamp order across them so stream time, windows and joins behave
as in Kafka Streams: the next record is the head with the smallest timestamp. A
single-partition task, the common case, skips that choice entirely.
"""

from __future__ import annotations

from collections import deque
from typing import Any

#: (topic, partition)
TopicPartitionKey = tuple[str, int]


class PartitionGroup:
    """Buffered raw records of one task, one queue per input partition."""

    def __init__(self, partitions: list[TopicPartitionKey], max_task_idle_ms: int = 0) -> None:
        self.queues: dict[TopicPartitionKey, deque[Any]] = {tp: deque() for tp in partitions}
        self._single: deque[Any] | None = self.queues[partitions[0]] if len(partitions) == 1 else None
        self.max_task_idle_ms = max_task_idle_ms
        self._idle_since_ms: int | None = None

    def add(self, tp: TopicPartitionKey, records: list[Any]) -> int:
        """Buffer records of one partition; returns that partition's buffered count."""
        queue = self.queues[tp]
        queue.extend(records)
        return len(queue)

    def buffered(self, tp: TopicPartitionKey) -> int:
        return len(self.queues[tp])

    def total_buffered(self) -> int:
        return sum(len(q) for q in self.queues.values())

    @property
    def single_queue(self) -> deque[Any] | None:
        """The only queue, when the task reads one partition (fast path)."""
        return self._single

    def processable(self, now_ms: int) -> bool:
        """True if a record may be processed now (honouring ``max_task_idle_ms``)."""
        non_empty = sum(1 for q in self.queues.values() if q)
        if non_empty == 0:
            return False
        if non_empty == len(self.queues) or self.max_task_idle_ms <= 0:
            self._idle_since_ms = None
            return True
        if self._idle_since_ms is None:
            self._idle_since_ms = now_ms
        return now_ms - self._idle_since_ms >= self.max_task_idle_ms

    def next_record(self) -> Any | None:
        """Pop the buffered head with the smallest timestamp (None if all empty)."""
        best: deque[Any] | None = None
        best_ts = 0
        for queue in self.queues.values():
            if queue:
                ts = queue[0].timestamp()[1]
                if best is None or ts < best_ts:
                    best, best_ts = queue, ts
        return best.popleft() if best is not None else None

    def clear(self, tp: TopicPartitionKey | None = None) -> None:
        if tp is None:
            for queue in self.queues.values():
                queue.clear()
        else:
            self.queues[tp].clear()
