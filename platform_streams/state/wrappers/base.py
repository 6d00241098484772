"""What the wrapper layers share: delegation of the lifecycle to the store it wraps, the
retention/window properties of the window and session layers, and the caching layers'
set-up and lifecycle (:class:`CachingLayer`; their per-record reads and writes stay in the
layers themselves, which inline the cache access).

A stack is ``metered -> caching -> change-logging -> bytes store``; each layer holds the
next in ``wrapped`` (Kafka Streams' ``WrappedStateStore``), so :func:`innermost` can reach
the bytes store (the state manager asks it whether it started empty).
"""

from __future__ import annotations

from collections.abc import Callable
from inspect import getattr_static
from typing import TYPE_CHECKING, Any, TypeVar, cast

from platform_streams.errors import InvalidStateStoreError
from platform_streams.state.api import FlushListener, SessionStore, StateStore, WindowStore
from platform_streams.state.cache import NamedCache, RecordCache, record_cache_for

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext

_Method = TypeVar("_Method", bound=Callable[..., Any])

__all__ = [
    "CacheReads",
    "CachingLayer",
    "DelegatedRetention",
    "DelegatedWindowShape",
    "WrappedStore",
    "changelog_topic_name",
    "forwarded",
    "innermost",
    "record_timestamp",
]


def changelog_topic_name(application_id: str, store_name: str) -> str:
    """Kafka Streams' changelog topic name: ``<application id>-<store name>-changelog``."""
    return f"{application_id}-{store_name}-changelog"


def record_timestamp(context: StateStoreContext) -> int:
    """The task's stream time (wall clock before any record): the time of a change made
    outside any record (``change_logging.change_time``; a change within one carries the
    record's time)."""
    ts = context.current_stream_time_ms()
    return ts if ts >= 0 else context.current_system_time_ms()


class _Forwarded:
    # A read of the interface answered by the store below (see :func:`forwarded`); no
    # class docstring, so that each instance carries the interface method's own.

    __slots__ = ("__doc__", "name")

    def __init__(self, method: Callable[..., Any]) -> None:
        self.name = method.__name__
        self.__doc__ = method.__doc__

    def __get__(self, layer: Any, owner: type | None = None) -> Any:
        # only reached before ``WrappedStore.__init__`` bound the name, or on the class
        return self if layer is None else getattr(layer.wrapped, self.name)


def forwarded(method: _Method) -> _Method:
    """The interface's ``method``, answered by the same method of the store below.

    The signature is written once, in the interface (:mod:`platform_streams.state.api`),
    and typed from it. :class:`WrappedStore` binds the wrapped store's own method to the
    instance when it is built, so a call through a layer that only forwards has no frame
    of that layer at all (cheaper than a forwarding ``def``). The store below must
    therefore not rebind its methods after it is built (no store does).
    """
    return cast(_Method, _Forwarded(method))


def innermost(store: Any) -> Any:
    """Follow ``wrapped`` down to the bytes store."""
    while isinstance(store, WrappedStore):
        store = store.wrapped
    return store


class WrappedStore(StateStore):
    """Delegates identity and lifecycle to ``wrapped``; subclasses add one concern each."""

    #: names of the :func:`forwarded` reads of this class, bound per instance
    _forwarded: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._forwarded = tuple(name for name in dir(cls) if isinstance(getattr_static(cls, name), _Forwarded))

    def __init__(self, wrapped: Any, *, identity: Any = None) -> None:
        """``identity`` answers ``name`` and ``persistent``: the store below unless given
        (a store built late, :class:`~platform_streams.state.timestamped_builders.SpecStore`,
        passes its spec, as it has no store below until ``init``)."""
        self.wrapped = wrapped
        self._identity = wrapped if identity is None else identity
        for name in self._forwarded:
            setattr(self, name, getattr(wrapped, name))

    @property
    def name(self) -> str:
        name: str = self._identity.name
        return name

    @property
    def persistent(self) -> bool:
        return bool(self._identity.persistent)

    @property
    def is_open(self) -> bool:
        """Open when the store below is (never, before a late-built store has one)."""
        wrapped = self.wrapped
        return wrapped is not None and bool(wrapped.is_open)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self.wrapped.init(context, root)

    def flush(self) -> None:
        self.wrapped.flush()

    def close(self) -> None:
        self.wrapped.close()

    def wipe(self) -> None:
        self.wrapped.wipe()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.wrapped!r})"


