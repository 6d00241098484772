"""``RecordCollector`` over a Kafka producer: sends, tracks delivery, surfaces errors.

Delivery reports come back on ``producer.poll``/``flush``; the callback keeps it
cheap per record: it only remembers the first errors and, for changelog topics,
the offset written (checkpoints need it). A commit calls :meth:`flush`, which
waits for every outstanding record and raises if any failed, so offsets are never
committed past a record that was not written (at-least-once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from platform_streams.errors import StreamsError
from platform_streams.processor.record import Headers

log = logging.getLogger(__name__)


class ProductionError(StreamsError):
    """A record could not be written (after librdkafka's own retries)."""


class KafkaRecordCollector:
    """The worker's producer-backed collector (shared by all its tasks)."""

    def __init__(
        self,
        producer_factory: Callable[[Callable[[Any, Any], None]], Any],
        *,
        partition_count: Callable[[str], int],
        tracked_topics: set[str] | None = None,
        flush_timeout_s: float = 60.0,
    ) -> None:
        #: the producer, made with this collector's delivery callback
        self.producer = producer_factory(self.on_delivery)
        self._produce = self.producer.produce
        self._poll = self.producer.poll
        self._partition_count = partition_count
        #: topics whose written offsets are tracked (changelogs)
        self.tracked_topics: set[str] = set(tracked_topics or ())
        #: (topic, partition) -> offset of the last acknowledged record, for tracked topics
        self.offsets: dict[tuple[str, int], int] = {}
        self.errors: list[str] = []
        self.sent = 0
        self._flush_timeout_s = flush_timeout_s

    def on_delivery(self, err: Any, msg: Any) -> None:
        """Delivery report callback (set as the producer's ``on_delivery``)."""
        if err is not None:
            if len(self.errors) < 10:
                self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")
            return
        topic = msg.topic()
        if topic in self.tracked_topics:
            key = (topic, msg.partition())
            offset = msg.offset()
            if offset > self.offsets.get(key, -1):
                self.offsets[key] = offset

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers,
        partition: int | None,
    ) -> None:
        self.sent += 1
        try:
            if partition is None:
                self._produce(topic, value, key, timestamp=timestamp, headers=headers)
            else:
                self._produce(topic, value, key, partition, timestamp=timestamp, headers=headers)
        except BufferError:
            # the local queue is full: serve delivery reports until there is room
            while True:
                self._poll(0.05)
                try:
                    if partition is None:
                        self._produce(topic, value, key, timestamp=timestamp, headers=headers)
                    else:
                        self._produce(topic, value, key, partition, timestamp=timestamp, headers=headers)
                    break
                except BufferError:
                    continue

    def partition_count(self, topic: str) -> int:
        return self._partition_count(topic)

    def poll(self) -> None:
        """Serve pending delivery reports without waiting."""
        self._poll(0)

    def flush(self) -> None:
        """Wait until every record is acknowledged; raise if any failed."""
        remaining = self.producer.flush(self._flush_timeout_s)
        if remaining:
            raise ProductionError(f"{remaining} record(s) not delivered within {self._flush_timeout_s}s")
        self.raise_if_failed()

    def raise_if_failed(self) -> None:
        if self.errors:
            errors, self.errors = self.errors, []
            raise ProductionError("records could not be written: " + "; ".join(errors))
