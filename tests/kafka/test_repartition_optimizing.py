"""Kafka's ``RepartitionOptimizingTest`` (streams/src/test/java/org/apache/kafka/streams/
processor/internals/RepartitionOptimizingTest.java), translated: one re-keyed stream feeding a
processor, a count, an aggregate, a reduce (behind a filter and a peek) and a windowed join.

Without optimization it writes four repartition topics; with ``topology_optimization="all"``
(Kafka's ``StreamsConfig.OPTIMIZE``) one, named after the first (``count-groupByKey``). Both
``describe()`` texts are Kafka's own expectations, character for character (named operators
still draw their index: the last sink is ``KSTREAM-SINK-0000000023`` in both). The results
are the same either way.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import (
    Consumed,
    Grouped,
    JoinWindows,
    Materialized,
    Named,
    Produced,
    StreamJoined,
    StreamsBuilder,
)
from platform_streams.processor import Processor, Record
from platform_streams.serde import Integer, Long, String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver

S, L, INT = String(), Long(), Integer()
DAY_MS = 24 * 3600 * 1000


class SimpleProcessor(Processor):
    def __init__(self, values: list[str]) -> None:
        self.values = values

    def process(self, record: Record) -> None:
        self.values.append(record.value)


def build(collected: list[str]) -> StreamsBuilder:
    builder = StreamsBuilder()
    source = builder.stream("input", Consumed(key_serde=S, value_serde=S, name="sourceStream"))
    mapped = source.map(lambda k, v: (k.upper(), v), Named.as_("source-map"))
    (
        mapped.filter(lambda k, v: k == "B", Named.as_("process-filter"))
        .map_values(lambda v: v.upper(), Named.as_("process-mapValues"))
        .process(lambda: SimpleProcessor(collected), named=Named.as_("process"))
    )
    count_stream = (
        mapped.group_by_key(Grouped.as_("count-groupByKey"))
        .count(
            Named.as_("count"),
            Materialized(
                store_supplier=Stores.in_memory_key_value_store("count-store"), key_serde=S, value_serde=L
            ),
        )
        .to_stream(Named.as_("count-toStream"))
    )
    count_stream.to("outputTopic_0", Produced(key_serde=S, value_serde=L, name="count-to"))
    (
        mapped.group_by_key(Grouped.as_("aggregate-groupByKey"))
        .aggregate(
            lambda: 0,
            lambda k, v, agg: agg + len(v),
            Named.as_("aggregate"),
            Materialized(
                store_supplier=Stores.in_memory_key_value_store("aggregate-store"),
                key_serde=S,
                value_serde=INT,
            ),
        )
        .to_stream(Named.as_("aggregate-toStream"))
        .to("outputTopic_1", Produced(key_serde=S, value_serde=INT, name="reduce-to"))
    )
    (
        mapped.filter(lambda k, v: True, Named.as_("reduce-filter"))
        .peek(lambda k, v: None, Named.as_("reduce-peek"))
        .group_by_key(Grouped.as_("reduce-groupByKey"))
        .reduce(
            lambda v1, v2: f"{v1}:{v2}",
            Named.as_("reducer"),
            Materialized(store_supplier=Stores.in_memory_key_value_store("reduce-store")),
        )
        .to_stream(Named.as_("reduce-toStream"))
        .to("outputTopic_2", Produced(key_serde=S, value_serde=S))
    )
    windows_ms = DAY_MS + 10_000
    (
        mapped.filter(lambda k, v: k == "A", Named.as_("join-filter"))
        .join(
            count_stream,
            lambda v1, v2: f"{v1}:{v2}",
            JoinWindows.of_time_difference_and_grace(5000, DAY_MS - 10_000),
            StreamJoined.with_(
                Stores.in_memory_window_store("join-store", windows_ms, 10_000, True),
                Stores.in_memory_window_store("other-join-store", windows_ms, 10_000, True),
            )
            .with_name("join")
            .with_key_serde(S)
            .with_value_serde(S)
            .with_other_value_serde(L),
        )
        .to("joinedOutputTopic", Produced(name="join-to"))
    )
    return builder


def _as_map(driver: TopologyTestDriver, topic: str, value_serde: Any) -> dict[Any, Any]:
    return dict(driver.create_output_topic(topic, S, value_serde).read_key_values_to_list())


@pytest.mark.parametrize(
    ("optimization", "expected", "repartition_topics"),
    [("all", "OPTIMIZED", 1), ("none", "UNOPTIMIZED", 4)],
    ids=["shouldSendCorrectRecords_OPTIMIZED", "shouldSendCorrectResults_NO_OPTIMIZATION"],
)
def test_repartition_optimizing(optimization: str, expected: str, repartition_topics: int) -> None:
    collected: list[str] = []
    config = {
        "default_key_serde": "string",
        "default_value_serde": "string",
        "statestore_cache_max_bytes": 10 * 1024,
        "commit_interval_ms": 5000,
        "topology_optimization": optimization,
    }
    topology = build(collected).build(
        StreamsConfig(application_id="app", bootstrap_servers="x:9092", **config)
    )
    with TopologyTestDriver(topology, config) as driver:
        text = str(topology.describe())
        assert text == EXPECTED[expected]
        assert len(re.findall(r"Sink: .*-repartition", text)) == repartition_topics
        pairs = [(k, v) for k in ("a", "b", "c") for v in ("foo", "bar", "baz")]
        driver.create_input_topic("input", S, S).pipe_key_value_list(pairs)
        assert collected == ["FOO", "BAR", "BAZ"]
        assert _as_map(driver, "outputTopic_0", L) == {"A": 3, "B": 3, "C": 3}
        assert _as_map(driver, "outputTopic_1", INT) == {"A": 9, "B": 9, "C": 9}
        assert _as_map(driver, "outputTopic_2", S) == {k: "foo:bar:baz" for k in "ABC"}
        assert _as_map(driver, "joinedOutputTopic", S) == {"A": "baz:3"}


EXPECTED = {
    "OPTIMIZED": """Topologies:
   Sub-topology: 0
    Source: sourceStream (topics: [input])
      --> source-map
    Processor: source-map (stores: [])
      --> process-filter, count-groupByKey-repartition-filter
      <-- sourceStream
    Processor: process-filter (stores: [])
      --> process-mapValues
      <-- source-map
    Processor: count-groupByKey-repartition-filter (stores: [])
      --> count-groupByKey-repartition-sink
      <-- source-map
    Processor: process-mapValues (stores: [])
      --> process
      <-- process-filter
    Sink: count-groupByKey-repartition-sink (topic: count-groupByKey-repartition)
      <-- count-groupByKey-repartition-filter
    Processor: process (stores: [])
      --> none
      <-- process-mapValues

  Sub-topology: 1
    Source: count-groupByKey-repartition-source (topics: [count-groupByKey-repartition])
      --> aggregate, count, join-filter, reduce-filter
    Processor: count (stores: [count-store])
      --> count-toStream
      <-- count-groupByKey-repartition-source
    Processor: count-toStream (stores: [])
      --> join-other-windowed, count-to
      <-- count
    Processor: join-filter (stores: [])
      --> join-this-windowed
      <-- count-groupByKey-repartition-source
    Processor: reduce-filter (stores: [])
      --> reduce-peek
      <-- count-groupByKey-repartition-source
    Processor: join-other-windowed (stores: [other-join-store])
      --> join-other-join
      <-- count-toStream
    Processor: join-this-windowed (stores: [join-store])
      --> join-this-join
      <-- join-filter
    Processor: reduce-peek (stores: [])
      --> reducer
      <-- reduce-filter
    Processor: aggregate (stores: [aggregate-store])
      --> aggregate-toStream
      <-- count-groupByKey-repartition-source
    Processor: join-other-join (stores: [join-store])
      --> join-merge
      <-- join-other-windowed
    Processor: join-this-join (stores: [other-join-store])
      --> join-merge
      <-- join-this-windowed
    Processor: reducer (stores: [reduce-store])
      --> reduce-toStream
      <-- reduce-peek
    Processor: aggregate-toStream (stores: [])
      --> reduce-to
      <-- aggregate
    Processor: join-merge (stores: [])
      --> join-to
      <-- join-this-join, join-other-join
    Processor: reduce-toStream (stores: [])
      --> KSTREAM-SINK-0000000023
      <-- reducer
    Sink: KSTREAM-SINK-0000000023 (topic: outputTopic_2)
      <-- reduce-toStream
    Sink: count-to (topic: outputTopic_0)
      <-- count-toStream
    Sink: join-to (topic: joinedOutputTopic)
      <-- join-merge
    Sink: reduce-to (topic: outputTopic_1)
      <-- aggregate-toStream

