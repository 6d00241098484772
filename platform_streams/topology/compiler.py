"""Compile a :class:`Topology` into sub-topologies and resolve internal topic sizes.

Sub-topologies are the connected parts of the graph (nodes linked by edges or by a
shared state store); repartition topics are the only links between them. This is
the plan both the runtime and ``describe()`` read, so what is described is what runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from platform_streams.errors import CoPartitioningError, MissingSourceTopicError, TopologyError
from platform_streams.topology.nodes import (
    InternalTopic,
    Node,
    ProcessorNode,
    SinkNode,
    SourceNode,
    pattern_token,
)
from platform_streams.topology.topology import GlobalStoreSpec, Topology


@dataclass
class SubTopologyPlan:
    """One sub-topology: its nodes in topological order, topics and stores."""

    id: int
    nodes: list[Node]
    source_topics: list[str]
    sink_topics: list[str]
    stores: list[str]
    sources_by_topic: dict[str, SourceNode] = field(default_factory=dict)
    #: every source node, in order (a pattern source's topics change with the metadata)
    sources: list[SourceNode] = field(default_factory=list)

    def node_names(self) -> list[str]:
        return [n.name for n in self.nodes]


@dataclass
class TopologyPlan:
    """The compiled topology: sub-topologies, global stores and internal topics."""

    topology: Topology
    subtopologies: list[SubTopologyPlan]
    global_stores: list[GlobalStoreSpec]
    internal_topics: dict[str, InternalTopic]

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Give every pattern source the topics of ``topics`` (a metadata listing) it matches;
        True if any source's topics changed. The plan is changed in place: every part of a
        client holding it sees the new topics. Until the first call a pattern source reads its
        place-holder topic (:func:`pattern_token`), as Kafka's ``SourceNodeFactory.topics``.

        A topic another source reads by name, a broker-internal ``__`` topic, or one of this
        application's internal topics is never matched; a topic two patterns match is refused
        with Kafka's message.
        """
        patterns = [s for sub in self.subtopologies for s in sub.sources if s.pattern is not None]
        if not patterns:
            return False
        named = {t for sub in self.subtopologies for s in sub.sources for t in s.topics}
        named.update(self.global_source_topics())
        matched: dict[int, list[str]] = {id(s): [] for s in patterns}
        for topic in sorted(set(topics)):
            if topic.startswith("__") or topic in named or topic in self.internal_topics:
                continue
            hits = [s for s in patterns if s.pattern is not None and s.pattern.fullmatch(topic)]
            if len(hits) > 1:
                first, second = (h.pattern.pattern for h in hits[:2] if h.pattern is not None)
                raise TopologyError(
                    f"Topic {topic} is already matched for another regex pattern {first} and hence "
                    f"cannot be matched to this regex pattern {second} any more."
                )
            if hits:
                matched[id(hits[0])].append(topic)
        changed = False
        for sub in self.subtopologies:
            by_topic = {
                t: s for s in sub.sources for t in (matched[id(s)] if s.pattern is not None else s.topics)
            }
            if list(by_topic) != sub.source_topics:
                changed = True
                sub.source_topics[:] = list(by_topic)
                sub.sources_by_topic.clear()
                sub.sources_by_topic.update(by_topic)
        return changed

    def pattern_topics(self, topic: str) -> list[str]:
        """The topics standing for ``topic`` in a co-partition group: a pattern source's
        place-holder stands for the topics it matches now, a topic for itself."""
        for sub in self.subtopologies:
            for source in sub.sources:
                if source.pattern is not None and pattern_token(source.pattern) == topic:
                    return [t for t, s in sub.sources_by_topic.items() if s is source]
        return [topic]

    def is_internal(self, topic: str) -> bool:
        return topic in self.internal_topics

    def physical_topic(self, topic: str, application_id: str) -> str:
        """Internal topics are named ``<application_id>-<name>``; user topics as given."""
        return f"{application_id}-{topic}" if topic in self.internal_topics else topic

    def repartition_topics(self, application_id: str) -> frozenset[str]:
        """The physical names of this application's repartition topics."""
        return frozenset(
            self.physical_topic(name, application_id)
            for name, t in self.internal_topics.items()
            if t.kind == "repartition"
        )

    def external_source_topics(self) -> list[str]:
        """The user topics read, by name or matched by a pattern (a pattern's place-holder,
        before :meth:`subscribe`, is no topic: tools reading the plan without the broker's
        topic list must not look for it)."""
        return sorted(
            {
                t
                for s in self.subtopologies
                for t in s.source_topics
                if t not in self.internal_topics and not _is_place_holder(t)
            }
        )

    def external_sink_topics(self) -> list[str]:
        return sorted({t for s in self.subtopologies for t in s.sink_topics if t not in self.internal_topics})

    def global_source_topics(self) -> list[str]:
        return sorted({t for g in self.global_stores for t in g.source.topics})

    def changelog_topic(self, store: str) -> str | None:
        """Logical changelog topic of ``store`` (a source topic when reused), None if not logged."""
        reused = self.topology.source_changelogs.get(store)
        if reused is not None:
            return reused
        name = f"{store}-changelog"
        return name if name in self.internal_topics else None

    def subtopology_of_store(self, store: str) -> SubTopologyPlan:
        for sub in self.subtopologies:
            if store in sub.stores:
                return sub
        raise TopologyError(f"state store {store!r} is not connected to any processor")

    def resolve_partitions(self, existing: Mapping[str, int | None]) -> dict[str, int]:
        """Partition counts for every internal topic, given the user topics' counts.

        Mirrors Kafka Streams: a repartition topic gets the largest partition count of
        the source topics of the sub-topology writing it (unless set explicitly), a
        changelog gets its sub-topology's task count, and co-partitioned topics must
        agree. Raises :class:`MissingSourceTopicError` or :class:`CoPartitioningError`.
        """
        missing = [
            t for t in self.external_source_topics() + self.global_source_topics() if not existing.get(t)
        ]
        if missing:
            raise MissingSourceTopicError(sorted(set(missing)))
        counts: dict[str, int] = {t: int(existing[t] or 0) for t in existing if existing[t]}
        for topic in self.internal_topics.values():
            if topic.kind == "repartition" and topic.num_partitions:
                counts[topic.name] = topic.num_partitions
        self._resolve_repartition_counts(counts)
        self._enforce_copartitioning(counts)
        for sub in self.subtopologies:
            tasks = max((counts[t] for t in sub.source_topics), default=1)
            for store in sub.stores:
                changelog = f"{store}-changelog"
                if changelog in self.internal_topics:
                    counts[changelog] = tasks
        return {name: counts[name] for name in self.internal_topics}

    def _resolve_repartition_counts(self, counts: dict[str, int]) -> None:
        pending = {
            t.name for t in self.internal_topics.values() if t.kind == "repartition" and t.name not in counts
        }
        while pending:
            progressed = False
            for name in sorted(pending):
                writers = [s for s in self.subtopologies if name in s.sink_topics]
                sources = [t for s in writers for t in s.source_topics]
                if writers and all(t in counts for t in sources):
                    counts[name] = max((counts[t] for t in sources), default=1)
                    pending.discard(name)
                    progressed = True
            if not progressed and not self._size_one_from_known_sources(pending, counts):
                raise TopologyError(f"cannot size repartition topics {sorted(pending)}: no upstream source")

    def _size_one_from_known_sources(self, pending: set[str], counts: dict[str, int]) -> bool:
        """Break a cycle through internal topics (a foreign-key join's subscription and response
        topics each feed the other's writer): size one topic from the sources already known, as
        Kafka's ``RepartitionTopics`` does; co-partitioning then sets the final count."""
        for name in sorted(pending):
            writers = [s for s in self.subtopologies if name in s.sink_topics]
            known = [counts[t] for s in writers for t in s.source_topics if t in counts]
            if known:
                counts[name] = max(known)
                pending.discard(name)
                return True
        return False

    def _enforce_copartitioning(self, counts: dict[str, int]) -> None:
        for declared in self.topology.copartition_groups:
            group = frozenset(t for topic in declared for t in self.pattern_topics(topic))
            external = {t: counts[t] for t in group if t not in self.internal_topics}
            flexible = [
                t for t in group if t in self.internal_topics and not self.internal_topics[t].num_partitions
            ]
            if len(set(external.values())) > 1:
                raise CoPartitioningError({t: counts[t] for t in sorted(group)})
            target = next(iter(external.values()), max(counts[t] for t in group))
            for t in flexible:
                counts[t] = target
            if len({counts[t] for t in group}) > 1:
                raise CoPartitioningError({t: counts[t] for t in sorted(group)})


