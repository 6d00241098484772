"""``KTable.suppress``: final results per window, time limits, bounded buffers, restarts.

Driver tests follow Kafka Streams' ``KTableSuppressProcessor`` semantics case by case; the
broker tests check what the driver cannot: the buffer (and the emit-final index of
``EmitStrategy.on_window_close()``) survives losing the local state, restored from its
changelog, and nothing is emitted twice.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from platform_streams.dsl import Consumed, Materialized, Produced, StreamsBuilder
from platform_streams.dsl.emit_strategy import EmitStrategy
from platform_streams.dsl.suppress import BufferConfig, Suppressed
from platform_streams.dsl.windowed_serdes import SessionWindowedSerde, TimeWindowedSerde
from platform_streams.dsl.windows import SessionWindows, SlidingWindows, TimeWindows
from platform_streams.errors import StreamsError, TopologyError
from platform_streams.kafka import KafkaAdmin
from platform_streams.serde import Long, String
from platform_streams.state.windowed import SessionWindow, TimeWindow, Windowed
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology import Topology
from tests.integration.support_apps import app_config, read_to_end, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce

S, L = String(), Long()
CONSUMED = Consumed(key_serde=S, value_serde=S)
FINAL = Suppressed.until_window_closes(BufferConfig.unbounded())


def _tw(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, TimeWindow(start, end))


def _windowed_count(
    windows: Any, suppressed: Suppressed = FINAL, emit: EmitStrategy | None = None
) -> Topology:
    builder = StreamsBuilder()
    windowed = builder.stream("in", CONSUMED).group_by_key().windowed_by(windows)
    if emit is not None:
        windowed = windowed.emit_strategy(emit)
    table = windowed.count(materialized=Materialized.as_("counts"))
    if emit is None:
        table = table.suppress(suppressed)
    table.to_stream().to("out")
    return builder.build()


def _pipe(driver: TopologyTestDriver, records: list[tuple[str, int]], topic: str = "in") -> None:
    input_topic = driver.create_input_topic(topic, S, S)
    for key, timestamp in records:
        input_topic.pipe_input(key, "v", timestamp)


def _out(driver: TopologyTestDriver, key_serde: Any = None) -> list[tuple[Any, Any, int]]:
    topic = driver.create_output_topic("out", key_serde or TimeWindowedSerde(S, 10), L)
    return [(r.key, r.value, r.timestamp) for r in topic.read_records_to_list()]


# ---------------------------------------------------------------------------- final results


def test_until_window_closes_emits_each_window_once_after_end_plus_grace() -> None:
    with TopologyTestDriver(_windowed_count(TimeWindows.of_size_and_grace(10, 5))) as driver:
        _pipe(driver, [("a", 1), ("a", 4), ("b", 9), ("a", 12), ("a", 14)])
        assert _out(driver) == []  # intermediate updates are suppressed
        _pipe(driver, [("a", 15)])  # stream time 15 = end 10 + grace 5
        assert _out(driver) == [(_tw("a", 0, 10), 2, 4), (_tw("b", 0, 10), 1, 9)]
        _pipe(driver, [("a", 7), ("b", 18), ("a", 24)])  # 7 is late (dropped upstream)
        assert _out(driver) == []
        _pipe(driver, [("a", 25)])
        assert _out(driver) == [(_tw("a", 10, 20), 3, 15), (_tw("b", 10, 20), 1, 18)]
        # the state store keeps every update (it is not suppressed)
        assert driver.get_window_store("counts").fetch("a", 20) == 2


def test_suppress_gives_the_same_final_results_as_emit_on_window_close() -> None:
    records = [("a", 1), ("b", 3), ("a", 8), ("a", 11), ("b", 13), ("a", 2), ("c", 27), ("a", 31), ("b", 50)]
    windows = TimeWindows.of_size_and_grace(10, 3).advance_by(5)
    with TopologyTestDriver(_windowed_count(windows)) as driver:
        _pipe(driver, records)
        suppressed = _out(driver)
    with TopologyTestDriver(_windowed_count(windows, emit=EmitStrategy.on_window_close())) as driver:
        _pipe(driver, records)
        emitted = _out(driver)
    assert suppressed == emitted
    assert len(suppressed) == len({key for key, _, _ in suppressed})  # once per window


def test_sliding_window_final_results_wait_for_the_inclusive_end() -> None:
    with TopologyTestDriver(_windowed_count(SlidingWindows.of_time_difference_with_no_grace(10))) as driver:
        _pipe(driver, [("a", 20)])
        _pipe(driver, [("b", 20)])  # stream time 20: [10,20] still accepts records at 20
        assert _out(driver) == []
        _pipe(driver, [("a", 20)])
        _pipe(driver, [("b", 21)])
        assert _out(driver) == [(_tw("a", 10, 20), 2, 20), (_tw("b", 10, 20), 1, 20)]


def test_session_final_results_drop_the_tombstones_of_merged_sessions() -> None:
    topology = _windowed_count(SessionWindows.of_inactivity_gap_and_grace(5, 10))
    with TopologyTestDriver(topology) as driver:
        _pipe(driver, [("a", 0), ("a", 10), ("a", 5), ("b", 20)])
        assert _out(driver, SessionWindowedSerde(S)) == []
        _pipe(driver, [("b", 25)])  # sessions close at end + gap + grace <= stream time
        assert _out(driver, SessionWindowedSerde(S)) == [(Windowed("a", SessionWindow(0, 10)), 3, 10)]


def test_final_results_after_a_filter_find_the_windows_upstream() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", CONSUMED)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .count()
        .filter(lambda key, count: count >= 2)
        .suppress(FINAL)
        .to_stream()
        .to("out", Produced(key_serde=TimeWindowedSerde(S, 10), value_serde=L))
    )
    with TopologyTestDriver(builder.build()) as driver:
        _pipe(driver, [("a", 1), ("a", 3), ("b", 4), ("c", 20)])
        # suppress asks its parent for old values (Kafka's KTableSuppressProcessorSupplier), so the
        # filter drops updates that were and stay filtered out (b, c's first): none reaches the
        # buffer, whose stream time therefore stays at 3
        assert _out(driver) == []
        _pipe(driver, [("c", 21)])  # c's count 2 passes: stream time 21 closes a's window
        assert _out(driver) == [(_tw("a", 0, 10), 2, 3)]


def test_until_window_closes_needs_a_windowed_table() -> None:
    builder = StreamsBuilder()
    table = builder.stream("in", CONSUMED).group_by_key().count()
    with pytest.raises(TopologyError, match="windowed"):
        table.suppress(FINAL)
    with pytest.raises(ValueError, match="strict"):
        Suppressed.until_window_closes(BufferConfig.max_records(10))


def test_suppress_node_and_store_names_follow_kafka_streams() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", CONSUMED)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .count()
        .suppress(FINAL)
        .to_stream()
        .to("out")
    )
    text = str(builder.build().describe())
    assert "Processor: KTABLE-SUPPRESS-0000000003 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000004])" in text
    named = StreamsBuilder()
    (
        named.stream("in", CONSUMED)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10))
        .count()
        .suppress(FINAL.with_name("final"))
        .to_stream()
        .to("out")
    )
    assert "Processor: final (stores: [final-store])" in str(named.build().describe())


# ---------------------------------------------------------------------------- time limits, bounds


def _table_suppress(suppressed: Suppressed) -> Topology:
    builder = StreamsBuilder()
    builder.table("in", CONSUMED).suppress(suppressed).to_stream().to(
        "out", Produced(key_serde=S, value_serde=S)
    )
    return builder.build()


def _table_out(driver: TopologyTestDriver) -> list[tuple[Any, Any, int]]:
    topic = driver.create_output_topic("out", S, S)
    return [(r.key, r.value, r.timestamp) for r in topic.read_records_to_list()]


def test_until_time_limit_emits_the_latest_value_after_the_first_update_plus_limit() -> None:
    with TopologyTestDriver(
        _table_suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
    ) as driver:
        topic = driver.create_input_topic("in", S, S)
        topic.pipe_input("k1", "a", 0)
        topic.pipe_input("k1", "b", 5)  # replaces "a"; the timer still runs from 0
        topic.pipe_input("k2", "x", 6)
        assert _table_out(driver) == []
        topic.pipe_input("k1", "c", 10)  # stream time 10 = 0 + 10: k1 goes out, latest value
        assert _table_out(driver) == [("k1", "c", 10)]
        topic.pipe_input("k1", None, 12)  # a delete is buffered too (time limits keep tombstones)
        topic.pipe_input("k3", "y", 22)
        assert _table_out(driver) == [("k2", "x", 6), ("k1", None, 12)]


def test_bounded_buffer_emits_early_when_full() -> None:
    suppressed = Suppressed.until_time_limit(1_000, BufferConfig.max_records(2))
    with TopologyTestDriver(_table_suppress(suppressed)) as driver:
        topic = driver.create_input_topic("in", S, S)
        for i, key in enumerate(["k1", "k2", "k1", "k3", "k4"]):
            topic.pipe_input(key, f"v{i}", i)
        # k3 makes 3 keys > 2: the oldest (k1, its latest value) goes out early; k4 pushes out k2
        assert _table_out(driver) == [("k1", "v2", 2), ("k2", "v1", 1)]


def test_bounded_buffer_by_bytes_emits_early_when_full() -> None:
    suppressed = Suppressed.until_time_limit(1_000, BufferConfig.max_bytes(60))
    with TopologyTestDriver(_table_suppress(suppressed)) as driver:
        topic = driver.create_input_topic("in", S, S)
        topic.pipe_input("k1", "x" * 10, 0)
        assert _table_out(driver) == []
        topic.pipe_input("k2", "y" * 10, 1)
        assert _table_out(driver) == [("k1", "x" * 10, 0)]


def test_strict_buffer_shuts_down_when_full() -> None:
    suppressed = Suppressed.until_time_limit(1_000, BufferConfig.max_records(1).shut_down_when_full())
    with TopologyTestDriver(_table_suppress(suppressed)) as driver:
        topic = driver.create_input_topic("in", S, S)
        topic.pipe_input("k1", "a", 0)
        with pytest.raises(StreamsError, match=r"exceeded its max capacity. Currently \[2/1\] records"):
            topic.pipe_input("k2", "b", 1)


# ---------------------------------------------------------------------------- wall clock


def test_wall_clock_close_emits_final_results_when_input_stops() -> None:
    suppressed = FINAL.with_wall_clock_close(2_000)
    with TopologyTestDriver(_windowed_count(TimeWindows.of_size_and_grace(10, 5), suppressed)) as driver:
        _pipe(driver, [("a", 1), ("a", 4), ("b", 12)])
        driver.advance_wall_clock_time(1_000)
        assert _out(driver) == []
        driver.advance_wall_clock_time(1_000)  # idle 2 s: stream time 12 + 2000 closes everything
        assert _out(driver) == [(_tw("a", 0, 10), 2, 4), (_tw("b", 10, 20), 1, 12)]
        driver.advance_wall_clock_time(10_000)
        assert _out(driver) == []


def test_until_time_limit_with_wall_clock_close() -> None:
    suppressed = Suppressed.until_time_limit(5_000, BufferConfig.unbounded()).with_wall_clock_close(1_000)
    with TopologyTestDriver(_table_suppress(suppressed)) as driver:
        topic = driver.create_input_topic("in", S, S)
        topic.pipe_input("k1", "a", 100)
        driver.advance_wall_clock_time(4_000)
        assert _table_out(driver) == []
        driver.advance_wall_clock_time(1_000)  # 100 + 5000 of idle wall time
        assert _table_out(driver) == [("k1", "a", 100)]


# ---------------------------------------------------------------------------- restarts (broker)


def _restart_app(source: str, sink: str, *, emit_final: bool) -> StreamsBuilder:
    builder = StreamsBuilder()
    windowed = (
        builder.stream(source, CONSUMED).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
    )
    if emit_final:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    table = windowed.count(materialized=Materialized.as_("counts"))
    if not emit_final:
        table = table.suppress(FINAL.with_name("final"))
    table.to_stream().to(sink, Produced(key_serde=TimeWindowedSerde(S, 10), value_serde=L))
    return builder


@pytest.mark.broker
@pytest.mark.parametrize("emit_final", [False, True], ids=["suppress", "emit-final"])
def test_final_results_survive_losing_local_state(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, emit_final: bool
) -> None:
    source, sink = new_topic(admin, 1, "final-in"), new_topic(admin, 1, "final-out")
    config = app_config(bootstrap_servers, tmp_path / "state")
    app = _restart_app(source, sink, emit_final=emit_final)
    windowed = TimeWindowedSerde(S, 10)

    def outputs() -> list[tuple[Any, int]]:
        """Everything written (exact once the app is stopped)."""
        return [
            (windowed.deserialize(r.key), L.deserialize(r.value))
            for r in read_to_end(bootstrap_servers, sink, 1)
        ]

    def written(count: int) -> bool:
        return len(consume_all(bootstrap_servers, sink, count, timeout_s=1)) >= count

    # 1. window [0,10) gets two records and [10,20) one: [0,10) closes and is emitted once
    produce(bootstrap_servers, source, [("a", "x")] * 3, timestamp_ms=[1, 4, 12])
    with running_app(app, config):
        wait_until(lambda: written(1), 30, "the first final result")
    assert outputs() == [(_tw("a", 0, 10), 2)]

    # 2. the local state is lost: the buffered/pending [10,20) is restored from its changelog
    shutil.rmtree(Path(config.state_dir) / config.application_id)
    produce(bootstrap_servers, source, [("a", "x")], timestamp_ms=25)
    with running_app(app, config):
        wait_until(lambda: written(2), 30, "the second final result")
    assert outputs() == [(_tw("a", 0, 10), 2), (_tw("a", 10, 20), 1)]
