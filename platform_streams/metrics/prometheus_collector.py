"""The Prometheus collector: builds every family from the recorders at scrape time.

Families come from :data:`~platform_streams.metrics.catalog.CATALOG` only; a family of a
level above the client's ``metrics_recording_level`` is skipped, and one without samples
is left out. The scrape runs on the HTTP thread and only *reads* what the worker threads
wrote (ints, histogram buckets, dicts copied with ``list()``), so it needs no lock and
never touches a store or a consumer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from platform_streams.metrics.catalog import BASE_LABELS, ROCKSDB_PROPERTIES, Level, MetricSpec, by_name
from platform_streams.metrics.histogram import Histogram
from platform_streams.metrics.topic_metrics import TopicNodes, add_topic_series
from platform_streams.processor.async_runtime import AsyncRuntime, Durations
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.api import RuntimeView, WorkerState

if TYPE_CHECKING:
    from platform_streams.metrics.recorders import ThreadRecorder
    from platform_streams.metrics.streams_metrics import StreamsMetrics
    from platform_streams.query.service import InteractiveQueries
    from platform_streams.runtime.tasks.task import StreamTask

__all__ = ["StreamsCollector"]


class _Families:
    """Families of one scrape, created on first sample from their catalog spec."""

    def __init__(self, level: Level, base: list[str]) -> None:
        self.level = level
        self.base = base
        self.families: dict[str, Metric] = {}

    def _family(self, name: str) -> Metric | None:
        family = self.families.get(name)
        if family is not None:
            return family
        spec = by_name(name)
        if spec.level > self.level:
            return None
        family = self.families[name] = _new_family(spec)
        return family

    def add(self, name: str, labels: Sequence[str], value: float) -> None:
        family = self._family(name)
        if family is not None:
            family.add_metric([*self.base, *labels], value)  # type: ignore[attr-defined]

    def histogram(self, name: str, labels: Sequence[str], hist: Histogram) -> None:
        family = self._family(name)
        if family is not None:
            buckets, total = hist.cumulative()
            family.add_metric([*self.base, *labels], buckets, total)  # type: ignore[attr-defined]

    def one_hot(self, name: str, labels: Sequence[str], current: str, states: Sequence[str]) -> None:
        for state in states:
            self.add(name, [*labels, state], 1.0 if state == current else 0.0)


def _new_family(spec: MetricSpec) -> Metric:
    labels = list(spec.all_labels)
    if spec.kind == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=labels)
    if spec.kind == "histogram":
        return HistogramMetricFamily(spec.name, spec.help, labels=labels)
    if spec.kind == "info":
        return InfoMetricFamily(spec.name, spec.help, labels=list(BASE_LABELS))
    return GaugeMetricFamily(spec.name, spec.help, labels=labels)


def _histogram(durations: Durations) -> Histogram:
    """The async runtime's bucket counts as a :class:`Histogram` (same bounds), for the scrape."""
    hist = Histogram(durations.bounds)
    hist.counts = list(durations.counts)
    hist.sum = durations.sum
    return hist


