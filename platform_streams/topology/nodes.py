"""The logical graph's node definitions: sources, processors, sinks.

A node definition is what the topology *describes*; the runtime turns each into
something callable per task (see ``platform_streams.processor.graph``). Stateless
DSL operators carry a :class:`StatelessOp` instead of a processor supplier so the
runtime can fuse chains of them into one generated function per record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from platform_streams.serde import Serde

#: Stateless operator kinds the fusion compiler knows how to inline.
OpKind = Literal[
    "filter",
    "filter_not",
    "map",
    "map_values",
    "map_values_with_key",
    "flat_map",
    "flat_map_values",
    "flat_map_values_with_key",
    "select_key",
    "peek",
    "foreach",
    "branch",
    "passthrough",
]


@dataclass(frozen=True)
class StatelessOp:
    """A stateless operator: its kind and the user function(s) it applies.

    ``fns`` holds one function for most kinds; for ``branch`` it holds one
    predicate per branch, in order, and ``has_default`` says whether the last
    child takes records no predicate matched.
    """

    kind: OpKind
    fns: tuple[Callable[..., Any], ...] = ()
    has_default: bool = False


@dataclass
class SourceNode:
    """Reads one or more topics (or a pattern) and deserializes records."""

    name: str
    topics: list[str]
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    timestamp_extractor: Callable[[Any, Any, int, int], int] | None = None
    offset_reset: Literal["earliest", "latest"] | None = None
    children: list[str] = field(default_factory=list)
    #: a regex subscription (``topics`` is then empty): the topics it matches are learnt from
    #: the broker's metadata by :meth:`TopologyPlan.subscribe`, as Kafka's ``SourceNodeFactory``
    pattern: re.Pattern[str] | None = None

    @property
    def parents(self) -> list[str]:
        return []

    @property
    def subscription(self) -> str:
        """How Kafka names what this source reads in a description and in co-partition groups
        of a pattern source before its topics are known: the regex itself."""
        return pattern_token(self.pattern) if self.pattern is not None else ",".join(self.topics)


def pattern_token(pattern: re.Pattern[str]) -> str:
    """The place-holder topic of a pattern source: Kafka's ``String.valueOf(pattern)``, what
    ``SourceNodeFactory.topics`` and the TopologyTestDriver use until topics are known. The
    ``:`` keeps it apart from every real topic name (Kafka's legal characters exclude it)."""
    return f"pattern:{pattern.pattern}"


@dataclass
class ProcessorNode:
    """A processor: either a fusable stateless op or a supplier of processors.

    ``supplier`` returns a :class:`platform_streams.processor.Processor` (Record
    based, the public API) or a :class:`platform_streams.processor.node.NodeProcessor`
    (field based, used by the DSL's own stateful operators for speed).
    """

    name: str
    parents: list[str]
    op: StatelessOp | None = None
    supplier: Callable[[], Any] | None = None
    stores: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


@dataclass
class SinkNode:
    """Serializes records and writes them to a topic (or a topic chosen per record)."""

    name: str
    parents: list[str]
    topic: str | None = None
    topic_extractor: Callable[[Any, Any, Any], str] | None = None
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    partitioner: Callable[[str, Any, Any, int], int | None] | None = None

    @property
    def children(self) -> list[str]:
        return []


Node = SourceNode | ProcessorNode | SinkNode


@dataclass(frozen=True)
class InternalTopic:
    """A topic the application owns: a repartition or changelog topic.

    ``name`` is the suffix-less logical name (e.g. ``count-store-changelog`` or
    ``KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition``); the physical name is
    ``<application_id>-<name>``. ``num_partitions`` None means "derive from the
    co-partitioned source topics at start-up".
    """

    name: str
    kind: Literal["repartition", "changelog"]
    num_partitions: int | None = None
    config: tuple[tuple[str, str], ...] = ()

    def physical_name(self, application_id: str) -> str:
        return f"{application_id}-{self.name}"


def repartition_topic_config() -> tuple[tuple[str, str], ...]:
    """Kafka Streams' repartition topic defaults: deleted once consumed, kept briefly."""
    return (
        ("cleanup.policy", "delete"),
        ("segment.bytes", "52428800"),
        ("retention.ms", "-1"),
    )


def names(nodes: Sequence[Node]) -> list[str]:
    return [n.name for n in nodes]
