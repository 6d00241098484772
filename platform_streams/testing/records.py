"""Records of the TopologyTestDriver: raw records shaped like confluent-kafka's Message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from platform_streams.processor.record import Headers

#: confluent-kafka's TIMESTAMP_CREATE_TIME
_CREATE_TIME = 1


class DriverRecord:
    """A raw (serialized) record with the same accessors as ``confluent_kafka.Message``,
    so tasks process driver input with exactly the code they run in production."""

    __slots__ = ("_headers", "_key", "_offset", "_partition", "_timestamp", "_topic", "_value")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Headers = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._timestamp = timestamp
        self._headers = headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (_CREATE_TIME, self._timestamp)

    def headers(self) -> Headers:
        return self._headers

    def error(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"DriverRecord({self._topic}-{self._partition}@{self._offset}, key={self._key!r})"


@dataclass
class TestRecord:
    """A deserialized record read from (or piped into) a test topic."""

    __test__ = False  # not a pytest test class

    key: Any
    value: Any
    timestamp: int | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)

    def key_value(self) -> tuple[Any, Any]:
        return (self.key, self.value)
