"""Optimizer passes over the DSL's logical plan, run by ``StreamsBuilder.build(config)``.

Each pass rewrites the plan's nodes (:mod:`platform_streams.dsl.plan`), never a
``Topology``: ``build()`` lowers the rewritten plan afterwards, as Kafka Streams'
``InternalStreamsBuilder.buildAndOptimizeTopology`` optimizes its ``GraphNode`` s and then
writes the topology.

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
* ``single.store.self.join``: a windowed join of a stream with itself (both sides read the
  same node, e.g. ``s.join(s, ...)`` or two ``builder.stream`` s of one topic) runs on one
  window store: the second windowed node and store, the two join processors and the
  outer-join store are dropped and the merge node becomes Kafka's ``KStreamKStreamSelfJoin``
  (``InternalStreamsBuilder.rewriteSingleStoreSelfJoin``). Kafka applies it to left and outer
  self-joins too: a record always finds itself, so they never pad with null.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from platform_streams.config import TOPOLOGY_OPTIMIZATIONS
from platform_streams.dsl.internals.table_processors import SourceTableOp
from platform_streams.dsl.plan import (
    CopartitionNode,
    LogicalPlan,
    OptimizableRepartitionNode,
    PlanNode,
    StreamStreamJoinNode,
)
from platform_streams.errors import TopologyError

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.dsl.naming import NameGenerator

__all__ = [
    "MERGE_REPARTITION_TOPICS",
    "REUSE_KTABLE_SOURCE_TOPICS",
    "SINGLE_STORE_SELF_JOIN",
    "enabled_optimizations",
    "optimize",
]

log = logging.getLogger(__name__)

REUSE_KTABLE_SOURCE_TOPICS, MERGE_REPARTITION_TOPICS, SINGLE_STORE_SELF_JOIN = TOPOLOGY_OPTIMIZATIONS


def enabled_optimizations(config: StreamsConfig | None) -> frozenset[str]:
    """The passes ``config.topology_optimization`` switches on."""
    if config is None or config.topology_optimization == "none":
        return frozenset()
    if config.topology_optimization == "all":
        return frozenset(TOPOLOGY_OPTIMIZATIONS)
    return frozenset(config.topology_optimization.split(","))


def optimize(plan: LogicalPlan, names: NameGenerator, config: StreamsConfig | None) -> bool:
    """Apply the enabled passes once each (``build()`` may be called again); True if the plan
    changed."""
    enabled = enabled_optimizations(config)
    changed = False
    if REUSE_KTABLE_SOURCE_TOPICS in enabled and REUSE_KTABLE_SOURCE_TOPICS not in plan.applied:
        reuse_source_topics(plan)
        plan.applied.add(REUSE_KTABLE_SOURCE_TOPICS)
        changed = True
    if MERGE_REPARTITION_TOPICS in enabled and MERGE_REPARTITION_TOPICS not in plan.applied:
        merge_repartition_topics(plan, names)
        plan.applied.add(MERGE_REPARTITION_TOPICS)
        changed = True
    if SINGLE_STORE_SELF_JOIN in enabled and SINGLE_STORE_SELF_JOIN not in plan.applied:
        rewrite_single_store_self_joins(plan)
        plan.applied.add(SINGLE_STORE_SELF_JOIN)
        changed = True
    return changed


def rewrite_single_store_self_joins(plan: LogicalPlan) -> None:
    """Every stream-stream join whose two sides read the same node becomes a self-join."""
    for node in plan.nodes:
        if isinstance(node, StreamStreamJoinNode) and node.parents[0] == node.parents[1]:
            node.self_join = True
            log.debug("join %s of %s with itself runs on one store", node.name, node.parents[0])


def reuse_source_topics(plan: LogicalPlan) -> None:
    """Materialized source tables restore from their topic instead of a changelog."""
    for op, topic in plan.source_tables:
        if not isinstance(op, SourceTableOp):
            raise TopologyError(f"unexpected source table entry {op!r}")
        # a TTL store keeps its changelog: its expiries are tombstones it writes, which the
        # source topic (not the store's to write) would never get, so a restore would revive them
        if op.materialized and op.spec.ttl_ms is None:
            op.spec.source_changelog_topic = topic
            plan.source_changelogs[op.spec.name] = topic


def merge_repartition_topics(plan: LogicalPlan, names: NameGenerator) -> None:
    """One repartition topic per key-changing operator (see the module docstring)."""
    groups: dict[str, list[OptimizableRepartitionNode]] = {}
    for node in plan.nodes:
        if isinstance(node, OptimizableRepartitionNode) and node.key_changer is not None:
            groups.setdefault(node.key_changer, []).append(node)
    for key_changer, nodes in groups.items():
        _merge(plan, names, key_changer, nodes)


def _merge(
    plan: LogicalPlan, names: NameGenerator, key_changer: str, nodes: list[OptimizableRepartitionNode]
) -> None:
    topic = nodes[0].topic
    key_serde = next((n.key_serde for n in nodes if n.key_serde is not None), None)
    value_serde = next((n.value_serde for n in nodes if n.value_serde is not None), None)
    # Kafka's createRepartitionedSource: three indices drawn; a "-repartition" name is never
    # a generated one, so the nodes are named after the topic
    names.repartition_names()
    merged = OptimizableRepartitionNode(
        f"{topic}-source",
        [key_changer],
        topic=topic,
        filter=f"{topic}-filter",
        sink=f"{topic}-sink",
        key_changer=key_changer,
        key_serde=key_serde,
        value_serde=value_serde,
    )
    downstream: list[tuple[PlanNode, str]] = []  # (node, its parent to replace by the merged source)
    for node in nodes:
        children = plan.children(node.source)
        parent = node.parents[0]
        if parent == key_changer:
            downstream.extend((child, node.source) for child in children)
        else:
            # operators between the key change and this repartition move below the merged topic
            for child in children:
                plan.reparent(child, node.source, parent)
            path_child = _child_of_on_path(plan, key_changer, parent)
            if all(path_child is not moved for moved, _ in downstream):
                downstream.append((path_child, key_changer))
    for node in nodes:
        plan.remove(node)
        for group in plan.nodes:
            if isinstance(group, CopartitionNode) and node.topic in group.topics:
                group.topics = (group.topics - {node.topic}) | {topic}
    for child, old_parent in downstream:
        plan.reparent(child, old_parent, merged.source)
    plan.insert_after(plan.node(key_changer), merged)
    log.debug("merged repartition topics %s into %s", [n.topic for n in nodes], topic)


def _child_of_on_path(plan: LogicalPlan, key_changer: str, start: str) -> PlanNode:
    """The child of ``key_changer`` that ``start`` descends from (single-parent chain)."""
    current = start
    while True:
        node = plan.node(current)
        if key_changer in node.parents:
            return node
        if len(node.parents) != 1:
            raise TopologyError(f"no single path from {key_changer!r} to {start!r}")
        current = node.parents[0]
