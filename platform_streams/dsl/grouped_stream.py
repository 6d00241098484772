"""``KGroupedStream``: a stream grouped by key, ready for ``count``/``reduce``/``aggregate``.

Aggregations are stateful: every record of a key must reach the same task. When the
key may have changed upstream (``map``, ``select_key``, ``group_by``, ...) the records
first go through a repartition topic ``<grouped name or store name>-repartition``, as in
Kafka Streams. Names are drawn in Kafka Streams' order: the store (when unnamed,
``KSTREAM-AGGREGATE-STATE-STORE-<n>``), then the aggregate processor, then the
repartition nodes -- so ``describe()`` matches the Java topology.

``windowed_by`` hands over to the windowed aggregations
(:mod:`platform_streams.dsl.windowed_stream`); they reuse
:meth:`KGroupedStream.source_for_aggregation` for the same repartitioning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.dsl.internals.aggregate_processors import stream_aggregate, stream_count, stream_reduce
from platform_streams.dsl.internals.table_processors import StoreTableOp
from platform_streams.dsl.materialize import burn_count_store_name, is_queryable, key_value_spec, store_name
from platform_streams.dsl.options import Materialized, Named, by_type, name_of, require_functions
from platform_streams.processor.node import NodeProcessor
from platform_streams.serde import Long, Serde

if TYPE_CHECKING:
    from platform_streams.dsl.builder import StreamsBuilder
    from platform_streams.dsl.cogrouped_stream import CogroupedKStream
    from platform_streams.dsl.kstream import KStream
    from platform_streams.dsl.ktable import KTable

__all__ = ["KGroupedStream"]


class KGroupedStream:
    """A grouped record stream (Kafka Streams' ``KGroupedStream``)."""

    def __init__(
        self,
        builder: StreamsBuilder,
        stream: KStream,
        key_serde: Serde | None,
        value_serde: Serde | None,
        repartition_name: str | None,
        repartition_required: bool,
    ) -> None:
        self.builder = builder
        self.stream = stream
        self.key_serde = key_serde
        self.value_serde = value_serde
        #: ``Grouped.name``: names the repartition topic (and makes aggregations share it)
        self.repartition_name = repartition_name
        self.repartition_required = repartition_required
        self._shared_repartition: KStream | None = None

    # -- aggregations --------------------------------------------------------------------

    def count(self, named: Named | str | None = None, materialized: Materialized | None = None) -> KTable:
        """Records per key (null keys and null values are dropped). Values are ``Long``."""
        named, materialized = by_type("count", named, materialized)
        burn_count_store_name(self.builder, materialized)
        return self._aggregate("KSTREAM-AGGREGATE-", named, materialized, Long(), stream_count())

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Combine values per key with ``reducer(aggregate, value)``; the first value starts it."""
        require_functions("reduce", reducer=reducer)
        return self._aggregate(
            "KSTREAM-REDUCE-", named, materialized, self.value_serde, stream_reduce(reducer)
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        named: Named | str | None = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Fold values per key: ``aggregator(key, value, aggregate)`` from ``initializer()``.

        The result's value serde is ``materialized.value_serde`` (else the config default).
        """
        require_functions("aggregate", initializer=initializer, aggregator=aggregator)
        make = stream_aggregate(initializer, aggregator)
        return self._aggregate("KSTREAM-AGGREGATE-", named, materialized, None, make)

    def cogroup(self, aggregator: Callable[[Any, Any, Any], Any]) -> CogroupedKStream:
        """Start a cogroup: add more grouped streams, then ``aggregate`` them into one table."""
        from platform_streams.dsl.cogrouped_stream import CogroupedKStream

        require_functions("cogroup", aggregator=aggregator)
        return CogroupedKStream(self, aggregator)

    def windowed_by(self, windows: Any) -> Any:
        """Windowed aggregations: ``TimeWindows``/``SlidingWindows`` or ``SessionWindows``."""
        from platform_streams.dsl.windowed_stream import windowed_by  # type: ignore[import-not-found,unused-ignore]

        return windowed_by(self, windows)

    # -- shared with windowed aggregations -----------------------------------------------

    def source_for_aggregation(self, store: str, store_named: bool) -> KStream:
        """The stream an aggregation with store ``store`` reads: repartitioned if the key changed.

        The topic is ``<Grouped.name>-repartition`` (shared by every aggregation of this
        grouping, as in Kafka Streams) or ``<store>-repartition``. It counts as named when the
        grouping or the store is (Kafka's ``GroupedStreamAggregateBuilder``).
        """
        if not self.repartition_required:
            return self.stream
        if self.repartition_name is not None and self._shared_repartition is not None:
            # Kafka draws the repartition nodes' indices again before reusing the named topic
            self.builder.names.repartition_names()
            return self._shared_repartition
        repartitioned = self.stream._through_repartition_topic(
            self.repartition_name or store,
            user_named=self.repartition_name is not None or store_named,
            key_serde=self.key_serde,
            value_serde=self.value_serde,
            num_partitions=None,
            partitioner=None,
        )
        if self.repartition_name is not None:
            self._shared_repartition = repartitioned
        return repartitioned

    # -- internals -----------------------------------------------------------------------

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
        store = store_name(self.builder, materialized, prefix)
        spec = key_value_spec(
            self.builder, store, materialized, key_serde=self.key_serde, value_serde=value_serde
        )
        name = self.builder.names.name(prefix, name_of(named))
        source = self.source_for_aggregation(store, is_queryable(materialized))
        return aggregate_table(
            self.builder, name, spec, make, source.node_name, source.source_topics, is_queryable(materialized)
        )
