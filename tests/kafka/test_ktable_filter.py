"""Kafka's ``KTableFilterTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
KTableFilterTest.java), translated. Caching is off at the config level
(``statestore_cache_max_bytes=0``), as in the Java ``setUp``. Also
``shouldSkipNullToRepartition{Without,On}Materialization`` and ``shouldGetValuesOnMaterialization``.
"""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.dsl import Consumed, KTable, Materialized, StreamsBuilder
from platform_streams.serde import Integer, String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    JAVA_TYPE_VARIANCE,
    MockApiProcessorSupplier,
    cases_without_python_equivalent,
    streams_config,
)

S, INT = String(), Integer()
CONSUMED = Consumed(key_serde=S, value_serde=INT)
PROPS = streams_config("string", "integer", statestore_cache_max_bytes=0)


def predicate(key: Any, value: Any) -> bool:
    return value % 2 == 0


def _do_test_ktable(builder: StreamsBuilder, table2: KTable, table3: KTable, topic: str) -> None:
    supplier = MockApiProcessorSupplier()
    table2.to_stream().process(supplier)
    table3.to_stream().process(supplier)
    with TopologyTestDriver(builder.build(), PROPS) as driver:
        topic_in = driver.create_input_topic(topic, S, INT, start_timestamp_ms=0)
        for key, value, ts in [
            ("A", 1, 10),
            ("B", 2, 5),
            ("C", 3, 8),
            ("D", 4, 14),
            ("A", None, 18),
            ("B", None, 15),
        ]:
            topic_in.pipe_input(key, value, ts)
    processors = supplier.captured_processors(2)
    processors[0].check_and_clear_process_result(
        ("A", None, 10), ("B", 2, 5), ("C", None, 8), ("D", 4, 14), ("A", None, 18), ("B", None, 15)
    )
    processors[1].check_and_clear_process_result(
        ("A", 1, 10), ("B", None, 5), ("C", 3, 8), ("D", None, 14), ("A", None, 18), ("B", None, 15)
    )


def test_should_pass_through_without_materialization() -> None:
    """KTableFilterTest.shouldPassThroughWithoutMaterialization"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.filter(predicate)
    table3 = table1.filter_not(predicate)
    assert table1.queryable_store_name() is None
    assert table2.queryable_store_name() is None
    assert table3.queryable_store_name() is None
    _do_test_ktable(builder, table2, table3, "topic1")


def test_should_pass_through_on_materialization() -> None:
    """KTableFilterTest.shouldPassThroughOnMaterialization"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.filter(predicate, Materialized.as_("store2"))
    table3 = table1.filter_not(predicate)
    assert table1.queryable_store_name() is None
    assert table2.queryable_store_name() == "store2"
    assert table3.queryable_store_name() is None
    _do_test_ktable(builder, table2, table3, "topic1")


class _PerNode:
    """Java's one supplier for "proc1" and "proc2", whose captured processors come in node order."""

    def __init__(self) -> None:
        self.suppliers = (MockApiProcessorSupplier(), MockApiProcessorSupplier())

    def captured_processors(self, expected: int) -> list[Any]:
        return [p for supplier in self.suppliers for p in supplier.captured_processors(1)][:expected]


def _attach(builder: StreamsBuilder, table1: KTable, table2: KTable) -> tuple[Any, _PerNode]:
    """``topology.addProcessor("proc1"/"proc2", supplier, tableN.name)``: see the Changes themselves.

    As in the Java test, the driver then gets ``builder.build()`` again: the builder's one
    topology, with the two processors added."""
    per_node = _PerNode()
    topology = builder.build()
    topology.add_processor("proc1", per_node.suppliers[0], table1.node_name)
    topology.add_processor("proc2", per_node.suppliers[1], table2.node_name)
    return builder.build(), per_node


def _do_test_not_sending_old_value(builder: StreamsBuilder, table1: KTable, table2: KTable) -> None:
    topology, supplier = _attach(builder, table1, table2)
    with TopologyTestDriver(topology, PROPS) as driver:
        topic = driver.create_input_topic("topic1", S, INT, start_timestamp_ms=0)
        for key, ts in (("A", 5), ("B", 10), ("C", 15)):
            topic.pipe_input(key, 1, ts)
        p1, p2 = supplier.captured_processors(2)
        p1.check_and_clear_process_result(("A", (1, None), 5), ("B", (1, None), 10), ("C", (1, None), 15))
        p2.check_and_clear_process_result(
            ("A", (None, None), 5), ("B", (None, None), 10), ("C", (None, None), 15)
        )
        topic.pipe_input("A", 2, 15)
        topic.pipe_input("B", 2, 8)
        p1.check_and_clear_process_result(("A", (2, None), 15), ("B", (2, None), 8))
        p2.check_and_clear_process_result(("A", (2, None), 15), ("B", (2, None), 8))
        topic.pipe_input("A", 3, 20)
        p1.check_and_clear_process_result(("A", (3, None), 20))
        p2.check_and_clear_process_result(("A", (None, None), 20))
        topic.pipe_input("A", None, 10)
        topic.pipe_input("B", None, 20)
        p1.check_and_clear_process_result(("A", (None, None), 10), ("B", (None, None), 20))
        p2.check_and_clear_process_result(("A", (None, None), 10), ("B", (None, None), 20))


