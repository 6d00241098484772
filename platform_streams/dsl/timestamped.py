"""Values stored with the timestamp of the record that last updated them (Kafka's ``ValueAndTimestamp``).

Windowed aggregations keep, per window, the aggregate *and* the largest timestamp of
the records aggregated into it: that timestamp is the timestamp of the result records
(updates and final results), and sliding windows use it to know where the latest
record of a window lies. The stored layout is Kafka Streams' timestamped stores':
``timestamp (8 bytes, big-endian) + value bytes``.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from platform_streams.errors import DeserializationError
from platform_streams.serde.base import Serde

__all__ = ["ValueAndTimestamp", "ValueAndTimestampSerde"]

_LONG = struct.Struct(">q")


class ValueAndTimestamp(NamedTuple):
    """An aggregate and the largest record timestamp that went into it."""

    value: Any
    timestamp: int


class ValueAndTimestampSerde(Serde):
    """``timestamp(8) + inner bytes``; a None value (a delete) stays None."""

    name = "value-and-timestamp"
    __slots__ = ("inner",)

    def __init__(self, inner: Serde) -> None:
        self.inner = inner

    def _params(self) -> tuple[Any, ...]:
        return (self.inner,)

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        raw = self.inner.serialize(obj[0])
        return _LONG.pack(obj[1]) + (raw if raw is not None else b"")

    def deserialize(self, data: bytes | None) -> ValueAndTimestamp | None:
        if data is None:
            return None
        if len(data) < _LONG.size:
            raise DeserializationError(f"timestamped value too short ({len(data)} bytes)")
        timestamp: int = _LONG.unpack_from(data, 0)[0]
        return ValueAndTimestamp(self.inner.deserialize(data[_LONG.size :]), timestamp)
