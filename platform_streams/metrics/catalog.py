"""Every metric platform_streams exports, declared once, with its Kafka Streams counterpart.

Naming: Kafka Streams' JMX metric ``<group>:<name>`` becomes
``kafka_streams_<group short name>_<name with _ for ->`` with Prometheus conventions:
``-rate``/``-total`` pairs become one counter (``_total``; ``rate()`` gives the rate),
``-avg``/``-max`` latency pairs become one histogram in seconds (``_sum / _count`` gives
the average, ``histogram_quantile`` the tail), gauges keep their unit as a suffix. Tags
become labels: ``application_id`` and ``client_id`` on everything, plus ``thread_id``,
``task_id``, ``processor_node_id``, ``store`` where Kafka Streams has the tag.

Recording levels are Kafka Streams': a metric of level DEBUG is neither recorded nor
exported unless ``metrics_recording_level`` is DEBUG (or TRACE). The collector builds its
families from :data:`CATALOG` only, so an undeclared name cannot be exported, and
``docs/metrics.md`` is generated from it (a test keeps the two in sync).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

from platform_streams.metrics.histogram import E2E_LATENCY_BUCKETS_S, LATENCY_BUCKETS_S, RECORD_COUNT_BUCKETS
from platform_streams.metrics.librdkafka import STATISTICS
from platform_streams.processor.async_runtime import DURATION_BOUNDS_S

__all__ = [
    "BASE_LABELS",
    "CATALOG",
    "ROCKSDB_PROPERTIES",
    "STORE_OPERATIONS",
    "Level",
    "MetricSpec",
    "by_name",
    "mapping_table",
]


class Level(enum.IntEnum):
    """Kafka Streams' ``metrics.recording.level``."""

    INFO = 0
    DEBUG = 1
    TRACE = 2

    @classmethod
    def parse(cls, text: str) -> Level:
        return cls[text.strip().upper()]


Kind = Literal["counter", "gauge", "histogram", "info", "stateset"]

