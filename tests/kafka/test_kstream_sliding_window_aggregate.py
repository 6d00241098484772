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
import random
from collections import defaultdict
from typing import Any

import pytest

from platform_streams.dsl import (
    Consumed,
    EmitStrategy,
    Grouped,
    Materialized,
    SlidingWindows,
    StreamsBuilder,
    TimeWindowedSerde,
)
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    EXPECTED_DIR,
    MockApiProcessorSupplier,
    check_windowed_null_key_skip,
    task_drops_and_lateness,
)
from tests.unit.metrics.test_metrics_task_hooks import _watched

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


def _sorted_chars(key: Any, value: Any, aggregate: Any) -> str:
    """testAggregateRandomInput's aggregator: the letters sorted, so a final window's value does
    not depend on the order its records came in."""
    return "".join(sorted(aggregate + value))


#: testAggregateRandomInput: (value, timestamp) of key A, piped in a shuffled order, then V at 181
RANDOM_INPUT = [("A", 10), ("B", 15), ("C", 16), ("D", 18), ("E", 30), ("F", 40), ("G", 55), ("H", 56)]
RANDOM_INPUT += [("I", 58), ("J", 58), ("K", 62), ("L", 63), ("M", 63), ("N", 63), ("O", 76), ("P", 77)]
RANDOM_INPUT += [("Q", 80), ("R", 2), ("S", 3), ("T", 5), ("U", 8)]
#: verifyRandomTestResults: window start -> last (value, timestamp); emit-final has only the
#: windows still open (grace 100) when their records came, the update strategy every window
RANDOM_FINAL = {52: ("GHIJK", 62), 53: ("GHIJKLMN", 63), 56: ("HIJKLMN", 63), 57: ("IJKLMN", 63)}
RANDOM_FINAL |= {59: ("KLMN", 63), 63: ("LMN", 63), 66: ("O", 76), 67: ("OP", 77), 70: ("OPQ", 80)}
RANDOM_UPDATE = {0: ("ARSTU", 10), 3: ("ASTU", 10), 4: ("ATU", 10), 5: ("ABTU", 15), 6: ("ABCU", 16)}
RANDOM_UPDATE |= {8: ("ABCDU", 18), 9: ("ABCD", 18), 11: ("BCD", 18), 16: ("CD", 18), 17: ("D", 18)}
RANDOM_UPDATE |= {20: ("E", 30), 30: ("EF", 40), 31: ("F", 40), 45: ("G", 55), 46: ("GH", 56)}
RANDOM_UPDATE |= {48: ("GHIJ", 58), **RANDOM_FINAL, 77: ("PQ", 80), 78: ("Q", 80), 171: ("V", 181)}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("emit_final", "caching"), STRATEGIES)
def test_aggregate_random_input(emit_final: bool, caching: bool, seed: int) -> None:
    """KStreamSlidingWindowAggregateTest.testAggregateRandomInput (Java draws a new seed per run;
    here three fixed seeds, so a failure reproduces)."""
    builder = StreamsBuilder()
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    table = (
        builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 100))
        .emit_strategy(strategy)
        .aggregate(lambda: "", _sorted_chars, _materialized(("Reverse", 50_000), emit_final, caching))
    )
    supplier = MockApiProcessorSupplier()
    table.to_stream().process(supplier)
    records = list(RANDOM_INPUT)
    random.Random(seed).shuffle(records)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("topic1", S, S)
        for value, ts in records:
            topic.pipe_input("A", value, ts)
        topic.pipe_input("A", "V", 181)
    (processor,) = supplier.captured_processors(1)
    results = {key.window.start(): (value, ts) for key, value, ts in processor.processed}
    assert results == (RANDOM_FINAL if emit_final else RANDOM_UPDATE), f"seed {seed}"


#: testJoin: steps of (input topic, records (key, value, ts), then per strategy what the three
#: processors (table1, table2, the join) saw: (key, window start, value, ts), windows 10 ms wide)
Seen = list[list[tuple[str, int, str, int]]]
JOIN_STEPS: list[tuple[int, list[tuple[str, str, int]], dict[bool, Seen]]] = [
    (
        1,
        [("A", "1", 10), ("B", "2", 11), ("C", "3", 12)],
        {
            True: [[("A", 0, "0+1", 10), ("B", 1, "0+2", 11)], [], []],
            False: [[("A", 0, "0+1", 10), ("B", 1, "0+2", 11), ("C", 2, "0+3", 12)], [], []],
        },
    ),
    (
        1,
        [("A", "1", 15), ("B", "2", 16), ("C", "3", 19)],
        {
            True: [[("C", 2, "0+3", 12), ("A", 5, "0+1+1", 15), ("B", 6, "0+2+2", 16)], [], []],
            False: [
                [
                    ("A", 11, "0+1", 15),
                    ("A", 5, "0+1+1", 15),
                    ("B", 12, "0+2", 16),
                    ("B", 6, "0+2+2", 16),
                    ("C", 13, "0+3", 19),
                    ("C", 9, "0+3+3", 19),
                ],
                [],
                [],
            ],
        },
    ),
    (
        2,
        [("A", "a", 10), ("C", "c", 12)],
        {
            True: [[], [("A", 0, "0+a", 10)], [("A", 0, "0+1%0+a", 10)]],
            False: [
                [],
                [("A", 0, "0+a", 10), ("C", 2, "0+c", 12)],
                [("A", 0, "0+1%0+a", 10), ("C", 2, "0+3%0+c", 12)],
            ],
        },
    ),
    (
        2,
        [("A", "a", 15), ("B", "b", 16), ("C", "c", 17)],
        {
            True: [
                [],
                [("C", 2, "0+c", 12), ("A", 5, "0+a+a", 15), ("B", 6, "0+b", 16)],
                [("C", 2, "0+3%0+c", 12), ("A", 5, "0+1+1%0+a+a", 15), ("B", 6, "0+2+2%0+b", 16)],
            ],
            False: [
                [],
                [
                    ("A", 11, "0+a", 15),
                    ("A", 5, "0+a+a", 15),
                    ("B", 6, "0+b", 16),
                    ("C", 13, "0+c", 17),
                    ("C", 7, "0+c+c", 17),
                ],
                [
                    ("A", 11, "0+1%0+a", 15),
                    ("A", 5, "0+1+1%0+a+a", 15),
                    ("B", 6, "0+2+2%0+b", 16),
                    ("C", 13, "0+3%0+c", 19),
                ],
            ],
        },
    ),
]