class DelegatedRetention:
    """``retention_ms`` of the store below: mixed into the window and session layers."""

    wrapped: Any

    @property
    def retention_ms(self) -> int:
        return self.wrapped.retention_ms


class DelegatedWindowShape(DelegatedRetention):
    """Retention, window size and duplicate retention of the window store below."""

    @property
    def window_size_ms(self) -> int:
        return self.wrapped.window_size_ms

    @property
    def retain_duplicates(self) -> bool:
        return self.wrapped.retain_duplicates


class DelegatedWindowReads(DelegatedWindowShape):
    """Every read of a binary window store, passed to the store below unchanged: a layer
    that only acts on writes (change-logging) mixes this in instead of repeating them."""

    fetch_at = forwarded(WindowStore.fetch_at)
    fetch_between = forwarded(WindowStore.fetch_between)
    fetch_range = forwarded(WindowStore.fetch_range)
    fetch_all = forwarded(WindowStore.fetch_all)
    all = forwarded(WindowStore.all)


class DelegatedSessionReads(DelegatedRetention):
    """Every read of a binary session store, passed to the store below unchanged (see
    :class:`DelegatedWindowReads`)."""

    find_sessions = forwarded(SessionStore.find_sessions)
    find_sessions_range = forwarded(SessionStore.find_sessions_range)
    fetch_session = forwarded(SessionStore.fetch_session)
    fetch = forwarded(SessionStore.fetch)


class CacheReads:
    """Point reads a caching layer served from its cache (hits) or from the store below
    (misses): Kafka Streams' record-cache hit ratio, a DEBUG metric. Written by the thread
    that reads the store, read by metrics scrapes (plain ints, no lock)."""

    __slots__ = ("hits", "misses")

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0


class CachingLayer(WrappedStore):
    """A write-back cache over ``wrapped``: a named cache of the task's record cache and its
    flush listener. ``flush`` pushes the cache down first, ``close`` flushes then frees the
    named cache, ``wipe`` drops it unflushed. Subclasses write flushed entries below."""

    def __init__(self, wrapped: Any) -> None:
        super().__init__(wrapped)
        self._cache: NamedCache | None = None
        self._record_cache: RecordCache | None = None
        self._listener: FlushListener | None = None
        self._send_old_values = False
        #: where point reads count their hits and misses, set by the metrics recorder at
        #: DEBUG; None (INFO) counts nothing, so the per-record read path pays one check
        self.reads: CacheReads | None = None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._context = context
        self.wrapped.init(context, root)
        self._record_cache = record_cache_for(context)
        self._cache_name = f"{context.task_id}-{self.name}"
        self._cache = self._record_cache.named(self._cache_name, self._flush_entries)

    def set_flush_listener(self, listener: FlushListener, send_old_values: bool) -> None:
        self._listener = listener
        self._send_old_values = send_old_values

    def _flush_entries(self, entries: list[tuple[bytes, bytes | None, int]]) -> None:
        """Write entries leaving the cache below, and forward them to the listener."""
        raise NotImplementedError

    def _require(self) -> NamedCache:
        cache = self._cache
        if cache is None:
            raise InvalidStateStoreError("store is not open", store=self.name)
        return cache

    def flush_cache(self) -> None:
        if self._cache is not None:
            self._cache.flush()

    def flush(self) -> None:
        self.flush_cache()
        self.wrapped.flush()

    def close(self) -> None:
        try:
            self.flush_cache()
        finally:
            if self._record_cache is not None:
                self._record_cache.close_named(self._cache_name)
            self._cache = None
            self.wrapped.close()

    def wipe(self) -> None:
        if self._cache is not None:
            self._cache.clear()
        self.wrapped.wipe()