BASE_LABELS: tuple[str, ...] = ("application_id", "client_id")
_THREAD = ("thread_id",)
_TASK = ("thread_id", "task_id")
_NODE = ("thread_id", "task_id", "processor_node_id")
_TOPIC = ("thread_id", "task_id", "processor_node_id", "topic")
_STORE = ("thread_id", "task_id", "store", "store_type")


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One exported metric family and where it comes from in Kafka Streams."""

    name: str
    kind: Kind
    help: str
    group: str
    kafka_streams: tuple[str, ...]
    labels: tuple[str, ...] = ()
    level: Level = Level.INFO
    buckets: tuple[float, ...] = ()

    @property
    def exported_name(self) -> str:
        """The name as scraped (counters get ``_total``, info metrics ``_info``)."""
        if self.kind == "counter":
            return f"{self.name}_total"
        if self.kind == "info":
            return f"{self.name}_info"
        return self.name

    @property
    def all_labels(self) -> tuple[str, ...]:
        return BASE_LABELS + self.labels


def _m(
    name: str,
    kind: Kind,
    group: str,
    kafka_streams: str,
    help: str,
    labels: tuple[str, ...] = (),
    level: Level = Level.INFO,
    buckets: tuple[float, ...] = (),
) -> MetricSpec:
    return MetricSpec(
        f"kafka_streams_{name}",
        kind,
        help,
        group,
        tuple(k.strip() for k in kafka_streams.split(",") if k.strip()),
        labels,
        level,
        buckets,
    )


_CLIENT_G = "stream-metrics"
_THREAD_G = "stream-thread-metrics"
_TASK_G = "stream-task-metrics"
_NODE_G = "stream-processor-node-metrics"
_STATE_G = "stream-state-metrics"
_CACHE_G = "stream-record-cache-metrics"
_CONSUMER_G = "consumer-fetch-manager-metrics"
_TOPIC_G = "stream-topic-metrics"
_OURS = "(platform_streams)"

#: Store operations the metered stores time (DEBUG): our op name -> Kafka Streams' metric stem.
STORE_OPERATIONS: dict[str, str] = {
    "put": "put",
    "put_if_absent": "put-if-absent",
    "get": "get",
    "delete": "delete",
    "fetch": "fetch",
    "flush": "flush",
}

#: RocksDB properties exported per store (INFO, as Kafka Streams' property-based metrics):
#: Kafka Streams metric name -> (RocksDB property, exported suffix).
ROCKSDB_PROPERTIES: dict[str, tuple[str, str]] = {
    "estimate-num-keys": ("rocksdb.estimate-num-keys", "estimate_num_keys"),
    "cur-size-active-mem-table": ("rocksdb.cur-size-active-mem-table", "cur_size_active_mem_table_bytes"),
    "cur-size-all-mem-tables": ("rocksdb.cur-size-all-mem-tables", "cur_size_all_mem_tables_bytes"),
    "size-all-mem-tables": ("rocksdb.size-all-mem-tables", "size_all_mem_tables_bytes"),
    "num-entries-active-mem-table": ("rocksdb.num-entries-active-mem-table", "num_entries_active_mem_table"),
    "num-immutable-mem-table": ("rocksdb.num-immutable-mem-table", "num_immutable_mem_table"),
    "mem-table-flush-pending": ("rocksdb.mem-table-flush-pending", "mem_table_flush_pending"),
    "estimate-pending-compaction-bytes": (
        "rocksdb.estimate-pending-compaction-bytes",
        "estimate_pending_compaction_bytes",
    ),
    "total-sst-files-size": ("rocksdb.total-sst-files-size", "total_sst_files_size_bytes"),
    "live-sst-files-size": ("rocksdb.live-sst-files-size", "live_sst_files_size_bytes"),
    "num-live-versions": ("rocksdb.num-live-versions", "num_live_versions"),
    "estimate-table-readers-mem": ("rocksdb.estimate-table-readers-mem", "estimate_table_readers_mem_bytes"),
    "estimate-live-data-size": ("rocksdb.estimate-live-data-size", "estimate_live_data_size_bytes"),
    "block-cache-capacity": ("rocksdb.block-cache-capacity", "block_cache_capacity_bytes"),
    "block-cache-usage": ("rocksdb.block-cache-usage", "block_cache_usage_bytes"),
    "block-cache-pinned-usage": ("rocksdb.block-cache-pinned-usage", "block_cache_pinned_usage_bytes"),
    "background-errors": ("rocksdb.background-errors", "background_errors"),
}

CATALOG: tuple[MetricSpec, ...] = (
    # -- client -----------------------------------------------------------------------------
    _m("client", "info", _CLIENT_G, "version, commit-id, application-id",
       "Library version of this client (value 1; the labels carry the data).", ("version",)),
    _m("client_state", "stateset", _CLIENT_G, "state",
       "The client's KafkaStreams.State (1 for the current state).", ("state",)),
    _m("client_alive_stream_threads", "gauge", _CLIENT_G, "alive-stream-threads",
       "Workers (stream threads) currently alive."),
    _m("client_failed_stream_threads", "gauge", _CLIENT_G, "failed-stream-threads",
       "Workers that died of an exception since the client started."),
    _m("source_topic_murmur2_mismatches", "counter", _OURS, "",
       "Records of a source topic feeding a store that were not in the partition murmur2 gives "
       "their key (producers without partitioner=murmur2_random): key queries of its stores "
       "then ask every partition.", ("topic",)),
    _m("source_topic_murmur2_placed", "gauge", _OURS, "",
       "1 while a source topic feeding a store is murmur2-placed as far as known, 0 once not "
       "(kept across restarts).", ("topic",)),
    _m("store_key_query_scatter", "counter", _OURS, "",
       "HTTP key queries answered by asking every partition's owner (the store's keys are not "
       "murmur2-placed).", ("store",)),
    _m("client_assigned_tasks", "gauge", _OURS, "",
       "Tasks the state-aware assignor gives this client, by role: active, standby, warmup "
       "(task_assignor=state_aware).", ("role",)),
    _m("client_rebalance_latency_seconds", "gauge", _OURS, "",
       "Time from joining the last group generation to receiving its assignment "
       "(task_assignor=state_aware).", ()),
    _m("client_probing_rebalances", "counter", _OURS, "",
       "Probing rebalances this client started as leader, to move tasks to warmed-up clients.", ()),
    _m("async_in_flight", "gauge", _OURS, "",
       "Records the process's async processors hold: calls running, and records waiting behind "
       "an earlier record of their key (docs/async-processing.md).", ()),
    _m("async_calls_completed", "counter", _OURS, "",
       "Async processor calls that returned (after retries).", ()),
    _m("async_calls_failed", "counter", _OURS, "",
       "Async processor calls that still failed after their retries (then the exception handler "
       "decides).", ()),
    _m("async_call_retries", "counter", _OURS, "",
       "Attempts of async processor calls made again after a failure or a timeout.", ()),
    _m("async_call_timeouts", "counter", _OURS, "",
       "Attempts of async processor calls that exceeded their timeout.", ()),
    _m("async_queue_wait_seconds", "histogram", _OURS, "",
       "Time from a record's arrival at an async processor to its call's start (waiting behind "
       "an earlier record of the same key).", (), buckets=DURATION_BOUNDS_S),
    _m("async_call_latency_seconds", "histogram", _OURS, "",
       "Time of one async processor call, all its attempts included.", (), buckets=DURATION_BOUNDS_S),
    # -- thread (worker) ----------------------------------------------------------------------
    _m("thread_state", "stateset", _THREAD_G, "thread-state",
       "The worker's state (1 for the current state).", (*_THREAD, "state")),
    _m("thread_start_time_seconds", "gauge", _THREAD_G, "thread-start-time",
       "When the worker started (Unix time, seconds).", _THREAD),
    _m("thread_poll", "counter", _THREAD_G, "poll-rate, poll-total",
       "Polls of the consumer (one per loop iteration).", _THREAD),
    _m("thread_poll_latency_seconds", "histogram", _THREAD_G, "poll-latency-avg, poll-latency-max",
       "Time spent polling the consumer per loop iteration.", _THREAD, buckets=LATENCY_BUCKETS_S),
    _m("thread_poll_records", "histogram", _THREAD_G, "poll-records-avg, poll-records-max",
       "Records returned per poll.", _THREAD, buckets=RECORD_COUNT_BUCKETS),
    _m("thread_process", "counter", _THREAD_G, "process-rate, process-total",
       "Records processed by the worker's tasks.", _THREAD),
    _m("thread_process_latency_seconds", "histogram", _THREAD_G, "process-latency-avg, process-latency-max",
       "Time per processing pass of a loop iteration (all tasks; divide the sum by "
       "the process counter for a per-record average).", _THREAD, buckets=LATENCY_BUCKETS_S),
    _m("thread_process_records", "histogram", _THREAD_G, "process-records-avg, process-records-max",
       "Records processed per loop iteration that processed any.", _THREAD, buckets=RECORD_COUNT_BUCKETS),
    _m("thread_commit", "counter", _THREAD_G, "commit-rate, commit-total",
       "Commits (flush stores and producer, commit offsets).", _THREAD),
    _m("thread_commit_latency_seconds", "histogram", _THREAD_G, "commit-latency-avg, commit-latency-max",
       "Duration of commits.", _THREAD, buckets=LATENCY_BUCKETS_S),
    _m("thread_punctuate", "counter", _THREAD_G, "punctuate-rate, punctuate-total",
       "Punctuator calls (stream-time and wall-clock) that returned.", _THREAD),
    _m("thread_punctuate_latency_seconds", "histogram", _THREAD_G,
       "punctuate-latency-avg, punctuate-latency-max",
       "Duration of punctuator calls.", _THREAD, buckets=LATENCY_BUCKETS_S),
    _m("thread_task_created", "counter", _THREAD_G, "task-created-rate, task-created-total",
       "Tasks created (a rebalance that keeps a task closes and recreates it).", _THREAD),
    _m("thread_task_closed", "counter", _THREAD_G, "task-closed-rate, task-closed-total",
       "Tasks closed.", _THREAD),
    _m("thread_rebalances", "counter", "consumer-coordinator-metrics",
       "rebalance-total, rebalance-rate-per-hour", "Partition assignments received by the worker.", _THREAD),
    _m("thread_active_tasks", "gauge", _OURS, "",
       "Active tasks the worker runs now.", _THREAD),
    _m("thread_rocksdb_open_stores", "gauge", _OURS, "",
       "RocksDB stores open in the worker's active tasks (each is one RocksDB instance; all share "
       "the process's block cache and, with rocksdb_memory_budget, its memory budget).", _THREAD),
    _m("consumer_records_lag", "gauge", _CONSUMER_G, "records-lag",
       "High watermark (from fetch responses) minus the next offset to process, per input partition.",
       (*_THREAD, "topic", "partition")),
    _m("record_cache_size_bytes", "gauge", _TASK_G, "cache-size-bytes-total",
       "Bytes held by the worker's record cache (shared by its tasks).", _THREAD),
    _m("record_cache_evictions", "counter", _CACHE_G, "",
       "Entries evicted from the worker's record cache.", _THREAD),
    _m("record_cache_hits", "counter", _CACHE_G, "hit-ratio-avg, hit-ratio-min, hit-ratio-max",
       "Point reads of a caching store served by the record cache. Hit ratio: "
       "rate(hits) / (rate(hits) + rate(misses)).", _STORE, Level.DEBUG),
    _m("record_cache_misses", "counter", _CACHE_G, "hit-ratio-avg, hit-ratio-min, hit-ratio-max",
       "Point reads of a caching store that went to the store below the cache.", _STORE, Level.DEBUG),
    *(
        _m(suffix, kind, "(librdkafka statistics)", "",  # type: ignore[arg-type]
           f"{help} librdkafka statistics field {field}; only with statistics.interval.ms set in "
           "consumer_config / producer_config.", (*_THREAD, "client"))
        for suffix, (field, kind, help) in STATISTICS.items()
    ),
    # -- task ---------------------------------------------------------------------------------
    _m("task_dropped_records", "counter", _TASK_G, "dropped-records-rate, dropped-records-total",
       "Records skipped: deserialization, processing or production errors handled with CONTINUE, "
       "invalid timestamps, null keys or values dropped by aggregations, joins and table sources, "
       "late records of closed windows. An empty task_id: production errors the worker's shared "
       "producer reported.",
       _TASK),
    _m("task_dead_letter_records", "counter", _OURS, "",
       "Records the exception handlers sent to the dead-letter topic "
       "(errors_dead_letter_queue_topic_name, KIP-1034): a subset of the dropped records, or of "
       "the records a failing handler re-raised.", _TASK),
    _m("task_dead_letter_truncated_records", "counter", _OURS, "",
       "Dead letters written without (part of) their payload: the whole record would have "
       "exceeded the producer's message.max.bytes or the dead-letter topic's max.message.bytes; "
       "header __streams.errors.payload.truncated names what was cut. A subset of the "
       "dead-letter records.", _TASK),
    _m("task_process", "counter", _TASK_G, "process-rate, process-total",
       "Records processed by the task.", _TASK, Level.DEBUG),
    _m("task_record_lateness_seconds", "histogram", _TASK_G, "record-lateness-avg, record-lateness-max",
       "Stream time minus the record's timestamp when the task takes the record (0 for a record "
       "that advances stream time).", _TASK, Level.DEBUG, E2E_LATENCY_BUCKETS_S),
    _m("task_input_buffer_records", "gauge", _TASK_G, "input-buffer-bytes-total",
       "Records buffered for the task, not processed yet (records, not bytes).", _TASK),
    _m("task_restore", "counter", _TASK_G, "restore-rate, restore-total",
       "Changelog records restored into the task's stores while it is active (restoration "
       "before processing); standby and warm-up updates count in the update counter.", _TASK),
    _m("task_restore_remaining_records", "gauge", _TASK_G, "restore-remaining-records-total",
       "Changelog records the task still has to restore (active restoration): the fetch-side "
       "log end minus the next offset to apply, summed over the changelog partitions being "
       "read (each counted from its first fetch on); 0 when the task is not restoring.", _TASK),
    _m("task_restoring", "gauge", _OURS, "",
       "1 while a store of the task is being restored (also before its log end is known).", _TASK),
    _m("task_snapshot_restore", "counter", _OURS, "",
       "Store partitions of the task restored from a state snapshot (state_snapshot_location) "
       "before their changelog tail: the tail counts in the restore counter, the snapshot's "
       "keys in the snapshot-restore records counter.", _TASK),
    _m("task_snapshot_restore_records", "counter", _OURS, "",
       "Keys ingested into the task's stores from state snapshots (each snapshot's record count).",
       _TASK),
    _m("task_snapshot_restore_seconds", "counter", _OURS, "",
       "Seconds spent downloading, checking and ingesting the task's state snapshots.", _TASK),
    _m("task_update", "counter", _TASK_G, "update-rate, update-total",
       "Changelog records applied to the task's stores while it is a standby.", _TASK),
    # -- processor node -----------------------------------------------------------------------
    _m("processor_node_record_e2e_latency_seconds", "histogram", _NODE_G,
       "record-e2e-latency-avg, record-e2e-latency-min, record-e2e-latency-max",
       "Wall clock minus record timestamp when processed, at source nodes "
       "(sampled every 100 ms per task).", _NODE, buckets=E2E_LATENCY_BUCKETS_S),
    # -- topic (KIP-613) ------------------------------------------------------------------------
    _m("topic_records_consumed", "counter", _TOPIC_G, "records-consumed-total",
       "Records read from the topic for the task's source node (counted as the consumer hands "
       "them to the task, per batch).", _TOPIC),
    _m("topic_bytes_consumed", "counter", _TOPIC_G, "bytes-consumed-total",
       "Key and value bytes read from the topic for the task's source node (DEBUG here: a "
       "length per record; Kafka Streams records it at INFO and adds header bytes).",
       _TOPIC, Level.DEBUG),
    _m("topic_records_produced", "counter", _TOPIC_G, "records-produced-total",
       "Records the sink node(s) sent to the topic (handed to the producer). task_id is "
       "empty: the worker's producer, shared by its tasks, counts them.", _TOPIC),
    _m("topic_bytes_produced", "counter", _TOPIC_G, "bytes-produced-total",
       "Key and value bytes the sink node(s) wrote to the topic (DEBUG here, see "
       "bytes-consumed).", _TOPIC, Level.DEBUG),
    # -- state stores -------------------------------------------------------------------------
    *(
        _m(f"state_{op}_latency_seconds", "histogram", _STATE_G,
           f"{stem}-latency-avg, {stem}-latency-max, {stem}-rate, {stem}-total",
           f"Latency of store {op} operations (the count is the number of calls).",
           _STORE, Level.DEBUG, LATENCY_BUCKETS_S)
        for op, stem in STORE_OPERATIONS.items()
    ),
    *(
        _m(f"state_{suffix}", "gauge", _STATE_G, ks_name,
           f"RocksDB property {prop}, summed over the store's column families "
           "(block cache figures are the shared cache's).", _STORE)
        for ks_name, (prop, suffix) in ROCKSDB_PROPERTIES.items()
    ),
)  # fmt: skip

_BY_NAME = {spec.name: spec for spec in CATALOG}


def by_name(name: str) -> MetricSpec:
    """The spec of ``name`` (KeyError for an undeclared metric)."""
    return _BY_NAME[name]


def mapping_table() -> str:
    """The Markdown table of ``docs/metrics.md``: Kafka Streams name -> our name."""
    rows = [
        "| Kafka Streams group | Kafka Streams metric(s) | Prometheus name | Type | Labels | Level |",
        "|---|---|---|---|---|---|",
    ]
    for spec in CATALOG:
        ks = ", ".join(f"`{n}`" for n in spec.kafka_streams) or "—"
        labels = ", ".join(spec.labels) or "—"
        rows.append(
            f"| {spec.group} | {ks} | `{spec.exported_name}` | {spec.kind} | {labels} | {spec.level.name} |"
        )
    return "\n".join(rows) + "\n"
