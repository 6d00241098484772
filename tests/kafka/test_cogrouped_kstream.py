"""Kafka's ``CogroupedKStreamImplTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/
internals/CogroupedKStreamImplTest.java), the topology cases translated: ``describe()`` equals
Kafka's expected text, named, repartitioned, reused groupings, with and without optimization.

Java cases with no Python equivalent are skipped tests at the end of this module, each
saying why in its skip reason. The expected texts are Kafka's, verbatim, in
``tests/kafka/expected/``."""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, Grouped, Materialized, Named, StreamsBuilder
from platform_streams.serde import String
from tests.kafka.support import JAVA_NULL_CHECK, cases_without_python_equivalent, expected_description

S = String()
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


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "CogroupedKStreamImplTest",
    {
        "shouldThrowNPEInCogroupIfKGroupedStreamIsNull": JAVA_NULL_CHECK,
        "shouldNotHaveNullAggregatorOnCogroup": JAVA_NULL_CHECK,
        "shouldNotHaveNullInitializerOnAggregate": JAVA_NULL_CHECK,
        "shouldNotHaveNullInitializerOnAggregateWitNamed": JAVA_NULL_CHECK,
        "shouldNotHaveNullInitializerOnAggregateWitMaterialized": JAVA_NULL_CHECK,
        "shouldNotHaveNullInitializerOnAggregateWitNamedAndMaterialized": JAVA_NULL_CHECK,
        "shouldNotHaveNullNamedOnAggregate": JAVA_NULL_CHECK,
        "shouldNotHaveNullMaterializedOnAggregate": JAVA_NULL_CHECK,
        "shouldNotHaveNullNamedOnAggregateWithMateriazlied": JAVA_NULL_CHECK,
        "shouldNotHaveNullMaterializedOnAggregateWithNames": JAVA_NULL_CHECK,
        "shouldNotHaveNullWindowOnWindowedByTime": JAVA_NULL_CHECK,
        "shouldNotHaveNullWindowOnWindowedBySession": JAVA_NULL_CHECK,
        "shouldNotHaveNullWindowOnWindowedBySliding": JAVA_NULL_CHECK,
    },
)
