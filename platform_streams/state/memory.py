"""The in-memory storage backend: dict lookups, a blocked sorted key index for scans.

A plain sorted list with ``bisect.insort`` costs O(n) per new key (a memmove of the whole
list), which becomes milliseconds per record at a million keys. :class:`SortedKeys` keeps
the keys in blocks of at most ``2 * _LOAD`` (the layout of ``sortedcontainers.SortedList``,
without the dependency): a new key costs a bisect over block maxima plus an insort into one
small block. Values live in a plain dict, so ``get``/``put`` of existing keys never touch
the index.

Scans copy the matching key slice first, then read values as they go (entries deleted
meanwhile are skipped): safe while the store is written, as Kafka Streams' in-memory store.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from pathlib import Path

from platform_streams.state.backend import BytesMap, StorageBackend

__all__ = ["MemoryBackend", "MemoryBytesMap", "SortedKeys"]

_LOAD = 512


class SortedKeys:
    """A sorted set of ``bytes`` with O(log n + block) insert/remove and sliced range reads."""

    __slots__ = ("_blocks", "_len", "_maxes")

    def __init__(self) -> None:
        self._blocks: list[list[bytes]] = []
        self._maxes: list[bytes] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def add(self, key: bytes) -> None:
        """Insert ``key``; the caller guarantees it is not present (the value dict knows)."""
        maxes = self._maxes
        if not maxes:
            self._blocks.append([key])
            maxes.append(key)
        else:
            pos = bisect_right(maxes, key)
            if pos == len(maxes):
                pos -= 1
                self._blocks[pos].append(key)
                maxes[pos] = key
            else:
                insort(self._blocks[pos], key)
            block = self._blocks[pos]
            if len(block) > 2 * _LOAD:
                half = block[_LOAD:]
                del block[_LOAD:]
                maxes[pos] = block[-1]
                self._blocks.insert(pos + 1, half)
                maxes.insert(pos + 1, half[-1])
        self._len += 1

    def remove(self, key: bytes) -> None:
        """Remove ``key``; the caller guarantees it is present."""
        maxes = self._maxes
        pos = bisect_left(maxes, key)
        block = self._blocks[pos]
        idx = bisect_left(block, key)
        del block[idx]
        self._len -= 1
        if not block:
            del self._blocks[pos]
            del maxes[pos]
        elif idx == len(block):
            maxes[pos] = block[-1]

    def clear(self) -> None:
        self._blocks.clear()
        self._maxes.clear()
        self._len = 0

    def slice(self, lower: bytes | None, upper: bytes | None) -> list[bytes]:
        """A new list of the keys in ``[lower, upper)`` (None: unbounded), ascending."""
        blocks = self._blocks
        if not blocks:
            return []
        if lower is None:
            pos, idx = 0, 0
        else:
            pos = bisect_left(self._maxes, lower)
            if pos == len(blocks):
                return []
            idx = bisect_left(blocks[pos], lower)
        out: list[bytes] = []
        while pos < len(blocks):
            block = blocks[pos]
            if upper is not None and block[-1] >= upper:
                out.extend(block[idx : bisect_left(block, upper)])
                break
            out.extend(block[idx:] if idx else block)
            pos += 1
            idx = 0
        return out


class MemoryBytesMap(BytesMap):
    """A dict plus a :class:`SortedKeys` index."""

    __slots__ = ("_data", "_keys")

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys = SortedKeys()

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        data = self._data
        if value is None:
            if data.pop(key, None) is not None:
                self._keys.remove(key)
        else:
            if key not in data:
                self._keys.add(key)
            data[key] = value

    def items(
        self, lower: bytes | None = None, upper: bytes | None = None, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        keys = self._keys.slice(lower, upper)
        if reverse:
            keys.reverse()
        return self._iterate(keys)

    def _iterate(self, keys: list[bytes]) -> Iterator[tuple[bytes, bytes]]:
        data = self._data
        for key in keys:
            value = data.get(key)
            if value is not None:
                yield key, value

    def approximate_num_entries(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()
        self._keys.clear()


class MemoryBackend(StorageBackend):
    """Columns as :class:`MemoryBytesMap` objects; nothing survives the process."""

    def __init__(self) -> None:
        self._default = MemoryBytesMap()
        self._columns: dict[str, MemoryBytesMap] = {}
        self._open = False

    @property
    def persistent(self) -> bool:
        return False

    @property
    def started_empty(self) -> bool:
        return True

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self, directory: Path | None) -> None:
        self._open = True

    @property
    def default(self) -> BytesMap:
        return self._default

    def column_names(self) -> list[str]:
        return list(self._columns)

    def column(self, name: str) -> BytesMap:
        col = self._columns.get(name)
        if col is None:
            col = self._columns[name] = MemoryBytesMap()
        return col

    def drop_column(self, name: str) -> None:
        self._columns.pop(name, None)

    def flush(self) -> None:
        """Nothing to make durable."""

    def close(self) -> None:
        self._default.clear()
        self._columns.clear()
        self._open = False

    def wipe(self) -> None:
        self._default.clear()
        self._columns.clear()
