"""Writes grafana/rules/*.rules.yml: the alerting and recording rules, as code.

Why generated: the same rules ship twice -- as plain Prometheus rule files here and as the
chart's ``PrometheusRule`` (``helm/platform-streams/rules`` links to this directory, so the
chart reads these very files) -- and a test needs them with short ``for:`` durations and
windows to make each alert fire against a real worker within seconds. :func:`render`
takes those as :class:`Tuning`; the committed files are ``render(Tuning())``.

Two files:

* ``platform-streams-alerts.rules.yml`` -- the alerts; each names its runbook paragraph
  in ``docs/runbooks.md`` (``runbook_url`` annotation, a path relative to the repository).
* ``kafka-streams-compat.rules.yml`` -- recording rules publishing our series under the
  names the Prometheus JMX exporter and Micrometer give Kafka Streams' JMX metrics
  (``kafka_stream_thread_process_total``, ``kafka_streams_stream_thread_metrics_process_rate``,
  ``state_id`` for stores), so dashboards built for Java Kafka Streams keep working.

    python grafana/generate_rules.py          # rewrite the rule files
    python grafana/generate_rules.py --check  # exit 1 if they are out of date
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).resolve().parent / "rules"
ALERTS_FILE = "platform-streams-alerts.rules.yml"
COMPAT_FILE = "kafka-streams-compat.rules.yml"
RUNBOOKS = "docs/runbooks.md"
#: Labels an alert keeps when it aggregates: where the worker runs and which application.
WHERE = "namespace, pod, job, instance, application_id, client_id"


@dataclass(frozen=True)
class Tuning:
    """``for:`` durations, windows and thresholds of the alerts (defaults: production)."""

    not_running_for: str = "5m"
    error_for: str = "1m"
    thread_failed_window: str = "15m"
    lag_window: str = "5m"
    lag_growing_for: str = "10m"
    latency_window: str = "5m"
    e2e_p99_seconds: float = 60.0
    latency_for: str = "10m"
    dropped_window: str = "5m"
    dropped_for: str = "5m"
    restore_window: str = "5m"
    restore_stuck_for: str = "10m"
    rebalancing_for: str = "10m"
    rocksdb_for: str = "1m"
    rocksdb_memory_for: str = "5m"
    #: share of the block cache's capacity (the memory budget) pinned before the memory alert
    rocksdb_memory_ratio: float = 0.9
    #: The rate window of the compatibility ``*_rate``/``*_avg`` series (JMX's is 30 s samples).
    compat_window: str = "1m"


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    duration: str
    severity: str
    summary: str
    description: str

    def rule(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.duration,
            "labels": {"severity": self.severity},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": f"{RUNBOOKS}#{self.name.lower()}",
            },
        }


def alerts(t: Tuning) -> list[Alert]:
    """Every alert, in the order of ``docs/runbooks.md``."""
    state = "kafka_streams_client_state"
    lag = "kafka_streams_consumer_records_lag"
    failed = "kafka_streams_client_failed_stream_threads"
    e2e = "kafka_streams_processor_node_record_e2e_latency_seconds_bucket"
    task = f"{WHERE}, thread_id, task_id"
    return [
        Alert(
            "PlatformStreamsClientError",
            f'{state}{{state=~"ERROR|PENDING_ERROR"}} == 1',
            t.error_for,
            "critical",
            "Kafka Streams client {{ $labels.client_id }} is in state {{ $labels.state }}",
            "A stream thread failed and the uncaught-exception handler shut the client down; "
            "it processes nothing until restarted.",
        ),
        Alert(
            "PlatformStreamsClientNotRunning",
            f'{state}{{state="RUNNING"}} + ignoring(state) {state}{{state="REBALANCING"}} == 0',
            t.not_running_for,
            "warning",
            "Kafka Streams client {{ $labels.client_id }} is neither RUNNING nor REBALANCING",
            "The client has been CREATED, PENDING_SHUTDOWN, NOT_RUNNING or in error for "
            f"{t.not_running_for}.",
        ),
        Alert(
            "PlatformStreamsStreamThreadFailed",
            f"{failed} - ({failed} offset {t.thread_failed_window} or {failed} * 0) > 0",
            "0m",
            "warning",
            "A stream thread of {{ $labels.client_id }} died",
            f"{{{{ $value }}}} stream thread(s) failed in the last {t.thread_failed_window} "
            "(replaced or not, depending on the uncaught-exception handler).",
        ),
        Alert(
            "PlatformStreamsConsumerLagGrowing",
            f"sum by ({WHERE}, topic) ({lag}) > 0 and sum by ({WHERE}, topic) "
            f"(delta({lag}[{t.lag_window}])) > 0",
            t.lag_growing_for,
            "warning",
            "Consumer lag of {{ $labels.application_id }} on {{ $labels.topic }} keeps growing",
            f"The lag has grown over every {t.lag_window} window for {t.lag_growing_for}: "
            "input arrives faster than the client processes it.",
        ),
        Alert(
            "PlatformStreamsEndToEndLatencyHigh",
            f"histogram_quantile(0.99, sum by (le, {WHERE}, processor_node_id) "
            f"(rate({e2e}[{t.latency_window}]))) > {t.e2e_p99_seconds:g}",
            t.latency_for,
            "warning",
            "End-to-end latency p99 of {{ $labels.application_id }} is {{ $value | humanizeDuration }}",
            f"Records reach node {{{{ $labels.processor_node_id }}}} more than {t.e2e_p99_seconds:g} s "
            "after their timestamp (99th percentile).",
        ),
        Alert(
            "PlatformStreamsDroppedRecords",
            f"sum by ({task}) (rate(kafka_streams_task_dropped_records_total[{t.dropped_window}])) > 0",
            t.dropped_for,
            "warning",
            "Task {{ $labels.task_id }} of {{ $labels.application_id }} drops records",
            "Records are skipped (bad input handled with CONTINUE, invalid timestamps, late "
            "records, production errors) at {{ $value | humanize }}/s; with a dead-letter topic "
            "they are written there.",
        ),
        Alert(
            "PlatformStreamsDeadLetterRecords",
            f"sum by ({task}) (rate(kafka_streams_task_dead_letter_records_total[{t.dropped_window}])) > 0",
            t.dropped_for,
            "warning",
            "Task {{ $labels.task_id }} of {{ $labels.application_id }} writes to the dead-letter topic",
            "Records that failed deserialization, processing or production are sent to the "
            "dead-letter topic at {{ $value | humanize }}/s.",
        ),
        Alert(
            "PlatformStreamsRestoreStuck",
            f"max by ({task}) (kafka_streams_task_restoring) == 1 and sum by ({task}) "
            f"(rate(kafka_streams_task_restore_total[{t.restore_window}])) == 0",
            t.restore_stuck_for,
            "warning",
            "Restoration of task {{ $labels.task_id }} of {{ $labels.application_id }} makes no progress",
            f"The task has been restoring without restoring a record for {t.restore_stuck_for}.",
        ),
        Alert(
            "PlatformStreamsRebalancingTooLong",
            f'{state}{{state="REBALANCING"}} == 1',
            t.rebalancing_for,
            "warning",
            "Kafka Streams client {{ $labels.client_id }} has been rebalancing for long",
            f"The client has been REBALANCING for {t.rebalancing_for}.",
        ),
        Alert(
            "PlatformStreamsRocksDBErrors",
            f"sum by ({task}, store) (kafka_streams_state_background_errors) > 0",
            t.rocksdb_for,
            "critical",
            "RocksDB store {{ $labels.store }} of task {{ $labels.task_id }} reports background errors",
            "RocksDB counted {{ $value }} background errors (flush/compaction failures: disk full, "
            "I/O errors, corruption); writes may stall or fail.",
        ),
        Alert(
            "PlatformStreamsRocksDBMemoryNearLimit",
            f"max by ({WHERE}) (kafka_streams_state_block_cache_pinned_usage_bytes) / max by ({WHERE}) "
            f"(kafka_streams_state_block_cache_capacity_bytes) > {t.rocksdb_memory_ratio}",
            t.rocksdb_memory_for,
            "warning",
            "RocksDB memory of {{ $labels.instance }} ({{ $labels.application_id }}) is near its limit",
            "Memtables and pinned blocks hold {{ $value | humanizePercentage }} of the block cache, "
            "whose capacity is the instance's rocksdb_memory_budget: the cache cannot evict them, "
            "so RocksDB is about to use more than its budget (and the pod to reach its memory limit).",
        ),
    ]


# ------------------------------------------------------------------------------ compatibility

#: Thread measurements with a counter, a latency histogram and (some) a records histogram.
THREAD_MEASUREMENTS = ("process", "poll", "commit", "punctuate")
RECORDS_MEASUREMENTS = ("process", "poll")
#: (jmx exporter / kineticedge prefix, Confluent jmx-monitoring-stacks prefix) per group.
THREAD_PREFIXES = ("kafka_stream_thread", "kafka_streams_stream_thread_metrics")
TASK_PREFIXES = ("kafka_stream_task", "kafka_streams_stream_task_metrics")
CLIENT_PREFIXES = ("kafka_stream_client", "kafka_streams_stream_metrics")
STATE_PREFIXES = ("kafka_stream_state", "kafka_streams_stream_state_metrics")
TOPIC_PREFIXES = ("kafka_stream_topic", "kafka_streams_stream_topic_metrics")
#: KIP-613's topic-level totals (bytes only exist at recording level DEBUG here)
TOPIC_TOTALS = ("records_consumed", "bytes_consumed", "records_produced", "bytes_produced")


def _record(name: str, expr: str) -> dict[str, str]:
    return {"record": name, "expr": expr}


def _state_id(expr: str) -> str:
    """Our ``store`` label also as ``state_id`` (Kafka Streams' ``*-state-id`` tag)."""
    return f'label_replace({expr}, "state_id", "$1", "store", "(.*)")'


def compat_rules(t: Tuning) -> list[dict[str, str]]:
    """Recording rules: JMX-exporter-style names over our series (latencies in ms, as JMX)."""
    w = t.compat_window
    rules: list[dict[str, str]] = []
    for prefix in THREAD_PREFIXES:
        for m in THREAD_MEASUREMENTS:
            counter = f"kafka_streams_thread_{m}_total"
            hist = f"kafka_streams_thread_{m}_latency_seconds"
            rules += [
                _record(f"{prefix}_{m}_total", counter),
                _record(f"{prefix}_{m}_rate", f"rate({counter}[{w}])"),
                _record(
                    f"{prefix}_{m}_latency_avg", f"1000 * rate({hist}_sum[{w}]) / rate({hist}_count[{w}])"
                ),
                # Kafka Streams' <m>-ratio: the fraction of wall-clock time spent in that phase.
                _record(f"{prefix}_{m}_ratio", f"rate({hist}_sum[{w}])"),
            ]
        for m in RECORDS_MEASUREMENTS:
            hist = f"kafka_streams_thread_{m}_records"
            rules.append(
                _record(f"{prefix}_{m}_records_avg", f"rate({hist}_sum[{w}]) / rate({hist}_count[{w}])")
            )
    for prefix in TASK_PREFIXES:
        dropped = "kafka_streams_task_dropped_records_total"
        rules += [
            _record(f"{prefix}_dropped_records_total", dropped),
            _record(f"{prefix}_dropped_records_rate", f"rate({dropped}[{w}])"),
            _record(f"{prefix}_restore_total", "kafka_streams_task_restore_total"),
            _record(
                f"{prefix}_restore_remaining_records_total", "kafka_streams_task_restore_remaining_records"
            ),
            _record(f"{prefix}_process_total", "kafka_streams_task_process_total"),
        ]
    for prefix in CLIENT_PREFIXES:
        rules += [
            _record(f"{prefix}_state", "kafka_streams_client_state == 1"),
            _record(f"{prefix}_alive_stream_threads", "kafka_streams_client_alive_stream_threads"),
            _record(f"{prefix}_failed_stream_threads", "kafka_streams_client_failed_stream_threads"),
        ]
    for prefix in TOPIC_PREFIXES:
        rules += [_record(f"{prefix}_{m}_total", f"kafka_streams_topic_{m}_total") for m in TOPIC_TOTALS]
    for prefix in STATE_PREFIXES:
        rules += [
            _record(f"{prefix}_estimate_num_keys", _state_id("kafka_streams_state_estimate_num_keys")),
            _record(
                f"{prefix}_size_all_mem_tables", _state_id("kafka_streams_state_size_all_mem_tables_bytes")
            ),
            _record(
                f"{prefix}_total_sst_files_size", _state_id("kafka_streams_state_total_sst_files_size_bytes")
            ),
            _record(
                f"{prefix}_put_rate", _state_id(f"rate(kafka_streams_state_put_latency_seconds_count[{w}])")
            ),
        ]
    rules += [
        # Confluent's dashboard reads the client state as a label of this bare name.
        _record("kafka_streams_stream_metrics", "kafka_streams_client_state == 1"),
        _record(
            "kafka_consumer_consumer_fetch_manager_metrics_records_lag", "kafka_streams_consumer_records_lag"
        ),
    ]
    return rules


def render(tuning: Tuning | None = None) -> dict[str, str]:
    """File name -> the YAML text of that rule file."""
    t = tuning or Tuning()
    files = {
        ALERTS_FILE: {
            "groups": [{"name": "platform-streams.alerts", "rules": [a.rule() for a in alerts(t)]}]
        },
        COMPAT_FILE: {"groups": [{"name": "kafka-streams.jmx-compat", "rules": compat_rules(t)}]},
    }
    header = "# Generated by grafana/generate_rules.py -- edit that, not this file.\n"
    return {
        name: header + yaml.safe_dump(body, sort_keys=False, width=1000, allow_unicode=True)
        for name, body in files.items()
    }


def write(directory: Path, tuning: Tuning | None = None) -> list[Path]:
    """Write the rule files into ``directory`` (a test's Prometheus loads them from there)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in render(tuning).items():
        (directory / name).write_text(text)
        paths.append(directory / name)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if a rule file is out of date")
    args = parser.parse_args(argv)
    stale = [n for n, text in render().items() if not (OUT / n).exists() or (OUT / n).read_text() != text]
    if args.check:
        if stale:
            print(f"out of date: {', '.join(stale)}; run python grafana/generate_rules.py", file=sys.stderr)
            return 1
        return 0
    write(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