def compile_topology(topology: Topology) -> TopologyPlan:
    """Split ``topology`` into sub-topologies, numbered by their first node's position."""
    nodes = topology.nodes
    if not nodes and not topology.global_stores:
        raise TopologyError("the topology is empty: add a source (builder.stream/table) first")
    order = {name: i for i, name in enumerate(nodes)}
    parent = {name: name for name in nodes}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            if order[ra] < order[rb]:
                parent[rb] = ra
            else:
                parent[ra] = rb

    store_owner: dict[str, str] = {}
    for node in nodes.values():
        for p in node.parents:
            union(p, node.name)
        if isinstance(node, ProcessorNode):
            for store in node.stores:
                if store not in topology.stores:
                    raise TopologyError(f"processor {node.name!r} uses unknown store {store!r}")
                if store in store_owner:
                    union(store_owner[store], node.name)
                else:
                    store_owner[store] = node.name
    groups: dict[str, list[Node]] = {}
    for name, node in nodes.items():
        groups.setdefault(find(name), []).append(node)
    subtopologies = []
    for sub_id, root in enumerate(sorted(groups, key=lambda r: order[r])):
        members = groups[root]
        sources = [n for n in members if isinstance(n, SourceNode)]
        if not sources:
            raise TopologyError(f"nodes {[n.name for n in members]} are not connected to any source")
        by_topic = {t: s for s in sources for t in _initial_topics(s)}
        subtopologies.append(
            SubTopologyPlan(
                id=sub_id,
                nodes=_topological(members, nodes),
                source_topics=list(by_topic),
                sink_topics=[n.topic for n in members if isinstance(n, SinkNode) and n.topic is not None],
                stores=sorted({st for n in members if isinstance(n, ProcessorNode) for st in n.stores}),
                sources_by_topic=by_topic,
                sources=sources,
            )
        )
    return TopologyPlan(
        topology, subtopologies, list(topology.global_stores.values()), topology.internal_topics
    )


def _is_place_holder(topic: str) -> bool:
    return topic.startswith("pattern:")


def _initial_topics(source: SourceNode) -> list[str]:
    return [pattern_token(source.pattern)] if source.pattern is not None else source.topics


def _topological(members: list[Node], nodes: Mapping[str, Node]) -> list[Node]:
    """Depth-first from each source in insertion order, parents before children."""
    member_names = {n.name for n in members}
    seen: set[str] = set()
    result: list[Node] = []

    def visit(node: Node) -> None:
        if node.name in seen or any(p not in seen for p in node.parents if p in member_names):
            return
        seen.add(node.name)
        result.append(node)
        for child in node.children:
            visit(nodes[child])

    for node in members:
        if isinstance(node, SourceNode):
            visit(node)
    return result
