"""Change-logging layer: every write to the bytes store is also sent to the changelog.

Kafka Streams' ``ChangeLogging*BytesStore``. The record key is the bytes store's own key
(plain key, binary window key, binary session key), so the restore callback of the bytes
store can apply changelog records as they are. The layer also tells the state manager
which changelog topic restores the store: it hands the stores below a context whose
``register`` fills in the topic (the bytes store, which owns the restore callback, is the
one that registers).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from platform_streams.processor.record import RecordMetadata
from platform_streams.processor.task_id import TaskId
from platform_streams.state.api import KeyValueStore, SessionStore, StateStore, WindowStore
from platform_streams.state.keys import MAX_SEQNUM, session_key, window_key
from platform_streams.state.store_context import ChangeSender, RestoreCallback, StateStoreContext
from platform_streams.state.windowed import Windowed
from platform_streams.state.wrappers.base import (
    DelegatedSessionReads,
    DelegatedWindowReads,
    WrappedStore,
    changelog_topic_name,
    record_timestamp,
)

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.serde.base import Serde

__all__ = [
    "ChangeLoggingKeyValueStore",
    "ChangeLoggingSessionStore",
    "ChangeLoggingWindowStore",
    "ChangelogRegisteringContext",
    "change_time",
    "logging_layer",
]


class ChangelogRegisteringContext(StateStoreContext):
    """The task's context, except that ``register`` names this store's changelog topic."""

    def __init__(self, delegate: StateStoreContext, changelog_topic: str) -> None:
        self._delegate = delegate
        self.changelog_topic = changelog_topic

    def __getattr__(self, name: str) -> Any:
        # Optional runtime extensions (e.g. ``record_cache``) pass through.
        if name == "_delegate":
            raise AttributeError(name)
        return getattr(self._delegate, name)

    @property
    def application_id(self) -> str:
        return self._delegate.application_id

    @property
    def task_id(self) -> TaskId:
        return self._delegate.task_id

    @property
    def config(self) -> StreamsConfig:
        return self._delegate.config

    @property
    def state_dir(self) -> Path:
        return self._delegate.state_dir

    @property
    def changelog_partition(self) -> int:
        return self._delegate.changelog_partition

    def register(self, store: Any, restore_callback: RestoreCallback, changelog_topic: str | None) -> None:
        self._delegate.register(store, restore_callback, self.changelog_topic)

    def log_change(self, store_name: str, key: bytes, value: bytes | None, timestamp: int) -> None:
        self._delegate.log_change(store_name, key, value, timestamp)

    def record_metadata(self) -> RecordMetadata | None:
        return self._delegate.record_metadata()

    def current_stream_time_ms(self) -> int:
        return self._delegate.current_stream_time_ms()

    def current_system_time_ms(self) -> int:
        return self._delegate.current_system_time_ms()


class _ChangeLogging(WrappedStore):
    """Shared init: remember the context, register the changelog topic below; the timestamp
    of each change, as Kafka's ``ChangeLogging*BytesStore`` stamps it (:meth:`change_time_of`).
    """

    _context: StateStoreContext
    #: the values are ``timestamp (8) + value``: a change is stamped with its value's timestamp
    values_timestamped = False
    #: the time of the record that wrote the cache entry being flushed (Kafka's cache sets the
    #: entry's record context before writing it below); None outside a cache flush
    entry_time: int | None = None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._context = context
        self._store_name = self.name
        topic = changelog_topic_name(context.application_id, self._store_name)
        self.wrapped.init(ChangelogRegisteringContext(context, topic), root)

    def stamp_values(self, *, values_timestamped: bool) -> None:
        """Stamp a change with its value's own timestamp (a timestamped store's)."""
        self.values_timestamped = values_timestamped

    def change_time_of(self, value: bytes | None) -> int:
        """A change's timestamp: a timestamped value's own; else the time of the record that
        wrote it (the flushed cache entry's, or the record being processed)."""
        if value is not None and self.values_timestamped:
            return int.from_bytes(value[:8], "big", signed=True)
        entry_time = self.entry_time
        return change_time(self._context) if entry_time is None else entry_time

    def _log(self, key: bytes, value: bytes | None) -> None:
        self._context.log_change(self._store_name, key, value, self.change_time_of(value))

    def flush_sender(self) -> ChangeSender:
        """The sender for the changes of one cache flush: what :meth:`_log` resolves per
        change (topic, partition, headers) resolved once, for the caching layers' one-loop
        flushes, which stamp each change as :meth:`change_time_of` does (with the flushed entry's
        time). Valid within that flush only."""
        return self._context.change_sender(self._store_name)


def change_time(context: StateStoreContext) -> int:
    """The timestamp of the input record being processed (its source's extracted timestamp);
    outside one (a punctuation, a cache flush) the stream time, as :func:`record_timestamp`."""
    if getattr(context, "current", None) is not None:
        time: int = getattr(context, "record_time", -1)
        if time >= 0:
            return time
    return record_timestamp(context)


def logging_layer(store: Any) -> _ChangeLogging | None:
    """``store`` if it is a change-logging layer (a caching layer's ``wrapped``), else None."""
    return store if isinstance(store, _ChangeLogging) else None


class ChangeLoggingKeyValueStore(_ChangeLogging, KeyValueStore[bytes, bytes]):
    """Logs puts and deletes of a key-value bytes store.

    Each change is stamped as Kafka's ``ChangeLoggingKeyValueBytesStore`` and
    ``ChangeLoggingTimestampedKeyValueBytesStore`` do: a timestamped store's value with its own
    timestamp (the first 8 bytes), anything else with the timestamp of the record that made
    the change (under a cache: the record that last wrote the flushed entry), so a versioned
    store restored from this changelog (Kafka's manual upgrade) gets each change as the
    version at that time. The value bytes are the store's either way. A processor that
    forwards a record under a new timestamp does not change the time a downstream store's
    change is stamped with (the input record's), where Kafka's does. A timestamped store's
    records carry a header saying their value is ``timestamp + value``, which a versioned
    store restoring from them drops (``state/changelog_format.py``).
    """

    wrapped: KeyValueStore[bytes, bytes]

    def __init__(self, wrapped: KeyValueStore[bytes, bytes]) -> None:
        super().__init__(wrapped)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        super().init(context, root)
        marked: set[str] | None = getattr(context, "timestamped_changelogs", None)
        if marked is not None and self.values_timestamped:
            # a versioned store restored from this changelog drops the prefix it marks
            marked.add(self._store_name)

    def get(self, key: bytes) -> bytes | None:
        return self.wrapped.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.wrapped.put(key, value)
        self._log(key, value)

    def put_if_absent(self, key: bytes, value: bytes) -> bytes | None:
        old = self.wrapped.put_if_absent(key, value)
        if old is None:
            self._log(key, value)
        return old

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        old = self.wrapped.delete(key)
        self._log(key, None)
        return old

    def range(self, key_from: bytes | None, key_to: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self.wrapped.range(key_from, key_to)

    def reverse_range(self, key_from: bytes | None, key_to: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        return self.wrapped.reverse_range(key_from, key_to)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return self.wrapped.all()

    def reverse_all(self) -> Iterator[tuple[bytes, bytes]]:
        return self.wrapped.reverse_all()

    def prefix_scan(self, prefix: Any, prefix_serde: Serde | None = None) -> Iterator[tuple[bytes, bytes]]:
        return self.wrapped.prefix_scan(prefix, prefix_serde)

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()


class ChangeLoggingWindowStore(_ChangeLogging, DelegatedWindowReads, WindowStore[bytes, bytes]):
    """Logs window puts under their binary window key.

    With ``retain_duplicates`` the seqnum is counted here exactly as the bytes store counts
    it (one step per non-None put), as Kafka Streams does, so both agree on the key.
    """

    wrapped: WindowStore[bytes, bytes]

    def __init__(self, wrapped: WindowStore[bytes, bytes]) -> None:
        super().__init__(wrapped)
        self._seqnum = 0

    def put(self, key: bytes, value: bytes | None, window_start_ms: int) -> None:
        seqnum = 0
        if self.wrapped.retain_duplicates:
            if value is None:
                return
            self._seqnum = seqnum = (self._seqnum + 1) & MAX_SEQNUM
        self.wrapped.put(key, value, window_start_ms)
        self._log(window_key(key, window_start_ms, seqnum), value)


class ChangeLoggingSessionStore(_ChangeLogging, DelegatedSessionReads, SessionStore[bytes, bytes]):
    """Logs session puts and removes under their binary session key."""

    wrapped: SessionStore[bytes, bytes]

    def __init__(self, wrapped: SessionStore[bytes, bytes]) -> None:
        super().__init__(wrapped)

    def put(self, session_key_: Windowed[bytes], aggregate: bytes | None) -> None:
        self.wrapped.put(session_key_, aggregate)
        window = session_key_.window
        self._log(session_key(session_key_.key, window.start_ms, window.end_ms), aggregate)

    def remove(self, session_key_: Windowed[bytes]) -> None:
        self.put(session_key_, None)
