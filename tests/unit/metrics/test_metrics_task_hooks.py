"""Punctuation, record lateness and record-cache reads, measured on real tasks.

A TopologyTestDriver runs the tasks; a recorder watches them as it watches a worker's, and a
scrape shows what Prometheus would get. Lateness and cache reads are DEBUG metrics: at INFO
the tasks must not even measure them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from platform_streams import State, StreamsBuilder, StreamsConfig, Topology
from platform_streams.dsl import Consumed, Materialized
from platform_streams.dsl.windows import TimeWindows
from platform_streams.errors import ProcessorError
from platform_streams.metrics import StreamsMetrics
from platform_streams.metrics.recorders import ThreadRecorder
from platform_streams.processor import Processor, PunctuationType, Record
from platform_streams.runtime.workers.worker import WorkerState
from platform_streams.serde import Integer, String
from platform_streams.state.cache import RecordCache
from platform_streams.testing import TopologyTestDriver
from tests.support.runtime_views import FakeWorker

S, INT = String(), Integer()
CONFIG: dict[str, Any] = {
    "application_id": "hooks",
    "bootstrap_servers": "x:1",
    "default_key_serde": "string",
    "default_value_serde": "integer",
}


class Punctuating(Processor):
    """A stream-time and a wall-clock punctuator, each counting its calls (or failing)."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def init(self, context: Any) -> None:
        super().init(context)
        context.schedule(10, PunctuationType.STREAM_TIME, self.tick)
        context.schedule(100, PunctuationType.WALL_CLOCK_TIME, self.tick)

    def process(self, record: Record) -> None:
        pass

    def tick(self, timestamp: int) -> None:
        if self.fail:
            raise RuntimeError("boom")
        self.calls += 1


def _punctuating(fail: bool = False) -> Topology:
    topology = Topology()
    topology.add_source("source", "in")
    topology.add_processor("proc", lambda: Punctuating(fail), "source")
    return topology


def _counting() -> Topology:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=INT)).group_by_key().count(
        materialized=Materialized.as_("counts")
    )
    return builder.build()


def _watched(driver: TopologyTestDriver, level: str) -> tuple[StreamsMetrics, ThreadRecorder]:
    """A metrics registry whose one worker runs the driver's tasks (hooks set as on RUNNING)."""
    config = StreamsConfig(**{**CONFIG, "metrics_recording_level": level})
    worker = FakeWorker(
        name="hooks-StreamThread-1",
        state=WorkerState.RUNNING,
        tasks={task.task_id: task for task in driver._tasks},
        processed_total=0,
        record_cache=RecordCache(1000),
        consumer=None,
        collector=None,
        failure=None,
    )
    streams = SimpleNamespace(
        config=config, state=lambda: State.RUNNING, workers=[worker], standbys=None, coordinator=None
    )
    metrics = StreamsMetrics(streams)
    recorder = metrics.attach_worker(worker)
    recorder.sync_tasks()
    return metrics, recorder


