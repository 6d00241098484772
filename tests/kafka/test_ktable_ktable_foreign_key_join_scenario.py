"""Kafka's ``KTableKTableForeignKeyJoinScenarioTest`` (streams/src/test/java/org/apache/kafka/streams/
kstream/internals/KTableKTableForeignKeyJoinScenarioTest.java), translated.

``shouldUseExpectedTopicsWithSerde`` is translated for what exists here: the internal topics
the join writes (Kafka checks them through the topic names its serdes are called with; serdes here
take no topic, so Kafka's ``-fk``/``-pk``/``-vh`` pseudo-topics have no equivalent).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, KTable, Materialized, Produced, StreamsBuilder
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver

INT, S = Integer(), String()


def _fk(value: str) -> int:
    return int(value.split("-")[0])


def _joiner(a: str, b: str) -> str:
    return f"({a},{b})"


def _validate_topology_can_process_data(builder: StreamsBuilder) -> None:
    """validateTopologyCanProcessData"""
    config = {"default_key_serde": "integer", "default_value_serde": "string"}
    with TopologyTestDriver(builder.build(), config) as driver:
        a_topic = driver.create_input_topic("A", INT, S)
        b_topic = driver.create_input_topic("B", INT, S)
        output = driver.create_output_topic("output", INT, S)
        a_topic.pipe_input(1, "999-alpha")
        b_topic.pipe_input(999, "beta")
        assert output.read_key_values_to_map() == {1: "(999-alpha,(999-alpha,beta))"}


def _default_serdes(builder: StreamsBuilder) -> None:
    a_table, b_table = builder.table("A"), builder.table("B")
    fk_join_result = a_table.join(b_table, _fk, _joiner, Materialized.as_("asdf"))
    a_table.join(fk_join_result, _joiner).to_stream().to("output")


def _default_and_consumed_serdes(builder: StreamsBuilder) -> None:
    a_table = builder.table("A", Consumed(key_serde=INT, value_serde=S))
    b_table = builder.table("B")
    fk_join_result = a_table.join(b_table, _fk, _joiner, Materialized.as_("asdf"))
    a_table.join(fk_join_result, _joiner).to_stream().to("output")


def _default_and_join_result_serdes(builder: StreamsBuilder) -> None:
    a_table, b_table = builder.table("A"), builder.table("B")
    materialized = Materialized.as_("asdf").with_key_serde(INT).with_value_serde(S)
    fk_join_result = a_table.join(b_table, _fk, _joiner, materialized)
    a_table.join(fk_join_result, _joiner).to_stream().to("output")


def _default_and_equi_join_result_serdes(builder: StreamsBuilder) -> None:
    a_table, b_table = builder.table("A"), builder.table("B")
    fk_join_result = a_table.join(b_table, _fk, _joiner, Materialized.as_("asdf"))
    a_table.join(fk_join_result, _joiner, Materialized(key_serde=INT, value_serde=S)).to_stream().to("output")


def _default_and_produced_serdes(builder: StreamsBuilder) -> None:
    a_table, b_table = builder.table("A"), builder.table("B")
    fk_join_result: KTable = a_table.join(b_table, _fk, _joiner, Materialized.as_("asdf"))
    a_table.join(fk_join_result, _joiner).to_stream().to("output", Produced(key_serde=INT, value_serde=S))


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(_default_serdes, id="shouldWorkWithDefaultSerdes"),
        pytest.param(_default_and_consumed_serdes, id="shouldWorkWithDefaultAndConsumedSerdes"),
        pytest.param(_default_and_join_result_serdes, id="shouldWorkWithDefaultAndJoinResultSerdes"),
        pytest.param(_default_and_equi_join_result_serdes, id="shouldWorkWithDefaultAndEquiJoinResultSerdes"),
        pytest.param(_default_and_produced_serdes, id="shouldWorkWithDefaultAndProducedSerdes"),
    ],
)
def test_should_work_with_serdes(build: Callable[[StreamsBuilder], None]) -> None:
    builder = StreamsBuilder()
    build(builder)
    _validate_topology_can_process_data(builder)


def test_should_use_expected_topics_with_serde() -> None:
    """shouldUseExpectedTopicsWithSerde: the internal topics are Kafka's, and the only ones written"""
    application_id = "ktable-ktable-joinOnForeignKey"
    config = StreamsConfig(application_id=application_id, bootstrap_servers="x:9092")
    builder = StreamsBuilder()
    consumed = Consumed(key_serde=INT, value_serde=S)
    left = builder.table("left_table", consumed)
    right = builder.table("right_table", consumed)
    left.join(
        right, lambda value: int(value.split("|")[1]), _joiner, Materialized(value_serde=S)
    ).to_stream().to("output-topic")
    topology = builder.build(config)
    internal = {
        "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic",
        "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic",
        "left_table-STATE-STORE-0000000000-changelog",
        "right_table-STATE-STORE-0000000003-changelog",
        "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010-changelog",
    }
    assert set(topology.internal_topics) == internal
    with TopologyTestDriver(topology, config) as driver:
        driver.create_input_topic("left_table", INT, S).pipe_input(2, "lhsValue1|1")
        driver.create_input_topic("right_table", INT, S).pipe_input(1, "rhsValue1")
        written = driver.produced_topic_names()
    assert written == {f"{application_id}-{topic}" for topic in internal} | {"output-topic"}
