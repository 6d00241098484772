"""Kafka's ``KStreamWindowAggregateTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/
internals/KStreamWindowAggregateTest.java), translated: ``testAggBasic`` for both emit strategies,
with and without caching.

``showThrowIfEmitFinalUsedWithUnlimitedWindow`` and ``shouldLogAndMeterWhenSkippingExpiredWindow``
/ ``...ByGrace`` (but their log text) translated. The emit-interval cases
(``shouldNotEmitFinalIfNotProgressEnough``, ``shouldEmitWithInterval0``,
``shouldEmitWithLargeInterval``, ``shouldEmitFromLastEmitTime``: Kafka's internal
``__emit.interval.ms.kstreams.windowed.aggregation__``) run through the driver. ``testJoin``
(the KTable-KTable join of two windowed aggregations) translated too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from platform_streams.dsl import (
    Consumed,
    EmitStrategy,
    Grouped,
    Materialized,
    StreamsBuilder,
    TimeWindows,
    UnlimitedWindows,
    Windowed,
)
from platform_streams.serde import String
from platform_streams.state.windowed import TimeWindow
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    MockApiProcessorSupplier,
    check_windowed_null_key_skip,
    task_drops_and_lateness,
)
from tests.unit.metrics.test_metrics_task_hooks import _watched

S = String()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def _w(key: str, start: int, value: str, ts: int) -> tuple[Any, str, int]:
    return Windowed(key, TimeWindow(start, start + 10)), value, ts


@pytest.mark.parametrize("emit_final", [False, True], ids=["ON_WINDOW_UPDATE", "ON_WINDOW_CLOSE"])
@pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])
def test_agg_basic(emit_final: bool, caching: bool) -> None:
    """KStreamWindowAggregateTest.testAggBasic"""
    builder = StreamsBuilder()
    materialized = Materialized.as_("topic1-Canonized").with_value_serde(S)
    if not caching:
        materialized = materialized.with_caching_disabled()
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    table2 = (
        builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
        .windowed_by(TimeWindows.of_size_and_grace(10, 100).advance_by(5))
        .emit_strategy(strategy)
        .aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}", materialized)
    )
    supplier = MockApiProcessorSupplier()
    table2.to_stream().process(supplier)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("topic1", S, S)
        for key, value, ts in [
            ("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 4),
            ("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9),
            ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
            ("B", "1", 3), ("B", "2", 2), ("B", "3", 9),
        ]:  # fmt: skip
            topic.pipe_input(key, value, ts)
    (processor,) = supplier.captured_processors(1)
    if emit_final:
        assert processor.processed == []  # grace is 100: no window closes
        return
    processor.check_and_clear_process_result(
        _w("A", 0, "0+1", 0), _w("B", 0, "0+2", 1), _w("C", 0, "0+3", 2), _w("D", 0, "0+4", 3),
        _w("A", 0, "0+1+1", 4), _w("A", 0, "0+1+1+1", 5), _w("A", 5, "0+1", 5),
        _w("B", 0, "0+2+2", 6), _w("B", 5, "0+2", 6), _w("D", 0, "0+4+4", 7), _w("D", 5, "0+4", 7),
        _w("B", 0, "0+2+2+2", 8), _w("B", 5, "0+2+2", 8), _w("C", 0, "0+3+3", 9), _w("C", 5, "0+3", 9),
        _w("A", 5, "0+1+1", 10), _w("A", 10, "0+1", 10), _w("B", 5, "0+2+2+2", 11), _w("B", 10, "0+2", 11),
        _w("D", 5, "0+4+4", 12), _w("D", 10, "0+4", 12), _w("B", 5, "0+2+2+2+2", 13),
        _w("B", 10, "0+2+2", 13), _w("C", 5, "0+3+3", 14), _w("C", 10, "0+3", 14),
        _w("B", 0, "0+2+2+2+1", 8), _w("B", 0, "0+2+2+2+1+2", 8), _w("B", 0, "0+2+2+2+1+2+3", 9),
        _w("B", 5, "0+2+2+2+2+3", 13),
    )  # fmt: skip


#: testJoin per strategy: steps of (input topic, its (key, value, timestamp) records, then what
#: table1, table2 and their join forwarded as (key, window start, value, timestamp); None: the
#: Java test does not check (nor clear) that processor at that step); ``cached``/``uncached``
#: where the emit-final results differ
_JOIN_STEPS: dict[str, list[tuple[str, list[tuple[str, str, int]], Any, Any, Any]]] = {
    "ON_WINDOW_CLOSE": [
        ("topic1",
         [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 9), ("A", "1", 15)],
         [("A", 0, "0+1+1", 9), ("B", 0, "0+2", 1), ("C", 0, "0+3", 2), ("D", 0, "0+4", 3)], [], []),
        ("topic1",
         [("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14), ("A", "1", 20)],
         [("A", 5, "0+1+1", 10), ("B", 5, "0+2+2", 13), ("C", 5, "0+3", 14), ("D", 5, "0+4", 12)], [], []),
        ("topic2", [("A", "a", 0), ("B", "b", 1), ("C", "c", 2), ("D", "d", 10), ("A", "a", 15)],
         [],
         {"cached": [("A", 0, "0+a", 0), ("B", 0, "0+b", 1), ("C", 0, "0+c", 2)], "uncached": None},
         {"cached": [("A", 0, "0+1+1%0+a", 9), ("B", 0, "0+2%0+b", 1), ("C", 0, "0+3%0+c", 2)],
          "uncached": []}),
        ("topic2", [("A", "a", 5), ("B", "b", 6), ("D", "d", 7), ("D", "d", 18), ("A", "a", 21)],
         [],
         {"cached": [("A", 5, "0+a", 5), ("B", 5, "0+b", 6), ("D", 5, "0+d+d", 10)],
          "uncached": [("A", 0, "0+a", 0), ("B", 0, "0+b", 1), ("C", 0, "0+c", 2),
                       ("A", 5, "0+a", 5), ("B", 5, "0+b", 6), ("D", 5, "0+d+d", 10)]},
         [("A", 5, "0+1+1%0+a", 10), ("B", 5, "0+2+2%0+b", 13), ("D", 5, "0+4%0+d+d", 12)]),
    ],
    "ON_WINDOW_UPDATE": [
        ("topic1", [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 9)],
         [("A", 0, "0+1", 0), ("B", 0, "0+2", 1), ("C", 0, "0+3", 2), ("D", 0, "0+4", 3),
          ("A", 0, "0+1+1", 9), ("A", 5, "0+1", 9)], [], []),
        ("topic1", [("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9)],
         [("A", 0, "0+1+1+1", 9), ("A", 5, "0+1+1", 9), ("B", 0, "0+2+2", 6), ("B", 5, "0+2", 6),
          ("D", 0, "0+4+4", 7), ("D", 5, "0+4", 7), ("B", 0, "0+2+2+2", 8), ("B", 5, "0+2+2", 8),
          ("C", 0, "0+3+3", 9), ("C", 5, "0+3", 9)], [], []),
        ("topic2", [("A", "a", 0), ("B", "b", 1), ("C", "c", 2), ("D", "d", 20), ("A", "a", 20)],
         [],
         [("A", 0, "0+a", 0), ("B", 0, "0+b", 1), ("C", 0, "0+c", 2), ("D", 15, "0+d", 20),
          ("D", 20, "0+d", 20), ("A", 15, "0+a", 20), ("A", 20, "0+a", 20)],
         [("A", 0, "0+1+1+1%0+a", 9), ("B", 0, "0+2+2+2%0+b", 8), ("C", 0, "0+3+3%0+c", 9)]),
        ("topic2", [("A", "a", 5), ("B", "b", 6), ("D", "d", 7), ("D", "d", 18), ("A", "a", 21)],
         [],
         [("A", 0, "0+a+a", 5), ("A", 5, "0+a", 5), ("B", 0, "0+b+b", 6), ("B", 5, "0+b", 6),
          ("D", 0, "0+d", 7), ("D", 5, "0+d", 7), ("D", 10, "0+d", 18), ("D", 15, "0+d+d", 20),
          ("A", 15, "0+a+a", 21), ("A", 20, "0+a+a", 21)],
         [("A", 0, "0+1+1+1%0+a+a", 9), ("A", 5, "0+1+1%0+a", 9), ("B", 0, "0+2+2+2%0+b+b", 8),
          ("B", 5, "0+2+2%0+b", 8), ("D", 0, "0+4+4%0+d", 7), ("D", 5, "0+4%0+d", 7)]),
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    ("emit_final", "caching"),
    [
        (False, True),
        (False, False),
        (True, True),
        (True, False),
    ],
    ids=[
        "ON_WINDOW_UPDATE-cached",
        "ON_WINDOW_UPDATE-uncached",
        "ON_WINDOW_CLOSE-cached",
        "ON_WINDOW_CLOSE-uncached",
    ],
)
def test_join(emit_final: bool, caching: bool) -> None:
    """KStreamWindowAggregateTest.testJoin: two windowed aggregations (grace 5 ms for emit-final,
    100 ms otherwise) and the KTable-KTable join of them."""
    builder = StreamsBuilder()
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    supplier = MockApiProcessorSupplier()
    tables = []
    for topic in ("topic1", "topic2"):
        materialized = Materialized.as_(f"{topic}-Canonized").with_value_serde(S)
        table = (
            builder.stream(topic, Consumed(key_serde=S, value_serde=S))
            .group_by_key(Grouped(key_serde=S, value_serde=S))
            .windowed_by(TimeWindows.of_size_and_grace(10, 5 if emit_final else 100).advance_by(5))
            .emit_strategy(strategy)
            .aggregate(
                lambda: "0",
                lambda k, v, agg: f"{agg}+{v}",
                materialized if caching else materialized.with_caching_disabled(),
            )
        )
        table.to_stream().process(supplier)
        tables.append(table)
    tables[0].join(tables[1], lambda p1, p2: f"{p1}%{p2}").to_stream().process(supplier)
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        inputs = {t: driver.create_input_topic(t, S, S) for t in ("topic1", "topic2")}
        processors = supplier.captured_processors(3)
        for topic, records, *expected in _JOIN_STEPS["ON_WINDOW_CLOSE" if emit_final else "ON_WINDOW_UPDATE"]:
            for key, value, ts in records:
                inputs[topic].pipe_input(key, value, ts)
            for processor, want in zip(processors, expected, strict=True):
                if isinstance(want, dict):
                    want = want["cached" if caching else "uncached"]
                if want is not None:
                    processor.check_and_clear_process_result(*(_w(*output) for output in want))


@pytest.mark.parametrize("emit_final", [False, True], ids=["ON_WINDOW_UPDATE", "ON_WINDOW_CLOSE"])
def test_show_throw_if_emit_final_used_with_unlimited_window(emit_final: bool) -> None:
    """showThrowIfEmitFinalUsedWithUnlimitedWindow: an unlimited window never closes, so
    ON_WINDOW_CLOSE is refused when the aggregation is defined; ON_WINDOW_UPDATE is fine."""
    builder = StreamsBuilder()
    strategy = EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update()
    windowed = (
        builder.stream("topic").group_by_key().windowed_by(UnlimitedWindows.of()).emit_strategy(strategy)
    )
    if emit_final:
        with pytest.raises(ValueError) as error:
            windowed.aggregate(lambda: "0", lambda key, value, agg: f"{agg}+{value}")
        assert str(error.value) == (
            "ON_WINDOW_CLOSE strategy is only supported for TimeWindows and SlidingWindows "
            "for TimeWindowedKStream"
        )
    else:
        windowed.aggregate(lambda: "0", lambda key, value, agg: f"{agg}+{value}")


def _string_aggregate(
    builder: StreamsBuilder,
    windows: TimeWindows,
    emit_final: bool,
    materialized: Any,
    caching: bool,
    init: str,
) -> Any:
    """``topic`` grouped by key, windowed, aggregated as Kafka's ``MockAggregator.TOSTRING_ADDER``
    from ``init``, emitting per strategy, the store cached or not."""
    return (
        builder.stream("topic", Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
        .windowed_by(windows)
        .emit_strategy(EmitStrategy.on_window_close() if emit_final else EmitStrategy.on_window_update())
        .aggregate(
            lambda: init,
            lambda k, v, agg: f"{agg}+{v}",
            materialized if caching else materialized.with_caching_disabled(),
        )
    )


#: Java test -> (window advance, store retention (None: the default), (value, timestamp) of key
#: k in order, dropped records, average record lateness (ms), the output per strategy as
#: (``Windowed.toString()``, value, timestamp), None where Java does not read it); windows
#: are 10 ms with 90 ms grace
EXPIRED_CASES: dict[str, tuple[int, int | None, list[tuple[str, int]], int, float, dict[bool, Any]]] = {
    "shouldLogAndMeterWhenSkippingExpiredWindow": (
        5, 100,
        [("100", 100), ("0", 0), ("1", 1), ("2", 2), ("3", 3), ("4", 4), ("5", 5), ("6", 6),
         ("105", 105), ("106", 106)],
        7, 67.9,
        {
            True: [("[k@5/15]", "+5+6", 6)],
            False: [
                ("[k@95/105]", "+100", 100), ("[k@100/110]", "+100", 100), ("[k@5/15]", "+5", 5),
                ("[k@5/15]", "+5+6", 6), ("[k@100/110]", "+100+105", 105), ("[k@105/115]", "+105", 105),
                ("[k@100/110]", "+100+105+106", 106), ("[k@105/115]", "+105+106", 106),
            ],
        },
    ),
    "shouldLogAndMeterWhenSkippingExpiredWindowByGrace": (
        10, None,
        [("100", 200), ("0", 100), ("1", 101), ("2", 102), ("3", 103), ("4", 104), ("5", 105), ("6", 6)],
        7, 97.375,
        {True: None, False: [("[k@200/210]", "+100", 200)]},
    ),
}  # fmt: skip


@pytest.mark.parametrize("emit_final", [False, True], ids=["ON_WINDOW_UPDATE", "ON_WINDOW_CLOSE"])
@pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])
@pytest.mark.parametrize("java_test", list(EXPIRED_CASES))
def test_should_meter_when_skipping_expired_window(java_test: str, emit_final: bool, caching: bool) -> None:
    """KStreamWindowAggregateTest.<java_test>, but Kafka's log text: records whose windows all
    closed are dropped, the task meters them (dropped-records, record-lateness average) and
    the output is Kafka's."""
    advance, retention, records, dropped, lateness_ms, outputs = EXPIRED_CASES[java_test]
    builder = StreamsBuilder()
    materialized = Materialized.as_("topic1-Canonicalized").with_value_serde(S).with_logging_disabled()
    materialized = materialized if retention is None else materialized.with_retention(retention)
    windows = TimeWindows.of_size_and_grace(10, 90).advance_by(advance)
    (
        _string_aggregate(builder, windows, emit_final, materialized, caching, "")
        .to_stream()
        .map(lambda key, value: (f"[{key.key}@{key.window.start()}/{key.window.end()}]", value))
        .to("output")
    )
    # DEBUG: record-lateness is a debug-level task metric, as in Kafka
    with TopologyTestDriver(builder.build(), {**CONFIG, "metrics_recording_level": "DEBUG"}) as driver:
        metrics, _ = _watched(driver, "DEBUG")
        topic = driver.create_input_topic("topic", S, S)
        for value, ts in records:
            topic.pipe_input("k", value, ts)
        dropped_records, lateness_count, lateness_avg_ms = task_drops_and_lateness(metrics)
        assert dropped_records == dropped
        assert lateness_count == len(records) and round(lateness_avg_ms, 3) == lateness_ms
        expected = outputs[emit_final]
        if expected is not None:
            output = driver.create_output_topic("output", S, S)
            assert [(r.key, r.value, r.timestamp) for r in output.read_records_to_list()] == expected


