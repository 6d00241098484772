"""The metric catalog, the histogram accumulator, level gating and the docs' mapping table."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from platform_streams import State, StreamsConfig
from platform_streams.metrics import CATALOG, Level, StreamsMetrics, mapping_table
from platform_streams.metrics.histogram import Histogram
from platform_streams.runtime.workers.worker import WorkerState
from platform_streams.state.cache import RecordCache
from tests.support.runtime_views import FakeWorker

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def test_names_are_unique_prefixed_and_documented_with_kafka_streams_groups() -> None:
    names = [spec.name for spec in CATALOG]
    assert len(names) == len(set(names))
    for spec in CATALOG:
        assert spec.name.startswith("kafka_streams_"), spec.name
        assert spec.help and spec.group
        assert not spec.name.endswith("_total"), "counters get _total when exported"
        if spec.kind == "histogram":
            assert spec.buckets and spec.name.endswith(("_seconds", "_records")), spec.name
    groups = {spec.group for spec in CATALOG}
    for group in (
        "stream-metrics",
        "stream-thread-metrics",
        "stream-task-metrics",
        "stream-processor-node-metrics",
        "stream-state-metrics",
        "stream-record-cache-metrics",
    ):
        assert group in groups


def test_docs_mapping_table_is_generated_from_the_catalog() -> None:
    text = DOC.read_text(encoding="utf-8")
    begin, end = "<!-- mapping:begin -->\n", "<!-- mapping:end -->"
    table = text.split(begin, 1)[1].split(end, 1)[0]
    assert table == mapping_table(), "regenerate docs/metrics.md: python -m platform_streams.metrics.docs"


def test_histogram_buckets_are_cumulative_and_consistent() -> None:
    hist = Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 3.0):
        hist.observe(value)
    buckets, total = hist.cumulative()
    assert buckets == [("0.1", 2), ("1.0", 3), ("+Inf", 4)]
    assert total == pytest.approx(3.65) and hist.count == 4


def _fake_streams(level: str) -> Any:
    config = StreamsConfig(application_id="app", bootstrap_servers="x:1", metrics_recording_level=level)
    worker = FakeWorker(
        name="app-StreamThread-1",
        state=WorkerState.RUNNING,
        tasks={},
        processed_total=42,
        record_cache=RecordCache(1000),
        consumer=None,
        # production errors skipped (CONTINUE)
        collector=SimpleNamespace(
            records_skipped=3, production_handler=None, produced={}, produced_bytes=None
        ),
        failure=None,
    )
    return SimpleNamespace(
        config=config, state=lambda: State.RUNNING, workers=[worker], standbys=None, coordinator=None
    )


def _scrape(metrics: StreamsMetrics) -> dict[str, Any]:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
def test_scrape_of_a_worker_has_labels_and_respects_the_recording_level(level: str) -> None:
    streams = _fake_streams(level)
    metrics = StreamsMetrics(streams)
    assert metrics.level is Level[level]
    worker = streams.workers[0]
    recorder = metrics.attach_worker(worker)
    assert worker.observer is recorder and worker.state_lifecycle.listener is recorder.restore
    recorder.on_loop(0.0, 0.002, 10, 10)
    recorder.on_commit(0.0)
    families = _scrape(metrics)
    process = families["kafka_streams_thread_process"]
    assert [(s.labels, s.value) for s in process.samples] == [
        ({"application_id": "app", "client_id": streams.config.effective_client_id,
          "thread_id": "app-StreamThread-1"}, 42.0)
    ]  # fmt: skip
    poll = families["kafka_streams_thread_poll_latency_seconds"]
    count = [s for s in poll.samples if s.name.endswith("_count")]
    assert count[0].value == 1.0
    dropped = families["kafka_streams_task_dropped_records"]
    assert [(s.labels["task_id"], s.value) for s in dropped.samples] == [("", 3.0)], "the producer's, no task"
    state = {s.labels["state"]: s.value for s in families["kafka_streams_client_state"].samples}
    assert state["RUNNING"] == 1.0 and state["ERROR"] == 0.0
    assert "process_cpu_seconds" in families  # the process collector rides along
    debug_only = [spec.name for spec in CATALOG if spec.level is Level.DEBUG]
    assert debug_only
    if level == "INFO":
        assert not any(name in families for name in debug_only)
