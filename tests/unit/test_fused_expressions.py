"""Library functions marked with an expression (``processor/node.py``: ``with_expression``)
are written in line by fused code instead of called: a count's ``count_adder`` is
``aggregate + 1`` in the fused aggregation (stream and windowed), and the counts are those
of Kafka Streams' ``KStreamAggregate`` for ``count()`` (KStreamAggregateProcessorTest,
``KGroupedStreamImplTest.shouldCountWindowed`` in streams/src/test/java/org/apache/kafka/
streams/kstream/internals/)."""

from __future__ import annotations

import linecache
import re
from datetime import timedelta

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Materialized, Produced, TimeWindows
from platform_streams.dsl.internals.aggregate_processors import count_adder, count_initializer
from platform_streams.processor.node import call_text, with_expression
from platform_streams.serde import Bytes, Long
from platform_streams.testing import TopologyTestDriver

B = Bytes()


def test_call_text_writes_the_expression_or_the_call() -> None:
    def plain(key: object, value: object, aggregate: int) -> int:
        return aggregate

    def doubled(key: object, value: object, aggregate: int) -> int:
        return aggregate * 2

    with_expression(doubled, "{aggregate} * 2")
    assert call_text(plain, "f", key="k", value="v", aggregate="a1") == "f(k, v, a1)"
    assert call_text(doubled, "f", key="k", value="v", aggregate="a1") == "(a1 * 2)"
    assert call_text(count_adder, "f", key="k", value="v", aggregate="a1") == "(a1 + 1)"
    assert call_text(count_initializer, "f") == "(0)"


def _fused_text(driver: TopologyTestDriver) -> str:
    batch = driver._tasks[0].graph.batches["in"]
    return "".join(linecache.getlines(batch.__code__.co_filename))


def test_a_count_adds_in_line_and_counts() -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=B, value_serde=B)).group_by_key().count(
        materialized=Materialized.as_("counts")
    ).to_stream().to("out", Produced(key_serde=B, value_serde=Long()))
    with TopologyTestDriver(builder.build(), {"application_id": "fx", "bootstrap_servers": "x:1"}) as driver:
        text = _fused_text(driver)
        # a cached key's count, and a new key's first count (initializer 0, then the adder)
        assert "+ 1)" in text and "((0) + 1)" in text
        assert not re.search(r"_(aggregator|first)\w*\(", text)
        source = driver.create_input_topic("in", B, B)
        for key in [b"a", b"b", b"a", b"a"]:
            source.pipe_input(key, b"v")
        source.pipe_input(b"a", None)  # a null value is not counted
        out = driver.create_output_topic("out", B, Long()).read_key_values_to_list()
        assert out == [(b"a", 1), (b"b", 1), (b"a", 2), (b"a", 3)]
        assert driver.get_key_value_store("counts").get(b"a") == 3


def test_a_windowed_count_adds_in_line_and_counts() -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=B, value_serde=B)).group_by_key().windowed_by(
        TimeWindows.of_size_with_no_grace(timedelta(milliseconds=100))
    ).count(materialized=Materialized.as_("windowed")).to_stream().map(lambda k, v: (k.key, v)).to(
        "out", Produced(key_serde=B, value_serde=Long())
    )
    with TopologyTestDriver(builder.build(), {"application_id": "fx", "bootstrap_servers": "x:1"}) as driver:
        text = _fused_text(driver)
        assert "+ 1)" in text and not re.search(r"_aggregator\w*\(", text)
        source = driver.create_input_topic("in", B, B)
        for key, ts in [(b"a", 0), (b"a", 50), (b"b", 60), (b"a", 120)]:
            source.pipe_input(key, b"v", timestamp_ms=ts)
        out = driver.create_output_topic("out", B, Long()).read_key_values_to_list()
        assert out == [(b"a", 1), (b"a", 2), (b"b", 1), (b"a", 1)]
