"""How a worker's tasks follow the group: assignment, revocation, loss and recovery.

Split from :mod:`platform_streams.runtime.workers.worker` (whose loop and commit path stay there)
because this is the other half of a worker's life: the rebalance callbacks librdkafka
calls inside ``consume`` (or the state-aware assignor's generation handshake), which have
the worker's :class:`~platform_streams.runtime.tasks.task_manager.TaskManager` create, restore
and initialise tasks, or commit and close them; and the recovery paths
(:class:`TaskMigratedError`: close dirty and rejoin; :class:`TaskCorruptedError`: rebuild
from the changelogs and read again from the committed offsets; its
:class:`~platform_streams.state.backend.StoreCorruptedError`, a store whose files turned out
corrupt, also deletes that store's files first, so it is restored from the beginning of its
changelog -- or, with no changelog to restore from, fails the worker saying so).

:class:`TaskRebalancing` is a mixin of :class:`~platform_streams.runtime.workers.worker.StreamWorker`:
it holds no state of its own, and the attributes it reads are the worker's (declared
below for the type checker); the tasks are the task manager's.
"""

from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from platform_streams.errors import StreamsError, TaskCorruptedError, TaskMigratedError
from platform_streams.kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, TopicPartition
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.api import WorkerState
from platform_streams.runtime.membership.assignment import tasks_of_assignment
from platform_streams.runtime.membership.rebalance_wait import AssignmentWait, fill_from_backup
from platform_streams.runtime.restore.changelog_filter import fetch_committed
from platform_streams.runtime.task_assignment.coordinator import slot_ranges
from platform_streams.runtime.workers.worker_handover import CooperativeHandover
from platform_streams.state.backend import StoreCorruptedError

if TYPE_CHECKING:
    from platform_streams.runtime.store_guard import StoreGuard
    from platform_streams.runtime.task_assignment.coordinator import Pending

__all__ = ["TaskRebalancing"]

log = logging.getLogger(__name__)


