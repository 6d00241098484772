"""A streams-group member's commit after the broker dropped it.

Two guards, for a member dropped while its process (or the broker) was paused past the
session:

* tasks rebuilt while they still run (the rebuild a worker schedules after a refused
  commit, when no assignment followed within a session) take what they sent since the last
  commit with them: an exactly-once producer that sends records as they come holds those
  updates in the open transaction, which the next commit would publish beside the rebuilt
  tasks' re-processed copies;
* a commit after no heartbeat was answered for a while waits for one before it flushes the
  caches: a member paused past its session would otherwise resume and flush state its
  tasks' new owner has moved past (under at-least-once, the newer counts are overwritten).

The broker-side scenario is tests/integration/test_streams_group_fencing.py."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from platform_streams.errors import TaskMigratedError
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.membership.streams_group_membership import StreamsGroupMembership
from platform_streams.runtime.tasks.task_manager import TaskManager
from platform_streams.runtime.workers import worker_rebalance
from platform_streams.runtime.workers.input_queues import InputQueues
from platform_streams.runtime.workers.worker import StreamWorker


class _Collector:
    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.streams_producer = SimpleNamespace(needs_reset=False)
        self.offsets: dict[Any, int] = {}

    def abort(self) -> None:
        self.events.append("abort")

    def forget_first_offsets(self, partitions: Any) -> None:
        list(partitions)


def test_rebuilding_running_tasks_aborts_what_they_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_rebalance, "tasks_of_assignment", lambda *a: [])
    monkeypatch.setattr(worker_rebalance, "fetch_committed", lambda *a: {})
    monkeypatch.setattr(worker_rebalance, "fill_from_backup", lambda *a: {})
    events: list[str] = []
    worker = StreamWorker.__new__(StreamWorker)
    threading.Thread.__init__(worker, name="w")
    worker.plan = None
    worker.config = SimpleNamespace(application_id="app")
    worker._input = InputQueues(max_buffered=4)
    worker.task_manager = TaskManager.__new__(TaskManager)
    manager = worker.task_manager
    manager.tasks = {TaskId(0, 0): SimpleNamespace(task_id=TaskId(0, 0))}
    manager._input = worker._input
    manager._standbys = None
    manager.state_lifecycle = SimpleNamespace(
        restore_ranges=None,
        restore=lambda tasks, committed: None,
        close_task=lambda task, written, clean: events.append(f"close clean={clean}"),
    )
    worker.collector = _Collector(events)
    worker._rejoin_deadline = 1.0
    worker._timeout_s = 1.0
    worker._reset_position = lambda otherwise: otherwise
    worker._set_state = lambda state: None
    consumer = SimpleNamespace(resume=lambda partitions: None, seek=lambda tp: None)
    worker._start_tasks(consumer, [], rebalance=False)
    assert events == ["abort", "close clean=False"], "the open transaction kept the closed tasks' updates"
    assert worker.tasks == {}
    assert worker._rejoin_deadline is None


def _membership(answered_s_ago: float) -> Any:
    """A membership whose heartbeat thread answers once when woken: the broker dropped it."""
    membership = StreamsGroupMembership.__new__(StreamsGroupMembership)
    membership.application_id = "app"
    membership.last = None
    membership.heartbeats = 0
    membership._answered_at = time.monotonic() - answered_s_ago
    membership._lost = False
    membership._changes = threading.Lock()
    membership._stop = threading.Event()
    membership._wake = threading.Event()

    def heartbeat_thread() -> None:
        membership._wake.wait(5)
        time.sleep(0.05)  # the answer takes a round trip
        membership._lost = True
        membership.heartbeats += 1

    membership._thread = threading.Thread(target=heartbeat_thread, daemon=True)
    membership._thread.start()
    return membership


def test_a_commit_after_a_long_pause_waits_for_a_heartbeat_and_is_refused() -> None:
    """Paused past the session, the worker must not flush its caches -- state the tasks' new
    owner has moved past -- before the heartbeat says whether the broker dropped the member."""
    membership = _membership(answered_s_ago=16.0)
    with pytest.raises(TaskMigratedError):
        membership.verify_membership(wait_s=5.0)
    assert membership.heartbeats == 1


def test_a_commit_right_after_a_heartbeat_does_not_wait() -> None:
    membership = _membership(answered_s_ago=0.0)
    started = time.monotonic()
    membership.verify_membership(wait_s=5.0)
    assert time.monotonic() - started < 0.05 and membership.heartbeats == 0
    membership._wake.set()


def test_records_polled_after_a_long_pause_are_not_processed_by_a_dropped_member() -> None:
    """Resumed after a pause past its session, a worker holds records fetched before the
    pause. Processed, they would write changelog records after those of the tasks' new owner:
    older counts that a later restore applies last, so the keys' last updates are lost once
    the task comes back to this member. The heartbeat is heard first; the drop closes the
    tasks instead."""
    worker = StreamWorker.__new__(StreamWorker)
    worker._refetch = False
    routed: list[Any] = []
    worker._poll_batch = lambda: ["a record fetched before the pause"]  # type: ignore[method-assign]
    worker._route = lambda messages: routed.append(messages) or set()  # type: ignore[method-assign]
    worker.streams_group = _membership(answered_s_ago=16.0)
    with pytest.raises(TaskMigratedError):
        worker._process_iteration()
    assert routed == [] and worker.streams_group.heartbeats == 1
