"""Where processed records go: the runtime's producer, or the test driver's topics."""

from __future__ import annotations

from typing import Any, Protocol

from platform_streams.processor.record import Headers

__all__ = ["OutgoingRecord", "RecordCollector", "RefusingCollector"]

#: One serialized record to send, in ``send``'s argument order: (topic, key, value,
#: timestamp, headers, partition). The one place this signature is written: every
#: collector's ``send`` takes ``*record: *OutgoingRecord``, so callers still pass six
#: positional arguments (checked by mypy) and a collector that keeps or forwards the record
#: uses the tuple Python already built, without repacking it.
OutgoingRecord = tuple[str, bytes | None, bytes | None, int, Headers, int | None]


class RecordCollector(Protocol):
    """Sends serialized records; one per worker (shared by its tasks)."""

    def send(self, *record: *OutgoingRecord) -> None:
        """Queue a record; ``partition`` None lets the Java-compatible murmur2 partitioner choose."""

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` (for custom partitioners)."""
        ...


class RefusingCollector:
    """The collector of contexts that must never produce: global stores, standby tasks.

    Their processors only apply records to stores; a send would be a topology bug, and
    failing loudly with ``reason`` beats writing a record nothing commits or replays.
    """

    def __init__(self, reason: str, *, partitions: int | None = None) -> None:
        self.reason = reason
        #: what ``partition_count`` answers (None: it refuses as well)
        self.partitions = partitions

    def send(self, *record: Any, **named: Any) -> None:
        """Refuse any record, whatever its arguments."""
        raise RuntimeError(self.reason)

    def partition_count(self, topic: str) -> int:
        if self.partitions is None:
            raise RuntimeError(self.reason)
        return self.partitions
