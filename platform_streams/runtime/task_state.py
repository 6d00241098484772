"""The state side of a task's life in a worker: restore, checkpoint, close.

Kept apart from the worker loop so the order of state operations reads in one
place: stores built -> restored from their changelogs (from the checkpoint when the
local store is intact, else from the beginning) -> processors initialised; commit ->
checkpoint; close -> checkpoint (clean) or keep the last one (dirty).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from platform_streams.config import StreamsConfig
from platform_streams.processor.task_id import TaskId
from platform_streams.state.restore import ChangelogReader, StateRestoreListener
from platform_streams.state.snapshot_restore import SnapshotRestore, SnapshotRestorer

if TYPE_CHECKING:
    from platform_streams.runtime.task import StreamTask

log = logging.getLogger(__name__)


class TaskStateLifecycle:
    """Drives restore/checkpoint/close of a worker's tasks and remembers what restore cost."""

    def __init__(self, config: StreamsConfig, listener: StateRestoreListener | None = None) -> None:
        self.config = config
        self.listener = listener
        #: task -> store -> records replayed by the last restore of that task
        self.last_restore: dict[TaskId, dict[str, int]] = {}
        #: records replayed by all restores of this worker
        self.total_restored = 0
        #: ingests state snapshots before the changelog tail is replayed (when configured)
        self.snapshots = (
            SnapshotRestorer(config.state_snapshot_location, config.application_id)
            if config.state_snapshot_location
            else None
        )
        #: task -> snapshots ingested by the last restore of that task
        self.last_snapshots: dict[TaskId, list[SnapshotRestore]] = {}

    def restore(self, tasks: Iterable[StreamTask]) -> None:
        """Bring every store of ``tasks`` up to date with its changelog before processing."""
        reader = ChangelogReader(self.config.restore_consumer_configs(), listener=self.listener)
        for task in tasks:
            if self.snapshots is not None:
                self.last_snapshots[task.task_id] = self.snapshots.restore(task.state_manager)
            if not task.state_manager.changelog_offsets_to_restore():
                self.last_restore[task.task_id] = {}
                continue
            started = time.monotonic()
            counts = reader.restore(task.state_manager)
            self.last_restore[task.task_id] = counts
            replayed = sum(counts.values())
            self.total_restored += replayed
            log.info(
                "task %s restored %d changelog records in %.2fs (%s)",
                task.task_id,
                replayed,
                time.monotonic() - started,
                ", ".join(f"{s}={n}" for s, n in sorted(counts.items())) or "nothing to replay",
            )

    def checkpoint(self, tasks: Iterable[StreamTask], written: Mapping[tuple[str, int], int]) -> None:
        """After a commit: record how far each store's changelog is reflected locally."""
        for task in tasks:
            task.checkpoint(written)

    def close_task(self, task: StreamTask, written: Mapping[tuple[str, int], int], *, clean: bool) -> None:
        """Close a task; a clean close writes a final checkpoint (also under exactly-once)."""
        try:
            if clean:
                task.checkpoint(written, enforce=True)
        finally:
            task.close()
