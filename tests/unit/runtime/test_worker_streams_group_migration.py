"""Tasks rebuilt while they still run (the rebuild a worker schedules after a refused commit,
when no assignment followed within a session): what they sent since the last commit is
aborted with them. An exactly-once producer that sends records as they come holds those
updates in the open transaction; closed without an abort, the next commit published them
beside the rebuilt tasks' re-processed copies (the 5-minute soak on a streams group: 82-113
updates published twice). The broker-side scenario is
tests/integration/test_streams_group_fencing.py."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from platform_streams.processor.task_id import TaskId
from platform_streams.runtime import worker_rebalance
from platform_streams.runtime.input_queues import InputQueues
from platform_streams.runtime.worker import StreamWorker


class _Collector:
    def __init__(self) -> None:
        self.aborted = 0
        self.streams_producer = SimpleNamespace(needs_reset=False)
        self.offsets: dict[Any, int] = {}

    def abort(self) -> None:
        self.aborted += 1

    def forget_first_offsets(self, partitions: Any) -> None:
        list(partitions)


def test_rebuilding_running_tasks_aborts_what_they_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_rebalance, "tasks_of_assignment", lambda *a: [])
    monkeypatch.setattr(worker_rebalance, "fetch_committed", lambda *a: {})
    monkeypatch.setattr(worker_rebalance, "fill_from_backup", lambda *a: {})
    worker = StreamWorker.__new__(StreamWorker)
    threading.Thread.__init__(worker, name="w")
    worker.name = "w"
    worker.plan = None
    worker.config = SimpleNamespace(application_id="app")
    worker.collector = _Collector()
    worker.tasks = {TaskId(0, 0): object()}
    worker._rejoin_deadline = 1.0
    worker._standbys = None
    worker._timeout_s = 1.0
    worker._input = InputQueues(max_buffered=4)
    worker.state_lifecycle = SimpleNamespace(restore=lambda tasks, committed: None)
    worker._reset_position = lambda otherwise: otherwise
    worker._set_state = lambda state: None
    closed: list[bool] = []

    def close_tasks(*, clean: bool) -> None:
        closed.append(clean)
        worker.tasks.clear()

    worker._close_tasks = close_tasks
    consumer = SimpleNamespace(resume=lambda partitions: None, seek=lambda tp: None)
    worker._start_tasks(consumer, [], rebalance=False)
    assert closed == [False]
    assert worker.collector.aborted == 1, "the open transaction kept the closed tasks' updates"
    assert worker._rejoin_deadline is None
