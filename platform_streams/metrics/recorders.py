"""Recorders: what the worker thread writes so that a scrape can read it.

One :class:`ThreadRecorder` per worker, attached as the worker's observer and restore
listener. Everything it records is written by the worker thread only (plain ints and
:class:`Histogram` objects), and read by the scrape thread, so the hot path takes no
lock. Per-record work stays where it already is: tasks count their records, the
recorder reads those counters at scrape time. Per loop iteration it adds a poll and a
processing-pass observation; every 100 ms it samples end-to-end latency per task;
every second (on the worker thread, so no store or consumer is touched concurrently)
it refreshes the slow gauges: consumer lag from the fetch-side high watermark and
RocksDB properties. Each task calls back per punctuator call (rare); at DEBUG only, tasks
also report record lateness per record and caching stores count their read hits and misses
(hooks installed when the recorder first sees a task, as the metered stores' latency hook).

Task counters survive a task being closed and recreated (every eager rebalance does
that): a closed task's final counts are carried into a per-task-id base.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any

from platform_streams.kafka import TopicPartition, high_watermark_from_fetch
from platform_streams.metrics.catalog import ROCKSDB_PROPERTIES, STORE_OPERATIONS, Level
from platform_streams.metrics.histogram import (
    E2E_LATENCY_BUCKETS_S,
    LATENCY_BUCKETS_S,
    RECORD_COUNT_BUCKETS,
    Histogram,
)
from platform_streams.metrics.librdkafka import parse_statistics
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.observer import WorkerObserver
from platform_streams.state.api import SessionStore, WindowStore
from platform_streams.state.restore import StateRestoreListener
from platform_streams.state.wrappers.base import CacheReads, CachingLayer, WrappedStore, innermost
from platform_streams.state.wrappers.metered import MeteredStore

if TYPE_CHECKING:
    from platform_streams.runtime.api import WorkerView

__all__ = ["RestoreRecorder", "StoreStats", "ThreadRecorder"]

log = logging.getLogger(__name__)

_E2E_SAMPLE_S = 0.1
_REFRESH_S = 1.0
_ROCKSDB_PROPERTY_NAMES = tuple(prop for prop, _ in ROCKSDB_PROPERTIES.values())


@dataclass(slots=True)
class StoreStats:
    """What is known about one store of one task."""

    store_type: str
    latencies: dict[str, Histogram] = field(default_factory=dict)
    properties: dict[str, int] = field(default_factory=dict)
    #: record-cache hits/misses (DEBUG, caching stores only); shared by every incarnation of
    #: the store (a recreated task's caching layer counts on), so the counters never go back
    cache_reads: CacheReads | None = None


def store_type_label(store: Any) -> str:
    """Kafka Streams' store tag stem: ``rocksdb-state``, ``in-memory-window-state`` ..."""
    backend = getattr(innermost(store), "backend", None)
    persistent = bool(getattr(backend, "persistent", getattr(store, "persistent", False)))
    kind = (
        "window-" if isinstance(store, WindowStore) else "session-" if isinstance(store, SessionStore) else ""
    )
    return f"{'rocksdb' if persistent else 'in-memory'}-{kind}state"


def _layer(store: Any, kind: type[Any]) -> Any:
    """The first layer of type ``kind`` in ``store``'s wrapper stack, or None."""
    while store is not None:
        if isinstance(store, kind):
            return store
        store = store.wrapped if isinstance(store, WrappedStore) else None
    return None


