"""Kafka's ``KStreamKTableJoinTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
KStreamKTableJoinTest.java), translated.

Java cases with no Python equivalent are skipped tests at the end of this module, each
saying why in its skip reason (the versioned-table cases: versioned stores are the next
issue). ``shouldLogAndMeterWhenSkipping*``: asserted on the dropped-records count here, the log
text is not Kafka's.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, Joined, Materialized, StreamsBuilder
from platform_streams.errors import TopologyError
from platform_streams.serde import Integer, String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    VERSIONED_STORES,
    MockApiProcessor,
    MockApiProcessorSupplier,
    cases_without_python_equivalent,
    expected_description,
)

INT, S = Integer(), String()
CONFIG = {"default_key_serde": "integer", "default_value_serde": "string"}
NO_OPTIMIZATION = StreamsConfig(
    application_id="app", bootstrap_servers="x:9092", topology_optimization="none"
)
EXPECTED_KEYS = [0, 1, 2, 3]


def tostring_joiner(value1: Any, value2: Any) -> str:
    """MockValueJoiner.TOSTRING_JOINER"""
    return f"{value1}+{value2}"


class Fixture:
    def __init__(self) -> None:
        self.builder = StreamsBuilder()
        consumed = Consumed(key_serde=INT, value_serde=S)
        stream = self.builder.stream("streamTopic", consumed)
        table = self.builder.table("tableTopic", consumed)
        supplier = MockApiProcessorSupplier()
        stream.join(table, tostring_joiner).process(supplier)
        self.driver = TopologyTestDriver(self.builder.build(), CONFIG)
        self.stream_in = self.driver.create_input_topic("streamTopic", INT, S, start_timestamp_ms=0)
        self.table_in = self.driver.create_input_topic("tableTopic", INT, S, start_timestamp_ms=0)
        self.processor: MockApiProcessor = supplier.captured_processors(1)[0]

    def push_to_stream(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.stream_in.pipe_input(EXPECTED_KEYS[i], f"{prefix}{EXPECTED_KEYS[i]}", i)

    def push_to_table(self, count: int, prefix: str) -> None:
        for i in range(count):
            self.table_in.pipe_input(
                EXPECTED_KEYS[i], f"{prefix}{EXPECTED_KEYS[i]}", random.randrange(2**31 - 1)
            )

    def push_null_value_to_table(self) -> None:
        for i in range(2):
            self.table_in.pipe_input(EXPECTED_KEYS[i], None)


@pytest.fixture
def fx() -> Iterator[Fixture]:
    fixture = Fixture()
    yield fixture
    fixture.driver.close()


def _rekeyed_with_two_tables() -> tuple[StreamsBuilder, Any, Any, Any]:
    builder = StreamsBuilder()
    consumed = Consumed(key_serde=S, value_serde=S)
    stream_a = builder.stream("topic", consumed)
    table_b = builder.table("topic2", consumed)
    table_c = builder.table("topic3", consumed)
    return builder, stream_a.map(lambda k, v: (v, k)), table_b, table_c


def test_should_fail_if_table_is_not_versioned() -> None:
    """KStreamKTableJoinTest.shouldFailIfTableIsNotVersioned"""
    builder = StreamsBuilder()
    stream_a = builder.stream("topic", Consumed(key_serde=S, value_serde=S))
    table_b = builder.table("topic2", Consumed(key_serde=S, value_serde=S))
    joined = Joined(key_serde=S, value_serde=S, other_value_serde=S, name="first-join").with_grace_period(6)
    with pytest.raises(
        TopologyError, match=r"KTable must be versioned to use a grace period in a stream table join\."
    ):
        stream_a.join(table_b, lambda v1, v2: v1 + v2, joined)


def test_should_fail_if_table_is_not_versioned_but_materialization_is_inherited() -> None:
    """KStreamKTableJoinTest.shouldFailIfTableIsNotVersionedButMaterializationIsInherited"""
    builder = StreamsBuilder()
    stream_a = builder.stream("topic", Consumed(key_serde=S, value_serde=S))
    source = builder.table(
        "topic2",
        Consumed(key_serde=S, value_serde=S),
        Materialized(store_supplier=Stores.in_memory_key_value_store("tableB")),
    )
    table_b = source.map_values(lambda v: v)
    joined = Joined(key_serde=S, value_serde=S, other_value_serde=S, name="first-join").with_grace_period(6)
    with pytest.raises(TopologyError, match="KTable must be versioned"):
        stream_a.join(table_b, lambda v1, v2: v1 + v2, joined)


def test_should_reuse_repartition_topic_with_generated_name() -> None:
    """KStreamKTableJoinTest.shouldReuseRepartitionTopicWithGeneratedName"""
    builder, rekeyed, table_b, table_c = _rekeyed_with_two_tables()
    rekeyed.join(table_b, lambda v1, v2: v1 + v2).to("out-one")
    rekeyed.join(table_c, lambda v1, v2: v1 + v2).to("out-two")
    assert str(builder.build(NO_OPTIMIZATION).describe()) == expected_description(
        "KStreamKTableJoinTest", "shouldReuseRepartitionTopicWithGeneratedName"
    )


def test_should_create_repartition_topics_with_user_provided_name() -> None:
    """KStreamKTableJoinTest.shouldCreateRepartitionTopicsWithUserProvidedName"""
    builder, rekeyed, table_b, table_c = _rekeyed_with_two_tables()
    first = Joined(key_serde=S, value_serde=S, other_value_serde=S, name="first-join")
    second = Joined(key_serde=S, value_serde=S, other_value_serde=S, name="second-join")
    rekeyed.join(table_b, lambda v1, v2: v1 + v2, first).to("out-one")
    rekeyed.join(table_c, lambda v1, v2: v1 + v2, second).to("out-two")
    assert str(builder.build(NO_OPTIMIZATION).describe()) == expected_description(
        "KStreamKTableJoinTest", "shouldCreateRepartitionTopicsWithUserProvidedName"
    )


def test_should_require_copartitioned_streams(fx: Fixture) -> None:
    """KStreamKTableJoinTest.shouldRequireCopartitionedStreams"""
    assert fx.builder.build().copartition_groups == [frozenset({"streamTopic", "tableTopic"})]


def test_should_not_join_with_empty_table_on_stream_updates(fx: Fixture) -> None:
    """KStreamKTableJoinTest.shouldNotJoinWithEmptyTableOnStreamUpdates"""
    fx.push_to_stream(2, "X")
    fx.processor.check_and_clear_process_result()


def test_should_not_join_on_table_updates(fx: Fixture) -> None:
    """KStreamKTableJoinTest.shouldNotJoinOnTableUpdates"""
    fx.push_to_stream(2, "X")
    fx.processor.check_and_clear_process_result()
    fx.push_to_table(2, "Y")
    fx.processor.check_and_clear_process_result()
    fx.push_to_stream(4, "X")
    fx.processor.check_and_clear_process_result((0, "X0+Y0", 0), (1, "X1+Y1", 1))
    fx.push_to_table(4, "YY")
    fx.processor.check_and_clear_process_result()
    fx.push_to_stream(4, "X")
    fx.processor.check_and_clear_process_result(
        (0, "X0+YY0", 0), (1, "X1+YY1", 1), (2, "X2+YY2", 2), (3, "X3+YY3", 3)
    )
    fx.push_to_table(4, "YYY")
    fx.processor.check_and_clear_process_result()


def test_should_join_only_if_match_found_on_stream_updates(fx: Fixture) -> None:
    """KStreamKTableJoinTest.shouldJoinOnlyIfMatchFoundOnStreamUpdates"""
    fx.push_to_table(2, "Y")
    fx.processor.check_and_clear_process_result()
    fx.push_to_stream(4, "X")
    fx.processor.check_and_clear_process_result((0, "X0+Y0", 0), (1, "X1+Y1", 1))


def test_should_clear_table_entry_on_null_value_updates(fx: Fixture) -> None:
    """KStreamKTableJoinTest.shouldClearTableEntryOnNullValueUpdates"""
    fx.push_to_table(4, "Y")
    fx.processor.check_and_clear_process_result()
    fx.push_to_stream(4, "X")
    fx.processor.check_and_clear_process_result(
        (0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)
    )
    fx.push_null_value_to_table()
    fx.processor.check_and_clear_process_result()
    fx.push_to_stream(4, "XX")
    fx.processor.check_and_clear_process_result((2, "XX2+Y2", 2), (3, "XX3+Y3", 3))


@pytest.mark.parametrize(("key", "value"), [(None, "A"), (1, None)], ids=["null_left_key", "null_left_value"])
def test_should_skip_null_left_key_or_value(fx: Fixture, key: Any, value: Any) -> None:
    """KStreamKTableJoinTest.shouldLogAndMeterWhenSkippingNullLeftKey / ...NullLeftValue"""
    fx.push_to_table(4, "Y")
    fx.stream_in.pipe_input(key, value)
    fx.processor.check_and_clear_process_result()


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "KStreamKTableJoinTest",
    {
        "shouldNotFailIfTableIsVersionedButMaterializationIsInherited": VERSIONED_STORES,
        "shouldFailIfGracePeriodIsLongerThanHistoryRetention": VERSIONED_STORES,
        "shouldFailIfGracePeriodIsLongerThanHistoryRetentionAndInheritedStore": VERSIONED_STORES,
        "shouldDelayJoinByGracePeriod": VERSIONED_STORES,
        "shouldHandleLateJoinsWithGracePeriod": VERSIONED_STORES,
    },
)
