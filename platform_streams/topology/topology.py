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
    from platform_streams.config import StreamsConfig
    from platform_streams.processor.wrapper import ProcessorWrapper
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

    def __init__(self, config: StreamsConfig | None = None) -> None:
        """``config``'s ``processor_wrapper`` (Kafka's ``new Topology(TopologyConfig)``)
        wraps every processor added from here on."""
        self._nodes: dict[str, Node] = {}
        self._stores: dict[str, StoreBuilderLike] = {}
        self._global_stores: dict[str, GlobalStoreSpec] = {}
        self._internal_topics: dict[str, InternalTopic] = {}
        self._copartition_groups: list[frozenset[str]] = []
        #: store name -> source topic reused as its changelog (topology_optimization)
        self._source_changelogs: dict[str, str] = {}
        self._wrapper: ProcessorWrapper | None = None
        if config is not None and config.processor_wrapper is not None:
            from platform_streams.processor.wrapper import make_processor_wrapper

            self._wrapper = make_processor_wrapper(config.processor_wrapper, dict(config))
        #: processor -> the stores ``add_state_store`` gave it (what its ``stores()`` returns
        #: to a wrapper; stores connected by name are not among them, as in Kafka)
        self._provided: dict[str, list[str]] = {}
        #: while the DSL lowers its plan: processors whose wrapped ``stores()`` is asked once
        #: the plan's stores are connected (:meth:`finish_lowering`)
        self._pending: list[str] | None = None

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
        """Add a processor made per task by ``supplier``, fed by ``parent_names``; the store
        builders of the supplier's ``stores()`` (if it has one) are added and connected to it,
        as Kafka's ``addProcessor`` does. A configured processor wrapper wraps ``supplier``."""
        if not callable(supplier):
            raise TopologyError(f"processor {name!r}: supplier must be callable, got {supplier!r}")
        wrapped = self._wrap(name, supplier)
        self._add(ProcessorNode(name, list(parent_names), supplier=wrapped))
        if self._pending is not None:
            self._pending.append(name)
        else:
            self._connect_supplied_stores(name, wrapped)
        return self

    def _wrap(self, name: str, supplier: Callable[[], Any]) -> Callable[[], Any]:
        if self._wrapper is None:
            return supplier
        from platform_streams.processor.fixed_key import FixedKeySupplier
        from platform_streams.processor.wrapper import dsl_supplier

        if isinstance(supplier, FixedKeySupplier):
            inner = self._wrapper.wrap_fixed_key_processor_supplier(name, supplier.supplier)
            if inner is supplier.supplier:
                return supplier
            return FixedKeySupplier(inner, name)
        if self._pending is not None:  # a DSL node: its supplier speaks the Processor API
            supplier = dsl_supplier(supplier, lambda: self._provided_builders(name))
        return self._wrapper.wrap_processor_supplier(name, supplier)

    def _provided_builders(self, name: str) -> list[StoreBuilderLike]:
        return [self._stores[store] for store in self._provided.get(name, ())]

    def _connect_supplied_stores(self, name: str, supplier: Any) -> None:
        provided = getattr(supplier, "stores", None)
        for store_builder in (provided() if callable(provided) else None) or ():
            self.add_state_store(store_builder, name)

    def begin_lowering(self) -> None:
        """The DSL starts writing its plan here: a wrapper's ``stores()`` waits for the
        plan's own store connections (:meth:`finish_lowering`)."""
        self._pending = []

    def finish_lowering(self) -> None:
        pending, self._pending = self._pending or [], None
        for name in pending:
            node = self._nodes.get(name)
            if isinstance(node, ProcessorNode) and node.supplier is not None:
                self._connect_supplied_stores(name, node.supplier)

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
        if self._stores.get(name) is store_builder:
            # the same builder again (two suppliers' ``stores()`` sharing it): connect only,
            # as Kafka's addStateStore does for a compatible store factory
            self._provide(processor_names, name)
            self.connect_processor_and_state_stores_all(processor_names, name)
            return self
        if name in self._stores or name in self._global_stores:
            raise TopologyError(f"state store {name!r} is already added")
        self._stores[name] = store_builder
        if store_builder.logging_enabled and name not in self._source_changelogs:
            config = tuple(sorted(store_builder.changelog_topic_config().items()))
            self.add_internal_topic(InternalTopic(f"{name}-changelog", "changelog", None, config))
        self._provide(processor_names, name)
        self.connect_processor_and_state_stores_all(processor_names, name)
        return self

    def _provide(self, processor_names: Iterable[str], store: str) -> None:
        for processor in processor_names:
            provided = self._provided.setdefault(processor, [])
            if store not in provided:
                provided.append(store)

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
        """Add a fusable stateless operator node (the DSL's filter, map, ...); with a processor
        wrapper, a processor node running ``op`` that the wrapper wraps."""
        if self._wrapper is not None:
            from platform_streams.processor.wrapper import StatelessOpProcessor

            return self.add_processor(name, lambda: StatelessOpProcessor(name, op), *parent_names)
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
