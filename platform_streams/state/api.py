"""The store interfaces: what processors, the DSL and the runtime may call on a state store.

One set of interfaces serves every layer of the wrapper stack, as in Kafka Streams: the
outermost (metered) store speaks objects, every layer below it speaks ``bytes`` keys and
values (the bytes stores, the change-logging and caching wrappers). The type parameters
say which.

Iterators: every ``Iterator`` returned here may be consumed while the same store is being
written (a processor commonly updates the entries it scans). Bytes stores guarantee this
by iterating a snapshot: RocksDB iterators read an implicit RocksDB snapshot taken when the
scan starts, in-memory stores copy the matching key list when the scan starts (values are
read when reached, entries deleted meanwhile are skipped, as Kafka Streams' in-memory
store does). Iterators need no explicit close; drop them.

Range bounds are inclusive and ``None`` means unbounded, as in Kafka Streams 3.x. Key
order is the order of the serialized key bytes, not of the Python objects.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from platform_streams.state.windowed import Windowed

#: the largest session time (Kafka's ``Long.MAX_VALUE``): ``fetch_range`` looks at all of them
SESSION_MAX_TIME = 0x7FFFFFFFFFFFFFFF

#: ``fetch(key)`` vs ``fetch(key_from, key_to)``: None is a valid (unbounded) range bound
NO_KEY_RANGE: Any = object()

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.state.store_context import StateStoreContext

__all__ = [
    "CachedStateStore",
    "FlushListener",
    "KeyValueStore",
    "SessionStore",
    "StateStore",
    "WindowStore",
]

K = TypeVar("K")
V = TypeVar("V")

#: Called for every change leaving a store's cache (or every put when caching is disabled):
#: ``(key, new_value, old_value, timestamp_ms)``. ``new_value`` None is a delete; ``old_value``
#: is None when the key was absent or when old values were not requested. For window and
#: session stores the key is a :class:`Windowed`.
FlushListener = Callable[[Any, Any, Any, int], None]


class StateStore(ABC):
    """Lifecycle every store layer shares (Kafka Streams' ``StateStore``)."""

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    @abstractmethod
    def persistent(self) -> bool:
        """True if the data survives a restart locally (then it is checkpointed, not re-read)."""

    @property
    @abstractmethod
    def is_open(self) -> bool: ...

    @abstractmethod
    def init(self, context: StateStoreContext, root: StateStore) -> None:
        """Open the store for a task; the innermost store registers ``root`` with ``context``."""

    @abstractmethod
    def flush(self) -> None:
        """Make every accepted write durable in the layer below (cache -> changelog -> disk)."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def wipe(self) -> None:
        """Discard all local data and reopen empty.

        The state manager calls this when local data can't be trusted (no checkpoint under
        exactly-once, a corrupt checkpoint): the store is then rebuilt from its changelog.
        Caches are dropped without being flushed.
        """


class CachedStateStore(ABC):
    """A store that reports the changes it accepts (Kafka Streams' ``CachedStateStore``).

    With caching enabled the listener is called when dirty entries leave the cache (on
    commit or eviction), once per key; with caching disabled it is called on every write.
    The DSL uses it to emit a KTable's updates downstream.
    """

    @abstractmethod
    def set_flush_listener(self, listener: FlushListener, send_old_values: bool = True) -> bool:
        """Install ``listener``; returns True if caching is enabled (updates are deduplicated).

        ``send_old_values`` False spares the read of the previous value when nobody needs it.
        """

    @abstractmethod
    def flush_cache(self) -> None:
        """Push dirty cache entries downstream without making the lower layers durable."""


class KeyValueStore(StateStore, Generic[K, V]):
    """A sorted key-value store (Kafka Streams' ``KeyValueStore``)."""

    @abstractmethod
    def get(self, key: K) -> V | None: ...

    @abstractmethod
    def put(self, key: K, value: V | None) -> None:
        """Insert or replace; ``value`` None deletes the key."""

    @abstractmethod
    def put_if_absent(self, key: K, value: V) -> V | None:
        """Put only if ``key`` has no value; returns the existing value (None if it was absent)."""

    @abstractmethod
    def put_all(self, entries: Iterable[tuple[K, V | None]]) -> None: ...

    @abstractmethod
    def delete(self, key: K) -> V | None:
        """Remove ``key``; returns the value it had (None if absent)."""

    @abstractmethod
    def range(self, key_from: K | None, key_to: K | None) -> Iterator[tuple[K, V]]:
        """Entries with ``key_from <= key <= key_to`` in ascending key order."""

    @abstractmethod
    def reverse_range(self, key_from: K | None, key_to: K | None) -> Iterator[tuple[K, V]]:
        """The same entries as :meth:`range`, in descending key order."""

    @abstractmethod
    def all(self) -> Iterator[tuple[K, V]]: ...

    @abstractmethod
    def reverse_all(self) -> Iterator[tuple[K, V]]: ...

    @abstractmethod
    def prefix_scan(self, prefix: Any, prefix_serde: Serde | None = None) -> Iterator[tuple[K, V]]:
        """Entries whose serialized key starts with the serialized ``prefix``, ascending.

        ``prefix_serde`` serializes the prefix (default: the key serde); bytes stores take
        the prefix bytes directly.
        """

    @abstractmethod
    def approximate_num_entries(self) -> int: ...


class WindowStore(StateStore, Generic[K, V]):
    """Values per (key, window start); windows at or before ``stream time - retention`` vanish.

    Stream time here is the store's own: the largest window start ever put (or restored),
    exactly as Kafka Streams' window stores track it.
    """

    @property
    @abstractmethod
    def retention_ms(self) -> int: ...

    @property
    @abstractmethod
    def window_size_ms(self) -> int: ...

    @property
    @abstractmethod
    def retain_duplicates(self) -> bool: ...

    @abstractmethod
    def put(self, key: K, value: V | None, window_start_ms: int) -> None:
        """Store ``value`` for the window; None deletes it (ignored when retaining duplicates)."""

    @abstractmethod
    def fetch_at(self, key: K, window_start_ms: int) -> V | None:
        """The value of one window (the first one when duplicates are retained)."""

    @abstractmethod
    def fetch_between(
        self, key: K, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[int, V]]:
        """``(window_start, value)`` of ``key`` with ``time_from <= start <= time_to``, by start."""

    @abstractmethod
    def fetch_range(
        self,
        key_from: K | None,
        key_to: K | None,
        time_from_ms: int,
        time_to_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[K], V]]:
        """Windows of keys in ``[key_from, key_to]`` starting in ``[time_from, time_to]``.

        Ordered by time segment, then key, then start (see :meth:`fetch_all`).
        """

    @abstractmethod
    def fetch_all(
        self, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[Windowed[K], V]]:
        """Every window starting in ``[time_from, time_to]``.

        Ordered as Kafka Streams orders it: by time segment, then key, then start (not
        strictly by start time across keys).
        """

    @abstractmethod
    def all(self, *, backward: bool = False) -> Iterator[tuple[Windowed[K], V]]:
        """Every live window (same order as :meth:`fetch_all`)."""

    @overload
    def fetch(self, key: K, time_from_ms: int) -> V | None: ...

    @overload
    def fetch(self, key: K, time_from_ms: int, time_to_ms: int) -> Iterator[tuple[int, V]]: ...

    def fetch(
        self, key: K, time_from_ms: int, time_to_ms: int | None = None
    ) -> V | Iterator[tuple[int, V]] | None:
        """``fetch(key, start)`` -> one window's value; ``fetch(key, from, to)`` -> an iterator."""
        if time_to_ms is None:
            return self.fetch_at(key, time_from_ms)
        return self.fetch_between(key, time_from_ms, time_to_ms)

    def backward_fetch(self, key: K, time_from_ms: int, time_to_ms: int) -> Iterator[tuple[int, V]]:
        return self.fetch_between(key, time_from_ms, time_to_ms, backward=True)

    def backward_fetch_range(
        self, key_from: K | None, key_to: K | None, time_from_ms: int, time_to_ms: int
    ) -> Iterator[tuple[Windowed[K], V]]:
        return self.fetch_range(key_from, key_to, time_from_ms, time_to_ms, backward=True)

    def backward_fetch_all(self, time_from_ms: int, time_to_ms: int) -> Iterator[tuple[Windowed[K], V]]:
        return self.fetch_all(time_from_ms, time_to_ms, backward=True)

    def backward_all(self) -> Iterator[tuple[Windowed[K], V]]:
        return self.all(backward=True)


class SessionStore(StateStore, Generic[K, V]):
    """Aggregates per session window; sessions ending at or before ``stream time - retention`` vanish.

    Stream time is the store's own: the largest session end ever put (or restored).
    """

    @property
    @abstractmethod
    def retention_ms(self) -> int: ...

    @abstractmethod
    def put(self, session_key: Windowed[K], aggregate: V | None) -> None:
        """Store the session's aggregate; None removes the session."""

    @abstractmethod
    def remove(self, session_key: Windowed[K]) -> None: ...

    @abstractmethod
    def find_sessions(
        self,
        key: K,
        earliest_session_end_ms: int,
        latest_session_start_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[K], V]]:
        """Sessions of ``key`` with ``end >= earliest_end`` and ``start <= latest_start``.

        These are the sessions a record at time t may merge with, given
        ``earliest_end = t - gap`` and ``latest_start = t + gap``. Ordered by end, then start.
        """

    @abstractmethod
    def fetch_session(self, key: K, session_start_ms: int, session_end_ms: int) -> V | None: ...

    @abstractmethod
    def fetch(self, key: K, *, backward: bool = False) -> Iterator[tuple[Windowed[K], V]]:
        """Every live session of ``key``."""

    def backward_find_sessions(
        self, key: K, earliest_session_end_ms: int, latest_session_start_ms: int
    ) -> Iterator[tuple[Windowed[K], V]]:
        return self.find_sessions(key, earliest_session_end_ms, latest_session_start_ms, backward=True)

    def find_sessions_range(
        self,
        key_from: K | None,
        key_to: K | None,
        earliest_session_end_ms: int,
        latest_session_start_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[K], V]]:
        """Sessions of keys in ``[key_from, key_to]`` (None: unbounded) with ``end >= earliest_end``
        and ``start <= latest_start`` (Kafka's ``findSessions(keyFrom, keyTo, ...)``), ordered by
        end, then key, then start; empty (with a warning) if ``key_from > key_to``."""
        raise NotImplementedError(f"{type(self).__name__} has no key-range session fetch")

    def fetch_range(
        self, key_from: K | None, key_to: K | None, *, backward: bool = False
    ) -> Iterator[tuple[Windowed[K], V]]:
        """Every live session of the keys in ``[key_from, key_to]`` (Kafka's ``fetch(keyFrom, keyTo)``)."""
        return self.find_sessions_range(key_from, key_to, 0, SESSION_MAX_TIME, backward=backward)

    def backward_fetch_range(self, key_from: K | None, key_to: K | None) -> Iterator[tuple[Windowed[K], V]]:
        return self.fetch_range(key_from, key_to, backward=True)

    def backward_find_sessions_range(
        self, key_from: K | None, key_to: K | None, earliest_session_end_ms: int, latest_session_start_ms: int
    ) -> Iterator[tuple[Windowed[K], V]]:
        return self.find_sessions_range(
            key_from, key_to, earliest_session_end_ms, latest_session_start_ms, backward=True
        )

    def backward_fetch(self, key: K) -> Iterator[tuple[Windowed[K], V]]:
        return self.fetch(key, backward=True)
