"""``SerializedRecord``: a serialized record with the accessors of ``confluent_kafka.Message``.

Tasks read records only through those accessors, so anything that feeds a task from
somewhere other than a consumer -- the TopologyTestDriver, the Spark backfill and
compaction jobs reading ranges -- hands it these and runs exactly the production code.
"""

from __future__ import annotations

from platform_streams.processor.record import Headers

__all__ = ["SerializedRecord"]

#: confluent-kafka's TIMESTAMP_CREATE_TIME
_CREATE_TIME = 1


class SerializedRecord:
    """A raw (serialized) record with the same accessors as ``confluent_kafka.Message``."""

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
        return f"{type(self).__name__}({self._topic}-{self._partition}@{self._offset}, key={self._key!r})"
