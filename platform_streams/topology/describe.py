"""``TopologyDescription``: Kafka Streams' text rendering of a compiled topology.

The format (indentation, ``-->``/``<--`` arrows, node ordering by sub-tree size
then name) matches Kafka Streams' ``TopologyDescription.toString()`` so tools and
habits built around Java descriptions keep working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from platform_streams.topology.compiler import TopologyPlan
from platform_streams.topology.nodes import Node, ProcessorNode, SinkNode, SourceNode


@dataclass(frozen=True)
class SubtopologyDescription:
    """One sub-topology's nodes, rendered in Kafka Streams' order."""

    id: int
    nodes: tuple[Node, ...]
    for_global_store: bool = False

    def __str__(self) -> str:
        if self.for_global_store:
            header = f"Sub-topology: {self.id} for global store (will not generate tasks)\n"
        else:
            header = f"Sub-topology: {self.id}\n"
        return header + "".join(f"    {_node_text(n, self._sizes())}\n" for n in self._ordered())

    def _sizes(self) -> Mapping[str, int]:
        by_name = {n.name: n for n in self.nodes}

        @cache
        def size(name: str) -> int:
            return 1 + sum(size(c) for c in by_name[name].children if c in by_name)

        return {n.name: size(n.name) for n in self.nodes}

    def _ordered(self) -> list[Node]:
        sizes = self._sizes()
        return sorted(self.nodes, key=lambda n: (-sizes[n.name], n.name))


def _names(names: list[str], sizes: Mapping[str, int]) -> str:
    if not names:
        return "none"
    return ", ".join(sorted(names, key=lambda n: (-sizes.get(n, 1), n)))


def _node_text(node: Node, sizes: Mapping[str, int]) -> str:
    if isinstance(node, SourceNode):
        topics = ", ".join(node.topics)
        return f"Source: {node.name} (topics: [{topics}])\n      --> {_names(node.children, sizes)}"
    if isinstance(node, ProcessorNode):
        return (
            f"Processor: {node.name} (stores: [{', '.join(node.stores)}])\n"
            f"      --> {_names(node.children, sizes)}\n"
            f"      <-- {_names(node.parents, sizes)}"
        )
    assert isinstance(node, SinkNode)
    target = (
        f"topic: {node.topic}" if node.topic is not None else f"extractor class: {node.topic_extractor!r}"
    )
    return f"Sink: {node.name} ({target})\n      <-- {_names(node.parents, sizes)}"


class TopologyDescription:
    """What ``Topology.describe()`` returns; ``str()`` gives Kafka Streams' text."""

    def __init__(self, plan: TopologyPlan) -> None:
        self._subtopologies = [SubtopologyDescription(s.id, tuple(s.nodes)) for s in plan.subtopologies]
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
        return "Topologies:\n " + "".join(f"  {s}\n" for s in self._subtopologies + self._global_stores)

    def __repr__(self) -> str:
        return str(self)
