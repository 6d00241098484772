"""Kafka's ``SuppressScenarioTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
SuppressScenarioTest.java), translated: the time-limit, record-limit, byte-limit and final-results
scenarios (time, sliding and session windows, cogrouped). The byte limit counts entries as Kafka
does (key, values and record context), so ``max_bytes(200)`` evicts at the same points.
"""

from __future__ import annotations

from typing import Any

from platform_streams.dsl import (
    BufferConfig,
    Consumed,
    Grouped,
    KTable,
    Materialized,
    Produced,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)
from platform_streams.serde import Long, String
from platform_streams.testing import TopologyTestDriver

S, L = String(), Long()
KVT = tuple[Any, Any, int]


def drain(driver: TopologyTestDriver, topic: str) -> list[KVT]:
    """``drainProducerRecords``: every record written to ``topic`` since the last drain."""
    return [
        (r.key, r.value, r.timestamp) for r in driver.create_output_topic(topic, S, L).read_records_to_list()
    ]


def _value_counts(**count_args: Any) -> tuple[StreamsBuilder, KTable]:
    builder = StreamsBuilder()
    counts = (
        builder.table(
            "input",
            Consumed(key_serde=S, value_serde=S),
            Materialized(key_serde=S, value_serde=S).with_caching_disabled().with_logging_disabled(),
        )
        .group_by(lambda k, v: (v, k), Grouped(key_serde=S, value_serde=S))
        .count(**count_args)
    )
    return builder, counts


def _run_value_counts(suppressed: Suppressed, **count_args: Any) -> tuple[StreamsBuilder, TopologyTestDriver]:
    builder, value_counts = _value_counts(**count_args)
    value_counts.suppress(suppressed).to_stream().to(
        "output-suppressed", Produced(key_serde=S, value_serde=L)
    )
    value_counts.to_stream().to("output-raw", Produced(key_serde=S, value_serde=L))
    return builder, TopologyTestDriver(builder.build())


RAW_FIRST_THREE = [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]


def _pipe(driver: TopologyTestDriver, *records: tuple[str, str, int]) -> None:
    topic = driver.create_input_topic("input", S, S)
    for key, value, ts in records:
        topic.pipe_input(key, value, ts)


def test_should_immediately_emit_events_with_zero_emit_after() -> None:
    """SuppressScenarioTest.shouldImmediatelyEmitEventsWithZeroEmitAfter"""
    _, driver = _run_value_counts(Suppressed.until_time_limit(0, BufferConfig.unbounded()))
    with driver:
        _pipe(driver, ("k1", "v1", 0), ("k1", "v2", 1), ("k2", "v1", 2))
        assert drain(driver, "output-raw") == RAW_FIRST_THREE
        assert drain(driver, "output-suppressed") == RAW_FIRST_THREE
        _pipe(driver, ("x", "x", 3))
        assert drain(driver, "output-raw") == [("x", 1, 3)]
        assert drain(driver, "output-suppressed") == [("x", 1, 3)]
        _pipe(driver, ("x", "y", 4))
        assert drain(driver, "output-raw") == [("x", 0, 4), ("y", 1, 4)]
        assert drain(driver, "output-suppressed") == [("x", 0, 4), ("y", 1, 4)]


def test_should_suppress_intermediate_events_with_time_limit() -> None:
    """SuppressScenarioTest.shouldSuppressIntermediateEventsWithTimeLimit"""
    _, driver = _run_value_counts(Suppressed.until_time_limit(2, BufferConfig.unbounded()))
    with driver:
        _pipe(driver, ("k1", "v1", 0), ("k1", "v2", 1), ("k2", "v1", 2))
        assert drain(driver, "output-raw") == RAW_FIRST_THREE
        assert drain(driver, "output-suppressed") == [("v1", 1, 2)]
        _pipe(driver, ("tick", "tick", 3))  # a dummy record to advance stream time
        assert drain(driver, "output-raw") == [("tick", 1, 3)]
        assert drain(driver, "output-suppressed") == [("v2", 1, 1)]
        _pipe(driver, ("tick", "tock", 4))
        assert drain(driver, "output-raw") == [("tick", 0, 4), ("tock", 1, 4)]
        assert drain(driver, "output-suppressed") == []  # tick was buffered at 3, it is only 4


