"""Non-windowed joins through the TopologyTestDriver, case by case against the join
semantics tables of Kafka Streams' "Streams DSL" guide (KStream-KTable, KTable-KTable),
plus KStream-GlobalKTable joins, co-partitioning declarations and timestamps."""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.dsl import Joined, Materialized, Named, StreamsBuilder
from platform_streams.errors import CoPartitioningError, TopologyError
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology import Topology, compile_topology

S = String()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def joiner(left: Any, right: Any) -> str:
    return f"[{'null' if left is None else left}, {'null' if right is None else right}]"


def _read(driver: TopologyTestDriver, topic: str = "out") -> list[Any]:
    """Each output record's value; a tombstone reads as None."""
    return driver.create_output_topic(topic, S, S).read_values_to_list()


# Rows: (timestamp, left input, right input); "-" = no record on that side, None = a tombstone/null.
_DOC_INPUTS: list[tuple[int, Any, Any]] = [
    (1, None, "-"),
    (2, "-", None),
    (3, "A", "-"),
    (4, "-", "a"),
    (5, "B", "-"),
    (6, "-", "b"),
    (7, None, "-"),
    (8, "-", None),
    (9, "C", "-"),
    (10, "-", "c"),
    (11, "-", None),
    (12, None, "-"),
    (13, "-", None),
    (14, "-", "d"),
    (15, "D", "-"),
]

# KStream-KTable table of the guide: only stream records trigger; "" = no output.
STREAM_TABLE_EXPECTED = {
    "inner": {5: "[B, a]", 15: "[D, d]"},
    "left": {3: "[A, null]", 5: "[B, a]", 9: "[C, null]", 15: "[D, d]"},
}

# KTable-KTable table of the guide; None = a delete (tombstone) is emitted.
TABLE_TABLE_EXPECTED: dict[str, dict[int, str | None]] = {
    "inner": {4: "[A, a]", 5: "[B, a]", 6: "[B, b]", 7: None, 10: "[C, c]", 11: None, 15: "[D, d]"},
    "left": {
        3: "[A, null]", 4: "[A, a]", 5: "[B, a]", 6: "[B, b]", 7: None, 9: "[C, null]", 10: "[C, c]",
        11: "[C, null]", 12: None, 15: "[D, d]",
    },
    "outer": {
        3: "[A, null]", 4: "[A, a]", 5: "[B, a]", 6: "[B, b]", 7: "[null, b]", 8: None, 9: "[C, null]",
        10: "[C, c]", 11: "[C, null]", 12: None, 14: "[null, d]", 15: "[D, d]",
    },
}  # fmt: skip


def _pipe_doc_rows(driver: TopologyTestDriver) -> dict[int, list[Any]]:
    """Pipe the guide's rows; return the outputs observed after each timestamp."""
    left, right = driver.create_input_topic("left", S, S), driver.create_input_topic("right", S, S)
    out = driver.create_output_topic("out", S, S)
    seen: dict[int, list[Any]] = {}
    for ts, left_value, right_value in _DOC_INPUTS:
        if left_value != "-":
            left.pipe_input("k", left_value, ts)
        if right_value != "-":
            right.pipe_input("k", right_value, ts)
        records = out.read_records_to_list()
        if records:
            seen[ts] = [r.value for r in records]
    return seen


@pytest.mark.parametrize("kind", ["inner", "left"])
def test_stream_table_join_matches_the_guide(kind: str) -> None:
    builder = StreamsBuilder()
    table = builder.table("right")
    stream = builder.stream("left")
    joined = stream.join(table, joiner) if kind == "inner" else stream.left_join(table, joiner)
    joined.to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        seen = _pipe_doc_rows(driver)
    assert seen == {ts: [value] for ts, value in STREAM_TABLE_EXPECTED[kind].items()}


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize("caching", [True, False])
def test_table_table_join_matches_the_guide(kind: str, caching: bool) -> None:
    builder = StreamsBuilder()
    materialized = Materialized() if caching else Materialized(caching_enabled=False)
    left = builder.table("left", materialized=materialized)
    right = builder.table("right", materialized=materialized)
    method = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[kind]
    method(right, joiner).to_stream().to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        seen = _pipe_doc_rows(driver)
    assert seen == {ts: [value] for ts, value in TABLE_TABLE_EXPECTED[kind].items()}


def test_stream_table_join_result_has_the_stream_timestamp_and_table_updates_do_not_emit() -> None:
    builder = StreamsBuilder()
    builder.stream("left").join(builder.table("right"), lambda key, v, t: f"{key}:{v}:{t}").to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("right", S, S).pipe_input("k", "t1", 100)
        driver.create_input_topic("left", S, S).pipe_input("k", "s1", 50)
        records = driver.create_output_topic("out", S, S).read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in records] == [("k", "k:s1:t1", 50)]


