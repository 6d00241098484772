"""Kafka's ``KStreamImplTest.shouldSupportForeignKeyTableTableJoinWithKTableFromKStream``
(streams/src/test/java/org/apache/kafka/streams/kstream/internals/KStreamImplTest.java), translated:
the only case of that class about foreign-key joins (its ``describe()`` text is Kafka's, verbatim).
"""

from __future__ import annotations

from typing import Any

from platform_streams.dsl import Consumed, StreamsBuilder
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import expected_description

S = String()


def test_should_support_foreign_key_table_table_join_with_ktable_from_kstream() -> None:
    consumed = Consumed(key_serde=S, value_serde=S)
    builder = StreamsBuilder()
    left_table = builder.stream("input1", consumed).to_table()
    right_table = builder.stream("input2", consumed).to_table()

    def joiner(value1: Any, value2: Any) -> str:
        return f"({value1},{value2})"

    left_table.join(right_table, lambda value: value.split("|")[1], joiner).to_stream().to("output")
    topology = builder.build()
    assert str(topology.describe()) == expected_description(
        "KStreamImplTest", "shouldSupportForeignKeyTableTableJoinWithKTableFromKStream"
    )
    config = {"default_key_serde": "string", "default_value_serde": "string"}
    with TopologyTestDriver(topology, config) as driver:
        left = driver.create_input_topic("input1", S, S)
        right = driver.create_input_topic("input2", S, S)
        output = driver.create_output_topic("output", S, S)
        right.pipe_input("rhs1", "rhsValue1")
        right.pipe_input("rhs2", "rhsValue2")
        right.pipe_input("rhs3", "rhsValue3")  # this unreferenced FK won't show up in any results
        assert output.read_key_values_to_map() == {}
        left.pipe_input("lhs1", "lhsValue1|rhs1")
        left.pipe_input("lhs2", "lhsValue2|rhs2")
        assert output.read_key_values_to_map() == {
            "lhs1": "(lhsValue1|rhs1,rhsValue1)",
            "lhs2": "(lhsValue2|rhs2,rhsValue2)",
        }
        # Add another reference to an existing FK
        left.pipe_input("lhs3", "lhsValue3|rhs1")
        assert output.read_key_values_to_map() == {"lhs3": "(lhsValue3|rhs1,rhsValue1)"}
        left.pipe_input("lhs1", None)
        # Kafka's readKeyValuesToMap keeps the tombstone as lhs1 -> null
        assert output.read_key_values_to_list() == [("lhs1", None)]
