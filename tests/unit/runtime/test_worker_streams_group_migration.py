"""A worker on a streams group after a refused commit (``TaskMigratedError``): its tasks are
closed with the open transaction aborted, the classic path's rebuild of the consumer's
partitions a session later is not scheduled (the streams group says what the member runs
next), and tasks the member still owns are restarted once a heartbeat after the refusal
said nothing else. The broker-side scenario is tests/integration/test_streams_group_fencing.py;
these pin the decisions that scenario reaches only under some timings."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace
from typing import Any

from platform_streams.errors import TaskMigratedError
from platform_streams.kafka.streams_group.member import Assignment
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.worker import StreamWorker


class _Collector:
    def __init__(self) -> None:
        self.aborted = 0
        self.streams_producer = SimpleNamespace(needs_reset=False)
        self.offsets: dict[Any, int] = {}

    def abort(self) -> None:
        self.aborted += 1


def _worker(owned: frozenset[tuple[str, int]] = frozenset()) -> Any:
    """A worker with a collector, tasks and a streams-group membership stand-in only."""
    worker = StreamWorker.__new__(StreamWorker)
    threading.Thread.__init__(worker, name="w")
    worker.name = "w"
    worker.collector = _Collector()
    worker.tasks = {TaskId(0, 0): object()}
    worker.migrations = 0
    worker._rejoin_deadline = None
    worker.config = SimpleNamespace(session_timeout_ms=6000)
    worker.streams_group = SimpleNamespace(
        heartbeats=3, member=SimpleNamespace(owned=Assignment(active=owned))
    )
    worker.closed: list[bool] = []

    def close_tasks(*, clean: bool) -> None:
        worker.closed.append(clean)
        worker.tasks.clear()

    worker._close_tasks = close_tasks
    worker.added: list[list[TaskId]] = []
    worker._add = worker.added.append
    return worker


def test_a_refused_commit_aborts_and_schedules_no_classic_rebuild(caplog: Any) -> None:
    worker = _worker()
    with caplog.at_level(logging.WARNING):
        worker._on_task_migrated(TaskMigratedError("the streams group moved on"))
    assert worker.collector.aborted == 1 and worker.closed == [False] and not worker.tasks
    assert worker._rejoin_deadline is None, "the classic rebuild would restart reassigned tasks"
    assert worker._migrated_at_heartbeat == 3


def test_owned_tasks_restart_only_after_a_heartbeat_following_the_refusal() -> None:
    worker = _worker(owned=frozenset({("0", 0), ("0", 1)}))
    worker._on_task_migrated(TaskMigratedError("stale epoch"))
    worker._restart_owned_tasks(worker.streams_group)
    assert worker.added == [], "no heartbeat since the refusal: the member may have been dropped"
    worker.streams_group.heartbeats += 1
    worker._restart_owned_tasks(worker.streams_group)
    assert worker.added == [[TaskId(0, 0), TaskId(0, 1)]]
    worker._restart_owned_tasks(worker.streams_group)
    assert len(worker.added) == 1, "restarted once"


def test_a_dropped_member_owns_nothing_so_nothing_restarts() -> None:
    worker = _worker(owned=frozenset())  # a fenced member joins again owning nothing
    worker._on_task_migrated(TaskMigratedError("fenced"))
    worker.streams_group.heartbeats += 1
    worker._restart_owned_tasks(worker.streams_group)
    assert worker.added == []
