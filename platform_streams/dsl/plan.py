"""The DSL's logical plan: what the optimizer needs to know beyond the topology's nodes.

The DSL adds its nodes to a :class:`~platform_streams.topology.Topology` as the user calls
operators (so names, indices and errors come at once, as in Kafka Streams), and records here
the graph facts Kafka Streams keeps on its ``GraphNode``\\ s: which nodes form one
repartition (null-key filter, sink, internal topic, source), below which key-changing
operator it sits, and which tables read a source topic. The optimizer passes
(:mod:`platform_streams.dsl.optimizer`) rewrite the topology from these records when
``StreamsBuilder.build(config)`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from platform_streams.serde import Serde

__all__ = ["LogicalPlan", "RepartitionNode"]


@dataclass
class RepartitionNode:
    """One repartition: ``parent -> filter -> sink -> topic -> source`` (Kafka's
    ``OptimizableRepartitionNode`` when ``key_changer`` is set)."""

    topic: str
    filter: str
    sink: str
    source: str
    parent: str
    #: the key-changing operator above (through key- and value-preserving operators only);
    #: None: not mergeable (``repartition()``, or a value change in between)
    key_changer: str | None
    key_serde: Serde | None
    value_serde: Serde | None
    #: set when an optimizer pass replaced this repartition by another
    merged_into: str | None = None


@dataclass
class LogicalPlan:
    """Graph facts recorded by the DSL for the optimizer, in the order they were created."""

    repartitions: list[RepartitionNode] = field(default_factory=list)
    #: (table op, topic) of every source KTable (reuse of source topics as changelogs)
    source_tables: list[tuple[Any, str]] = field(default_factory=list)
    #: optimizations already applied (build() may be called more than once)
    applied: set[str] = field(default_factory=set)

    def add_repartition(self, node: RepartitionNode) -> None:
        self.repartitions.append(node)
