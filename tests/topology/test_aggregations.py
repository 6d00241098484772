"""Grouped-stream and grouped-table aggregations through the TopologyTestDriver.

Expected names and outputs are Kafka Streams': the WordCount description is the text of
the Kafka Streams tutorial; results follow KStreamAggregate/KStreamReduce and
KTableAggregate/KTableReduce (adder/subtractor) semantics, with the driver committing
after every input record as Kafka's TopologyTestDriver does.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from platform_streams.dsl import Consumed, Grouped, Materialized, Produced, StreamsBuilder
from platform_streams.processor import Processor, Record
from platform_streams.serde import Integer, Json, Long, String
from platform_streams.state import Stores
from platform_streams.testing import TestRecord, TopologyTestDriver
from platform_streams.topology import Topology

S, L, INT = String(), Long(), Integer()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}

# The Kafka Streams tutorial ("Tutorial: Write a Kafka Streams Application"), WordCount.
KAFKA_WORDCOUNT_DESCRIPTION = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [streams-plaintext-input])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> counts-store-repartition-filter
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: counts-store-repartition-filter (stores: [])
      --> counts-store-repartition-sink
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: counts-store-repartition-sink (topic: counts-store-repartition)
      <-- counts-store-repartition-filter

  Sub-topology: 1
    Source: counts-store-repartition-source (topics: [counts-store-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts-store])
      --> KTABLE-TOSTREAM-0000000007
      <-- counts-store-repartition-source
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: streams-wordcount-output)
      <-- KTABLE-TOSTREAM-0000000007
"""


def _wordcount(materialized: Materialized | None = None) -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("streams-plaintext-input")
        .flat_map_values(lambda line: re.split(r"\W+", line.lower()))
        .group_by(lambda key, word: word)
        .count(materialized=materialized or Materialized.as_("counts-store"))
        .to_stream()
        .to("streams-wordcount-output", Produced(key_serde=S, value_serde=L))
    )
    return builder.build()


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def test_wordcount_describe_is_the_kafka_streams_tutorial_text() -> None:
    assert _lines(str(_wordcount().describe())) == _lines(KAFKA_WORDCOUNT_DESCRIPTION)


def test_wordcount_counts_through_the_repartition_topic() -> None:
    with TopologyTestDriver(_wordcount(), CONFIG) as driver:
        lines = driver.create_input_topic("streams-plaintext-input", S, S)
        out = driver.create_output_topic("streams-wordcount-output", S, L)
        lines.pipe_input(None, "Hello Kafka Streams", 1)
        lines.pipe_input(None, "hello kafka", 2)
        assert out.read_key_values_to_map() == {"hello": 2, "kafka": 2, "streams": 1}
        store = driver.get_key_value_store("counts-store")
        assert sorted(store.all()) == [("hello", 2), ("kafka", 2), ("streams", 1)]
        assert driver.produced_topic_names() >= {"topology-test-driver-counts-store-repartition"}


def _count_by_key(materialized: Materialized | None = None) -> Topology:
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count(materialized=materialized).to_stream().to(
        "out", Produced(value_serde=L)
    )
    return builder.build()


def test_group_by_key_count_names_its_store_like_kafka_and_needs_no_repartition() -> None:
    description = str(_count_by_key().describe())
    assert "Sub-topology: 1" not in description
    assert "Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])" in (
        description
    )
    assert "KTABLE-TOSTREAM-0000000003" in description


def test_count_result_timestamps_are_the_largest_input_timestamp() -> None:
    with TopologyTestDriver(_count_by_key(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, L)
        source.pipe_input("a", "x", 10)
        source.pipe_input("a", "y", 5)  # out of order: the aggregate keeps timestamp 10
        source.pipe_input("b", "z", 7)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            ("a", 1, 10),
            ("a", 2, 10),
            ("b", 1, 7),
        ]


