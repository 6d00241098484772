"""``TopologyDescription``: Kafka Streams' text rendering of a compiled topology.

The text is byte-for-byte Kafka Streams' ``TopologyDescription.toString()`` so tools
and habits built around Java descriptions keep working: nodes sorted by sub-tree size
then name, each sub-topology followed by a blank line (global stores are not), and the
``-->``/``<--`` lists in the order Java's ``TreeSet``\\ s end up in (see
:mod:`platform_streams.topology.java_order` for why that needs emulating).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from platform_streams.topology.compiler import TopologyPlan
from platform_streams.topology.java_order import JavaTreeSet, hash_order
from platform_streams.topology.nodes import Node, ProcessorNode, SinkNode, SourceNode


class _Links:
    """Sizes, successors and predecessors as Kafka Streams' ``describeSubtopology`` builds them.

    Nodes are connected in ``HashMap`` order of their names; each connection adds the
    child's current sub-tree size to the parent and its ancestors, and inserts into
    ``TreeSet``\\ s whose comparator reads those still-growing sizes.
    """

    def __init__(self, nodes: Sequence[Node]) -> None:
        by_name = {n.name: n for n in nodes}
        self.size = dict.fromkeys(by_name, 1)
        self.successors = {name: JavaTreeSet[str](self._compare) for name in by_name}
        self.predecessors = {name: JavaTreeSet[str](self._compare) for name in by_name}
        for name in hash_order(list(by_name)):
            for parent in by_name[name].parents:
                if parent not in by_name:
                    continue
                self.predecessors[name].add(parent)
                self.successors[parent].add(name)
                self._grow(parent, self.size[name])

    def _compare(self, a: str, b: str) -> int:
        if a == b:
            return 0
        if self.size[a] != self.size[b]:
            return self.size[b] - self.size[a]
        return -1 if a < b else 1

    def _grow(self, name: str, delta: int) -> None:
        self.size[name] += delta
        for parent in self.predecessors[name]:
            self._grow(parent, delta)

    def ordered(self, nodes: Sequence[Node]) -> list[Node]:
        """Final order of a sub-topology's nodes: largest sub-tree first, then by name."""
        return sorted(nodes, key=lambda n: (-self.size[n.name], n.name))


def _names(names: Sequence[str] | JavaTreeSet[str]) -> str:
    listed = list(names)
    return ", ".join(listed) if listed else "none"


def _source_text(node: SourceNode, successors: Sequence[str] | JavaTreeSet[str]) -> str:
    # Kafka's Source.toString: a pattern source shows its regex, not a topic list
    topics = node.pattern.pattern if node.pattern is not None else f"[{', '.join(hash_order(node.topics))}]"
    return f"Source: {node.name} (topics: {topics})\n      --> {_names(successors)}"


def _processor_text(
    node: ProcessorNode,
    successors: Sequence[str] | JavaTreeSet[str],
    predecessors: Sequence[str] | JavaTreeSet[str],
) -> str:
    return (
        f"Processor: {node.name} (stores: [{', '.join(hash_order(node.stores))}])\n"
        f"      --> {_names(successors)}\n"
        f"      <-- {_names(predecessors)}"
    )


def _sink_text(node: SinkNode, predecessors: Sequence[str] | JavaTreeSet[str]) -> str:
    if node.topic is not None:
        target = f"topic: {node.topic}"
    else:
        # Java prints the extractor object (its class name); a function's qualified name is ours
        extractor = node.topic_extractor
        module = getattr(extractor, "__module__", "?")
        target = f"extractor class: {module}.{getattr(extractor, '__qualname__', repr(extractor))}"
    return f"Sink: {node.name} ({target})\n      <-- {_names(predecessors)}"


def _node_text(node: Node, links: _Links) -> str:
    if isinstance(node, SourceNode):
        return _source_text(node, links.successors[node.name])
    if isinstance(node, ProcessorNode):
        return _processor_text(node, links.successors[node.name], links.predecessors[node.name])
    return _sink_text(node, links.predecessors[node.name])


@dataclass(frozen=True)
class SubtopologyDescription:
    """One sub-topology (nodes in topology insertion order), or a global store's two nodes."""

    id: int
    nodes: tuple[Node, ...]
    for_global_store: bool = False

    def __str__(self) -> str:
        if self.for_global_store:
            source, processor = self.nodes
            assert isinstance(source, SourceNode) and isinstance(processor, ProcessorNode)
            return (
                f"Sub-topology: {self.id} for global store (will not generate tasks)\n"
                f"    {_source_text(source, [processor.name])}\n"
                f"    {_processor_text(processor, [], [source.name])}\n"
            )
        links = _Links(self.nodes)
        body = "".join(f"    {_node_text(n, links)}\n" for n in links.ordered(self.nodes))
        return f"Sub-topology: {self.id}\n{body}\n"

    def ordered_node_names(self) -> list[str]:
        """Node names in the order ``str()`` prints them."""
        if self.for_global_store:
            return [n.name for n in self.nodes]
        return [n.name for n in _Links(self.nodes).ordered(self.nodes)]


class TopologyDescription:
    """What ``Topology.describe()`` returns; ``str()`` gives Kafka Streams' text."""

    def __init__(self, plan: TopologyPlan) -> None:
        position = {name: i for i, name in enumerate(plan.topology.nodes)}
        self._subtopologies = [
            SubtopologyDescription(s.id, tuple(sorted(s.nodes, key=lambda n: position[n.name])))
            for s in plan.subtopologies
        ]
        first_global = len(plan.subtopologies)
        self._global_stores = [
            SubtopologyDescription(first_global + i, (g.source, g.processor), for_global_store=True)
            for i, g in enumerate(plan.global_stores)
        ]

    def subtopologies(self) -> list[SubtopologyDescription]:
        return list(self._subtopologies)

    def global_stores(self) -> list[SubtopologyDescription]:
        return list(self._global_stores)

    def __str__(self) -> str:
        return "Topologies:\n " + "".join(f"  {s}" for s in self._subtopologies + self._global_stores)

    def __repr__(self) -> str:
        return str(self)