def _do_test_sending_old_value(
    builder: StreamsBuilder, table1: KTable, table2: KTable, parent_sends: bool
) -> None:
    topology, supplier = _attach(builder, table1, table2)

    def old(value: int) -> int | None:
        return value if parent_sends else None

    with TopologyTestDriver(topology, PROPS) as driver:
        topic = driver.create_input_topic("topic1", S, INT, start_timestamp_ms=0)
        for key, ts in (("A", 5), ("B", 10), ("C", 15)):
            topic.pipe_input(key, 1, ts)
        p1, p2 = supplier.captured_processors(2)
        p1.check_and_clear_process_result(("A", (1, None), 5), ("B", (1, None), 10), ("C", (1, None), 15))
        p2.check_and_clear_process_result()
        topic.pipe_input("A", 2, 15)
        topic.pipe_input("B", 2, 8)
        p1.check_and_clear_process_result(("A", (2, old(1)), 15), ("B", (2, old(1)), 8))
        p2.check_and_clear_process_result(("A", (2, None), 15), ("B", (2, None), 8))
        topic.pipe_input("A", 3, 20)
        p1.check_and_clear_process_result(("A", (3, old(2)), 20))
        p2.check_and_clear_process_result(("A", (None, 2), 20))
        topic.pipe_input("A", None, 10)
        topic.pipe_input("B", None, 20)
        p1.check_and_clear_process_result(("A", (None, old(3)), 10), ("B", (None, old(2)), 20))
        p2.check_and_clear_process_result(("B", (None, 2), 20))


def test_should_not_send_old_values_without_materialization() -> None:
    """KTableFilterTest.shouldNotSendOldValuesWithoutMaterialization"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    _do_test_not_sending_old_value(builder, table1, table1.filter(predicate))


def test_should_not_send_old_values_on_materialization() -> None:
    """KTableFilterTest.shouldNotSendOldValuesOnMaterialization"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    _do_test_not_sending_old_value(builder, table1, table1.filter(predicate, Materialized.as_("store2")))


def test_should_not_enable_sending_old_values_if_not_already_materialized_and_not_forced() -> None:
    """KTableFilterTest.shouldNotEnableSendingOldValuesIfNotAlreadyMaterializedAndNotForcedToMaterialize"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.filter(predicate)
    table2.enable_send_old_values(False)
    _do_test_not_sending_old_value(builder, table1, table2)


def test_should_enable_send_old_values_when_not_materialized_already_but_forced() -> None:
    """KTableFilterTest.shouldEnableSendOldValuesWhenNotMaterializedAlreadyButForcedToMaterialize"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.filter(predicate)
    assert table2.enable_send_old_values(True)
    _do_test_sending_old_value(builder, table1, table2, parent_sends=True)


