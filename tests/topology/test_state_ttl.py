"""State TTL (``Materialized.with_ttl``) on the key-value stores of aggregations and tables.

Not a Kafka Streams feature: the semantics are the project's own (README "State TTL",
docs/interactive-queries.md): an entry expires when its timestamp (the table row's
timestamp: the record's, for an aggregate the largest aggregated) plus the TTL is at most
the task's stream time; an expired entry reads as absent (processors, value getters,
interactive queries) and a stream-time sweep deletes it through the store -- a changelog
tombstone and, as for any delete of a table, a tombstone downstream. The oracle
comparison with a Java punctuator scenario is tests/oracle/test_state_ttl_oracle.py.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from platform_streams.dsl import Consumed, Grouped, Materialized, Produced, StreamsBuilder, TimeWindows
from platform_streams.errors import TopologyError
from platform_streams.query import KeyQuery, RangeQuery
from platform_streams.query.execution import execute_query
from platform_streams.serde import Bytes, Long, String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology import Topology

S, L, B = String(), Long(), Bytes()
SS = Consumed(key_serde=S, value_serde=S)
CHANGELOG = "topology-test-driver-counts-changelog"


def _count(materialized: Materialized) -> Topology:
    builder = StreamsBuilder()
    counts = builder.stream("in", SS).group_by_key().count(materialized=materialized)
    counts.to_stream().to("out", Produced(key_serde=S, value_serde=L))
    return builder.build()


def _rows(records: list[Any]) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in records]


@pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])
def test_an_expired_count_is_gone_and_a_refreshed_one_stays(caching: bool) -> None:
    mat = Materialized.as_("counts").with_ttl(timedelta(milliseconds=100))
    with TopologyTestDriver(_count(mat if caching else mat.with_caching_disabled())) as driver:
        topic = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, L)
        changelog = driver.create_output_topic(CHANGELOG, S, B)
        for key, ts in [("a", 0), ("b", 10), ("a", 80), ("c", 120)]:
            topic.pipe_input(key, "v", ts)
        # stream time 120: b (10) has expired, a (refreshed at 80) has not; the sweep (every
        # TTL of stream time, aligned to 0) ran at 120 and deleted b with a tombstone
        assert _rows(out.read_records_to_list()) == [
            ("a", 1, 0), ("b", 1, 10), ("a", 2, 80), ("c", 1, 120), ("b", None, 120)
        ]  # fmt: skip
        store = driver.get_key_value_store("counts")
        assert store.get("b") is None and store.get("a") == 2
        assert list(store.all()) == [("a", 2), ("c", 1)]
        assert execute_query(store, KeyQuery.with_key("b")).get_result() is None
        assert execute_query(store, RangeQuery.with_no_bounds()).get_result() == [("a", 2), ("c", 1)]
        last = {r.key: r.value for r in changelog.read_records_to_list()}
        assert last["b"] is None and last["a"] is not None  # a compacted restore agrees


@pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])
def test_an_expired_key_reads_as_absent_before_the_sweep(caching: bool) -> None:
    mat = Materialized.as_("counts").with_ttl(100, sweep_interval=timedelta(hours=1))
    with TopologyTestDriver(_count(mat if caching else mat.with_caching_disabled())) as driver:
        topic = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, L)
        for key, ts in [("a", 0), ("a", 5), ("b", 10), ("c", 105)]:
            topic.pipe_input(key, "v", ts)
        store = driver.get_key_value_store("counts")
        # a (5) expired at stream time 105: absent, though no sweep ran yet
        assert store.get("a") is None and store.get("b") == 1
        assert execute_query(store, RangeQuery.with_no_bounds()).get_result() == [("b", 1), ("c", 1)]
        topic.pipe_input("a", "v", 106)  # the aggregation starts again (no count of 3)
        topic.pipe_input("b", "v", 108)  # b (10) is alive until 110: refreshed, counts on
        assert _rows(out.read_records_to_list())[-2:] == [("a", 1, 106), ("b", 2, 108)]
        topic.pipe_input("d", "v", 200)
        assert list(store.all()) == [("a", 1), ("b", 2), ("c", 1), ("d", 1)]
        topic.pipe_input("d", "v", 210)
        assert list(store.all()) == [("d", 2)]  # c (105), a (106) and b (108) expired at 210


def test_a_source_table_forwards_a_tombstone_when_a_row_expires() -> None:
    builder = StreamsBuilder()
    table = builder.table("tbl", SS, Materialized.as_("rows").with_ttl(50))
    table.filter(lambda k, v: v != "x").to_stream().to("out", Produced(key_serde=S, value_serde=S))
    builder.stream("in", SS).join(table, lambda left, right: f"{left}+{right}").to(
        "joined", Produced(key_serde=S, value_serde=S)
    )
    with TopologyTestDriver(builder.build()) as driver:
        tbl = driver.create_input_topic("tbl", S, S)
        stream = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, S)
        joined = driver.create_output_topic("joined", S, S)
        tbl.pipe_input("k", "1", 0)
        tbl.pipe_input("m", "2", 30)
        stream.pipe_input("k", "s", 49)  # k (0) lives until 50
        stream.pipe_input("k", "s", 60)  # expired: the join's lookup finds nothing
        assert _rows(joined.read_records_to_list()) == [("k", "s+1", 49)]
        # the sweep at 60 (aligned to 0, every TTL) deleted k: downstream hears a tombstone
        assert _rows(out.read_records_to_list()) == [("k", "1", 0), ("m", "2", 30), ("k", None, 60)]
        assert list(driver.get_key_value_store("rows").all()) == [("m", "2")]


def test_a_downstream_table_aggregation_subtracts_an_expired_row() -> None:
    builder = StreamsBuilder()
    table = builder.table("tbl", SS, Materialized.as_("rows").with_ttl(50))
    per_value = table.group_by(lambda k, v: (v, v), Grouped(key_serde=S, value_serde=S)).count(
        materialized=Materialized.as_("per-value")
    )
    per_value.to_stream().to("out", Produced(key_serde=S, value_serde=L))
    with TopologyTestDriver(builder.build()) as driver:
        tbl = driver.create_input_topic("tbl", S, S)
        out = driver.create_output_topic("out", S, L)
        for key, value, ts in [("k1", "x", 0), ("k2", "x", 30), ("k3", "y", 60)]:
            tbl.pipe_input(key, value, ts)
        # the sweep at 60 deleted k1 (0 + 50 <= 60): its old value left the "x" group
        assert out.read_key_values_to_map() == {"x": 1, "y": 1}
        assert driver.get_key_value_store("per-value").get("x") == 1


def test_ttl_is_refused_where_it_cannot_apply() -> None:
    with pytest.raises(ValueError, match="ttl"):
        Materialized.as_("x").with_ttl(0)
    with pytest.raises(ValueError, match="sweep_interval"):
        Materialized.as_("x").with_ttl(10, sweep_interval=0)
    builder = StreamsBuilder()
    grouped = builder.stream("in", SS).group_by_key()
    with pytest.raises(TopologyError, match="with_ttl"):
        grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(
            materialized=Materialized.as_("w").with_ttl(100)
        )
    versioned = Materialized.as_(Stores.persistent_versioned_key_value_store("v", 1000)).with_ttl(100)
    with pytest.raises(TopologyError, match="with_ttl"):
        StreamsBuilder().table("tbl", SS, versioned)
    with pytest.raises(TopologyError, match="with_ttl"):
        StreamsBuilder().global_table("tbl", SS, Materialized.as_("g").with_ttl(100))