def test_null_keys_and_null_values_are_dropped_by_aggregations() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in").group_by_key()
    grouped.count(materialized=Materialized.as_("counts"))
    grouped.reduce(lambda agg, v: agg + v, materialized=Materialized.as_("concat"))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input(None, "no key")
        source.pipe_input("a", None)
        source.pipe_input("a", "1")
        source.pipe_input("a", "2")
        assert list(driver.get_key_value_store("counts").all()) == [("a", 2)]
        assert driver.get_key_value_store("concat").get("a") == "12"


def test_count_after_a_key_change_repartitions_into_a_second_subtopology() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in")
        .map(lambda k, v: (v, k))
        .group_by_key()
        .count()
        .to_stream()
        .to("out", Produced(value_serde=L))
    )
    topology = builder.build()
    description = str(topology.describe())
    # store index 2 is drawn before the processor (3), then sink 4, filter 5, source 6 (Kafka's order)
    assert "Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])" in (
        description
    )
    assert "Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition)" in (
        description
    )
    assert "Processor: KSTREAM-FILTER-0000000005" in description
    assert "Source: KSTREAM-SOURCE-0000000006" in description
    assert "Sub-topology: 1" in description
    with TopologyTestDriver(topology, CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        for key, colour in [("1", "red"), ("2", "blue"), ("3", "red"), ("4", None)]:
            source.pipe_input(key, colour)
        # the record whose new key is None is dropped by the repartition filter
        assert driver.create_output_topic("out", S, L).read_key_values_to_list() == [
            ("red", 1),
            ("blue", 1),
            ("red", 2),
        ]


def test_grouped_name_names_the_repartition_topic_and_is_shared_by_aggregations() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in").select_key(lambda k, v: v).group_by_key(Grouped.as_("by-value"))
    grouped.count(materialized=Materialized.as_("c1"))
    grouped.count(materialized=Materialized.as_("c2"))
    topology = builder.build()
    description = str(topology.describe())
    assert description.count("Sink: by-value-repartition-sink (topic: by-value-repartition)") == 1
    assert list(topology.internal_topics).count("by-value-repartition") == 1
    with TopologyTestDriver(topology, CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input("k1", "x")
        source.pipe_input("k2", "x")
        assert driver.get_key_value_store("c1").get("x") == 2
        assert driver.get_key_value_store("c2").get("x") == 2


def test_reduce_and_aggregate_with_serdes() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed(key_serde=S, value_serde=INT)).group_by_key()
    grouped.reduce(max, materialized=Materialized.as_("max")).to_stream().to("max-out")
    grouped.aggregate(
        lambda: "",
        lambda key, value, agg: f"{agg},{value}" if agg else str(value),
        materialized=Materialized.as_("csv").with_value_serde(S),
    ).to_stream().to("csv-out", Produced(value_serde=S))
    with TopologyTestDriver(
        builder.build(), {"default_key_serde": "string", "default_value_serde": "integer"}
    ) as d:
        source = d.create_input_topic("in", S, INT)
        for value in (3, 7, 5):
            source.pipe_input("k", value)
        assert d.create_output_topic("max-out", S, INT).read_values_to_list() == [3, 7, 7]
        assert d.create_output_topic("csv-out", S, S).read_values_to_list() == ["3", "3,7", "3,7,5"]


@pytest.mark.parametrize("caching", [True, False])
def test_driver_commits_after_each_record_a_repartition_topic_feeds_back(caching: bool) -> None:
    """Kafka's TopologyTestDriver commits after every record it processes, including each one a
    repartition topic feeds back (``completeAllProcessableWork``): the three words of one line
    reach the count one by one, each followed by a commit, so caching changes nothing here."""
    materialized = Materialized.as_("counts-store")
    if not caching:
        materialized = materialized.with_caching_disabled()
    with TopologyTestDriver(_wordcount(materialized), CONFIG) as driver:
        lines = driver.create_input_topic("streams-plaintext-input", S, S)
        out = driver.create_output_topic("streams-wordcount-output", S, L)
        lines.pipe_input(None, "hello hello world", 5)
        records = out.read_key_values_to_list()
    assert records == [("hello", 1), ("hello", 2), ("world", 1)]


# ---------------------------------------------------------------------------- KGroupedTable


def _region_counts(*, caching: bool) -> Topology:
    builder = StreamsBuilder()
    materialized = Materialized.as_("users")
    counts = Materialized.as_("region-counts")
    if not caching:
        materialized, counts = materialized.with_caching_disabled(), counts.with_caching_disabled()
    (
        builder.table("users", materialized=materialized)
        .group_by(lambda user, region: (region, user))
        .count(materialized=counts)
        .to_stream()
        .to("region-counts-out", Produced(value_serde=L))
    )
    return builder.build()


def test_grouped_table_moves_a_row_between_groups_with_adder_and_subtractor() -> None:
    with TopologyTestDriver(_region_counts(caching=False), CONFIG) as driver:
        users = driver.create_input_topic("users", S, S)
        out = driver.create_output_topic("region-counts-out", S, L)
        users.pipe_input("alice", "eu", 1)
        users.pipe_input("bob", "eu", 2)
        assert out.read_key_values_to_list() == [("eu", 1), ("eu", 2)]
        users.pipe_input("alice", "us", 3)  # moves: subtract from eu first, then add to us
        assert out.read_key_values_to_list() == [("eu", 1), ("us", 1)]
        users.pipe_input("bob", "eu", 4)  # same group: one change carries old and new (KIP-904)
        assert out.read_key_values_to_list() == [("eu", 1)]
        users.pipe_input("bob", None, 5)  # a delete only subtracts
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [("eu", 0, 5)]
        store = driver.get_key_value_store("region-counts")
        assert sorted(store.all()) == [("eu", 0), ("us", 1)]


def test_grouped_table_repartition_naming_follows_kafka_streams() -> None:
    description = str(_region_counts(caching=True).describe())
    # named stores burn no index: source 0, table source 1, select 2, sink 3, source 4, aggregate 5
    assert "Processor: KTABLE-SOURCE-0000000001 (stores: [users])" in description
    assert "Processor: KTABLE-SELECT-0000000002 (stores: [])" in description
    assert "Sink: KSTREAM-SINK-0000000003 (topic: region-counts-repartition)" in description
    assert "Source: KSTREAM-SOURCE-0000000004 (topics: [region-counts-repartition])" in description
    assert "Processor: KTABLE-AGGREGATE-0000000005 (stores: [region-counts])" in description
    assert "filter" not in description.lower()


def test_grouped_table_reduce_and_aggregate_subtract_the_old_value() -> None:
    builder = StreamsBuilder()
    grouped = builder.table("scores", Consumed(key_serde=S, value_serde=INT)).group_by(
        lambda player, score: ("total", score), Grouped(key_serde=S, value_serde=INT)
    )
    grouped.reduce(
        lambda agg, v: agg + v,
        lambda agg, v: agg - v,
        materialized=Materialized.as_("sum").with_value_serde(INT),
    )
    grouped.aggregate(
        lambda: 0,
        lambda key, v, agg: agg + 1,
        lambda key, v, agg: agg - 1,
        materialized=Materialized.as_("players").with_value_serde(INT),
    )
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        scores = driver.create_input_topic("scores", S, INT)
        scores.pipe_input("p1", 10)
        scores.pipe_input("p2", 5)
        scores.pipe_input("p1", 20)
        assert driver.get_key_value_store("sum").get("total") == 25
        assert driver.get_key_value_store("players").get("total") == 2
        scores.pipe_input("p2", None)
        assert driver.get_key_value_store("sum").get("total") == 20
        assert driver.get_key_value_store("players").get("total") == 1


# ---------------------------------------------------------------------------- Processor API stores


class _CountingProcessor(Processor):
    """Counts per key in a PAPI store and forwards the key's running count."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("papi-counts")

    def process(self, record: Record) -> None:
        count = (self.store.get(record.key) or 0) + 1
        self.store.put(record.key, count)
        self.context.forward(record.with_value(count))


def test_processor_api_store_with_range_and_prefix_scans() -> None:
    topology = Topology()
    topology.add_source("src", "in", key_serde=S, value_serde=S)
    topology.add_processor("count", _CountingProcessor, "src")
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.persistent_key_value_store("papi-counts"), S, INT), "count"
    )
    topology.add_sink("sink", "out", "count", key_serde=S, value_serde=INT)
    with TopologyTestDriver(topology, CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        for key in ["user:a", "user:b", "user:a", "order:1", "user:c"]:
            source.pipe_input(key, "v")
        assert driver.create_output_topic("out", S, INT).read_values_to_list() == [1, 1, 2, 1, 1]
        store = driver.get_state_store("papi-counts")
        assert list(store.range("user:a", "user:b")) == [("user:a", 2), ("user:b", 1)]
        assert list(store.prefix_scan("user:")) == [("user:a", 2), ("user:b", 1), ("user:c", 1)]
        assert list(store.reverse_range(None, "order:9")) == [("order:1", 1)]
        assert store.approximate_num_entries() >= 4
    description = str(topology.describe())
    assert "Processor: count (stores: [papi-counts])" in description


def test_materialized_in_memory_store_and_test_record_timestamps() -> None:
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count(
        materialized=Materialized(store_name="mem", store_type="in_memory", caching_enabled=False)
    ).to_stream().to("out", Produced(value_serde=L))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, S).pipe_record(TestRecord("k", "v", 42))
        assert driver.create_output_topic("out", S, L).read_record() == TestRecord("k", 1, 42, [])
        store = driver.get_key_value_store("mem")
        assert store.persistent is False
        assert store.get_timestamped("k") == (1, 42)


def test_cogroup_folds_several_streams_into_one_aggregate() -> None:
    builder = StreamsBuilder()
    clicks = builder.stream("clicks").group_by_key()
    views = builder.stream("views").select_key(lambda k, v: v).group_by_key()
    (
        clicks.cogroup(lambda key, value, agg: {**agg, "clicks": agg["clicks"] + 1})
        .cogroup(views, lambda key, value, agg: {**agg, "views": agg["views"] + 1})
        .aggregate(
            lambda: {"clicks": 0, "views": 0},
            materialized=Materialized.as_("activity").with_value_serde(Json()),
        )
        .to_stream()
        .map_values(lambda agg: f"{agg['clicks']}/{agg['views']}")
        .to("out")
    )
    topology = builder.build()
    description = str(topology.describe())
    # sources 0-1, select_key 2, repartition sink/filter/source 3-5, one aggregate per input 6-7, merge 8
    assert "Processor: COGROUPKSTREAM-AGGREGATE-0000000006 (stores: [activity])" in description
    assert "Processor: COGROUPKSTREAM-AGGREGATE-0000000007 (stores: [activity])" in description
    assert "Processor: COGROUPKSTREAM-MERGE-0000000008 (stores: [])" in description
    assert "(topic: activity-repartition)" in description
    assert frozenset({"clicks", "activity-repartition"}) in topology.copartition_groups
    with TopologyTestDriver(topology, CONFIG) as driver:
        clicks_in = driver.create_input_topic("clicks", S, S)
        views_in = driver.create_input_topic("views", S, S)
        clicks_in.pipe_input("u1", "c", 1)
        views_in.pipe_input("ignored", "u1", 2)
        views_in.pipe_input("ignored", "u1", 3)
        clicks_in.pipe_input("u2", "c", 4)
        assert driver.create_output_topic("out", S, S).read_key_values_to_list() == [
            ("u1", "1/0"),
            ("u1", "1/1"),
            ("u1", "1/2"),
            ("u2", "1/0"),
        ]
        assert driver.get_key_value_store("activity").get("u1") == {"clicks": 1, "views": 2}