def test_should_enable_send_old_values_when_materialized_already_and_forced() -> None:
    """KTableFilterTest.shouldEnableSendOldValuesWhenMaterializedAlreadyAndForcedToMaterialize"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.filter(predicate, Materialized.as_("store2"))
    assert table2.enable_send_old_values(True)
    _do_test_sending_old_value(builder, table1, table2, parent_sends=False)


def test_should_send_old_values_when_enabled_on_upstream_materialization() -> None:
    """KTableFilterTest.shouldSendOldValuesWhenEnabledOnUpStreamMaterialization"""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED, Materialized.as_("store2"))
    table2 = table1.filter(predicate)
    assert table2.enable_send_old_values(False)
    _do_test_sending_old_value(builder, table1, table2, parent_sends=True)


def _do_test_skip_null_on_materialization(
    builder: StreamsBuilder, table1: KTable, table2: KTable, should_skip: bool = True
) -> None:
    """KTableFilterTest.doTestSkipNullOnMaterialization: with ``should_skip`` the rejected rows
    were never in the filtered table, so no tombstone goes on to the repartition topic; over a
    versioned table the tombstones are sent (Kafka's ``KTableFilter.useVersionedSemantics``)."""
    topology, supplier = _attach(builder, table1, table2)
    with TopologyTestDriver(topology, PROPS) as driver:
        topic = driver.create_input_topic("topic1", S, S, start_timestamp_ms=0)
        for key, ts in (("A", 5), ("B", 10), ("C", 20)):
            topic.pipe_input(key, "reject", ts)
    p1, p2 = supplier.captured_processors(2)
    p1.check_and_clear_process_result(
        ("A", ("reject", None), 5), ("B", ("reject", None), 10), ("C", ("reject", None), 20)
    )
    if should_skip:
        p2.check_and_clear_process_result()
    else:
        p2.check_and_clear_process_result(
            ("A", (None, None), 5), ("B", (None, None), 10), ("C", (None, None), 20)
        )


@pytest.mark.parametrize(
    "java_test",
    ["shouldSkipNullToRepartitionWithoutMaterialization", "shouldSkipNullToRepartitionOnMaterialization"],
)
def test_should_skip_null_to_repartition(java_test: str) -> None:
    """KTableFilterTest.<java_test>: the downstream groupBy/reduce (not the test) turns on old
    values; the filter is materialized ("store2") in the second case."""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", Consumed(key_serde=S, value_serde=S))
    on_materialization = java_test.endswith("OnMaterialization")

    def accept(key: Any, value: Any) -> bool:
        return str(value).lower() == "accept"

    table2 = (
        table1.filter(accept, materialized=Materialized.as_("store2"))
        if on_materialization
        else (table1.filter(accept))
    )
    reduced = Materialized.as_("mock-result") if on_materialization else None
    table2.group_by(lambda k, v: (k, v)).reduce(
        lambda a, b: a + b, lambda a, b: a[: len(a) - len(b)], materialized=reduced
    )
    _do_test_skip_null_on_materialization(builder, table1, table2)


def test_should_get_values_on_materialization() -> None:
    """KTableFilterTest.shouldGetValuesOnMaterialization (with doTestValueGetter): Kafka's value
    getters of the materialized filters read their stores, so here the stores are read directly
    (``get_timestamped`` = ``ValueAndTimestamp``); a rejected row is absent (None)."""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", CONSUMED)
    table2 = table1.filter(predicate, materialized=Materialized.as_("store2"))
    table3 = table1.filter_not(predicate, materialized=Materialized.as_("store3"))
    table4 = table1.filter_not(predicate)
    assert table1.queryable_store_name() is None
    assert table2.queryable_store_name() == "store2"
    assert table3.queryable_store_name() == "store3"
    assert table4.queryable_store_name() is None
    with TopologyTestDriver(builder.build(), PROPS) as driver:
        topic = driver.create_input_topic("topic1", S, INT, start_timestamp_ms=0)
        store2, store3 = driver.get_key_value_store("store2"), driver.get_key_value_store("store3")

        def check(expected2: list[Any], expected3: list[Any]) -> None:
            for store, expected in ((store2, expected2), (store3, expected3)):
                got = [store.get_timestamped(key) for key in "ABC"]
                assert [None if g is None else (g.value, g.timestamp) for g in got] == expected

        for key, value, ts in (("A", 1, 5), ("B", 1, 10), ("C", 1, 15)):
            topic.pipe_input(key, value, ts)
        check([None, None, None], [(1, 5), (1, 10), (1, 15)])
        topic.pipe_input("A", 2, 10)
        topic.pipe_input("B", 2, 5)
        check([(2, 10), (2, 5), None], [None, None, (1, 15)])
        topic.pipe_input("A", 3, 15)
        check([None, (2, 5), None], [(3, 15), None, (1, 15)])
        topic.pipe_input("A", None, 10)
        topic.pipe_input("B", None, 20)
        check([None, None, None], [None, None, (1, 15)])


def _accept(key: Any, value: Any) -> bool:
    return str(value).lower() == "accept"


def _versioned() -> Materialized:
    return Materialized.as_(Stores.persistent_versioned_key_value_store("versioned", 5 * 60 * 1000))


def test_should_not_skip_null_if_versioned_upstream() -> None:
    """KTableFilterTest.shouldNotSkipNullIfVersionedUpstream: the downstream reduce turns on old
    values, but duplicate tombstones are still sent because the source table is versioned."""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", Consumed(key_serde=S, value_serde=S), _versioned())
    table2 = table1.filter(_accept)
    table2.group_by(lambda k, v: (k, v)).reduce(lambda a, b: a + b, lambda a, b: a[: len(a) - len(b)])
    _do_test_skip_null_on_materialization(builder, table1, table2, should_skip=False)


def test_should_skip_null_if_versioned_downstream() -> None:
    """KTableFilterTest.shouldSkipNullIfVersionedDownstream: a versioned filter result does not
    matter; whether the input table is versioned decides."""
    builder = StreamsBuilder()
    table1 = builder.table("topic1", Consumed(key_serde=S, value_serde=S), Materialized.as_("store"))
    table2 = table1.filter(_accept, materialized=_versioned())
    table2.group_by(lambda k, v: (k, v)).reduce(lambda a, b: a + b, lambda a, b: a[: len(a) - len(b)])
    _do_test_skip_null_on_materialization(builder, table1, table2)


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "KTableFilterTest",
    {
        "testTypeVariance": JAVA_TYPE_VARIANCE,
    },
)