def test_left_join_keeps_null_key_stream_records_and_inner_join_drops_them() -> None:
    """KIP-962: a left join no longer drops stream records with a null key."""
    builder = StreamsBuilder()
    table = builder.table("right")
    stream = builder.stream("left")
    stream.join(table, joiner).to("inner-out")
    stream.left_join(table, joiner).to("left-out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("left", S, S).pipe_input(None, "v", 1)
        assert _read(driver, "inner-out") == []
        assert _read(driver, "left-out") == ["[v, null]"]


def test_table_table_join_timestamp_is_the_larger_and_materialized_result_is_queryable() -> None:
    builder = StreamsBuilder()
    left, right = builder.table("left"), builder.table("right")
    left.join(right, joiner, Named.as_("lr"), Materialized.as_("joined")).to_stream().to("out")
    topology = builder.build()
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("left", S, S).pipe_input("k", "A", 10)
        driver.create_input_topic("right", S, S).pipe_input("k", "a", 5)
        driver.create_input_topic("left", S, S).pipe_input("k", "B", 3)
        records = driver.create_output_topic("out", S, S).read_records_to_list()
        assert [(r.value, r.timestamp) for r in records] == [("[A, a]", 10), ("[B, a]", 5)]
        assert driver.get_key_value_store("joined").get_timestamped("k") == ("[B, a]", 5)
    description = str(topology.describe())
    assert "Processor: lr-join-this (stores: [right-STATE-STORE-0000000003])" in description
    assert "Processor: lr-join-other (stores: [left-STATE-STORE-0000000000])" in description
    assert "Processor: lr (stores: [joined])" in description


def test_table_table_join_names_follow_kafka_streams() -> None:
    builder = StreamsBuilder()
    builder.table("left").join(builder.table("right"), joiner).to_stream().to("out")
    description = str(builder.build().describe())
    # stores 0 and 3 burned by the tables; merge 6, join-this 7, join-other 8
    for line in (
        "Processor: KTABLE-JOINTHIS-0000000007 (stores: [right-STATE-STORE-0000000003])",
        "Processor: KTABLE-JOINOTHER-0000000008 (stores: [left-STATE-STORE-0000000000])",
        "Processor: KTABLE-MERGE-0000000006 (stores: [])",
        "Processor: KTABLE-SOURCE-0000000002 (stores: [left-STATE-STORE-0000000000])",
    ):
        assert line in description


def test_joins_declare_copartitioned_topics() -> None:
    builder = StreamsBuilder()
    table = builder.table("t")
    builder.stream("s").join(table, joiner).to("out")
    builder.table("t2").outer_join(table, joiner)
    groups = builder.build().copartition_groups
    assert frozenset({"s", "t"}) in groups
    assert frozenset({"t", "t2"}) in groups


def test_copartitioning_is_checked_when_partition_counts_are_known() -> None:
    builder = StreamsBuilder()
    builder.stream("s").join(builder.table("t"), joiner).to("out")
    plan = compile_topology(builder.build())
    with pytest.raises(CoPartitioningError, match="s=4, t=2") as caught:
        plan.resolve_partitions({"s": 4, "t": 2, "out": 1})
    assert caught.value.partition_counts == {"s": 4, "t": 2}
    assert plan.resolve_partitions({"s": 3, "t": 3, "out": 1})["t-STATE-STORE-0000000001-changelog"] == 3


def test_stream_table_join_repartitions_a_key_changed_stream_first() -> None:
    builder = StreamsBuilder()
    table = builder.table("right")
    builder.stream("left").select_key(lambda k, v: v).join(table, joiner, Joined(name="by-v")).to("out")
    topology = builder.build()
    description = str(topology.describe())
    assert "Sink: by-v-repartition-sink (topic: by-v-repartition)" in description
    assert "Processor: by-v (stores: [right-STATE-STORE-0000000000])" in description
    assert frozenset({"by-v-repartition", "right"}) in topology.copartition_groups
    with TopologyTestDriver(topology, CONFIG) as driver:
        driver.create_input_topic("right", S, S).pipe_input("x", "tx", 1)
        driver.create_input_topic("left", S, S).pipe_input("ignored", "x", 2)
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [("x", "[x, tx]")]


def test_stream_table_outer_join_does_not_exist() -> None:
    builder = StreamsBuilder()
    with pytest.raises(TopologyError, match="inner or left"):
        builder.stream("s").outer_join(builder.table("t"), joiner)


def _global_join(left: bool) -> Topology:
    builder = StreamsBuilder()
    products = builder.global_table("products")
    orders = builder.stream("orders")
    join = orders.left_join if left else orders.join
    join(products, lambda order_id, product_id: product_id, joiner).to("out")
    return builder.build()


@pytest.mark.parametrize("left", [False, True])
def test_stream_global_table_join_looks_up_by_selected_key(left: bool) -> None:
    with TopologyTestDriver(_global_join(left), CONFIG) as driver:
        products = driver.create_input_topic("products", S, S)
        orders = driver.create_input_topic("orders", S, S)
        products.pipe_input("p1", "apple", 1)
        orders.pipe_input("o1", "p1", 2)
        orders.pipe_input("o2", "p2", 3)  # no such product
        products.pipe_input("p1", None, 4)  # deleted from the global table
        orders.pipe_input("o3", "p1", 5)
        orders.pipe_input("o4", None, 6)  # null values never join
        records = driver.create_output_topic("out", S, S).read_records_to_list()
        assert driver.get_key_value_store("products-STATE-STORE-0000000000").get("p1") is None
    expected = [("o1", "[p1, apple]", 2)]
    if left:
        expected += [("o2", "[p2, null]", 3), ("o3", "[p1, null]", 5)]
    assert [(r.key, r.value, r.timestamp) for r in records] == expected


def test_global_table_describes_as_a_global_store_and_join_connects_no_store() -> None:
    description = str(_global_join(False).describe())
    assert "for global store (will not generate tasks)" in description
    assert "Source: KSTREAM-SOURCE-0000000001 (topics: [products])" in description
    assert "Processor: KTABLE-SOURCE-0000000002 (stores: [products-STATE-STORE-0000000000])" in description
    assert "Processor: KSTREAM-JOIN-0000000004 (stores: [])" in description
