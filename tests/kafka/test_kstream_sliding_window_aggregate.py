"""Kafka's ``KStreamSlidingWindowAggregateTest`` (streams/src/test/java/org/apache/kafka/streams/
kstream/internals/KStreamSlidingWindowAggregateTest.java), translated: ``testAggregateSmallInput``,
``testReduceSmallInput``, the large-input, early-record and no-grace cases, for both emit strategies (the Java
``inOrderIterator`` variants use a test-only store supplier; here the in-memory window store of
the same size and retention).

The large and early cases' inputs and expected results are Kafka's, taken from the Java test
into ``tests/kafka/expected/KStreamSlidingWindowAggregateTest.<method>.json``: ``inputs`` are
(key, value, timestamp) piped in order; a strategy's expected results are either the sorted
list of (key, window start, window end, value, timestamp) Java compares (sorted by key, then
window start) or, for the ``gatherOutput`` cases, window start -> the set of (value, timestamp).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest

from platform_streams.dsl import Consumed, EmitStrategy, Grouped, Materialized, SlidingWindows, StreamsBuilder
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    EXPECTED_DIR,
    JAVA_LOG_TEXT,
    MockApiProcessorSupplier,
    cases_without_python_equivalent,
)

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


#: Java method -> (window size, grace for ON_WINDOW_UPDATE, grace for ON_WINDOW_CLOSE, the
#: store: "canonized" is ``Materialized.as("topic-Canonized").withValueSerde(String)``, else the
#: in-memory supplier (name, retention) for ON_WINDOW_UPDATE and ``as("store-name")`` for CLOSE)
CASES: dict[str, tuple[int, int, int, str | tuple[str, int]]] = {
    "testReduceSmallInput": (10, 5, 5, ("Reverse1", 50_000)),
    "testAggregateLargeInput": (10, 50, 10, ("Reverse1", 50_000)),
    "testEarlyRecordsSmallInput": (50, 0, 0, "canonized"),
    "testEarlyRecordsRepeatedInput": (5, 0, 0, "canonized"),
    "testEarlyRecordsLargeInput": (10, 50, 1, ("Reverse1", 50_000)),
    "testEarlyNoGracePeriodSmallInput": (50, 0, 0, "canonized"),
    "testNoGracePeriodSmallInput": (50, 0, 0, "canonized"),
    "testEarlyNoGracePeriodLargeInput": (10, 0, 0, ("Reverse", 500)),
    "testNoGracePeriodLargeInput": (10, 0, 0, ("Reverse", 500)),
}

STRATEGIES = [
    pytest.param(False, True, id="ON_WINDOW_UPDATE"),
    pytest.param(True, True, id="ON_WINDOW_CLOSE-cached"),
    pytest.param(True, False, id="ON_WINDOW_CLOSE-uncached"),
]


def _materialized(store: str | tuple[str, int], emit_final: bool, caching: bool) -> Materialized:
    """The Java test's store, through ``setupMaterialized`` (caching matters for emit-final only)."""
    if store == "canonized":
        materialized = Materialized.as_("topic-Canonized").with_value_serde(S)
    elif emit_final:
        materialized = Materialized.as_("store-name")
    else:
        name, retention = store
        return Materialized(store_supplier=Stores.in_memory_window_store(name, retention, 10, False))
    return materialized if not emit_final or caching else materialized.with_caching_disabled()


@pytest.mark.parametrize(("emit_final", "caching"), STRATEGIES)
@pytest.mark.parametrize("java_test", list(CASES))
def test_sliding_window_aggregate(java_test: str, emit_final: bool, caching: bool) -> None:
    """KStreamSlidingWindowAggregateTest.<java_test>: ``MockAggregator.TOSTRING_ADDER`` from
    ``MockInitializer.STRING_INIT`` over sliding windows (``MockReducer.STRING_ADDER`` for
    testReduceSmallInput); out-of-order records land in earlier windows while the grace period
    lasts (with emit-final, only closed windows are emitted)."""
    size, update_grace, close_grace, store = CASES[java_test]
    case = json.loads((EXPECTED_DIR / f"KStreamSlidingWindowAggregateTest.{java_test}.json").read_text())
    builder = StreamsBuilder()
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    grace = close_grace if emit_final else update_grace
    windowed = (
        builder.stream("topic", Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
        .windowed_by(SlidingWindows.of_time_difference_and_grace(size, grace))
        .emit_strategy(strategy)
    )
    materialized = _materialized(store, emit_final, caching)
    if java_test == "testReduceSmallInput":
        table = windowed.reduce(lambda agg, v: f"{agg}+{v}", materialized)
    else:
        table = windowed.aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}", materialized)
    supplier = MockApiProcessorSupplier()
    table.to_stream().process(supplier)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("topic", S, S)
        for key, value, ts in case["inputs"]:
            topic.pipe_input(key, value, ts)
    expected = case["ON_WINDOW_CLOSE" if emit_final else "ON_WINDOW_UPDATE"]
    if isinstance(expected, dict):  # Java's gatherOutput: window start -> {(value, timestamp)}
        assert gather_output(supplier) == {int(k): {tuple(vt) for vt in v} for k, v in expected.items()}
    else:  # sorted by key, then window start (a stable sort, as Java's)
        (processor,) = supplier.captured_processors(1)
        actual = [(k.key, k.window.start(), k.window.end(), v, ts) for k, v, ts in processor.processed]
        actual.sort(key=lambda r: (r[0], r[1]))
        assert actual == [tuple(r) for r in expected]


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "KStreamSlidingWindowAggregateTest",
    {
        "shouldLogAndMeterWhenSkippingNullKey": JAVA_LOG_TEXT,
        "shouldLogAndMeterWhenSkippingExpiredWindowByGrace": JAVA_LOG_TEXT,
    },
)