def _limit_scenario(buffer: BufferConfig, **count_args: Any) -> None:
    _, driver = _run_value_counts(Suppressed.until_time_limit(2**63 - 1, buffer), **count_args)
    with driver:
        _pipe(driver, ("k1", "v1", 0), ("k1", "v2", 1), ("k2", "v1", 2))
        assert drain(driver, "output-raw") == RAW_FIRST_THREE
        # consecutive updates to v1 get suppressed into only the latter; the last update
        # won't be evicted until another key comes along
        assert drain(driver, "output-suppressed") == [("v1", 0, 1), ("v2", 1, 1)]
        _pipe(driver, ("x", "x", 3))
        assert drain(driver, "output-raw") == [("x", 1, 3)]
        assert drain(driver, "output-suppressed") == [("v1", 1, 2)]


def test_should_suppress_intermediate_events_with_record_limit() -> None:
    """SuppressScenarioTest.shouldSuppressIntermediateEventsWithRecordLimit"""
    _limit_scenario(
        BufferConfig.max_records(1).emit_early_when_full(),
        materialized=Materialized(key_serde=S, value_serde=L),
    )


def test_should_suppress_intermediate_events_with_bytes_limit() -> None:
    """SuppressScenarioTest.shouldSuppressIntermediateEventsWithBytesLimit"""
    # "a bit brittle, but I happen to know that the entries are a little over 100 bytes in size"
    _limit_scenario(BufferConfig.max_bytes(200).emit_early_when_full())


def _windowed_counts(windows: Any, materialized: Materialized) -> TopologyTestDriver:
    builder = StreamsBuilder()
    value_counts = (
        builder.stream("input", Consumed(key_serde=S, value_serde=S))
        .group_by(lambda k, v: k, Grouped(key_serde=S, value_serde=S))
        .windowed_by(windows)
        .count(materialized)
    )

    def as_string(k: Any, v: Any) -> tuple[str, Any]:
        return f"[{k.key}@{k.window.start()}/{k.window.end()}]", v

    produced = Produced(key_serde=S, value_serde=L)
    value_counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().map(
        as_string
    ).to("output-suppressed", produced)
    value_counts.to_stream().map(as_string).to("output-raw", produced)
    return TopologyTestDriver(builder.build())


def test_should_support_final_results_for_time_windows() -> None:
    """SuppressScenarioTest.shouldSupportFinalResultsForTimeWindows"""
    driver = _windowed_counts(
        TimeWindows.of_size_and_grace(2, 1), Materialized.as_("counts").with_caching_disabled()
    )
    with driver:
        # the last record is dropped: it is out of the grace period
        _pipe(driver, *[("k1", "v1", ts) for ts in (0, 1, 2, 1, 0, 5, 0)])
        assert drain(driver, "output-raw") == [
            ("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2),
            ("[k1@0/2]", 3, 1), ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 5),
        ]  # fmt: skip
        assert drain(driver, "output-suppressed") == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 1, 2)]


def test_should_support_final_results_for_time_windows_with_large_jump() -> None:
    """SuppressScenarioTest.shouldSupportFinalResultsForTimeWindowsWithLargeJump"""
    driver = _windowed_counts(
        TimeWindows.of_size_and_grace(2, 2),
        Materialized.as_("counts").with_caching_disabled().with_key_serde(S),
    )
    with driver:
        # the second-to-last update is dropped: the previous event closed its window
        _pipe(driver, *[("k1", "v1", ts) for ts in (0, 1, 2, 0, 3, 0, 4, 0, 30)])
        assert drain(driver, "output-raw") == [
            ("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1),
            ("[k1@2/4]", 2, 3), ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 4), ("[k1@30/32]", 1, 30),
        ]  # fmt: skip
        assert drain(driver, "output-suppressed") == [
            ("[k1@0/2]", 4, 1),
            ("[k1@2/4]", 2, 3),
            ("[k1@4/6]", 1, 4),
        ]


