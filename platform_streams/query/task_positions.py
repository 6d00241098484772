"""Task positions: what the query layer reports as a store's position, and its persistence.

A task's position is the component-wise maximum of

* the position persisted in ``<task dir>/.position`` (loaded the first time the task
  object is seen), and
* the offsets the task has processed since it started (``task.consumed``).

Why the persisted file never claims more than the store holds: it is written on the
worker thread right after a commit, when the stores have been flushed and the changelog
acknowledged; whatever happens later (a crash, a restore on another instance that replays
that changelog) yields a store that reflects at least those offsets. The one case where
the local store can fall *behind* the file -- it is wiped and rebuilt from a changelog
that no longer holds everything, e.g. after an application reset deleted it -- is handled
by forgetting the file whenever a store of the task is restored from the beginning
(:meth:`TaskPositions.forget`): the position then starts over from what the task
processes, which can only make bounded queries wait, never read too early.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from typing import Any

from platform_streams.query.position import Position, read_position_file, write_position_file

__all__ = ["TaskPositions"]

log = logging.getLogger(__name__)


class TaskPositions:
    """Positions of the live tasks of one client (tasks are keyed by object identity)."""

    def __init__(self) -> None:
        self._loaded: weakref.WeakKeyDictionary[Any, Position] = weakref.WeakKeyDictionary()
        self._written: weakref.WeakKeyDictionary[Any, dict[tuple[str, int], int]] = (
            weakref.WeakKeyDictionary()
        )

    def position_of(self, task: Any) -> Position:
        """The task's position now (call on the worker thread or under its store guard)."""
        base = self._loaded.get(task)
        if base is None:
            base = self._loaded[task] = read_position_file(task.state_manager.task_dir)
        consumed = task.consumed
        if not consumed:
            return base
        return base.merge(Position.from_partition_offsets(dict(consumed)))

    def seed(self, task: Any, position: Position) -> None:
        """Raise the task's base position to at least ``position`` (known from elsewhere)."""
        base = self._loaded.get(task)
        if base is None:
            base = read_position_file(task.state_manager.task_dir)
        self._loaded[task] = base.merge(position)

    def forget(self, task: Any) -> None:
        """Distrust the persisted position (a store of the task is rebuilt from scratch)."""
        self._loaded[task] = Position()

    def persist(self, tasks: Iterable[Any]) -> None:
        """After a commit: write the position of every stateful task that progressed."""
        for task in tasks:
            if not task.sub.stores or not task.consumed:
                continue
            consumed = dict(task.consumed)
            if self._written.get(task) == consumed:
                continue
            try:
                write_position_file(task.state_manager.task_dir, self.position_of(task))
            except OSError as exc:
                log.warning("task %s: cannot write its position file: %s", task.task_id, exc)
                continue
            self._written[task] = consumed
