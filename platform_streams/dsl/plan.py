"""The DSL's logical plan: what the user asked for, as graph nodes, before any ``Topology``.

Kafka Streams' DSL records each operator as a ``GraphNode`` (``kstream/internals/graph/``:
``StreamSourceNode``, ``ProcessorGraphNode``, ``StatefulProcessorNode``,
``OptimizableRepartitionNode``, ``StreamSinkNode``, ...), rewrites that graph with the
optimizer, and only then writes the ``InternalTopologyBuilder``
(``InternalStreamsBuilder.buildAndOptimizeTopology``). This module is that graph:

* every DSL operator records :class:`PlanNode` s here (``builder.plan.add_processor(...)``,
  ``add_repartition``, ...); a node names the topology nodes it feeds from (``parents``)
  and lowers itself into a :class:`~platform_streams.topology.Topology` on demand;
* the optimizer passes (:mod:`platform_streams.dsl.optimizer`) rewrite the nodes (drop,
  insert, re-parent, mark source topics as changelogs);
* :meth:`LogicalPlan.lower` writes a fresh ``Topology`` from the (optimized) nodes in
  order; ``StreamsBuilder.build()`` returns it.

Names, indices and build errors still come when the user calls the operator, as in Kafka
Streams: each node is lowered at once into a *check* topology as it is recorded (a
duplicate node or store name, a missing parent, a topic read twice fails right there),
and the check topology is re-made from the plan after each optimization.

:class:`LoweringNode` is the generic node for operators written against the ``Topology``
API: its lowering is a callback ``fn(topology)``; the nodes it adds and the parents they
read from are found from the check topology, so the optimizer can still re-parent them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from platform_streams.errors import TopologyError
from platform_streams.topology.nodes import InternalTopic, StatelessOp, repartition_topic_config
from platform_streams.topology.topology import StoreBuilderLike, Topology

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.serde import Serde

__all__ = [
    "CopartitionNode",
    "GlobalStoreNode",
    "InternalTopicNode",
    "LogicalPlan",
    "LoweringNode",
    "OptimizableRepartitionNode",
    "PlanNode",
    "ProcessorGraphNode",
    "StateStoreNode",
    "StoreConnectionNode",
    "StreamSinkNode",
    "StreamSourceNode",
    "StreamStreamJoinNode",
    "key_not_none",
]


def key_not_none(key: Any, value: Any) -> bool:
    """Records with a null key cannot be partitioned by key: Kafka Streams drops them."""
    return key is not None


@dataclass(eq=False)
class PlanNode:
    """One node of the plan; ``parents`` are the names of the topology nodes it reads from."""

    name: str
    parents: list[str]

    def provides(self) -> tuple[str, ...]:
        """The topology nodes this plan node creates (children refer to these names)."""
        return (self.name,)

    def lower(self, topology: Topology) -> None:
        raise NotImplementedError


@dataclass(eq=False)
class _AttachedNode(PlanNode):
    """A node that adds no topology node of its own (a store, a topic, a constraint)."""

    def provides(self) -> tuple[str, ...]:
        return ()


@dataclass(eq=False)
class StreamSourceNode(PlanNode):
    """A source reading topics (Kafka's ``StreamSourceNode``)."""

    topics: list[str] = field(default_factory=list)
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    timestamp_extractor: Callable[[Any, Any, int, int], int] | None = None
    offset_reset: Literal["earliest", "latest"] | None = None
    #: a ``builder.stream`` source: a later ``builder.stream`` of the same topics reads from it
    #: (Kafka's ``mergeDuplicateSourceNodes``); table sources are never shared
    shared: bool = False
    #: a regex subscription instead of ``topics``
    pattern: re.Pattern[str] | None = None

    def lower(self, topology: Topology) -> None:
        topology.add_source(
            self.name,
            *([self.pattern] if self.pattern is not None else self.topics),
            key_serde=self.key_serde,
            value_serde=self.value_serde,
            timestamp_extractor=self.timestamp_extractor,
            offset_reset=self.offset_reset,
        )


@dataclass(eq=False)
class ProcessorGraphNode(PlanNode):
    """One processor: a fusable stateless ``op`` or a ``supplier`` of processors (Kafka's
    ``ProcessorGraphNode``; with stores attached by :class:`StateStoreNode` it is what Kafka
    calls a ``StatefulProcessorNode``)."""

    op: StatelessOp | None = None
    supplier: Callable[[], Any] | None = None

    def lower(self, topology: Topology) -> None:
        if self.op is not None:
            topology.add_stateless(self.name, self.op, *self.parents)
        else:
            assert self.supplier is not None
            topology.add_processor(self.name, self.supplier, *self.parents)


@dataclass(eq=False)
class StreamSinkNode(PlanNode):
    """A sink writing to a topic (or a topic chosen per record)."""

    topic: str | Callable[[Any, Any, Any], str] = ""
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    partitioner: Callable[[str, Any, Any, int], int | None] | None = None

    def lower(self, topology: Topology) -> None:
        topology.add_sink(
            self.name,
            self.topic,
            *self.parents,
            key_serde=self.key_serde,
            value_serde=self.value_serde,
            partitioner=self.partitioner,
        )


@dataclass(eq=False)
class OptimizableRepartitionNode(PlanNode):
    """``parent -> filter(key is not None) -> sink -> topic -> source`` (Kafka's
    ``OptimizableRepartitionNode`` when ``key_changer`` is set: the merge pass may replace it)."""

    topic: str = ""
    filter: str = ""
    sink: str = ""
    #: the key-changing operator above (through key- and value-preserving operators only);
    #: None: not mergeable (``repartition()``, or a value change in between)
    key_changer: str | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    num_partitions: int | None = None
    partitioner: Callable[[str, Any, Any, int], int | None] | None = None

    @property
    def source(self) -> str:
        return self.name

    def provides(self) -> tuple[str, ...]:
        return (self.filter, self.sink, self.name)

    def lower(self, topology: Topology) -> None:
        topic = InternalTopic(self.topic, "repartition", self.num_partitions, repartition_topic_config())
        topology.add_internal_topic(topic)
        topology.add_stateless(self.filter, StatelessOp("filter", (key_not_none,)), *self.parents)
        topology.add_sink(
            self.sink,
            self.topic,
            self.filter,
            key_serde=self.key_serde,
            value_serde=self.value_serde,
            partitioner=self.partitioner,
        )
        topology.add_source(self.name, self.topic, key_serde=self.key_serde, value_serde=self.value_serde)


@dataclass(eq=False)
class StreamStreamJoinNode(PlanNode):
    """A windowed stream-stream join (Kafka's ``StreamStreamJoinNode`` with its two
    ``WindowedStreamProcessorNode`` s): ``parents`` = [left, right] and ``name`` = the merge node.

    Lowered as ``left -> this_windowed -> join_this``, ``right -> other_windowed -> join_other``,
    both into ``name``, with the two window stores (and the outer-join store). When the
    ``single.store.self.join`` pass marks it ``self_join`` (both sides read the same node),
    it is lowered as Kafka's ``isSelfJoin`` branch: ``parent -> this_windowed -> name``, where
    ``name`` runs ``self_join_supplier`` over the one store ``this_store``.
    """

    this_windowed: str = ""
    other_windowed: str = ""
    join_this: str = ""
    join_other: str = ""
    this_windowed_supplier: Callable[[], Any] | None = None
    other_windowed_supplier: Callable[[], Any] | None = None
    join_this_supplier: Callable[[], Any] | None = None
    join_other_supplier: Callable[[], Any] | None = None
    self_join_supplier: Callable[[], Any] | None = None
    this_store: StoreBuilderLike | None = None
    other_store: StoreBuilderLike | None = None
    outer_store: StoreBuilderLike | None = None
    self_join: bool = False

    def provides(self) -> tuple[str, ...]:
        if self.self_join:
            return (self.this_windowed, self.name)
        return (self.this_windowed, self.other_windowed, self.join_this, self.join_other, self.name)

    def lower(self, topology: Topology) -> None:
        assert self.this_windowed_supplier is not None and self.this_store is not None
        if self.self_join:
            assert self.self_join_supplier is not None
            topology.add_processor(self.this_windowed, self.this_windowed_supplier, self.parents[0])
            topology.add_processor(self.name, self.self_join_supplier, self.this_windowed)
            topology.add_state_store(self.this_store, self.this_windowed, self.name)
            return
        assert self.other_windowed_supplier is not None and self.other_store is not None
        assert self.join_this_supplier is not None and self.join_other_supplier is not None
        topology.add_processor(self.this_windowed, self.this_windowed_supplier, self.parents[0])
        topology.add_processor(self.other_windowed, self.other_windowed_supplier, self.parents[1])
        topology.add_processor(self.join_this, self.join_this_supplier, self.this_windowed)
        topology.add_processor(self.join_other, self.join_other_supplier, self.other_windowed)
        topology.add_stateless(self.name, StatelessOp("passthrough"), self.join_this, self.join_other)
        topology.add_state_store(self.this_store, self.this_windowed, self.join_other)
        topology.add_state_store(self.other_store, self.other_windowed, self.join_this)
        if self.outer_store is not None:
            topology.add_state_store(self.outer_store, self.join_this, self.join_other)


@dataclass(eq=False)
class StateStoreNode(_AttachedNode):
    """A store, connected to the processors in ``parents`` (none: connected later)."""

    store_builder: StoreBuilderLike | None = None

    def lower(self, topology: Topology) -> None:
        assert self.store_builder is not None
        topology.add_state_store(self.store_builder, *self.parents)


@dataclass(eq=False)
class StoreConnectionNode(_AttachedNode):
    """Gives processor ``parents[0]`` access to already-added stores."""

    stores: tuple[str, ...] = ()

    def lower(self, topology: Topology) -> None:
        topology.connect_processor_and_state_stores(self.parents[0], *self.stores)


@dataclass(eq=False)
class InternalTopicNode(_AttachedNode):
    """An internal topic the application creates (not tied to one node)."""

    topic: InternalTopic | None = None

    def lower(self, topology: Topology) -> None:
        assert self.topic is not None
        topology.add_internal_topic(self.topic)


@dataclass(eq=False)
class CopartitionNode(_AttachedNode):
    """Topics that must have equal partition counts (joins)."""

    topics: frozenset[str] = frozenset()

    def lower(self, topology: Topology) -> None:
        topology.add_copartition_group(self.topics)


@dataclass(eq=False)
class GlobalStoreNode(_AttachedNode):
    """A global store fed from a topic on every instance (global tables)."""

    lowering: Callable[[Topology], None] | None = None

    def lower(self, topology: Topology) -> None:
        assert self.lowering is not None
        self.lowering(topology)


@dataclass(eq=False)
class LoweringNode(PlanNode):
    """A generic node: ``lowering(topology)`` adds its nodes with the ``Topology`` API.

    ``created`` and ``parents`` are found from the check topology when the node is recorded;
    when an optimizer pass re-parents the node, lowering maps the old parent names to the new
    ones on the way into the topology.
    """

    lowering: Callable[[Topology], None] | None = None
    created: tuple[str, ...] = ()
    original_parents: tuple[str, ...] = ()

    def provides(self) -> tuple[str, ...]:
        return self.created

    def lower(self, topology: Topology) -> None:
        assert self.lowering is not None
        renamed = {
            old: new for old, new in zip(self.original_parents, self.parents, strict=True) if old != new
        }
        self.lowering(topology if not renamed else _RenamingTopology(topology, renamed))  # type: ignore[arg-type]


class _RenamingTopology:
    """A ``Topology`` seen through a parent-name substitution (re-parented :class:`LoweringNode` s)."""

    def __init__(self, topology: Topology, renamed: dict[str, str]) -> None:
        self._topology = topology
        self._renamed = renamed

    def _map(self, parents: Iterable[str]) -> list[str]:
        return [self._renamed.get(p, p) for p in parents]

    def add_processor(self, name: str, supplier: Callable[[], Any], *parents: str) -> Topology:
        return self._topology.add_processor(name, supplier, *self._map(parents))

    def add_stateless(self, name: str, op: StatelessOp, *parents: str) -> Topology:
        return self._topology.add_stateless(name, op, *self._map(parents))

    def add_sink(self, name: str, topic: Any, *parents: str, **kwargs: Any) -> Topology:
        return self._topology.add_sink(name, topic, *self._map(parents), **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._topology, attribute)


class LogicalPlan:
    """The plan nodes in the order the user's calls created them (Kafka's build priority)."""

    def __init__(self) -> None:
        self.nodes: list[PlanNode] = []
        #: store name -> source topic used as its changelog (``reuse.ktable.source.topics``)
        self.source_changelogs: dict[str, str] = {}
        #: (source table op, topic) of every ``builder.table`` (for the reuse pass)
        self.source_tables: list[tuple[Any, str]] = []
        #: optimizations already applied (``build()`` may be called more than once)
        self.applied: set[str] = set()
        self._check = Topology()

    # -- recording (each call also lowers the node into the check topology) -------------

    def add(self, node: PlanNode) -> PlanNode:
        """Record ``node`` after checking it lowers onto what was recorded before."""
        node.lower(self._check)
        self.nodes.append(node)
        return node

    def add_source(self, name: str, *topics: str, **options: Any) -> PlanNode:
        return self.add(StreamSourceNode(name, [], list(topics), **options))

    def add_stateless(self, name: str, op: StatelessOp, *parents: str) -> PlanNode:
        return self.add(ProcessorGraphNode(name, list(parents), op=op))

    def add_processor(self, name: str, supplier: Callable[[], Any], *parents: str) -> PlanNode:
        if not callable(supplier):
            raise TopologyError(f"processor {name!r}: supplier must be callable, got {supplier!r}")
        return self.add(ProcessorGraphNode(name, list(parents), supplier=supplier))

    def add_sink(self, name: str, topic: Any, *parents: str, **options: Any) -> PlanNode:
        return self.add(StreamSinkNode(name, list(parents), topic, **options))

    def add_state_store(self, store_builder: StoreBuilderLike, *processors: str) -> PlanNode:
        return self.add(StateStoreNode(store_builder.name, list(processors), store_builder))

    def connect_processor_and_state_stores(self, processor: str, *stores: str) -> PlanNode:
        return self.add(StoreConnectionNode(processor, [processor], tuple(stores)))

    def add_internal_topic(self, topic: InternalTopic) -> PlanNode:
        return self.add(InternalTopicNode(topic.name, [], topic))

    def add_copartition_group(self, topics: Iterable[str]) -> PlanNode:
        return self.add(CopartitionNode("copartition", [], frozenset(topics)))

    def add_global_store(self, store_builder: StoreBuilderLike, *args: Any, **kwargs: Any) -> PlanNode:
        def lowering(topology: Topology) -> None:
            topology.add_global_store(store_builder, *args, **kwargs)

        return self.add(GlobalStoreNode(store_builder.name, [], lowering))

    def add_lowering(self, lowering: Callable[[Topology], None]) -> PlanNode:
        """Record an operator written against the ``Topology`` API: ``lowering(topology)``
        adds its nodes (and stores, topics) now into the check topology and again into each
        built topology. The one-line wrap of an operator's old body."""
        before = dict.fromkeys(self._check.nodes)
        lowering(self._check)
        created = tuple(name for name in self._check.nodes if name not in before)
        parents: list[str] = []
        for name in created:
            for parent in self._check.nodes[name].parents:
                if parent not in created and parent not in parents:
                    parents.append(parent)
        label = created[0] if created else "lowering"
        node = LoweringNode(label, parents, lowering, created, tuple(parents))
        self.nodes.append(node)
        return node

    # -- queries used by the DSL and the optimizer --------------------------------------

    def shared_source(
        self, topics: Iterable[str], pattern: re.Pattern[str] | None = None
    ) -> StreamSourceNode | None:
        """The ``builder.stream`` source reading exactly ``topics`` (or the same regex), if any."""
        wanted = set(topics)
        for node in self.nodes:
            if not isinstance(node, StreamSourceNode) or not node.shared:
                continue
            if pattern is not None:
                if node.pattern is not None and node.pattern.pattern == pattern.pattern:
                    return node
            elif node.pattern is None and set(node.topics) == wanted:
                return node
        return None

    def node(self, name: str) -> PlanNode:
        """The plan node that creates topology node ``name``."""
        for node in self.nodes:
            if name in node.provides():
                return node
        raise TopologyError(f"no node named {name!r}")

    def children(self, name: str) -> list[PlanNode]:
        """Plan nodes reading from topology node ``name`` (stores and connections excluded)."""
        return [n for n in self.nodes if name in n.parents and not isinstance(n, _AttachedNode)]

    @property
    def check_topology(self) -> Topology:
        """The topology as recorded so far (for checks and questions about the graph)."""
        return self._check

    # -- rewriting (optimizer passes) -----------------------------------------------------

    def reparent(self, node: PlanNode, old_parent: str, new_parent: str) -> None:
        node.parents[node.parents.index(old_parent)] = new_parent

    def remove(self, node: PlanNode) -> None:
        self.nodes.remove(node)

    def insert_after(self, anchor: PlanNode, node: PlanNode) -> None:
        self.nodes.insert(self.nodes.index(anchor) + 1, node)

    def refresh_check_topology(self) -> None:
        """Re-make the check topology from the (rewritten) nodes."""
        self._check = self.lower()

    # -- lowering ----------------------------------------------------------------------

    def lower(self, config: StreamsConfig | None = None) -> Topology:
        """A new ``Topology`` from the nodes, in order (Kafka's ``buildAndOptimizeTopology``);
        ``config``'s processor wrapper wraps its processors (never the check topology's)."""
        return self.lower_into(Topology(config), self.nodes)

    def lower_into(self, topology: Topology, nodes: Iterable[PlanNode]) -> Topology:
        """Lower ``nodes`` (in plan order) into ``topology``, which holds the ones before them."""
        topology.begin_lowering()
        for node in nodes:
            node.lower(topology)
        topology.finish_lowering()
        for store, topic in self.source_changelogs.items():
            topology.use_source_topic_as_changelog(store, topic)
        return topology
