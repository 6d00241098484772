"""A stream-table join over a versioned table with a grace period (KIP-923).

Kafka Streams' ``KStreamKTableJoinProcessor`` with ``Joined.withGracePeriod``: stream records
wait in a time-ordered buffer (Kafka's ``RocksDBTimeOrderedKeyValueBuffer``, store
``<join name>-Buffer``, changelogged) until ``stream time - grace`` passes their timestamp,
and are then joined with the table *as of their own timestamp*, so a table update that
arrives late (out of order, but within the grace period) still meets the stream records it
precedes in time. A stream record already older than the grace period when it arrives is
joined at once. Records leave the buffer in timestamp order, ties in key-bytes order, then
arrival order (the buffer's key is ``timestamp + key + sequence number``, time first).

The buffer's stream time (the largest buffered timestamp) is rebuilt from the store when a
task starts; a task whose buffer was empty at shutdown starts with no stream time, so its
first records wait for the grace period again (Kafka keeps the same value in memory only).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.suppress_buffer import decode_entry, encode_entry
from platform_streams.dsl.internals.table_join_processors import Joiner, StreamTableJoinProcessor
from platform_streams.processor.record import Headers
from platform_streams.state.timestamped_builders import resolve_serde

if TYPE_CHECKING:
    from platform_streams.dsl.internals.table_processors import ValueGetterSupplier
    from platform_streams.processor.context import NodeContext
    from platform_streams.serde.base import Serde
    from platform_streams.state.api import KeyValueStore

__all__ = ["GraceJoinBuffer", "VersionedStreamTableJoinProcessor", "buffer_store_name"]

_TIME = struct.Struct(">Q")  # sign-flipped big-endian: negative times sort first
_SEQ = struct.Struct(">I")
_FLIP = 1 << 63
_NO_TIME = -(2**63)


def buffer_store_name(join_name: str) -> str:
    """Kafka's name of the join's buffer store: ``<join processor name>-Buffer``."""
    return f"{join_name}-Buffer"


class GraceJoinBuffer:
    """Stream records (serialized) in time order, evicted once stream time passes them by ``grace``."""

    def __init__(self, store: KeyValueStore[bytes, bytes], grace_ms: int) -> None:
        self._store = store
        self.grace_ms = grace_ms
        self._seq = 0
        self.stream_time = _NO_TIME
        self.size = 0
        for binary, _ in store.all():
            self.size += 1
            self.stream_time = max(self.stream_time, _time_of(binary))

    def put(self, key: bytes, value: bytes, timestamp: int, headers: Headers) -> bool:
        """Buffer a record; False (nothing buffered) if it is already beyond the grace period."""
        if self.stream_time != _NO_TIME and self.stream_time - self.grace_ms > timestamp:
            return False
        self._seq = (self._seq + 1) & 0xFFFFFFFF
        binary = _TIME.pack(timestamp + _FLIP) + key + _SEQ.pack(self._seq)
        self._store.put(binary, encode_entry(value, None, timestamp, headers, 0))
        self.stream_time = max(self.stream_time, timestamp)
        self.size += 1
        return True

    def evict(self) -> list[tuple[bytes, bytes, int, Headers]]:
        """Remove and return ``(key, value, timestamp, headers)`` of every record the grace passed."""
        if not self.size:
            return []
        bound = self.stream_time - self.grace_ms
        evicted = []
        for binary, entry in self._store.all():
            if _time_of(binary) > bound:
                break
            record = decode_entry(binary[_TIME.size : -_SEQ.size], entry)
            self._store.put(binary, None)
            self.size -= 1
            assert record.new is not None
            evicted.append((record.key, record.new, record.timestamp, record.headers))
        return evicted


def _time_of(binary: bytes) -> int:
    return int(_TIME.unpack_from(binary, 0)[0]) - _FLIP


class VersionedStreamTableJoinProcessor(StreamTableJoinProcessor):
    """The stream-table join with a grace period (see the module docs)."""

    def __init__(
        self,
        view: ValueGetterSupplier,
        joiner: Joiner,
        left: bool,
        *,
        buffer_store: str,
        grace_ms: int,
        key_serde: Serde | None,
        value_serde: Serde | None,
    ) -> None:
        super().__init__(view, joiner, left)
        self.buffer_store = buffer_store
        self.grace_ms = grace_ms
        self.key_serde = key_serde
        self.value_serde = value_serde

    def init(self, context: NodeContext) -> None:
        super().init(context)
        if self._get_as_of is None:
            raise ValueError("KTable must be versioned to use a grace period in a stream table join.")
        config = context.config
        self._keys = resolve_serde(self.key_serde, config, "key")
        self._values = resolve_serde(self.value_serde, config, "value")
        self._buffer = GraceJoinBuffer(context.get_state_store(self.buffer_store), self.grace_ms)

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        if key is None or value is None:
            super().process(key, value, timestamp, headers)  # dropped (or a keyless left join row)
            return
        raw_key = self._keys.serialize(key)
        raw_value = self._values.serialize(value)
        if (
            raw_key is None
            or raw_value is None
            or not self._buffer.put(raw_key, raw_value, timestamp, headers)
        ):
            super().process(key, value, timestamp, headers)  # too late to wait: join now
            return
        deserialize_key, deserialize_value = self._keys.deserialize, self._values.deserialize
        for k, v, ts, h in self._buffer.evict():
            super().process(deserialize_key(k), deserialize_value(v), ts, h)
