"""Kafka's ``KStreamSlidingWindowAggregateTest`` (streams/src/test/java/org/apache/kafka/streams/
kstream/internals/KStreamSlidingWindowAggregateTest.java), translated: ``testAggregateSmallInput``
for both emit strategies (the Java ``inOrderIterator`` variants use a test-only store supplier;
here the in-memory window store of the same size and retention).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from platform_streams.dsl import Consumed, EmitStrategy, Grouped, Materialized, SlidingWindows, StreamsBuilder
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import JAVA_LOG_TEXT, MockApiProcessorSupplier, cases_without_python_equivalent

S = String()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def gather_output(supplier: MockApiProcessorSupplier) -> dict[int, set[tuple[Any, int]]]:
    """``gatherOutput``: window start -> {(value, timestamp)} of every result."""
    (processor,) = supplier.captured_processors(1)
    actual: dict[int, set[tuple[Any, int]]] = defaultdict(set)
    for key, value, ts in processor.processed:
        actual[key.window.start()].add((value, ts))
    return dict(actual)


@pytest.mark.parametrize("emit_final", [False, True], ids=["ON_WINDOW_UPDATE", "ON_WINDOW_CLOSE"])
@pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])
def test_aggregate_small_input(emit_final: bool, caching: bool) -> None:
    """KStreamSlidingWindowAggregateTest.testAggregateSmallInput"""
    if emit_final:
        materialized = Materialized.as_("store-name")
        materialized = materialized if caching else materialized.with_caching_disabled()
    else:
        materialized = Materialized(
            store_supplier=Stores.in_memory_window_store("Reverse1", 50_000, 10, False)
        )
    builder = StreamsBuilder()
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    table = (
        builder.stream("topic", Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 5))
        .emit_strategy(strategy)
        .aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}", materialized)
    )
    supplier = MockApiProcessorSupplier()
    table.to_stream().process(supplier)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("topic", S, S)
        for value, ts in (("1", 10), ("2", 10), ("3", 14), ("4", 15), ("5", 20), ("6", 22), ("7", 30)):
            topic.pipe_input("A", value, ts)
    if emit_final:
        expected = {
            0: {("0+1+2", 10)}, 4: {("0+1+2+3", 14)}, 5: {("0+1+2+3+4", 15)},
            10: {("0+1+2+3+4+5", 20)}, 11: {("0+3+4+5", 20)}, 12: {("0+3+4+5+6", 22)},
        }  # fmt: skip
    else:
        expected = {
            0: {("0+1", 10), ("0+1+2", 10)}, 4: {("0+1+2+3", 14)}, 5: {("0+1+2+3+4", 15)},
            10: {("0+1+2+3+4+5", 20)}, 11: {("0+3", 14), ("0+3+4", 15), ("0+3+4+5", 20)},
            12: {("0+3+4+5+6", 22)}, 15: {("0+4", 15), ("0+4+5", 20), ("0+4+5+6", 22)},
            16: {("0+5", 20), ("0+5+6", 22)}, 20: {("0+5+6+7", 30)}, 21: {("0+6", 22), ("0+6+7", 30)},
            23: {("0+7", 30)},
        }  # fmt: skip
    assert gather_output(supplier) == expected


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "KStreamSlidingWindowAggregateTest",
    {
        "shouldLogAndMeterWhenSkippingNullKey": JAVA_LOG_TEXT,
        "shouldLogAndMeterWhenSkippingExpiredWindowByGrace": JAVA_LOG_TEXT,
    },
)
