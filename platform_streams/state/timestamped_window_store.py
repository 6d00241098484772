"""The window and session stores of the DSL: late serde resolution, timestamps inside.

The window-store twin of :mod:`platform_streams.state.timestamped_kv_store`:

* a windowed aggregation's store keeps ``ValueAndTimestamp`` per window (the largest
  record timestamp aggregated into it is the timestamp of the results, and sliding
  windows need it to find a window's latest record), while everything outside the DSL
  -- the TopologyTestDriver's ``get_window_store``, interactive queries -- sees plain
  values, as Kafka Streams' ``ReadOnlyWindowStoreFacade`` shows them; processors use the
  ``*_timestamped`` methods;
* their builders are ordinary ``StoreBuilder`` s; serdes nobody gave are the config
  defaults, resolved by the inner stack's metered layer when a task initialises the store
  (the inner stack is built in ``init``, where the config decides about caching);
* join stores (``retain_duplicates``) and session stores keep plain values, as Kafka
  Streams' do (session results are stamped with the session end).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import MethodType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from platform_streams.errors import InvalidStateStoreError
from platform_streams.state.api import (
    NO_KEY_RANGE,
    CachedStateStore,
    FlushListener,
    SessionStore,
    StateStore,
    WindowStore,
)
from platform_streams.state.builders import (
    WINDOWED_CHANGELOG_ADDITIONAL_RETENTION_MS,
    WindowStoreBuilder,
)
from platform_streams.state.stores import SessionBytesStoreSupplier, Stores, WindowBytesStoreSupplier
from platform_streams.state.timestamped import ValueAndTimestamp, value_and_timestamp
from platform_streams.state.timestamped_builders import DslStoreBuilder, SpecStore
from platform_streams.state.windowed import Windowed
from platform_streams.state.wrappers.closed_windows import (
    ClosedWindowReader,
    closed_window_marker,
    closed_window_reader,
)
from platform_streams.state.wrappers.direct_cache_path import (
    WindowAggregateStep,
    bind_direct_path,
    direct_window_aggregate,
    direct_window_cache_path,
    window_step_parts,
)

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.state.store_context import StateStoreContext

__all__ = ["DslSessionStore", "DslSessionStoreBuilder", "DslWindowStore", "DslWindowStoreBuilder"]

SupplierT = TypeVar("SupplierT", WindowBytesStoreSupplier, SessionBytesStoreSupplier)


class _DslWindowedStoreBuilder(DslStoreBuilder[Any, SupplierT]):
    """What the DSL's window and session store builders share (ordinary ``StoreBuilder`` s)."""

    #: the type of store supplier a user may give instead of ``store_type``, and its name in errors
    supplier_type: ClassVar[type]
    kind: ClassVar[str]

    def __init__(self, *, retention_ms: int, **common: Any) -> None:
        """``common``: :class:`DslStoreBuilder`'s arguments, by name."""
        super().__init__(**common)
        self.retention_ms = retention_ms

    def changelog_topic_config(self) -> dict[str, str]:
        """Kafka Streams' windowed changelog: compacted and deleted after retention + 1 day."""
        return {
            "cleanup.policy": "compact,delete",
            "retention.ms": str(self.retention_ms + WINDOWED_CHANGELOG_ADDITIONAL_RETENTION_MS),
            **self._log_config,
        }


class DslWindowStoreBuilder(_DslWindowedStoreBuilder[WindowBytesStoreSupplier]):
    """A DSL window store: a windowed aggregation's (timestamped) or a join side's (duplicates)."""

    supplier_type = WindowBytesStoreSupplier
    kind = "window"

    def __init__(
        self,
        *,
        window_size_ms: int = 1,
        retain_duplicates: bool = False,
        timestamped: bool = True,
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.window_size_ms = window_size_ms
        self.retain_duplicates = retain_duplicates
        self.timestamped = timestamped

    def bytes_supplier(self) -> WindowBytesStoreSupplier:
        if self.store_supplier is not None:
            return self.store_supplier
        factory = (
            Stores.in_memory_window_store
            if self.store_type == "in_memory"
            else Stores.persistent_window_store
        )
        return factory(self.name, self.retention_ms, self.window_size_ms, self.retain_duplicates)

    def build(self) -> DslWindowStore:
        return DslWindowStore(self)


class DslSessionStoreBuilder(_DslWindowedStoreBuilder[SessionBytesStoreSupplier]):
    """A DSL session store (session-windowed aggregations)."""

    supplier_type = SessionBytesStoreSupplier
    kind = "session"

    def __init__(self, *, emit_final: bool = False, **common: Any) -> None:
        super().__init__(**common)
        #: an emit-final aggregation's store: Kafka's built-in suppliers then make the
        #: time-ordered session store (BuiltInDslStoreSuppliers.sessionStore with ON_WINDOW_CLOSE)
        self.emit_final = emit_final

    def bytes_supplier(self) -> SessionBytesStoreSupplier:
        if self.store_supplier is not None:
            return self.store_supplier
        factory = (
            Stores.in_memory_session_store
            if self.store_type == "in_memory"
            else Stores.persistent_session_store
        )
        return factory(self.name, self.retention_ms, time_ordered=self.emit_final)

    def build(self) -> DslSessionStore:
        return DslSessionStore(self)


class _DslStore(SpecStore, CachedStateStore):
    """Identity, lifecycle and flushing shared by both wrappers; ``wrapped`` exists from ``init``."""

    spec: _DslWindowedStoreBuilder[Any]

    def __init__(self, spec: _DslWindowedStoreBuilder[Any]) -> None:
        super().__init__(spec)
        self.key_serde: Serde | None = None

    def _finish_init(self, builder: Any, context: StateStoreContext, root: StateStore) -> None:
        # the metered layer resolves missing serdes from the config when the stack is initialised
        self._build(builder, context, root, logged=self.spec.logging_enabled)
        self.key_serde = self.wrapped.key_serde

    @property
    def caching_enabled(self) -> bool:
        return bool(self._require().caching_enabled)

    def flush_cache(self) -> None:
        self._require().flush_cache()

    def close(self) -> None:
        if self.wrapped is not None:
            self.wrapped.close()

    def _now(self) -> int:
        context = self._context
        if context is None:
            return -1
        now = context.current_stream_time_ms()
        return now if now >= 0 else context.current_system_time_ms()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name!r})"


