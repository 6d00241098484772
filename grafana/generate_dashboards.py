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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: The label filter every query carries; more filters are appended per dashboard.
APP = 'application_id=~"$application_id", instance=~"$instance"'
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


def latency_panel(title: str, histogram: str, description: str, by: str = "", extra: str = "") -> Panel:
    suffix = "{{" + by.split(",")[0].strip() + "}} " if by else ""
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
            "instance",
            "Instance",
            'label_values(kafka_streams_client_state{application_id=~"$application_id"}, instance)',
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
                Panel(
                    "Instances by client state",
                    [
                        q(
                            f"sum by (state) (kafka_streams_client_state{{{APP}}} == 1)",
                            "{{state}}",
                            instant=True,
                        )
                    ],
                    kind="stat",
                    description="KafkaStreams.State of each instance (stream-metrics state).",
                    width=6,
                    height=5,
                ),
                Panel(
                    "Alive workers",
                    [q(f"sum(kafka_streams_client_alive_stream_threads{{{APP}}})", "alive")],
                    kind="stat",
                    description="Workers (stream threads) alive, all instances (alive-stream-threads).",
                    width=6,
                    height=5,
                ),
                Panel(
                    "Failed workers",
                    [q(f"sum(kafka_streams_client_failed_stream_threads{{{APP}}})", "failed")],
                    kind="stat",
                    description="Workers that died of an exception (failed-stream-threads).",
                    width=6,
                    height=5,
                ),
                Panel(
                    "Active tasks",
                    [q(f"sum(kafka_streams_thread_active_tasks{{{APP}}})", "tasks")],
                    kind="stat",
                    description="Active tasks over all workers: one per input partition per sub-topology.",
                    width=6,
                    height=5,
                ),
                Panel(
                    "Workers by state",
                    [q(gauge("kafka_streams_thread_state", "state"), "{{state}}")],
                    description="Worker (stream thread) states: RUNNING, PARTITIONS_ASSIGNED, ...",
                    width=12,
                ),
                Panel(
                    "Rebalances",
                    [
                        q(
                            increase("kafka_streams_thread_rebalances_total", "instance"),
                            "{{instance}}",
                        ),
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
                Panel(
                    "Records processed / s",
                    [q(rate("kafka_streams_thread_process_total", "instance"), "{{instance}}")],
                    unit="ops",
                    description="process-rate of the workers, per instance.",
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
                Panel(
                    "Records per processing pass",
                    [q(average("kafka_streams_thread_process_records", "instance"), "{{instance}}")],
                    description="process-records-avg: records per loop iteration that processed any.",
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
                Panel(
                    "Commits / s",
                    [q(rate("kafka_streams_thread_commit_total", "instance"), "{{instance}}")],
                    unit="ops",
                    description="commit-rate: commit.interval.ms sets it (100 ms under exactly_once_v2).",
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
            "Consumer lag",
            [
                Panel(
                    "Lag by input topic",
                    [q(gauge(lag, "topic"), "{{topic}}")],
                    description="Records not processed yet: high watermark minus next offset (records-lag).",
                    width=12,
                ),
                Panel(
                    "Max lag per partition",
                    [q(f"topk(20, max by (topic, partition) ({lag}{{{APP}}}))", "{{topic}}-{{partition}}")],
                    kind="bargauge",
                    description="The 20 partitions furthest behind.",
                    width=12,
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
                            'sum by (instance) (process_resident_memory_bytes{instance=~"$instance"})',
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
                            'sum by (instance) (rate(process_cpu_seconds_total{instance=~"$instance"}'
                            + RATE
                            + "))",
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

    def prop(title: str, suffix: str, unit: str, description: str, width: int = 8) -> Panel:
        return Panel(
            title,
            [q(gauge(f"kafka_streams_state_{suffix}", "store", store), "{{store}}")],
            unit=unit,
            description=description,
            width=width,
        )

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
                Panel(
                    "Restored records / s",
                    [q(rate("kafka_streams_task_restore_total", "instance"), "{{instance}}")],
                    unit="ops",
                    description="Changelog records replayed into stores (restore-rate).",
                ),
                Panel(
                    "Restored records",
                    [q(gauge("kafka_streams_task_restore_total", "instance"), "{{instance}}")],
                    description="Changelog records restored since each worker started (restore-total).",
                ),
                Panel(
                    "Tasks restoring",
                    [q(gauge("kafka_streams_task_restoring", "instance"), "{{instance}}")],
                    description="Tasks with a store being restored now; an instance is ready when this is 0.",
                ),
            ],
        ),
        Row(
            "Record cache",
            [
                Panel(
                    "Record cache size",
                    [
                        q(
                            gauge("kafka_streams_record_cache_size_bytes", "instance, thread_id"),
                            "{{instance}} {{thread_id}}",
                        )
                    ],
                    unit="bytes",
                    description="Bytes in each worker's record cache (statestore.cache.max.bytes bounds it).",
                    width=12,
                ),
                Panel(
                    "Record cache evictions / s",
                    [q(rate("kafka_streams_record_cache_evictions_total", "instance"), "{{instance}}")],
                    unit="ops",
                    description="Dirty entries evicted (flushed downstream) because the cache was full. "
                    "A high rate next to a full cache means a larger cache would absorb more updates "
                    "(the hit ratio itself is not recorded).",
                    width=12,
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
                        q(
                            gauge("kafka_streams_state_block_cache_usage_bytes", "instance", store, "max"),
                            "{{instance}} usage",
                        ),
                        q(
                            gauge(
                                "kafka_streams_state_block_cache_pinned_usage_bytes", "instance", store, "max"
                            ),
                            "{{instance}} pinned",
                        ),
                        q(
                            gauge("kafka_streams_state_block_cache_capacity_bytes", "instance", store, "max"),
                            "{{instance}} capacity",
                        ),
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
                Panel(
                    "Records processed / s per task",
                    [q(rate("kafka_streams_task_process_total", "task_id", task), "{{task_id}}")],
                    unit="ops",
                    description=f"Task process-rate.{_DEBUG}",
                ),
                Panel(
                    "Buffered input records per task",
                    [q(gauge("kafka_streams_task_input_buffer_records", "task_id", task), "{{task_id}}")],
                    description="Records fetched for the task, not processed yet.",
                ),
                Panel(
                    "Dropped records per task",
                    [
                        q(
                            increase("kafka_streams_task_dropped_records_total", "task_id", task),
                            "{{task_id}}",
                        )
                    ],
                    description="Records skipped by the task (dropped-records).",
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
                Panel(
                    "Average end-to-end latency per source node",
                    [
                        q(
                            average(
                                "kafka_streams_processor_node_record_e2e_latency_seconds",
                                "task_id, processor_node_id",
                                task,
                            ),
                            "{{task_id}} {{processor_node_id}}",
                        )
                    ],
                    unit="s",
                    description="record-e2e-latency-avg per processor node.",
                ),
            ],
        ),
        Row(
            "State",
            [
                Panel(
                    "Store keys per task",
                    [
                        q(
                            gauge("kafka_streams_state_estimate_num_keys", "task_id, store", task),
                            "{{task_id}} {{store}}",
                        )
                    ],
                    description="rocksdb.estimate-num-keys of each store of the task.",
                ),
                Panel(
                    "Restored records per task",
                    [q(gauge("kafka_streams_task_restore_total", "task_id", task), "{{task_id}}")],
                    description="Changelog records restored into the task's stores (restore-total).",
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
                            "max by (instance, topic, partition) (kafka_streams_consumer_records_lag"
                            f"{{{APP}}})",
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
            'label_values(kafka_streams_task_input_buffer_records{application_id=~"$application_id", '
            'instance=~"$instance"}, task_id)',
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
                Panel(
                    "Instances not RUNNING",
                    [q(f'sum(1 - kafka_streams_client_state{{{APP}, state="RUNNING"}})', "not running")],
                    kind="stat",
                    description="Instances in any other state (REBALANCING is normal for a moment).",
                    width=6,
                    height=5,
                ),
                Panel(
                    "Instances in ERROR",
                    [q(f'sum(kafka_streams_client_state{{{APP}, state="ERROR"}})', "error")],
                    kind="stat",
                    description="Instances whose every worker died; they stop and exit.",
                    width=6,
                    height=5,
                ),
                Panel(
                    "Failed workers",
                    [q(f"sum(kafka_streams_client_failed_stream_threads{{{APP}}})", "failed")],
                    kind="stat",
                    description="Workers that died of an uncaught exception (failed-stream-threads).",
                    width=6,
                    height=5,
                ),
                Panel(
                    "RocksDB background errors",
                    [q(f"sum(kafka_streams_state_background_errors{{{APP}}})", "errors")],
                    kind="stat",
                    description="rocksdb.background-errors over all stores.",
                    width=6,
                    height=5,
                ),
            ],
        ),
        Row(
            "Dropped and dead-lettered records",
            [
                Panel(
                    "Dropped records / s",
                    [q(rate(dropped, "instance"), "{{instance}}")],
                    unit="ops",
                    description="Records skipped after a deserialization or processing error handled with "
                    "log_and_continue (dropped-records); with errors_dead_letter_queue_topic_name set "
                    "they are written to the dead-letter topic.",
                    width=12,
                ),
                Panel(
                    "Dropped records (total)",
                    [q(f"sum({dropped}{{{APP}}})", "dropped")],
                    kind="stat",
                    description="dropped-records-total since the workers started.",
                    width=12,
                ),
                Panel(
                    "Top tasks by dropped records",
                    [q(f"topk(10, sum by (task_id) ({dropped}{{{APP}}}))", "{{task_id}}")],
                    kind="bargauge",
                    description="Where the bad records come from: task <sub-topology>_<partition>.",
                    width=12,
                ),
                Panel(
                    "Dead workers",
                    [
                        q(
                            f'sum by (instance) (kafka_streams_thread_state{{{APP}, state="DEAD"}})',
                            "{{instance}}",
                        )
                    ],
                    description="Workers in state DEAD, per instance.",
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
