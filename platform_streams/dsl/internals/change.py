"""``Change``: what flows between KTable processors (Kafka Streams' ``Change<V>``).

A table update is a new value *and* the value it replaces. Most consumers only need
the new one (``to_stream``), but a re-grouped table (``KTable.group_by``) must take the
old value out of its old group before adding the new one to its new group, and a
table-table join must retract the old joined result. Carrying both in one object keeps
those operators exact without re-reading state.

:class:`ChangeSerde` writes a ``Change`` to the repartition topic of
``KTable.group_by(...).aggregate(...)`` in Kafka Streams' 3.5+ layout (KIP-904), so the
record keeps old and new together even when they land in the same group.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from platform_streams.errors import DeserializationError, SerializationError
from platform_streams.serde.base import WrappingSerde

__all__ = ["Change", "ChangeSerde", "OutOfOrderChange", "change_of"]

_INT = struct.Struct(">i")
_OLD_ONLY, _NEW_ONLY, _BOTH = 0, 1, 2


class Change(NamedTuple):
    """A table update: ``new`` None is a delete, ``old`` None means absent or not sent.

    ``is_latest`` False (an :class:`OutOfOrderChange`) marks an out-of-order update of a
    versioned table (KIP-914): it was stored as an older version, is still forwarded
    (``to_stream`` shows it), and table-table joins and ``group_by`` skip it (Kafka's
    versioned semantics), so it never reaches a repartition topic.
    """

    new: Any
    old: Any

    @property
    def is_latest(self) -> bool:
        return True


class OutOfOrderChange(Change):
    """A versioned table's update stored as an older version (``is_latest`` False)."""

    __slots__ = ()

    @property
    def is_latest(self) -> bool:
        return False


def change_of(new: Any, old: Any, is_latest: bool) -> Change:
    """A ``Change``, or an :class:`OutOfOrderChange` when ``is_latest`` is False."""
    return Change(new, old) if is_latest else OutOfOrderChange(new, old)


class ChangeSerde(WrappingSerde):
    """Kafka Streams' ``ChangedSerializer`` layout over an inner value serde.

    ``old + 0x00`` (old only), ``new + 0x01`` (new only),
    ``len(new) (4 bytes) + new + old + 0x02`` (both).
    """

    name = "change"
    __slots__ = ()

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        new = self.inner.serialize(obj[0]) if obj[0] is not None else None
        old = self.inner.serialize(obj[1]) if obj[1] is not None else None
        if new is not None and old is not None:
            return _INT.pack(len(new)) + new + old + bytes((_BOTH,))
        if new is not None:
            return new + bytes((_NEW_ONLY,))
        if old is not None:
            return old + bytes((_OLD_ONLY,))
        raise SerializationError("a Change with neither a new nor an old value cannot be written")

    def deserialize(self, data: bytes | None) -> Change | None:
        if data is None:
            return None
        if not data:
            raise DeserializationError("empty Change record")
        flag = data[-1]
        body = data[:-1]
        inner = self.inner.deserialize
        if flag == _NEW_ONLY:
            return Change(inner(body), None)
        if flag == _OLD_ONLY:
            return Change(None, inner(body))
        if flag == _BOTH and len(body) >= _INT.size:
            size = _INT.unpack_from(body, 0)[0]
            start = _INT.size
            return Change(inner(body[start : start + size]), inner(body[start + size :]))
        raise DeserializationError(f"malformed Change record (flag {flag}, {len(data)} bytes)")