class DslWindowStore(_DslStore, WindowStore[Any, Any]):
    """A window store whose values may be timestamped inside but are plain outside."""

    spec: DslWindowStoreBuilder

    def __init__(self, spec: DslWindowStoreBuilder) -> None:
        super().__init__(spec)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        spec = self.spec
        builder = WindowStoreBuilder(
            spec.bytes_supplier(), spec.key_serde, spec.value_serde, timestamped=spec.timestamped
        )
        self._finish_init(builder, context, root)
        # the DSL's per-record window reads and writes straight to the record cache, where
        # there is one (state/wrappers/direct_cache_path.py); the methods below are the fallback
        bind_direct_path(
            self,
            DslWindowStore,
            ("fetch_timestamped", "put_timestamped"),
            lambda fetch, put: (
                direct_window_cache_path(self.wrapped, fetch, put) if spec.timestamped else None
            ),
        )

    @property
    def retention_ms(self) -> int:
        return self.spec.retention_ms

    @property
    def window_size_ms(self) -> int:
        return self.spec.window_size_ms

    @property
    def retain_duplicates(self) -> bool:
        return self.spec.retain_duplicates

    def aggregate_step(
        self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any]
    ) -> WindowAggregateStep | None:
        """A windowed aggregation's fetch-aggregate-put of one window in one call, straight on
        the record cache (:func:`~platform_streams.state.wrappers.direct_cache_path.direct_window_aggregate`),
        or None where the stack has no cache; bound to the stack of the latest ``init``."""
        if not self.spec.timestamped or self.wrapped is None:
            return None
        layered_put = MethodType(DslWindowStore.put_timestamped, self)
        return direct_window_aggregate(self.wrapped, initializer, aggregator, layered_put)

    def aggregate_fragment_parts(self) -> dict[str, Any] | None:
        """:meth:`aggregate_step`'s work on a cached window as in-line code needs it (see
        :func:`~platform_streams.state.wrappers.direct_cache_path.window_step_parts`, plus
        ``layered_put``, the store's own put for a None aggregate), or None."""
        if not self.spec.timestamped or self.wrapped is None:
            return None
        parts = window_step_parts(self.wrapped)
        if parts is not None:
            parts["layered_put"] = MethodType(DslWindowStore.put_timestamped, self)
        return parts

    def closed_window_marker(self) -> Callable[[list[bytes]], None] | None:
        """How an emit-final aggregation tells the record cache which windows (their binary
        keys) it emitted, to be evicted first (see
        :func:`~platform_streams.state.wrappers.closed_windows.closed_window_marker`), or
        None where the stack has no such cache; bound to the stack of the latest ``init``."""
        return None if self.wrapped is None else closed_window_marker(self.wrapped)

    def closed_window_reader(self) -> ClosedWindowReader | None:
        """How an emit-final aggregation reads the final values of the windows it closes in
        one call on the record cache (see
        :func:`~platform_streams.state.wrappers.closed_windows.closed_window_reader`), or
        None where the stack has no cache or keeps no timestamps; bound to the stack of the
        latest ``init``."""
        if not self.spec.timestamped or self.wrapped is None:
            return None
        return closed_window_reader(self.wrapped)

    # -- timestamped access (the DSL's processors) ---------------------------------------

    def fetch_timestamped(self, key: Any, window_start_ms: int) -> ValueAndTimestamp | None:
        inner = self.wrapped  # per record of every windowed aggregation: no _require() call
        if inner is None:
            raise InvalidStateStoreError("store is not initialised", store=self.spec.name)
        vat: ValueAndTimestamp | None = inner.fetch_at(key, window_start_ms)
        return vat

    def put_timestamped(self, key: Any, value: Any, timestamp: int, window_start_ms: int) -> None:
        inner = self.wrapped
        if inner is None:
            raise InvalidStateStoreError("store is not initialised", store=self.spec.name)
        inner.put(key, None if value is None else value_and_timestamp(value, timestamp), window_start_ms)

    def fetch_between_timestamped(
        self, key: Any, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[int, ValueAndTimestamp]]:
        items: Iterator[tuple[int, ValueAndTimestamp]] = self._require().fetch_between(
            key, time_from_ms, time_to_ms, backward=backward
        )
        return items

    def set_flush_listener(self, listener: FlushListener, send_old_values: bool = True) -> bool:
        """``listener(windowed key, new, old, timestamp)`` with plain values and the stored timestamps."""
        if not self.spec.timestamped:
            return bool(self._require().set_flush_listener(listener, send_old_values))

        def on_change(
            key: Any, new: ValueAndTimestamp | None, old: ValueAndTimestamp | None, ts: int
        ) -> None:
            listener(
                key,
                new.value if new is not None else None,
                old.value if old is not None else None,
                new.timestamp if new is not None else ts,
            )

        return bool(self._require().set_flush_listener(on_change, send_old_values))

    # -- WindowStore (plain values) --------------------------------------------------------

    def _plain(self, value: Any) -> Any:
        return value.value if self.spec.timestamped and value is not None else value

    def put(self, key: Any, value: Any, window_start_ms: int) -> None:
        if self.spec.timestamped:
            self.put_timestamped(key, value, self._now(), window_start_ms)
        else:
            self._require().put(key, value, window_start_ms)

    def fetch_at(self, key: Any, window_start_ms: int) -> Any:
        return self._plain(self._require().fetch_at(key, window_start_ms))

    def fetch_between(
        self, key: Any, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[int, Any]]:
        items = self._require().fetch_between(key, time_from_ms, time_to_ms, backward=backward)
        plain = self._plain
        return ((start, plain(value)) for start, value in items)

    def _windowed(self, items: Iterator[tuple[Windowed[Any], Any]]) -> Iterator[tuple[Windowed[Any], Any]]:
        plain = self._plain
        return ((windowed, plain(value)) for windowed, value in items)

    def fetch_range(
        self,
        key_from: Any,
        key_to: Any,
        time_from_ms: int,
        time_to_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        inner = self._require()
        return self._windowed(
            inner.fetch_range(key_from, key_to, time_from_ms, time_to_ms, backward=backward)
        )

    def fetch_all(
        self, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        return self._windowed(self._require().fetch_all(time_from_ms, time_to_ms, backward=backward))

    def all(self, *, backward: bool = False) -> Iterator[tuple[Windowed[Any], Any]]:
        return self._windowed(self._require().all(backward=backward))


class DslSessionStore(_DslStore, SessionStore[Any, Any]):
    """A session store with late serde resolution (values are plain, as in Kafka Streams)."""

    spec: DslSessionStoreBuilder

    def __init__(self, spec: DslSessionStoreBuilder) -> None:
        super().__init__(spec)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        builder = Stores.session_store_builder(
            self.spec.bytes_supplier(), self.spec.key_serde, self.spec.value_serde
        )
        self._finish_init(builder, context, root)

    @property
    def retention_ms(self) -> int:
        return self.spec.retention_ms

    def set_flush_listener(self, listener: FlushListener, send_old_values: bool = True) -> bool:
        return bool(self._require().set_flush_listener(listener, send_old_values))

    def put(self, session_key: Windowed[Any], aggregate: Any) -> None:
        self._require().put(session_key, aggregate)

    def remove(self, session_key: Windowed[Any]) -> None:
        self._require().remove(session_key)

    def find_sessions(
        self,
        key: Any,
        earliest_session_end_ms: Any,
        latest_session_start_ms: int,
        range_latest_start_ms: int | None = None,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        """As ``MeteredSessionStore.find_sessions``: three arguments for one key, four for a range."""
        items: Iterator[tuple[Windowed[Any], Any]] = self._require().find_sessions(
            key, earliest_session_end_ms, latest_session_start_ms, range_latest_start_ms, backward=backward
        )
        return items

    def fetch_session(self, key: Any, session_start_ms: int, session_end_ms: int) -> Any:
        return self._require().fetch_session(key, session_start_ms, session_end_ms)

    def fetch(
        self, key: Any, key_to: Any = NO_KEY_RANGE, *, backward: bool = False
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        """Sessions of ``key``, or with ``key_to`` of the keys in ``[key, key_to]``."""
        items: Iterator[tuple[Windowed[Any], Any]] = self._require().fetch(key, key_to, backward=backward)
        return items

    def find_sessions_range(
        self,
        key_from: Any,
        key_to: Any,
        earliest_session_end_ms: int,
        latest_session_start_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[Any], Any]]:
        items: Iterator[tuple[Windowed[Any], Any]] = self._require().find_sessions_range(
            key_from, key_to, earliest_session_end_ms, latest_session_start_ms, backward=backward
        )
        return items
