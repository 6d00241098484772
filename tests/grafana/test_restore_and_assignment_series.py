"""Restoration and state-aware assignment series, scraped by a real Prometheus.

* A slowed restore (Kafka Streams' ``restore-remaining-records-total``, KIP-869; the
  metric is StreamTask's ``restoreRemainingSensor``, fed by StoreChangelogReader as batches
  are applied): the changelog of a count store is written directly (8 batches of the
  reader's 1,000 records) and a new instance restores it with a restore listener that holds
  each batch. Prometheus sees the task's remaining count positive and going down, the
  restore then stalls (the listener blocks: what a stuck fetch looks like from outside)
  and PlatformStreamsRestoreStuck and PlatformStreamsRebalancingTooLong fire on the rules
  as committed (short ``for:``/windows); once let go, the remaining count is 0 and the
  restored total is the whole changelog.
* Warm-ups (KIP-441): a second instance joins one whose store is not small (acceptable
  recovery lag 10): it first holds the task that is to move as a warm-up -- the per-client
  role gauge and ``/state`` say so, with the lag the leader saw -- and takes it over at a
  probing rebalance. The warm-up's changelog records count in ``update-total``, not in
  ``restore-total`` (KIP-869), and the rebalance latency gauge is set.
* Standbys: two instances with ``num_standby_replicas=1`` each show one active and one
  standby task (gauge and ``/state``); the standbys' changelog records count in
  ``update-total`` only.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, State, StreamsBuilder
from platform_streams.dsl import Consumed, Materialized
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.serde import String
from platform_streams.state.restore import StateRestoreListener
from tests.grafana.rules_support import SHORT, generate_rules
from tests.integration.support_apps import app_config, new_app_id, wait_until
from tests.support.kafka import new_topic, produce
from tests.support.prometheus import PrometheusServer, running_prometheus

pytestmark = [pytest.mark.grafana, pytest.mark.broker, pytest.mark.slow]

BATCH = 1_000  # the changelog reader's batch
RECORDS = 8 * BATCH
STALL_AT = 5  # the restore stalls after this many batches
#: The committed rules, with windows a test can wait for.
TUNING = dataclasses.replace(SHORT, restore_window="10s", restore_stuck_for="5s", rebalancing_for="20s")


def _count_app(source: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=String(), value_serde=String())).group_by_key().count(
        materialized=Materialized.as_("counts")
    )
    return builder


class HeldRestore(StateRestoreListener):
    """Holds the first batch until ``go``, each next one ``pace_s``, and batch ``STALL_AT``
    until ``release``: a restore slow enough to be scraped, then one that makes no progress."""

    def __init__(self, pace_s: float = 1.0) -> None:
        self.pace_s = pace_s
        self.batches = 0
        self.go = threading.Event()
        self.stalled = threading.Event()
        self.release = threading.Event()

    def on_batch_restored(
        self, store_name: str, tp: tuple[str, int], batch_end_offset: int, num_restored: int
    ) -> None:
        self.batches += 1
        if self.batches == 1:
            self.go.wait(120)
        if self.batches < STALL_AT:
            self.release.wait(self.pace_s)
        elif self.batches == STALL_AT:
            self.stalled.set()
            self.release.wait(180)


def _value(prometheus: PrometheusServer, expr: str) -> float | None:
    result = prometheus.query(expr)
    return float(result[0]["value"][1]) if result else None


@pytest.mark.apache_kafka  # the log end comes from fetch responses: both brokers' answers
def test_a_slowed_restore_counts_down_its_remaining_records_and_a_stall_fires_the_alerts(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 1, "restore-in")
    app_id = new_app_id("restore")
    changelog = f"{app_id}-counts-changelog"
    admin.create_topics([TopicSpec(changelog, 1, config={"cleanup.policy": "compact"})])
    produce(bootstrap_servers, changelog, [(f"k{i}", struct.pack(">q", 1)) for i in range(RECORDS)])
    config = app_config(
        bootstrap_servers,
        tmp_path / "state",
        app_id,
        http_port=0,
        max_poll_interval_ms=300_000,  # the worker does not poll while its restore is held
    )
    held = HeldRestore()
    streams = KafkaStreams(_count_app(source).build(), config)
    streams.set_global_state_restore_listener(held)
    selector = f'{{application_id="{app_id}"}}'
    remaining = f"kafka_streams_task_restore_remaining_records{selector}"
    with ExitStack() as stack:
        streams.start()
        stack.callback(streams.close, timeout_s=30)
        stack.callback(held.release.set)  # never leave the worker blocked
        assert streams.http_server is not None
        rules = generate_rules.write(tmp_path / "rules", TUNING)
        prometheus = stack.enter_context(
            running_prometheus(
                [f"127.0.0.1:{streams.http_server.address.port}"], tmp_path / "prometheus", rule_files=rules
            )
        )
        prometheus.wait_for(f"{remaining} > 0", timeout_s=60)
        held.go.set()
        wait_until(held.stalled.is_set, 120, "the restore to reach the stall")
        left = RECORDS - STALL_AT * BATCH  # a fresh, non-transactional changelog: dense offsets
        prometheus.wait_for(f"{remaining} == {left}", timeout_s=30)
        assert _value(prometheus, f"kafka_streams_task_restoring{selector}") == 1

        stuck = prometheus.wait_for_alert("PlatformStreamsRestoreStuck", timeout_s=120)
        assert stuck["labels"]["application_id"] == app_id and stuck["labels"]["task_id"] == "0_0"
        rebalancing = prometheus.wait_for_alert("PlatformStreamsRebalancingTooLong", timeout_s=120)
        assert rebalancing["labels"]["application_id"] == app_id

        history = prometheus.query(f"{remaining}[5m]")
        assert len(history) == 1, history
        seen = [int(float(v)) for _, v in history[0]["values"]]
        assert all(v > 0 for v in seen), seen
        assert seen == sorted(seen, reverse=True), f"the remaining count went up: {seen}"
        assert len(set(seen)) >= 3, f"too few steps of the slowed restore seen: {seen}"
        assert seen[-1] == left and seen[0] >= left + 2 * BATCH, seen

        held.release.set()
        streams.wait_for_state(State.RUNNING, timeout_s=60)
        prometheus.wait_for(f"{remaining} == 0", timeout_s=30)
        prometheus.wait_for(f"kafka_streams_task_restore_total{selector} == {RECORDS}", timeout_s=30)
        # a scrape between the last batch and the restore's end sees 0 remaining but still
        # restoring: the restoring gauge's drop comes with a later scrape
        prometheus.wait_for(f"kafka_streams_task_restoring{selector} == 0", timeout_s=30)
        # the single client runs the one task as active; the rebalance latency is known
        prometheus.wait_for(
            f'kafka_streams_client_assigned_tasks{{role="active",application_id="{app_id}"}} == 1'
        )
        prometheus.wait_for(f"kafka_streams_client_rebalance_latency_seconds{selector} > 0")


# ------------------------------------------------------------------------------ warm-ups


@contextmanager
def _instance(
    bootstrap: str, app_id: str, source: str, state_dir: Path, **overrides: Any
) -> Iterator[KafkaStreams]:
    config = app_config(
        bootstrap,
        state_dir,
        app_id,
        http_port=0,
        statestore_cache_max_bytes=0,  # one changelog record per input record
        acceptable_recovery_lag=10,
        probing_rebalance_interval_ms=4_000,
        **overrides,
    )
    streams = KafkaStreams(_count_app(source).build(), config)
    streams.start()
    try:
        yield streams
    finally:
        streams.close(timeout_s=30)


def _address(streams: KafkaStreams) -> str:
    assert streams.http_server is not None
    return f"127.0.0.1:{streams.http_server.address.port}"


def _state(streams: KafkaStreams) -> dict[str, Any]:
    # 30 s: the worker answers on a thread of this (busy) process; at load 25 a GET took
    # over 5 s, and the timeout escaped the poll that called it
    with urllib.request.urlopen(f"http://{_address(streams)}/state", timeout=30) as response:
        return dict(json.load(response))


def test_a_joining_instance_warms_up_before_taking_a_task_and_its_updates_are_no_restore(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 2, "warm-in")
    app_id = new_app_id("warm")
    keys = 200
    with ExitStack() as stack:
        first = stack.enter_context(_instance(bootstrap_servers, app_id, source, tmp_path / "a"))
        first.wait_for_state(State.RUNNING, timeout_s=60)
        produce(bootstrap_servers, source, [(f"k{i % keys}", "v") for i in range(2_000)])
        wait_until(lambda: sum(w.processed_total for w in first.workers) >= 2_000, 60, "the input processed")
        second = stack.enter_context(_instance(bootstrap_servers, app_id, source, tmp_path / "b"))
        joined = _address(second)
        prometheus = stack.enter_context(
            running_prometheus([_address(first), joined], tmp_path / "prometheus")
        )
        # /state: the newcomer holds a task as a warm-up, with the lag the leader saw
        warm = wait_until(
            lambda: {t: v for t, v in _state(second)["tasks"].items() if v["role"] == "warmup"},
            60,
            "a warm-up on the joining instance",
            interval_s=0.02,
        )
        (task, view), *_ = warm.items()
        assert view["lag_at_assignment"] is None or view["lag_at_assignment"] > 10, view
        at = f'instance="{joined}"'
        prometheus.wait_for(f'kafka_streams_client_assigned_tasks{{{at},role="warmup"}} >= 1', timeout_s=30)
        # the probing rebalance moves the task once the warm-up caught up
        wait_until(
            lambda: _state(second)["tasks"].get(task, {}).get("role") == "active",
            90,
            "the warmed-up task to move",
        )
        prometheus.wait_for(f'kafka_streams_client_assigned_tasks{{{at},role="active"}} >= 1', timeout_s=30)
        prometheus.wait_for(f'kafka_streams_client_assigned_tasks{{{at},role="warmup"}} == 0', timeout_s=30)
        # KIP-869: the warm-up's changelog records are updates; the move restored no more
        # than the tail behind the warm-up (within the acceptable lag)
        task_at = f'{at},task_id="{task}"'
        # (the series goes when the standby updater lets the task go: its last value)
        updated = prometheus.wait_for(
            f"max_over_time(kafka_streams_task_update_total{{{task_at}}}[5m]) > 0", timeout_s=30
        )
        assert float(updated[0]["value"][1]) >= 500
        restored = _value(prometheus, f"sum(kafka_streams_task_restore_total{{{task_at}}})")
        assert restored is None or restored <= 10, restored
        prometheus.wait_for(f"kafka_streams_client_rebalance_latency_seconds{{{at}}} > 0")


def test_two_instances_with_a_standby_each_show_the_roles_and_count_standby_updates_apart(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """num_standby_replicas=1 on two instances and two tasks: each runs one task active and
    keeps the other's standby; the standby's changelog records are updates (KIP-869)."""
    source = new_topic(admin, 2, "standby-in")
    app_id = new_app_id("standby")
    with ExitStack() as stack:
        group = [
            stack.enter_context(
                _instance(bootstrap_servers, app_id, source, tmp_path / name, num_standby_replicas=1)
            )
            for name in ("a", "b")
        ]
        prometheus = stack.enter_context(
            running_prometheus([_address(s) for s in group], tmp_path / "prometheus")
        )
        for streams in group:
            at = f'instance="{_address(streams)}"'
            for role in ("active", "standby"):
                prometheus.wait_for(f'kafka_streams_client_assigned_tasks{{{at},role="{role}"}} == 1', 90)
        views = [_state(s)["tasks"] for s in group]
        assert [sorted(v["role"] for v in view.values()) for view in views] == [["active", "standby"]] * 2
        actives = {t for view in views for t, v in view.items() if v["role"] == "active"}
        assert actives == {"0_0", "0_1"}, views
        produce(bootstrap_servers, source, [(f"k{i}", "v") for i in range(200)])
        wait_until(lambda: sum(w.processed_total for s in group for w in s.workers) >= 200, 60, "processed")
        # every standby applies its active's changelog: update-total, never restore-total
        updated = prometheus.wait_for(
            f'count(kafka_streams_task_update_total{{application_id="{app_id}"}} > 0) == 2', 60
        )
        assert updated
        for streams, view in zip(group, views, strict=True):
            (standby,) = [t for t, v in view.items() if v["role"] == "standby"]
            restored = _value(
                prometheus,
                f'sum(kafka_streams_task_restore_total{{instance="{_address(streams)}",task_id="{standby}"}})',
            )
            # (0 when the instance ran the task as active before the other one joined)
            assert not restored, f"a standby's updates counted as restoration: {restored}"
