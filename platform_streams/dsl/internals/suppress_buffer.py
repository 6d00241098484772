"""The suppress buffer: latest update per key, ordered by buffer time, in a changelogged store.

Kafka Streams keeps this in memory (``InMemoryTimeOrderedKeyValueBuffer``) and logs every
change to ``<store>-changelog``, restoring into memory on start-up. Here the entries live
in a key-value store (RocksDB or in-memory, changelogged like any store) under
``buffer time (8 bytes, big-endian) + key bytes``, so a scan from the start is a scan in
time order; an in-memory index (key -> buffer time and entry size), rebuilt from the store
when the task starts, answers "is this key buffered, and where" and keeps the record and
byte counts for the capacity limits.

Kafka Streams' "non-resetting" rule: a key keeps the buffer time of its first buffered
update; later updates replace the value in place. The entry keeps the *prior* value (the
table's value before the first buffered update) so the emitted change is
``prior -> latest``.

Entry layout: ``timestamp (8) + new value + prior value + headers + size (8)``, each value as
a 4-byte length (-1: None) and bytes, headers as a count and (name, value) pairs; ``size`` is
the entry's size as Kafka Streams counts it against ``max_bytes`` (:func:`kafka_entry_size`),
kept so a restored buffer evicts at the same points.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from platform_streams.processor.record import Headers
from platform_streams.state.keys import MAX_TIME

if TYPE_CHECKING:
    from platform_streams.state.api import KeyValueStore

__all__ = ["BufferedRecord", "SuppressBuffer", "encode_entry", "kafka_entry_size"]

_TIME = struct.Struct(">q")
_LEN = struct.Struct(">i")


def kafka_entry_size(
    key: bytes,
    prior: bytes | None,
    old: bytes | None,
    new: bytes | None,
    topic: str | None,
    headers: Headers,
) -> int:
    """An entry's size as Kafka Streams' in-memory suppress buffer counts it (``computeRecordSize``):
    buffer time (8) + key + ``BufferValue`` (prior, old unless it is the prior, new) + the record
    context (timestamp 8, offset 8, topic characters, partition 4, header names and values)."""
    size = 8 + len(key) + len(prior or b"") + len(old or b"") + len(new or b"")
    size += 8 + 8 + len(topic or "") + 4
    for name, value in headers or ():
        size += len(name) + len(value or b"")
    return size


class BufferedRecord(NamedTuple):
    """One evicted entry: serialized key and values, the record's timestamp and headers."""

    key: bytes
    new: bytes | None
    prior: bytes | None
    timestamp: int
    headers: Headers


def _put_bytes(out: list[bytes], data: bytes | None) -> None:
    if data is None:
        out.append(_LEN.pack(-1))
    else:
        out.append(_LEN.pack(len(data)))
        out.append(data)


def _get_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    size: int = _LEN.unpack_from(data, pos)[0]
    pos += _LEN.size
    if size < 0:
        return None, pos
    return data[pos : pos + size], pos + size


def encode_entry(
    new: bytes | None, prior: bytes | None, timestamp: int, headers: Headers, size: int
) -> bytes:
    out = [_TIME.pack(timestamp)]
    _put_bytes(out, new)
    _put_bytes(out, prior)
    pairs = headers or []
    out.append(_LEN.pack(len(pairs)))
    for name, value in pairs:
        _put_bytes(out, name.encode("utf-8"))
        _put_bytes(out, value)
    out.append(_TIME.pack(size))
    return b"".join(out)


def decode_entry(key: bytes, data: bytes) -> BufferedRecord:
    timestamp: int = _TIME.unpack_from(data, 0)[0]
    new, pos = _get_bytes(data, _TIME.size)
    prior, pos = _get_bytes(data, pos)
    count: int = _LEN.unpack_from(data, pos)[0]
    pos += _LEN.size
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        name, pos = _get_bytes(data, pos)
        value, pos = _get_bytes(data, pos)
        headers.append(((name or b"").decode("utf-8"), value))
    return BufferedRecord(key, new, prior, timestamp, headers or None)


class SuppressBuffer:
    """Time-ordered, one entry per key (see module docs); not thread-safe, one per task."""

    def __init__(self, store: KeyValueStore[bytes, bytes]) -> None:
        self._store = store
        #: serialized key -> (buffer time, accounted size)
        self._index: dict[bytes, tuple[int, int]] = {}
        self.size_bytes = 0
        self._min_time = MAX_TIME
        for binary, entry in store.all():
            time: int = _TIME.unpack_from(binary, 0)[0]
            key = binary[_TIME.size :]
            size: int = _TIME.unpack_from(entry, len(entry) - _TIME.size)[0]
            self._index[key] = (time, size)
            self.size_bytes += size
            self._min_time = min(self._min_time, time)

    @property
    def num_records(self) -> int:
        return len(self._index)

    @property
    def min_time(self) -> int:
        """The earliest buffer time held (a lower bound after removals); MAX_TIME when empty."""
        return self._min_time if self._index else MAX_TIME

    def buffered(self, key: bytes) -> BufferedRecord | None:
        """The update buffered for ``key``, if any."""
        slot = self._index.get(key)
        if slot is None:
            return None
        raw = self._store.get(_TIME.pack(slot[0]) + key)
        return None if raw is None else decode_entry(key, raw)

    def prior_value(self, key: bytes) -> tuple[bool, bytes | None]:
        """``(buffered, prior)``: whether ``key`` is buffered, and its prior value if so."""
        slot = self._index.get(key)
        if slot is None:
            return False, None
        raw = self._store.get(_TIME.pack(slot[0]) + key)
        if raw is None:  # pragma: no cover - the index mirrors the store
            return False, None
        return True, decode_entry(key, raw).prior

    def put(self, time: int, key: bytes, entry: bytes, size: int) -> None:
        """Buffer ``entry`` (of Kafka size ``size``) for ``key``: at ``time`` if new, else in the
        key's existing slot."""
        slot = self._index.get(key)
        if slot is not None:
            time = slot[0]
            self.size_bytes -= slot[1]
        self._index[key] = (time, size)
        self.size_bytes += size
        if time < self._min_time:
            self._min_time = time
        self._store.put(_TIME.pack(time) + key, entry)

    def evict_while(self, keep_going: Callable[[int], bool], emit: Callable[[BufferedRecord], None]) -> None:
        """Remove entries in time order while ``keep_going(buffer time)``; ``emit`` each one."""
        if not self._index or not keep_going(self.min_time):
            return
        store = self._store
        next_time = MAX_TIME
        for binary, entry in store.all():
            time: int = _TIME.unpack_from(binary, 0)[0]
            if not keep_going(time):
                next_time = time
                break
            key = binary[_TIME.size :]
            slot = self._index.pop(key, None)
            if slot is not None:
                self.size_bytes -= slot[1]
            store.put(binary, None)
            emit(decode_entry(key, entry))
        self._min_time = next_time
