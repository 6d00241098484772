"""Kafka's ``KGroupedTableImplTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
KGroupedTableImplTest.java), translated: reduce (named and internal store) and count.

Java cases with no Python equivalent are skipped tests at the end of this module, each
saying why in its skip reason."""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.dsl import Consumed, Grouped, KTable, Materialized, StreamsBuilder
from platform_streams.serde import Double, Long, String
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    INVALID_STORE_NAME,
    JAVA_OPTIONAL_NULL,
    MockApiProcessorSupplier,
    cases_without_python_equivalent,
    refuses_invalid_name,
    refuses_null_argument,
)

S = String()
CONFIG = {"default_key_serde": "string", "default_value_serde": "integer"}


def _reduced(store: str | None) -> tuple[StreamsBuilder, KTable]:
    builder = StreamsBuilder()
    grouped = builder.table(
        "input",
        Consumed(key_serde=S, value_serde=Double()),
        Materialized.as_("store").with_key_serde(S).with_value_serde(Double()),
    ).group_by(lambda key, value: (key, int(value)))
    adder, subtractor = (lambda a, b: a + b), (lambda a, b: a - b)  # MockReducer.INTEGER_ADDER/SUBTRACTOR
    if store is None:
        return builder, grouped.reduce(adder, subtractor)
    return builder, grouped.reduce(adder, subtractor, Materialized.as_(store))


@pytest.mark.parametrize(
    "store", ["reduced", None], ids=["shouldReduce", "shouldReduceWithInternalStoreName"]
)
def test_should_reduce(store: str | None) -> None:
    """KGroupedTableImplTest.shouldReduce / shouldReduceWithInternalStoreName"""
    builder, reduced = _reduced(store)
    supplier = MockApiProcessorSupplier()
    reduced.to_stream().process(supplier)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("input", S, Double())
        (processor,) = supplier.captured_processors(1)

        def last() -> dict[Any, tuple[Any, int]]:
            return {key: (value, ts) for key, value, ts in processor.processed}

        topic.pipe_input("A", 1.1, 10)
        topic.pipe_input("B", 2.2, 11)
        assert last()["A"] == (1, 10) and last()["B"] == (2, 11)
        for key, value, ts in (("A", 2.6, 30), ("B", 1.3, 30), ("A", 5.7, 50), ("B", 6.2, 20)):
            topic.pipe_input(key, value, ts)
        assert last()["A"] == (5, 50) and last()["B"] == (6, 30)
    assert reduced.queryable_store_name() == store


def test_should_count_and_materialize_results() -> None:
    """KGroupedTableImplTest.shouldCountAndMaterializeResults"""
    builder = StreamsBuilder()
    builder.table("input", Consumed(key_serde=S, value_serde=S)).group_by(
        lambda key, value: (value, value), Grouped(key_serde=S, value_serde=S)
    ).count(Materialized.as_("count").with_key_serde(S).with_value_serde(Long()))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("input", S, S)
        for key, value, ts in (
            ("A", "1", 10),
            ("B", "1", 50),
            ("C", "1", 30),
            ("D", "2", 40),
            ("E", "2", 60),
        ):
            topic.pipe_input(key, value, ts)
        counts = driver.get_key_value_store("count")
        assert counts.get("1") == 3 and counts.get("2") == 2
        assert tuple(counts.get_timestamped("1")) == (3, 50)
        assert tuple(counts.get_timestamped("2")) == (2, 60)


def _java_setup() -> Any:
    """The Java setup's ``groupedTable`` (``MockMapper.selectValueKeyValueMapper()``)."""
    table = StreamsBuilder().table("blah", Consumed(key_serde=S, value_serde=S))
    return table.group_by(lambda key, value: (value, value))


def _string_init() -> str:
    return "0"


def _tostring(key: Any, value: Any, aggregate: Any) -> str:
    return f"{aggregate}+{value}"


def _string_reducer(aggregate: Any, value: Any) -> str:
    return f"{aggregate}+{value}"


STORE = Materialized.as_("store")
#: the calls with one null function (``s`` is the setup's grouped table)
NULL_CALLS: dict[str, Any] = {
    "initializer": lambda s: s.aggregate(None, _tostring, _tostring, STORE),
    "adder": lambda s: s.aggregate(_string_init, None, _tostring, STORE),
    "subtractor": lambda s: s.aggregate(_string_init, _tostring, None, STORE),
    "reduce adder": lambda s: s.reduce(None, _string_reducer, STORE),
    "reduce subtractor": lambda s: s.reduce(_string_reducer, None, STORE),
}
#: Java test -> the call Java refuses with a NullPointerException
NULL_ARGUMENTS: dict[str, Any] = {
    "shouldNotAllowNullInitializerOnAggregate": NULL_CALLS["initializer"],
    "shouldNotAllowNullAdderOnAggregate": NULL_CALLS["adder"],
    "shouldNotAllowNullSubtractorOnAggregate": NULL_CALLS["subtractor"],
    "shouldNotAllowNullAdderOnReduce": NULL_CALLS["reduce adder"],
    "shouldNotAllowNullSubtractorOnReduce": NULL_CALLS["reduce subtractor"],
    "shouldThrowNullPointerOnReduceWhenAdderIsNull": NULL_CALLS["reduce adder"],
    "shouldThrowNullPointerOnReduceWhenSubtractorIsNull": NULL_CALLS["reduce subtractor"],
    "shouldThrowNullPointerOnAggregateWhenInitializerIsNull": NULL_CALLS["initializer"],
    "shouldThrowNullPointerOnAggregateWhenAdderIsNull": NULL_CALLS["adder"],
    "shouldThrowNullPointerOnAggregateWhenSubtractorIsNull": NULL_CALLS["subtractor"],
}


@pytest.mark.parametrize("java_test", list(NULL_ARGUMENTS))
def test_null_argument_is_refused(java_test: str) -> None:
    """KGroupedTableImplTest.<java_test>: a null function is refused when the
    topology is built."""
    refuses_null_argument(lambda: NULL_ARGUMENTS[java_test](_java_setup()))


#: Java test -> its call with ``Materialized.as(INVALID_STORE_NAME)``
INVALID_STORE_NAMES: dict[str, Any] = {
    "shouldNotAllowInvalidStoreNameOnAggregate": lambda s: s.aggregate(
        _string_init, _tostring, _tostring, Materialized.as_(INVALID_STORE_NAME)
    ),
    "shouldNotAllowInvalidStoreNameOnReduce": lambda s: s.reduce(
        _string_reducer, _string_reducer, Materialized.as_(INVALID_STORE_NAME)
    ),
}


@pytest.mark.parametrize("java_test", list(INVALID_STORE_NAMES))
def test_invalid_store_name_is_refused(java_test: str) -> None:
    """KGroupedTableImplTest.<java_test>"""
    refuses_invalid_name(lambda: INVALID_STORE_NAMES[java_test](_java_setup()))


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "KGroupedTableImplTest",
    {
        "shouldThrowNullPointOnCountWhenMaterializedIsNull": JAVA_OPTIONAL_NULL,
        "shouldThrowNullPointerOnReduceWhenMaterializedIsNull": JAVA_OPTIONAL_NULL,
        "shouldThrowNullPointerOnAggregateWhenMaterializedIsNull": JAVA_OPTIONAL_NULL,
    },
)