def _samples(metrics: StreamsMetrics) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name -> (sorted labels without the base ones) -> value."""
    body, _ = metrics.render()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            labels = tuple(
                sorted((k, v) for k, v in sample.labels.items() if k not in ("application_id", "client_id"))
            )
            out.setdefault(sample.name, {})[labels] = sample.value
    return out


def test_every_punctuator_call_is_counted_and_timed_stream_time_and_wall_clock() -> None:
    with TopologyTestDriver(_punctuating(), {**CONFIG, "application_id": "punct"}) as driver:
        metrics, recorder = _watched(driver, "INFO")
        source = driver.create_input_topic("in", S, INT)
        for ts in (0, 5, 10, 25):  # stream-time punctuations at 0, 10 and 20
            source.pipe_input("k", 1, timestamp_ms=ts)
        driver.advance_wall_clock_time(100)  # one wall-clock punctuation
        processor = driver._tasks[0].graph.processors["proc"]
        calls = getattr(processor, "processor", processor).calls
        assert calls == 4
        assert recorder.punctuates == 4 and recorder.punctuate_latency.count == 4
        samples = _samples(metrics)
        thread = (("thread_id", "hooks-StreamThread-1"),)
        assert samples["kafka_streams_thread_punctuate_total"] == {thread: 4.0}
        assert samples["kafka_streams_thread_punctuate_latency_seconds_count"] == {thread: 4.0}
        assert 0 < samples["kafka_streams_thread_punctuate_latency_seconds_sum"][thread] < 1.0
        assert "kafka_streams_task_record_lateness_seconds_count" not in samples  # DEBUG only


def test_a_failing_punctuator_is_not_counted() -> None:
    with TopologyTestDriver(_punctuating(fail=True), {**CONFIG, "application_id": "failing"}) as driver:
        _, recorder = _watched(driver, "INFO")
        with pytest.raises(ProcessorError, match="boom"):
            driver.create_input_topic("in", S, INT).pipe_input("k", 1, timestamp_ms=0)
        assert recorder.punctuates == 0 and recorder.punctuate_latency.count == 0


def test_debug_records_lateness_and_cache_hits_and_misses_per_store() -> None:
    config = {**CONFIG, "application_id": "late", "metrics_recording_level": "DEBUG"}
    with TopologyTestDriver(_counting(), config) as driver:
        metrics, recorder = _watched(driver, "DEBUG")
        source = driver.create_input_topic("in", S, INT)
        source.pipe_input("a", 1, timestamp_ms=1_000)  # miss (empty cache); the put caches "a"
        source.pipe_input("a", 1, timestamp_ms=3_000)  # hit
        source.pipe_input("b", 1, timestamp_ms=500)  # 2.5 s late; miss
        source.pipe_input("a", 1, timestamp_ms=3_000)  # not late (equal to stream time); hit
        task = driver._tasks[0]
        stats = recorder.stores[(task.task_id, "counts")]
        assert stats.cache_reads is not None
        hits, misses = stats.cache_reads.hits, stats.cache_reads.misses
        assert (hits, misses) == (2, 2)
        lateness = recorder.lateness[task.task_id]
        assert lateness.count == 4 and lateness.sum == pytest.approx(2.5)
        samples = _samples(metrics)
        store = (
            ("store", "counts"),
            ("store_type", stats.store_type),
            ("task_id", str(task.task_id)),
            ("thread_id", "hooks-StreamThread-1"),
        )
        assert samples["kafka_streams_record_cache_hits_total"] == {store: float(hits)}
        assert samples["kafka_streams_record_cache_misses_total"] == {store: float(misses)}
        labels = (("task_id", str(task.task_id)), ("thread_id", "hooks-StreamThread-1"))
        assert samples["kafka_streams_task_record_lateness_seconds_count"] == {labels: 4.0}
        assert samples["kafka_streams_task_record_lateness_seconds_sum"][labels] == pytest.approx(2.5)


def test_info_tasks_measure_neither_lateness_nor_cache_reads() -> None:
    with TopologyTestDriver(_counting(), {**CONFIG, "application_id": "quiet"}) as driver:
        metrics, recorder = _watched(driver, "INFO")
        task = driver._tasks[0]
        assert task.on_record_lateness is None
        source = driver.create_input_topic("in", S, INT)
        source.pipe_input("a", 1, timestamp_ms=1_000)
        source.pipe_input("a", 1, timestamp_ms=500)
        assert recorder.lateness == {}
        assert all(stats.cache_reads is None for stats in recorder.stores.values())
        # the task's generated source code has no lateness step at INFO
        fused = task.graph.sources["in"]
        assert "_late" not in fused.__ps_source__  # type: ignore[attr-defined]
        samples = _samples(metrics)
        assert not any("record_cache_hits" in name or "lateness" in name for name in samples)


def test_debug_counts_cache_reads_of_a_window_store() -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=INT)).group_by_key().windowed_by(
        TimeWindows.of_size_with_no_grace(100)
    ).count(materialized=Materialized.as_("windowed"))
    config = {**CONFIG, "application_id": "win", "metrics_recording_level": "DEBUG"}
    with TopologyTestDriver(builder.build(), config) as driver:
        _, recorder = _watched(driver, "DEBUG")
        source = driver.create_input_topic("in", S, INT)
        for ts in (10, 20, 30):  # one window of "a": a miss, then hits
            source.pipe_input("a", 1, timestamp_ms=ts)
        stats = recorder.stores[(driver._tasks[0].task_id, "windowed")]
        assert stats.store_type.endswith("window-state") and stats.cache_reads is not None
        assert (stats.cache_reads.hits, stats.cache_reads.misses) == (2, 1)