def test_should_support_final_results_for_sliding_windows() -> None:
    """SuppressScenarioTest.shouldSupportFinalResultsForSlidingWindows: 5 ms difference, 15 ms
    grace; the raw output is sorted by key string and timestamp, as the Java test sorts it."""
    driver = _windowed_counts(
        SlidingWindows.of_time_difference_and_grace(5, 15),
        Materialized.as_("counts").with_caching_disabled().with_key_serde(S),
    )
    with driver:
        # k1@5 is dropped: k1@24 advanced stream time and closed its window
        _pipe(driver, *[("k1", "v1", ts) for ts in (10, 11, 10, 13, 10, 24, 5, 7, 90)])
        assert sorted(drain(driver, "output-raw"), key=lambda r: (r[0], r[2])) == [
            ("[k1@11/16]", 1, 11), ("[k1@11/16]", 2, 13), ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24),
            ("[k1@5/10]", 1, 10), ("[k1@5/10]", 2, 10), ("[k1@5/10]", 3, 10), ("[k1@5/10]", 4, 10),
            ("[k1@5/10]", 5, 10), ("[k1@6/11]", 2, 11), ("[k1@6/11]", 3, 11), ("[k1@6/11]", 4, 11),
            ("[k1@6/11]", 5, 11), ("[k1@8/13]", 4, 13), ("[k1@8/13]", 5, 13), ("[k1@85/90]", 1, 90),
        ]  # fmt: skip
        assert drain(driver, "output-suppressed") == [
            ("[k1@5/10]", 5, 10), ("[k1@6/11]", 5, 11), ("[k1@8/13]", 5, 13),
            ("[k1@11/16]", 2, 13), ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24),
        ]  # fmt: skip


def test_should_support_final_results_for_session_windows() -> None:
    """SuppressScenarioTest.shouldSupportFinalResultsForSessionWindows: 5 ms gap, no grace."""
    driver = _windowed_counts(
        SessionWindows.of_inactivity_gap_with_no_grace(5), Materialized.as_("counts").with_caching_disabled()
    )
    with driver:
        # k1@1 joins the open session; k2@11 closes it; the late k1@5 is dropped; k1@30 flushes
        _pipe(driver, *[(key, "v1", ts) for key, ts in (("k1", 0), ("k1", 5), ("k1", 1), ("k2", 11))])
        _pipe(driver, ("k1", "v1", 5), ("k1", "v1", 30))
        assert drain(driver, "output-raw") == [
            ("[k1@0/0]", 1, 0), ("[k1@0/0]", None, 0), ("[k1@0/5]", 2, 5), ("[k1@0/5]", None, 5),
            ("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11), ("[k1@30/30]", 1, 30),
        ]  # fmt: skip
        assert drain(driver, "output-suppressed") == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]


def drain_strings(driver: TopologyTestDriver, topic: str) -> list[KVT]:
    return [
        (r.key, r.value, r.timestamp) for r in driver.create_output_topic(topic, S, S).read_records_to_list()
    ]


def test_should_work_before_group_by() -> None:
    """SuppressScenarioTest.shouldWorkBeforeGroupBy"""
    builder = StreamsBuilder()
    (
        builder.table("topic", Consumed(key_serde=S, value_serde=S))
        .suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
        .group_by(lambda k, v: (k, v), Grouped(key_serde=S, value_serde=S))
        .count()
        .to_stream()
        .to("output", Produced(key_serde=S, value_serde=L))
    )
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("topic", S, S)
        topic.pipe_input("A", "a", 0)
        topic.pipe_input("tick", "tick", 10)
        assert drain(driver, "output") == [("A", 1, 0)]