def test_should_log_and_meter_when_skipping_null_key(caplog: pytest.LogCaptureFixture) -> None:
    """KStreamWindowAggregateTest.shouldLogAndMeterWhenSkippingNullKey: dropped-records 1
    and Kafka's warning."""
    check_windowed_null_key_skip(caplog, TimeWindows.of_size_with_no_grace(10).advance_by(5), "null key")


#: Kafka's InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, as the Java tests set it
EMIT_INTERVAL_KEY = "__emit.interval.ms.kstreams.windowed.aggregation__"

#: a step of the emit-interval cases: (wall clock to set (None: leave it), records (key, value,
#: timestamp), what ON_WINDOW_CLOSE forwarded, what ON_WINDOW_UPDATE forwarded), each forward as
#: (key, window start, aggregate, timestamp)
_Forwards = list[tuple[str, int, str, int]]
_Step = tuple[int | None, list[tuple[str, str, int]], _Forwards, _Forwards]

#: the first records of shouldNotEmitFinalIfNotProgressEnough and shouldEmitFromLastEmitTime
_A_B_C: _Step = (
    0,
    [("A", "1", 0), ("B", "2", 5), ("C", "3", 15)],
    [("A", 0, "0+1", 0), ("B", 0, "0+2", 5)],
    [("A", 0, "0+1", 0), ("B", 0, "0+2", 5), ("B", 5, "0+2", 5), ("C", 10, "0+3", 15), ("C", 15, "0+3", 15)],
)

