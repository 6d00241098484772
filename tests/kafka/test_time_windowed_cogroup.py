"""Kafka's ``TimeWindowedCogroupedKStreamImplTest`` (streams/src/test/java/org/apache/kafka/streams/
kstream/internals/TimeWindowedCogroupedKStreamImplTest.java), translated: windowed cogroups.

Java cases with no Python equivalent are skipped tests at the end of this module, each
saying why in its skip reason."""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.dsl import (
    Consumed,
    Grouped,
    Materialized,
    Named,
    StreamsBuilder,
    TimeWindowedSerde,
    TimeWindows,
)
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    JAVA_OPTIONAL_NULL,
    cases_without_python_equivalent,
    refuses_null_argument,
)

S = String()
WINDOW_SIZE = 500
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def tostring_adder(key: Any, value: Any, aggregate: Any) -> str:
    """MockAggregator.TOSTRING_ADDER"""
    return f"{aggregate}+{value}"


def tostring_remover(key: Any, value: Any, aggregate: Any) -> str:
    """MockAggregator.TOSTRING_REMOVER"""
    return f"{aggregate}-{value}"


def string_init() -> str:
    """MockInitializer.STRING_INIT"""
    return "0"


class Fixture:
    def __init__(self) -> None:
        self.builder = StreamsBuilder()
        consumed = Consumed(key_serde=S, value_serde=S)
        self.grouped = self.builder.stream("topic", consumed).group_by_key(
            Grouped(key_serde=S, value_serde=S)
        )
        self.grouped2 = self.builder.stream("topic2", consumed).group_by_key(
            Grouped(key_serde=S, value_serde=S)
        )
        self.windowed = (
            self.grouped.cogroup(tostring_adder)
            .cogroup(self.grouped2, tostring_remover)
            .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_SIZE))
        )

    def run(self, records: list[tuple[str, str, str, int]]) -> list[tuple[str, str, int]]:
        with TopologyTestDriver(self.builder.build(), CONFIG) as driver:
            inputs = {t: driver.create_input_topic(t, S, S) for t in ("topic", "topic2")}
            for topic, key, value, ts in records:
                inputs[topic].pipe_input(key, value, ts)
            out = driver.create_output_topic("output", TimeWindowedSerde(S, WINDOW_SIZE), S)
            return [(r.key.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def test_named_param_should_set_name() -> None:
    """TimeWindowedCogroupedKStreamImplTest.namedParamShouldSetName"""
    builder = StreamsBuilder()
    grouped = builder.stream("topic", Consumed(key_serde=S, value_serde=S)).group_by_key(
        Grouped(key_serde=S, value_serde=S)
    )
    grouped.cogroup(tostring_adder).windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_SIZE)).aggregate(
        string_init, Named.as_("foo")
    )
    assert str(builder.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n"
        "      --> foo-cogroup-agg-0\n"
        "    Processor: foo-cogroup-agg-0 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000001])\n"
        "      --> foo-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: foo-cogroup-merge (stores: [])\n"
        "      --> none\n"
        "      <-- foo-cogroup-agg-0\n\n"
    )


def test_time_window_aggregate_test_streams_test() -> None:
    """TimeWindowedCogroupedKStreamImplTest.timeWindowAggregateTestStreamsTest"""
    fx = Fixture()
    fx.windowed.aggregate(string_init, Materialized(key_serde=S, value_serde=S)).to_stream().to("output")
    got = fx.run(
        [("topic", k, v, ts) for k, v, ts in
         [("k1", "A", 0), ("k2", "A", 0), ("k2", "A", 1), ("k1", "A", 2),
          ("k1", "B", 3), ("k2", "B", 3), ("k2", "B", 4), ("k1", "B", 4)]]
    )  # fmt: skip
    assert got == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k2", "0+A+A", 1), ("k1", "0+A+A", 2),
        ("k1", "0+A+A+B", 3), ("k2", "0+A+A+B", 3), ("k2", "0+A+A+B+B", 4), ("k1", "0+A+A+B+B", 4),
    ]  # fmt: skip


def test_time_window_mix_aggregators_test() -> None:
    """TimeWindowedCogroupedKStreamImplTest.timeWindowMixAggregatorsTest"""
    fx = Fixture()
    fx.windowed.aggregate(string_init, Materialized(key_serde=S, value_serde=S)).to_stream().to("output")
    got = fx.run(
        [("topic", "k1", "A", 0), ("topic", "k2", "A", 0), ("topic", "k2", "A", 1),
         ("topic", "k1", "A", 2), ("topic2", "k1", "B", 3), ("topic2", "k2", "B", 3),
         ("topic2", "k2", "B", 4), ("topic2", "k1", "B", 4)]
    )  # fmt: skip
    assert got == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k2", "0+A+A", 1), ("k1", "0+A+A", 2),
        ("k1", "0+A+A-B", 3), ("k2", "0+A+A-B", 3), ("k2", "0+A+A-B-B", 4), ("k1", "0+A+A-B-B", 4),
    ]  # fmt: skip