def _join_fixture(suppress_left: bool) -> TopologyTestDriver:
    builder = StreamsBuilder()
    left = builder.table("left", Consumed(key_serde=S, value_serde=S))
    right = builder.table("right", Consumed(key_serde=S, value_serde=S))
    suppressed = Suppressed.until_time_limit(10, BufferConfig.unbounded())
    if suppress_left:
        left = left.suppress(suppressed)
    else:
        right = right.suppress(suppressed)
    left.outer_join(
        right, lambda lv, rv: f"({'null' if lv is None else lv},{'null' if rv is None else rv})"
    ).to_stream().to("output", Produced(key_serde=S, value_serde=S))
    return TopologyTestDriver(builder.build())


def test_should_work_before_join_right() -> None:
    """SuppressScenarioTest.shouldWorkBeforeJoinRight"""
    with _join_fixture(suppress_left=False) as driver:
        right = driver.create_input_topic("right", S, S)
        left = driver.create_input_topic("left", S, S)
        right.pipe_input("B", "1", 0)
        right.pipe_input("A", "1", 0)
        assert drain_strings(driver, "output") == []  # buffered
        right.pipe_input("tick", "tick", 10)  # flush buffer
        assert drain_strings(driver, "output") == [("A", "(null,1)", 0), ("B", "(null,1)", 0)]
        right.pipe_input("A", "2", 11)
        assert drain_strings(driver, "output") == []  # buffered
        left.pipe_input("A", "a", 12)  # joins with the previously emitted right side
        assert drain_strings(driver, "output") == [("A", "(a,1)", 12)]
        left.pipe_input("B", "b", 12)  # views through to the parent: B is no longer buffered
        assert drain_strings(driver, "output") == [("B", "(b,1)", 12)]
        left.pipe_input("A", "b", 13)
        assert drain_strings(driver, "output") == [("A", "(b,1)", 13)]
        right.pipe_input("tick", "tick1", 21)
        assert drain_strings(driver, "output") == [("tick", "(null,tick1)", 21), ("A", "(b,2)", 13)]


def test_should_work_before_join_left() -> None:
    """SuppressScenarioTest.shouldWorkBeforeJoinLeft"""
    with _join_fixture(suppress_left=True) as driver:
        right = driver.create_input_topic("right", S, S)
        left = driver.create_input_topic("left", S, S)
        left.pipe_input("B", "1", 0)
        left.pipe_input("A", "1", 0)
        assert drain_strings(driver, "output") == []
        left.pipe_input("tick", "tick", 10)
        assert drain_strings(driver, "output") == [("A", "(1,null)", 0), ("B", "(1,null)", 0)]
        left.pipe_input("A", "2", 11)
        assert drain_strings(driver, "output") == []
        right.pipe_input("A", "a", 12)
        assert drain_strings(driver, "output") == [("A", "(1,a)", 12)]
        right.pipe_input("B", "b", 12)
        assert drain_strings(driver, "output") == [("B", "(1,b)", 12)]
        right.pipe_input("A", "b", 13)
        assert drain_strings(driver, "output") == [("A", "(1,b)", 13)]
        left.pipe_input("tick", "tick1", 21)
        assert drain_strings(driver, "output") == [("tick", "(tick1,null)", 21), ("A", "(2,b)", 13)]


def test_should_work_with_cogrouped() -> None:
    """SuppressScenarioTest.shouldWorkWithCogrouped: a suppressed windowed cogroup builds (Java
    asserts nothing else); here also that the suppress node follows the named aggregate."""
    builder = StreamsBuilder()
    grouped = Grouped(key_serde=S, value_serde=S)
    one = builder.stream("one", Consumed(key_serde=S, value_serde=S)).group_by_key(grouped)
    two = builder.stream("two", Consumed(key_serde=S, value_serde=S)).group_by_key(grouped)
    cogrouped = one.cogroup(lambda k, v, agg: agg + v).cogroup(two, lambda k, v, agg: agg + v)
    table = cogrouped.windowed_by(TimeWindows.of_size_with_no_grace(15 * 60 * 1000)).aggregate(
        lambda: "", named="test", materialized=Materialized.as_("store")
    )
    table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream()
    topology = builder.build()
    assert "store" in topology.stores
    assert any(name.startswith("KTABLE-SUPPRESS-") for name in topology.nodes)
