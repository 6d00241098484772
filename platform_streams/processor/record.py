"""The record that flows between processors in the Processor API.

The DSL's own hot path passes ``(key, value, timestamp, headers)`` as plain
arguments (no object per record); a :class:`Record` is only built at the
boundary of a user-written :class:`~platform_streams.processor.api.Processor`,
where Kafka Streams' API promises one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

#: Kafka record headers in confluent-kafka's shape: a list of (name, value) pairs, or None.
Headers = list[tuple[str, bytes | None]] | None


class RecordFields:
    """Key, value, timestamp (ms) and headers, with the ``with_*`` copies both record kinds share.

    ``with_*`` return a copy of the same kind, as in Kafka Streams, so a processor can forward
    a changed record without mutating what another branch of the graph sees.
    """

    __slots__ = ("headers", "key", "timestamp", "value")

    def __init__(self, key: Any, value: Any, timestamp: int = 0, headers: Headers = None) -> None:
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def with_value(self, value: Any) -> Self:
        return type(self)(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Self:
        return type(self)(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: Headers) -> Self:
        return type(self)(self.key, self.value, self.timestamp, headers)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, RecordFields)
        return (self.key, self.value, self.timestamp, self.headers) == (
            other.key,
            other.value,
            other.timestamp,
            other.headers,
        )

    def __hash__(self) -> int:
        return hash((self.key, self.timestamp))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key={self.key!r}, value={self.value!r}, timestamp={self.timestamp})"


class Record(RecordFields):
    """An immutable-by-convention record of the Processor API; ``with_key`` may change the key."""

    __slots__ = ()

    def with_key(self, key: Any) -> Record:
        return Record(key, self.value, self.timestamp, self.headers)


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where the record currently being processed came from (None for punctuation)."""

    topic: str
    partition: int
    offset: int
