"""KTable operators: build-time specs (``TableOp``), their processors and value getters.

A KTable is a node whose processor forwards :class:`~platform_streams.dsl.internals.change.Change`
objects. What each node does at run time depends on decisions taken *after* it was
added to the topology, exactly as in Kafka Streams: a later ``group_by`` or outer join
asks its parents to send old values (``enable_send_old_values``), a later join asks
for a *value getter* (``view``), which may force a source table to materialize its
store. A :class:`TableOp` holds those flags; its processors read them when a task
creates them, after the topology is complete.

Emission follows Kafka Streams' caching rule: a materialized node only writes its
store, and the store's flush listener forwards the update -- at once when caching is
off, once per key per commit when it is on (see
:class:`~platform_streams.state.timestamped_kv_store.TimestampedKeyValueStore`). An
unmaterialized node forwards directly.
"""

from __future__ import annotations

import logging
import operator
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from platform_streams.dsl.internals.change import Change, ChangeSerde, OutOfOrderChange, change_of
from platform_streams.errors import StreamsError
from platform_streams.processor.node import NodeProcessor
from platform_streams.processor.record import Headers
from platform_streams.state.timestamped import ValueAndTimestamp
from platform_streams.state.timestamped_builders import resolve_serde
from platform_streams.state.versioned_table_store import VersionedTableStore

if TYPE_CHECKING:
    from platform_streams.processor.context import NodeContext
    from platform_streams.serde.base import Serde
    from platform_streams.state.timestamped_builders import TimestampedKeyValueStoreBuilder
    from platform_streams.state.timestamped_kv_store import TimestampedKeyValueStore, ValueGetter
    from platform_streams.topology.topology import StoreBuilderLike

__all__ = [
    "FilterTableOp",
    "GlobalTableUpdateProcessor",
    "MapValuesTableOp",
    "SourceTableOp",
    "StoreTableOp",
    "TableOp",
    "TableProcessor",
    "ValueGetterSupplier",
    "group_by_processor",
]

log = logging.getLogger(__name__)

#: builds a NamedTuple (``Change``) without its Python-level ``__new__``
_new_tuple = tuple.__new__


# ---------------------------------------------------------------------------- value getters


class ValueGetterSupplier(ABC):
    """How a join reads a table's current value by key (Kafka's ``KTableValueGetterSupplier``)."""

    @abstractmethod
    def store_names(self) -> list[str]:
        """Stores the reading processor must be connected to."""

    @abstractmethod
    def getter(self, context: NodeContext) -> ValueGetter:
        """A ``key -> ValueAndTimestamp | None`` function for one task."""

    def is_versioned(self) -> bool:
        """Whether the table keeps versions (Kafka's ``KTableValueGetter.isVersioned``)."""
        return self.history_retention_ms() is not None

    def history_retention_ms(self) -> int | None:
        """A versioned table's history retention (None: not versioned)."""
        return None

    def versioned_getter(self, context: NodeContext) -> VersionedGetter:
        """A ``(key, as_of) -> ValueAndTimestamp | None`` function (versioned tables only)."""
        raise TypeError("this table is not versioned")


#: Looks a versioned table up as of a timestamp.
VersionedGetter = Callable[[Any, int], ValueAndTimestamp | None]


class StoreValueGetterSupplier(ValueGetterSupplier):
    """Reads a materialized table's store (local, or global for a GlobalKTable)."""

    def __init__(self, store: str, history_retention_ms: int | None = None) -> None:
        self.store = store
        self._history_retention_ms = history_retention_ms

    def store_names(self) -> list[str]:
        return [self.store]

    def getter(self, context: NodeContext) -> ValueGetter:
        store: TimestampedKeyValueStore = context.get_state_store(self.store)
        return store.get_timestamped

    def history_retention_ms(self) -> int | None:
        return self._history_retention_ms

    def versioned_getter(self, context: NodeContext) -> VersionedGetter:
        store: VersionedTableStore = context.get_state_store(self.store)
        return store.get_as_of