""",
    "UNOPTIMIZED": """Topologies:
   Sub-topology: 0
    Source: sourceStream (topics: [input])
      --> source-map
    Processor: source-map (stores: [])
      --> {SOURCE_MAP_CHILDREN}
      <-- sourceStream
    Processor: reduce-filter (stores: [])
      --> reduce-peek
      <-- source-map
    Processor: join-filter (stores: [])
      --> join-left-repartition-filter
      <-- source-map
    Processor: process-filter (stores: [])
      --> process-mapValues
      <-- source-map
    Processor: reduce-peek (stores: [])
      --> reduce-groupByKey-repartition-filter
      <-- reduce-filter
    Processor: aggregate-groupByKey-repartition-filter (stores: [])
      --> aggregate-groupByKey-repartition-sink
      <-- source-map
    Processor: count-groupByKey-repartition-filter (stores: [])
      --> count-groupByKey-repartition-sink
      <-- source-map
    Processor: join-left-repartition-filter (stores: [])
      --> join-left-repartition-sink
      <-- join-filter
    Processor: process-mapValues (stores: [])
      --> process
      <-- process-filter
    Processor: reduce-groupByKey-repartition-filter (stores: [])
      --> reduce-groupByKey-repartition-sink
      <-- reduce-peek
    Sink: aggregate-groupByKey-repartition-sink (topic: aggregate-groupByKey-repartition)
      <-- aggregate-groupByKey-repartition-filter
    Sink: count-groupByKey-repartition-sink (topic: count-groupByKey-repartition)
      <-- count-groupByKey-repartition-filter
    Sink: join-left-repartition-sink (topic: join-left-repartition)
      <-- join-left-repartition-filter
    Processor: process (stores: [])
      --> none
      <-- process-mapValues
    Sink: reduce-groupByKey-repartition-sink (topic: reduce-groupByKey-repartition)
      <-- reduce-groupByKey-repartition-filter

  Sub-topology: 1
    Source: count-groupByKey-repartition-source (topics: [count-groupByKey-repartition])
      --> count
    Processor: count (stores: [count-store])
      --> count-toStream
      <-- count-groupByKey-repartition-source
    Processor: count-toStream (stores: [])
      --> join-other-windowed, count-to
      <-- count
    Source: join-left-repartition-source (topics: [join-left-repartition])
      --> join-this-windowed
    Processor: join-other-windowed (stores: [other-join-store])
      --> join-other-join
      <-- count-toStream
    Processor: join-this-windowed (stores: [join-store])
      --> join-this-join
      <-- join-left-repartition-source
    Processor: join-other-join (stores: [join-store])
      --> join-merge
      <-- join-other-windowed
    Processor: join-this-join (stores: [other-join-store])
      --> join-merge
      <-- join-this-windowed
    Processor: join-merge (stores: [])
      --> join-to
      <-- join-this-join, join-other-join
    Sink: count-to (topic: outputTopic_0)
      <-- count-toStream
    Sink: join-to (topic: joinedOutputTopic)
      <-- join-merge

  Sub-topology: 2
    Source: aggregate-groupByKey-repartition-source (topics: [aggregate-groupByKey-repartition])
      --> aggregate
    Processor: aggregate (stores: [aggregate-store])
      --> aggregate-toStream
      <-- aggregate-groupByKey-repartition-source
    Processor: aggregate-toStream (stores: [])
      --> reduce-to
      <-- aggregate
    Sink: reduce-to (topic: outputTopic_1)
      <-- aggregate-toStream

  Sub-topology: 3
    Source: reduce-groupByKey-repartition-source (topics: [reduce-groupByKey-repartition])
      --> reducer
    Processor: reducer (stores: [reduce-store])
      --> reduce-toStream
      <-- reduce-groupByKey-repartition-source
    Processor: reduce-toStream (stores: [])
      --> KSTREAM-SINK-0000000023
      <-- reducer
    Sink: KSTREAM-SINK-0000000023 (topic: outputTopic_2)
      <-- reduce-toStream

""",
}
# (one line of Kafka's text is longer than this file's line limit)
EXPECTED["UNOPTIMIZED"] = EXPECTED["UNOPTIMIZED"].replace(
    "{SOURCE_MAP_CHILDREN}",
    "reduce-filter, process-filter, aggregate-groupByKey-repartition-filter, "
    "count-groupByKey-repartition-filter, join-filter",
)
