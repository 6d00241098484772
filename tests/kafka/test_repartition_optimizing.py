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
from tests.kafka.support import expected_description

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
    (
        mapped.filter(lambda k, v: k == "A", Named.as_("join-filter"))
        .join(
            count_stream,
            lambda v1, v2: f"{v1}:{v2}",
            # Java's deprecated JoinWindows.of(5000): grace 24 h minus the window size, so the
            # stores' retention of one day is the window size plus grace, as the join requires
            JoinWindows.of_time_difference_and_grace(5000, DAY_MS - 10_000),
            StreamJoined.with_(
                Stores.in_memory_window_store("join-store", DAY_MS, 10_000, True),
                Stores.in_memory_window_store("other-join-store", DAY_MS, 10_000, True),
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
        assert text == expected_description("RepartitionOptimizingTest", f"EXPECTED_{expected}_TOPOLOGY")
        assert len(re.findall(r"Sink: .*-repartition", text)) == repartition_topics
        pairs = [(k, v) for k in ("a", "b", "c") for v in ("foo", "bar", "baz")]
        driver.create_input_topic("input", S, S).pipe_key_value_list(pairs)
        assert collected == ["FOO", "BAR", "BAZ"]
        assert _as_map(driver, "outputTopic_0", L) == {"A": 3, "B": 3, "C": 3}
        assert _as_map(driver, "outputTopic_1", INT) == {"A": 9, "B": 9, "C": 9}
        assert _as_map(driver, "outputTopic_2", S) == {k: "foo:bar:baz" for k in "ABC"}
        assert _as_map(driver, "joinedOutputTopic", S) == {"A": "baz:3"}
