"""The Grafana dashboards against a real worker scraped by a real Prometheus.

One stateful application (a count with a RocksDB store, a dead-letter topic and a few
undeserializable records) runs twice: the first run fills the changelog and closes, the
second starts on an empty state directory and so restores the store. Prometheus scrapes the
second run every second while records keep arriving. Then every PromQL expression of every
dashboard -- panel targets and variable queries, with template variables resolved as
Grafana resolves them -- must return data, and every metric name the dashboards read must
be one the worker exports on ``/metrics``.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from platform_streams import KafkaStreams, State, StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.serde import Json, Long, String
from tests.grafana.dashboard_support import (
    REPO,
    expressions,
    load_dashboards,
    metric_names,
    panels,
    parse_label_values,
    referenced_variables,
    substitute,
    variable_query,
    variables,
)
from tests.grafana.rules_support import SHORT, generate_rules
from tests.integration.support_apps import APP_TIMING, Ticking, wait_until
from tests.support.kafka import new_topic, produce
from tests.support.prometheus import PrometheusServer, running_prometheus

pytestmark = [pytest.mark.grafana, pytest.mark.broker]

S, J, L = String(), Json(), Long()
KEYS = 20
PARTITIONS = 2
BACKFILL_AGE_MS = 600_000
#: Where Kubernetes service discovery would put the worker (the namespace/pod variables).
TARGET_LABELS = {"namespace": "streams", "pod": "grafana-worker-0"}
#: The rules as committed, but with ``for:`` and windows short enough for a test.


@dataclass
class Live:
    """The running worker, the Prometheus scraping it, and what it exported."""

    prometheus: PrometheusServer
    application_id: str
    instance: str
    exported: set[str]


async def _looked_up(value: object) -> None:
    """An I/O call of an async processor."""
    await asyncio.sleep(0.001)


def _count_app(source: str, sink: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    stream = builder.stream(source, Consumed(key_serde=S, value_serde=J))
    stream.process(Ticking)  # the punctuate panels
    stream.foreach_async(_looked_up)  # the async processor panels
    (
        stream.group_by_key()
        .count(materialized=Materialized.as_("counts"))
        .to_stream()
        .to(sink, Produced(key_serde=S, value_serde=L))
    )
    return builder


def _records(start: int, count: int, bad: int = 0) -> list[tuple[str, str]]:
    good = [(f"k{i % KEYS}", json.dumps({"n": i})) for i in range(start, start + count)]
    return good + [(f"k{i}", "{not json") for i in range(bad)]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def _exported_names(exposition: str) -> set[str]:
    """Sample names of a Prometheus text exposition (``name{...} value`` lines)."""
    names = set()
    for line in exposition.splitlines():
        if line and not line.startswith("#"):
            names.add(line.split("{", 1)[0].split(" ", 1)[0])
    return names


def _producing(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """Keep records (and now and then a bad one) arriving while Prometheus scrapes, stamped
    ten minutes in the past (a back-fill): end-to-end latency is then far above the alert's
    threshold."""
    batch = 0
    while not stop.wait(0.2):
        stamp = int(time.time() * 1000) - BACKFILL_AGE_MS
        records = _records(10_000 + batch * 10, 10, bad=1 if batch % 5 == 0 else 0)
        produce(bootstrap, topic, records, timestamp_ms=stamp)
        batch += 1


@pytest.fixture(scope="module")
def live(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("grafana")
    source, sink = new_topic(admin, PARTITIONS, "gf-in"), new_topic(admin, PARTITIONS, "gf-out")
    dlq = new_topic(admin, 1, "gf-dlq")
    app_id = f"grafana-{uuid.uuid4().hex[:10]}"
    settings: dict[str, Any] = {
        "application_id": app_id,
        "bootstrap_servers": bootstrap_servers,
        "commit_interval_ms": 200,
        "metrics_recording_level": "DEBUG",  # the store-operation and per-task panels
        "statestore_cache_max_bytes": 2048,  # small: the cache evicts
        "deserialization_exception_handler": "log_and_continue",
        "errors_dead_letter_queue_topic_name": dlq,
        "http_port": 0,
        # librdkafka statistics -> the kafka_streams_librdkafka_* gauges and their panels
        "consumer_config": {"statistics.interval.ms": 500},
        "producer_config": {"statistics.interval.ms": 500},
        **APP_TIMING,
    }
    topology = _count_app(source, sink).build()
    produce(bootstrap_servers, source, _records(0, 400, bad=3))

    # First run: fills the store's changelog, then closes.
    first = KafkaStreams(topology, StreamsConfig(**settings, state_dir=tmp / "state-1"))
    first.start()
    try:
        # 90 s: a group join and 400 records took over 30 s at load 25
        wait_until(
            lambda: sum(w.processed_total for w in first.workers) >= 400, 90, "the first run to process"
        )
    finally:
        assert first.close(timeout_s=30)

    # Second run on an empty state directory: restores the store from the changelog.
    second = KafkaStreams(
        _count_app(source, sink).build(), StreamsConfig(**settings, state_dir=tmp / "state-2")
    )
    stop = threading.Event()
    feeder = threading.Thread(target=_producing, args=(bootstrap_servers, source, stop), daemon=True)
    second.start()
    try:
        second.wait_for_state(State.RUNNING, timeout_s=90)
        assert second.http_server is not None
        port = second.http_server.address.port
        instance = f"127.0.0.1:{port}"
        feeder.start()
        rules = generate_rules.write(tmp / "rules", SHORT)
        with running_prometheus(
            [instance], tmp / "prometheus", rule_files=rules, target_labels=TARGET_LABELS
        ) as prometheus:
            # Enough history for every rate window: a few scrapes after restore and processing.
            prometheus.wait_for("count_over_time(kafka_streams_thread_poll_total[30s]) >= 6")
            prometheus.wait_for("sum(kafka_streams_task_restore_total) > 0")
            prometheus.wait_for("sum(kafka_streams_task_dropped_records_total) > 0")
            yield Live(prometheus, app_id, instance, _exported_names(_scrape(port)))
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join(timeout=10)
        assert second.close(timeout_s=30)


def _resolve_variables(live: Live, dashboard: dict[str, Any]) -> dict[str, list[str]]:
    """Each query variable's values as Grafana would list them (in order: later variables'
    queries use earlier ones); every variable must offer at least one value."""
    values: dict[str, list[str]] = {"datasource": ["prometheus"]}
    for variable in variables(dashboard):
        if variable["type"] != "query":
            continue
        match, label = parse_label_values(variable_query(variable))
        series = live.prometheus.series(substitute(match, values))
        found = sorted({s[label] for s in series if label in s})
        assert found, f"variable ${variable['name']} ({variable_query(variable)}) lists no value"
        values[variable["name"]] = found
    return values


def _has_finite_sample(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(item["value"][1])) for item in result)


# ------------------------------------------------------------------------------ tests


def test_the_committed_dashboards_are_what_the_generator_produces() -> None:
    script = REPO / "grafana" / "generate_dashboards.py"
    done = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_dashboards_are_valid_grafana_json_wired_to_the_datasource_variable() -> None:
    dashboards = load_dashboards()
    assert {"overview", "state-stores", "tasks", "errors"} == {
        name.removeprefix("platform-streams-").removesuffix(".json") for name in dashboards
    }
    uids = [d["uid"] for d in dashboards.values()]
    assert len(set(uids)) == len(uids)
    for name, dashboard in dashboards.items():
        assert 0 < len(dashboard["uid"]) <= 40 and dashboard["title"] and dashboard["schemaVersion"] >= 36, (
            name
        )
        defined = {v["name"]: v for v in variables(dashboard)}
        assert (
            defined["datasource"]["type"] == "datasource" and defined["datasource"]["query"] == "prometheus"
        )
        assert {"application_id", "namespace", "pod", "instance"} <= defined.keys(), name
        for variable in defined.values():
            if variable["type"] == "query":
                assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, variable[
                    "name"
                ]
        ids = [p["id"] for p in panels(dashboard)]
        assert len(set(ids)) == len(ids), f"{name}: duplicate panel ids"
        used: set[str] = set()
        for panel in panels(dashboard):
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, (name, panel["title"])
            if panel["type"] == "row":
                continue
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, (
                name,
                panel["title"],
            )
            assert panel["targets"], (name, panel["title"])
            for target in panel["targets"]:
                assert target["datasource"] == panel["datasource"] and target["refId"] and target["expr"]
                used |= referenced_variables(target["expr"])
                assert "application_id" in target["expr"] or "process_" in target["expr"], target["expr"]
        assert used - {"__rate_interval", "__interval", "__range"} <= defined.keys(), name


def test_the_provisioning_files_point_grafana_at_prometheus_and_the_dashboards() -> None:
    provisioning = REPO / "grafana" / "provisioning"
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "platform-streams.yaml").read_text())[
        "datasources"
    ]
    assert datasource["type"] == "prometheus" and datasource["jsonData"]["timeInterval"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "platform-streams.yaml").read_text())[
        "providers"
    ]
    assert provider["type"] == "file" and provider["options"]["path"]


def test_every_dashboard_query_returns_data_on_a_real_prometheus(live: Live) -> None:
    empty: list[str] = []
    checked = 0
    for name, dashboard in load_dashboards().items():
        values = _resolve_variables(live, dashboard)
        assert live.application_id in values["application_id"] and live.instance in values["instance"], name
        values["application_id"], values["instance"] = [live.application_id], [live.instance]
        for expression in expressions(name, dashboard):
            query = substitute(expression.expr, values)
            deadline = time.monotonic() + 15
            while True:
                result = live.prometheus.query(query)
                if result and _has_finite_sample(result):
                    break
                if time.monotonic() > deadline:
                    empty.append(f"{name} {expression.where}: {query} -> {result}")
                    break
                time.sleep(0.5)
            checked += 1
    assert not empty, "queries without data:\n" + "\n".join(empty)
    assert checked >= 60


def test_dashboards_read_only_metrics_the_worker_exports(live: Live) -> None:
    read: dict[str, set[str]] = {}
    for name, dashboard in load_dashboards().items():
        for expression in expressions(name, dashboard):
            for metric in metric_names(expression.expr):
                read.setdefault(metric, set()).add(f"{name} {expression.where}")
    assert any(m.startswith("kafka_streams_state_") for m in read) and len(read) >= 30
    unknown = {metric: sorted(where) for metric, where in read.items() if metric not in live.exported}
    assert not unknown, f"metrics the worker does not export: {unknown}"


def test_metric_name_parsing() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, store) (rate(kafka_streams_state_put_latency_seconds_bucket"
        '{application_id=~"$application_id", store=~"a|b"}[$__rate_interval]))) / on (instance) '
        "sum(rate(process_cpu_seconds_total[5m])) and topk(3, up)"
    )
    assert metric_names(expr) == {
        "kafka_streams_state_put_latency_seconds_bucket",
        "process_cpu_seconds_total",
        "up",
    }
    assert substitute(
        'x{a=~"$instance", b="${task_id}"}[$__rate_interval]',
        {"instance": ["h:1", "h:2"], "task_id": ["0_1"]},
    ) == ('x{a=~"(h:1|h:2)", b="0_1"}[10s]')
    assert sorted(metric_names("1 - kafka_streams_client_state")) == ["kafka_streams_client_state"]
    assert Path(REPO / "grafana" / "dashboards").is_dir()


# ------------------------------------------------------------------------------ rules on the live worker

#: Queries of public Kafka Streams dashboards, verbatim, with their template variables.
#: kineticedge/kafka-streams-dashboards, monitoring/grafana/dashboards/streams/02_streams_thread.json
#: (JMX exporter names, ``${measurement}`` in commit/poll/process/punctuate):
KINETICEDGE_THREAD = [
    'sum without(job,instance,thread) (kafka_stream_thread_${measurement}_total{job=~"${job}", '
    'instance=~"${instance}", thread_id=~"${thread}"} * on (job, instance) group_left(application_id) '
    'kafka_stream_client_state{application_id=~"${application}"})',
    'sum (kafka_stream_thread_${measurement}_total{job=~"${job}", instance=~"${instance}", '
    'thread_id=~"${thread}"})',
    'sum without(job,instance,thread) (kafka_stream_thread_${measurement}_rate{instance=~"${instance}", '
    'thread_id=~"${thread}", job=~"${job}"})',
    "avg without(job,instance,thread) ((kafka_stream_thread_${measurement}_ratio{"
    'instance=~"${instance}", thread_id=~"${thread}", job=~"${job}"}) >=0)',
    'sum without(job,instance,thread) (rate(kafka_stream_thread_${measurement}_total{thread_id=~"${thread}", '
    'instance=~"${instance}", job=~"${job}"}[$__rate_interval]))',
]
KINETICEDGE_RECORDS = [
    "avg without(job,instance,thread) (kafka_stream_thread_${measurement}_records_avg{"
    'instance=~"${instance}", thread_id=~"${thread}", job=~"${job}"})',
]
KINETICEDGE_VARIABLE = (
    'label_values(kafka_stream_client_state{job=~"${job}", application_id=~".+"}, application_id)'
)
#: confluentinc/jmx-monitoring-stacks, jmxexporter-prometheus-grafana/assets/grafana/provisioning/
#: dashboards/kafka-stream.json (``env`` is that stack's own target label; empty = absent here).
CONFLUENT = [
    'sum(kafka_streams_stream_metrics{state!="", env="$env"})',
    ' sum(kafka_streams_stream_task_metrics_dropped_records_total{ env="$env"})',
    ' avg(kafka_streams_stream_thread_metrics_process_latency_avg{ env="$env"})',
]


def _eventually(prometheus: PrometheusServer, query: str, timeout_s: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        result = prometheus.query(query)
        if result and _has_finite_sample(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"no finite data for {query!r}: {result}")
        time.sleep(0.5)


def test_public_kafka_streams_dashboards_queries_work_through_the_compatibility_rules(live: Live) -> None:
    values = {
        "job": ["platform-streams"],
        "instance": [live.instance],
        "thread": [".+"],
        "application": [live.application_id],
        "env": [""],
    }
    match, label = parse_label_values(KINETICEDGE_VARIABLE)
    listed = {s[label] for s in live.prometheus.series(substitute(match, values)) if label in s}
    assert live.application_id in listed
    for measurement in ("commit", "poll", "process", "punctuate"):
        for query in KINETICEDGE_THREAD:
            result = _eventually(live.prometheus, substitute(query, {**values, "measurement": [measurement]}))
            assert all(s["metric"]["thread_id"].endswith("-StreamThread-1") for s in result if s["metric"])
    for measurement in ("poll", "process"):
        for query in KINETICEDGE_RECORDS:
            _eventually(live.prometheus, substitute(query, {**values, "measurement": [measurement]}))
    running, dropped, latency = (_eventually(live.prometheus, substitute(q, values)) for q in CONFLUENT)
    assert float(running[0]["value"][1]) == 1  # one client, in one state
    assert float(dropped[0]["value"][1]) > 0  # the bad records
    assert 0 <= float(latency[0]["value"][1]) < 1000  # milliseconds, as JMX
    # the same numbers as our own series: the total is the total, the store id is ours
    ours = live.prometheus.query("sum(kafka_streams_thread_process_total)")
    theirs = live.prometheus.query("sum(kafka_stream_thread_process_total)")
    assert abs(float(ours[0]["value"][1]) - float(theirs[0]["value"][1])) <= 200  # one evaluation apart
    keys = _eventually(live.prometheus, 'kafka_stream_state_estimate_num_keys{state_id="counts"}')
    assert {s["metric"]["task_id"] for s in keys} == {"0_0", "0_1"}
    # KIP-613 topic-level and KIP-869 restore names, as the JMX exporter spells them
    for prefix in ("kafka_stream_topic", "kafka_streams_stream_topic_metrics"):
        for name in ("records_consumed", "bytes_consumed", "records_produced", "bytes_produced"):
            assert _eventually(live.prometheus, f"{prefix}_{name}_total > 0")
    remaining = _eventually(live.prometheus, "kafka_stream_task_restore_remaining_records_total")
    assert {s["metric"]["task_id"] for s in remaining} == {"0_0", "0_1"}


def test_dropped_records_and_end_to_end_latency_alerts_fire_on_the_live_worker(live: Live) -> None:
    """Bad records are dropped (dead-lettered) and back-filled records are ten minutes old:
    the alerts (short ``for:``, the committed thresholds) fire with the worker's labels;
    the healthy conditions do not."""
    dropped = live.prometheus.wait_for_alert("PlatformStreamsDroppedRecords")
    assert dropped["labels"]["application_id"] == live.application_id
    assert dropped["labels"]["namespace"] == "streams" and dropped["labels"]["pod"] == "grafana-worker-0"
    assert dropped["annotations"]["runbook_url"] == "docs/runbooks.md#platformstreamsdroppedrecords"
    dead_letters = live.prometheus.wait_for_alert("PlatformStreamsDeadLetterRecords")
    assert dead_letters["labels"]["application_id"] == live.application_id
    written = live.prometheus.query("sum(kafka_streams_task_dead_letter_records_total)")
    skipped = live.prometheus.query("sum(kafka_streams_task_dropped_records_total)")
    assert 0 < float(written[0]["value"][1]) <= float(skipped[0]["value"][1])  # every bad one, once
    latency = live.prometheus.wait_for_alert("PlatformStreamsEndToEndLatencyHigh")
    assert latency["labels"]["processor_node_id"] == "KSTREAM-SOURCE-0000000000"
    assert float(latency["value"]) > generate_rules.Tuning().e2e_p99_seconds
    firing = {a["labels"]["alertname"] for a in live.prometheus.alerts()}
    healthy = {
        "PlatformStreamsClientError",
        "PlatformStreamsClientNotRunning",
        "PlatformStreamsStreamThreadFailed",
        "PlatformStreamsRocksDBErrors",
    }
    assert not firing & healthy, firing


def test_librdkafka_statistics_reach_prometheus_for_both_clients(live: Live) -> None:
    """``statistics.interval.ms`` on the consumer and the producer: librdkafka's JSON becomes
    a handful of gauges per worker and client, with plausible values."""
    app = f'application_id="{live.application_id}"'
    received = _eventually(live.prometheus, f"kafka_streams_librdkafka_rx_bytes_total{{{app}}} > 0")
    assert {s["metric"]["client"] for s in received} == {"consumer", "producer"}
    sent = _eventually(live.prometheus, f'kafka_streams_librdkafka_tx_bytes_total{{{app},client="producer"}}')
    assert float(sent[0]["value"][1]) > 0  # the count results and changelog records
    rtt = _eventually(live.prometheus, f"kafka_streams_librdkafka_broker_rtt_avg_seconds{{{app}}}")
    assert all(0 <= float(s["value"][1]) < 5 for s in rtt)
    queues = _eventually(live.prometheus, f"kafka_streams_librdkafka_replyq{{{app}}}")
    assert len(queues) == 2 and all(float(s["value"][1]) >= 0 for s in queues)
