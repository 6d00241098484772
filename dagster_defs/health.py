"""Health of a deployed stream application, computed once for checks and the sensor alike.

Each function returns a :class:`CheckOutcome` (passed, metadata, description); the asset
checks turn it into an ``AssetCheckResult`` when a person or a run asks, the sensor into an
``AssetCheckEvaluation`` every time it polls. The numbers come from where they are true:

* **lag** from Kafka -- the group's committed offsets against the log end found by fetching
  (``log_end_offsets``: right on every broker), so a dead application still has lag;
* **workers** from the deployment (are the processes there) and each worker's ``/state``;
* **dead-letter topic** from its log end, compared with the previous sample kept beside
  the deployment record (a DLQ that grows means records are failing *now*);
* **internal topics** from ``platform_streams.ops.validate_internal_topics``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster_defs.deploy.base import DeploymentStatus
from dagster_defs.deploy.worker_client import WorkerClient, WorkerUnreachableError
from dagster_defs.observations import WorkerMetrics
from dagster_defs.spec import ResolvedStreamApp
from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.kafka.authorized import missing_operations, not_allowed
from platform_streams.ops import validate_internal_topics
from platform_streams.ops.dead_letter_reading import dead_letter_counts

__all__ = [
    "CHECKS",
    "CheckOutcome",
    "WorkerObservation",
    "dead_letter_outcome",
    "internal_topics_outcome",
    "lag_outcome",
    "observe_workers",
    "workers_outcome",
]

#: check name -> what it asserts (the asset check's description)
CHECKS: dict[str, str] = {
    "consumer_lag": "The application's consumer lag on its input topics is under the spec's max_lag.",
    "workers_running": "Every desired worker process is alive and its Kafka Streams client is RUNNING.",
    "dead_letter_not_growing": "The dead-letter topic got no new records since the previous evaluation.",
    "internal_topics_valid": "Every internal topic exists with the partitions and configs it needs.",
}


@dataclass
class CheckOutcome:
    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)
    warn_only: bool = False


@dataclass
class WorkerObservation:
    """What the workers' endpoints said in one poll."""

    states: dict[str, str] = field(default_factory=dict)
    processed_total: int = 0
    paused: dict[str, bool] = field(default_factory=dict)
    unreachable: list[str] = field(default_factory=list)
    endpoints: dict[str, str] = field(default_factory=dict)
    metrics: WorkerMetrics = field(default_factory=WorkerMetrics)


def input_lag(app: ResolvedStreamApp, conf: dict[str, Any]) -> dict[str, int]:
    """``{"topic-partition": lag}`` of the application's group on its input topics."""
    with KafkaAdmin(conf) as admin:
        counts = admin.partition_counts(app.source_topics)
        partitions = [(t, p) for t, n in counts.items() for p in range(n or 0)]
        committed = admin.committed_offsets(app.application_id, partitions)
        earliest = admin.list_offsets(partitions, "earliest") if partitions else {}
    ends = log_end_offsets(conf, partitions)
    lag = {}
    for tp in partitions:
        position = committed.get(tp)
        start = earliest.get(tp, (0, 0))[0] if position is None else position
        lag[f"{tp[0]}-{tp[1]}"] = max(0, ends.get(tp, 0) - max(start, 0))
    return lag


def lag_outcome(app: ResolvedStreamApp, conf: dict[str, Any], threshold: int | None = None) -> CheckOutcome:
    limit = app.spec.max_lag if threshold is None else threshold
    lag = input_lag(app, conf)
    total = sum(lag.values())
    passed = total <= limit
    worst = max(lag.items(), key=lambda kv: kv[1]) if lag else ("-", 0)
    return CheckOutcome(
        passed,
        f"consumer lag {total} {'<=' if passed else '>'} {limit} (group {app.application_id!r})",
        {"total_lag": total, "max_lag": limit, "worst_partition": worst[0], "lag_by_partition": lag},
    )


