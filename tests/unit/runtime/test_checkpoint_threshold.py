"""Under exactly-once, a commit flushes and checkpoints a task's stores only when its changelog
offsets moved by more than 10,000 records since the last checkpoint (or the checkpoint is
enforced); under at-least-once at every commit.

Kafka Streams' rule: ``StateManagerUtil.checkpointNeeded`` /
``OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT`` (streams/src/main/java/org/apache/kafka/streams/
processor/internals/StateManagerUtil.java), applied by ``StreamTask.maybeCheckpoint`` and
tested in streams/src/test/java/org/apache/kafka/streams/processor/internals/StreamTaskTest.java
(``shouldNotCheckpointOffsetsAgainOnCommitIfSnapshotNotChangedMuch``,
``shouldCheckpointOffsetsOnCommitIfSnapshotMuchChanged``). Real tasks over real RocksDB
stores; the written changelog offsets are given as the record collector reports them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.runtime.restore.task_state import CHECKPOINT_OFFSET_DELTA, TaskStateLifecycle
from platform_streams.runtime.tasks.task import StreamTask
from platform_streams.serde import Bytes
from platform_streams.state.checkpoint import CHECKPOINT_FILE_NAME, OffsetCheckpoint
from platform_streams.state.wrappers.base import innermost
from platform_streams.testing.records import DriverRecord
from tests.support.tasks import build_tasks

SOURCE = "in"


def _count_task(tmp_path: Path, *, logged: bool = True, **config: Any) -> StreamTask:
    builder = StreamsBuilder()
    materialized = Materialized.as_("counts")
    if not logged:
        materialized = materialized.with_logging_disabled()
    builder.stream(SOURCE, Consumed(key_serde=Bytes(), value_serde=Bytes())).group_by_key().count(
        materialized=materialized
    ).to_stream().to("out", Produced(key_serde=Bytes()))
    tasks, _ = build_tasks(builder.build(), tmp_path, application_id="ckpt", **config)
    (task,) = tasks
    return task


def _process(task: StreamTask, first: int, n: int) -> None:
    records = [DriverRecord(SOURCE, 0, i, b"k%d" % (i % 50), b"v", 1000 + i) for i in range(first, first + n)]
    task.add_records((SOURCE, 0), records)
    while task.process(1000):
        pass
    task.flush_caches()


def _on_disk(task: StreamTask) -> dict[tuple[str, int], int]:
    return OffsetCheckpoint(task.state_manager.task_dir / CHECKPOINT_FILE_NAME).read()


def _backend(task: StreamTask) -> Any:
    return innermost(task.context.stores["counts"]).backend


def _pending(task: StreamTask) -> int:
    """Writes in the store's overlay, not yet in RocksDB."""
    return int(_backend(task).pending_count)


def _changelog(task: StreamTask) -> tuple[str, int]:
    (tp,) = task.changelog_partitions
    return tp


EOS: dict[str, Any] = {"processing_guarantee": "exactly_once_v2"}


@contextmanager
def _after_one_commit(
    tmp_path: Path, *, logged: bool = True, **config: Any
) -> Iterator[tuple[StreamTask, TaskStateLifecycle, tuple[str, int] | None]]:
    """A task that processed 100 records, committed (changelog offset 99), then processed 100
    more: (task, lifecycle, changelog partition or None); closed afterwards."""
    task = _count_task(tmp_path, logged=logged, **config)
    lifecycle = TaskStateLifecycle(task.config)
    tp = _changelog(task) if logged else None
    try:
        _process(task, 0, 100)
        lifecycle.persist([task], {tp: 99} if tp else {})
        _process(task, 100, 100)
        yield task, lifecycle, tp
    finally:
        task.close()


def test_small_commits_defer_the_flush_and_checkpoint(tmp_path: Path) -> None:
    with _after_one_commit(tmp_path, **EOS) as (task, lifecycle, tp):
        assert tp is not None
        assert _on_disk(task) == {tp: 99}  # the first commit checkpoints
        lifecycle.persist([task], {tp: 99 + CHECKPOINT_OFFSET_DELTA})  # at the threshold: deferred
        assert _on_disk(task) == {tp: 99}
        assert task.state_manager.changelog_offsets()[tp] == 99 + CHECKPOINT_OFFSET_DELTA
        assert _pending(task) > 0  # the writes wait in the overlay, not on disk
        _process(task, 200, 100)
        lifecycle.persist([task], {tp: 100 + CHECKPOINT_OFFSET_DELTA})  # past it
        assert _on_disk(task) == {tp: 100 + CHECKPOINT_OFFSET_DELTA}
        assert _pending(task) == 0
        _process(task, 300, 10)
        lifecycle.persist([task], {tp: 110 + CHECKPOINT_OFFSET_DELTA}, enforce=True)  # a clean close
        assert _on_disk(task) == {tp: 110 + CHECKPOINT_OFFSET_DELTA}


def test_at_least_once_flushes_and_checkpoints_at_every_commit(tmp_path: Path) -> None:
    """Its store flush-latency series stays alive for a quiet application (a dashboard panel)."""
    with _after_one_commit(tmp_path, processing_guarantee="at_least_once") as (task, lifecycle, tp):
        assert tp is not None
        assert _pending(task) > 0
        lifecycle.persist([task], {tp: 199})
        assert _on_disk(task) == {tp: 199}
        assert _pending(task) == 0


def test_a_spill_removes_the_checkpoint_and_the_next_commit_writes_it(tmp_path: Path) -> None:
    with _after_one_commit(tmp_path, **EOS) as (task, lifecycle, tp):
        assert tp is not None
        _backend(task).write_pending()  # what an overlay that fills up before the commit does
        assert _on_disk(task) == {}
        lifecycle.persist([task], {tp: 199})  # a small delta, but no checkpoint to keep
        assert _on_disk(task) == {tp: 199}


def test_a_task_with_an_unlogged_store_flushes_at_every_commit(tmp_path: Path) -> None:
    with _after_one_commit(tmp_path, logged=False, **EOS) as (task, lifecycle, _):
        assert _pending(task) > 0
        lifecycle.persist([task], {})
        assert _pending(task) == 0  # its disk is its only copy


def test_a_new_task_object_checkpoints_at_its_first_commit(tmp_path: Path) -> None:
    """A task re-created (a rebalance) starts over: its first commit writes the checkpoint."""
    with _after_one_commit(tmp_path, **EOS) as (task, lifecycle, tp):
        assert tp is not None
        lifecycle.persist([task], {tp: 199})
        assert _on_disk(task) == {tp: 99}
    again = _count_task(tmp_path, **EOS)
    try:
        _process(again, 200, 10)
        lifecycle.persist([again], {tp: 209})
        assert _on_disk(again) == {tp: 209}
    finally:
        again.close()
