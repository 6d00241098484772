"""Versioned KTables through the TopologyTestDriver (KIP-914): what a versioned source table
forwards, and who skips its out-of-order updates.

Semantics from Kafka Streams' ``KTableSource`` (a write older than the history retention is
neither stored nor forwarded; an out-of-order write is stored as an old version and forwarded
with ``isLatest=false``), ``KTableKTable*Join`` and ``KTableRepartitionMap`` (with versioned
semantics they skip ``isLatest=false`` changes), and ``KStreamKTableJoinProcessor`` (a versioned
table is looked up as of the stream record's timestamp, also without a grace period).
"""

from __future__ import annotations

import pytest

from platform_streams.dsl import Consumed, Materialized, Produced, StreamsBuilder
from platform_streams.errors import TopologyError
from platform_streams.serde import Long, String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver

S, L = String(), Long()
SS = Consumed(key_serde=S, value_serde=S)
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def _versioned(builder: StreamsBuilder, topic: str, name: str) -> object:
    return builder.table(topic, SS, Materialized.as_(Stores.persistent_versioned_key_value_store(name, 100)))


def test_to_stream_forwards_out_of_order_updates_but_not_expired_ones() -> None:
    builder = StreamsBuilder()
    _versioned(builder, "tbl", "v").to_stream().to("out", Produced(key_serde=S, value_serde=S))  # type: ignore[attr-defined]
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        table = driver.create_input_topic("tbl", S, S)
        table.pipe_input("k", "a", 1_000)
        table.pipe_input("k", "b", 950)  # out of order, within the history: stored and forwarded
        table.pipe_input("k", "c", 850)  # older than the history retention: dropped
        out = driver.create_output_topic("out", S, S).read_records_to_list()
        assert [(r.value, r.timestamp) for r in out] == [("a", 1_000), ("b", 950)]
        store = driver.get_versioned_key_value_store("v")
        assert store.get("k").value == "a" and store.get("k", 960).value == "b"


def test_table_join_and_group_by_skip_out_of_order_updates() -> None:
    builder = StreamsBuilder()
    left = _versioned(builder, "left", "vl")
    right = builder.table("right", SS)
    left.join(right, lambda a, b: f"{a}+{b}").to_stream().to("joined")  # type: ignore[attr-defined]
    left.group_by(lambda k, v: (v, v)).count().to_stream().to("counts", Produced(key_serde=S, value_serde=L))  # type: ignore[attr-defined]
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("right", S, S).pipe_input("k", "r", 0)
        source = driver.create_input_topic("left", S, S)
        source.pipe_input("k", "x", 100)
        source.pipe_input("k", "y", 90)  # out of order: neither joined nor re-grouped
        assert driver.create_output_topic("joined", S, S).read_values_to_list() == ["x+r"]
        assert driver.create_output_topic("counts", S, L).read_key_values_to_list() == [("x", 1)]


def test_stream_table_join_reads_the_version_of_the_stream_records_time() -> None:
    builder = StreamsBuilder()
    table = _versioned(builder, "tbl", "v")
    builder.stream("in", SS).left_join(table, lambda s, t: f"{s}+{t}").to("out")  # type: ignore[arg-type]
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        tbl, stream = driver.create_input_topic("tbl", S, S), driver.create_input_topic("in", S, S)
        tbl.pipe_input("k", "t10", 10)
        tbl.pipe_input("k", "t20", 20)
        for ts in (5, 15, 25):
            stream.pipe_input("k", f"s{ts}", ts)
        assert driver.create_output_topic("out", S, S).read_values_to_list() == [
            "s5+None",
            "s15+t10",
            "s25+t20",
        ]


def test_should_throw_on_versioned_store_supplier_for_global_table() -> None:
    """InternalStreamsBuilderTest.shouldThrowOnVersionedStoreSupplierForGlobalTable (apache/kafka
    streams/src/test/java/org/apache/kafka/streams/kstream/internals/InternalStreamsBuilderTest.java)
    and StreamsBuilderTest.shouldThrowOnVersionedStoreSupplierForGlobalTable (same call through
    the public builder)"""
    builder = StreamsBuilder()
    with pytest.raises(TopologyError, match="versioned"):
        builder.global_table(
            "table", SS, Materialized.as_(Stores.persistent_versioned_key_value_store("store", 0))
        )
