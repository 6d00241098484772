"""Kafka's ``KTableFilterTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
KTableFilterTest.java), translated. Caching is off at the config level
(``statestore_cache_max_bytes=0``), as in the Java ``setUp``.
"""

from __future__ import annotations

from typing import Any

from platform_streams.dsl import Consumed, KTable, Materialized, StreamsBuilder
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import MockApiProcessorSupplier, streams_config

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
