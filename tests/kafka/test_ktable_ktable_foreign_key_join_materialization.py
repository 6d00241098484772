"""Kafka's ``KTableKTableForeignKeyJoinMaterializationIntegrationTest`` (streams/src/test/java/org/apache/
kafka/streams/integration/KTableKTableForeignKeyJoinMaterializationIntegrationTest.java), translated:
it runs through the TopologyTestDriver in Kafka too. The record cache of a queryable result store
suppresses the one tombstone that is certainly unnecessary."""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.dsl import Consumed, Materialized, Produced, StreamsBuilder
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology import Topology

S = String()


def _topology(materialized: bool, queryable: bool) -> Topology:
    builder = StreamsBuilder()
    left = builder.table("left_table", Consumed(key_serde=S, value_serde=S))
    right = builder.table("right_table", Consumed(key_serde=S, value_serde=S))

    def joiner(value1: Any, value2: Any) -> str:
        return f"({value1},{value2})"

    def extractor(value: str) -> str:
        return value.split("|")[1]

    store = Materialized.as_("store").with_value_serde(S) if queryable else Materialized(value_serde=S)
    if materialized:
        result = left.join(right, extractor, joiner, store)
    else:
        result = left.join(right, extractor, joiner)
    result.to_stream().to("output-topic", Produced(value_serde=S))
    return builder.build()


@pytest.mark.parametrize(("materialized", "queryable"), [(False, False), (True, False), (True, True)])
def test_should_emit_tombstone_when_deleting_non_joining_records(materialized: bool, queryable: bool) -> None:
    """shouldEmitTombstoneWhenDeletingNonJoiningRecords"""
    config = {"default_key_serde": "string", "default_value_serde": "string"}
    with TopologyTestDriver(_topology(materialized, queryable), config) as driver:
        left = driver.create_input_topic("left_table", S, S)
        output = driver.create_output_topic("output-topic", S, S)

        def store() -> dict[str, Any]:
            return dict(driver.get_key_value_store("store").all())

        left.pipe_input("lhs1", "lhsValue1|rhs1")
        assert output.read_key_values_to_list() == []
        if materialized and queryable:
            assert store() == {}
        # Deleting a non-joining record produces an unnecessary tombstone for inner joins, because
        # it's not possible to know whether a result was previously emitted.
        left.pipe_input("lhs1", None)
        if materialized and queryable:
            # only here the record cache knows there never was a result, and suppresses it
            assert output.read_key_values_to_list() == []
            assert store() == {}
        else:
            assert output.read_key_values_to_list() == [("lhs1", None)]
        # Deleting a non-existing record is idempotent
        left.pipe_input("lhs1", None)
        assert output.read_key_values_to_list() == []
        if materialized and queryable:
            assert store() == {}
