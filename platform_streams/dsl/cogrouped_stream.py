"""``CogroupedKStream``: several grouped streams folded into one aggregate per key (KIP-150).

``a.group_by_key().cogroup(agg_a).cogroup(b.group_by_key(), agg_b).aggregate(init)``
keeps one aggregate per key, updated by each input with its own aggregator, in one
store -- instead of aggregating each stream and joining the results. Every input is
repartitioned first when its key may have changed, and all inputs must be
co-partitioned (they update the same store in one task).

Names follow Kafka Streams' ``CogroupedStreamAggregateBuilder``: the store (unnamed:
``COGROUPKSTREAM-AGGREGATE-STATE-STORE-<n>``), the repartition topics, one
``COGROUPKSTREAM-AGGREGATE-<n>`` processor per input (``<named>-cogroup-agg-<i>``), then
``COGROUPKSTREAM-MERGE-<n>`` (``<named>-cogroup-merge``), the node of the result table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.aggregate_processors import StreamAggregateProcessor
from platform_streams.dsl.internals.table_processors import StoreTableOp
from platform_streams.dsl.materialize import is_queryable, key_value_spec, store_name
from platform_streams.dsl.options import Materialized, Named, by_type, name_of, require_functions
from platform_streams.errors import TopologyError
from platform_streams.processor.node import NodeProcessor
from platform_streams.topology.nodes import StatelessOp

if TYPE_CHECKING:
    from platform_streams.dsl.grouped_stream import KGroupedStream
    from platform_streams.dsl.ktable import KTable

__all__ = ["CogroupedKStream"]

Aggregator = Callable[[Any, Any, Any], Any]


class CogroupedKStream:
    """Grouped streams with one aggregator each, aggregated together (``KStream.cogroup``)."""

    def __init__(self, first: KGroupedStream, aggregator: Aggregator) -> None:
        self._groups: list[tuple[KGroupedStream, Aggregator]] = []
        self.cogroup(first, aggregator)

    def cogroup(self, grouped: KGroupedStream, aggregator: Aggregator) -> CogroupedKStream:
        """Add another grouped stream and the aggregator that folds its values in."""
        from platform_streams.dsl.grouped_stream import KGroupedStream

        if not isinstance(grouped, KGroupedStream):
            raise TypeError(f"cogroup: parameter 'grouped' takes a KGroupedStream, got {grouped!r}")
        require_functions("cogroup", aggregator=aggregator)
        if self._groups and grouped.builder is not self._groups[0][0].builder:
            raise TopologyError("cannot cogroup streams from different StreamsBuilders")
        if any(g is grouped for g, _ in self._groups):
            raise TopologyError("this grouped stream is already part of the cogroup")
        self._groups.append((grouped, aggregator))
        return self

    def aggregate(
        self,
        initializer: Callable[[], Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """The aggregate per key, from ``initializer()`` and each input's aggregator."""
        from platform_streams.dsl.ktable import KTable

        require_functions("cogroup aggregate", initializer=initializer)
        named, materialized = by_type("cogroup aggregate", named, materialized)
        first = self._groups[0][0]
        builder = first.builder
        names = builder.names
        given = name_of(named)
        store = store_name(builder, materialized, "COGROUPKSTREAM-AGGREGATE-")
        spec = key_value_spec(builder, store, materialized, key_serde=first.key_serde, value_serde=None)
        named_store = is_queryable(materialized)
        sources = [grouped.source_for_aggregation(store, named_store) for grouped, _ in self._groups]
        op = StoreTableOp(store, _unused)
        topology = builder.plan
        processors = []
        for index, ((_, aggregator), source) in enumerate(zip(self._groups, sources, strict=True)):
            name = names.suffixed(given, f"-cogroup-agg-{index}", "COGROUPKSTREAM-AGGREGATE-")
            topology.add_processor(name, _supplier(op, initializer, aggregator), source.node_name)
            processors.append(name)
        topology.add_state_store(spec, *processors)
        merge = names.suffixed(given, "-cogroup-merge", "COGROUPKSTREAM-MERGE-")
        topology.add_stateless(merge, StatelessOp("passthrough"), *processors)
        topics = frozenset(t for source in sources for t in source.source_topics)
        if len(sources) > 1:
            topology.add_copartition_group(topics)
        return KTable(
            builder,
            merge,
            op,
            key_serde=spec.key_serde,
            value_serde=spec.value_serde,
            source_topics=topics,
            queryable=is_queryable(materialized),
        )

    def windowed_by(self, windows: Any) -> Any:
        """Windowed cogroup aggregations (``TimeWindows``/``SlidingWindows`` or ``SessionWindows``)."""
        from platform_streams.dsl.windowed_cogroup import cogroup_windowed_by

        return cogroup_windowed_by(list(self._groups), windows)


def _supplier(
    op: StoreTableOp, initializer: Callable[[], Any], aggregator: Aggregator
) -> Callable[[], NodeProcessor]:
    return lambda: StreamAggregateProcessor(op, initializer, aggregator)


def _unused(op: StoreTableOp) -> NodeProcessor:
    raise TopologyError("a cogrouped table's node is its merge node; it has no processor of its own")