#: Java test -> (the emit interval it sets, its steps); the Java tests drive the processor through
#: a mock context whose system time they set (``context.setSystemTimeMs``): here the driver's
#: wall clock, which the aggregation reads as Kafka's reads ``currentSystemTimeMs()``
EMIT_INTERVAL_CASES: dict[str, tuple[int, list[_Step]]] = {
    "shouldNotEmitFinalIfNotProgressEnough": (0, [
        _A_B_C,
        # stream time does not move: nothing closes
        (None, [("D", "4", 15)], [], [("D", 10, "0+4", 15), ("D", 15, "0+4", 15)]),
        # stream time moves, but not enough to close another window
        (None, [("E", "5", 19)], [], [("E", 10, "0+5", 19), ("E", 15, "0+5", 19)]),
    ]),
    "shouldEmitWithInterval0": (0, [
        (0,
         [("A", "1", 0), ("A", "1", 5), ("B", "2", 10), ("C", "3", 15), ("D", "4", 20)],
         [("A", 0, "0+1+1", 5), ("A", 5, "0+1", 5), ("B", 5, "0+2", 10)],
         [("A", 0, "0+1", 0), ("A", 0, "0+1+1", 5), ("A", 5, "0+1", 5), ("B", 5, "0+2", 10),
          ("B", 10, "0+2", 10), ("C", 10, "0+3", 15), ("C", 15, "0+3", 15), ("D", 15, "0+4", 20),
          ("D", 20, "0+4", 20)]),
    ]),
    "shouldEmitWithLargeInterval": (1000, [
        # the first record opens the throttle for 1 s of wall clock: C at 15 closes A@0/10 but
        # emits nothing
        (0,
         [("A", "1", 0), ("A", "1", 5), ("B", "2", 10), ("C", "3", 15)],
         [],
         [("A", 0, "0+1", 0), ("A", 0, "0+1+1", 5), ("A", 5, "0+1", 5), ("B", 5, "0+2", 10),
          ("B", 10, "0+2", 10), ("C", 10, "0+3", 15), ("C", 15, "0+3", 15)]),
        # 10 s later: every window closed since is emitted
        (10_000, [("D", "4", 20)],
         [("A", 0, "0+1+1", 5), ("A", 5, "0+1", 5), ("B", 5, "0+2", 10)],
         [("D", 15, "0+4", 20), ("D", 20, "0+4", 20)]),
        # 100 ms later: throttled again
        (10_100, [("E", "5", 40)], [], [("E", 35, "0+5", 40), ("E", 40, "0+5", 40)]),
    ]),
}  # fmt: skip


