"""``KTable`` and ``GlobalKTable``: changelog streams interpreted as tables.

A KTable holds the latest value per key; a record with a None value deletes the key.
Its node forwards :class:`~platform_streams.dsl.internals.change.Change` pairs (new, old) to the
table operators below it; :meth:`KTable.to_stream` turns the updates back into records
(a delete becomes a record with a None value).

Node and store names follow Kafka Streams' (``KTABLE-SOURCE-``, ``KTABLE-FILTER-``,
``<topic>-STATE-STORE-``, ...), including *when* indices are drawn, so ``describe()``
of a topology matches its Java twin.

Source tables are materialized only when needed (a store name was given, a join reads
them, a downstream ``group_by`` needs old values). Under ``topology_optimization="all"``
(``StreamsBuilder(config)`` or ``builder.build(config)``, as Kafka Streams'
``builder.build(props)``) a materialized source table reuses its source topic as its
changelog instead of writing a ``-changelog`` topic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.table_processors import (
    FilterTableOp,
    GlobalTableUpdateProcessor,
    MapValuesTableOp,
    SourceTableOp,
    StoreTableOp,
    StoreValueGetterSupplier,
    TableOp,
    ValueGetterSupplier,
    group_by_processor,
    new_value,
)
from platform_streams.dsl.kstream import KStream
from platform_streams.dsl.materialize import generated_store_name, is_queryable, key_value_spec, store_name
from platform_streams.dsl.naming import takes_key
from platform_streams.dsl.options import Consumed, Grouped, Materialized, Named, by_type, name_of
from platform_streams.errors import TopologyError
from platform_streams.processor.node import NodeProcessor
from platform_streams.serde import Serde
from platform_streams.state.timestamped_builders import TimestampedKeyValueStoreBuilder
from platform_streams.topology.nodes import StatelessOp

if TYPE_CHECKING:
    from platform_streams.dsl.builder import StreamsBuilder
    from platform_streams.dsl.grouped_table import KGroupedTable
    from platform_streams.dsl.suppress import Suppressed

__all__ = [
    "GlobalKTable",
    "KTable",
    "aggregate_table",
    "source_global_table",
    "source_table",
]


class KTable:
    """A changelog stream as a table (Kafka Streams' ``KTable``)."""

    def __init__(
        self,
        builder: StreamsBuilder,
        node_name: str,
        op: TableOp,
        *,
        key_serde: Serde | None,
        value_serde: Serde | None,
        source_topics: frozenset[str],
        queryable: bool = False,
    ) -> None:
        self._builder = builder
        self.node_name = node_name
        self._op = op
        #: the user named this table's store (``Materialized.as_`` or a supplier)
        self._queryable = queryable
        self.key_serde = key_serde
        self.value_serde = value_serde
        #: topics whose partitions this table's records come from (co-partitioning checks)
        self.source_topics = source_topics

    @property
    def builder(self) -> StreamsBuilder:
        return self._builder

    def queryable_store_name(self) -> str | None:
        """The store to query this table by (Kafka's ``queryableStoreName()``): only a store the
        user named; None for generated ones (an unnamed aggregation, a table a join materialized)."""
        return self._op.store_name if self._queryable else None

    # -- table operators -----------------------------------------------------------------

    def filter(
        self,
        predicate: Callable[[Any, Any], bool],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Keep rows for which ``predicate(key, value)`` holds; others become deletes."""
        return self._filter(predicate, False, named, materialized)

    def filter_not(
        self,
        predicate: Callable[[Any, Any], bool],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Drop rows for which ``predicate(key, value)`` holds (they become deletes)."""
        return self._filter(predicate, True, named, materialized)

    def map_values(
        self,
        mapper: Callable[..., Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """New value from ``mapper(value)`` or ``mapper(key, value)``; deletes stay deletes."""
        fn: Callable[[Any, Any], Any] = mapper if takes_key(mapper) else (lambda key, value: mapper(value))
        name, store, key_serde, value_serde = self._derived("KTABLE-MAPVALUES-", named, materialized, False)
        return self._add_derived(
            name, MapValuesTableOp(self._op, fn, store.name if store else None), store, key_serde, value_serde
        )

    def to_stream(
        self, mapper: Callable[[Any, Any], Any] | Named | str | None = None, named: Named | str | None = None
    ) -> KStream:
        """The table's update stream: one record per update (a delete has a None value).

        ``mapper(key, value)`` optionally selects a new key (``toStream(KeyValueMapper)``).
        """
        if isinstance(mapper, Named | str):
            mapper, named = None, mapper
        name = self._builder.names.name("KTABLE-TOSTREAM-", name_of(named))
        self._builder.plan.add_stateless(name, StatelessOp("map_values", (new_value,)), self.node_name)
        stream = KStream(
            self._builder,
            name,
            key_serde=self.key_serde,
            value_serde=self.value_serde,
            source_topics=self.source_topics,
        )
        return stream.select_key(mapper) if mapper is not None else stream

    def suppress(self, suppressed: Suppressed) -> KTable:
        """Hold updates back: final results per window, or a time limit per key.

        Implemented by :mod:`platform_streams.dsl.table_suppress`.
        """
        from platform_streams.dsl.table_suppress import suppress_table

        return suppress_table(self, suppressed)

    def group_by(
        self, selector: Callable[[Any, Any], tuple[Any, Any]], grouped: Grouped | None = None
    ) -> KGroupedTable:
        """Re-group by ``selector(key, value) -> (new_key, new_value)`` for ``count/reduce/aggregate``.

        The result always goes through a repartition topic; an update moving a row to
        another group subtracts it from the old group and adds it to the new one.
        """
        from platform_streams.dsl.grouped_table import KGroupedTable

        grouped = grouped or Grouped()
        builder = self._builder
        name = builder.names.name("KTABLE-SELECT-", grouped.name)
        builder.plan.add_processor(name, group_by_processor(selector, grouped.value_serde), self.node_name)
        self._op.enable_send_old_values(True)
        return KGroupedTable(
            builder,
            name,
            key_serde=grouped.key_serde,
            value_serde=grouped.value_serde,
            repartition_name=grouped.name,
        )

    # -- joins ---------------------------------------------------------------------------

    def join(
        self,
        other: KTable,
        joiner: Callable[..., Any],
        *options: Any,
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Inner join: a result while both sides have a value.

        ``join(other, joiner[, named][, materialized])`` joins on the key;
        ``join(other, foreign_key_extractor, joiner[, TableJoined][, Materialized])`` is the
        foreign-key join (KIP-213, :mod:`platform_streams.dsl.foreign_key_join`).
        """
        return self._join(other, joiner, options, named, materialized, "inner")

    def left_join(
        self,
        other: KTable,
        joiner: Callable[..., Any],
        *options: Any,
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Left join: a result while this side has a value (``joiner(value, None)`` if the other has none).

        As :meth:`join`, with a foreign-key form ``left_join(other, foreign_key_extractor, joiner, ...)``.
        """
        return self._join(other, joiner, options, named, materialized, "left")

    def outer_join(
        self,
        other: KTable,
        joiner: Callable[..., Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Outer join: a result while either side has a value."""
        return self._join(other, joiner, (named, materialized), None, None, "outer")

    def _join(
        self,
        other: KTable,
        joiner: Callable[..., Any],
        options: tuple[Any, ...],
        named: Named | str | None,
        materialized: Materialized | None,
        kind: str,
    ) -> KTable:
        if options and callable(options[0]) and kind != "outer":
            from platform_streams.dsl.foreign_key_join import foreign_key_join, foreign_key_join_options

            table_joined, fk_materialized = foreign_key_join_options(
                f"{kind} join", (*options[1:], materialized, named)
            )
            return foreign_key_join(
                self, other, joiner, options[0], table_joined, fk_materialized, left=kind == "left"
            )
        from platform_streams.dsl.joins import table_table_join

        given_options = [o for o in (*options, named, materialized) if o is not None]
        if len(given_options) > 2:
            raise TypeError(f"{kind} join: at most a Named and a Materialized after the joiner: {options!r}")
        given, materialized = by_type(f"{kind} join", *[*given_options, None, None][:2])
        return table_table_join(self, other, joiner, given, materialized, kind)

    # -- internals -----------------------------------------------------------------------

    def value_getter_supplier(self) -> ValueGetterSupplier:
        """How a join reads this table (materializes a source table if needed)."""
        return self._op.view()

    def enable_send_old_values(self, force_materialization: bool = True) -> bool:
        return self._op.enable_send_old_values(force_materialization)

    def _filter(
        self,
        predicate: Callable[[Any, Any], bool],
        negate: bool,
        named: Named | str | None,
        materialized: Materialized | None,
    ) -> KTable:
        name, store, key_serde, value_serde = self._derived("KTABLE-FILTER-", named, materialized, True)
        return self._add_derived(
            name,
            FilterTableOp(self._op, predicate, negate, store.name if store else None),
            store,
            key_serde,
            value_serde,
        )

    def _derived(
        self, prefix: str, named: Named | str | None, materialized: Materialized | None, keeps_value: bool
    ) -> tuple[str, TimestampedKeyValueStoreBuilder | None, Serde | None, Serde | None]:
        """Name, optional store and serdes of a filter/map_values node, in Kafka's naming order.

        The processor name comes first; an unnamed ``Materialized`` still burns a store index
        (and the node is then not materialized), as in Kafka Streams.
        """
        named, materialized = by_type(prefix.lower().rstrip("-"), named, materialized)
        builder = self._builder
        name = builder.names.name(prefix, name_of(named))
        inherited_value = self.value_serde if keeps_value else None
        if materialized is None:
            return name, None, self.key_serde, inherited_value
        key_serde = materialized.key_serde or self.key_serde
        value_serde = materialized.value_serde or inherited_value
        if not is_queryable(materialized):
            generated_store_name(builder, materialized, prefix)
            return name, None, key_serde, value_serde
        spec = key_value_spec(
            builder,
            store_name(builder, materialized, prefix),
            materialized,
            key_serde=key_serde,
            value_serde=value_serde,
        )
        return name, spec, key_serde, value_serde

    def _add_derived(
        self,
        name: str,
        op: TableOp,
        spec: TimestampedKeyValueStoreBuilder | None,
        key_serde: Serde | None,
        value_serde: Serde | None,
    ) -> KTable:
        topology = self._builder.plan
        topology.add_processor(name, op.make_processor, self.node_name)
        if spec is not None:
            topology.add_state_store(spec, name)
        return KTable(
            self._builder,
            name,
            op,
            key_serde=key_serde,
            value_serde=value_serde,
            source_topics=self.source_topics,
            queryable=spec is not None,
        )


class GlobalKTable:
    """A table replicated in full on every instance (Kafka Streams' ``GlobalKTable``).

    It has no partitions of its own to co-partition with: streams join it through a key
    selector (``stream.join(global_table, key_selector, joiner)``).
    """

    def __init__(
        self,
        builder: StreamsBuilder,
        store: str,
        topic: str,
        key_serde: Serde | None,
        value_serde: Serde | None,
    ) -> None:
        self._builder = builder
        self.store_name = store
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde

    def queryable_store_name(self) -> str:
        return self.store_name

    def value_getter_supplier(self) -> ValueGetterSupplier:
        return StoreValueGetterSupplier(self.store_name)


# ---------------------------------------------------------------------------- builders


def _source_serdes(
    consumed: Consumed, materialized: Materialized | None
) -> tuple[Serde | None, Serde | None]:
    mat = materialized or Materialized()
    return consumed.key_serde or mat.key_serde, consumed.value_serde or mat.value_serde


def source_table(
    builder: StreamsBuilder, topic: str, consumed: Consumed, materialized: Materialized | None
) -> KTable:
    """``builder.table(topic)``: source node + ``KTABLE-SOURCE`` node (+ store when materialized)."""
    key_serde, value_serde = _source_serdes(consumed, materialized)
    store = store_name(builder, materialized, f"{topic}-")
    # Kafka's InternalStreamsBuilder.table: a named table's source is "<name>-source", its table
    # node "<name>"
    source_name = builder.names.suffixed(consumed.name, "-source", "KSTREAM-SOURCE-")
    table_name = builder.names.name("KTABLE-SOURCE-", consumed.name)
    builder.plan.add_source(
        source_name,
        topic,
        key_serde=key_serde,
        value_serde=value_serde,
        timestamp_extractor=consumed.timestamp_extractor,
        offset_reset=consumed.offset_reset,
    )
    op = _add_source_table_op(builder, table_name, source_name, store, materialized, key_serde, value_serde)
    builder.plan.source_tables.append((op, topic))
    return KTable(
        builder,
        table_name,
        op,
        key_serde=key_serde,
        value_serde=value_serde,
        source_topics=frozenset({topic}),
        queryable=is_queryable(materialized),
    )


def stream_to_table(stream: KStream, named: str | None, materialized: Materialized | None) -> KTable:
    """``KStream.to_table``: the stream as a changelog (repartitioned first if the key changed)."""
    builder = stream.builder
    name = builder.names.name("KSTREAM-TOTABLE-", named)
    store = store_name(builder, materialized, "KSTREAM-TOTABLE-")
    mat = materialized or Materialized()
    key_serde = mat.key_serde or stream.key_serde
    value_serde = mat.value_serde or stream.value_serde
    if stream.repartition_required:
        stream = stream._through_repartition_topic(
            name,
            user_named=named is not None,
            key_serde=key_serde,
            value_serde=value_serde,
            num_partitions=None,
            partitioner=None,
        )
    op = _add_source_table_op(builder, name, stream.node_name, store, materialized, key_serde, value_serde)
    return KTable(
        builder,
        name,
        op,
        key_serde=key_serde,
        value_serde=value_serde,
        source_topics=stream.source_topics,
        queryable=is_queryable(materialized),
    )


def _add_source_table_op(
    builder: StreamsBuilder,
    name: str,
    parent: str,
    store: str,
    materialized: Materialized | None,
    key_serde: Serde | None,
    value_serde: Serde | None,
) -> SourceTableOp:
    """The table node ``name`` below ``parent``: its store ``store`` is added now if the user named
    it, else only when something needs it (a join, a downstream ``group_by``)."""
    spec = key_value_spec(builder, store, materialized, key_serde=key_serde, value_serde=value_serde)
    topology = builder.plan
    op = SourceTableOp(topology, name, spec, materialized=False)
    topology.add_processor(name, op.make_processor, parent)
    if is_queryable(materialized):
        op.materialize()
    return op


def aggregate_table(
    builder: StreamsBuilder,
    name: str,
    spec: TimestampedKeyValueStoreBuilder,
    make: Callable[[StoreTableOp], NodeProcessor],
    parent: str,
    source_topics: frozenset[str],
    queryable: bool,
) -> KTable:
    """The table of a grouped aggregation: processor ``name`` below ``parent``, writing store ``spec``."""
    op = StoreTableOp(spec.name, make)
    topology = builder.plan
    topology.add_processor(name, op.make_processor, parent)
    topology.add_state_store(spec, name)
    return KTable(
        builder,
        name,
        op,
        key_serde=spec.key_serde,
        value_serde=spec.value_serde,
        source_topics=source_topics,
        queryable=queryable,
    )


def source_global_table(
    builder: StreamsBuilder, topic: str, consumed: Consumed, materialized: Materialized | None
) -> GlobalKTable:
    """``builder.global_table(topic)``: a global store fed from ``topic`` on every instance.

    Global stores never log (the topic is the log) and are built without a cache: they
    are written by the global thread while stream threads read them.
    """
    key_serde, value_serde = _source_serdes(consumed, materialized)
    # without a Materialized, Kafka's globalTable names the store with logging off (so a
    # generated name counts as an unnamed store, not a changelog)
    store = store_name(builder, materialized or Materialized(logging_enabled=False), f"{topic}-")
    source_name = builder.names.suffixed(consumed.name, "-source", "KSTREAM-SOURCE-")
    processor_name = builder.names.name("KTABLE-SOURCE-", consumed.name)
    spec = key_value_spec(builder, store, materialized, key_serde=key_serde, value_serde=value_serde)
    if spec.versioned:
        # Kafka's InternalStreamsBuilder.globalTable refuses versioned stores (TopologyException)
        raise TopologyError(
            f"global table {store!r}: a GlobalKTable cannot be materialized as a versioned store"
        )
    if spec.ttl_ms is not None:
        # its store is written only from its topic, so an expiry could be neither logged nor restored
        raise TopologyError(f"global table {store!r}: with_ttl does not apply to a GlobalKTable's store")
    spec = spec.with_logging_disabled().with_caching_disabled()
    builder.plan.add_global_store(
        spec,
        source_name,
        topic,
        processor_name,
        lambda: GlobalTableUpdateProcessor(store),
        key_serde=key_serde,
        value_serde=value_serde,
    )
    return GlobalKTable(builder, store, topic, key_serde, value_serde)
