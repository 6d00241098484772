"""Serdes for ``Windowed`` keys (Kafka Streams' ``WindowedSerdes``), byte-compatible with Java.

Windowed aggregations produce keys ``Windowed(key, window)``; writing them to a topic
needs these. Layouts are Kafka Streams' (``WindowKeySchema`` / ``SessionKeySchema``
``toBinary``), so a Java consumer with ``WindowedSerdes`` reads what we write:

* time windows: ``inner key bytes + window start (8 bytes, big-endian)``; the end is not
  written, so the deserializer needs the window size (without it the end is unknown and
  is set to the largest time, as Java's ``TimeWindowedDeserializer`` does);
* session windows: ``inner key bytes + session end (8) + session start (8)``.
"""

from __future__ import annotations

import struct
from typing import Any

from platform_streams.errors import DeserializationError, SerializationError
from platform_streams.serde.base import Serde, WrappingSerde
from platform_streams.state.keys import MAX_TIME
from platform_streams.state.windowed import SessionWindow, TimeWindow, Windowed

__all__ = ["SessionWindowedSerde", "TimeWindowedSerde"]

_LONG = struct.Struct(">q")
_TWO_LONGS = struct.Struct(">qq")


def _inner_bytes(inner: Serde, obj: Any) -> bytes:
    if not isinstance(obj, Windowed):
        raise SerializationError(f"windowed serde expects a Windowed key, got {type(obj).__name__}")
    raw = inner.serialize(obj.key)
    if raw is None:
        raise SerializationError("the key of a Windowed key must not be None")
    return raw


class TimeWindowedSerde(WrappingSerde):
    """``Windowed`` keys of tumbling/hopping/sliding windows: key + start."""

    name = "time-windowed"
    __slots__ = ("window_size_ms",)

    def __init__(self, inner: Serde, window_size_ms: int | None = None) -> None:
        super().__init__(inner)
        #: None: the size is unknown (windows then end at the largest time, as in Java)
        self.window_size_ms = window_size_ms

    def _params(self) -> tuple[Any, ...]:
        return (self.inner, self.window_size_ms)

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        return _inner_bytes(self.inner, obj) + _LONG.pack(obj.window.start_ms)

    def deserialize(self, data: bytes | None) -> Windowed[Any] | None:
        if data is None:
            return None
        if len(data) < _LONG.size:
            raise DeserializationError(f"time-windowed key too short ({len(data)} bytes)")
        cut = len(data) - _LONG.size
        start: int = _LONG.unpack_from(data, cut)[0]
        size = self.window_size_ms
        end = MAX_TIME if size is None else min(start + size, MAX_TIME)
        return Windowed(self.inner.deserialize(data[:cut]), TimeWindow(start, end))


class SessionWindowedSerde(WrappingSerde):
    """``Windowed`` keys of session windows: key + end + start."""

    name = "session-windowed"
    __slots__ = ()

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        window = obj.window if isinstance(obj, Windowed) else None
        raw = _inner_bytes(self.inner, obj)
        assert window is not None
        return raw + _TWO_LONGS.pack(window.end_ms, window.start_ms)

    def deserialize(self, data: bytes | None) -> Windowed[Any] | None:
        if data is None:
            return None
        if len(data) < _TWO_LONGS.size:
            raise DeserializationError(f"session-windowed key too short ({len(data)} bytes)")
        cut = len(data) - _TWO_LONGS.size
        end, start = _TWO_LONGS.unpack_from(data, cut)
        return Windowed(self.inner.deserialize(data[:cut]), SessionWindow(start, end))
