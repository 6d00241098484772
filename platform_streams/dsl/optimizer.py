"""Optimizer passes over the DSL's graph, run by ``StreamsBuilder.build(config)``.

Kafka Streams' ``topology.optimization`` (``StreamsConfig.topology_optimization``): "none",
"all", or a comma-separated list of the passes below, each switchable on its own:

* ``reuse.ktable.source.topics``: a materialized source KTable restores from its source
  topic; no ``-changelog`` topic is created and nothing is logged.
* ``merge.repartition.topics``: every repartition below one key-changing operator
  (``map``, ``select_key``, ``group_by``'s selector, ...) is replaced by a single one, named
  after the first of them (Kafka's ``InternalStreamsBuilder.mergeRepartitionTopics``): one
  re-keyed stream used by several aggregations and joins writes one topic instead of one
  per use. Operators between the key change and a repartition (filters, peeks) move below
  the merged topic, as in Kafka Streams.
* ``single.store.self.join``: accepted; a self-join keeps its two stores (not implemented).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from platform_streams.config import TOPOLOGY_OPTIMIZATIONS
from platform_streams.dsl.internals.table_processors import SourceTableOp
from platform_streams.dsl.plan import RepartitionNode
from platform_streams.errors import TopologyError
from platform_streams.topology.nodes import InternalTopic, StatelessOp, repartition_topic_config

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.dsl.builder import StreamsBuilder

__all__ = ["MERGE_REPARTITION_TOPICS", "REUSE_KTABLE_SOURCE_TOPICS", "enabled_optimizations", "optimize"]

log = logging.getLogger(__name__)

REUSE_KTABLE_SOURCE_TOPICS, MERGE_REPARTITION_TOPICS, SINGLE_STORE_SELF_JOIN = TOPOLOGY_OPTIMIZATIONS


def enabled_optimizations(config: StreamsConfig | None) -> frozenset[str]:
    """The passes ``config.topology_optimization`` switches on."""
    if config is None or config.topology_optimization == "none":
        return frozenset()
    if config.topology_optimization == "all":
        return frozenset(TOPOLOGY_OPTIMIZATIONS)
    return frozenset(config.topology_optimization.split(","))


def optimize(builder: StreamsBuilder, config: StreamsConfig | None) -> None:
    """Apply the enabled passes once each (``build()`` may be called again)."""
    enabled = enabled_optimizations(config)
    plan = builder.plan
    if REUSE_KTABLE_SOURCE_TOPICS in enabled and REUSE_KTABLE_SOURCE_TOPICS not in plan.applied:
        reuse_source_topics(builder)
        plan.applied.add(REUSE_KTABLE_SOURCE_TOPICS)
    if MERGE_REPARTITION_TOPICS in enabled and MERGE_REPARTITION_TOPICS not in plan.applied:
        merge_repartition_topics(builder)
        plan.applied.add(MERGE_REPARTITION_TOPICS)


def reuse_source_topics(builder: StreamsBuilder) -> None:
    """Materialized source tables restore from their topic instead of a changelog."""
    for op, topic in builder.plan.source_tables:
        if not isinstance(op, SourceTableOp):
            raise TopologyError(f"unexpected source table entry {op!r}")
        if op.materialized:
            op.spec.source_changelog_topic = topic
            builder.topology.use_source_topic_as_changelog(op.spec.name, topic)


def merge_repartition_topics(builder: StreamsBuilder) -> None:
    """One repartition topic per key-changing operator (see the module docstring)."""
    groups: dict[str, list[RepartitionNode]] = {}
    for node in builder.plan.repartitions:
        if node.key_changer is not None and node.merged_into is None:
            groups.setdefault(node.key_changer, []).append(node)
    for key_changer, nodes in groups.items():
        _merge(builder, key_changer, nodes)


def _merge(builder: StreamsBuilder, key_changer: str, nodes: list[RepartitionNode]) -> None:
    from platform_streams.dsl.kstream import _key_not_none

    topology = builder.topology
    names = builder.names
    topic = nodes[0].topic
    key_serde = next((n.key_serde for n in nodes if n.key_serde is not None), None)
    value_serde = next((n.value_serde for n in nodes if n.value_serde is not None), None)
    # Kafka's createRepartitionedSource: three indices drawn; a "-repartition" name is never
    # a generated one, so the nodes are named after the topic
    names.repartition_names()
    filter_name, sink_name, source_name = f"{topic}-filter", f"{topic}-sink", f"{topic}-source"
    downstream: list[tuple[str, str]] = []  # (node, its parent to replace by the merged source)
    for node in nodes:
        children = list(topology.node(node.source).children)
        if node.parent == key_changer:
            downstream.extend((child, node.source) for child in children)
        else:
            for child in children:
                topology.reparent(child, node.source, node.parent)
            path_child = _child_of_on_path(builder, key_changer, node.parent)
            if all(path_child != moved for moved, _ in downstream):
                downstream.append((path_child, key_changer))
        node.merged_into = topic
    # remove the replaced repartitions; children of their sources are re-parented below
    for node in nodes:
        topology.remove_node(node.source, orphan_children=True)
        topology.remove_node(node.sink)
        topology.remove_node(node.filter)
        topology.remove_internal_topic(node.topic)
        if node.topic != topic:
            topology.rename_topic_in_copartition_groups(node.topic, topic)
    topology.add_internal_topic(InternalTopic(topic, "repartition", None, repartition_topic_config()))
    topology.add_stateless(filter_name, StatelessOp("filter", (_key_not_none,)), key_changer)
    topology.add_sink(sink_name, topic, filter_name, key_serde=key_serde, value_serde=value_serde)
    topology.add_source(source_name, topic, key_serde=key_serde, value_serde=value_serde)
    for child, old_parent in downstream:
        topology.reparent(child, old_parent, source_name)
    topology.move_after(key_changer, [filter_name, sink_name, source_name])
    log.debug("merged repartition topics %s into %s", [n.topic for n in nodes], topic)


def _child_of_on_path(builder: StreamsBuilder, key_changer: str, start: str) -> str:
    """The child of ``key_changer`` that ``start`` descends from (single-parent chain)."""
    current = start
    while True:
        parents = builder.topology.node(current).parents
        if key_changer in parents:
            return current
        if len(parents) != 1:
            raise TopologyError(f"no single path from {key_changer!r} to {start!r}")
        current = parents[0]