def observe_workers(status: DeploymentStatus, token: str | None) -> WorkerObservation:
    seen = WorkerObservation()
    for worker in status.alive:
        if worker.endpoint is None:
            continue
        client = WorkerClient(worker.endpoint, token, timeout_s=3.0)
        try:
            state = client.state()
        except WorkerUnreachableError:
            seen.unreachable.append(worker.client_id)
            continue
        seen.states[worker.client_id] = str(state.get("state"))
        seen.endpoints[worker.client_id] = worker.endpoint
        seen.processed_total += sum(int(w.get("processed_total", 0)) for w in state.get("workers", []))
        try:
            seen.metrics.add(client.metrics_text())
        except WorkerUnreachableError:
            pass
        try:
            seen.paused[worker.client_id] = bool(client.control("status")[1].get("paused", False))
        except WorkerUnreachableError:
            pass
    return seen


def workers_outcome(status: DeploymentStatus, seen: WorkerObservation) -> CheckOutcome:
    record = status.record
    if record is None or not status.deployed:
        return CheckOutcome(False, "the application is not deployed (materialize it)", {"deployed": False})
    not_running = {c: s for c, s in seen.states.items() if s != "RUNNING"}
    passed = status.healthy and not not_running and not seen.unreachable
    parts = [f"{len(status.alive)}/{record.desired_workers} worker processes alive"]
    if status.dead:
        parts.append("dead: " + ", ".join(w.client_id for w in status.dead))
    if not_running:
        parts.append("not RUNNING: " + ", ".join(f"{c}={s}" for c, s in not_running.items()))
    if seen.unreachable:
        parts.append("endpoint unreachable: " + ", ".join(seen.unreachable))
    return CheckOutcome(
        passed,
        "; ".join(parts),
        {
            "alive": len(status.alive),
            "desired": record.desired_workers,
            "dead": [w.client_id for w in status.dead],
            "states": seen.states,
            "paused": seen.paused,
            "fingerprint": record.fingerprint,
        },
    )


def dead_letter_outcome(app: ResolvedStreamApp, conf: dict[str, Any], ledger_dir: Path) -> CheckOutcome:
    """Compare the DLQ's record count with the previous sample (kept in ``ledger_dir``)."""
    topic = app.dead_letter_topic
    if topic is None:
        return CheckOutcome(True, "no dead-letter topic configured", {"configured": False})
    with KafkaAdmin(conf) as admin:
        count = admin.partition_counts([topic]).get(topic)
        denied = missing_operations(admin, {topic: ["READ"]}, {}) if not count else []
    if denied:  # hidden from the principal, not missing
        return CheckOutcome(False, not_allowed(denied, "dagster"), {"topic": topic})
    if not count:
        return CheckOutcome(
            False, f"dead-letter topic {topic!r} does not exist", {"topic": topic}, warn_only=True
        )
    size = sum(log_end_offsets(conf, [(topic, p) for p in range(count)]).values())
    ledger = ledger_dir / "dead_letter.json"
    previous: dict[str, Any] = json.loads(ledger.read_text()) if ledger.exists() else {}
    ledger_dir.mkdir(parents=True, exist_ok=True)
    ledger.write_text(json.dumps({"topic": topic, "records": size, "at": time.time()}))
    before = previous.get("records") if previous.get("topic") == topic else None
    grew = before is not None and size > int(before)
    text = (
        f"dead-letter topic {topic!r} grew by {size - int(before or 0)} records to {size}"
        if grew
        else f"dead-letter topic {topic!r} holds {size} records"
        + (" (first sample)" if before is None else f" (unchanged since {before})")
    )
    by_class = dead_letter_counts(conf, topic) if size else {}
    metadata = {"topic": topic, "records": size, "previous": before, "by_error_class": by_class}
    return CheckOutcome(not grew, text, metadata, warn_only=True)


def internal_topics_outcome(app: ResolvedStreamApp, config: StreamsConfig) -> CheckOutcome:
    result = validate_internal_topics(app.topology, config)
    issues = [i.describe() for i in result.issues]
    absent = {t.topic: ["DESCRIBE"] for t in result.issues if t.problem == "missing"}
    if absent:  # a topic the principal may not DESCRIBE is listed as missing
        with KafkaAdmin(config.admin_configs()) as admin:
            denied = missing_operations(admin, absent, {})
        if denied:
            return CheckOutcome(False, not_allowed(denied, "dagster"), {"issues": issues})
    return CheckOutcome(
        result.ok,
        "every internal topic matches the topology" if result.ok else "; ".join(issues),
        {"issues": issues, "topics": [t.topic for t in result.topics]},
    )