class _DerivedValueGetterSupplier(ValueGetterSupplier):
    """Applies a table operator on the fly to the parent's value (unmaterialized filter/map)."""

    def __init__(self, parent: ValueGetterSupplier, compute: Callable[[Any, Any], Any]) -> None:
        self.parent = parent
        self.compute = compute

    def store_names(self) -> list[str]:
        return self.parent.store_names()

    def getter(self, context: NodeContext) -> ValueGetter:
        parent = self.parent.getter(context)
        compute = self._derive

        def get(key: Any) -> ValueAndTimestamp | None:
            return compute(key, parent(key))

        return get

    def history_retention_ms(self) -> int | None:
        return self.parent.history_retention_ms()

    def versioned_getter(self, context: NodeContext) -> VersionedGetter:
        parent = self.parent.versioned_getter(context)
        compute = self._derive

        def get(key: Any, as_of: int) -> ValueAndTimestamp | None:
            return compute(key, parent(key, as_of))

        return get

    def _derive(self, key: Any, vat: ValueAndTimestamp | None) -> ValueAndTimestamp | None:
        if vat is None:
            return None
        value = self.compute(key, vat.value)
        return ValueAndTimestamp(value, vat.timestamp) if value is not None else None


# ---------------------------------------------------------------------------- specs


class TableOp(ABC):
    """One KTable node as the topology is built: flags set later by downstream operators."""

    #: the node's own store when materialized (None: forwards directly)
    store_name: str | None = None
    send_old_values: bool = False

    @abstractmethod
    def enable_send_old_values(self, force_materialization: bool) -> bool:
        """Ask the node to forward old values too; False if it cannot without materializing."""

    @abstractmethod
    def view(self) -> ValueGetterSupplier:
        """The value getter of this table (may materialize a source table)."""

    @abstractmethod
    def make_processor(self) -> NodeProcessor:
        """The processor of one task (the ``supplier`` of the topology node)."""


class StoreTableOp(TableOp):
    """A node that always has a store: aggregations, materialized joins."""

    def __init__(self, store_name: str, make: Callable[[StoreTableOp], NodeProcessor]) -> None:
        self.store_name = store_name
        self._make = make

    def enable_send_old_values(self, force_materialization: bool) -> bool:
        self.send_old_values = True
        return True

    def view(self) -> ValueGetterSupplier:
        assert self.store_name is not None
        return StoreValueGetterSupplier(self.store_name)

    def make_processor(self) -> NodeProcessor:
        return self._make(self)


class StoreRecorder(Protocol):
    """Where a lazily materialized source table records its store (the DSL's logical plan)."""

    def add_state_store(self, store_builder: StoreBuilderLike, *processors: str) -> Any: ...


class SourceTableOp(TableOp):
    """``builder.table`` / ``KStream.to_table``: materialized when named or when needed."""

    def __init__(
        self,
        plan: StoreRecorder,
        node_name: str,
        spec: TimestampedKeyValueStoreBuilder,
        *,
        materialized: bool,
    ) -> None:
        self.plan = plan
        self.node_name = node_name
        self.spec = spec
        self.store_name = None
        if materialized:
            self.materialize()

    @property
    def materialized(self) -> bool:
        return self.store_name is not None

    def materialize(self) -> None:
        if self.store_name is None:
            self.plan.add_state_store(self.spec, self.node_name)
            self.store_name = self.spec.name

    def enable_send_old_values(self, force_materialization: bool) -> bool:
        if not self.materialized and not force_materialization:
            return False
        self.materialize()
        self.send_old_values = True
        return True

    def view(self) -> ValueGetterSupplier:
        self.materialize()
        spec = self.spec
        return StoreValueGetterSupplier(
            spec.name, spec.versioned_supplier().history_retention_ms if spec.versioned else None
        )

    def make_processor(self) -> NodeProcessor:
        return TableSourceProcessor(self)


