"""Caching layers of window and session stacks (Kafka Streams' ``CachingWindowStore`` /
``CachingSessionStore``).

Cache keys are the bytes store's binary keys (window: seqnum 0 -- caching is never used
with retained duplicates; session: ``key + end + start``). The per-record reads of the
DSL go through a per-record-key index of cached binaries (kept exact by the cache's remove
hook), so ``find_sessions`` and ``fetch(key, from, to)`` cost what the key's own windows
cost, not a cache scan. Multi-key scans (``fetch_range``/``fetch_all``/``all``) scan the
cache; they are not per-record operations of the DSL.

Merged results are ordered like the bytes store's: per key by time; multi-key scans by
segment, then key, then time. Cached entries of windows already expired by the store's
stream time are hidden by the range reads and dropped by the bytes store when flushed; the
single-window ``fetch_at`` answers them from the cache, as Kafka's ``fetch(key, time)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from platform_streams.errors import InvalidStateStoreError
from platform_streams.state.api import SessionStore, StateStore, WindowStore
from platform_streams.state.cache import merge_sorted
from platform_streams.state.keys import (
    MAX_TIME,
    SESSION_SUFFIX_LEN,
    WINDOW_SUFFIX_LEN,
    in_key_range,
    key_range_valid,
    split_session_key,
    split_window_key,
    window_key,
    window_start_of,
    window_suffix,
)
from platform_streams.state.keys import (
    session_key as session_binary,
)
from platform_streams.state.segments import default_segment_interval, live_segment_start
from platform_streams.state.window_store import WindowBytesStore
from platform_streams.state.windowed import SessionWindow, TimeWindow, Windowed
from platform_streams.state.wrappers.base import (
    CachingLayer,
    DelegatedRetention,
    DelegatedWindowShape,
    innermost,
)
from platform_streams.state.wrappers.change_logging import (
    ChangeLoggingWindowStore,
    change_time,
    logging_layer,
)
from platform_streams.state.wrappers.quiet_flush import QuietCount, flush_reporting_last, quiet_logger

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext

__all__ = ["CachingSessionStore", "CachingWindowStore"]


def _first(entry: tuple[Any, Any]) -> Any:
    return entry[0]


class _IndexedCache(CachingLayer):
    """The caching layer + per-record-key index + the store's stream time, shared by both layers."""

    _suffix_len: int

    def __init__(self, wrapped: Any) -> None:
        super().__init__(wrapped)
        #: record key -> its cache keys; built at the first read that needs it (None: not yet)
        self._index: dict[bytes, set[bytes]] | None = None
        self._observed = -1

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        super().init(context, root)
        inner = innermost(self.wrapped)
        retention: int = self.wrapped.retention_ms
        self._retention = retention
        self._interval: int = getattr(inner, "segment_interval_ms", None) or default_segment_interval(
            retention
        )
        self._observed = getattr(inner, "observed_stream_time", -1)
        self._drop_index()

    def _cache_put(self, key: bytes, binary: bytes, value: bytes | None, time_ms: int) -> None:
        cache = self._cache
        if cache is None:
            raise InvalidStateStoreError("store is not open", store=self.name)
        if time_ms > self._observed:
            self._observed = time_ms
        index = self._index
        if index is not None:
            keys = index.get(key)
            if keys is None:
                keys = index[key] = set()
            keys.add(binary)
        # the time of the record writing it, as Kafka's LRUCacheEntry keeps its record context
        cache.put(binary, value, change_time(self._context))

    def _key_index(self) -> dict[bytes, set[bytes]]:
        """The per-record-key index of the cache keys, built from the cache on first use.

        Only key and range reads need it (session merges, sliding windows, ``fetch_between``,
        interactive queries); a tumbling or hopping aggregation reads single windows and
        never pays for keeping it (12 % of a windowed sum's CPU per record, bench/RESULTS.md).
        """
        index = self._index
        if index is None:
            cache = self._require()
            index = self._index = {}
            cut = self._suffix_len
            for binary, _ in cache.items():
                key = binary[: len(binary) - cut]
                keys = index.get(key)
                if keys is None:
                    keys = index[key] = set()
                keys.add(binary)
            cache.set_remove_hook(self._forget)
        return index

    def _drop_index(self) -> None:
        self._index = None
        if self._cache is not None:
            self._cache.set_remove_hook(None)

    def _forget(self, binary: bytes) -> None:
        index = self._index
        if index is None:
            return
        key = binary[: len(binary) - self._suffix_len]
        keys = index.get(key)
        if keys is not None:
            keys.discard(binary)
            if not keys:
                del index[key]

    def _min_live_time(self) -> int:
        return max(self._observed - self._retention + 1, 0)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._drop_index()

    def wipe(self) -> None:
        self._drop_index()
        super().wipe()
        self._observed = getattr(innermost(self.wrapped), "observed_stream_time", -1)


