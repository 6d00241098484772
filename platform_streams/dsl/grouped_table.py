"""``KGroupedTable``: a re-grouped table, aggregated with an adder *and* a subtractor.

``table.group_by(selector)`` maps each row to ``(group key, value)``. When a row
changes, its old value must leave the old group and its new value join the new group,
so every aggregation takes two functions: an *adder* and a *subtractor*
(``count``: +1/-1). The changes travel through a repartition topic
``<Grouped.name or store name>-repartition`` as serialized ``Change`` records (new and
old value together, Kafka Streams' KIP-904 layout).

Names follow Kafka Streams' ``KGroupedTableImpl``: store first (unnamed:
``KTABLE-AGGREGATE-STATE-STORE-<n>``), then the repartition sink and source
(``<named>-sink``/``-source`` when the aggregation is named), then the processor
(``KTABLE-AGGREGATE-<n>`` / ``KTABLE-REDUCE-<n>``). Unlike a grouped stream, no null-key
filter is inserted: the select processor never emits null keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.aggregate_processors import table_aggregate, table_count, table_reduce
from platform_streams.dsl.internals.table_processors import StoreTableOp
from platform_streams.dsl.materialize import is_queryable, key_value_spec, store_name
from platform_streams.dsl.options import Materialized, Named, by_type, name_of, require_functions
from platform_streams.processor.node import NodeProcessor
from platform_streams.serde import Bytes, Long, Serde
from platform_streams.topology.nodes import InternalTopic, repartition_topic_config

if TYPE_CHECKING:
    from platform_streams.dsl.builder import StreamsBuilder
    from platform_streams.dsl.ktable import KTable

__all__ = ["KGroupedTable"]


class KGroupedTable:
    """A grouped table (Kafka Streams' ``KGroupedTable``)."""

    def __init__(
        self,
        builder: StreamsBuilder,
        select_node: str,
        *,
        key_serde: Serde | None,
        value_serde: Serde | None,
        repartition_name: str | None,
    ) -> None:
        self.builder = builder
        self.select_node = select_node
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.repartition_name = repartition_name
        self._shared_source: str | None = None

    def count(self, named: Named | str | None = None, materialized: Materialized | None = None) -> KTable:
        """Rows per group (a row moving between groups: -1 in the old one, +1 in the new one)."""
        return self._aggregate(
            "KTABLE-AGGREGATE-", named, materialized, Long(), table_count(self.value_serde)
        )

    def reduce(
        self,
        adder: Callable[[Any, Any], Any],
        subtractor: Callable[[Any, Any], Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """``adder(aggregate, new)`` / ``subtractor(aggregate, old)``; the first value starts it."""
        require_functions("reduce", adder=adder, subtractor=subtractor)
        make = table_reduce(adder, subtractor, self.value_serde)
        return self._aggregate("KTABLE-REDUCE-", named, materialized, self.value_serde, make)

    def aggregate(
        self,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """``adder(key, value, aggregate)`` / ``subtractor(key, value, aggregate)`` from ``initializer()``."""
        require_functions("aggregate", initializer=initializer, adder=adder, subtractor=subtractor)
        make = table_aggregate(initializer, adder, subtractor, self.value_serde)
        return self._aggregate("KTABLE-AGGREGATE-", named, materialized, None, make)

    def _aggregate(
        self,
        prefix: str,
        named: Named | str | None,
        materialized: Materialized | None,
        value_serde: Serde | None,
        make: Callable[[StoreTableOp], NodeProcessor],
    ) -> KTable:
        from platform_streams.dsl.ktable import aggregate_table

        named, materialized = by_type(prefix.lower() + "aggregation", named, materialized)
        builder = self.builder
        store = store_name(builder, materialized, prefix)
        spec = key_value_spec(builder, store, materialized, key_serde=self.key_serde, value_serde=value_serde)
        names = builder.names
        given = name_of(named)
        sink = names.suffixed(given, "-sink", "KSTREAM-SINK-")
        source = names.suffixed(given, "-source", "KSTREAM-SOURCE-")
        name = names.name(prefix, given)
        topic = f"{self.repartition_name or store}-repartition"
        topology = builder.plan
        if self._shared_source is not None:
            source = self._shared_source  # a named grouping's aggregations share one topic
        else:
            topology.add_internal_topic(InternalTopic(topic, "repartition", None, repartition_topic_config()))
            # Values are Change records serialized by the select processor (see GroupByProcessor).
            topology.add_sink(sink, topic, self.select_node, key_serde=self.key_serde, value_serde=Bytes())
            topology.add_source(source, topic, key_serde=self.key_serde, value_serde=Bytes())
            if self.repartition_name is not None:
                self._shared_source = source
        return aggregate_table(
            builder, name, spec, make, source, frozenset({topic}), is_queryable(materialized)
        )
