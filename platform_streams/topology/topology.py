"""``Topology``: the logical processing graph, built with the Processor API or the DSL.

Nodes are kept in insertion order; their position gives sub-topology numbering and
DSL node names (``KSTREAM-FILTER-0000000001``), so a Python topology describes the
same way its Java twin would.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, Protocol

from platform_streams.errors import TopologyError
from platform_streams.serde import Serde
from platform_streams.topology.nodes import (
    InternalTopic,
    Node,
    ProcessorNode,
    SinkNode,
    SourceNode,
    StatelessOp,
)

if TYPE_CHECKING:
    from platform_streams.topology.describe import TopologyDescription


class StoreBuilderLike(Protocol):
    """What the topology needs of a state store builder (see ``platform_streams.state``)."""

    @property
    def name(self) -> str: ...

    @property
    def logging_enabled(self) -> bool: ...

    def changelog_topic_config(self) -> dict[str, str]: ...

    def build(self) -> Any: ...


class GlobalStoreSpec:
    """A global store: a topic read in full by every instance into a store."""

    def __init__(
        self,
        store_builder: StoreBuilderLike,
        source: SourceNode,
        processor: ProcessorNode,
    ) -> None:
        self.store_builder = store_builder
        self.source = source
        self.processor = processor


class Topology:
    """An acyclic graph of sources, processors and sinks (Kafka Streams' ``Topology``)."""

    def __init__(self) -> None:
        self._nodes: dict[str, Node] = {}
        self._stores: dict[str, StoreBuilderLike] = {}
        self._global_stores: dict[str, GlobalStoreSpec] = {}
        self._internal_topics: dict[str, InternalTopic] = {}
        self._copartition_groups: list[frozenset[str]] = []
        #: store name -> source topic reused as its changelog (topology_optimization)
        self._source_changelogs: dict[str, str] = {}

    # -- Processor API ---------------------------------------------------------------------

    def add_source(
        self,
        name: str,
        *topics: str | re.Pattern[str],
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        timestamp_extractor: Callable[[Any, Any, int, int], int] | None = None,
        offset_reset: Literal["earliest", "latest"] | None = None,
    ) -> Topology:
        """Add a source reading ``topics``, or one ``re.Pattern`` (every topic it matches, learnt
        from the broker's metadata); serdes default to the config's defaults."""
        if not topics:
            raise TopologyError(f"source {name!r} needs at least one topic")
        pattern = topics[0] if len(topics) == 1 and isinstance(topics[0], re.Pattern) else None
        names = [] if pattern is not None else [t for t in topics if isinstance(t, str)]
        if pattern is None and len(names) != len(topics):
            raise TopologyError(f"source {name!r}: topics are names or one re.Pattern, got {topics!r}")
        sources = [n for n in self._nodes.values() if isinstance(n, SourceNode)]
        taken = {t for n in sources for t in n.topics}
        for global_spec in self._global_stores.values():
            taken.update(global_spec.source.topics)
        dup = sorted(set(names) & taken)
        if dup:
            raise TopologyError(f"topic(s) {dup} are already read by another source")
        # Kafka's InternalTopologyBuilder.addSource / validateTopicNotAlreadyRegistered
        if pattern is not None and any(pattern.fullmatch(t) for t in taken):
            raise TopologyError(
                f"Pattern {pattern.pattern} will match a topic that has already been registered by "
                "another source."
            )
        for topic in names:
            if any(n.pattern is not None and n.pattern.fullmatch(topic) for n in sources):
                raise TopologyError(f"Topic {topic} matches a Pattern already registered by another source.")
        node = SourceNode(name, names, key_serde, value_serde, timestamp_extractor, offset_reset)
        node.pattern = pattern
        self._add(node)
        return self

    def add_processor(self, name: str, supplier: Callable[[], Any], *parent_names: str) -> Topology:
        """Add a processor made per task by ``supplier``, fed by ``parent_names``."""
        if not callable(supplier):
            raise TopologyError(f"processor {name!r}: supplier must be callable, got {supplier!r}")
        self._add(ProcessorNode(name, list(parent_names), supplier=supplier))
        return self

    def add_sink(
        self,
        name: str,
        topic: str | Callable[[Any, Any, Any], str],
        *parent_names: str,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
        partitioner: Callable[[str, Any, Any, int], int | None] | None = None,
    ) -> Topology:
        """Add a sink writing to ``topic`` (a name, or a function choosing one per record)."""
        if isinstance(topic, str):
            node = SinkNode(name, list(parent_names), topic=topic)
        else:
            node = SinkNode(name, list(parent_names), topic_extractor=topic)
        node.key_serde, node.value_serde, node.partitioner = key_serde, value_serde, partitioner
        self._add(node)
        return self

    def add_state_store(self, store_builder: StoreBuilderLike, *processor_names: str) -> Topology:
        """Register a store and connect it to the named processors."""
        name = store_builder.name
        if name in self._stores or name in self._global_stores:
            raise TopologyError(f"state store {name!r} is already added")
        self._stores[name] = store_builder
        if store_builder.logging_enabled and name not in self._source_changelogs:
            config = tuple(sorted(store_builder.changelog_topic_config().items()))
            self.add_internal_topic(InternalTopic(f"{name}-changelog", "changelog", None, config))
        self.connect_processor_and_state_stores_all(processor_names, name)
        return self

    def connect_processor_and_state_stores(self, processor_name: str, *store_names: str) -> Topology:
        """Give ``processor_name`` access to already-added stores."""
        for store in store_names:
            self.connect_processor_and_state_stores_all((processor_name,), store)
        return self

    def add_global_store(
        self,
        store_builder: StoreBuilderLike,
        source_name: str,
        topic: str,
        processor_name: str,
        state_update_supplier: Callable[[], Any],
        *,
        key_serde: Serde | None = None,
        value_serde: Serde | None = None,
    ) -> Topology:
        """Add a global store fed from ``topic`` on every instance (no tasks, no changelog)."""
        name = store_builder.name
        if name in self._stores or name in self._global_stores:
            raise TopologyError(f"state store {name!r} is already added")
        for node_name in (source_name, processor_name):
            if node_name in self._nodes or any(
                node_name in (g.source.name, g.processor.name) for g in self._global_stores.values()
            ):
                raise TopologyError(f"node {node_name!r} is already added")
        source = SourceNode(source_name, [topic], key_serde, value_serde, children=[processor_name])
        processor = ProcessorNode(
            processor_name, [source_name], supplier=state_update_supplier, stores=[name]
        )
        self._global_stores[name] = GlobalStoreSpec(store_builder, source, processor)
        return self

    def describe(self) -> TopologyDescription:
        """The graph as Kafka Streams' TopologyDescription (``print(topology.describe())``)."""
        from platform_streams.topology.compiler import compile_topology
        from platform_streams.topology.describe import TopologyDescription

        return TopologyDescription(compile_topology(self))

    # -- used by the DSL and the compiler -------------------------------------------------

    def add_stateless(self, name: str, op: StatelessOp, *parent_names: str) -> Topology:
        """Add a fusable stateless operator node (the DSL's filter, map, ...)."""
        self._add(ProcessorNode(name, list(parent_names), op=op))
        return self

    def add_internal_topic(self, topic: InternalTopic) -> None:
        existing = self._internal_topics.get(topic.name)
        if existing is not None and existing != topic:
            raise TopologyError(f"internal topic {topic.name!r} is declared twice with different settings")
        self._internal_topics[topic.name] = topic

    def add_copartition_group(self, topics: Iterable[str]) -> None:
        """Declare that ``topics`` must have equal partition counts (joins)."""
        self._copartition_groups.append(frozenset(topics))

    def use_source_topic_as_changelog(self, store_name: str, topic: str) -> None:
        """Reuse a KTable's source topic as its store's changelog (topology_optimization)."""
        self._source_changelogs[store_name] = topic
        self._internal_topics.pop(f"{store_name}-changelog", None)

    def connect_processor_and_state_stores_all(self, processor_names: Iterable[str], store: str) -> None:
        if store not in self._stores:
            raise TopologyError(f"state store {store!r} is not added to the topology")
        for pname in processor_names:
            node = self._nodes.get(pname)
            if not isinstance(node, ProcessorNode):
                raise TopologyError(f"cannot connect store {store!r}: {pname!r} is not a processor")
            if store not in node.stores:
                node.stores.append(store)

    # -- used by the DSL's optimizer (platform_streams.dsl.optimizer) ---------------------

    def remove_node(self, name: str, *, orphan_children: bool = False) -> None:
        """Remove a node (and detach it from its parents); its children must be re-parented
        with :meth:`reparent` afterwards when ``orphan_children``, else it must have none."""
        node = self.node(name)
        if node.children and not orphan_children:
            raise TopologyError(f"cannot remove node {name!r}: it still has children {node.children}")
        for parent_name in node.parents:
            self._nodes[parent_name].children.remove(name)
        del self._nodes[name]

    def reparent(self, child: str, old_parent: str, new_parent: str) -> None:
        """Make ``new_parent`` feed ``child`` in place of ``old_parent`` (same position)."""
        node = self.node(child)
        if not isinstance(node, ProcessorNode | SinkNode):
            raise TopologyError(f"node {child!r} has no parents to replace")
        node.parents[node.parents.index(old_parent)] = new_parent
        old = self._nodes.get(old_parent)  # None: removed already (a replaced repartition source)
        if old is not None and child in old.children:
            old.children.remove(child)
        target = self.node(new_parent)
        if isinstance(target, SinkNode):
            raise TopologyError(f"node {child!r}: parent {new_parent!r} is a sink")
        target.children.append(child)

    def move_after(self, anchor: str, names: list[str]) -> None:
        """Place ``names`` right after ``anchor`` in node order (Kafka's build priority)."""
        moved = {name: self._nodes.pop(name) for name in names}
        reordered: dict[str, Node] = {}
        for name, node in self._nodes.items():
            reordered[name] = node
            if name == anchor:
                reordered.update(moved)
        self._nodes = reordered

    def remove_internal_topic(self, name: str) -> None:
        """Forget internal topic ``name`` (its nodes were removed or rewired to another)."""
        self._internal_topics.pop(name, None)

    def rename_topic_in_copartition_groups(self, old: str, new: str) -> None:
        """Co-partitioning requirements on ``old`` now apply to ``new`` (merged repartition topics)."""
        self._copartition_groups = [
            (group - {old}) | {new} if old in group else group for group in self._copartition_groups
        ]

    def node(self, name: str) -> Node:
        try:
            return self._nodes[name]
        except KeyError:
            raise TopologyError(f"no node named {name!r}") from None

    @property
    def nodes(self) -> dict[str, Node]:
        return self._nodes

    @property
    def stores(self) -> dict[str, StoreBuilderLike]:
        return self._stores

    @property
    def global_stores(self) -> dict[str, GlobalStoreSpec]:
        return self._global_stores

    @property
    def internal_topics(self) -> dict[str, InternalTopic]:
        return self._internal_topics

    @property
    def copartition_groups(self) -> list[frozenset[str]]:
        return self._copartition_groups

    @property
    def source_changelogs(self) -> dict[str, str]:
        return self._source_changelogs

    def _add(self, node: Node) -> None:
        if node.name in self._nodes:
            raise TopologyError(f"node {node.name!r} is already added")
        for parent_name in node.parents:
            parent = self._nodes.get(parent_name)
            if parent is None:
                raise TopologyError(f"node {node.name!r}: parent {parent_name!r} is not added yet")
            if isinstance(parent, SinkNode):
                raise TopologyError(f"node {node.name!r}: parent {parent_name!r} is a sink")
        self._nodes[node.name] = node
        for parent_name in node.parents:
            parent = self._nodes[parent_name]
            assert not isinstance(parent, SinkNode)
            parent.children.append(node.name)


def built_topology(made: Any) -> Topology | None:
    """What an application factory returned, as a topology: a :class:`Topology` as it is,
    anything with ``build()`` (a ``StreamsBuilder``) built, None for anything else (the
    caller names the app in its own error)."""
    if not isinstance(made, Topology) and hasattr(made, "build"):
        made = made.build()
    return made if isinstance(made, Topology) else None