class CachingWindowStore(_IndexedCache, DelegatedWindowShape, WindowStore[bytes, bytes]):
    """Write-back cache over a window bytes store."""

    wrapped: WindowStore[bytes, bytes]
    _suffix_len = WINDOW_SUFFIX_LEN

    def __init__(self, wrapped: WindowStore[bytes, bytes]) -> None:
        if wrapped.retain_duplicates:
            raise ValueError(f"store {wrapped.name}: caching cannot be used with retained duplicates")
        super().__init__(wrapped)

    @property
    def retain_duplicates(self) -> bool:
        return False

    def _flush_entries(self, entries: list[tuple[bytes, bytes | None, int]]) -> None:
        """Write the windows below and tell the listener; for the usual stack (change-logging
        over the window bytes store) in one loop: the cache key is already the binary window
        key that both the bytes store and the changelog use (seqnum 0), so it is neither
        split nor built again, and the changelog's topic, partition, timestamp and headers
        are resolved once per flush. Deletes and old values take the layered path."""
        below = self.wrapped
        changelog = cast(ChangeLoggingWindowStore, below) if type(below) is ChangeLoggingWindowStore else None
        inner = changelog.wrapped if changelog is not None else below
        if type(inner) is not WindowBytesStore or self._send_old_values:
            self._layered_flush(entries)
            return
        write = inner.binary_writer()
        sender = None if changelog is None else changelog.flush_sender()
        timestamped = changelog is not None and changelog.values_timestamped
        from_bytes = int.from_bytes
        listener = self._listener
        size = inner.window_size_ms

        def loop(
            entries: list[tuple[bytes, bytes | None, int]],
            produce: Callable[..., None] | None,
            count: QuietCount | None,
        ) -> None:
            if sender is not None:
                send, topic, headers, partition, _ = sender
                if produce is not None:
                    assert count is not None
                    log = quiet_logger(sender, produce, count)
            for entry in entries:
                binary, value, timestamp = entry
                if value is None:
                    self._layered_flush([entry])
                    continue
                write(binary, value)
                if sender is not None:  # the layer's change_time_of, inline
                    stamp = from_bytes(value[:8], "big", signed=True) if timestamped else timestamp
                    if produce is not None:
                        log(binary, value, stamp)
                    else:
                        send(topic, binary, value, stamp, headers, partition)
                if listener is not None:
                    start = window_start_of(binary)
                    key = binary[: len(binary) - WINDOW_SUFFIX_LEN]
                    listener(Windowed(key, TimeWindow(start, start + size)), value, None, timestamp)

        flush_reporting_last(entries, sender, loop)

    def _layered_flush(self, entries: list[tuple[bytes, bytes | None, int]]) -> None:
        wrapped = self.wrapped
        logged = logging_layer(wrapped)
        listener = self._listener
        send_old = self._send_old_values
        size = self.wrapped.window_size_ms
        try:
            for binary, value, timestamp in entries:
                key, start, _ = split_window_key(binary)
                if listener is None:
                    if logged is not None:
                        logged.entry_time = timestamp
                    wrapped.put(key, value, start)
                    continue
                old = wrapped.fetch_at(key, start) if (send_old or value is None) else None
                if value is None and old is None:
                    continue
                if logged is not None:
                    logged.entry_time = timestamp
                wrapped.put(key, value, start)
                window = Windowed(key, TimeWindow(start, start + size))
                listener(window, value, old if send_old else None, timestamp)
        finally:
            if logged is not None:
                logged.entry_time = None

    def put(self, key: bytes, value: bytes | None, window_start_ms: int) -> None:
        self._cache_put(key, key + window_suffix(window_start_ms, 0), value, window_start_ms)

    def mark_final(self, binaries: list[bytes]) -> None:
        """These windows (their binary keys, seqnum 0) will not change again (an emit-final
        aggregation's closed windows): :meth:`NamedCache.mark_final`."""
        self._require().mark_final(binaries)

    def fetch_at(self, key: bytes, window_start_ms: int) -> bytes | None:
        """The cache first, then the store, as Kafka's ``CachingWindowStore.fetch(key, time)``:
        a cached window is answered even when the store's time has expired it (it is dropped
        at the flush), so a table join's value getter still sees it (KStreamWindowAggregateTest
        .testJoin); the store itself hides the windows it expired."""
        cache = self._cache
        if cache is None:
            raise InvalidStateStoreError("store is not open", store=self.name)
        entry = cache.get(key + window_suffix(window_start_ms, 0))
        reads = self.reads
        if entry is not None:
            if reads is not None:
                reads.hits += 1
            return entry[0]
        if reads is not None:
            reads.misses += 1
        return self.wrapped.fetch_at(key, window_start_ms)

    def fetch_between(
        self, key: bytes, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[int, bytes]]:
        cache = self._require()
        time_from_ms = max(time_from_ms, self._min_live_time())
        if time_from_ms > time_to_ms:
            return iter(())
        cached: list[tuple[int, bytes | None]] = []
        for binary in self._key_index().get(key, ()):
            start = window_start_of(binary)
            entry = cache.peek(binary)
            if entry is not None and time_from_ms <= start <= time_to_ms:
                cached.append((start, entry[0]))
        cached.sort(key=_first, reverse=backward)
        store = self.wrapped.fetch_between(key, time_from_ms, time_to_ms, backward=backward)
        return merge_sorted(store, cached, backward)

    def _multi(
        self,
        store: Iterator[tuple[Windowed[bytes], bytes]],
        keep: Callable[[bytes, int], bool],
        backward: bool,
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        interval = self._interval
        size = self.wrapped.window_size_ms
        min_live = self._min_live_time()
        cached: list[tuple[tuple[int, bytes], tuple[Windowed[bytes], bytes] | None]] = []
        for binary, value in self._require().items():
            key, start, _ = split_window_key(binary)
            if start >= min_live and keep(key, start):
                item = (Windowed(key, TimeWindow(start, start + size)), value) if value is not None else None
                cached.append(((start // interval, binary), item))
        cached.sort(key=_first, reverse=backward)
        keyed = (
            ((w.window.start_ms // interval, window_key(w.key, w.window.start_ms, 0)), (w, v))
            for w, v in store
        )
        return (item for _, item in merge_sorted(keyed, cached, backward))

    def fetch_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        time_from_ms: int,
        time_to_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        def keep(key: bytes, start: int) -> bool:
            return (
                time_from_ms <= start <= time_to_ms
                and (key_from is None or key >= key_from)
                and (key_to is None or key <= key_to)
            )

        store = self.wrapped.fetch_range(key_from, key_to, time_from_ms, time_to_ms, backward=backward)
        return self._multi(store, keep, backward)

    def fetch_all(
        self, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        store = self.wrapped.fetch_all(time_from_ms, time_to_ms, backward=backward)
        return self._multi(store, lambda _k, start: time_from_ms <= start <= time_to_ms, backward)

    def all(self, *, backward: bool = False) -> Iterator[tuple[Windowed[bytes], bytes]]:
        return self._multi(self.wrapped.all(backward=backward), lambda _k, _s: True, backward)


class CachingSessionStore(_IndexedCache, DelegatedRetention, SessionStore[bytes, bytes]):
    """Write-back cache over a session bytes store."""

    wrapped: SessionStore[bytes, bytes]
    _suffix_len = SESSION_SUFFIX_LEN

    def __init__(self, wrapped: SessionStore[bytes, bytes]) -> None:
        super().__init__(wrapped)

    def _min_live_time(self) -> int:
        """Sessions live as long as their segment (see ``SessionBytesStore``)."""
        return live_segment_start(self._observed, self._retention, self._interval)

    def _flush_entries(self, entries: list[tuple[bytes, bytes | None, int]]) -> None:
        wrapped = self.wrapped
        logged = logging_layer(wrapped)
        listener = self._listener
        send_old = self._send_old_values
        try:
            for binary, value, timestamp in entries:
                key, start, end = split_session_key(binary)
                windowed = Windowed(key, SessionWindow(start, end))
                if listener is None:
                    if logged is not None:
                        logged.entry_time = timestamp
                    wrapped.put(windowed, value)
                    continue
                old = wrapped.fetch_session(key, start, end) if (send_old or value is None) else None
                if value is None and old is None:
                    continue
                if logged is not None:
                    logged.entry_time = timestamp
                wrapped.put(windowed, value)
                listener(windowed, value, old if send_old else None, timestamp)
        finally:
            if logged is not None:
                logged.entry_time = None

    def put(self, session_key_: Windowed[bytes], aggregate: bytes | None) -> None:
        key = session_key_.key
        window = session_key_.window
        self._cache_put(key, session_binary(key, window.start_ms, window.end_ms), aggregate, window.end_ms)

    def remove(self, session_key_: Windowed[bytes]) -> None:
        self.put(session_key_, None)

    def fetch_session(self, key: bytes, session_start_ms: int, session_end_ms: int) -> bytes | None:
        if session_end_ms < self._min_live_time():
            return None
        entry = self._require().get(session_binary(key, session_start_ms, session_end_ms))
        reads = self.reads
        if entry is not None:
            if reads is not None:
                reads.hits += 1
            return entry[0]
        if reads is not None:
            reads.misses += 1
        return self.wrapped.fetch_session(key, session_start_ms, session_end_ms)

    def find_sessions(
        self,
        key: bytes,
        earliest_session_end_ms: int,
        latest_session_start_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        cache = self._require()
        earliest_end = max(earliest_session_end_ms, self._min_live_time())
        cached: list[tuple[tuple[int, int], tuple[Windowed[bytes], bytes] | None]] = []
        for binary in self._key_index().get(key, ()):
            _, start, end = split_session_key(binary)
            entry = cache.peek(binary)
            if entry is None or end < earliest_end or start > latest_session_start_ms:
                continue
            value = entry[0]
            item = (Windowed(key, SessionWindow(start, end)), value) if value is not None else None
            cached.append(((end, start), item))
        cached.sort(key=_first, reverse=backward)
        store = self.wrapped.find_sessions(key, earliest_end, latest_session_start_ms, backward=backward)
        keyed = (((w.window.end_ms, w.window.start_ms), (w, v)) for w, v in store)
        return (item for _, item in merge_sorted(keyed, cached, backward))

    def fetch(self, key: bytes, *, backward: bool = False) -> Iterator[tuple[Windowed[bytes], bytes]]:
        return self.find_sessions(key, 0, MAX_TIME, backward=backward)

    def find_sessions_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        earliest_session_end_ms: int,
        latest_session_start_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        """The store's sessions overlaid with the cache's (a cached None hides a stored session).

        Materialized and sorted by (end, key, start): a range query is rare (interactive
        queries, user processors), so it may cost the keys of the cache index in range."""
        cache = self._require()
        if not key_range_valid(self.name, key_from, key_to):
            return iter(())
        earliest_end = max(earliest_session_end_ms, self._min_live_time())
        found: dict[tuple[int, bytes, int], tuple[Windowed[bytes], bytes] | None] = {}
        for windowed, value in self.wrapped.find_sessions_range(
            key_from, key_to, earliest_end, latest_session_start_ms
        ):
            found[(windowed.window.end_ms, windowed.key, windowed.window.start_ms)] = (windowed, value)
        for key, binaries in self._key_index().items():
            if not in_key_range(key, key_from, key_to):
                continue
            for binary in binaries:
                entry = cache.peek(binary)
                _, start, end = split_session_key(binary)
                if entry is None or end < earliest_end or start > latest_session_start_ms:
                    continue
                found[(end, key, start)] = (
                    (Windowed(key, SessionWindow(start, end)), entry[0]) if entry[0] is not None else None
                )
        ordered = sorted(found.items(), key=_first, reverse=backward)
        return iter([item for _, item in ordered if item is not None])
