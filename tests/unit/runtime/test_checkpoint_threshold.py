"""When a commit flushes a task's stores and writes its checkpoint (``TaskStateLifecycle.persist``).

Translated from apache/kafka
streams/src/test/java/org/apache/kafka/streams/processor/internals/StateManagerUtilTest.java
(``checkpointNeeded``: the total changelog offset delta since the last checkpoint must exceed
``OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT``, 10,000, unless the checkpoint is enforced) and
StreamTaskTest's commit cases (``shouldCheckpointState...``: a clean close or revocation always
checkpoints). The task is a recording stand-in: this is the decision, not the stores, which
tests/unit/state/test_rocksdb_crash.py and tests/integration/test_eos_crash.py cover.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from platform_streams.config import StreamsConfig
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_state import CHECKPOINT_DELTA_RECORDS, TaskStateLifecycle

LOG = ("app-store-changelog", 0)
SOURCE_LOG = ("source-table", 0)


class _Task:
    """What ``persist`` reads of a task, recording each flush and checkpoint."""

    def __init__(self, changelogs: frozenset[tuple[str, int]] = frozenset({LOG})) -> None:
        self.task_id = TaskId(0, 0)
        self.changelog_partitions = changelogs
        self.consumed: dict[tuple[str, int], int] = {}
        self.flushes = 0
        self.checkpoints: list[dict[tuple[str, int], int]] = []

    def flush_stores(self) -> None:
        self.flushes += 1

    def checkpoint(self, written: Mapping[tuple[str, int], int], *, enforce: bool = False) -> None:
        assert enforce, "persist writes the file whenever it decided to checkpoint"
        self.checkpoints.append(dict(written))


def _lifecycle() -> TaskStateLifecycle:
    return TaskStateLifecycle(StreamsConfig(application_id="app", bootstrap_servers="localhost:9092"))


def _persist(lifecycle: TaskStateLifecycle, task: _Task, offset: int, *, enforce: bool = False) -> None:
    lifecycle.persist([cast(Any, task)], {LOG: offset}, enforce=enforce)


def test_the_first_commit_of_a_task_checkpoints() -> None:
    lifecycle, task = _lifecycle(), _Task()
    _persist(lifecycle, task, 5)
    assert (task.flushes, task.checkpoints) == (1, [{LOG: 5}])


def test_a_commit_within_the_delta_threshold_neither_flushes_nor_checkpoints() -> None:
    lifecycle, task = _lifecycle(), _Task()
    _persist(lifecycle, task, 0)
    _persist(lifecycle, task, CHECKPOINT_DELTA_RECORDS)  # a delta of exactly the threshold: not more
    assert task.flushes == 1 and len(task.checkpoints) == 1


def test_a_commit_past_the_delta_threshold_flushes_then_checkpoints() -> None:
    lifecycle, task = _lifecycle(), _Task()
    _persist(lifecycle, task, 0)
    _persist(lifecycle, task, 6_000)
    _persist(lifecycle, task, CHECKPOINT_DELTA_RECORDS + 1)
    assert task.flushes == 2
    assert task.checkpoints[-1] == {LOG: CHECKPOINT_DELTA_RECORDS + 1}
    _persist(lifecycle, task, CHECKPOINT_DELTA_RECORDS + 2)  # the delta counts from the new checkpoint
    assert task.flushes == 2


def test_an_enforced_checkpoint_is_written_whenever_the_offsets_moved() -> None:
    lifecycle, task = _lifecycle(), _Task()
    _persist(lifecycle, task, 0)
    _persist(lifecycle, task, 1, enforce=True)
    assert task.checkpoints == [{LOG: 0}, {LOG: 1}]
    _persist(lifecycle, task, 1, enforce=True)  # nothing written since: no flush, no file write
    assert task.flushes == 2


def test_consumed_offsets_of_a_source_changelog_count_towards_the_delta() -> None:
    lifecycle, task = _lifecycle(), _Task(frozenset({LOG, SOURCE_LOG}))
    task.consumed[SOURCE_LOG] = 0
    _persist(lifecycle, task, 0)
    task.consumed[SOURCE_LOG] = CHECKPOINT_DELTA_RECORDS  # plus one changelog record below
    _persist(lifecycle, task, 1)
    assert task.flushes == 2


def test_a_recreated_task_checkpoints_at_its_first_commit() -> None:
    lifecycle, task = _lifecycle(), _Task()
    _persist(lifecycle, task, 0)
    again = _Task()  # the same task id, a new task object (closed and created again)
    _persist(lifecycle, again, 1)
    assert again.flushes == 1 and again.checkpoints == [{LOG: 1}]
