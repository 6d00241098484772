"""Writes grafana/dashboards/*.json: the dashboards, as code.

Why generated: four dashboards share their variables, datasource wiring, label selectors and
panel shapes; writing ~50 panels of Grafana JSON by hand drifts (a panel without the
datasource variable, a query without the instance filter). Here each panel is one line
naming its queries, and ``tests/grafana`` checks that the committed JSON is what this
produces, that every query returns data on a real Prometheus scraping a real worker, and
that every metric named is one the worker exports (``docs/metrics.md``).

    python grafana/generate_dashboards.py          # rewrite the JSON files
    python grafana/generate_dashboards.py --check  # exit 1 if they are out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: The label filter every query carries; more filters are appended per dashboard.
#: ``namespace``/``pod`` are the labels Kubernetes service discovery (the chart's
#: ServiceMonitor/PodMonitor) adds; outside Kubernetes they are absent and "All" (``.*``)
#: matches the empty value.
WHERE = 'namespace=~"$namespace", pod=~"$pod", instance=~"$instance"'
APP = f'application_id=~"$application_id", {WHERE}'
RATE = "[$__rate_interval]"


@dataclass
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass
class Panel:
    title: str
    queries: list[Query]
    kind: str = "timeseries"
    unit: str = "short"
    description: str = ""
    width: int = 8
    height: int = 8


@dataclass
class Row:
    title: str
    panels: list[Panel] = field(default_factory=list)


def q(expr: str, legend: str = "", instant: bool = False) -> Query:
    return Query(expr, legend, instant)


def rate(metric: str, by: str, extra: str = "") -> str:
    """Per-second rate of a counter, summed ``by`` some labels."""
    return f"sum by ({by}) (rate({metric}{{{APP}{extra}}}{RATE}))"


def increase(metric: str, by: str, extra: str = "") -> str:
    """How much a counter grew over the rate window, summed ``by`` some labels."""
    return f"sum by ({by}) (increase({metric}{{{APP}{extra}}}{RATE}))"


def quantile(phi: float, histogram: str, by: str = "", extra: str = "") -> str:
    """The ``phi`` quantile of a histogram (seconds), per ``by`` labels."""
    group = f"le, {by}" if by else "le"
    return f"histogram_quantile({phi}, sum by ({group}) (rate({histogram}_bucket{{{APP}{extra}}}{RATE})))"


def average(histogram: str, by: str = "", extra: str = "") -> str:
    """Mean of a histogram's observations over the rate window (Kafka Streams' ``-avg``)."""
    grouping = f" by ({by})" if by else ""
    sel = f"{{{APP}{extra}}}{RATE}"
    return f"sum{grouping} (rate({histogram}_sum{sel})) / sum{grouping} (rate({histogram}_count{sel}))"


def gauge(metric: str, by: str, extra: str = "", agg: str = "sum") -> str:
    return f"{agg} by ({by}) ({metric}{{{APP}{extra}}})"


def total(metric: str, extra: str = "") -> str:
    """A metric summed over every series the filters select: one number."""
    return f"sum({metric}{{{APP}{extra}}})"


def legend_for(by: str) -> str:
    """A legend naming a series by its ``by`` labels: ``"task_id, store"`` -> ``"{{task_id}} {{store}}"``."""
    return " ".join("{{" + label.strip() + "}}" for label in by.split(","))


def series(
    title: str,
    of: Callable[[str, str, str], str],
    metric: str,
    by: str,
    description: str,
    extra: str = "",
    **layout: Any,
) -> Panel:
    """A panel of one query, ``of(metric, by, extra)`` (``rate``, ``gauge``, ...): a series per ``by``."""
    return Panel(title, [q(of(metric, by, extra), legend_for(by))], description=description, **layout)


def stat(title: str, query: Query, description: str, width: int = 6, height: int = 5) -> Panel:
    """A single-number panel; by default a quarter of a row, as the health tiles are."""
    return Panel(title, [query], kind="stat", description=description, width=width, height=height)


def latency_panel(title: str, histogram: str, description: str, by: str = "", extra: str = "") -> Panel:
    suffix = legend_for(by.split(",")[0]) + " " if by else ""
    return Panel(
        title,
        [
            q(quantile(0.5, histogram, by, extra), f"{suffix}p50"),
            q(quantile(0.99, histogram, by, extra), f"{suffix}p99"),
            q(average(histogram, by, extra), f"{suffix}avg"),
        ],
        unit="s",
        description=description,
    )


# ------------------------------------------------------------------------------ variables


def datasource_variable() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
    }


def query_variable(name: str, label: str, query: str, *, multi: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": f"{name}-variable"},
        "definition": query,
        "refresh": 2,
        "includeAll": multi,
        "multi": multi,
        "allValue": ".*" if multi else None,
        "current": {},
        "sort": 1,
        "hide": 0,
        "regex": "",
    }


def base_variables() -> list[dict[str, Any]]:
    return [
        datasource_variable(),
        query_variable(
            "application_id",
            "Application",
            "label_values(kafka_streams_client_state, application_id)",
            multi=False,
        ),
        query_variable(
            "namespace",
            "Namespace",
            'label_values(kafka_streams_client_state{application_id=~"$application_id"}, namespace)',
        ),
        query_variable(
            "pod",
            "Pod",
            'label_values(kafka_streams_client_state{application_id=~"$application_id", '
            'namespace=~"$namespace"}, pod)',
        ),
        query_variable(
            "instance",
            "Instance",
            'label_values(kafka_streams_client_state{application_id=~"$application_id", '
            'namespace=~"$namespace", pod=~"$pod"}, instance)',
        ),
    ]


# ------------------------------------------------------------------------------ JSON


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    targets = []
    for index, query in enumerate(panel.queries):
        targets.append(
            {
                "datasource": DATASOURCE,
                "refId": chr(ord("A") + index),
                "expr": query.expr,
                "legendFormat": query.legend or "__auto",
                "range": not query.instant,
                "instant": query.instant,
                "format": "table" if panel.kind == "table" else "time_series",
            }
        )
    body: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {},
    }
    if panel.kind == "timeseries":
        body["options"] = {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    elif panel.kind == "stat":
        body["options"] = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
            "textMode": "auto",
        }
    return body


def dashboard(
    uid: str, title: str, description: str, rows: list[Row], variables: list[dict[str, Any]]
) -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    next_id, y = 1, 0
    for row in rows:
        panels.append(
            {
                "id": next_id,
                "type": "row",
                "title": row.title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id, y, x, row_height = next_id + 1, y + 1, 0, 0
        for panel in row.panels:
            if x + panel.width > 24:
                x, y, row_height = 0, y + row_height, 0
            panels.append(_panel_json(panel, next_id, x, y))
            next_id, x, row_height = next_id + 1, x + panel.width, max(row_height, panel.height)
        y += row_height
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["platform-streams", "kafka-streams"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "timezone": "browser",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "links": [
            {
                "title": "Platform Streams",
                "type": "dashboards",
                "tags": ["platform-streams"],
                "asDropdown": True,
                "includeVars": True,
                "keepTime": True,
            }
        ],
        "templating": {"list": variables},
        "panels": panels,
    }


# ------------------------------------------------------------------------------ dashboards

_DEBUG = " Recorded at metrics_recording_level DEBUG only (as in Kafka Streams)."


def overview() -> dict[str, Any]:
    lag = "kafka_streams_consumer_records_lag"
    rows = [
        Row(
            "Health",
            [
                stat(
                    "Instances by client state",
                    q(
                        f"sum by (state) (kafka_streams_client_state{{{APP}}} == 1)",
                        "{{state}}",
                        instant=True,
                    ),
                    "KafkaStreams.State of each instance (stream-metrics state).",
                ),
                stat(
                    "Alive workers",
                    q(total("kafka_streams_client_alive_stream_threads"), "alive"),
                    "Workers (stream threads) alive, all instances (alive-stream-threads).",
                ),
                stat(
                    "Failed workers",
                    q(total("kafka_streams_client_failed_stream_threads"), "failed"),
                    "Workers that died of an exception (failed-stream-threads).",
                ),
                stat(
                    "Active tasks",
                    q(total("kafka_streams_thread_active_tasks"), "tasks"),
                    "Active tasks over all workers: one per input partition per sub-topology.",
                ),
                series(
                    "Workers by state",
                    gauge,
                    "kafka_streams_thread_state",
                    "state",
                    "Worker (stream thread) states: RUNNING, PARTITIONS_ASSIGNED, ...",
                    width=12,
                ),
                Panel(
                    "Rebalances",
                    [
                        q(increase("kafka_streams_thread_rebalances_total", "instance"), "{{instance}}"),
                        q(
                            rate("kafka_streams_thread_task_created_total", "instance"),
                            "{{instance}} tasks created/s",
                        ),
                        q(
                            rate("kafka_streams_thread_task_closed_total", "instance"),
                            "{{instance}} tasks closed/s",
                        ),
                    ],
                    description="Assignments received; every eager rebalance closes and recreates tasks.",
                    width=12,
                ),
            ],
        ),
        Row(
            "Throughput",
            [
                series(
                    "Records processed / s",
                    rate,
                    "kafka_streams_thread_process_total",
                    "instance",
                    "process-rate of the workers, per instance.",
                    unit="ops",
                ),
                Panel(
                    "Polls / s and records per poll",
                    [
                        q(rate("kafka_streams_thread_poll_total", "instance"), "{{instance}} polls/s"),
                        q(
                            average("kafka_streams_thread_poll_records", "instance"),
                            "{{instance}} records/poll",
                        ),
                    ],
                    description="poll-rate and poll-records-avg.",
                ),
                series(
                    "Records per processing pass",
                    average,
                    "kafka_streams_thread_process_records",
                    "instance",
                    "process-records-avg: records per loop iteration that processed any.",
                ),
            ],
        ),
        Row(
            "Latency",
            [
                latency_panel(
                    "End-to-end latency",
                    "kafka_streams_processor_node_record_e2e_latency_seconds",
                    "Wall clock minus record timestamp at the source nodes (record-e2e-latency).",
                ),
                latency_panel(
                    "Commit latency",
                    "kafka_streams_thread_commit_latency_seconds",
                    "Duration of commits: flush stores and producer, commit offsets (commit-latency).",
                ),
                latency_panel(
                    "Poll latency",
                    "kafka_streams_thread_poll_latency_seconds",
                    "Time spent polling the consumer per loop iteration (poll-latency).",
                ),
                series(
                    "Commits / s",
                    rate,
                    "kafka_streams_thread_commit_total",
                    "instance",
                    "commit-rate: commit.interval.ms sets it (100 ms under exactly_once_v2).",
                    unit="ops",
                ),
                latency_panel(
                    "Punctuate latency",
                    "kafka_streams_thread_punctuate_latency_seconds",
                    "Duration of punctuator calls, stream-time and wall-clock (punctuate-latency).",
                ),
                series(
                    "Punctuations / s",
                    rate,
                    "kafka_streams_thread_punctuate_total",
                    "instance",
                    "punctuate-rate: punctuator calls per second.",
                    unit="ops",
                ),
                Panel(
                    "Time split (process / poll / commit / punctuate ratio)",
                    [
                        q(
                            rate(f"kafka_streams_thread_{phase}_latency_seconds_sum", "instance"),
                            f"{{{{instance}}}} {phase}",
                        )
                        for phase in ("process", "poll", "commit", "punctuate")
                    ],
                    unit="percentunit",
                    description="Fraction of wall-clock time each worker spends in each phase of its loop "
                    "(process-ratio, poll-ratio, commit-ratio, punctuate-ratio): a process ratio near 1 "
                    "means the worker is saturated.",
                ),
                Panel(
                    "Processing time per record",
                    [
                        q(
                            rate("kafka_streams_thread_process_latency_seconds_sum", "instance")
                            + " / "
                            + rate("kafka_streams_thread_process_total", "instance"),
                            "{{instance}}",
                        )
                    ],
                    unit="s",
                    description="Processing time divided by records processed (process-latency-avg).",
                ),
            ],
        ),
        Row(
            "Kafka clients (librdkafka statistics, with statistics.interval.ms set)",
            [
                Panel(
                    "Broker round-trip time",
                    [
                        q(
                            gauge(
                                "kafka_streams_librdkafka_broker_rtt_avg_seconds",
                                "instance, client",
                                agg="max",
                            ),
                            legend_for("instance, client"),
                        )
                    ],
                    unit="s",
                    description="Largest average round trip to a broker, per client (librdkafka rtt.avg).",
                ),
                Panel(
                    "Bytes on the wire / s",
                    [
                        q(rate("kafka_streams_librdkafka_rx_bytes_total", "client"), "{{client}} received"),
                        q(rate("kafka_streams_librdkafka_tx_bytes_total", "client"), "{{client}} sent"),
                    ],
                    unit="Bps",
                    description="Bytes from and to the brokers (librdkafka rx_bytes, tx_bytes).",
                ),
                series(
                    "librdkafka queues",
                    gauge,
                    "kafka_streams_librdkafka_msg_cnt",
                    "instance, client",
                    "Messages waiting in librdkafka: unsent (producer) or fetched, not consumed (msg_cnt).",
                ),
            ],
        ),
        Row(
            "Consumer lag",
            [
                series(
                    "Lag by input topic",
                    gauge,
                    lag,
                    "topic",
                    "Records not processed yet: high watermark minus next offset (records-lag).",
                    width=12,
                ),
                Panel(
                    "Max lag per partition",
                    [q(f"topk(20, {gauge(lag, 'topic, partition', agg='max')})", "{{topic}}-{{partition}}")],
                    kind="bargauge",
                    description="The 20 partitions furthest behind.",
                    width=12,
                ),
            ],
        ),
        Row(
            "Task placement",
            [
                series(
                    "Tasks by role",
                    gauge,
                    "kafka_streams_client_assigned_tasks",
                    "role",
                    "Active, standby and warm-up tasks the state-aware assignor gives the instances; "
                    "a warm-up builds a task's state where it will move at the next probing rebalance.",
                    width=6,
                ),
                series(
                    "Restored changelog records / s",
                    rate,
                    "kafka_streams_task_restore_total",
                    "instance",
                    "Active restoration only (restore-rate): the task waits for it. Standby and "
                    "warm-up updates are kafka_streams_task_update_total (update-rate).",
                    width=6,
                ),
                series(
                    "Records left to restore",
                    gauge,
                    "kafka_streams_task_restore_remaining_records",
                    "instance",
                    "Changelog records restoring tasks still have to replay before they process "
                    "(restore-remaining-records-total); 0 when no task restores.",
                    width=6,
                ),
                series(
                    "Rebalance latency",
                    partial(gauge, agg="max"),
                    "kafka_streams_client_rebalance_latency_seconds",
                    "instance",
                    "From joining the last group generation to receiving its state-aware assignment.",
                    unit="s",
                    width=6,
                ),
            ],
        ),
        Row(
            "Topics",
            [
                series(
                    "Records in / s by topic",
                    rate,
                    "kafka_streams_topic_records_consumed_total",
                    "topic",
                    "Records read from each source topic (records-consumed-rate, KIP-613).",
                    unit="ops",
                    width=12,
                ),
                series(
                    "Records out / s by topic",
                    rate,
                    "kafka_streams_topic_records_produced_total",
                    "topic",
                    "Records the sink nodes sent to each topic (records-produced-rate, KIP-613).",
                    unit="ops",
                    width=12,
                ),
            ],
        ),
        Row(
            "Async processors",
            [
                series(
                    "Async records in flight",
                    gauge,
                    "kafka_streams_async_in_flight",
                    "instance",
                    "Records each process's async processors hold: calls running and records "
                    "waiting behind an earlier record of their key (max_in_flight bounds it; "
                    "docs/async-processing.md).",
                ),
                Panel(
                    "Async calls / s",
                    [
                        q(rate(f"kafka_streams_async_{name}_total", "instance"), "{{instance}} " + legend)
                        for name, legend in (
                            ("calls_completed", "completed"),
                            ("calls_failed", "failed"),
                            ("call_retries", "retries"),
                        )
                    ],
                    unit="ops",
                    description="Calls that returned, calls that still failed after their retries (the "
                    "exception handler then decides), and attempts made again.",
                ),
                latency_panel(
                    "Async call latency",
                    "kafka_streams_async_call_latency_seconds",
                    "One call, all its attempts included: the I/O the async processors wait for.",
                ),
                latency_panel(
                    "Async queue wait",
                    "kafka_streams_async_queue_wait_seconds",
                    "From a record's arrival at an async processor to its call's start: time spent "
                    "behind an earlier record of the same key (a hot key shows here).",
                ),
            ],
        ),
        Row(
            "Process",
            [
                Panel(
                    "Resident memory",
                    [
                        q(
                            "sum by (instance) (process_resident_memory_bytes{" + WHERE + "})",
                            "{{instance}}",
                        )
                    ],
                    unit="bytes",
                    description="RSS of each worker process (RocksDB memtables and block cache included).",
                    width=12,
                ),
                Panel(
                    "CPU",
                    [
                        q(
                            "sum by (instance) (rate(process_cpu_seconds_total{" + WHERE + "}" + RATE + "))",
                            "{{instance}}",
                        )
                    ],
                    unit="percentunit",
                    description="CPU seconds per second; under the GIL a worker process uses about one core.",
                    width=12,
                ),
            ],
        ),
    ]
    return dashboard(
        "ps-overview",
        "Platform Streams / Application overview",
        "One stream application: health, throughput, latency, lag and rebalances of its workers.",
        rows,
        base_variables(),
    )


def state_stores() -> dict[str, Any]:
    store = ', store=~"$store"'

    def prop(title: str, suffix: str, unit: str, description: str) -> Panel:
        """A RocksDB property of each selected store."""
        return series(title, gauge, f"kafka_streams_state_{suffix}", "store", description, store, unit=unit)

    def op_latency(operation: str) -> Panel:
        histogram = f"kafka_streams_state_{operation}_latency_seconds"
        return Panel(
            f"{operation} latency (p99) and calls / s",
            [
                q(quantile(0.99, histogram, "store", store), "{{store}} p99"),
                q(rate(f"{histogram}_count", "store", store), "{{store}} calls/s"),
            ],
            unit="s",
            description=f"Store {operation} operations ({operation}-latency, {operation}-rate).{_DEBUG}",
        )

    pinned_bytes = "kafka_streams_state_block_cache_pinned_usage_bytes"
    capacity_bytes = "kafka_streams_state_block_cache_capacity_bytes"

    def block_cache(figure: str, name: str) -> Query:
        metric = f"kafka_streams_state_block_cache_{figure}_bytes"
        return q(gauge(metric, "instance", store, "max"), f"{{{{instance}}}} {name}")

    rows = [
        Row(
            "Size (RocksDB)",
            [
                prop("Estimated keys", "estimate_num_keys", "short", "rocksdb.estimate-num-keys per store."),
                prop(
                    "SST files size",
                    "total_sst_files_size_bytes",
                    "bytes",
                    "rocksdb.total-sst-files-size: the store's size on disk (per store, all tasks).",
                ),
                prop(
                    "Live SST files size",
                    "live_sst_files_size_bytes",
                    "bytes",
                    "rocksdb.live-sst-files-size.",
                ),
            ],
        ),
        Row(
            "Restore",
            [
                series(
                    "Restored records / s",
                    rate,
                    "kafka_streams_task_restore_total",
                    "instance",
                    "Changelog records replayed into stores (restore-rate).",
                    unit="ops",
                ),
                series(
                    "Restored records",
                    gauge,
                    "kafka_streams_task_restore_total",
                    "instance",
                    "Changelog records restored since each worker started (restore-total).",
                ),
                series(
                    "Tasks restoring",
                    gauge,
                    "kafka_streams_task_restoring",
                    "instance",
                    "Tasks with a store being restored now; an instance is ready when this is 0.",
                ),
                series(
                    "Records left to restore by task",
                    gauge,
                    "kafka_streams_task_restore_remaining_records",
                    "task_id",
                    "Changelog records each restoring task still has to replay "
                    "(restore-remaining-records-total): the fetch-side log end minus the next "
                    "offset to apply, counted down batch by batch.",
                ),
            ],
        ),
        Row(
            "Record cache",
            [
                series(
                    "Record cache size",
                    gauge,
                    "kafka_streams_record_cache_size_bytes",
                    "instance, thread_id",
                    "Bytes in each worker's record cache (statestore.cache.max.bytes bounds it).",
                    unit="bytes",
                    width=8,
                ),
                series(
                    "Record cache evictions / s",
                    rate,
                    "kafka_streams_record_cache_evictions_total",
                    "instance",
                    "Dirty entries evicted (flushed downstream) because the cache was full. "
                    "A high rate next to a full cache means a larger cache would absorb more updates.",
                    unit="ops",
                    width=8,
                ),
                Panel(
                    "Record cache hit ratio",
                    [
                        q(
                            rate("kafka_streams_record_cache_hits_total", "store", store)
                            + " / ("
                            + rate("kafka_streams_record_cache_hits_total", "store", store)
                            + " + "
                            + rate("kafka_streams_record_cache_misses_total", "store", store)
                            + ")",
                            "{{store}}",
                        )
                    ],
                    unit="percentunit",
                    description="Point reads served by the record cache, per store (hit-ratio-avg)." + _DEBUG,
                    width=8,
                ),
            ],
        ),
        Row(
            "RocksDB memory and compaction",
            [
                prop(
                    "Memtables",
                    "size_all_mem_tables_bytes",
                    "bytes",
                    "rocksdb.size-all-mem-tables: active, unflushed and pinned memtables.",
                ),
                Panel(
                    "Block cache usage and capacity",
                    [
                        block_cache("usage", "usage"),
                        block_cache("pinned_usage", "pinned"),
                        block_cache("capacity", "capacity"),
                    ],
                    unit="bytes",
                    description="The shared block cache of each instance (the same figure on every store).",
                ),
                prop(
                    "Pending compaction",
                    "estimate_pending_compaction_bytes",
                    "bytes",
                    "rocksdb.estimate-pending-compaction-bytes: compaction debt; growth means write stalls.",
                ),
                prop(
                    "Immutable memtables",
                    "num_immutable_mem_table",
                    "short",
                    "Memtables waiting to be flushed.",
                ),
                prop(
                    "Memtable flush pending",
                    "mem_table_flush_pending",
                    "short",
                    "1 while a flush is pending.",
                ),
                prop(
                    "Background errors",
                    "background_errors",
                    "short",
                    "rocksdb.background-errors: any non-zero value needs attention.",
                ),
            ],
        ),
        Row(
            "RocksDB memory budget",
            [
                Panel(
                    "Budget taken by memtables and pinned blocks",
                    [
                        q(
                            gauge(pinned_bytes, "instance", store, "max")
                            + " / "
                            + gauge(capacity_bytes, "instance", store, "max"),
                            "{{instance}}",
                        )
                    ],
                    unit="percentunit",
                    description="Pinned block-cache usage over its capacity, per instance. With "
                    "rocksdb_memory_budget the cache's capacity is the budget and memtables are charged "
                    "to it as pinned entries; what is pinned cannot be evicted, so near 100 % the "
                    "budget is exceeded (alert PlatformStreamsRocksDBMemoryNearLimit).",
                ),
                series(
                    "Open RocksDB stores",
                    gauge,
                    "kafka_streams_thread_rocksdb_open_stores",
                    "instance",
                    "RocksDB stores open in each instance's active tasks: each one's memtables and "
                    "table readers share the instance's memory budget.",
                ),
                prop(
                    "Live data size",
                    "estimate_live_data_size_bytes",
                    "bytes",
                    "rocksdb.estimate-live-data-size: the store's live data, without obsolete versions.",
                ),
            ],
        ),
        Row(
            "Operations",
            [op_latency("put"), op_latency("get"), op_latency("flush")],
        ),
    ]
    variables = [
        *base_variables(),
        query_variable(
            "store",
            "Store",
            'label_values(kafka_streams_state_estimate_num_keys{application_id=~"$application_id"}, store)',
        ),
    ]
    return dashboard(
        "ps-state-stores",
        "Platform Streams / State stores",
        "State stores of one application: size, restore progress, record cache and RocksDB internals.",
        rows,
        variables,
    )


def tasks() -> dict[str, Any]:
    task = ', task_id=~"$task_id"'
    rows = [
        Row(
            "Processing",
            [
                series(
                    "Records processed / s per task",
                    rate,
                    "kafka_streams_task_process_total",
                    "task_id",
                    f"Task process-rate.{_DEBUG}",
                    task,
                    unit="ops",
                ),
                series(
                    "Buffered input records per task",
                    gauge,
                    "kafka_streams_task_input_buffer_records",
                    "task_id",
                    "Records fetched for the task, not processed yet.",
                    task,
                ),
                series(
                    "Dropped records per task",
                    increase,
                    "kafka_streams_task_dropped_records_total",
                    "task_id",
                    "Records skipped by the task (dropped-records).",
                    task,
                ),
            ],
        ),
        Row(
            "Latency",
            [
                latency_panel(
                    "End-to-end latency per task",
                    "kafka_streams_processor_node_record_e2e_latency_seconds",
                    "record-e2e-latency at the task's source node.",
                    by="task_id",
                    extra=task,
                ),
                series(
                    "Average end-to-end latency per source node",
                    average,
                    "kafka_streams_processor_node_record_e2e_latency_seconds",
                    "task_id, processor_node_id",
                    "record-e2e-latency-avg per processor node.",
                    task,
                    unit="s",
                ),
            ],
        ),
        Row(
            "State",
            [
                series(
                    "Store keys per task",
                    gauge,
                    "kafka_streams_state_estimate_num_keys",
                    "task_id, store",
                    "rocksdb.estimate-num-keys of each store of the task.",
                    task,
                ),
                series(
                    "Restored records per task",
                    gauge,
                    "kafka_streams_task_restore_total",
                    "task_id",
                    "Changelog records restored into the task's stores (restore-total).",
                    task,
                ),
                Panel(
                    "Tasks and their workers",
                    [
                        q(
                            gauge(
                                "kafka_streams_task_input_buffer_records",
                                "instance, thread_id, task_id",
                                task,
                                "max",
                            ),
                            instant=True,
                        )
                    ],
                    kind="table",
                    description="Which worker of which instance runs each task now.",
                ),
            ],
        ),
        Row(
            "Input partitions",
            [
                Panel(
                    "Lag per partition on the selected instances",
                    [
                        q(
                            gauge(
                                "kafka_streams_consumer_records_lag", "instance, topic, partition", agg="max"
                            ),
                            "{{instance}} {{topic}}-{{partition}}",
                        )
                    ],
                    description="Task <sub-topology>_<partition> reads partition <partition> of its topics.",
                    width=24,
                ),
            ],
        ),
    ]
    variables = [
        *base_variables(),
        query_variable(
            "task_id",
            "Task",
            f"label_values(kafka_streams_task_input_buffer_records{{{APP}}}, task_id)",
        ),
    ]
    return dashboard(
        "ps-tasks",
        "Platform Streams / Tasks",
        "Per-task drill-down: throughput, buffers, latency, state and restore of selected tasks.",
        rows,
        variables,
    )


def errors() -> dict[str, Any]:
    dropped = "kafka_streams_task_dropped_records_total"
    rows = [
        Row(
            "Failures",
            [
                stat(
                    "Instances not RUNNING",
                    q(f'sum(1 - kafka_streams_client_state{{{APP}, state="RUNNING"}})', "not running"),
                    "Instances in any other state (REBALANCING is normal for a moment).",
                ),
                stat(
                    "Instances in ERROR",
                    q(total("kafka_streams_client_state", ', state="ERROR"'), "error"),
                    "Instances whose every worker died; they stop and exit.",
                ),
                stat(
                    "Failed workers",
                    q(total("kafka_streams_client_failed_stream_threads"), "failed"),
                    "Workers that died of an uncaught exception (failed-stream-threads).",
                ),
                stat(
                    "RocksDB background errors",
                    q(total("kafka_streams_state_background_errors"), "errors"),
                    "rocksdb.background-errors over all stores.",
                ),
            ],
        ),
        Row(
            "Dropped and dead-lettered records",
            [
                series(
                    "Dropped records / s",
                    rate,
                    dropped,
                    "instance",
                    "Records skipped after a deserialization or processing error handled with "
                    "log_and_continue (dropped-records); with errors_dead_letter_queue_topic_name set "
                    "they are written to the dead-letter topic.",
                    unit="ops",
                    width=12,
                ),
                stat(
                    "Dropped records (total)",
                    q(total(dropped), "dropped"),
                    "dropped-records-total since the workers started.",
                    width=6,
                    height=8,
                ),
                stat(
                    "Dead-lettered records (total)",
                    q(total("kafka_streams_task_dead_letter_records_total"), "dead-lettered"),
                    "Records written to the dead-letter topic since the workers started.",
                    width=6,
                    height=8,
                ),
                series(
                    "Dead-lettered records / s",
                    rate,
                    "kafka_streams_task_dead_letter_records_total",
                    "task_id",
                    "Records written to errors_dead_letter_queue_topic_name per second, per task "
                    "(an empty task is the worker's producer).",
                    unit="ops",
                    width=12,
                ),
                Panel(
                    "Top tasks by dropped records",
                    [q(f"topk(10, {gauge(dropped, 'task_id')})", "{{task_id}}")],
                    kind="bargauge",
                    description="Where the bad records come from: task <sub-topology>_<partition>.",
                    width=12,
                ),
                series(
                    "Dead workers",
                    gauge,
                    "kafka_streams_thread_state",
                    "instance",
                    "Workers in state DEAD, per instance.",
                    ', state="DEAD"',
                    width=12,
                ),
            ],
        ),
    ]
    return dashboard(
        "ps-errors",
        "Platform Streams / Errors and dead letters",
        "What went wrong: client and worker failures, dropped (and dead-lettered) records, RocksDB errors.",
        rows,
        base_variables(),
    )


DASHBOARDS = {
    "platform-streams-overview.json": overview,
    "platform-streams-state-stores.json": state_stores,
    "platform-streams-tasks.json": tasks,
    "platform-streams-errors.json": errors,
}


def render_all() -> dict[str, str]:
    """File name -> the JSON text it must contain."""
    return {name: json.dumps(build(), indent=2) + "\n" for name, build in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if a dashboard file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render_all().items():
        path = OUT / name
        if path.exists() and path.read_text() == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text)
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; run python grafana/generate_dashboards.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
