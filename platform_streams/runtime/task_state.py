"""The state side of a task's life in a worker: register, restore, checkpoint, close.

Kept apart from the worker loop so the order of state operations (stores built ->
restored from changelogs -> processors initialised; commit -> checkpoint; close ->
checkpoint or wipe) reads in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from platform_streams.config import StreamsConfig
from platform_streams.processor.context import StoreRegistrar
from platform_streams.processor.task_id import TaskId
from platform_streams.topology.compiler import TopologyPlan

if TYPE_CHECKING:
    from platform_streams.runtime.task import StreamTask


class TaskStateLifecycle:
    """Creates per-task state managers and drives restore/checkpoint/close for a worker."""

    def __init__(self, config: StreamsConfig, plan: TopologyPlan) -> None:
        self.config = config
        self.plan = plan
        self.registrars: dict[TaskId, StoreRegistrar] = {}

    def registrar_for(self, task_id: TaskId, task_dir: Path) -> StoreRegistrar:
        registrar = StoreRegistrar()
        self.registrars[task_id] = registrar
        return registrar

    def restore(self, tasks: Iterable[StreamTask]) -> None:
        """Bring every store of ``tasks`` up to date with its changelog."""

    def checkpoint(self, tasks: Iterable[StreamTask], written: Mapping[tuple[str, int], int]) -> None:
        """After a commit: record how far each store's changelog is reflected locally."""

    def close_task(self, task: StreamTask, *, clean: bool) -> None:
        """Checkpoint (clean) or mark for restore (dirty) the closed task's stores."""
        self.registrars.pop(task.task_id, None)

    def describe(self) -> dict[str, Any]:
        return {str(t): {} for t in self.registrars}
