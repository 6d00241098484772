"""Kafka's ``StreamsBuilderTest`` naming cases (streams/src/test/java/org/apache/kafka/streams/
StreamsBuilderTest.java), translated: a user-named operator keeps its name *and* draws its index
(``NamedInternal``), so every other node, store and topic is named as in the Java topology.

``assertNamesForOperation`` lists the topology's nodes in build order (sources and sinks
included); ``assertNamesForStateStore`` its stores. Java cases with no Python equivalent are
skipped tests at the end of this module, each saying why in its skip reason (the DSL
store-supplier configuration cases are in tests/kafka/test_dsl_store_suppliers.py). Streams of one
topic share one source node, as Kafka's ``mergeDuplicateSourceNodes`` does.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from platform_streams.dsl import (
    Branched,
    Consumed,
    Grouped,
    Joined,
    JoinWindows,
    Materialized,
    Named,
    Produced,
    StreamJoined,
    StreamsBuilder,
)
from platform_streams.errors import TopologyError
from platform_streams.serde import Long, String
from tests.kafka.support import (
    MockApiProcessorSupplier,
    cases_without_python_equivalent,
    refuses_null_argument,
)

STREAM_TOPIC, STREAM_TOPIC_TWO, OP = "stream-topic", "stream-topic-two", "stream-operation"
S = String()
HOUR_MS = 3600 * 1000


def assert_names_for_operation(builder: StreamsBuilder, *expected: str) -> None:
    assert list(builder.build().nodes) == list(expected)


def assert_names_for_state_store(builder: StreamsBuilder, *expected: str) -> None:
    assert list(builder.build().stores) == list(expected)


def test_specified_name_for_stream_source_processor() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForStreamSourceProcessor"""
    builder = StreamsBuilder()
    builder.stream(STREAM_TOPIC, Consumed(name="source-node"))
    builder.stream(STREAM_TOPIC_TWO)
    assert_names_for_operation(builder, "source-node", "KSTREAM-SOURCE-0000000001")


def test_specified_name_for_table_source_processor() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForTableSourceProcessor"""
    builder = StreamsBuilder()
    builder.table(STREAM_TOPIC, Consumed(name="source-node"))
    builder.table(STREAM_TOPIC_TWO)
    assert_names_for_operation(
        builder, "source-node-source", "source-node", "KSTREAM-SOURCE-0000000004", "KTABLE-SOURCE-0000000005"
    )


def test_specified_name_for_global_table_source_processor() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForGlobalTableSourceProcessor"""
    builder = StreamsBuilder()
    builder.global_table(STREAM_TOPIC, Consumed(name="source-processor"))
    builder.global_table(STREAM_TOPIC_TWO)
    assert list(builder.build().global_stores) == [
        "stream-topic-STATE-STORE-0000000000",
        "stream-topic-two-STATE-STORE-0000000003",
    ]


def test_specified_name_for_sink_processor() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForSinkProcessor"""
    builder = StreamsBuilder()
    stream = builder.stream(STREAM_TOPIC)
    stream.to(STREAM_TOPIC_TWO, Produced(name="sink-processor"))
    stream.to(STREAM_TOPIC_TWO)
    assert_names_for_operation(
        builder, "KSTREAM-SOURCE-0000000000", "sink-processor", "KSTREAM-SINK-0000000002"
    )


def test_specified_names_for_stateless_operations() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameFor(Map|MapValues|MapValuesWithKey|Filter|ForEach)Operation"""
    operations: list[Any] = [
        lambda s: s.map(lambda k, v: (k, v), Named.as_(OP)),
        lambda s: s.map_values(lambda v: v, Named.as_(OP)),
        lambda s: s.map_values(lambda k, v: v, Named.as_(OP)),
        lambda s: s.filter(lambda k, v: True, Named.as_(OP)),
        lambda s: s.foreach(lambda k, v: None, Named.as_(OP)),
    ]
    for operation in operations:
        builder = StreamsBuilder()
        operation(builder.stream(STREAM_TOPIC))
        assert_names_for_operation(builder, "KSTREAM-SOURCE-0000000000", OP)