def _emit_interval_app(emit_final: bool, caching: bool) -> tuple[StreamsBuilder, MockApiProcessorSupplier]:
    """The Java tests' processor: ``TimeWindows.ofSizeAndGrace(10, 5).advanceBy(5)``, the string
    aggregation over a store of one day's retention without changelog, as Java's; the Java store
    has no cache (a mock context), the driver's may have one (it commits after every record, so
    both forward every update)."""
    builder = StreamsBuilder()
    materialized = (
        Materialized.as_("dummy-store-name").with_value_serde(S).with_logging_disabled().with_retention(86_400_000)
    )
    windows = TimeWindows.of_size_and_grace(10, 5).advance_by(5)
    supplier = MockApiProcessorSupplier()
    _string_aggregate(builder, windows, emit_final, materialized, caching, "0").to_stream().process(supplier)
    return builder, supplier


def _run_steps(driver: TopologyTestDriver, processor: Any, steps: list[_Step], emit_final: bool) -> None:
    topic = driver.create_input_topic("topic", S, S)
    for wall_clock, records, final, updates in steps:
        if wall_clock is not None:
            driver.advance_wall_clock_time(wall_clock - driver.wall_clock_ms)
        for key, value, ts in records:
            topic.pipe_input(key, value, ts)
        expected = final if emit_final else updates
        processor.check_and_clear_process_result(*(_w(*output) for output in expected))