def test_time_window_mix_aggregators_many_windows_test() -> None:
    """TimeWindowedCogroupedKStreamImplTest.timeWindowMixAggregatorsManyWindowsTest"""
    fx = Fixture()
    fx.windowed.aggregate(string_init, Materialized(key_serde=S, value_serde=S)).to_stream().to("output")
    got = fx.run(
        [("topic", "k1", "A", 0), ("topic", "k2", "A", 0), ("topic", "k2", "A", 1),
         ("topic", "k1", "A", 2), ("topic2", "k1", "B", 3), ("topic2", "k2", "B", 3),
         ("topic2", "k2", "B", 501), ("topic2", "k1", "B", 501)]
    )  # fmt: skip
    assert got == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k2", "0+A+A", 1), ("k1", "0+A+A", 2),
        ("k1", "0+A+A-B", 3), ("k2", "0+A+A-B", 3), ("k2", "0-B", 501), ("k1", "0-B", 501),
    ]  # fmt: skip


def test_time_window_aggregate_many_windows_test() -> None:
    """TimeWindowedCogroupedKStreamImplTest.timeWindowAggregateManyWindowsTest"""
    fx = Fixture()
    fx.grouped.cogroup(tostring_adder).windowed_by(TimeWindows.of_size_with_no_grace(500)).aggregate(
        string_init, Materialized(key_serde=S, value_serde=S)
    ).to_stream().to("output")
    got = fx.run(
        [
            ("topic", "k1", "A", 0),
            ("topic", "k2", "A", 499),
            ("topic", "k2", "A", 500),
            ("topic", "k1", "A", 500),
        ]
    )
    assert got == [("k1", "0+A", 0), ("k2", "0+A", 499), ("k2", "0+A", 500), ("k1", "0+A", 500)]


def test_time_window_aggregate_overlapping_windows_test() -> None:
    """TimeWindowedCogroupedKStreamImplTest.timeWindowAggregateOverlappingWindowsTest"""
    fx = Fixture()
    fx.grouped.cogroup(tostring_adder).windowed_by(
        TimeWindows.of_size_with_no_grace(500).advance_by(200)
    ).aggregate(string_init, Materialized(key_serde=S, value_serde=S)).to_stream().to("output")
    got = fx.run(
        [("topic", k, v, ts) for k, v, ts in
         [("k1", "A", 0), ("k2", "A", 0), ("k1", "B", 250), ("k2", "B", 250),
          ("k2", "A", 500), ("k1", "A", 500)]]
    )  # fmt: skip
    assert got == [
        ("k1", "0+A", 0), ("k2", "0+A", 0), ("k1", "0+A+B", 250), ("k1", "0+B", 250),
        ("k2", "0+A+B", 250), ("k2", "0+B", 250), ("k2", "0+B+A", 500), ("k2", "0+A", 500),
        ("k1", "0+B+A", 500), ("k1", "0+A", 500),
    ]  # fmt: skip


def _java_setup() -> Any:
    """The Java setup's ``windowedCogroupedStream``."""
    grouped = (
        StreamsBuilder()
        .stream("topic", Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
    )
    return grouped.cogroup(tostring_adder).windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_SIZE))


#: Java test -> the call Java refuses with a NullPointerException (``s`` is the setup's object)
NULL_ARGUMENTS: dict[str, Any] = {
    "shouldNotHaveNullInitializerOnAggregate": lambda s: s.aggregate(None),
    "shouldNotHaveNullInitializerTwoOptionNamedOnAggregate": lambda s: s.aggregate(None, Named.as_("test")),
    "shouldNotHaveNullInitializerTwoOptionMaterializedOnAggregate": lambda s: s.aggregate(
        None, Materialized.as_("test")
    ),
    "shouldNotHaveNullInitializerThreeOptionOnAggregate": lambda s: s.aggregate(
        None, Named.as_("test"), Materialized.as_("test")
    ),
}


@pytest.mark.parametrize("java_test", list(NULL_ARGUMENTS))
def test_null_argument_is_refused(java_test: str) -> None:
    """TimeWindowedCogroupedKStreamImplTest.<java_test>: a null function is refused when the
    topology is built."""
    refuses_null_argument(lambda: NULL_ARGUMENTS[java_test](_java_setup()))


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "TimeWindowedCogroupedKStreamImplTest",
    {
        "shouldNotHaveNullMaterializedOnTwoOptionAggregate": JAVA_OPTIONAL_NULL,
        "shouldNotHaveNullNamedTwoOptionOnAggregate": JAVA_OPTIONAL_NULL,
        "shouldNotHaveNullMaterializedOnAggregate": JAVA_OPTIONAL_NULL,
        "shouldNotHaveNullNamedOnAggregate": JAVA_OPTIONAL_NULL,
    },
)
