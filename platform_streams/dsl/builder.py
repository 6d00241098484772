"""``StreamsBuilder``: the entry point of the DSL."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from platform_streams.dsl.internal_naming import ImplicitInternalNames
from platform_streams.dsl.kstream import KStream
from platform_streams.dsl.naming import NameGenerator
from platform_streams.dsl.options import Consumed, Materialized
from platform_streams.dsl.plan import LogicalPlan, PlanNode, StreamSourceNode
from platform_streams.errors import TopologyError
from platform_streams.topology.nodes import pattern_token

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.dsl.ktable import GlobalKTable, KTable
    from platform_streams.topology.topology import Topology


class StreamsBuilder:
    """Builds a :class:`Topology` from streams and tables (Kafka Streams' ``StreamsBuilder``)."""

    def __init__(self, config: StreamsConfig | None = None) -> None:
        self.names = NameGenerator()
        #: settings that shape the topology (``topology_optimization``), as Java's ``build(props)``
        self.config = config
        #: what the user asked for, as graph nodes; ``build()`` optimizes and lowers it
        self.plan = LogicalPlan()
        #: the store, changelog and repartition names the DSL generated (KIP-1111)
        self.implicit_names = ImplicitInternalNames()
        #: the one topology ``build()`` returns, and the plan nodes already lowered into it
        self._topology: Topology | None = None
        self._lowered: set[PlanNode] = set()

    def stream(self, topics: str | list[str] | re.Pattern[str], consumed: Consumed | None = None) -> KStream:
        """A stream over one or more topics, or over every topic a ``re.compile``'d pattern
        matches (learnt from the broker's metadata at start and at each refresh,
        ``metadata.max.age.ms`` of ``consumer_config``).

        Streams of the same topics (in any order) or the same pattern share one source node,
        as in Kafka Streams; a stream of topics that only overlap another stream's (or a
        table's) is refused.
        """
        consumed = consumed or Consumed()
        pattern = topics if isinstance(topics, re.Pattern) else None
        topic_list = [] if pattern is not None else [topics] if isinstance(topics, str) else list(topics)  # type: ignore[arg-type]
        if pattern is None and (
            not topic_list or not all(isinstance(topic, str) and topic for topic in topic_list)
        ):
            # Kafka's null check of the topic names
            raise TypeError(f"stream: parameter 'topics' takes topic names, got {topics!r}")
        name = self.names.name("KSTREAM-SOURCE-", consumed.name)
        shared = self.plan.shared_source(topic_list, pattern)
        if shared is not None:
            # Kafka's mergeDuplicateSourceNodes: streams of the same topics read from one source
            # (whose serdes deserialize); this call's name and index are consumed all the same
            if shared.offset_reset != consumed.offset_reset:
                raise TopologyError(
                    "Can't configure different offset reset policies on the same input topic(s)"
                )
            name = shared.name
        else:
            self.plan.add(
                StreamSourceNode(
                    name,
                    [],
                    topic_list,
                    key_serde=consumed.key_serde,
                    value_serde=consumed.value_serde,
                    timestamp_extractor=consumed.timestamp_extractor,
                    offset_reset=consumed.offset_reset,
                    shared=True,
                    pattern=pattern,
                )
            )
        return KStream(
            self,
            name,
            key_serde=consumed.key_serde,
            value_serde=consumed.value_serde,
            source_topics=frozenset([pattern_token(pattern)] if pattern is not None else topic_list),
        )

    def table(
        self, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None
    ) -> KTable:
        """A table over a topic: the latest value per key, backed by a state store."""
        from platform_streams.dsl.ktable import source_table

        return source_table(self, topic, consumed or Consumed(), materialized)

    def global_table(
        self, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None
    ) -> GlobalKTable:
        """A table fully replicated on every instance, for joins by any key."""
        from platform_streams.dsl.ktable import source_global_table

        return source_global_table(self, topic, consumed or Consumed(), materialized)

    def add_state_store(self, store_builder: object) -> StreamsBuilder:
        """Add a store for Processor API processors used through ``KStream.process``."""
        self.plan.add_state_store(store_builder)  # type: ignore[arg-type]
        return self

    def build(self, config: StreamsConfig | None = None) -> Topology:
        """The builder's topology, with every operator recorded so far (Kafka's ``build()``).

        As in Kafka Streams, the builder owns one ``Topology``: every call returns the same
        object, so ``builder.build().add_processor(...)`` followed by another ``build()``
        keeps the added processor (Kafka's own tests rely on it). Operators recorded after
        a ``build()`` are lowered into that object on the next call, in the order they were
        made (Kafka writes only the graph nodes not yet written to its topology).

        ``topology_optimization`` in ``config`` (or the builder's config) first runs the
        optimizer passes over the logical plan (:mod:`platform_streams.dsl.optimizer`):
        source topics reused as changelogs, repartition topics of one key-changing operator
        merged into one, self-joins on one store. A pass that rewrites the plan after a
        topology was returned cannot rewrite that object's nodes, so that call lowers a new
        topology, which the builder keeps from then on.
        """
        from platform_streams.dsl.optimizer import optimize

        effective = config or self.config
        rewritten = optimize(self.plan, self.names, effective)
        if rewritten:
            self.plan.refresh_check_topology()
        if self._topology is None or rewritten:
            self._topology = self.plan.lower(effective)
            self._lowered = set(self.plan.nodes)
        else:
            fresh = [node for node in self.plan.nodes if node not in self._lowered]
            if fresh:
                self.plan.lower_into(self._topology, fresh)
                self._lowered.update(fresh)
        # Kafka's InternalStreamsBuilder.buildAndOptimizeTopology ends with checkUnprovidedNames
        ensure = effective is not None and effective.ensure_explicit_internal_resource_naming
        self.implicit_names.check(ensure)
        return self._topology
