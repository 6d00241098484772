"""The alerting and recording rules: generated, valid for promtool, and each alert's logic.

``promtool check rules`` validates the committed files. ``promtool test rules`` (Prometheus'
own rule unit-test runner) then feeds every alert synthetic series for a faulty and a
healthy worker and checks that it fires after its ``for:`` and only then -- the only way to
exercise alerts a test cannot put a real worker into (RocksDB background errors, a restore
that stops progressing, a rebalance that lasts ten minutes). ``test_alerts.py`` makes the
others fire against real workers.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.grafana.dashboard_support import REPO
from tests.grafana.rules_support import generate_rules

RULES = REPO / "grafana" / "rules"
RUNBOOKS = REPO / "docs" / "runbooks.md"

L = 'application_id="app", client_id="app-1", job="ps", instance="w:8080", namespace="ns", pod="app-0"'
THREAD = f'{L}, thread_id="app-1-StreamThread-1"'
TASK = f'{THREAD}, task_id="0_1"'


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("needs promtool (Debian package 'prometheus'; .ci/run installs it)")
    return found


def _series(name: str, labels: str, values: str) -> dict[str, str]:
    return {"series": f"{name}{{{labels}}}", "values": values}


def _case(
    alert: str, faulty: list[dict[str, str]], healthy: list[dict[str, str]], fires_at: str, quiet_at: str
) -> list[dict[str, Any]]:
    """Two promtool tests: ``faulty`` series fire ``alert`` at ``fires_at`` but not yet at
    ``quiet_at`` (before its ``for:`` has passed); ``healthy`` series never fire it."""
    firing = f'count(ALERTS{{alertname="{alert}", alertstate="firing"}})'
    fired = {"expr": firing, "eval_time": fires_at, "exp_samples": [{"labels": "{}", "value": 1}]}
    not_yet = {"expr": firing, "eval_time": quiet_at, "exp_samples": []}
    never = {"expr": firing, "eval_time": fires_at, "exp_samples": []}
    return [
        {
            "name": f"{alert} fires",
            "interval": "1m",
            "input_series": faulty,
            "promql_expr_test": [fired, not_yet],
        },
        {
            "name": f"{alert} stays quiet",
            "interval": "1m",
            "input_series": healthy,
            "promql_expr_test": [never],
        },
    ]


def _state(state: str, values: str) -> dict[str, str]:
    return _series("kafka_streams_client_state", f'{L}, state="{state}"', values)


def _e2e(le: str, values: str) -> dict[str, str]:
    return _series(
        "kafka_streams_processor_node_record_e2e_latency_seconds_bucket",
        f'{TASK}, processor_node_id="KSTREAM-SOURCE-0000000000", le="{le}"',
        values,
    )


LAG = "kafka_streams_consumer_records_lag"
LAG_LABELS = f'{THREAD}, topic="in", partition="0"'
STORE = f'{TASK}, store="counts", store_type="rocksdb-state"'

#: alert -> (faulty series, healthy series, fires at, quiet at): with the default ``for:``s.
CASES: dict[str, list[dict[str, Any]]] = {
    "PlatformStreamsClientError": _case(
        "PlatformStreamsClientError",
        [_state("ERROR", "0x2 1x10"), _state("RUNNING", "1x2 0x10")],
        [_state("ERROR", "0x12"), _state("RUNNING", "1x12")],
        "5m",
        "3m",
    ),
    "PlatformStreamsClientNotRunning": _case(
        "PlatformStreamsClientNotRunning",
        [_state("RUNNING", "1x2 0x12"), _state("REBALANCING", "0x14")],
        [_state("RUNNING", "1x2 0x12"), _state("REBALANCING", "0x2 1x12")],
        "10m",
        "6m",
    ),
    "PlatformStreamsStreamThreadFailed": _case(
        "PlatformStreamsStreamThreadFailed",
        [_series("kafka_streams_client_failed_stream_threads", L, "0x10 1x30")],
        [_series("kafka_streams_client_failed_stream_threads", L, "0x40")],
        "12m",
        "10m",
    ),
    "PlatformStreamsConsumerLagGrowing": _case(
        "PlatformStreamsConsumerLagGrowing",
        [_series(LAG, LAG_LABELS, "0+10x30")],
        [_series(LAG, LAG_LABELS, "0+10x5 50x25")],  # a burst, then steady: not growing
        "20m",
        "10m",
    ),
    "PlatformStreamsEndToEndLatencyHigh": _case(
        "PlatformStreamsEndToEndLatencyHigh",
        [_e2e("10", "0x30"), _e2e("120", "0+10x30"), _e2e("+Inf", "0+10x30")],
        [_e2e("10", "0+10x30"), _e2e("120", "0+10x30"), _e2e("+Inf", "0+10x30")],
        "20m",
        "10m",
    ),
    "PlatformStreamsDroppedRecords": _case(
        "PlatformStreamsDroppedRecords",
        [_series("kafka_streams_task_dropped_records_total", TASK, "0+5x20")],
        [_series("kafka_streams_task_dropped_records_total", TASK, "5x20")],
        "15m",
        "5m",
    ),
    "PlatformStreamsDeadLetterRecords": _case(
        "PlatformStreamsDeadLetterRecords",
        [_series("kafka_streams_task_dead_letter_records_total", TASK, "0x5 1+2x15")],
        [_series("kafka_streams_task_dead_letter_records_total", TASK, "0x20")],
        "15m",
        "7m",
    ),
    "PlatformStreamsRestoreStuck": _case(
        "PlatformStreamsRestoreStuck",
        [
            _series("kafka_streams_task_restoring", TASK, "1x30"),
            _series("kafka_streams_task_restore_total", TASK, "0+100x5 500x25"),
        ],
        [
            _series("kafka_streams_task_restoring", TASK, "1x30"),
            _series("kafka_streams_task_restore_total", TASK, "0+100x30"),
        ],
        "25m",
        "12m",
    ),
    "PlatformStreamsRebalancingTooLong": _case(
        "PlatformStreamsRebalancingTooLong",
        [_state("REBALANCING", "1x20")],
        [_state("REBALANCING", "1x5 0x5 1x5 0x5")],
        "15m",
        "5m",
    ),
    "PlatformStreamsRocksDBErrors": _case(
        "PlatformStreamsRocksDBErrors",
        [_series("kafka_streams_state_background_errors", STORE, "0x5 1x10")],
        [_series("kafka_streams_state_background_errors", STORE, "0x15")],
        "8m",
        "6m",
    ),
    # 32 MiB budget: pinned usage (memtables charged to the cache) climbs past 90 % and stays
    "PlatformStreamsRocksDBMemoryNearLimit": _case(
        "PlatformStreamsRocksDBMemoryNearLimit",
        [
            _series("kafka_streams_state_block_cache_capacity_bytes", STORE, "33554432x20"),
            _series("kafka_streams_state_block_cache_pinned_usage_bytes", STORE, "8000000x3 31000000x17"),
        ],
        [
            _series("kafka_streams_state_block_cache_capacity_bytes", STORE, "33554432x20"),
            _series("kafka_streams_state_block_cache_pinned_usage_bytes", STORE, "8000000x3 25000000x17"),
        ],
        "10m",
        "6m",
    ),
}


def _alert_names(path: Path) -> list[str]:
    groups = yaml.safe_load(path.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]


def test_the_committed_rules_are_what_the_generator_produces() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "grafana" / "generate_rules.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_promtool_accepts_the_rule_files() -> None:
    files = sorted(RULES.glob("*.rules.yml"))
    assert len(files) == 2
    done = subprocess.run([_promtool(), "check", "rules", *map(str, files)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 11 rules found" in done.stdout


def test_every_alert_fires_on_faulty_series_after_its_for_and_never_on_healthy_ones(tmp_path: Path) -> None:
    alerts = _alert_names(RULES / generate_rules.ALERTS_FILE)
    assert sorted(alerts) == sorted(CASES), "every alert needs a promtool case (and only those)"
    spec = {
        "rule_files": [str(RULES / generate_rules.ALERTS_FILE)],
        "evaluation_interval": "1m",
        "tests": [test for cases in CASES.values() for test in cases],
    }
    path = tmp_path / "alerts.test.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    done = subprocess.run([_promtool(), "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_runbook_paragraph() -> None:
    text = RUNBOOKS.read_text()
    headings = {m.group(1) for m in re.finditer(r"^### (\w+)$", text, re.MULTILINE)}
    for alert in _alert_names(RULES / generate_rules.ALERTS_FILE):
        assert alert in headings, f"docs/runbooks.md has no '### {alert}' section"
        body = text.split(f"### {alert}\n", 1)[1].split("\n### ", 1)[0].strip()
        assert len(body.split()) >= 30, f"the runbook of {alert} is too short to act on"


def test_short_tuning_renders_the_durations_a_test_asks_for() -> None:
    rendered = generate_rules.render(generate_rules.Tuning(error_for="1s", lag_window="10s"))
    rules = yaml.safe_load(rendered[generate_rules.ALERTS_FILE])["groups"][0]["rules"]
    by_name = {rule["alert"]: rule for rule in rules}
    assert by_name["PlatformStreamsClientError"]["for"] == "1s"
    assert "[10s]" in by_name["PlatformStreamsConsumerLagGrowing"]["expr"]
