"""The key-value bytes store: the bottom of a key-value stack, on either backend.

Kafka Streams has ``RocksDBStore`` and ``InMemoryKeyValueStore``; here one class runs over
a :class:`~platform_streams.state.backend.StorageBackend`, so both backends behave the same
by construction and the tests of one cover the logic of the other.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from platform_streams.state.api import KeyValueStore, StateStore
from platform_streams.state.backend import BackedStore, BytesMap, ClosedBytesMap, StorageBackend
from platform_streams.state.keys import inclusive_to_exclusive, prefix_upper_bound

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.state.store_context import StateStoreContext

__all__ = ["KeyValueBytesStore"]

log = logging.getLogger(__name__)


class KeyValueBytesStore(BackedStore, KeyValueStore[bytes, bytes]):
    """Sorted ``bytes -> bytes`` store in the default column of its backend."""

    def __init__(self, name: str, backend: StorageBackend) -> None:
        super().__init__(name, backend)
        self._map: BytesMap = ClosedBytesMap(name)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._open_backend(context)
        self._map = self._backend.default
        context.register(root, self.restore_batch, None)

    def restore_batch(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records (the restore callback): the last write of a key wins."""
        self._map.write_all(batch)

    # ------------------------------------------------------------------ reads & writes

    def get(self, key: bytes) -> bytes | None:
        return self._map.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self._map.put(key, value)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        store = self._map
        old = store.get(key)
        if old is None:
            store.put(key, value)
        return old

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        put = self._map.put
        for key, value in entries:
            put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        store = self._map
        old = store.get(key)
        if old is not None:
            store.put(key, None)
        return old

    def range(self, key_from: bytes | None, key_to: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._range(key_from, key_to, reverse=False)

    def reverse_range(self, key_from: bytes | None, key_to: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._range(key_from, key_to, reverse=True)

    def _range(
        self, key_from: bytes | None, key_to: bytes | None, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        if key_from is not None and key_to is not None and key_from > key_to:
            log.warning(
                "store %s: range with from > to returns nothing (serialized keys compare as bytes)",
                self._name,
            )
            return iter(())
        upper = inclusive_to_exclusive(key_to) if key_to is not None else None
        return self._map.items(key_from, upper, reverse)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._map.items()

    def reverse_all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._map.items(reverse=True)

    def prefix_scan(self, prefix: Any, prefix_serde: Serde | None = None) -> Iterator[tuple[bytes, bytes]]:
        raw = prefix_serde.serialize(prefix) if prefix_serde is not None else prefix
        if not isinstance(raw, bytes):
            raise ValueError(f"store {self._name}: prefix must serialize to bytes, got {raw!r}")
        return self._map.items(raw, prefix_upper_bound(raw))

    def approximate_num_entries(self) -> int:
        return self._map.approximate_num_entries()

    # ------------------------------------------------------------------ lifecycle

    def flush(self) -> None:
        if self._backend.is_open:
            self._backend.flush()

    def close(self) -> None:
        self._map = ClosedBytesMap(self._name)
        self._backend.close()

    def wipe(self) -> None:
        self._map = ClosedBytesMap(self._name)  # a column handle keeps RocksDB (and its lock) alive
        self._backend.wipe()
        self._map = self._backend.default
