"""``kafka_streams_task_dropped_records_total`` counts what the DSL processors drop.

Kafka Streams' processors call ``droppedRecordsSensor.record()`` when they skip a record
for a null key or value ("Skipping record due to null key or value"); the task-level
``dropped-records`` metric sums those. Each case pipes records through the
TopologyTestDriver (the real tasks) and scrapes the real metrics collector over them.
Java sources: ``KStreamAggregate``, ``KStreamReduce``, ``KStreamWindowAggregate``,
``KStreamSessionWindowAggregate``, ``KStreamKTableJoinProcessor``, ``KStreamKStreamJoin``,
``KTableSource`` (apache/kafka ``streams/src/main/java/org/apache/kafka/streams/kstream/internals/``);
the tests mirror ``KStreamWindowAggregateTest.shouldLogAndMeterWhenSkippingNullKey``,
``KStreamKTableJoinTest.shouldLogAndMeterWhenSkippingNullLeftKey/Value``,
``KTableSourceTest.kTableShouldLogAndMeterOnSkippedRecords``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from platform_streams.dsl import Consumed, Materialized, StreamsBuilder
from platform_streams.dsl.windows import JoinWindows, SessionWindows, TimeWindows
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver
from tests.unit.metrics.test_metrics_task_hooks import _samples, _watched

S = String()
CONSUMED = Consumed(key_serde=S, value_serde=S)
CONFIG = {"application_id": "dropped", "bootstrap_servers": "unused:9092"}


def _scraped_dropped(driver: TopologyTestDriver) -> float:
    """The scraped ``kafka_streams_task_dropped_records_total`` over the driver's real tasks."""
    metrics, _ = _watched(driver, "INFO")
    return sum(_samples(metrics).get("kafka_streams_task_dropped_records_total", {}).values())


def _count(builder: StreamsBuilder) -> None:
    builder.stream("in", CONSUMED).group_by_key().count(
        materialized=Materialized.as_("counts")
    ).to_stream().to("out")


def _reduce(builder: StreamsBuilder) -> None:
    builder.stream("in", CONSUMED).group_by_key().reduce(
        lambda a, b: a + b, materialized=Materialized.as_("r")
    ).to_stream()


def _aggregate(builder: StreamsBuilder) -> None:
    builder.stream("in", CONSUMED).group_by_key().aggregate(
        lambda: "", lambda k, v, agg: agg + v, materialized=Materialized.as_("agg").with_value_serde(S)
    ).to_stream()


def _windowed(builder: StreamsBuilder) -> None:
    builder.stream("in", CONSUMED).group_by_key().windowed_by(
        TimeWindows.of_size_with_no_grace(10)
    ).count().to_stream()


def _session(builder: StreamsBuilder) -> None:
    builder.stream("in", CONSUMED).group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(10)
    ).count().to_stream()


def _stream_table_join(builder: StreamsBuilder) -> None:
    table = builder.table("table", CONSUMED)
    builder.stream("in", CONSUMED).join(table, lambda v, t: f"{v}+{t}").to("out")


def _stream_stream_join(builder: StreamsBuilder) -> None:
    other = builder.stream("other", CONSUMED)
    builder.stream("in", CONSUMED).join(
        other, lambda a, b: f"{a}+{b}", JoinWindows.of_time_difference_with_no_grace(100)
    ).to("out")


@pytest.mark.parametrize(
    ("build", "records", "dropped"),
    [
        # KStreamAggregate / count: null key and null value both skipped and metered
        (_count, [("a", "1"), (None, "2"), ("b", None), ("a", "3")], 2),
        # KStreamReduce
        (_reduce, [("a", "1"), (None, "2"), ("a", None)], 2),
        (_aggregate, [(None, "x"), ("a", None), ("a", "y")], 2),
        # KStreamWindowAggregate / KStreamSessionWindowAggregate: only the null key is skipped;
        # Kafka Streams 4.x aggregates null values there (found by tests/oracle, docs/oracle.md)
        (_windowed, [(None, "1"), ("a", None), ("a", "1")], 1),
        (_session, [(None, "1"), ("a", None), ("a", "1")], 1),
        # KStreamKTableJoinProcessor: a null stream key or value is skipped
        (_stream_table_join, [(None, "1"), ("a", None), ("a", "1")], 2),
        # KStreamKStreamJoin (inner): null key or value skipped
        (_stream_stream_join, [(None, "1"), ("a", None), ("a", "1")], 2),
    ],
    ids=["count", "reduce", "aggregate", "time-window", "session-window", "stream-table", "stream-stream"],
)
def test_null_key_or_value_drops_are_counted_in_the_task_metric(
    build: Callable[[StreamsBuilder], None], records: list[tuple[Any, Any]], dropped: int
) -> None:
    builder = StreamsBuilder()
    build(builder)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        for ts, (key, value) in enumerate(records):
            source.pipe_input(key, value, timestamp_ms=ts)
        assert _scraped_dropped(driver) == dropped


def test_a_table_source_meters_null_keys() -> None:
    # KTableSourceTest.kTableShouldLogAndMeterOnSkippedRecords
    builder = StreamsBuilder()
    builder.table("table", CONSUMED, Materialized.as_("t")).to_stream().to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        table = driver.create_input_topic("table", S, S)
        table.pipe_input(None, "v", timestamp_ms=1)
        table.pipe_input("a", "v", timestamp_ms=2)
        assert _scraped_dropped(driver) == 1


def test_invalid_timestamps_and_processor_drops_are_counted_once_each() -> None:
    builder = StreamsBuilder()
    _count(builder)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input("a", "1", timestamp_ms=-1)  # LogAndSkipOnInvalidTimestamp
        source.pipe_input(None, "1", timestamp_ms=5)  # null key in the aggregation
        source.pipe_input("a", "1", timestamp_ms=6)
        assert _scraped_dropped(driver) == 2
        (task,) = driver._tasks
        assert task.records_skipped == 2 and task.context.dropped_records == 2
