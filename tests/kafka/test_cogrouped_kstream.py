"""Kafka's ``CogroupedKStreamImplTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/
internals/CogroupedKStreamImplTest.java), the topology cases translated (and
``shouldCogroupAndAggregateSingleKStreams``, ``testCogroupHandleNullValues``,
``shouldCogroupAndAggregateTwoKStreamsWith{Distinct,Shared}Keys``,
``testCogroupKeyMixedAggregators``, ``testCogroupWithThreeGroupedStreams``,
``shouldAllowDifferentOutputTypeInCoGroup``, ``shouldCoGroupStreamsWithDifferentInputTypes``,
``testCogroupWithKTableKTableInnerJoin``, and the ``...WithGroupedReused`` /
``...WithGroupedRemadeWithOptimization`` descriptions): ``describe()`` equals
Kafka's expected text, named, repartitioned, reused groupings, with and without optimization.

Java cases with no Python equivalent are skipped tests at the end of this module, each
saying why in its skip reason. The expected texts are Kafka's, verbatim, in
``tests/kafka/expected/``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, Grouped, Materialized, Named, StreamsBuilder
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    JAVA_OPTIONAL_NULL,
    cases_without_python_equivalent,
    expected_description,
    refuses_null_argument,
    streams_config,
)

S, INT = String(), Integer()
CONSUMED = Consumed(key_serde=S, value_serde=S)
OPTIMIZE = StreamsConfig(application_id="app", bootstrap_servers="x:9092", topology_optimization="all")


def string_aggregator(key: Any, value: Any, aggregate: Any) -> str:
    return f"{aggregate}{value}"


def string_initializer() -> str:
    return ""


def _swap(k: Any, v: Any) -> tuple[Any, Any]:
    return v, k


def named_processors_and_store(builder: StreamsBuilder) -> None:
    grouped_one = builder.stream("one", CONSUMED).group_by_key()
    grouped_two = builder.stream("two", CONSUMED).group_by_key()
    grouped_one.cogroup(string_aggregator).cogroup(grouped_two, string_aggregator).aggregate(
        string_initializer, Named.as_("test"), Materialized.as_("store")
    ).to_stream().to("output")


def named_repartition_topic(builder: StreamsBuilder) -> None:
    stream1, stream2 = builder.stream("one", CONSUMED), builder.stream("two", CONSUMED)
    grouped_one = stream1.map(_swap).group_by_key(Grouped.as_("repartition-test"))
    grouped_two = stream2.group_by_key()
    grouped_one.cogroup(string_aggregator).cogroup(grouped_two, string_aggregator).aggregate(
        string_initializer
    ).to_stream().to("output")


def upstream_key_modification(builder: StreamsBuilder) -> None:
    stream1, stream2 = builder.stream("one", CONSUMED), builder.stream("two", CONSUMED)
    grouped_one = stream1.map(_swap).group_by_key()
    grouped_two = stream2.group_by_key()
    grouped_one.cogroup(string_aggregator).cogroup(grouped_two, string_aggregator).aggregate(
        string_initializer, Named.as_("test"), Materialized.as_("store")
    ).to_stream().to("output")


def grouped_reused_in_same_cogroups(builder: StreamsBuilder) -> None:
    stream1, stream2 = builder.stream("one", CONSUMED), builder.stream("two", CONSUMED)
    grouped_one = stream1.map(_swap).group_by_key()
    grouped_two = stream2.group_by_key()
    cogrouped_two = (
        grouped_one.cogroup(string_aggregator)
        .cogroup(grouped_two, string_aggregator)
        .aggregate(string_initializer)
    )
    cogrouped_one = (
        grouped_one.cogroup(string_aggregator)
        .cogroup(grouped_two, string_aggregator)
        .aggregate(string_initializer)
    )
    cogrouped_one.to_stream().to("output")
    cogrouped_two.to_stream().to("OUTPUT2")


def grouped_reused_in_different_cogroups(builder: StreamsBuilder) -> None:
    stream1, stream2 = builder.stream("one", CONSUMED), builder.stream("two", CONSUMED)
    stream3 = builder.stream("three", CONSUMED)
    grouped_one = stream1.map(_swap).group_by_key()
    grouped_two = stream2.group_by_key()
    grouped_three = stream3.group_by_key()
    grouped_one.cogroup(string_aggregator).cogroup(grouped_three, string_aggregator).aggregate(
        string_initializer
    )
    grouped_one.cogroup(string_aggregator).cogroup(grouped_two, string_aggregator).aggregate(
        string_initializer
    )


def grouped_reused(builder: StreamsBuilder) -> None:
    stream1, stream2 = builder.stream("one", CONSUMED), builder.stream("two", CONSUMED)
    grouped_one = stream1.map(_swap).group_by_key()
    grouped_two = stream2.group_by_key()
    grouped_one.cogroup(string_aggregator).cogroup(grouped_two, string_aggregator).aggregate(
        string_initializer
    )
    grouped_one.aggregate(string_initializer, string_aggregator)


def grouped_remade(builder: StreamsBuilder) -> None:
    stream1, stream2 = builder.stream("one", CONSUMED), builder.stream("two", CONSUMED)
    stream3 = builder.stream("three", CONSUMED)
    grouped_one = stream1.map(_swap).group_by_key()
    grouped_two = stream2.group_by_key()
    grouped_three = stream3.group_by_key()
    grouped_four = stream1.map(_swap).group_by_key()
    grouped_one.cogroup(string_aggregator).cogroup(grouped_two, string_aggregator).aggregate(
        string_initializer
    )
    grouped_three.cogroup(string_aggregator).cogroup(grouped_four, string_aggregator).aggregate(
        string_initializer
    )


def cogroups_used_twice(builder: StreamsBuilder) -> None:
    grouped_one = builder.stream("one", CONSUMED).map(_swap).group_by_key(Grouped.as_("foo"))
    one = grouped_one.cogroup(string_aggregator)
    one.aggregate(string_initializer)
    one.aggregate(string_initializer)


CASES = [
    ("shouldNameProcessorsAndStoreBasedOnNamedParameter", named_processors_and_store, None),
    ("shouldNameRepartitionTopic", named_repartition_topic, None),
    ("shouldInsertRepartitionsTopicForUpstreamKeyModification", upstream_key_modification, None),
    (
        "shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReusedInSameCogroups",
        grouped_reused_in_same_cogroups,
        None,
    ),
    (
        "shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReusedInSameCogroupsWithOptimization",
        grouped_reused_in_same_cogroups,
        OPTIMIZE,
    ),
    (
        "shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReusedInDifferentCogroups",
        grouped_reused_in_different_cogroups,
        None,
    ),
    (
        "shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReusedInDifferentCogroupsWithOptimization",
        grouped_reused_in_different_cogroups,
        OPTIMIZE,
    ),
    ("shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReused", grouped_reused, None),
    (
        "shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedReusedWithOptimization",
        grouped_reused,
        OPTIMIZE,
    ),
    (
        "shouldInsertRepartitionsTopicForUpstreamKeyModificationWithGroupedRemadeWithOptimization",
        grouped_remade,
        OPTIMIZE,
    ),
    ("shouldInsertRepartitionsTopicForCogroupsUsedTwice", cogroups_used_twice, None),
]


@pytest.mark.parametrize(("java_test", "build", "config"), CASES, ids=[c[0] for c in CASES])
def test_describe_equals_kafka(java_test: str, build: Any, config: StreamsConfig | None) -> None:
    """CogroupedKStreamImplTest.<java_test>"""
    builder = StreamsBuilder()
    build(builder)
    assert str(builder.build(config).describe()) == expected_description(
        "CogroupedKStreamImplTest", java_test
    )


PROPS = streams_config("string", "string", statestore_cache_max_bytes=0)


def _run_cogroup(
    build: Any,
    inputs: list[tuple[str, str, Any, int]],
    expected: list[tuple[str, Any, int]],
    value_serdes: dict[str, Any] | None = None,
    props: dict[str, Any] = PROPS,
) -> None:
    """``build(builder)`` returns the cogrouped table; ``inputs`` are (topic, key, value, ts) and
    ``expected`` what ``assertOutputKeyValueTimestamp`` reads from OUTPUT, in order.
    ``value_serdes`` maps a topic (or "output") to its value serde where it is not a string."""
    value_serdes = value_serdes or {}
    builder = StreamsBuilder()
    build(builder).to_stream().to("output")
    with TopologyTestDriver(builder.build(), props) as driver:
        topics = {
            name: driver.create_input_topic(name, S, value_serdes.get(name, S))
            for name in {t for t, *_ in inputs}
        }
        for topic, key, value, ts in inputs:
            topics[topic].pipe_input(key, value, ts)
        output = driver.create_output_topic("output", S, value_serdes.get("output", S))
        # Java reads just the expected records (one assertOutputKeyValueTimestamp each)
        got = [(r.key, r.value, r.timestamp) for r in output.read_records_to_list()]
        assert got[: len(expected)] == expected


def _single(builder: StreamsBuilder) -> Any:
    grouped1 = builder.stream("one", CONSUMED).group_by_key()
    return grouped1.cogroup(string_aggregator).aggregate(string_initializer)


def _two(builder: StreamsBuilder) -> Any:
    grouped1 = builder.stream("one", CONSUMED).group_by_key()
    grouped2 = builder.stream("two", CONSUMED).group_by_key()
    cogrouped = grouped1.cogroup(string_aggregator).cogroup(grouped2, string_aggregator)
    return cogrouped.aggregate(string_initializer)


def test_should_cogroup_and_aggregate_single_kstreams() -> None:
    """CogroupedKStreamImplTest.shouldCogroupAndAggregateSingleKStreams"""
    inputs = [("one", "k1", "A", 0), ("one", "k2", "B", 0), ("one", "k2", "B", 0), ("one", "k1", "A", 0)]
    _run_cogroup(_single, inputs, [("k1", "A", 0), ("k2", "B", 0), ("k2", "BB", 0), ("k1", "AA", 0)])


def test_cogroup_handle_null_values() -> None:
    """CogroupedKStreamImplTest.testCogroupHandleNullValues: a null value is skipped."""
    inputs = [("one", "k1", "A", 0), ("one", "k2", "B", 0), ("one", "k2", None, 0)]
    inputs += [("one", "k2", "B", 0), ("one", "k1", "A", 0)]
    _run_cogroup(_single, inputs, [("k1", "A", 0), ("k2", "B", 0), ("k2", "BB", 0), ("k1", "AA", 0)])


def test_should_cogroup_and_aggregate_two_kstreams_with_distinct_keys() -> None:
    """CogroupedKStreamImplTest.shouldCogroupAndAggregateTwoKStreamsWithDistinctKeys"""
    inputs = [("one", "k1", "A", ts) for ts in (0, 1, 10, 100)]
    inputs += [("two", "k2", "B", ts) for ts in (100, 200, 1, 500, 500, 100)]
    expected = [("k1", "A" * n, ts) for n, ts in ((1, 0), (2, 1), (3, 10), (4, 100))]
    expected += [
        ("k2", "B" * n, ts) for n, ts in ((1, 100), (2, 200), (3, 200), (4, 500), (5, 500), (6, 500))
    ]
    _run_cogroup(_two, inputs, expected)


SHARED_KEYS_INPUT = [("one", "k1", 0), ("one", "k2", 1), ("one", "k1", 10), ("one", "k2", 100)]
SHARED_KEYS_INPUT += [("two", "k2", 100), ("two", "k2", 200), ("two", "k1", 1), ("two", "k2", 500)]
SHARED_KEYS_INPUT += [("two", "k1", 500), ("two", "k2", 500), ("two", "k3", 500), ("two", "k2", 100)]


def test_should_cogroup_and_aggregate_two_kstreams_with_shared_keys() -> None:
    """CogroupedKStreamImplTest.shouldCogroupAndAggregateTwoKStreamsWithSharedKeys"""
    inputs = [(topic, key, "A" if topic == "one" else "B", ts) for topic, key, ts in SHARED_KEYS_INPUT]
    expected = [("k1", "A", 0), ("k2", "A", 1), ("k1", "AA", 10), ("k2", "AA", 100), ("k2", "AAB", 100)]
    expected += [("k2", "AABB", 200), ("k1", "AAB", 10), ("k2", "AABBB", 500), ("k1", "AABB", 500)]
    expected += [("k2", "AABBBB", 500)]
    _run_cogroup(_two, inputs, expected)


def test_cogroup_key_mixed_aggregators() -> None:
    """CogroupedKStreamImplTest.testCogroupKeyMixedAggregators: ``MockAggregator.TOSTRING_REMOVER``
    ("agg-value") on one, ``TOSTRING_ADDER`` ("agg+value") on two, ``MockInitializer.STRING_INIT``."""

    def build(builder: StreamsBuilder) -> Any:
        grouped1 = builder.stream("one", CONSUMED).group_by_key()
        grouped2 = builder.stream("two", CONSUMED).group_by_key()
        cogrouped = grouped1.cogroup(lambda k, v, agg: f"{agg}-{v}").cogroup(
            grouped2, lambda k, v, agg: f"{agg}+{v}"
        )
        return cogrouped.aggregate(lambda: "0", materialized=Materialized.as_("store1").with_value_serde(S))

    inputs = [("one", "k1", "1", 0), ("one", "k2", "1", 1), ("one", "k1", "1", 10), ("one", "k2", "1", 100)]
    inputs += [
        ("two", "k1", "2", 500),
        ("two", "k2", "2", 500),
        ("two", "k1", "2", 500),
        ("two", "k2", "2", 100),
    ]
    expected = [("k1", "0-1", 0), ("k2", "0-1", 1), ("k1", "0-1-1", 10), ("k2", "0-1-1", 100)]
    expected += [
        ("k1", "0-1-1+2", 500),
        ("k2", "0-1-1+2", 500),
        ("k1", "0-1-1+2+2", 500),
        ("k2", "0-1-1+2+2", 500),
    ]
    _run_cogroup(build, inputs, expected)


def test_cogroup_with_three_grouped_streams() -> None:
    """CogroupedKStreamImplTest.testCogroupWithThreeGroupedStreams"""

    def build(builder: StreamsBuilder) -> Any:
        cogrouped = builder.stream("one", CONSUMED).group_by_key().cogroup(string_aggregator)
        for topic in ("two", "three"):
            cogrouped = cogrouped.cogroup(builder.stream(topic, CONSUMED).group_by_key(), string_aggregator)
        return cogrouped.aggregate(string_initializer)

    inputs = [("one", "k1", "A", 0), ("one", "k2", "A", 1), ("one", "k1", "A", 10), ("one", "k2", "A", 100)]
    inputs += [
        ("two", "k2", "B", 100),
        ("two", "k2", "B", 200),
        ("two", "k1", "B", 1),
        ("two", "k2", "B", 500),
    ]
    inputs += [("three", "k1", "B", 500), ("three", "k2", "B", 500), ("three", "k3", "B", 500)]
    inputs += [("three", "k2", "B", 100)]
    expected = [("k1", "A", 0), ("k2", "A", 1), ("k1", "AA", 10), ("k2", "AA", 100), ("k2", "AAB", 100)]
    expected += [("k2", "AABB", 200), ("k1", "AAB", 10), ("k2", "AABBB", 500), ("k1", "AABB", 500)]
    expected += [("k2", "AABBBB", 500), ("k3", "B", 500)]
    _run_cogroup(build, inputs, expected)


def _string_sum(key: Any, value: Any, aggregate: Any) -> int:
    """``STRING_SUM_AGGREGATOR``: the aggregate plus the string value parsed as an int."""
    return aggregate + int(value)


def _sum(key: Any, value: Any, aggregate: Any) -> int:
    """``SUM_AGGREGATOR``: the aggregate plus the int value."""
    return aggregate + value


#: the inputs of shouldAllowDifferentOutputTypeInCoGroup / shouldCoGroupStreamsWithDifferentInputTypes
#: (topic, key, value as int, timestamp); topic one always carries strings
SUM_INPUTS = [("one", "k1", 1, 0), ("one", "k2", 1, 1), ("one", "k1", 1, 10), ("one", "k2", 1, 100)]
SUM_INPUTS += [("two", "k2", 2, 100), ("two", "k2", 2, 200), ("two", "k1", 2, 1), ("two", "k2", 2, 500)]
SUM_INPUTS += [("two", "k1", 2, 500), ("two", "k2", 3, 500), ("two", "k3", 2, 500), ("two", "k2", 2, 100)]
SUM_EXPECTED = [("k1", 1, 0), ("k2", 1, 1), ("k1", 2, 10), ("k2", 2, 100), ("k2", 4, 100), ("k2", 6, 200)]
SUM_EXPECTED += [("k1", 4, 10), ("k2", 8, 500), ("k1", 6, 500), ("k2", 11, 500)]


@pytest.mark.parametrize(
    ("java_test", "two_is_int"),
    [
        ("shouldAllowDifferentOutputTypeInCoGroup", False),
        ("shouldCoGroupStreamsWithDifferentInputTypes", True),
    ],
    ids=["shouldAllowDifferentOutputTypeInCoGroup", "shouldCoGroupStreamsWithDifferentInputTypes"],
)
def test_cogroup_with_different_types(java_test: str, two_is_int: bool) -> None:
    """CogroupedKStreamImplTest.<java_test>: string inputs summed into an Integer aggregate
    (``Materialized.as("store1").withValueSerde(Serdes.Integer())``); in the second case topic
    two carries Integers (``Consumed.with(String, Integer)``) folded by a second aggregator type."""

    def build(builder: StreamsBuilder) -> Any:
        grouped1 = builder.stream("one", CONSUMED).group_by_key()
        if two_is_int:
            grouped2 = builder.stream("two", Consumed(key_serde=S, value_serde=INT)).group_by_key()
        else:
            grouped2 = builder.stream("two", CONSUMED).group_by_key()
        cogrouped = grouped1.cogroup(_string_sum).cogroup(grouped2, _sum if two_is_int else _string_sum)
        return cogrouped.aggregate(lambda: 0, Materialized.as_("store1").with_value_serde(INT))

    inputs = [(t, k, v if t == "two" and two_is_int else str(v), ts) for t, k, v, ts in SUM_INPUTS]
    expected = SUM_EXPECTED + ([("k3", 2, 500)] if two_is_int else [])
    serdes = {"output": INT, **({"two": INT} if two_is_int else {})}
    _run_cogroup(build, inputs, expected, serdes, streams_config("string", "string"))


def test_cogroup_with_ktable_ktable_inner_join() -> None:
    """CogroupedKStreamImplTest.testCogroupWithKTableKTableInnerJoin: a named, materialized
    cogroup joined with a source table; the join result carries the larger timestamp."""
    builder = StreamsBuilder()
    grouped1 = builder.stream("one", CONSUMED).group_by_key()
    grouped2 = builder.stream("two", CONSUMED).group_by_key()
    table1 = (
        grouped1.cogroup(string_aggregator)
        .cogroup(grouped2, string_aggregator)
        .aggregate(string_initializer, Named.as_("name"), Materialized.as_("store"))
    )
    table2 = builder.table("three", CONSUMED)
    joined = table1.join(table2, lambda v1, v2: f"{v1}+{v2}", Materialized(key_serde=S, value_serde=S))
    joined.to_stream().to("output")
    with TopologyTestDriver(builder.build(), streams_config("string", "string")) as driver:
        one, two, three = (driver.create_input_topic(t, S, S) for t in ("one", "two", "three"))
        output = driver.create_output_topic("output", S, S)
        one.pipe_input("k1", "A", 5)
        two.pipe_input("k2", "B", 6)
        assert output.is_empty()
        three.pipe_input("k1", "C", 0)
        three.pipe_input("k2", "D", 10)
        got = [(r.key, r.value, r.timestamp) for r in output.read_records_to_list()]
        assert got == [("k1", "A+C", 5), ("k2", "B+D", 10)]


def _java_setup() -> SimpleNamespace:
    """The Java setup: ``groupedStream`` and ``cogroupedStream = groupedStream.cogroup(...)``."""
    grouped = StreamsBuilder().stream("topic", CONSUMED).group_by_key(Grouped(key_serde=S, value_serde=S))
    return SimpleNamespace(grouped=grouped, cogrouped=grouped.cogroup(string_aggregator))


#: Java test -> the call Java refuses with a NullPointerException (``s`` is the setup's object)
NULL_ARGUMENTS: dict[str, Any] = {
    "shouldThrowNPEInCogroupIfKGroupedStreamIsNull": lambda s: s.cogrouped.cogroup(None, string_aggregator),
    "shouldNotHaveNullAggregatorOnCogroup": lambda s: s.cogrouped.cogroup(s.grouped, None),
    "shouldNotHaveNullInitializerOnAggregate": lambda s: s.cogrouped.aggregate(None),
    "shouldNotHaveNullInitializerOnAggregateWitNamed": lambda s: s.cogrouped.aggregate(
        None, Named.as_("name")
    ),
    "shouldNotHaveNullInitializerOnAggregateWitMaterialized": lambda s: s.cogrouped.aggregate(
        None, Materialized.as_("store")
    ),
    "shouldNotHaveNullInitializerOnAggregateWitNamedAndMaterialized": lambda s: s.cogrouped.aggregate(
        None, Named.as_("name"), Materialized.as_("store")
    ),
    "shouldNotHaveNullWindowOnWindowedByTime": lambda s: s.cogrouped.windowed_by(None),
    "shouldNotHaveNullWindowOnWindowedBySession": lambda s: s.cogrouped.windowed_by(None),
    "shouldNotHaveNullWindowOnWindowedBySliding": lambda s: s.cogrouped.windowed_by(None),
}


@pytest.mark.parametrize("java_test", list(NULL_ARGUMENTS))
def test_null_argument_is_refused(java_test: str) -> None:
    """CogroupedKStreamImplTest.<java_test>: a null function (or grouped stream, or windows)
    is refused when the topology is built."""
    refuses_null_argument(lambda: NULL_ARGUMENTS[java_test](_java_setup()))


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "CogroupedKStreamImplTest",
    {
        "shouldNotHaveNullNamedOnAggregate": JAVA_OPTIONAL_NULL,
        "shouldNotHaveNullMaterializedOnAggregate": JAVA_OPTIONAL_NULL,
        "shouldNotHaveNullNamedOnAggregateWithMateriazlied": JAVA_OPTIONAL_NULL,
        "shouldNotHaveNullMaterializedOnAggregateWithNames": JAVA_OPTIONAL_NULL,
    },
)