class _DerivedTableOp(TableOp):
    """Shared logic of filter and map_values: optional own store, else derived from the parent."""

    #: Kafka's ``KTableFilter.useVersionedSemantics``: over a versioned parent a filter forwards
    #: a delete even when nothing was there (the versioned history may need it)
    versioned_semantics = False

    def __init__(self, parent: TableOp, store_name: str | None) -> None:
        self.parent = parent
        self.store_name = store_name

    @abstractmethod
    def compute(self, key: Any, value: Any) -> Any:
        """The node's value for a parent value (not None); None means "absent"."""

    def enable_send_old_values(self, force_materialization: bool) -> bool:
        if self.store_name is not None or self.parent.enable_send_old_values(force_materialization):
            self.send_old_values = True
        return self.send_old_values

    def view(self) -> ValueGetterSupplier:
        if self.store_name is not None:
            return StoreValueGetterSupplier(self.store_name)
        return _DerivedValueGetterSupplier(self.parent.view(), self.compute)

    def make_processor(self) -> NodeProcessor:
        return DerivedTableProcessor(self)


class FilterTableOp(_DerivedTableOp):
    """``KTable.filter`` / ``filter_not``: values failing the predicate become deletes."""

    versioned_semantics = True

    def __init__(
        self, parent: TableOp, predicate: Callable[[Any, Any], bool], negate: bool, store: str | None
    ):
        super().__init__(parent, store)
        self.predicate = predicate
        self.negate = negate

    def compute(self, key: Any, value: Any) -> Any:
        return value if bool(self.predicate(key, value)) is not self.negate else None


class MapValuesTableOp(_DerivedTableOp):
    """``KTable.map_values``: a new value per key; the mapper never sees a delete."""

    def __init__(self, parent: TableOp, mapper: Callable[[Any, Any], Any], store: str | None) -> None:
        super().__init__(parent, store)
        self.mapper = mapper

    def compute(self, key: Any, value: Any) -> Any:
        return self.mapper(key, value)


# ---------------------------------------------------------------------------- processors