def test_specified_name_for_split_operation() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForSplitOperation"""
    builder = StreamsBuilder()
    (
        builder.stream(STREAM_TOPIC)
        .split(Named.as_("branch-processor"))
        .branch(lambda k, v: True, Branched.as_("-1"))
        .branch(lambda k, v: False, Branched.as_("-2"))
    )
    assert_names_for_operation(
        builder, "KSTREAM-SOURCE-0000000000", "branch-processor", "branch-processor-1", "branch-processor-2"
    )


def test_specified_name_for_join_operations_between_kstream_and_ktable() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameFor(Left)JoinOperationBetweenKStreamAndKTable"""
    for left in (False, True):
        builder = StreamsBuilder()
        stream_one = builder.stream(STREAM_TOPIC)
        table = builder.table("table-topic")
        join = stream_one.left_join if left else stream_one.join
        join(table, lambda v1, v2: v1, Joined(name=OP))
        assert_names_for_operation(
            builder, "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000002", "KTABLE-SOURCE-0000000003", OP
        )


def _stream_stream(kind: str, joined: StreamJoined) -> StreamsBuilder:
    builder = StreamsBuilder()
    one, two = builder.stream(STREAM_TOPIC), builder.stream(STREAM_TOPIC_TWO)
    getattr(one, kind)(two, lambda v1, v2: v1, JoinWindows.of_time_difference_with_no_grace(HOUR_MS), joined)
    return builder


def test_specified_name_for_join_operation_between_kstream_and_kstream() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForJoinOperationBetweenKStreamAndKStream"""
    builder = _stream_stream("join", StreamJoined(store_name=OP, name=OP))
    assert_names_for_state_store(builder, f"{OP}-this-join-store", f"{OP}-other-join-store")
    assert_names_for_operation(
        builder, "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001",
        f"{OP}-this-windowed", f"{OP}-other-windowed", f"{OP}-this-join", f"{OP}-other-join", f"{OP}-merge",
    )  # fmt: skip


def test_generated_name_for_join_operation_between_kstream_and_kstream() -> None:
    """StreamsBuilderTest.shouldUseGeneratedNameForJoinOperationBetweenKStreamAndKStream"""
    builder = _stream_stream("join", StreamJoined(key_serde=S, value_serde=S, other_value_serde=S, name=OP))
    assert_names_for_state_store(
        builder, "KSTREAM-JOINTHIS-0000000004-store", "KSTREAM-JOINOTHER-0000000005-store"
    )
    assert_names_for_operation(
        builder, "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001",
        f"{OP}-this-windowed", f"{OP}-other-windowed", f"{OP}-this-join", f"{OP}-other-join", f"{OP}-merge",
    )  # fmt: skip


def test_specified_name_for_left_join_operation_between_kstream_and_kstream() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForLeftJoinOperationBetweenKStreamAndKStream"""
    builder = _stream_stream("left_join", StreamJoined(store_name=OP, name=OP))
    assert_names_for_state_store(
        builder, f"{OP}-this-join-store", f"{OP}-outer-other-join-store", f"{OP}-left-shared-join-store"
    )
    assert_names_for_operation(
        builder, "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001",
        f"{OP}-this-windowed", f"{OP}-other-windowed", f"{OP}-this-join", f"{OP}-outer-other-join",
        f"{OP}-merge",
    )  # fmt: skip


def test_generated_store_names_for_left_join_operation_between_kstream_and_kstream() -> None:
    """StreamsBuilderTest.shouldUseGeneratedStoreNamesForLeftJoinOperationBetweenKStreamAndKStream"""
    builder = _stream_stream(
        "left_join", StreamJoined(key_serde=S, value_serde=S, other_value_serde=S, name=OP)
    )
    assert_names_for_state_store(
        builder,
        "KSTREAM-JOINTHIS-0000000004-store",
        "KSTREAM-OUTEROTHER-0000000005-store",
        "KSTREAM-OUTERSHARED-0000000004-store",
    )