class ThreadRecorder(WorkerObserver):
    """The metrics of one worker (see the module docstring)."""

    def __init__(self, worker: WorkerView, level: Level) -> None:
        self.worker = worker
        self.thread_id: str = worker.name
        self.level = level
        self.start_time = time.time()
        self.polls = 0
        self.poll_latency = Histogram(LATENCY_BUCKETS_S)
        self.poll_records = Histogram(RECORD_COUNT_BUCKETS)
        self.process_latency = Histogram(LATENCY_BUCKETS_S)
        self.process_records = Histogram(RECORD_COUNT_BUCKETS)
        self.commits = 0
        self.commit_latency = Histogram(LATENCY_BUCKETS_S)
        self.punctuates = 0
        self.punctuate_latency = Histogram(LATENCY_BUCKETS_S)
        #: task id -> record lateness (DEBUG)
        self.lateness: dict[TaskId, Histogram] = {}
        self.tasks_created = 0
        self.tasks_closed = 0
        self.rebalances = 0
        #: client (consumer/producer) -> librdkafka statistics gauges (statistics.interval.ms)
        self.client_stats: dict[str, dict[str, float]] = {}
        #: (task id, source node) -> e2e latency
        self.e2e: dict[tuple[TaskId, str], Histogram] = {}
        #: (topic, partition) -> lag, refreshed every second
        self.lag: dict[tuple[str, int], int] = {}
        #: RocksDB stores open in the worker's active tasks (at the last refresh)
        self.rocksdb_open_stores = 0
        #: (task id, store) -> stats
        self.stores: dict[tuple[TaskId, str], StoreStats] = {}
        #: task id -> [processed, dropped, dead-lettered, dead letters cut] of closed task objects
        self.task_base: dict[TaskId, list[int]] = {}
        self.restore = RestoreRecorder(worker)
        self._known: dict[int, Any] = {}
        self._sampled: dict[int, int] = {}
        self._next_e2e = 0.0
        self._next_refresh = 0.0

    # ------------------------------------------------------------------ loop hooks

    def on_loop(self, started: float, polled: float, polled_records: int, processed: int) -> None:
        now = perf_counter()
        self.polls += 1
        self.poll_latency.observe(polled - started)
        self.poll_records.observe(polled_records)
        if processed:
            self.process_latency.observe(now - polled)
            self.process_records.observe(processed)
        if now >= self._next_e2e:
            self._next_e2e = now + _E2E_SAMPLE_S
            self._sample_e2e()
            if now >= self._next_refresh:
                self._next_refresh = now + _REFRESH_S
                self.refresh()

    def on_commit(self, started: float) -> None:
        self.commits += 1
        self.commit_latency.observe(perf_counter() - started)

    def on_client_statistics(self, client: str, document: str) -> None:
        try:
            self.client_stats[client] = parse_statistics(document)
        except (ValueError, TypeError, KeyError):  # metrics must never break processing
            log.debug("unreadable librdkafka statistics", exc_info=True)

    def on_punctuate(self, started: float) -> None:
        """A punctuator of one of the worker's tasks returned (the tasks' ``on_punctuate``)."""
        self.punctuates += 1
        self.punctuate_latency.observe(perf_counter() - started)

    # ------------------------------------------------------------------ sampling

    def _sample_e2e(self) -> None:
        now_ms = time.time() * 1000.0
        sampled = self._sampled
        for task in list(self.worker.tasks.values()):
            count = task.records_processed
            key = id(task)
            if sampled.get(key) == count or task.context.stream_time < 0:
                continue
            sampled[key] = count
            node = _source_node(task)
            hist = self.e2e.get((task.task_id, node))
            if hist is None:
                hist = self.e2e[(task.task_id, node)] = Histogram(E2E_LATENCY_BUCKETS_S)
            hist.observe(max(0.0, (now_ms - task.context.stream_time) / 1000.0))

    def refresh(self) -> None:
        """Slow gauges: consumer lag and store properties (worker thread only)."""
        try:
            self._refresh_lag()
            self._refresh_stores()
        except Exception:  # metrics must never break processing
            log.debug("metrics refresh failed", exc_info=True)

    def _refresh_lag(self) -> None:
        consumer = self.worker.consumer
        if consumer is None:
            return
        lag: dict[tuple[str, int], int] = {}
        for task in list(self.worker.tasks.values()):
            for tp in task.partitions:
                high = high_watermark_from_fetch(consumer, TopicPartition(tp[0], tp[1]))
                if high is None:
                    continue
                done = task.consumed.get(tp)
                if done is not None:
                    position = done + 1
                else:
                    fetched = consumer.position([TopicPartition(tp[0], tp[1])])[0].offset
                    if fetched < 0:
                        continue
                    position = fetched - task.queues.buffered(tp)
                lag[tp] = max(0, high - position)
        self.lag = lag

    def _refresh_stores(self) -> None:
        open_stores = 0
        for task in list(self.worker.tasks.values()):
            for name, store in list(task.context.stores.items()):
                backend = getattr(innermost(store), "backend", None)
                read = getattr(backend, "property_values", None)
                if read is not None and getattr(backend, "is_open", False):
                    open_stores += 1
                stats = self.stores.get((task.task_id, name))
                if stats is None:
                    continue
                if read is not None:
                    stats.properties = read(_ROCKSDB_PROPERTY_NAMES)
        self.rocksdb_open_stores = open_stores

    # ------------------------------------------------------------------ tasks

    def sync_tasks(self, assigned: bool = False) -> None:
        """Account for tasks created/closed since the last call (on worker state changes)."""
        if assigned:
            self.rebalances += 1
        self._next_refresh = 0.0  # lag and store gauges for the new tasks at the next loop
        current = {id(task): task for task in list(self.worker.tasks.values())}
        for key, task in list(self._known.items()):
            if key not in current:
                self.tasks_closed += 1
                base = self.task_base.setdefault(task.task_id, [0, 0, 0, 0])
                base[0] += task.records_processed
                base[1] += task.records_skipped
                base[2] += task.records_dead_lettered
                base[3] += task.records_dead_letters_truncated
                del self._known[key]
                self._sampled.pop(key, None)
                self.restore.forget(task.task_id)
                for (task_id, _store), stats in self.stores.items():
                    if task_id == task.task_id:
                        stats.properties = {}  # gauges of a store no longer here go away
        for key, task in current.items():
            if key not in self._known:
                self.tasks_created += 1
                self._known[key] = task
                self._watch_task(task)
                self._watch_stores(task)

    def _watch_task(self, task: Any) -> None:
        task.on_punctuate = self.on_punctuate
        if self.level >= Level.DEBUG:
            hist = self.lateness.get(task.task_id)
            if hist is None:
                hist = self.lateness[task.task_id] = Histogram(E2E_LATENCY_BUCKETS_S)
            task.on_record_lateness = _lateness_hook(hist)

    def _watch_stores(self, task: Any) -> None:
        for name, store in list(task.context.stores.items()):
            stats = self.stores.get((task.task_id, name))
            if stats is None:
                stats = self.stores[(task.task_id, name)] = StoreStats(store_type_label(store))
            if self.level >= Level.DEBUG:
                metered: MeteredStore | None = _layer(store, MeteredStore)
                if metered is not None:
                    metered.set_metrics_hook(_latency_hook(stats.latencies))
                caching: CachingLayer | None = _layer(store, CachingLayer)
                if caching is not None:
                    if stats.cache_reads is None:
                        stats.cache_reads = CacheReads()
                    caching.reads = stats.cache_reads

    def live_tasks(self) -> list[Any]:
        return list(self._known.values())


