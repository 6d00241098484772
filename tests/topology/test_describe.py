"""``Topology.describe()`` must print exactly what Kafka Streams prints for the same graph.

The expected texts are real Kafka Streams outputs (Kafka's own test suite and published
applications); the graphs are rebuilt here with the same node names, through the DSL
where our DSL names nodes the same way, and through the Processor API otherwise.
"""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Branched, Consumed, Materialized, Named, Produced, Repartitioned
from platform_streams.processor import Processor, Record
from platform_streams.serde import Long, String
from platform_streams.topology.java_order import JavaTreeSet, hash_order, java_string_hash


class _Noop(Processor):
    def process(self, record: Record) -> None:
        """Describe tests never run records."""


class _FakeStoreBuilder:
    """Just enough of a store builder for describe(): a name, no changelog."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.logging_enabled = False

    def changelog_topic_config(self) -> dict[str, str]:
        return {}

    def build(self) -> Any:
        raise AssertionError("describe() must not build stores")


def _processors(topology: Topology, *edges: tuple[str, str | tuple[str, ...]]) -> None:
    for name, parents in edges:
        topology.add_processor(name, _Noop, *((parents,) if isinstance(parents, str) else parents))


def _lines(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


# The WordCount application of the Kafka Streams tutorial (docs/streams/tutorial), as printed there.
WORD_COUNT = _lines(
    "Topologies:",
    "   Sub-topology: 0",
    "    Source: KSTREAM-SOURCE-0000000000 (topics: [streams-wordcount-input])",
    "      --> KSTREAM-FLATMAPVALUES-0000000001",
    "    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])",
    "      --> KSTREAM-KEY-SELECT-0000000002",
    "      <-- KSTREAM-SOURCE-0000000000",
    "    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])",
    "      --> counts-store-repartition-filter",
    "      <-- KSTREAM-FLATMAPVALUES-0000000001",
    "    Processor: counts-store-repartition-filter (stores: [])",
    "      --> counts-store-repartition-sink",
    "      <-- KSTREAM-KEY-SELECT-0000000002",
    "    Sink: counts-store-repartition-sink (topic: counts-store-repartition)",
    "      <-- counts-store-repartition-filter",
    "",
    "  Sub-topology: 1",
    "    Source: counts-store-repartition-source (topics: [counts-store-repartition])",
    "      --> KSTREAM-AGGREGATE-0000000003",
    "    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts-store])",
    "      --> KTABLE-TOSTREAM-0000000007",
    "      <-- counts-store-repartition-source",
    "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])",
    "      --> KSTREAM-SINK-0000000008",
    "      <-- KSTREAM-AGGREGATE-0000000003",
    "    Sink: KSTREAM-SINK-0000000008 (topic: streams-wordcount-output)",
    "      <-- KTABLE-TOSTREAM-0000000007",
    "",
)


def test_word_count_tutorial_matches_kafka_streams() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("streams-wordcount-input")
        .flat_map_values(lambda value: value.lower().split())
        .group_by(lambda key, value: value)
        .count(materialized=Materialized.as_("counts-store"))
        .to_stream()
        .to("streams-wordcount-output", Produced(key_serde=String(), value_serde=Long()))
    )
    assert str(builder.build().describe()) == WORD_COUNT


# The first lines of both RepartitionWithMergeOptimizingTest expectations below: two sources,
# each mapped, merged into one stream.
_MERGED_SOURCES = (
    "Topologies:",
    "   Sub-topology: 0",
    "    Source: sourceAStream (topics: [inputA])",
    "      --> mappedAStream",
    "    Source: sourceBStream (topics: [inputB])",
    "      --> mappedBStream",
    "    Processor: mappedAStream (stores: [])",
    "      --> mergedStream",
    "      <-- sourceAStream",
    "    Processor: mappedBStream (stores: [])",
    "      --> mergedStream",
    "      <-- sourceBStream",
    "    Processor: mergedStream (stores: [])",
)

# apache/kafka RepartitionWithMergeOptimizingTest.EXPECTED_OPTIMIZED_TOPOLOGY. The source of
# sub-topology 1 lists "long-count, string-count" although string-count's final sub-tree is
# larger: Java inserts successors while sizes are still growing (see java_order).
OPTIMIZED_MERGE = _lines(
    *_MERGED_SOURCES,
    "      --> long-groupByKey-repartition-filter",
    "      <-- mappedAStream, mappedBStream",
    "    Processor: long-groupByKey-repartition-filter (stores: [])",
    "      --> long-groupByKey-repartition-sink",
    "      <-- mergedStream",
    "    Sink: long-groupByKey-repartition-sink (topic: long-groupByKey-repartition)",
    "      <-- long-groupByKey-repartition-filter",
    "",
    "  Sub-topology: 1",
    "    Source: long-groupByKey-repartition-source (topics: [long-groupByKey-repartition])",
    "      --> long-count, string-count",
    "    Processor: string-count (stores: [string-store])",
    "      --> string-toStream",
    "      <-- long-groupByKey-repartition-source",
    "    Processor: long-count (stores: [long-store])",
    "      --> long-toStream",
    "      <-- long-groupByKey-repartition-source",
    "    Processor: string-toStream (stores: [])",
    "      --> string-mapValues",
    "      <-- string-count",
    "    Processor: long-toStream (stores: [])",
    "      --> long-to",
    "      <-- long-count",
    "    Processor: string-mapValues (stores: [])",
    "      --> string-to",
    "      <-- string-toStream",
    "    Sink: long-to (topic: outputTopic_0)",
    "      <-- long-toStream",
    "    Sink: string-to (topic: outputTopic_1)",
    "      <-- string-mapValues",
    "",
)

# apache/kafka RepartitionWithMergeOptimizingTest.EXPECTED_UNOPTIMIZED_TOPOLOGY
UNOPTIMIZED_MERGE = _lines(
    *_MERGED_SOURCES,
    "      --> long-groupByKey-repartition-filter, string-groupByKey-repartition-filter",
    "      <-- mappedAStream, mappedBStream",
    "    Processor: long-groupByKey-repartition-filter (stores: [])",
    "      --> long-groupByKey-repartition-sink",
    "      <-- mergedStream",
    "    Processor: string-groupByKey-repartition-filter (stores: [])",
    "      --> string-groupByKey-repartition-sink",
    "      <-- mergedStream",
    "    Sink: long-groupByKey-repartition-sink (topic: long-groupByKey-repartition)",
    "      <-- long-groupByKey-repartition-filter",
    "    Sink: string-groupByKey-repartition-sink (topic: string-groupByKey-repartition)",
    "      <-- string-groupByKey-repartition-filter",
    "",
    "  Sub-topology: 1",
    "    Source: long-groupByKey-repartition-source (topics: [long-groupByKey-repartition])",
    "      --> long-count",
    "    Processor: long-count (stores: [long-store])",
    "      --> long-toStream",
    "      <-- long-groupByKey-repartition-source",
    "    Processor: long-toStream (stores: [])",
    "      --> long-to",
    "      <-- long-count",
    "    Sink: long-to (topic: outputTopic_0)",
    "      <-- long-toStream",
    "",
    "  Sub-topology: 2",
    "    Source: string-groupByKey-repartition-source (topics: [string-groupByKey-repartition])",
    "      --> string-count",
    "    Processor: string-count (stores: [string-store])",
    "      --> string-toStream",
    "      <-- string-groupByKey-repartition-source",
    "    Processor: string-toStream (stores: [])",
    "      --> string-mapValues",
    "      <-- string-count",
    "    Processor: string-mapValues (stores: [])",
    "      --> string-to",
    "      <-- string-toStream",
    "    Sink: string-to (topic: outputTopic_1)",
    "      <-- string-mapValues",
    "",
)


def test_optimized_merge_topology_matches_kafka_streams() -> None:
    topology = Topology()
    topology.add_source("sourceAStream", "inputA").add_source("sourceBStream", "inputB")
    _processors(
        topology,
        ("mappedAStream", "sourceAStream"),
        ("mappedBStream", "sourceBStream"),
        ("mergedStream", ("mappedAStream", "mappedBStream")),
        ("long-groupByKey-repartition-filter", "mergedStream"),
    )
    topology.add_sink(
        "long-groupByKey-repartition-sink",
        "long-groupByKey-repartition",
        "long-groupByKey-repartition-filter",
    )
    topology.add_source("long-groupByKey-repartition-source", "long-groupByKey-repartition")
    _processors(topology, ("long-count", "long-groupByKey-repartition-source"))
    topology.add_state_store(_FakeStoreBuilder("long-store"), "long-count")
    _processors(topology, ("long-toStream", "long-count"))
    topology.add_sink("long-to", "outputTopic_0", "long-toStream")
    _processors(topology, ("string-count", "long-groupByKey-repartition-source"))
    topology.add_state_store(_FakeStoreBuilder("string-store"), "string-count")
    _processors(topology, ("string-toStream", "string-count"), ("string-mapValues", "string-toStream"))
    topology.add_sink("string-to", "outputTopic_1", "string-mapValues")

    assert str(topology.describe()) == OPTIMIZED_MERGE


def test_unoptimized_merge_topology_through_the_dsl_matches_kafka_streams() -> None:
    builder = StreamsBuilder()
    builder.add_state_store(_FakeStoreBuilder("long-store"))
    builder.add_state_store(_FakeStoreBuilder("string-store"))
    a = builder.stream("inputA", Consumed(key_serde=String(), value_serde=String(), name="sourceAStream"))
    b = builder.stream("inputB", Consumed(key_serde=String(), value_serde=String(), name="sourceBStream"))
    merged = a.map(lambda k, v: (v, v), Named.as_("mappedAStream")).merge(
        b.map(lambda k, v: (v, v), "mappedBStream"), named="mergedStream"
    )
    for prefix, tail in (("long", []), ("string", ["string-mapValues"])):
        stream = merged.repartition(Repartitioned(name=f"{prefix}-groupByKey"))
        stream = stream.process(_Noop, f"{prefix}-store", named=f"{prefix}-count")
        stream = stream.process(_Noop, named=f"{prefix}-toStream")
        for name in tail:
            stream = stream.map_values(str, named=name)
        stream.to(f"outputTopic_{0 if prefix == 'long' else 1}", Produced(name=f"{prefix}-to"))

    assert str(builder.build().describe()) == UNOPTIMIZED_MERGE


# A published Kafka Streams application (lydtechconsulting/kafka-streams): two branches, a merge
# of branches, a second branch, and a named grouping whose aggregate indices burned 11-14.
def test_branch_merge_application_matches_kafka_streams() -> None:
    expected = _lines(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [payment-topic])",
        "      --> KSTREAM-PEEK-0000000001",
        "    Processor: KSTREAM-PEEK-0000000001 (stores: [])",
        "      --> KSTREAM-FILTER-0000000002",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KSTREAM-FILTER-0000000002 (stores: [])",
        "      --> KSTREAM-PEEK-0000000003",
        "      <-- KSTREAM-PEEK-0000000001",
        "    Processor: KSTREAM-PEEK-0000000003 (stores: [])",
        "      --> KSTREAM-BRANCH-0000000004",
        "      <-- KSTREAM-FILTER-0000000002",
        "    Processor: KSTREAM-BRANCH-0000000004 (stores: [])",
        "      --> KSTREAM-BRANCHCHILD-0000000006, KSTREAM-BRANCHCHILD-0000000005",
        "      <-- KSTREAM-PEEK-0000000003",
        "    Processor: KSTREAM-BRANCHCHILD-0000000006 (stores: [])",
        "      --> KSTREAM-MAPVALUES-0000000007",
        "      <-- KSTREAM-BRANCH-0000000004",
        "    Processor: KSTREAM-BRANCHCHILD-0000000005 (stores: [])",
        "      --> KSTREAM-MERGE-0000000008",
        "      <-- KSTREAM-BRANCH-0000000004",
        "    Processor: KSTREAM-MAPVALUES-0000000007 (stores: [])",
        "      --> KSTREAM-MERGE-0000000008",
        "      <-- KSTREAM-BRANCHCHILD-0000000006",
        "    Processor: KSTREAM-MERGE-0000000008 (stores: [])",
        "      --> KSTREAM-PEEK-0000000009",
        "      <-- KSTREAM-BRANCHCHILD-0000000005, KSTREAM-MAPVALUES-0000000007",
        "    Processor: KSTREAM-PEEK-0000000009 (stores: [])",
        "      --> KSTREAM-BRANCH-0000000015, KSTREAM-MAP-0000000010",
        "      <-- KSTREAM-MERGE-0000000008",
        "    Processor: KSTREAM-BRANCH-0000000015 (stores: [])",
        "      --> KSTREAM-BRANCHCHILD-0000000016, KSTREAM-BRANCHCHILD-0000000017",
        "      <-- KSTREAM-PEEK-0000000009",
        "    Processor: KSTREAM-MAP-0000000010 (stores: [])",
        "      --> balance-repartition-filter",
        "      <-- KSTREAM-PEEK-0000000009",
        "    Processor: KSTREAM-BRANCHCHILD-0000000016 (stores: [])",
        "      --> KSTREAM-SINK-0000000018",
        "      <-- KSTREAM-BRANCH-0000000015",
        "    Processor: KSTREAM-BRANCHCHILD-0000000017 (stores: [])",
        "      --> KSTREAM-SINK-0000000019",
        "      <-- KSTREAM-BRANCH-0000000015",
        "    Processor: balance-repartition-filter (stores: [])",
        "      --> balance-repartition-sink",
        "      <-- KSTREAM-MAP-0000000010",
        "    Sink: KSTREAM-SINK-0000000018 (topic: rails-foo-topic)",
        "      <-- KSTREAM-BRANCHCHILD-0000000016",
        "    Sink: KSTREAM-SINK-0000000019 (topic: rails-bar-topic)",
        "      <-- KSTREAM-BRANCHCHILD-0000000017",
        "    Sink: balance-repartition-sink (topic: balance-repartition)",
        "      <-- balance-repartition-filter",
        "",
        "  Sub-topology: 1",
        "    Source: balance-repartition-source (topics: [balance-repartition])",
        "      --> KSTREAM-AGGREGATE-0000000011",
        "    Processor: KSTREAM-AGGREGATE-0000000011 (stores: [balance])",
        "      --> none",
        "      <-- balance-repartition-source",
        "",
    )
    t = Topology()
    t.add_source("KSTREAM-SOURCE-0000000000", "payment-topic")
    _processors(
        t,
        ("KSTREAM-PEEK-0000000001", "KSTREAM-SOURCE-0000000000"),
        ("KSTREAM-FILTER-0000000002", "KSTREAM-PEEK-0000000001"),
        ("KSTREAM-PEEK-0000000003", "KSTREAM-FILTER-0000000002"),
        ("KSTREAM-BRANCH-0000000004", "KSTREAM-PEEK-0000000003"),
        ("KSTREAM-BRANCHCHILD-0000000005", "KSTREAM-BRANCH-0000000004"),
        ("KSTREAM-BRANCHCHILD-0000000006", "KSTREAM-BRANCH-0000000004"),
        ("KSTREAM-MAPVALUES-0000000007", "KSTREAM-BRANCHCHILD-0000000006"),
        ("KSTREAM-MERGE-0000000008", ("KSTREAM-BRANCHCHILD-0000000005", "KSTREAM-MAPVALUES-0000000007")),
        ("KSTREAM-PEEK-0000000009", "KSTREAM-MERGE-0000000008"),
        ("KSTREAM-MAP-0000000010", "KSTREAM-PEEK-0000000009"),
        ("balance-repartition-filter", "KSTREAM-MAP-0000000010"),
    )
    t.add_sink("balance-repartition-sink", "balance-repartition", "balance-repartition-filter")
    t.add_source("balance-repartition-source", "balance-repartition")
    _processors(
        t,
        ("KSTREAM-AGGREGATE-0000000011", "balance-repartition-source"),
        ("KSTREAM-BRANCH-0000000015", "KSTREAM-PEEK-0000000009"),
        ("KSTREAM-BRANCHCHILD-0000000016", "KSTREAM-BRANCH-0000000015"),
        ("KSTREAM-BRANCHCHILD-0000000017", "KSTREAM-BRANCH-0000000015"),
    )
    t.add_state_store(_FakeStoreBuilder("balance"), "KSTREAM-AGGREGATE-0000000011")
    t.add_sink("KSTREAM-SINK-0000000018", "rails-foo-topic", "KSTREAM-BRANCHCHILD-0000000016")
    t.add_sink("KSTREAM-SINK-0000000019", "rails-bar-topic", "KSTREAM-BRANCHCHILD-0000000017")

    assert str(t.describe()) == expected


def test_unnamed_repartition_burns_indices_like_kafka_streams() -> None:
    """``repartition()`` names its nodes sink, filter, source from the counter (Java order)."""
    builder = StreamsBuilder()
    builder.stream("customer-input").repartition(Repartitioned(num_partitions=10)).foreach(lambda k, v: None)
    assert str(builder.build().describe()) == _lines(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [customer-input])",
        "      --> KSTREAM-FILTER-0000000003",
        "    Processor: KSTREAM-FILTER-0000000003 (stores: [])",
        "      --> KSTREAM-SINK-0000000002",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Sink: KSTREAM-SINK-0000000002 (topic: KSTREAM-REPARTITION-0000000001-repartition)",
        "      <-- KSTREAM-FILTER-0000000003",
        "",
        "  Sub-topology: 1",
        "    Source: KSTREAM-SOURCE-0000000004 (topics: [KSTREAM-REPARTITION-0000000001-repartition])",
        "      --> KSTREAM-FOREACH-0000000005",
        "    Processor: KSTREAM-FOREACH-0000000005 (stores: [])",
        "      --> none",
        "      <-- KSTREAM-SOURCE-0000000004",
        "",
    )


def test_split_names_branches_like_kafka_streams() -> None:
    """KIP-418 names: ``<split name or KSTREAM-BRANCH-n><branch name or index>``, default ``0``."""
    builder = StreamsBuilder()
    source = builder.stream("orders")
    branches = (
        source.split()
        .branch(lambda k, v: v == b"a")
        .branch(lambda k, v: v == b"b", Branched.with_function(lambda s: s.map_values(bytes.upper)))
        .default_branch(Branched.as_("-rest"))
    )
    assert set(branches) == {
        "KSTREAM-BRANCH-00000000011",
        "KSTREAM-BRANCH-00000000012",
        "KSTREAM-BRANCH-0000000001-rest",
    }
    branches["KSTREAM-BRANCH-00000000011"].to("a")  # type: ignore[union-attr]
    text = str(builder.build().describe())
    assert text == _lines(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [orders])",
        "      --> KSTREAM-BRANCH-0000000001",
        "    Processor: KSTREAM-BRANCH-0000000001 (stores: [])",
        "      --> KSTREAM-BRANCH-00000000011, KSTREAM-BRANCH-00000000012, KSTREAM-BRANCH-0000000001-rest",
        "      <-- KSTREAM-SOURCE-0000000000",
        "    Processor: KSTREAM-BRANCH-00000000011 (stores: [])",
        "      --> KSTREAM-SINK-0000000003",
        "      <-- KSTREAM-BRANCH-0000000001",
        "    Processor: KSTREAM-BRANCH-00000000012 (stores: [])",
        "      --> KSTREAM-MAPVALUES-0000000002",
        "      <-- KSTREAM-BRANCH-0000000001",
        "    Processor: KSTREAM-BRANCH-0000000001-rest (stores: [])",
        "      --> none",
        "      <-- KSTREAM-BRANCH-0000000001",
        "    Processor: KSTREAM-MAPVALUES-0000000002 (stores: [])",
        "      --> none",
        "      <-- KSTREAM-BRANCH-00000000012",
        "    Sink: KSTREAM-SINK-0000000003 (topic: a)",
        "      <-- KSTREAM-BRANCH-00000000011",
        "",
    )


def test_global_store_has_no_trailing_blank_line_and_extractor_sinks_name_the_function() -> None:
    def route(key: Any, value: Any, metadata: Any) -> str:
        return "x"

    topology = Topology()
    topology.add_source("src", "in").add_sink("out", route, "src")
    topology.add_global_store(_FakeStoreBuilder("g-store"), "g-source", "g-topic", "g-proc", _Noop)
    assert str(topology.describe()) == _lines(
        "Topologies:",
        "   Sub-topology: 0",
        "    Source: src (topics: [in])",
        "      --> out",
        f"    Sink: out (extractor class: {__name__}.{route.__qualname__})",
        "      <-- src",
        "",
        "  Sub-topology: 1 for global store (will not generate tasks)",
        "    Source: g-source (topics: [g-topic])",
        "      --> g-proc",
        "    Processor: g-proc (stores: [g-store])",
        "      --> none",
        "      <-- g-source",
    )


def test_description_objects_expose_subtopologies_in_print_order() -> None:
    builder = StreamsBuilder()
    builder.stream("in").filter(lambda k, v: True).to("out")
    description = builder.build().describe()
    (sub,) = description.subtopologies()
    assert sub.id == 0
    assert sub.ordered_node_names() == [
        "KSTREAM-SOURCE-0000000000",
        "KSTREAM-FILTER-0000000001",
        "KSTREAM-SINK-0000000002",
    ]
    assert description.global_stores() == []
    assert repr(description) == str(description)


# -- the Java collection emulation ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "java_hash"),
    [("", 0), ("a", 97), ("abc", 96354), ("hello", 99162322), ("KSTREAM-SOURCE-0000000000", None)],
)
def test_java_string_hash(text: str, java_hash: int | None) -> None:
    h = java_string_hash(text)
    assert 0 <= h <= 0xFFFFFFFF
    if java_hash is not None:
        assert h == java_hash
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE (a classic Java fact)
    assert java_string_hash("polygenelubricants") == 0x80000000


def test_hash_order_is_bucket_order_with_insertion_order_inside_a_bucket() -> None:
    # "Aa" and "BB" share a Java hash (2112): same bucket, insertion order kept.
    assert hash_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert hash_order(["Aa", "BB"]) == ["Aa", "BB"]
    # single characters hash to their code point: buckets 1, 2, 3 of a 16-slot table
    assert hash_order(["c", "a", "b"]) == ["a", "b", "c"]
    # 'q' (113) and 'a' (97) both land in bucket 1 of 16: insertion order decides
    assert hash_order(["q", "a"]) == ["q", "a"]
    assert hash_order(["a", "q"]) == ["a", "q"]


def test_java_tree_set_sorts_with_a_consistent_comparator() -> None:
    tree = JavaTreeSet[int](lambda a, b: a - b)
    for value in [5, 3, 9, 1, 4, 7, 8, 2, 6, 0, 5]:
        tree.add(value)
    assert list(tree) == list(range(10))
    assert len(tree) == 10