def test_specified_name_for_outer_join_operation_between_kstream_and_kstream() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForOuterJoinOperationBetweenKStreamAndKStream"""
    builder = _stream_stream("outer_join", StreamJoined(store_name=OP, name=OP))
    assert_names_for_state_store(
        builder,
        f"{OP}-outer-this-join-store",
        f"{OP}-outer-other-join-store",
        f"{OP}-outer-shared-join-store",
    )
    assert_names_for_operation(
        builder, "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001",
        f"{OP}-this-windowed", f"{OP}-other-windowed", f"{OP}-outer-this-join", f"{OP}-outer-other-join",
        f"{OP}-merge",
    )  # fmt: skip


def test_specified_name_for_merge_operation() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForMergeOperation"""
    builder = StreamsBuilder()
    builder.stream("topic-1").merge(builder.stream("topic-2"), Named.as_("merge-processor"))
    assert_names_for_operation(
        builder, "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001", "merge-processor"
    )


def test_specified_name_for_process_operation() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForProcessOperation"""
    builder = StreamsBuilder()
    builder.stream(STREAM_TOPIC).process(MockApiProcessorSupplier(), named=Named.as_("test-processor"))
    assert_names_for_operation(builder, "KSTREAM-SOURCE-0000000000", "test-processor")


def test_specified_name_for_to_stream() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForToStream / shouldUseSpecifiedNameForToStreamWithMapper"""
    builder = StreamsBuilder()
    builder.table(STREAM_TOPIC).to_stream(Named.as_("to-stream"))
    assert_names_for_operation(builder, "KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002", "to-stream")
    builder = StreamsBuilder()
    builder.table(STREAM_TOPIC).to_stream(lambda k, v: k, Named.as_("to-stream"))
    assert_names_for_operation(
        builder,
        "KSTREAM-SOURCE-0000000001",
        "KTABLE-SOURCE-0000000002",
        "to-stream",
        "KSTREAM-KEY-SELECT-0000000004",
    )


def test_specified_name_for_aggregate_operation_given_table() -> None:
    """StreamsBuilderTest.shouldUseSpecifiedNameForAggregateOperationGivenTable"""
    builder = StreamsBuilder()
    builder.table(STREAM_TOPIC).group_by(lambda k, v: (k, v), Grouped.as_("group-operation")).count(
        Named.as_(OP)
    )
    assert_names_for_state_store(
        builder, f"{STREAM_TOPIC}-STATE-STORE-0000000000", "KTABLE-AGGREGATE-STATE-STORE-0000000004"
    )
    assert_names_for_operation(
        builder, "KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002", "group-operation",
        f"{OP}-sink", f"{OP}-source", OP,
    )  # fmt: skip


def test_should_not_materialize_stores_if_not_required() -> None:
    """StreamsBuilderTest.shouldNotMaterializeStoresIfNotRequired"""
    builder = StreamsBuilder()
    builder.table("topic", materialized=Materialized(key_serde=Long(), value_serde=S))
    assert builder.build().stores == {}


TRANSFORM = (
    "transform/transformValues/flatTransformValues were removed in Kafka 4 and are not in this "
    "API (process / process_values instead)"
)
OLD_JOIN_API = (
    "switches off the outer-join spurious-result fix through a removed Java API; this engine "
    "always has the fix (its third store)"
)


# -- several streams of one topic (Kafka's InternalStreamsBuilder.mergeDuplicateSourceNodes) --


def test_should_allow_streams_from_same_topic() -> None:
    """StreamsBuilderTest.shouldAllowStreamsFromSameTopic: both streams read one source node."""
    builder = StreamsBuilder()
    first = builder.stream("topic")
    second = builder.stream("topic")
    topology = builder.build()
    assert first.node_name == second.node_name == "KSTREAM-SOURCE-0000000000"
    assert [n for n in topology.nodes] == ["KSTREAM-SOURCE-0000000000"]


def test_should_allow_reading_from_same_collection_of_topics() -> None:
    """StreamsBuilderTest.shouldAllowReadingFromSameCollectionOfTopics"""
    builder = StreamsBuilder()
    builder.stream(["topic1", "topic2"])
    builder.stream(["topic2", "topic1"])
    builder.build()


