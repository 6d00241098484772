"""Values stored with the timestamp of the record that last updated them (Kafka's ``ValueAndTimestamp``).

Windowed aggregations keep, per window, the aggregate *and* the largest timestamp of
the records aggregated into it: that timestamp is the timestamp of the result records
(updates and final results), and sliding windows use it to know where the latest
record of a window lies. The stored layout is Kafka Streams' timestamped stores':
``timestamp (8 bytes, big-endian) + value bytes``.

Both directions run once per record of every DSL aggregation, so they avoid Python-level
calls: :func:`value_and_timestamp` builds the tuple with ``tuple.__new__`` (a NamedTuple's
own constructor is a Python function, twice as slow), and a fixed-width inner serde
(``Long``, ``Double``, ...) is packed together with the timestamp by one ``struct`` call.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from platform_streams.errors import DeserializationError
from platform_streams.serde.base import Serde

__all__ = ["ValueAndTimestamp", "ValueAndTimestampSerde", "value_and_timestamp"]

_LONG = struct.Struct(">q")
_new_tuple = tuple.__new__


class ValueAndTimestamp(NamedTuple):
    """An aggregate and the largest record timestamp that went into it."""

    value: Any
    timestamp: int


def value_and_timestamp(value: Any, timestamp: int) -> ValueAndTimestamp:
    """``ValueAndTimestamp(value, timestamp)`` without the NamedTuple's Python-level ``__new__``."""
    vat: ValueAndTimestamp = _new_tuple(ValueAndTimestamp, (value, timestamp))
    return vat


#: what a fixed-width ``struct`` pack raises for a value of the wrong type or range
PACK_ERRORS = (struct.error, TypeError, OverflowError)


class ValueAndTimestampSerde(Serde):
    """``timestamp(8) + inner bytes``; a None value (a delete) stays None."""

    name = "value-and-timestamp"
    __slots__ = ("_fixed", "_inner_deserialize", "_inner_serialize", "inner")

    def __init__(self, inner: Serde) -> None:
        self.inner = inner
        self._inner_serialize = inner.serialize
        self._inner_deserialize = inner.deserialize
        #: ``timestamp + value`` as one struct when the inner serde is one fixed-width number
        inner_struct = getattr(inner, "_struct", None)
        self._fixed = (
            struct.Struct(">q" + inner_struct.format.lstrip(">"))
            if isinstance(inner_struct, struct.Struct) and inner_struct.format.startswith(">")
            else None
        )

    def _params(self) -> tuple[Any, ...]:
        return (self.inner,)

    def fixed_packer(self) -> Callable[[int, Any], bytes] | None:
        """``pack(timestamp, value)``, C-level, for an inner serde of one fixed-width number
        (else None): :meth:`serialize` of a non-None value where it does not raise one of
        :data:`PACK_ERRORS` (then :meth:`serialize` takes the inner serde's path)."""
        return self._fixed.pack if self._fixed is not None else None

    def fixed_unpacker(self) -> tuple[Callable[[bytes], tuple[int, Any]], int] | None:
        """``(unpack, size)``: ``unpack(data) -> (timestamp, value)``, C-level, for data of
        ``size`` bytes of an inner serde of one fixed-width number (else None), what
        :meth:`deserialize` does with such data."""
        fixed = self._fixed
        return (fixed.unpack, fixed.size) if fixed is not None else None

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        value, timestamp = obj
        fixed = self._fixed
        if fixed is not None and value is not None:
            try:
                return fixed.pack(timestamp, value)
            except PACK_ERRORS:
                pass  # let the inner serde report it in its own words
        raw = self._inner_serialize(value)
        return _LONG.pack(timestamp) + (raw if raw is not None else b"")

    def deserialize(self, data: bytes | None) -> ValueAndTimestamp | None:
        if data is None:
            return None
        fixed = self._fixed
        if fixed is not None and len(data) == fixed.size:
            timestamp, value = fixed.unpack(data)
            vat: ValueAndTimestamp = _new_tuple(ValueAndTimestamp, (value, timestamp))
            return vat
        if len(data) < _LONG.size:
            raise DeserializationError(f"timestamped value too short ({len(data)} bytes)")
        timestamp = _LONG.unpack_from(data, 0)[0]
        return value_and_timestamp(self._inner_deserialize(data[_LONG.size :]), timestamp)
