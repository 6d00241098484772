"""The store behind a KTable: plain values outside, ``ValueAndTimestamp`` inside.

Kafka Streams' DSL stores are *timestamped* key-value stores: next to each value they
keep the timestamp of the record that produced it, because that timestamp is the
timestamp of the table's output records (an aggregate carries the largest timestamp
aggregated into it, a table-table join result the larger of both sides'). This module
is that store: a thin layer over an ordinary metered key-value stack whose value serde
is :class:`~platform_streams.state.timestamped.ValueAndTimestampSerde` (stored bytes:
``timestamp (8, big-endian) + value``).

Two more things happen here because they can only happen at task start-up:

* the inner stack (``Stores.timestamped_key_value_store_builder``) is built in
  :meth:`init`, where the task's config decides whether it keeps its caching layer
  (``statestore_cache_max_bytes=0`` strips it); serdes nobody gave are resolved by its
  metered layer from the config's defaults, as for any store.
* a source KTable whose *source topic is its changelog* (``topology_optimization="all"``)
  writes no changelog and restores from the source topic, whose values carry no stored
  timestamp: restored values get timestamp -1 ("unknown"), which loses to any real one.

Everything a processor or an interactive query sees (``get``, ``all``, ``range``, ...)
speaks plain values, as Kafka Streams' ``KeyValueStoreFacade`` does for the
TopologyTestDriver; the DSL's processors use :meth:`get_timestamped` /
:meth:`put_timestamped` (with a record cache, straight to it: :meth:`_bind_direct_path`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from types import MethodType
from typing import TYPE_CHECKING, Any

from platform_streams.errors import InvalidStateStoreError
from platform_streams.processor.node import FusedFragment
from platform_streams.state.api import CachedStateStore, FlushListener, KeyValueStore, StateStore
from platform_streams.state.stores import Stores
from platform_streams.state.timestamped import ValueAndTimestamp, value_and_timestamp
from platform_streams.state.timestamped_builders import SpecStore
from platform_streams.state.ttl import StoreTtl
from platform_streams.state.wrappers.aggregate_fragment import aggregate_fragment
from platform_streams.state.wrappers.change_logging import ChangelogRegisteringContext
from platform_streams.state.wrappers.direct_cache_path import (
    AggregateStep,
    bind_direct_path,
    direct_aggregate,
    direct_cache_path,
)
from platform_streams.state.wrappers.direct_flush_path import direct_flush

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.state.store_context import RestoreCallback, StateStoreContext
    from platform_streams.state.timestamped_builders import TimestampedKeyValueStoreBuilder

__all__ = ["TimestampedKeyValueStore"]

#: Timestamp of values restored from a source topic used as changelog: unknown.
UNKNOWN_TIMESTAMP = -1
_UNKNOWN_PREFIX = UNKNOWN_TIMESTAMP.to_bytes(8, "big", signed=True)


class _SourceTopicChangelogContext(ChangelogRegisteringContext):
    """Registers the store with its source topic as changelog and converts restored values."""

    def register(self, store: Any, restore_callback: RestoreCallback, changelog_topic: str | None) -> None:
        def restore(batch: list[tuple[bytes, bytes | None]]) -> None:
            restore_callback([(k, None if v is None else _UNKNOWN_PREFIX + v) for k, v in batch])

        self._delegate.register(store, restore, self.changelog_topic)


class TimestampedKeyValueStore(SpecStore, KeyValueStore[Any, Any], CachedStateStore):
    """A KTable's key-value store; ``wrapped`` (the metered stack) exists from ``init`` on."""

    spec: TimestampedKeyValueStoreBuilder

    def __init__(self, spec: TimestampedKeyValueStoreBuilder) -> None:
        super().__init__(spec)
        self._key_serde: Serde | None = None
        self._caching = False
        self._listener: FlushListener | None = None
        #: serialized key -> timestamp of a delete not yet reported to the flush listener
        self._delete_ts: dict[bytes, int] = {}
        #: state TTL (``Materialized.with_ttl``): every read below checks it, a sweep deletes
        self._ttl = (
            None
            if spec.ttl_ms is None
            else StoreTtl(spec.name, spec.ttl_ms, spec.ttl_sweep_interval_ms or spec.ttl_ms)
        )

    # ------------------------------------------------------------------ identity & lifecycle

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        spec = self.spec
        builder = Stores.timestamped_key_value_store_builder(
            spec.bytes_supplier(), spec.key_serde, spec.value_serde
        )
        reuse = spec.source_changelog_topic
        inner_context = context if reuse is None else _SourceTopicChangelogContext(context, reuse)
        # the metered layer resolves missing serdes from the config when the stack is initialised
        self._build(
            builder, context, root, logged=spec.logging_enabled and reuse is None, init_context=inner_context
        )
        self._key_serde = self.wrapped.key_serde
        self._caching = bool(self.wrapped.caching_enabled)
        self._bind_direct_path()
        if self._ttl is not None:
            self._ttl.start(context, self._sweep)

    def _bind_direct_path(self) -> None:
        """Point reads and writes of the DSL straight to the record cache where the stack has one
        (:mod:`~platform_streams.state.wrappers.direct_cache_path`): instance attributes over the
        layered methods below, which stay the fallback."""
        bind_direct_path(
            self,
            TimestampedKeyValueStore,
            ("get_timestamped", "put_timestamped"),
            # a TTL store keeps the layered calls: they check expiry (state/ttl.py)
            lambda get, put: None if self._ttl is not None else direct_cache_path(self.wrapped, get, put),
        )

    def aggregate_step(
        self, first: Callable[[Any, Any], Any], aggregator: Callable[[Any, Any, Any], Any]
    ) -> AggregateStep | None:
        """A stream aggregation's read-compute-write of one record in one call, straight on the
        record cache (:func:`~platform_streams.state.wrappers.direct_cache_path.direct_aggregate`),
        or None where the stack has no cache; bound to the stack of the latest ``init``."""
        if self._ttl is not None:
            return None  # its reads check expiry in the layered path (state/ttl.py)
        layered_put = MethodType(TimestampedKeyValueStore.put_timestamped, self)
        return direct_aggregate(self._require(), first, aggregator, layered_put)

    def aggregate_fragment(
        self, first: Callable[[Any, Any], Any], aggregator: Callable[[Any, Any, Any], Any]
    ) -> FusedFragment | None:
        """:meth:`aggregate_step`'s work on a key cached decoded or new, as source text the
        fused source runs in line (:mod:`~platform_streams.state.wrappers.aggregate_fragment`),
        or None; bound to the stack of the latest ``init``, like the step."""
        if self._ttl is not None:
            return None  # as the step: a TTL store's reads check expiry in the layered path
        return aggregate_fragment(self._require(), first, aggregator, self.put_timestamped)

    def flush(self) -> None:
        self._require().flush()
        self._delete_ts.clear()

    def flush_cache(self) -> None:
        self._require().flush_cache()

    def close(self) -> None:
        if self._ttl is not None:
            self._ttl.stop()
        if self.wrapped is not None:
            self.wrapped.close()

    def wipe(self) -> None:
        self._delete_ts.clear()
        self._require().wipe()

    @property
    def caching_enabled(self) -> bool:
        return self._caching

    # ------------------------------------------------------------------ emission

    def set_flush_listener(self, listener: FlushListener, send_old_values: bool = True) -> bool:
        """``listener(key, new, old, timestamp)`` with plain values and the record timestamps.

        With caching it fires when the cache flushes (once per key per commit), without
        it on every write; returns whether caching is on. A delete is reported with the
        timestamp of the record that deleted.
        """
        delete_ts = self._delete_ts
        serialize_key = self._require_key_serde().serialize

        def on_change(
            key: Any, new: ValueAndTimestamp | None, old: ValueAndTimestamp | None, ts: int
        ) -> None:
            if new is not None:
                listener(key, new.value, old.value if old is not None else None, new.timestamp)
                return
            ts = delete_ts.pop(serialize_key(key) or b"", ts)
            listener(key, None, old.value if old is not None else None, ts)

        self._listener = listener
        metered = self._require()
        self._caching = bool(metered.set_flush_listener(on_change, send_old_values))
        flush = direct_flush(metered, listener, send_old_values) if self._caching else None
        if flush is not None:  # only built over a CachingKeyValueStore (direct_flush checks)
            metered.wrapped.direct_flush = flush
        return self._caching

    def _require_key_serde(self) -> Serde:
        if self._key_serde is None:
            raise InvalidStateStoreError("store is not initialised", store=self.spec.name)
        return self._key_serde

    # ------------------------------------------------------------------ timestamped access (DSL)

    def get_timestamped(self, key: Any) -> ValueAndTimestamp | None:
        """The value and the timestamp of the record that wrote it."""
        inner = self.wrapped  # per record of every aggregation: no _require() call
        if inner is None:
            raise InvalidStateStoreError("store is not initialised", store=self.spec.name)
        vat: ValueAndTimestamp | None = inner.get(key)
        ttl = self._ttl
        return vat if ttl is None else ttl.live(vat)

    def put_timestamped(self, key: Any, value: Any, timestamp: int) -> None:
        """Write ``value`` (None deletes) stamped with ``timestamp``."""
        inner = self.wrapped
        if inner is None:
            raise InvalidStateStoreError("store is not initialised", store=self.spec.name)
        if value is not None:
            inner.put(key, value_and_timestamp(value, timestamp))
            return
        listener = self._listener
        if listener is None:
            inner.put(key, None)
            return
        if not self._caching and inner.get(key) is None:
            # Kafka Streams forwards an uncached delete even when the key was absent.
            inner.put(key, None)
            listener(key, None, None, timestamp)
            return
        self._delete_ts[self._require_key_serde().serialize(key) or b""] = timestamp
        inner.put(key, None)

    # ------------------------------------------------------------------ KeyValueStore (plain values)

    def _now(self) -> int:
        context = self._context
        if context is None:
            return UNKNOWN_TIMESTAMP
        now = context.current_stream_time_ms()
        return now if now >= 0 else context.current_system_time_ms()

    def get(self, key: Any) -> Any:
        vat = self._live(self._require().get(key))
        return vat.value if vat is not None else None

    def put(self, key: Any, value: Any) -> None:
        self.put_timestamped(key, value, self._now())

    def put_if_absent(self, key: Any, value: Any) -> Any:
        old = self.get(key)
        if old is None:
            self.put(key, value)
        return old

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: Any) -> Any:
        old = self.get(key)
        self.put_timestamped(key, None, self._now())
        return old

    def range(self, key_from: Any, key_to: Any) -> Iterator[tuple[Any, Any]]:
        return _plain(self._live_items(self._require().range(key_from, key_to)))

    def reverse_range(self, key_from: Any, key_to: Any) -> Iterator[tuple[Any, Any]]:
        return _plain(self._live_items(self._require().reverse_range(key_from, key_to)))

    def all(self) -> Iterator[tuple[Any, Any]]:
        return _plain(self._live_items(self._require().all()))

    def reverse_all(self) -> Iterator[tuple[Any, Any]]:
        return _plain(self._live_items(self._require().reverse_all()))

    def prefix_scan(self, prefix: Any, prefix_serde: Serde | None = None) -> Iterator[tuple[Any, Any]]:
        return _plain(self._live_items(self._require().prefix_scan(prefix, prefix_serde)))

    def approximate_num_entries(self) -> int:
        return int(self._require().approximate_num_entries())

    def all_timestamped(self) -> Iterator[tuple[Any, ValueAndTimestamp]]:
        """Every entry with its timestamp (Kafka's ``TimestampedKeyValueStore.all()``)."""
        items: Iterator[tuple[Any, ValueAndTimestamp]] = self._require().all()
        return self._live_items(items)

    # ------------------------------------------------------------------ state TTL (state/ttl.py)

    def _live(self, vat: ValueAndTimestamp | None) -> ValueAndTimestamp | None:
        ttl = self._ttl
        return vat if ttl is None else ttl.live(vat)

    def _live_items(
        self, items: Iterator[tuple[Any, ValueAndTimestamp]]
    ) -> Iterator[tuple[Any, ValueAndTimestamp]]:
        ttl = self._ttl
        return items if ttl is None else ttl.live_items(items)

    def _sweep(self, stream_time: int) -> None:
        """Delete the entries expired at ``stream_time`` as any delete of the table: a changelog
        tombstone and a tombstone downstream, stamped with the stream time."""
        assert self._ttl is not None
        for key in self._ttl.expired_keys(self._require().all(), stream_time):
            self.put_timestamped(key, None, stream_time)

    def __repr__(self) -> str:
        return f"TimestampedKeyValueStore({self.spec.name!r})"


def _plain(items: Iterator[tuple[Any, ValueAndTimestamp]]) -> Iterator[tuple[Any, Any]]:
    for key, vat in items:
        yield key, vat.value


#: A function looking up a table's current value and timestamp by key (a "value getter").
ValueGetter = Callable[[Any], ValueAndTimestamp | None]
