"""Cooperative rebalancing: the tasks that keep their owner keep processing through a rebalance.

With ``rebalance_protocol="cooperative"`` (state-aware placement only) a worker keeps its
tasks open when the group rebalances, as Kafka Streams does under KIP-429
(``StreamThread``'s rebalance listener and ``TaskManager.handleRevocation`` /
``handleAssignment``): only the tasks the new assignment takes away are closed. The group
protocol itself stays eager -- librdkafka revokes the member slots, and with them every
manually assigned input partition -- so the worker assigns the kept tasks' input again
from where it stopped reading, and goes on processing while it reports and waits.

The safety argument (docs/scale-out.md, "Cooperative rebalancing"), in short:

* *Commits wait for the new generation.* From the revocation until the new generation's
  assignment confirms a task, nothing is committed (``TaskManager.commit`` returns -1 while
  ``rebalanceInProgress``): a commit then carries the generation whose assignment named the
  task, which only its owner has.
* *A task moves in two steps.* A task a member still runs is given to no one else in that
  generation (:func:`~.task_assignment.protocol.hold_back_running`); the member commits
  (every task: they share one transaction) and closes it, then starts a follow-up
  generation, in which the task, now run by no one, goes to its new owner.
* *A member that cannot know* -- one the generation's assignment does not name, or that
  gives up waiting for it -- drops its tasks uncommitted: a leader that did not see its
  report may have given them away.

:class:`CooperativeHandover` is a mixin of :class:`~.worker_rebalance.TaskRebalancing`
(hence of the worker); the attributes it reads are the worker's, and the tasks are its
:class:`~platform_streams.runtime.tasks.task_manager.TaskManager`'s.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from platform_streams.errors import StreamsError
from platform_streams.kafka import OFFSET_INVALID, TopicPartition
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.api import WorkerState
from platform_streams.runtime.membership.assignment import tasks_of_assignment
from platform_streams.runtime.membership.rebalance_wait import fill_from_backup
from platform_streams.runtime.restore.changelog_filter import fetch_committed

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.runtime.task_assignment.coordinator import AssignmentCoordinator, Pending
    from platform_streams.runtime.tasks.task import StreamTask
    from platform_streams.runtime.tasks.task_manager import TaskManager
    from platform_streams.runtime.workers.input_queues import InputQueues
    from platform_streams.topology.compiler import TopologyPlan

__all__ = ["CooperativeHandover"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


class CooperativeHandover:
    """Keeping, releasing and adding tasks across a rebalance (see the module docstring)."""

    if TYPE_CHECKING:  # the worker's attributes and methods this part uses
        name: str
        plan: TopologyPlan
        config: StreamsConfig
        task_manager: TaskManager
        consumer: Any
        subscribed: list[str]
        _input: InputQueues
        _timeout_s: float
        _coordinator: AssignmentCoordinator | None
        _pending: Pending | None
        _previous_tasks: list[TaskId]
        _commits_held: bool
        #: the generation whose assignment this member released tasks of (its follow-up)
        _follow_up_of: int | None
        #: the coordinator's count of group re-creations this member has acted on
        _recreations_seen: int
        _refetch: bool
        _fetch_from: dict[TP, int | None]

        @property
        def tasks(self) -> dict[TaskId, StreamTask]: ...

        def commit(self) -> None: ...

        def _set_state(self, state: WorkerState) -> None: ...

        def _subscribe(self, topics: list[str]) -> None: ...

        def _abort_and_close_tasks(self) -> None: ...

        def _start_tasks(self, consumer: Any, partitions: list[Any], *, rebalance: bool) -> None: ...

        def _reset_position(self, otherwise: int) -> int: ...

    @property
    def _cooperative(self) -> bool:
        return self._coordinator is not None and self.config.rebalance_protocol == "cooperative"

    def _commit_on_revocation(self) -> bool:
        """Commit before the group's generation changes; a failed commit aborts and closes
        the tasks (their input is processed again by whoever gets it). True if committed."""
        try:
            self.commit()
        except StreamsError as exc:
            log.warning("commit on revocation failed (the input will be processed again): %s", exc)
            self._abort_and_close_tasks()
            return False
        return True

    def _hold_commits(self) -> None:
        """The group revoked this member's slots: a rebalance began. Commit what the current
        generation confirmed (its metadata is still valid: the broker forms the next generation
        only after every member rejoined), then keep the tasks running with commits held."""
        confirmed = self._pending is None and not self._commits_held
        self._pending = None
        if confirmed:
            self._previous_tasks = list(self.tasks)
            if not self._commit_on_revocation():
                return
        self._commits_held = True
        # librdkafka unassigns everything after the callback; the loop assigns the input again
        # once it routed what the poll that called back returns (positions computed now would
        # miss those records, and they would be read twice)
        self._refetch = True

    def _commit_allowed(self) -> bool:
        """May the worker commit now? Not during a cooperative rebalance: its commits wait for
        the new generation's assignment (``TaskManager.commit`` returns -1 while
        ``rebalanceInProgress``). Committing with the old generation until the next one forms
        would be safe (the broker refuses it afterwards), but librdkafka holds a consumer's
        offset commits while it rejoins, which stalls the loop for the whole JoinGroup, and
        a transactional one refused by a generation that formed meanwhile aborts the
        transaction."""
        return not self._commits_held

    def _input_positions(self) -> dict[TP, int | None]:
        """Per input partition of the tasks, the next offset to fetch: after the last record
        buffered or processed, else where the partition was assigned (None: the committed
        offset, or the reset policy)."""
        positions: dict[TP, int | None] = {}
        for task in self.tasks.values():
            for tp in task.partitions:
                queue = task.queues.queues.get(tp)
                if queue:
                    positions[tp] = queue[-1].offset() + 1
                elif tp in task.consumed:
                    positions[tp] = task.consumed[tp] + 1
                else:
                    positions[tp] = self._fetch_from.get(tp)
        return positions

    def _assign_inputs(self, positions: dict[TP, int | None]) -> None:
        """Make ``positions`` the consumer's whole assignment (the group protocol is eager:
        only ``assign`` may change it)."""
        self._refetch = False
        nothing = self._reset_position(OFFSET_INVALID)
        self.consumer.assign(
            [TopicPartition(t, p, nothing if o is None else o) for (t, p), o in sorted(positions.items())]
        )
        self._input.paused.difference_update(positions)
        self._input.positioned(self.consumer, positions)

    def _hand_over(self, tasks: list[TaskId], revoking: list[TaskId], generation: int) -> None:
        """The new generation's assignment arrived: keep, release, drop and add tasks.

        A task this member runs that the assignment neither leaves with it nor tells it to
        release was placed without this member's report: it is dropped uncommitted, and with
        it (one shared transaction) every task restarts from its last commit. Otherwise every
        task is committed under the new generation first, as ``handleRevocation`` commits the
        revoked tasks with all others that need it, then the revoked ones are closed.

        An assignment telling this member to release tasks it no longer runs is the one it
        already acted on: its follow-up rejoin formed no new generation. The embedded broker answers a
        static member's changed subscription that way (the member alone rejoins the same
        generation); a rejoin under a new member id makes it rebalance.
        """
        assert self._coordinator is not None
        if self._coordinator.recreations != self._recreations_seen:
            self._group_recreated()
        keep, release = set(tasks), {t for t in revoking if t in self.tasks}
        dropped = set(self.tasks) - keep - release
        if revoking and not release and self._follow_up_of == generation:
            log.warning(
                "%s: the follow-up rejoin formed no new generation (still %d): rejoining as a new member",
                self.name,
                generation,
            )
            self._commits_held = False
            self._rejoin_as_new_member()
            return
        self._commits_held = False
        if dropped:
            log.warning(
                "%s: tasks %s were placed elsewhere while this member ran them; dropping every task "
                "uncommitted",
                self.name,
                sorted(str(t) for t in dropped),
            )
            self._restart(tasks)
        else:
            try:
                if self.tasks:
                    self.commit()
            except StreamsError as exc:
                log.warning(
                    "%s: commit under the new generation failed: %s; restarting the tasks", self.name, exc
                )
                self._restart(tasks)
            else:
                self._release([t for t in release if t in self.tasks])
                self._add([t for t in tasks if t not in self.tasks])
        self._previous_tasks = list(self.tasks)
        if release or dropped:
            # the held-back tasks' new owners get them in the follow-up generation
            log.info(
                "%s: released %s; starting a follow-up rebalance", self.name, sorted(str(t) for t in release)
            )
            self._follow_up_of = generation
            self._coordinator.resubscribe(self.subscribed, self._subscribe)

    def _group_recreated(self) -> None:
        """A wedge repair deleted the group and created it again (runtime/membership/rebalance_wait.py):
        its committed offsets are gone, and a kept task commits only the partitions that
        progressed, so one without new input would never be committed in the new group.
        Every kept task commits all its partitions again at its next commit, as a task
        started after the repair commits the saved offsets (``StreamTask.recommit``)."""
        assert self._coordinator is not None
        self._recreations_seen = self._coordinator.recreations
        self._follow_up_of = None  # generation numbers start again
        for task in self.tasks.values():
            for tp, offset in task.committed.items():
                task.recommit.setdefault(tp, offset)

    def _rejoin_as_new_member(self) -> None:
        """Leave the subscription and join again: librdkafka rejoins without its member id,
        which every broker answers with a new generation (the kept tasks read on)."""
        self.consumer.unsubscribe()
        self._subscribe(self.subscribed)

    def _restart(self, tasks: list[TaskId]) -> None:
        assert self._coordinator is not None
        self._abort_and_close_tasks()
        self._start_tasks(self.consumer, self._coordinator.partitions_of(tasks), rebalance=True)

    def _release(self, task_ids: list[TaskId]) -> None:
        """Close committed tasks cleanly (checkpointed) and stop reading their input."""
        if not task_ids:
            return
        for task in self.task_manager.release(task_ids):
            for tp in task.partitions:
                self._fetch_from.pop(tp, None)
        self._assign_inputs(self._input_positions())

    def _add(self, task_ids: list[TaskId]) -> None:
        """Create, restore and start the tasks the assignment adds (no one else runs them:
        see :func:`~.task_assignment.protocol.hold_back_running`); the kept tasks read on."""
        if not task_ids:
            self._set_state(WorkerState.RUNNING)
            return
        app = self.config.application_id
        assigned = {  # every source of a sub-topology: they are co-partitioned
            (self.plan.physical_topic(t, app), task.partition)
            for task in task_ids
            for t in self.plan.subtopologies[task.subtopology].source_topics
        }
        added = tasks_of_assignment(self.plan, self.config.application_id, assigned)
        self.task_manager.claim_standbys(added)
        in_group = fetch_committed(self.consumer, assigned, self._timeout_s)
        committed = fill_from_backup(self.config, in_group, self.name)
        self.task_manager.start_tasks(added, committed, in_group)
        self._fetch_from.update({tp: committed.get(tp) for tp in assigned})
        self._assign_inputs(self._input_positions())
        self._set_state(WorkerState.RUNNING)
