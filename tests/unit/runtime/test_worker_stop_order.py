"""What a stopping worker does, in order (runtime/workers/worker.py with runtime/membership/leave_guard.py).

The leave guard makes a stopping worker serve its group -- polling, processing nothing --
until a rebalance under way has ended (the embedded broker keeps a leader that leaves
mid-rebalance). That serving may last ``1.5 x session.timeout.ms`` plus a heartbeat
interval, so the final commit (under exactly-once: the transaction) comes first: a kill
after a shorter grace period must not lose the processed work, and an open transaction
must not outlive ``transaction.timeout.ms``. An assignment that arrives while serving is
recorded, never started (no tasks created or restored after the stop). Kafka Streams
commits and closes its tasks before the consumer leaves (``StreamThread.completeShutdown``).

The consumer and the collector are stand-ins: what is checked is the worker's order of
calls; the broker side is tests/integration/test_restart_after_crash.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder
from platform_streams.config import StreamsConfig
from platform_streams.kafka import TopicPartition
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime import broker_features
from platform_streams.runtime.api import WorkerState
from platform_streams.runtime.workers.worker import StreamWorker
from tests.support.workers import idle_worker


class _Consumer:
    """Serves the group: the first poll after the stop delivers a new assignment."""

    def __init__(self, worker: StreamWorker, calls: list[str]) -> None:
        self.worker, self.calls = worker, calls
        self.assigned = False

    def poll(self, timeout: float) -> None:
        self.calls.append("poll")
        if not self.assigned:
            self.assigned = True
            self.worker._on_revoke(self, [])
            self.worker._on_assign(self, [])  # the range assignor's assignment of a new generation

    def assignment(self) -> list[Any]:
        return []

    def close(self) -> None:
        self.calls.append("leave")


class _Producer:
    def close(self) -> None:
        pass


class _Collector:
    eos = False
    streams_producer = _Producer()

    def abort(self) -> None:
        pass


def test_the_final_commit_comes_before_serving_the_group_and_a_late_assignment_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = StreamsConfig(
        application_id="stop-order",
        bootstrap_servers="127.0.0.1:1",
        state_dir=str(tmp_path),
        session_timeout_ms=6_000,  # a guard that never lets go fails within 9.35 s
        heartbeat_interval_ms=100,
        max_poll_interval_ms=10_000,
    )
    # the coordinator keeps a departed leader (the embedded broker): the guard holds
    monkeypatch.setattr(broker_features, "_elects_leader", {"127.0.0.1:1": False})
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    worker = idle_worker(builder.build(), config, {"in": 2})
    calls: list[str] = []

    def start_clients() -> None:
        worker.consumer = _Consumer(worker, calls)
        worker.collector = _Collector()  # type: ignore[assignment]
        worker.tasks[TaskId(0, 0)] = object()  # type: ignore[assignment]
        worker._set_state(WorkerState.RUNNING)

    def commit(**kwargs: Any) -> None:
        calls.append("commit")

    def close_tasks(*, clean: bool) -> None:
        calls.append(f"close tasks clean={clean}")
        worker.tasks.clear()

    monkeypatch.setattr(worker, "_start_clients", start_clients)
    monkeypatch.setattr(worker, "commit", commit)
    monkeypatch.setattr(worker, "_close_tasks", close_tasks)
    monkeypatch.setattr(worker, "_start_tasks", lambda *a, **k: calls.append("start tasks"))
    worker.shutdown()
    worker.run()
    assert worker.failure is None
    assert calls[:2] == ["commit", "close tasks clean=True"], calls
    assert "poll" in calls and calls[-1] == "leave", calls
    assert "start tasks" not in calls, calls
    assert calls.count("commit") == 1, calls


def test_a_range_assigned_worker_holding_every_partition_is_not_taken_as_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under the range assignor a member sees only its own partitions: with more members than
    # partitions (or members with standbys only) one holds them all while others exist, one
    # of which may have just left -- the stop must serve the group one heartbeat interval.
    config = StreamsConfig(
        application_id="stop-alone",
        bootstrap_servers="127.0.0.1:1",
        state_dir=str(tmp_path),
        session_timeout_ms=6_000,
        heartbeat_interval_ms=100,
        max_poll_interval_ms=10_000,
        task_assignor="range",
    )
    monkeypatch.setattr(broker_features, "_elects_leader", {"127.0.0.1:1": False})
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    worker = idle_worker(builder.build(), config, {"in": 1})
    calls: list[str] = []

    class _HoldsEverything(_Consumer):
        def poll(self, timeout: float) -> None:
            calls.append("poll")

        def assignment(self) -> list[Any]:
            return [TopicPartition("in", 0)]

    def start_clients() -> None:
        worker.consumer = _HoldsEverything(worker, calls)
        worker._set_state(WorkerState.RUNNING)

    monkeypatch.setattr(worker, "_start_clients", start_clients)
    worker.shutdown()
    worker.run()
    assert worker.failure is None
    assert "poll" in calls and calls[-1] == "leave", calls