class TableProcessor(NodeProcessor):
    """A processor whose updates leave through its store's flush listener, or directly."""

    store: TimestampedKeyValueStore | None = None
    _headers: Headers = None
    #: whether the store caches (then updates leave on flush and carry no headers)
    _caching = False

    def bind_store(self, context: NodeContext, name: str | None, send_old_values: bool) -> None:
        """Look up the node's store and route its flushes downstream as ``Change`` records."""
        super().init(context)
        if name is None:
            return
        store: TimestampedKeyValueStore = context.get_state_store(name)
        self.store = store
        forward = self.forward

        def emit(key: Any, new: Any, old: Any, timestamp: int) -> None:
            # ``Change(new, old)`` without the NamedTuple's Python-level ``__new__``: once per update
            forward(key, _new_tuple(Change, (new, old)), timestamp, self._headers)

        store.set_flush_listener(emit, send_old_values)
        if isinstance(store, VersionedTableStore):

            def emit_out_of_order(key: Any, new: Any, old: Any, timestamp: int) -> None:
                forward(key, OutOfOrderChange(new, old), timestamp, self._headers)

            store.set_out_of_order_listener(emit_out_of_order)
        self._caching = store.caching_enabled
        if self._caching:
            self._headers = None
            # updates leave on flush, without headers: the children's fused code takes them
            # in one call (a to_stream reads ``new`` without a Change built)
            fused = context.pair_forward_fn(Change, new_value)
            if fused is not None:
                store.set_flush_listener(fused, send_old_values)

    def put(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        """Write the node's new value; the listener forwards it (now, or on flush)."""
        store = self.store
        assert store is not None
        if not self._caching:
            self._headers = headers
        store.put_timestamped(key, value, timestamp)


class TableSourceProcessor(TableProcessor):
    """Kafka Streams' ``KTableSource``: upsert (None deletes) and forward the change."""

    def __init__(self, op: SourceTableOp) -> None:
        self.op = op

    def init(self, context: NodeContext) -> None:
        self.bind_store(context, self.op.store_name, self.op.send_old_values)

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        if key is None:
            log.warning("skipping table record with a null key (node %s)", self.op.node_name)
            self.context.task.dropped_records += 1  # Kafka's KTableSource records the sensor too
            return
        if self.store is None:
            self.forward(key, Change(value, None), timestamp, headers)
            return
        self.put(key, value, timestamp, headers)


class DerivedTableProcessor(TableProcessor):
    """Kafka Streams' ``KTableFilter`` / ``KTableMapValues`` over incoming changes."""

    def __init__(self, op: _DerivedTableOp) -> None:
        self.op = op

    def init(self, context: NodeContext) -> None:
        self.bind_store(context, self.op.store_name, self.op.send_old_values)
        versioned = self.op.versioned_semantics and self.op.parent.view().is_versioned()
        #: a delete of a row that was not there is dropped (never over a versioned parent)
        self._skip_null = self.op.send_old_values and not versioned

    def process(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        compute = self.op.compute
        new = compute(key, change.new) if change.new is not None else None
        send_old = self.op.send_old_values
        store = self.store
        if store is None:
            old = compute(key, change.old) if send_old and change.old is not None else None
            if self._skip_null and old is None and new is None:
                return  # nothing was there, nothing is there: no need to tell anyone
            self.forward(key, change_of(new, old, change.is_latest), timestamp, headers)
            return
        if self._skip_null and new is None and store.get(key) is None:
            return
        self.put(key, new, timestamp, headers)


class GroupByProcessor(NodeProcessor):
    """Kafka Streams' ``KTableRepartitionMap``: re-key each change for ``KTable.group_by``.

    The old value is taken out of its old group and the new one added to its new group;
    when both land in the same group one record carries both (KIP-904), so the
    aggregation applies them atomically.
    """

    def __init__(self, selector: Callable[[Any, Any], tuple[Any, Any]], value_serde: Serde | None) -> None:
        self.selector = selector
        self.value_serde = value_serde

    def init(self, context: NodeContext) -> None:
        """Changes travel serialized (late serde resolution: the default applies per task)."""
        super().init(context)
        encode = ChangeSerde(resolve_serde(self.value_serde, context.config, "value")).serialize
        forward = self.forward
        self.forward = lambda k, v, ts, h: forward(k, encode(v), ts, h)

    def process(self, key: Any, change: Change, timestamp: int, headers: Headers) -> None:
        if key is None:
            raise StreamsError("record key for the grouping KTable should not be null")
        if not change.is_latest:
            return  # an aggregate of a versioned table counts latest-by-timestamp versions only
        selector = self.selector
        new_pair = selector(key, change.new) if change.new is not None else None
        old_pair = selector(key, change.old) if change.old is not None else None
        new_ok = new_pair is not None and new_pair[0] is not None and new_pair[1] is not None
        old_ok = old_pair is not None and old_pair[0] is not None and old_pair[1] is not None
        if new_ok and old_ok and old_pair[0] == new_pair[0]:  # type: ignore[index]
            self.forward(old_pair[0], Change(new_pair[1], old_pair[1]), timestamp, headers)  # type: ignore[index]
            return
        if old_ok:
            self.forward(old_pair[0], Change(None, old_pair[1]), timestamp, headers)  # type: ignore[index]
        if new_ok:
            self.forward(new_pair[0], Change(new_pair[1], None), timestamp, headers)  # type: ignore[index]


class GlobalTableUpdateProcessor(NodeProcessor):
    """Keeps a global store equal to its topic: upsert, None deletes, null keys skipped."""

    def __init__(self, store: str) -> None:
        self._store_name = store

    def init(self, context: NodeContext) -> None:
        super().init(context)
        self._store: TimestampedKeyValueStore = context.get_state_store(self._store_name)

    def process(self, key: Any, value: Any, timestamp: int, headers: Headers) -> None:
        if key is not None:
            self._store.put_timestamped(key, value, timestamp)


def group_by_processor(
    selector: Callable[[Any, Any], tuple[Any, Any]], value_serde: Serde | None
) -> Callable[[], NodeProcessor]:
    return lambda: GroupByProcessor(selector, value_serde)


#: ``KTable.to_stream``: a table update becomes a record with the new value (None: delete).
#: ``change.new`` as a C-level getter: the op runs once per update, with no Python call.
new_value: Callable[[Change], Any] = operator.attrgetter("new")