def _latency_hook(latencies: dict[str, Histogram]) -> Any:
    """The metered store's hook: ``(store, operation, ns)`` -> that operation's histogram."""

    def hook(store_name: str, operation: str, latency_ns: int) -> None:
        hist = latencies.get(operation)
        if hist is None:
            if operation not in STORE_OPERATIONS:
                return
            hist = latencies[operation] = Histogram(LATENCY_BUCKETS_S)
        hist.observe(latency_ns / 1e9)

    return hook


def _lateness_hook(hist: Histogram) -> Any:
    """The task's record-lateness hook: milliseconds -> seconds into ``hist``."""
    observe = hist.observe

    def hook(lateness_ms: int) -> None:
        observe(lateness_ms / 1000.0)

    return hook


def _source_node(task: Any) -> str:
    """The task's (first) source node name: where e2e latency is attributed."""
    sources = getattr(task.sub, "sources_by_topic", None) or {}
    for node in sources.values():
        return str(node.name)
    return "source"


class RestoreRecorder(StateRestoreListener):
    """Restored record counts per task, and what each restoring task has left to restore.

    The worker's state lifecycle calls it for *active* restoration only (standby and warm-up
    tasks are updated by the standby updater, counted in ``update-total``), as Kafka
    Streams' ``restore-total`` / ``restore-remaining-records-total`` (KIP-869). The remaining
    count is, summed over the task's changelog partitions being restored, the fetch-side
    log end minus the next offset to apply: known from the first fetch of a partition on
    (never from ListOffsets, which some brokers answer wrongly), lowered after every applied batch, gone when
    the partition reached its end. Partitions of the task not started yet are not counted:
    restoration reads them one after another. Written on the worker thread, read by scrapes.
    """

    def __init__(self, worker: WorkerView) -> None:
        self._worker = worker
        self.restored: dict[TaskId, int] = {}
        #: task -> changelog partition -> [next offset to apply or None, log end or None]
        self.restoring: dict[TaskId, dict[tuple[str, int], list[int | None]]] = {}
        #: task -> [store partitions restored from a snapshot, keys ingested, seconds taken]
        self.snapshots: dict[TaskId, list[float]] = {}

    def _task(self, store_name: str, partition: int) -> TaskId:
        return TaskId(self._worker.plan.subtopology_of_store(store_name).id, partition)

    def remaining(self, task: TaskId) -> int:
        """Changelog records the task still has to restore (0 when it is not restoring)."""
        total = 0
        for position, end in list(self.restoring.get(task, {}).values()):
            if position is not None and end is not None and end > position:
                total += end - position
        return total

    def forget(self, task: TaskId) -> None:
        """The task was closed: a restore it left unfinished is not going on any more."""
        self.restoring.pop(task, None)

    def on_restore_start(
        self, store_name: str, tp: tuple[str, int], start_offset: int, end_offset_estimate: int | None
    ) -> None:
        task = self._task(store_name, tp[1])
        # keyed by partition: a retried or restarted restore replaces its earlier entry
        self.restoring.setdefault(task, {})[tp] = [start_offset if start_offset >= 0 else None, None]
        self.restored.setdefault(task, 0)

    def on_snapshot_restored(
        self, store_name: str, tp: tuple[str, int], snapshot_offset: int, num_records: int, seconds: float
    ) -> None:
        counts = self.snapshots.setdefault(self._task(store_name, tp[1]), [0, 0, 0.0])
        counts[0] += 1
        counts[1] += num_records
        counts[2] += seconds

    def on_log_end(self, store_name: str, tp: tuple[str, int], log_start: int, log_end: int) -> None:
        entry = self.restoring.get(self._task(store_name, tp[1]), {}).get(tp)
        if entry is not None:
            if entry[0] is None:
                entry[0] = log_start  # from the beginning: the log's first offset
            entry[1] = log_end

    def on_batch_restored(
        self, store_name: str, tp: tuple[str, int], batch_end_offset: int, num_restored: int
    ) -> None:
        task = self._task(store_name, tp[1])
        self.restored[task] = self.restored.get(task, 0) + num_restored
        entry = self.restoring.get(task, {}).get(tp)
        if entry is not None:
            entry[0] = batch_end_offset + 1

    def on_restore_end(self, store_name: str, tp: tuple[str, int], total_restored: int) -> None:
        task = self._task(store_name, tp[1])
        partitions = self.restoring.get(task)
        if partitions is not None:
            partitions.pop(tp, None)
            if not partitions:
                del self.restoring[task]