def test_should_not_allow_reading_from_overlapping_and_unequal_collection_of_topics() -> None:
    """StreamsBuilderTest.shouldNotAllowReadingFromOverlappingAndUnequalCollectionOfTopics (Java
    throws from build(); here the second call already refuses)"""
    builder = StreamsBuilder()
    builder.stream(["topic"])
    with pytest.raises(TopologyError):
        builder.stream(["topic", "anotherTopic"])
        builder.build()


@pytest.mark.parametrize(
    ("java_test", "first", "second"),
    [
        ("shouldThrowWhenSubscribedToATopicWithDifferentResetPolicies", "earliest", "latest"),
        ("shouldThrowWhenSubscribedToATopicWithSetAndUnsetResetPolicies", "earliest", None),
        ("shouldThrowWhenSubscribedToATopicWithUnsetAndSetResetPolicies", None, "latest"),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("should") else "",
)
def test_should_throw_when_subscribed_to_a_topic_with_different_reset_policies(
    java_test: str, first: Any, second: Any
) -> None:
    """StreamsBuilderTest.<java_test>: streams of one topic share a source, so their offset
    reset policies must agree (Java throws from build(); here the second call refuses)."""
    builder = StreamsBuilder()
    builder.stream("topic", Consumed(offset_reset=first))
    with pytest.raises(TopologyError, match="different offset reset policies"):
        builder.stream("topic", Consumed(offset_reset=second))
        builder.build()


@pytest.mark.parametrize(
    ("java_test", "first"),
    [("shouldNotAllowTablesFromSameTopic", "table"), ("shouldNowAllowStreamAndTableFromSameTopic", "stream")],
    ids=["shouldNotAllowTablesFromSameTopic", "shouldNowAllowStreamAndTableFromSameTopic"],
)
def test_a_table_never_shares_its_topic(java_test: str, first: str) -> None:
    """StreamsBuilderTest.<java_test>: only streams share a source; a table's topic is its own."""
    builder = StreamsBuilder()
    getattr(builder, first)("topic")
    with pytest.raises(TopologyError):
        builder.table("topic")
        builder.build()


def test_should_allow_subscribing_to_same_pattern() -> None:
    """StreamsBuilderTest.shouldAllowSubscribingToSamePattern: both streams read one source."""
    builder = StreamsBuilder()
    first = builder.stream(re.compile("some-regex"))
    second = builder.stream(re.compile("some-regex"))
    builder.build()
    assert first.node_name == second.node_name == "KSTREAM-SOURCE-0000000000"


@pytest.mark.parametrize(
    ("java_test", "second"),
    [
        ("shouldThrowWhenSubscribedToAPatternWithDifferentResetPolicies", "latest"),
        ("shouldThrowWhenSubscribedToAPatternWithSetAndUnsetResetPolicies", None),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("should") else "",
)
def test_should_throw_when_subscribed_to_a_pattern_with_different_reset_policies(
    java_test: str, second: Any
) -> None:
    """StreamsBuilderTest.<java_test> (Java throws from build(); here the second call refuses)."""
    builder = StreamsBuilder()
    builder.stream(re.compile("some-regex"), Consumed(offset_reset="earliest"))
    with pytest.raises(TopologyError, match="different offset reset policies"):
        builder.stream(re.compile("some-regex"), Consumed(offset_reset=second))
        builder.build()


def test_should_throw_exception_when_topic_names_are_null() -> None:
    """StreamsBuilderTest.shouldThrowExceptionWhenTopicNamesAreNull (Java refuses them at
    ``build()``, this API already at ``stream()``)."""
    builder = StreamsBuilder()
    refuses_null_argument(lambda: (builder.stream([None, None]), builder.build()))  # type: ignore[list-item]


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "StreamsBuilderTest",
    {
        "shouldUseSpecifiedNameForTransform": TRANSFORM,
        "shouldUseSpecifiedNameForTransformValues": TRANSFORM,
        "shouldUseSpecifiedNameForTransformValuesWithKey": TRANSFORM,
        "shouldUseSpecifiedNameForFlatTransformValueOperation": TRANSFORM,
        "shouldUseSpecifiedNameForFlatTransformValueWithKeyOperation": TRANSFORM,
        "shouldNotAddThirdStateStoreIfStreamStreamJoinFixIsDisabledViaOldApi": OLD_JOIN_API,
    },
)