@pytest.mark.parametrize("emit_final", [False, True], ids=["ON_WINDOW_UPDATE", "ON_WINDOW_CLOSE"])
@pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])
@pytest.mark.parametrize("java_test", list(EMIT_INTERVAL_CASES))
def test_emit_interval(java_test: str, emit_final: bool, caching: bool) -> None:
    """KStreamWindowAggregateTest.<java_test>: emit-final checks for closed windows at most once
    per ``__emit.interval.ms.kstreams.windowed.aggregation__`` of wall clock (Kafka's
    ``AbstractKStreamTimeWindowAggregateProcessor.shouldEmitFinal``), and only when the close
    time moved; ON_WINDOW_UPDATE ignores the setting."""
    interval, steps = EMIT_INTERVAL_CASES[java_test]
    builder, supplier = _emit_interval_app(emit_final, caching)
    with TopologyTestDriver(builder.build(), {**CONFIG, EMIT_INTERVAL_KEY: interval}) as driver:
        (processor,) = supplier.captured_processors(1)
        _run_steps(driver, processor, steps, emit_final)


@pytest.mark.parametrize("emit_final", [False, True], ids=["ON_WINDOW_UPDATE", "ON_WINDOW_CLOSE"])
def test_should_emit_from_last_emit_time(emit_final: bool, tmp_path: Path) -> None:
    """KStreamWindowAggregateTest.shouldEmitFromLastEmitTime: a new processor over the same store
    (here: a new driver on the same state directory) emits only the windows closed since the last
    close time emitted, not the ones the old processor emitted."""
    builder, supplier = _emit_interval_app(emit_final, caching=False)
    config = {**CONFIG, EMIT_INTERVAL_KEY: 0, "state_dir": str(tmp_path)}
    with TopologyTestDriver(builder.build(), config) as driver:
        _run_steps(driver, supplier.processors[0], [_A_B_C], emit_final)
    with TopologyTestDriver(builder.build(), config) as driver:
        _run_steps(
            driver,
            supplier.processors[1],
            [(None, [("D", "4", 25)], [("B", 5, "0+2", 5), ("C", 10, "0+3", 15)],
              [("D", 20, "0+4", 25), ("D", 25, "0+4", 25)])],
            emit_final,
        )  # fmt: skip