class TaskRebalancing(CooperativeHandover):
    """Rebalance callbacks and task recovery of a :class:`StreamWorker` (see the module docstring)."""

    if TYPE_CHECKING:  # the worker's attributes and methods this half uses (and CooperativeHandover's)
        index: int
        store_guard: StoreGuard
        migrations: int
        corruptions: int
        _poll_s: float
        assignment_wait: AssignmentWait
        _member: str | None
        _rejoin_deadline: float | None
        _stopping: bool

        def _process_iteration(self) -> int: ...

    def _on_task_migrated(self, exc: TaskMigratedError) -> None:
        """The group (or a newer producer) took our tasks: drop them dirty, wait for the rebalance."""
        self.migrations += 1
        log.warning("%s: %s; closing tasks dirty and rejoining the group", self.name, exc)
        self._abort_and_close_tasks()
        # librdkafka rejoins by itself after the coordinator rejected the member; if no
        # assignment arrives, the tasks of the assignment we still hold are rebuilt later
        self._rejoin_deadline = time.monotonic() + self.config.session_timeout_ms / 1000.0

    def _on_task_corrupted(self, exc: TaskCorruptedError, rebuilt: frozenset[Path] = frozenset()) -> None:
        """The transaction was aborted, or a store's files are corrupt: rebuild the tasks'
        state and read from the committed offsets.

        As Kafka Streams' ``TaskManager.handleCorruption``: the open transaction is aborted
        (under exactly-once every task's output of it goes), the tasks are closed dirty and
        revived, restoring from their changelogs -- the corrupt store from the beginning,
        its files deleted at the close. The worker itself goes on: no crash, no restart.
        Another corrupt store met by the rebuild's restore (a compaction of a store restored
        from its checkpoint) is rebuilt the same way; a store ``rebuilt`` already that is
        corrupt again at once fails the worker: its disk is failing.
        """
        self.corruptions += 1
        if isinstance(exc, StoreCorruptedError):
            if exc.path in rebuilt:
                raise StreamsError(
                    f"store {exc.store} at {exc.path} is corrupt again right after its rebuild "
                    f"({exc.reason}): is the disk failing?"
                ) from exc
            rebuilt |= {exc.path} if exc.path is not None else set()
            task = self.task_manager.mark_corrupted_store(exc)
            log.warning(
                "%s: store %s of task %s is corrupt (%s); closing the task dirty, deleting the store's "
                "files at %s and restoring it from its changelog",
                self.name,
                exc.store,
                task,
                exc.reason,
                exc.path,
            )
            why = f"store {exc.store} of task {task} was corrupt"
        else:
            log.warning("%s: %s; rebuilding the tasks from their changelogs", self.name, exc)
            why = "the transaction was aborted"
        self._abort_and_close_tasks()
        try:
            self._recreate_tasks(why)
        except StoreCorruptedError as again:
            self._on_task_corrupted(again, rebuilt)

    def _abort_and_close_tasks(self) -> None:
        """Every task closed dirty, the open transaction aborted first (the task manager's)."""
        self.task_manager.close_dirty()
        self._commits_held, self._refetch = False, False

    def _recreate_tasks(self, why: str) -> None:
        self._rejoin_deadline = None
        assignment = self.consumer.assignment()
        log.info("%s: re-creating tasks of %d assigned partitions (%s)", self.name, len(assignment), why)
        if assignment:
            self._start_tasks(self.consumer, assignment, rebalance=False)

    # -- rebalance callbacks --------------------------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        if self._stopping:
            # A stopping worker that serves its group until the rebalance ends (leave_guard.py)
            # takes the assignment -- the rebalance is over -- and starts nothing: creating and
            # restoring tasks would overrun the stop's bound, and nothing is processed anyway.
            self._set_state(WorkerState.PARTITIONS_ASSIGNED)
            return
        self._start_tasks(consumer, partitions, rebalance=True)

    def _on_generation(self, consumer: Any, partitions: list[Any]) -> None:
        """State-aware placement: a new generation began; report, then wait for its assignment."""
        assert self._coordinator is not None
        self._set_state(WorkerState.PARTITIONS_ASSIGNED)
        coordinator = self._coordinator
        slots = [tp.partition for tp in partitions if tp.topic == coordinator.members_topic]
        instance = self.config.consumer_configs(self.index).get("group.instance.id")
        running: list[TaskId] = []
        consumer.assign([])  # the member slots are never read; tasks come with the assignment
        if self._cooperative and self.tasks:
            self._refetch = True  # the kept tasks read on, from where the loop stopped reading
            running = list(self.tasks)
        self._pending = coordinator.join(consumer, slots, self._previous_tasks, instance, running)
        self._member = self._pending.member

    def _await_assignment(self) -> int:
        """Serve the group (heartbeats, rebalances) until this generation's assignment arrives.

        Waiting has bounds, like the wait for the group (runtime/membership/rebalance_wait.py): after
        ``partial_after_s`` the leader places the tasks over the members that reported; after
        ``warning_s`` the worker says what it waits for; a member the generation's assignment
        left out, or still without one after the longest legitimate rebalance
        (``wedged_after_s``, plus jitter), starts a new generation (docs/soak/README.md: a
        group re-created by a repair kept a member that never reported, and both workers
        idled for 23 minutes).
        """
        assert self._coordinator is not None and self._pending is not None
        pending, wait = self._pending, self.assignment_wait
        waited = time.monotonic() - pending.joined
        self._coordinator.remind(pending)
        tasks = self._coordinator.assignment_for(
            pending, self.consumer, partial=waited >= wait.partial_after_s
        )
        if tasks is None:
            now = time.monotonic()
            if pending.rejoin_at is None:
                pending.rejoin_at = pending.joined + wait.wedged_after_s + random.random() * wait.warning_s
                pending.next_warning = pending.joined + wait.warning_s
            if pending.unplaced and not pending.resubscribed:
                self._new_generation(pending, "its assignment does not name this member")
            elif now >= pending.rejoin_at:
                self._new_generation(
                    pending, f"no assignment after {waited:.0f}s, longer than a rebalance lasts"
                )
            elif pending.next_warning is not None and now >= pending.next_warning:
                pending.next_warning = now + wait.warning_s
                self._warn_unplaced(pending, waited)
            if self._cooperative and self.tasks and self._pending is not None:
                return self._process_iteration()  # commits held: see _hold_commits
            with self.store_guard.released():
                self.consumer.poll(min(self._poll_s, 0.05))
            return 0
        self._pending = None
        if waited >= wait.warning_s:
            log.warning("%s: generation %d was placed after %.0fs", self.name, pending.generation, waited)
        log.info("%s: assignment received: tasks %s", self.name, [str(t) for t in tasks])
        if self._cooperative and (self.tasks or self._commits_held):
            self._hand_over(tasks, pending.revoking, pending.generation)
            return 0
        self._start_tasks(self.consumer, self._coordinator.partitions_of(tasks), rebalance=True)
        return 0

    def _warn_unplaced(self, pending: Pending, waited: float) -> None:
        assert self._coordinator is not None
        missing = self._coordinator.missing_slots(pending)
        log.warning(
            "%s: no assignment for generation %d of group %r after %.0fs (member %s); %s",
            self.name,
            pending.generation,
            self.config.application_id,
            waited,
            pending.member,
            f"member slots {slot_ranges(missing)} have not reported"
            if missing
            else "every member reported: waiting for the leader's placement",
        )

    def _new_generation(self, pending: Pending, why: str) -> None:
        """Make the group rebalance (a changed subscription; a static member's close and
        rejoin would not, on Kafka): every member revokes and reports again. Again after
        another rebalance bound if no generation follows."""
        assert self._coordinator is not None
        log.warning(
            "%s: generation %d of group %r: %s; starting a new generation (member %s)",
            self.name,
            pending.generation,
            self.config.application_id,
            why,
            pending.member,
        )
        if self._cooperative and self.tasks:
            # Not confirmed in this generation: another member may run these tasks already
            # (a leader that placed them without this member's report), so nothing of them
            # since the rebalance began may be committed here.
            log.warning("%s: dropping tasks %s uncommitted", self.name, sorted(str(t) for t in self.tasks))
            self._abort_and_close_tasks()
        pending.resubscribed = True
        pending.rejoin_at = time.monotonic() + self.assignment_wait.wedged_after_s
        self._coordinator.resubscribe(self.subscribed, self._subscribe)

    def _start_tasks(self, consumer: Any, partitions: list[Any], *, rebalance: bool) -> None:
        """Create, restore and initialise the tasks of an assignment, then read it exactly from
        the committed offsets the restore was filtered with (``assign`` in a rebalance
        callback, ``seek`` when tasks are rebuilt between rebalances).

        ``assign`` comes first: librdkafka then looks the input up and fetches it while the
        stores are opened and restored and the processors compiled (nothing polls the
        consumer meanwhile, so the records wait in its queue), instead of after; a start
        without restore waited ~0.2 s for its first records (bench/RESULTS.md).
        A partition without a committed offset is assigned at the position the reset policy
        names (what librdkafka would look up again).
        """
        self._rejoin_deadline = None
        self._set_state(WorkerState.PARTITIONS_ASSIGNED)
        if self.tasks:  # re-created after a migration without a rebalance in between
            # what they sent since the last commit goes too: an exactly-once producer that
            # sends as records come holds it in the open transaction, which the next commit
            # would publish beside the re-processed copies
            self._abort_and_close_tasks()
        assigned = {(tp.topic, tp.partition) for tp in partitions}
        log.info("%s assigned %d partitions", self.name, len(assigned))
        task_ids = tasks_of_assignment(self.plan, self.config.application_id, assigned)
        self.task_manager.claim_standbys(task_ids)
        in_group = fetch_committed(consumer, assigned, self._timeout_s)
        committed = fill_from_backup(self.config, in_group, self.name)
        starts = [(t, p, committed.get((t, p))) for t, p in sorted(assigned)]
        self._commits_held, self._refetch = False, False
        self._fetch_from = {(t, p): o for t, p, o in starts}
        if rebalance:
            nothing = self._reset_position(OFFSET_INVALID)
            consumer.assign([TopicPartition(t, p, nothing if o is None else o) for t, p, o in starts])
        self.task_manager.start_tasks(task_ids, committed, in_group)
        if not rebalance:
            nothing = self._reset_position(OFFSET_END)
            for t, p, o in starts:
                consumer.seek(TopicPartition(t, p, nothing if o is None else o))
        self._input.positioned(consumer, {(t, p): o for t, p, o in starts})
        self._set_state(WorkerState.RUNNING)

    def _reset_position(self, otherwise: int) -> int:
        """Where the reset policy starts a partition without a committed offset: librdkafka's
        logical offset for ``earliest``/``latest``, else ``otherwise``."""
        reset = str(self.config.consumer_configs(self.index).get("auto.offset.reset", "earliest"))
        if reset in ("earliest", "smallest", "beginning"):
            return OFFSET_BEGINNING
        if reset in ("latest", "largest", "end"):
            return OFFSET_END
        return otherwise

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self._set_state(WorkerState.PARTITIONS_REVOKED)
        if self._cooperative and self.tasks:
            self._hold_commits()
            return
        if self._pending is None:  # an unplaced member keeps reporting the tasks it had before
            self._previous_tasks = list(self.tasks)
        self._pending = None
        if self.tasks:
            if not self._commit_on_revocation():
                return
            self._close_tasks(clean=True)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._set_state(WorkerState.PARTITIONS_REVOKED)
        self._pending = None
        self._commits_held, self._refetch = False, False
        if self.tasks:
            log.warning("%s: partitions lost (expelled from the group); closing tasks dirty", self.name)
            self.migrations += 1
        self._abort_and_close_tasks()

    def _close_tasks(self, *, clean: bool) -> None:
        self.task_manager.close_all(clean=clean)
        self._commits_held, self._refetch = False, False
