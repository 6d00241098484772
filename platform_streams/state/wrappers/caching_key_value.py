"""Caching layer of a key-value stack (Kafka Streams' ``CachingKeyValueStore``).

Writes go to the record cache only; the layer below (change-logging, bytes store) sees a
key once per flush or eviction, with its latest value. Reads are served from the cache,
and store hits are cached as clean entries so hot keys stay in memory. Scans merge a
sorted snapshot of the cache with the store's own snapshot scan; collecting the cached
part is linear in the cache size, which is fine for the scans of this store type (not
per-record on the DSL's hot path).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from platform_streams.errors import InvalidStateStoreError
from platform_streams.state.api import FlushListener, KeyValueStore, StateStore
from platform_streams.state.cache import merge_sorted
from platform_streams.state.wrappers.base import CachingLayer
from platform_streams.state.wrappers.change_logging import change_time, logging_layer

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.state.store_context import StateStoreContext

__all__ = ["CachingKeyValueStore"]


class CachingKeyValueStore(CachingLayer, KeyValueStore[bytes, bytes]):
    """Write-back, deduplicating cache over a key-value bytes store."""

    wrapped: KeyValueStore[bytes, bytes]

    def __init__(self, wrapped: KeyValueStore[bytes, bytes]) -> None:
        super().__init__(wrapped)
        #: the one-loop flush the timestamped store above sets for the DSL's stack
        #: (:mod:`~platform_streams.state.wrappers.direct_flush_path`); None: :meth:`layered_flush`
        self.direct_flush: Callable[[list[tuple[bytes, bytes | None, int]]], None] | None = None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        super().init(context, root)
        # a clean entry is what the store below answers: another cache may drop it
        self._require().may_donate = True

    def set_flush_listener(self, listener: FlushListener, send_old_values: bool) -> None:
        super().set_flush_listener(listener, send_old_values)
        self.direct_flush = None  # built for the previous listener

    def _flush_entries(self, entries: list[tuple[bytes, bytes | None, int]]) -> None:
        direct = self.direct_flush
        if direct is not None:
            direct(entries)
        else:
            self.layered_flush(entries)

    def layered_flush(self, entries: list[tuple[bytes, bytes | None, int]]) -> None:
        """Each entry through the layers below, then to the listener (the general flush)."""
        wrapped = self.wrapped
        logged = logging_layer(wrapped)
        listener = self._listener
        try:
            if listener is None:
                for key, value, timestamp in entries:
                    if logged is not None:
                        logged.entry_time = timestamp
                    wrapped.put(key, value)
                return
            send_old = self._send_old_values
            for key, value, timestamp in entries:
                old = wrapped.get(key) if (send_old or value is None) else None
                if value is None and old is None:
                    continue  # deleting a key that never reached the store: nothing to tell
                if logged is not None:
                    logged.entry_time = timestamp
                wrapped.put(key, value)
                listener(key, value, old if send_old else None, timestamp)
        finally:
            if logged is not None:
                logged.entry_time = None

    # ------------------------------------------------------------------ point operations

    def get(self, key: bytes) -> bytes | None:
        cache = self._cache
        if cache is None:
            raise InvalidStateStoreError("store is not open", store=self.name)
        entry = cache.get(key)
        reads = self.reads
        if entry is not None:
            if reads is not None:
                reads.hits += 1
            return entry[0]
        if reads is not None:
            reads.misses += 1
        value = self.wrapped.get(key)
        if value is not None:
            cache.put_clean(key, value)
        return value

    def put(self, key: bytes, value: bytes | None) -> None:
        cache = self._cache
        if cache is None:
            raise InvalidStateStoreError("store is not open", store=self.name)
        # the entry keeps the time of the record writing it, as Kafka's LRUCacheEntry keeps its
        # record context: the flush stamps the change with it, and reports a delete at it
        cache.put(key, value, change_time(self._context))

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        old = self.get(key)
        self.put(key, None)
        return old

    # ------------------------------------------------------------------ scans

    def _merged(
        self,
        store_items: Iterator[tuple[bytes, bytes]],
        keep: Callable[[bytes], bool],
        reverse: bool,
    ) -> Iterator[tuple[bytes, bytes]]:
        cached = [(key, value) for key, value in self._require().items() if keep(key)]
        cached.sort(reverse=reverse)
        return merge_sorted(store_items, cached, reverse)

    def range(self, key_from: bytes | None, key_to: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._merged(self.wrapped.range(key_from, key_to), _between(key_from, key_to), False)

    def reverse_range(self, key_from: bytes | None, key_to: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self._merged(self.wrapped.reverse_range(key_from, key_to), _between(key_from, key_to), True)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._merged(self.wrapped.all(), _always, False)

    def reverse_all(self) -> Iterator[tuple[bytes, bytes]]:
        return self._merged(self.wrapped.reverse_all(), _always, True)

    def prefix_scan(self, prefix: Any, prefix_serde: Serde | None = None) -> Iterator[tuple[bytes, bytes]]:
        raw = prefix_serde.serialize(prefix) if prefix_serde is not None else prefix
        if not isinstance(raw, bytes):
            raise ValueError(f"store {self.name}: prefix must serialize to bytes, got {raw!r}")
        return self._merged(self.wrapped.prefix_scan(raw), lambda key: key.startswith(raw), False)

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()


def _always(key: bytes) -> bool:
    return True


def _between(key_from: bytes | None, key_to: bytes | None) -> Callable[[bytes], bool]:
    if key_from is not None and key_to is not None:
        return lambda key: key_from <= key <= key_to
    if key_from is not None:
        return lambda key: key_from <= key
    if key_to is not None:
        return lambda key: key <= key_to
    return _always
