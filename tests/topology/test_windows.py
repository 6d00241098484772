"""Windowed aggregations through the TopologyTestDriver, case by case against Kafka Streams.

Covers the window specs (``windows_for``, validation), tumbling / hopping / sliding /
session windows, grace periods and late-record drops, ``EmitStrategy.on_window_close()``
(KIP-825) including wall-clock closing, and the stores behind the results. The driver
commits after every record (as Kafka's does), so cached stores emit once per record.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest

from platform_streams.dsl import Consumed, Grouped, Materialized, StreamsBuilder
from platform_streams.dsl.emit_strategy import EmitStrategy
from platform_streams.dsl.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde
from platform_streams.dsl.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows
from platform_streams.errors import TopologyError
from platform_streams.serde import Long, String
from platform_streams.state.windowed import SessionWindow, TimeWindow, Windowed
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology import Topology

S, L = String(), Long()
CONSUMED = Consumed(key_serde=S, value_serde=S)


# ---------------------------------------------------------------------------- window specs


def test_tumbling_windows_for_is_one_aligned_window() -> None:
    windows = TimeWindows.of_size_with_no_grace(10)
    assert windows.windows_for(0) == {0: TimeWindow(0, 10)}
    assert windows.windows_for(9) == {0: TimeWindow(0, 10)}
    assert windows.windows_for(10) == {10: TimeWindow(10, 20)}


def test_hopping_windows_for_matches_kafka_windows_for() -> None:
    # Kafka Streams' TimeWindowsTest: size 5 min, advance 1 min -> a record is in 5 windows
    minute = 60_000
    windows = TimeWindows.of_size_with_no_grace(timedelta(minutes=5)).advance_by(timedelta(minutes=1))
    found = windows.windows_for(7 * minute + 30_000)
    assert list(found) == [3 * minute, 4 * minute, 5 * minute, 6 * minute, 7 * minute]
    assert found[3 * minute] == TimeWindow(3 * minute, 8 * minute)
    # near the epoch, windows with negative starts do not exist
    assert list(windows.windows_for(90_000)) == [0, minute]


def test_window_specs_validate_like_kafka_streams() -> None:
    with pytest.raises(ValueError):
        TimeWindows.of_size_with_no_grace(0)
    with pytest.raises(ValueError):
        TimeWindows.of_size_and_grace(10, -1)
    with pytest.raises(ValueError):
        TimeWindows.of_size_with_no_grace(10).advance_by(11)
    with pytest.raises(ValueError):
        SessionWindows.of_inactivity_gap_with_no_grace(0)
    with pytest.raises(ValueError):
        JoinWindows.of_time_difference_with_no_grace(5).before(-6)
    with pytest.raises(ValueError):
        TimeWindows.of_size_with_no_grace(timedelta(microseconds=1500))
    assert JoinWindows.of_time_difference_and_grace(timedelta(seconds=1), 5).after(-500).size() == 500
    assert SlidingWindows.of_time_difference_and_grace(timedelta(seconds=2), timedelta(seconds=1)) == (
        SlidingWindows(2000, 1000)
    )


# ---------------------------------------------------------------------------- helpers


def _count_topology(
    windows: Any, emit: EmitStrategy | None = None, materialized: Materialized | None = None
) -> tuple[Topology, str]:
    builder = StreamsBuilder()
    windowed = builder.stream("in", CONSUMED).group_by_key().windowed_by(windows)
    if emit is not None:
        windowed = windowed.emit_strategy(emit)
    table = windowed.count(materialized=materialized)
    table.to_stream().to("out")
    topology = builder.build()
    # an unnamed aggregation has no queryable name (Kafka's queryableStoreName() is null): find its store
    assert table.queryable_store_name() == (materialized.store_name if materialized else None)
    (name,) = (store for store in topology.stores if not store.endswith("-close-time"))
    return topology, name


def _pipe(driver: TopologyTestDriver, records: list[tuple[str, int]]) -> None:
    topic = driver.create_input_topic("in", S, S)
    for key, timestamp in records:
        topic.pipe_input(key, "v", timestamp)


def _out(driver: TopologyTestDriver, key_serde: Any) -> list[tuple[Any, Any, int]]:
    topic = driver.create_output_topic("out", key_serde, L)
    return [(r.key, r.value, r.timestamp) for r in topic.read_records_to_list()]


def _tw(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, TimeWindow(start, end))


def _sw(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, SessionWindow(start, end))


def _dropped(driver: TopologyTestDriver) -> int:
    return sum(task.context.dropped_records for task in driver._tasks)


# ---------------------------------------------------------------------------- tumbling / hopping


def test_tumbling_count_emits_every_update_stamped_with_the_window_max_timestamp() -> None:
    topology, store = _count_topology(TimeWindows.of_size_with_no_grace(10))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 1), ("a", 5), ("b", 7), ("a", 3), ("a", 12)])
        assert _out(driver, TimeWindowedSerde(S, 10)) == [
            (_tw("a", 0, 10), 1, 1),
            (_tw("a", 0, 10), 2, 5),
            (_tw("b", 0, 10), 1, 7),
            (_tw("a", 0, 10), 3, 5),  # out of order: max(3, 5)
            (_tw("a", 10, 20), 1, 12),
        ]
        window_store = driver.get_window_store(store)
        assert window_store.fetch("a", 10) == 1
        assert list(window_store.fetch("a", 0, 20)) == [(10, 1)]  # [0,10) expired (retention = size)


def test_late_record_after_window_end_plus_grace_is_dropped_and_counted() -> None:
    topology, _ = _count_topology(TimeWindows.of_size_and_grace(10, 5))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 2), ("a", 14), ("a", 8), ("a", 15), ("a", 9)])
        # stream time 14: window [0,10) closes at 10 + 5 = 15 > 14 -> the record at 8 counts;
        # stream time 15: [0,10) is closed -> the record at 9 is dropped
        assert _out(driver, TimeWindowedSerde(S, 10)) == [
            (_tw("a", 0, 10), 1, 2),
            (_tw("a", 10, 20), 1, 14),
            (_tw("a", 0, 10), 2, 8),
            (_tw("a", 10, 20), 2, 15),
        ]
        assert _dropped(driver) == 1
        (processor,) = [
            p
            for task in driver._tasks
            for p in task.graph.processors.values()
            if hasattr(p, "late_records_dropped")
        ]
        assert processor.late_records_dropped == 1


def test_hopping_windows_update_every_window_containing_the_record() -> None:
    topology, store = _count_topology(TimeWindows.of_size_with_no_grace(10).advance_by(5))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 7), ("a", 12)])
        assert _out(driver, TimeWindowedSerde(S, 10)) == [
            (_tw("a", 0, 10), 1, 7),
            (_tw("a", 5, 15), 1, 7),
            (_tw("a", 5, 15), 2, 12),
            (_tw("a", 10, 20), 1, 12),
        ]
        assert sorted((w.window.start_ms, v) for w, v in driver.get_window_store(store).all()) == [
            (5, 2),
            (10, 1),
        ]


def test_hopping_window_partly_closed_updates_only_open_windows() -> None:
    topology, _ = _count_topology(TimeWindows.of_size_with_no_grace(10).advance_by(5))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 10), ("a", 7)])
        # stream time 10: [0,10) is closed, [5,15) is open -> the record at 7 counts once, not dropped
        assert _out(driver, TimeWindowedSerde(S, 10)) == [
            (_tw("a", 5, 15), 1, 10),
            (_tw("a", 10, 20), 1, 10),
            (_tw("a", 5, 15), 2, 10),
        ]
        assert _dropped(driver) == 1  # Kafka Streams counts one drop per expired window


def test_null_keys_are_skipped_and_null_values_counted() -> None:
    # Kafka Streams' KStreamWindowAggregate skips only null keys; a null value reaches the
    # aggregator (count counts it), as Java's TopologyTestDriver shows (tests/oracle/)
    topology, _ = _count_topology(TimeWindows.of_size_with_no_grace(10))
    with TopologyTestDriver(topology) as driver:
        topic = driver.create_input_topic("in", S, S)
        topic.pipe_input(None, "v", 1)
        topic.pipe_input("a", None, 2)
        topic.pipe_input("a", "v", 3)
        assert _out(driver, TimeWindowedSerde(S, 10)) == [(_tw("a", 0, 10), 1, 2), (_tw("a", 0, 10), 2, 3)]
        assert _dropped(driver) == 1


def test_windowed_reduce_and_aggregate_with_named_stores() -> None:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed(key_serde=S, value_serde=L)).group_by_key()
    windowed = grouped.windowed_by(TimeWindows.of_size_with_no_grace(100))
    windowed.reduce(lambda agg, v: agg + v, materialized=Materialized.as_("sums")).to_stream().to("sums-out")
    windowed.aggregate(
        lambda: "", lambda k, v, agg: agg + str(v), materialized=Materialized.as_("cat").with_value_serde(S)
    ).to_stream().to("cat-out")
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("in", S, L)
        for value, ts in [(1, 10), (2, 20), (3, 150)]:
            topic.pipe_input("k", value, ts)
        sums = driver.create_output_topic("sums-out", TimeWindowedSerde(S, 100), L).read_key_values_to_list()
        assert sums == [(_tw("k", 0, 100), 1), (_tw("k", 0, 100), 3), (_tw("k", 100, 200), 3)]
        cat = driver.create_output_topic("cat-out", TimeWindowedSerde(S, 100), S).read_values_to_list()
        assert cat == ["1", "12", "3"]
        assert driver.get_window_store("sums").fetch("k", 100) == 3
        assert driver.get_window_store("cat").fetch("k", 100) == "3"


def test_retention_smaller_than_size_plus_grace_is_rejected() -> None:
    builder = StreamsBuilder()
    windowed = builder.stream("in", CONSUMED).group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5))
    with pytest.raises(TopologyError, match="retention"):
        windowed.count(materialized=Materialized(store_name="c", retention_ms=14))


def test_windowed_count_describes_with_kafka_streams_names() -> None:
    topology, store = _count_topology(TimeWindows.of_size_with_no_grace(10))
    assert store == "KSTREAM-AGGREGATE-STATE-STORE-0000000001"
    text = str(topology.describe())
    assert (
        "Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])" in text
    )
    assert "KTABLE-TOSTREAM-0000000003" in text


def test_key_changing_grouping_repartitions_before_the_windowed_aggregation() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", CONSUMED)
        .group_by(lambda k, v: v, Grouped(key_serde=S))
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .count(materialized=Materialized.as_("by-value"))
        .to_stream()
        .to("out")
    )
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("in", S, S)
        topic.pipe_input("k1", "x", 1)
        topic.pipe_input("k2", "x", 2)
        assert driver.produced_topic_names() >= {"topology-test-driver-by-value-repartition", "out"}
        assert _out(driver, TimeWindowedSerde(S, 10))[-1] == (_tw("x", 0, 10), 2, 2)


# ---------------------------------------------------------------------------- sliding windows


def _sliding_expected(timestamps: list[int], diff: int) -> dict[tuple[int, int], int]:
    """Kafka's sliding-window definition by brute force: a left window ending at each record,
    a right window starting just after each record that has a later record within ``diff``."""
    windows: set[int] = set()
    for t in timestamps:
        windows.add(t - diff)
        if any(t < u <= t + 1 + diff for u in timestamps):
            windows.add(t + 1)
    return {(s, s + diff): sum(1 for u in timestamps if s <= u <= s + diff) for s in windows}


def test_sliding_windows_follow_the_kip_450_algorithm() -> None:
    topology, store = _count_topology(SlidingWindows.of_time_difference_and_grace(10, 100))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 20), ("a", 25), ("a", 33)])
        assert _out(driver, TimeWindowedSerde(S, 10)) == [
            (_tw("a", 10, 20), 1, 20),  # 20's left window
            (_tw("a", 21, 31), 1, 25),  # 20's right window, created when 25 falls in it
            (_tw("a", 15, 25), 2, 25),  # 25's left window, seeded from 20's left window
            (_tw("a", 26, 36), 1, 33),  # 25's right window
            (_tw("a", 23, 33), 2, 33),  # 33's left window
        ]
        contents = {(w.window.start_ms, w.window.end_ms): v for w, v in driver.get_window_store(store).all()}
        assert contents == _sliding_expected([20, 25, 33], 10)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_sliding_windows_match_the_definition_with_out_of_order_records(seed: int) -> None:
    rng = random.Random(seed)
    diff = 10
    timestamps = [rng.randrange(20, 120) for _ in range(40)]
    topology, store = _count_topology(SlidingWindows.of_time_difference_and_grace(diff, 1_000))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("k", t) for t in timestamps])
        contents = {(w.window.start_ms, w.window.end_ms): v for w, v in driver.get_window_store(store).all()}
    assert contents == _sliding_expected(timestamps, diff)


def test_sliding_window_late_record_is_dropped() -> None:
    topology, _ = _count_topology(SlidingWindows.of_time_difference_with_no_grace(10))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 50), ("a", 39), ("a", 40)])
        out = _out(driver, TimeWindowedSerde(S, 10))
        # 39 + 1 + 10 <= 50: every window of 39 is closed -> dropped. 40 still updates 50's left
        # window [40,50] (end 50 >= close 50), but its own left window [30,40] is closed: that
        # part is dropped too (Kafka Streams counts a drop per expired window)
        assert out == [(_tw("a", 40, 50), 1, 50), (_tw("a", 40, 50), 2, 50), (_tw("a", 41, 51), 1, 50)]
        assert _dropped(driver) == 2


def test_sliding_windows_early_records_share_the_first_window() -> None:
    topology, store = _count_topology(SlidingWindows.of_time_difference_and_grace(10, 100))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 2), ("a", 5)])
        contents = {(w.window.start_ms, w.window.end_ms): v for w, v in driver.get_window_store(store).all()}
    # Kafka Streams' processEarly: both records in [0, 10]; 2's right window [3, 13] holds 5
    assert contents == {(0, 10): 2, (3, 13): 1}


# ---------------------------------------------------------------------------- session windows


def test_session_windows_merge_when_a_record_bridges_two_sessions() -> None:
    # grace 10: the store keeps sessions ending after stream time - (gap + grace)
    topology, store = _count_topology(SessionWindows.of_inactivity_gap_and_grace(5, 10))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 0), ("a", 10), ("b", 3), ("a", 5)])
        assert _out(driver, SessionWindowedSerde(S)) == [
            (_sw("a", 0, 0), 1, 0),
            (_sw("a", 10, 10), 1, 10),
            (_sw("b", 3, 3), 1, 3),
            # 5 is within the gap of both a-sessions: they merge into [0, 10]; the merged
            # sessions are deleted (tombstones), the result is stamped with the session end
            (_sw("a", 0, 0), None, 0),
            (_sw("a", 10, 10), None, 10),
            (_sw("a", 0, 10), 3, 10),
        ]
        sessions = driver.get_session_store(store)
        assert list(sessions.fetch("a")) == [(_sw("a", 0, 10), 3)]
        assert sessions.fetch_session("b", 3, 3) == 1


def test_session_extends_within_gap_and_late_sessions_are_dropped() -> None:
    topology, _ = _count_topology(SessionWindows.of_inactivity_gap_and_grace(5, 2))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 10), ("a", 14), ("a", 30), ("a", 16), ("a", 22)])
        out = _out(driver, SessionWindowedSerde(S))
        # 14 extends [10,10] to [10,14]; at stream time 30 the close time is 30-2-5 = 23:
        # 16 would make [10,16] (end 16 < 23) -> dropped; 22 is a new session [22,22]... < 23 -> dropped
        assert out == [
            (_sw("a", 10, 10), 1, 10),
            (_sw("a", 10, 10), None, 10),
            (_sw("a", 10, 14), 2, 14),
            (_sw("a", 30, 30), 1, 30),
        ]
        assert _dropped(driver) == 2


def test_session_aggregate_uses_the_merger() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", CONSUMED)
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 10))
        .aggregate(
            lambda: "",
            lambda k, v, agg: agg + v,
            lambda k, a, b: a + "|" + b,
            materialized=Materialized.as_("sessions").with_value_serde(S),
        )
        .to_stream()
        .to("out")
    )
    with TopologyTestDriver(builder.build()) as driver:
        topic = driver.create_input_topic("in", S, S)
        topic.pipe_input("a", "x", 0)
        topic.pipe_input("a", "y", 10)
        topic.pipe_input("a", "z", 5)
        assert list(driver.get_session_store("sessions").fetch("a")) == [(_sw("a", 0, 10), "|x|yz")]


# ---------------------------------------------------------------------------- emit final (KIP-825)


def test_emit_on_window_close_emits_each_window_once_when_it_closes() -> None:
    topology, _ = _count_topology(TimeWindows.of_size_and_grace(10, 5), EmitStrategy.on_window_close())
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 1), ("a", 4), ("b", 9), ("a", 12), ("a", 14)])
        assert _out(driver, TimeWindowedSerde(S, 10)) == []  # [0,10) closes at stream time 15
        _pipe(driver, [("a", 15)])
        assert _out(driver, TimeWindowedSerde(S, 10)) == [(_tw("a", 0, 10), 2, 4), (_tw("b", 0, 10), 1, 9)]
        _pipe(driver, [("c", 8), ("a", 16), ("a", 24)])  # late record; nothing closes before 25
        assert _out(driver, TimeWindowedSerde(S, 10)) == []
        assert _dropped(driver) == 1
        _pipe(driver, [("a", 40)])
        assert _out(driver, TimeWindowedSerde(S, 10)) == [
            (_tw("a", 10, 20), 4, 16),
            (_tw("a", 20, 30), 1, 24),
        ]


def test_emit_on_window_close_for_hopping_sliding_and_session_windows() -> None:
    topology, _ = _count_topology(
        TimeWindows.of_size_with_no_grace(10).advance_by(5), EmitStrategy.on_window_close()
    )
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 7), ("a", 12), ("a", 30)])
        assert _out(driver, TimeWindowedSerde(S, 10)) == [
            (_tw("a", 0, 10), 1, 7),
            (_tw("a", 5, 15), 2, 12),
            (_tw("a", 10, 20), 1, 12),
        ]
    topology, _ = _count_topology(
        SlidingWindows.of_time_difference_with_no_grace(10), EmitStrategy.on_window_close()
    )
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 20), ("a", 25)])
        # [10,20] (inclusive end) closes once 20 < stream time
        assert _out(driver, TimeWindowedSerde(S, 10)) == [(_tw("a", 10, 20), 1, 20)]
        _pipe(driver, [("a", 31)])
        assert _out(driver, TimeWindowedSerde(S, 10)) == [(_tw("a", 15, 25), 2, 25)]
        _pipe(driver, [("a", 40)])
        # [21,31] is 20's right window *and* 31's left window: one window, emitted once
        assert _out(driver, TimeWindowedSerde(S, 10)) == [
            (_tw("a", 21, 31), 2, 31),
            (_tw("a", 26, 36), 1, 31),
        ]
        _pipe(driver, [("a", 100)])
        # 100's writes move the store's retention (2 * 10 ms) past [30,40] and [32,42], which
        # close at this record too: as in Kafka, expired windows are not emitted
        # (KStreamSlidingWindowAggregateTest.testAggregateRandomInput)
        assert _out(driver, TimeWindowedSerde(S, 10)) == []
    topology, _ = _count_topology(
        SessionWindows.of_inactivity_gap_with_no_grace(5), EmitStrategy.on_window_close()
    )
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 0), ("a", 10)])
        # a session closes when end < stream time - gap - grace: [0,0] at stream time 10
        assert _out(driver, SessionWindowedSerde(S)) == [(_sw("a", 0, 0), 1, 0)]
        _pipe(driver, [("a", 6), ("b", 15)])
        assert _out(driver, SessionWindowedSerde(S)) == []  # [6,10] closes once 10 < stream time - 5
        _pipe(driver, [("b", 16)])
        assert _out(driver, SessionWindowedSerde(S)) == [(_sw("a", 6, 10), 2, 10)]


# ---------------------------------------------------------------------------- wall-clock closing


def test_wall_clock_close_emits_final_results_without_new_records() -> None:
    emit = EmitStrategy.on_window_close(wall_clock_after_ms=1_000)
    topology, _ = _count_topology(TimeWindows.of_size_with_no_grace(10), emit)
    with TopologyTestDriver(topology, initial_wall_clock_ms=0) as driver:
        _pipe(driver, [("a", 3), ("a", 5)])
        driver.advance_wall_clock_time(999)  # not idle for 1 s yet
        assert _out(driver, TimeWindowedSerde(S, 10)) == []
        driver.advance_wall_clock_time(1)
        # idle 1 s -> stream time 5 + 1000 ms: [0,10) has closed by wall clock
        assert _out(driver, TimeWindowedSerde(S, 10)) == [(_tw("a", 0, 10), 2, 5)]
        driver.advance_wall_clock_time(60_000)
        assert _out(driver, TimeWindowedSerde(S, 10)) == []  # each window exactly once
        # the advanced stream time stays: a record for the closed window is now late
        _pipe(driver, [("a", 8)])
        assert _dropped(driver) == 1


def test_wall_clock_close_does_not_act_while_input_flows() -> None:
    emit = EmitStrategy.on_window_close(wall_clock_after_ms=1_000)
    topology, _ = _count_topology(TimeWindows.of_size_with_no_grace(10_000), emit)
    with TopologyTestDriver(topology) as driver:
        topic = driver.create_input_topic("in", S, S)
        for i in range(5):
            topic.pipe_input("a", "v", 100 + i)
            driver.advance_wall_clock_time(600)  # a record every 600 ms: never idle for 1 s
        assert _out(driver, TimeWindowedSerde(S, 10_000)) == []
        driver.advance_wall_clock_time(10_000)  # idle: stream time 104 + 10 s closes [0, 10 s)
        assert _out(driver, TimeWindowedSerde(S, 10_000)) == [(_tw("a", 0, 10_000), 5, 104)]