class StreamsCollector(Collector):
    """Collects one client's metrics (registered in the client's own registry)."""

    def __init__(self, metrics: StreamsMetrics) -> None:
        self._metrics = metrics
        self._topic_nodes: TopicNodes | None = None

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        streams = metrics.streams
        config = streams.config
        fams = _Families(metrics.level, [config.application_id, config.effective_client_id])
        self._client(fams, metrics)
        if metrics.queries is not None:
            self._key_placement(fams, metrics.queries)
        for recorder in list(metrics.threads.values()):
            self._thread(fams, recorder)
        self._standbys(fams, streams)
        yield from fams.families.values()

    @staticmethod
    def _standbys(fams: _Families, streams: RuntimeView) -> None:
        """Standby tasks live on the client's standby updater thread, not on a worker."""
        updater = streams.standbys
        if updater is None:
            return
        thread = f"{streams.config.effective_client_id}-standby"
        for task_id, task in list(updater.tasks.items()):
            fams.add("kafka_streams_task_update", [thread, str(task_id)], task.applied)

    @staticmethod
    def _key_placement(fams: _Families, service: InteractiveQueries) -> None:
        """Source topics' key placement and the scatter-gather key queries it causes."""
        placement = service.placement
        misplaced = dict(placement.misplaced)  # a C-level copy: workers may add meanwhile
        for topic in sorted(placement.checked_topics | set(misplaced)):
            fams.add("kafka_streams_source_topic_murmur2_placed", [topic], 0.0 if topic in misplaced else 1.0)
        for topic, count in dict(placement.mismatches).items():
            fams.add("kafka_streams_source_topic_murmur2_mismatches", [topic], count)
        for store, count in list(service.scatter_queries.items()):
            fams.add("kafka_streams_store_key_query_scatter", [store], count)

    @staticmethod
    def _client(fams: _Families, metrics: StreamsMetrics) -> None:
        from platform_streams import __version__

        info = fams._family("kafka_streams_client")
        if info is not None:
            info.add_metric(fams.base, {"version": __version__})  # type: ignore[attr-defined]
        state = metrics.streams.state()
        fams.one_hot("kafka_streams_client_state", [], state.value, [s.value for s in type(state)])
        workers = list(metrics.streams.workers)
        fams.add(
            "kafka_streams_client_alive_stream_threads",
            [],
            sum(w.state is not WorkerState.DEAD for w in workers),
        )
        fams.add("kafka_streams_client_failed_stream_threads", [], metrics.failed_threads)
        coordinator = metrics.streams.coordinator
        if coordinator is not None:
            for role, tasks in coordinator.roles().items():
                fams.add("kafka_streams_client_assigned_tasks", [role], len(tasks))
            if coordinator.rebalance_latencies:
                fams.add(
                    "kafka_streams_client_rebalance_latency_seconds", [], coordinator.rebalance_latencies[-1]
                )
            fams.add("kafka_streams_client_probing_rebalances", [], coordinator.probing_rebalances)
        StreamsCollector._async(fams)

    @staticmethod
    def _async(fams: _Families) -> None:
        """The process's async processors (one runtime per process: every client of the process
        reports the same figures); nothing before the first async processor started one."""
        runtime = AsyncRuntime.current()
        if runtime is None:
            return
        stats = runtime.stats
        fams.add("kafka_streams_async_in_flight", [], runtime.in_flight)
        fams.add("kafka_streams_async_calls_completed", [], stats.completed)
        fams.add("kafka_streams_async_calls_failed", [], stats.failed)
        fams.add("kafka_streams_async_call_retries", [], stats.retried)
        fams.add("kafka_streams_async_call_timeouts", [], stats.timed_out)
        fams.histogram("kafka_streams_async_queue_wait_seconds", [], _histogram(stats.queue_wait))
        fams.histogram("kafka_streams_async_call_latency_seconds", [], _histogram(stats.call_latency))

    def _thread(self, fams: _Families, rec: ThreadRecorder) -> None:
        worker = rec.worker
        t = [rec.thread_id]
        fams.one_hot(
            "kafka_streams_thread_state", t, worker.state.value, [s.value for s in type(worker.state)]
        )
        fams.add("kafka_streams_thread_start_time_seconds", t, rec.start_time)
        fams.add("kafka_streams_thread_poll", t, rec.polls)
        fams.histogram("kafka_streams_thread_poll_latency_seconds", t, rec.poll_latency)
        fams.histogram("kafka_streams_thread_poll_records", t, rec.poll_records)
        fams.add("kafka_streams_thread_process", t, worker.processed_total)
        fams.histogram("kafka_streams_thread_process_latency_seconds", t, rec.process_latency)
        fams.histogram("kafka_streams_thread_process_records", t, rec.process_records)
        fams.add("kafka_streams_thread_commit", t, rec.commits)
        fams.histogram("kafka_streams_thread_commit_latency_seconds", t, rec.commit_latency)
        fams.add("kafka_streams_thread_punctuate", t, rec.punctuates)
        fams.histogram("kafka_streams_thread_punctuate_latency_seconds", t, rec.punctuate_latency)
        fams.add("kafka_streams_thread_task_created", t, rec.tasks_created)
        fams.add("kafka_streams_thread_task_closed", t, rec.tasks_closed)
        fams.add("kafka_streams_thread_rebalances", t, rec.rebalances)
        live = rec.live_tasks()
        fams.add("kafka_streams_thread_active_tasks", t, len(live))
        fams.add("kafka_streams_thread_rocksdb_open_stores", t, rec.rocksdb_open_stores)
        for client, values in list(rec.client_stats.items()):
            for suffix, figure in values.items():
                fams.add(f"kafka_streams_{suffix}", [*t, client], figure)
        for (topic, partition), lag in list(rec.lag.items()):
            fams.add("kafka_streams_consumer_records_lag", [*t, topic, str(partition)], lag)
        cache = worker.record_cache
        fams.add("kafka_streams_record_cache_size_bytes", t, cache.size_bytes)
        fams.add("kafka_streams_record_cache_evictions", t, cache.evictions)
        self._tasks(fams, rec, live)
        self._topics(fams, rec)
        for (task_id, node), hist in list(rec.e2e.items()):
            fams.histogram(
                "kafka_streams_processor_node_record_e2e_latency_seconds", [*t, str(task_id), node], hist
            )
        for (task_id, store), stats in list(rec.stores.items()):
            labels = [*t, str(task_id), store, stats.store_type]
            for operation, hist in list(stats.latencies.items()):
                fams.histogram(f"kafka_streams_state_{operation}_latency_seconds", labels, hist)
            reads = stats.cache_reads
            if reads is not None:
                fams.add("kafka_streams_record_cache_hits", labels, reads.hits)
                fams.add("kafka_streams_record_cache_misses", labels, reads.misses)
            for _ks_name, (prop, suffix) in ROCKSDB_PROPERTIES.items():
                value = stats.properties.get(prop)
                if value is not None:
                    fams.add(f"kafka_streams_state_{suffix}", labels, value)

    def _topics(self, fams: _Families, rec: ThreadRecorder) -> None:
        """Topic-level records (and bytes) in and out (KIP-613)."""
        worker = rec.worker
        nodes = self._topic_nodes
        if nodes is None:
            nodes = self._topic_nodes = TopicNodes(worker.plan, self._metrics.streams.config.application_id)
        add_topic_series(fams.add, rec.thread_id, nodes, worker.input_queues, worker.collector)

    @staticmethod
    def _tasks(fams: _Families, rec: ThreadRecorder, live: list[StreamTask]) -> None:
        t = rec.thread_id
        totals: dict[TaskId, list[int]] = {tid: list(base) for tid, base in list(rec.task_base.items())}
        buffered: dict[TaskId, int] = {}
        for task in live:
            entry = totals.setdefault(task.task_id, [0, 0, 0, 0])
            entry[0] += task.records_processed
            entry[1] += task.records_skipped
            entry[2] += task.records_dead_lettered
            entry[3] += task.records_dead_letters_truncated
            buffered[task.task_id] = task.queues.total_buffered()
        for task_id, (processed, dropped, dead_lettered, cut) in totals.items():
            labels = [t, str(task_id)]
            fams.add("kafka_streams_task_process", labels, processed)
            fams.add("kafka_streams_task_dropped_records", labels, dropped)
            fams.add("kafka_streams_task_dead_letter_records", labels, dead_lettered)
            fams.add("kafka_streams_task_dead_letter_truncated_records", labels, cut)
        # Production errors reported to the worker's producer (delivery reports, exactly-once
        # commits) cannot be traced to the task that sent the record: empty task_id.
        collector = rec.worker.collector
        if collector is not None and collector.records_skipped:
            fams.add("kafka_streams_task_dropped_records", [t, ""], collector.records_skipped)
        handler = collector.production_handler if collector is not None else None
        if handler is not None and handler.dead_lettered:
            fams.add("kafka_streams_task_dead_letter_records", [t, ""], handler.dead_lettered)
        if handler is not None and handler.dead_letters_truncated:
            cut = handler.dead_letters_truncated
            fams.add("kafka_streams_task_dead_letter_truncated_records", [t, ""], cut)
        for task_id, count in buffered.items():
            fams.add("kafka_streams_task_input_buffer_records", [t, str(task_id)], count)
        for task_id, hist in list(rec.lateness.items()):
            fams.histogram("kafka_streams_task_record_lateness_seconds", [t, str(task_id)], hist)
        restore = rec.restore
        for task_id, restored in list(restore.restored.items()):
            labels = [t, str(task_id)]
            fams.add("kafka_streams_task_restore", labels, restored)
            fams.add("kafka_streams_task_restore_remaining_records", labels, restore.remaining(task_id))
            fams.add("kafka_streams_task_restoring", labels, 1.0 if task_id in restore.restoring else 0.0)
        for task_id, (restores, keys, seconds) in list(restore.snapshots.items()):
            labels = [t, str(task_id)]
            fams.add("kafka_streams_task_snapshot_restore", labels, restores)
            fams.add("kafka_streams_task_snapshot_restore_records", labels, keys)
            fams.add("kafka_streams_task_snapshot_restore_seconds", labels, seconds)
