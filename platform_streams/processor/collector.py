"""Where processed records go: the runtime's producer, or the test driver's topics."""

from __future__ import annotations

from typing import Protocol

from platform_streams.processor.record import Headers


class RecordCollector(Protocol):
    """Sends serialized records; one per worker (shared by its tasks)."""

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        """Queue a record; ``partition`` None lets the Java-compatible murmur2 partitioner choose."""

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` (for custom partitioners)."""
        ...