@pytest.mark.parametrize(("emit_final", "caching"), STRATEGIES)
def test_join(emit_final: bool, caching: bool) -> None:
    """KStreamSlidingWindowAggregateTest.testJoin: two sliding-window aggregations joined as
    KTables on the windowed key (emit-final tables join only closed windows)."""
    builder = StreamsBuilder()
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    grace = 0 if emit_final else 100
    supplier = MockApiProcessorSupplier()
    tables = []
    for n in (1, 2):
        store = f"store-name{n}" if emit_final else (f"Reverse{n}", 50_000)
        materialized = (
            Materialized.as_(store) if isinstance(store, str) else _materialized(store, False, caching)
        )
        table = (
            builder.stream(f"topic{n}", Consumed(key_serde=S, value_serde=S))
            .group_by_key(Grouped(key_serde=S, value_serde=S))
            .windowed_by(SlidingWindows.of_time_difference_and_grace(10, grace))
            .emit_strategy(strategy)
            .aggregate(
                lambda: "0",
                lambda k, v, agg: f"{agg}+{v}",
                materialized if caching or not emit_final else materialized.with_caching_disabled(),
            )
        )
        table.to_stream().process(supplier)
        tables.append(table)
    tables[0].join(tables[1], lambda p1, p2: f"{p1}%{p2}").to_stream().process(supplier)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topics = {n: driver.create_input_topic(f"topic{n}", S, S) for n in (1, 2)}
        processors = supplier.captured_processors(3)
        for topic, records, expected in JOIN_STEPS:
            for key, value, ts in records:
                topics[topic].pipe_input(key, value, ts)
            for processor, results in zip(processors, expected[emit_final], strict=True):
                got = [(k.key, k.window.start(), v, ts) for k, v, ts in processor.processed]
                assert got == results
                assert all(k.window.end() == k.window.start() + 10 for k, _, _ in processor.processed)
                processor.processed.clear()


#: shouldLogAndMeterWhenSkippingExpiredWindowByGrace: (value, timestamp) of key k, in order
EXPIRED_INPUT = [("100", 200), ("0", 100), ("1", 101), ("2", 102), ("3", 103), ("4", 104), ("5", 105)]
EXPIRED_INPUT += [("6", 15), ("101", 300), ("102", 400)]


@pytest.mark.parametrize(("emit_final", "caching"), STRATEGIES)
def test_should_meter_when_skipping_expired_window_by_grace(emit_final: bool, caching: bool) -> None:
    """KStreamSlidingWindowAggregateTest.shouldLogAndMeterWhenSkippingExpiredWindowByGrace, but
    Kafka's log text: the seven records whose windows closed (grace 90 ms) are dropped, the
    task meters them (dropped-records 7, record-lateness average 77 ms), and only the
    windows of 200, 300 (and 400, updates only) reach the output."""
    builder = StreamsBuilder()
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    (
        builder.stream("topic", Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 90))
        .emit_strategy(strategy)
        .aggregate(
            lambda: "0",
            lambda k, v, agg: f"{agg}+{v}",
            _materialized(("Reverse1", 50_000), emit_final, caching),
        )
        .to_stream()
        .to("output")
    )
    # DEBUG: record-lateness is a debug-level task metric, as in Kafka
    with TopologyTestDriver(builder.build(), {**CONFIG, "metrics_recording_level": "DEBUG"}) as driver:
        metrics, _ = _watched(driver, "DEBUG")
        topic = driver.create_input_topic("topic", S, S)
        for value, ts in EXPIRED_INPUT:
            topic.pipe_input("k", value, ts)
        dropped_records, lateness_count, lateness_avg_ms = task_drops_and_lateness(metrics)
        assert dropped_records == 7
        assert lateness_count == 10 and round(lateness_avg_ms) == 77
        output = driver.create_output_topic("output", TimeWindowedSerde(S, 10), S)
        got = [(r.key.key, r.key.window.start(), r.value, r.timestamp) for r in output.read_records_to_list()]
    expected = [("k", 190, "0+100", 200), ("k", 290, "0+101", 300)]
    assert got == expected + ([] if emit_final else [("k", 390, "0+102", 400)])


def test_should_log_and_meter_when_skipping_null_key(caplog: pytest.LogCaptureFixture) -> None:
    """KStreamSlidingWindowAggregateTest.shouldLogAndMeterWhenSkippingNullKey: dropped-records 1
    and Kafka's warning."""
    windows = SlidingWindows.of_time_difference_and_grace(10, 100)
    check_windowed_null_key_skip(caplog, windows, "null key or value")
