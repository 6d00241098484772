"""``TaskManager``: a worker's active tasks -- their registry, creation, processing, commit
and close.

Kafka Streams splits a stream thread the same way: ``StreamThread`` runs the poll loop and
serves the group, its ``TaskManager`` (with the ``Tasks`` registry) creates, commits and
closes the tasks. Here :class:`~platform_streams.runtime.workers.worker.StreamWorker` keeps the loop,
the consumer and the rebalance callbacks (``worker_rebalance.py``, ``worker_handover.py``,
``worker_streams_group.py``), which decide *when*; this module does *what* happens to the
tasks, in the order that keeps state exact.

A commit, in this order (the order is what keeps state exact after a crash):

1. flush caches: what they forward is produced (and changelogged) in this commit;
2. at-least-once: wait for every record to be acknowledged, commit the input offsets;
   exactly_once_v2: one transaction with the records, the changelog records and the input
   offsets (:class:`~platform_streams.runtime.producing.streams_producer.StreamsProducer`), checking
   before the first send and again just before the commit that this worker is still a
   member of the group (an offset commit of the control topic: the group coordinator
   rejects it from a member it expelled, which is what fences a zombie on a broker that
   accepts stale transactional offset commits);
3. write the stores to disk and checkpoint the changelog offsets they reflect.

The group side of a commit -- committing offsets, the membership check, the group
metadata a transaction carries -- is the worker's (classic group or streams group); a
streams-group member's membership is verified by the worker before it calls
:meth:`TaskManager.commit`.

A dirty close under exactly-once aborts the open transaction first
(:meth:`TaskManager.close_dirty`): what the closed tasks sent since the last commit must
never reach a committed transaction beside their re-processed copies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from platform_streams.errors import StreamsError, TaskCorruptedError, TaskMigratedError
from platform_streams.kafka import TopicPartition
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.broker_calls import retrying
from platform_streams.runtime.restore.restore_ranges import Written
from platform_streams.runtime.tasks.task import StreamTask, start_task
from platform_streams.state.backend import StoreCorruptedError

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.processor.partitioner import PlacementChecks
    from platform_streams.runtime.broker_features import RepartitionPurger
    from platform_streams.runtime.producing.kafka_record_collector import KafkaRecordCollector
    from platform_streams.runtime.restore.standby import StandbyUpdater
    from platform_streams.runtime.restore.task_state import TaskStateLifecycle
    from platform_streams.runtime.workers.input_queues import InputQueues
    from platform_streams.state.cache import RecordCache
    from platform_streams.topology.compiler import TopologyPlan

__all__ = ["TaskManager"]

log = logging.getLogger(__name__)

TP = tuple[str, int]


def _wall_clock_ms() -> int:
    """The workers' task clock: wall-clock milliseconds."""
    return int(time.time() * 1000)


class TaskManager:
    """The active tasks of one worker (see the module docstring).

    ``commit_offsets``, ``check_membership`` and ``group_metadata`` are the worker's group
    side of a commit: a plain offset commit, the exactly-once membership check, and the
    group metadata a transaction's offsets are sent with.
    """

    def __init__(
        self,
        name: str,
        plan: TopologyPlan,
        config: StreamsConfig,
        *,
        state_root: Path,
        input_queues: InputQueues,
        state_lifecycle: TaskStateLifecycle,
        record_cache: RecordCache,
        standbys: StandbyUpdater | None,
        repartition_purger: RepartitionPurger,
        offsets_alone_in_transactions: bool,
        timeout_s: float,
        commit_offsets: Callable[[list[Any]], None],
        check_membership: Callable[[], None],
        group_metadata: Callable[[], Any],
    ) -> None:
        self.name = name
        self.plan = plan
        self.config = config
        #: the active tasks, by id (Kafka's ``Tasks`` registry; standbys are the client's updater's)
        self.tasks: dict[TaskId, StreamTask] = {}
        #: the worker's producer side; None until the worker started its clients
        self.collector: KafkaRecordCollector | None = None
        #: the client's global stores (GlobalKTable), readable by every task
        self.global_stores: Mapping[str, Any] = {}
        #: checks source-topic records are murmur2-placed (query/placement.py); set by the client
        self.key_placement: PlacementChecks | None = None
        self.record_cache = record_cache
        self.state_lifecycle = state_lifecycle
        self.repartition_purger = repartition_purger
        #: commits that committed something (offsets, or a transaction)
        self.committed_total = 0
        self._state_root = state_root
        self._input = input_queues
        self._standbys = standbys
        #: EOS: whether a transaction keeps offsets that no record goes with (runtime/broker_features.py)
        self._offsets_alone_in_transactions = offsets_alone_in_transactions
        self._timeout_s = timeout_s
        self._commit_offsets = commit_offsets
        self._check_membership = check_membership
        self._group_metadata = group_metadata

    # -- creation -------------------------------------------------------------------------

    def claim_standbys(self, task_ids: list[TaskId]) -> None:
        """Tell the standby updater these tasks become active here (it drops its copies)."""
        if self._standbys is not None:
            self._standbys.claim(task_ids)

    def create_task(self, task_id: TaskId) -> None:
        assert self.collector is not None
        task = start_task(
            task_id,
            self.plan,
            self._state_root,
            self.global_stores,
            self.config,
            self.collector,
            _wall_clock_ms,
            self.record_cache,
            self.key_placement,
        )
        self.tasks[task_id] = task
        self._input.add({tp: task.queues.queues[tp] for tp in task.partitions})

    def start_tasks(
        self, task_ids: list[TaskId], committed: Mapping[TP, int | None], in_group: Mapping[TP, int | None]
    ) -> None:
        """Create ``task_ids``, restore their stores (applying only changelog records written
        for input before ``committed``) and initialise their processors.

        ``in_group``: the offsets the group holds; one ``committed`` names that the group does
        not (a repair saved it) is committed again at the next commit, even with no new input:
        otherwise the group holds none for it until input arrives.
        """
        for task_id in task_ids:
            self.create_task(task_id)
        new = [self.tasks[t] for t in task_ids]
        if self.collector is not None:  # the tasks' first changelog writes are the next ones
            self.collector.forget_first_offsets(tp for t in new for tp in t.changelog_partitions)
        for task in new:
            task.recommit = {
                tp: o
                for tp in task.partitions
                if in_group.get(tp) is None and (o := committed.get(tp)) is not None
            }
        self.state_lifecycle.restore(new, committed)
        for task in new:
            task.initialize_processors()
            task.refresh_punctuation_flags()

    # -- processing -----------------------------------------------------------------------

    def process(self, max_records: int, on_failure: Callable[[StreamTask, Exception], None]) -> int:
        """Let each task process up to ``max_records`` of its buffered records; returns how many
        were processed. A task that fails on a record (not a migration, not an aborted
        transaction) goes to ``on_failure`` before the error propagates: as Kafka's
        TaskExecutor, the worker commits what was processed before it."""
        collector = self.collector
        assert collector is not None
        processed = 0
        try:
            for task in list(self.tasks.values()):
                collector.source = task.context  # a refused record names the input record
                try:
                    processed += task.process(max_records)
                except (TaskMigratedError, TaskCorruptedError):
                    raise
                except Exception as exc:
                    collector.source = None
                    on_failure(task, exc)
                    raise
        finally:
            collector.source = None
        return processed

    def punctuate(self, now_ms: int) -> None:
        """Run the tasks' wall-clock punctuators due at ``now_ms``."""
        for task in list(self.tasks.values()):
            task.punctuate_wall_clock(now_ms)

    def commit_needed(self) -> bool:
        """The producer or a task asks for a commit before the commit interval is up."""
        collector = self.collector
        assert collector is not None
        producer = collector.streams_producer
        return producer.commit_needed or any(t.commit_requested for t in self.tasks.values())

    # -- commit ---------------------------------------------------------------------------

    def commit(self, tasks: list[StreamTask], *, persist: bool = True) -> None:
        """Commit ``tasks``' progress (the module docstring's steps 1 to 3, in that order);
        ``persist=False``: no store written to disk or checkpointed."""
        collector = self.collector
        assert collector is not None
        for task in tasks:
            task.flush_caches()
        offsets: dict[TP, int] = {}
        for task in tasks:
            offsets.update(task.offsets_to_commit())
        positions = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        if collector.eos and positions and not (
            collector.streams_producer.holds_records or self._offsets_alone_in_transactions
        ):
            # offsets no record goes with, on a broker that may drop them from a transaction
            # (runtime/broker_features.py); a plain commit is checked against the membership
            retrying(lambda: self._commit_offsets(positions), "commit offsets", self._timeout_s)
            committed = True
        elif collector.eos:
            if positions or collector.streams_producer.buffered:
                self._check_membership()  # a zombie must not even send: some brokers never take it back
            committed = collector.commit_transaction(
                positions, self._group_metadata(), self._check_membership
            )
        else:
            collector.flush()
            if positions:
                retrying(lambda: self._commit_offsets(positions), "commit offsets", self._timeout_s)
            committed = bool(positions)
        if offsets:
            for task in tasks:
                task.mark_committed({tp: offsets[tp] for tp in task.partitions if tp in offsets})
        for task in tasks:
            task.context.commit_requested = False
        if committed:
            self.committed_total += 1
            self.repartition_purger.after_commit(offsets)
        if not persist:
            return
        self.state_lifecycle.persist(tasks, collector.offsets)
        self.publish_restore_ranges(tasks)

    def publish_restore_ranges(self, tasks: list[StreamTask], *, force: bool = False) -> None:
        """After a commit: the changelog ranges the tasks wrote for committed input (at most
        every few seconds a task; ``force``: a clean close)."""
        collector, ranges = self.collector, self.state_lifecycle.restore_ranges
        if ranges is None or collector is None:
            return
        ranges.after_commit(
            tasks, Written(collector.first_offsets, collector.offsets, collector.eos), force=force
        )

    # -- close ----------------------------------------------------------------------------

    def close_task_state(self, task: StreamTask, written: Mapping[TP, int], *, clean: bool) -> None:
        """Close one task's state (checkpointed when ``clean``) and tell the restore-range
        tracker; a failure is logged so the other tasks still close."""
        if self.state_lifecycle.restore_ranges is not None:
            self.state_lifecycle.restore_ranges.closed(task.task_id, clean=clean)
        try:
            self.state_lifecycle.close_task(task, written, clean=clean)
        except Exception:
            log.exception("closing task %s failed", task.task_id)

    def release(self, task_ids: Iterable[TaskId]) -> list[StreamTask]:
        """Close committed tasks cleanly (checkpointed) and drop their input queues; returns
        the closed tasks."""
        task_ids = list(task_ids)
        written = self.collector.offsets if self.collector is not None else {}
        closing = [self.tasks[t] for t in task_ids]
        self.publish_restore_ranges(closing, force=True)
        for task in closing:
            self.close_task_state(task, written, clean=True)
            del self.tasks[task.task_id]
            for tp in task.partitions:
                self._input.queues.pop(tp, None)
                self._input.paused.discard(tp)
        if self._standbys is not None:
            self._standbys.unclaim(task_ids)
        return closing

    def close_all(self, *, clean: bool) -> None:
        """Close every task (``clean``: after its final commit, checkpointed) and clear the
        input queues."""
        written = self.collector.offsets if self.collector is not None else {}
        if clean:  # after its final commit: what the next instance may restore unread
            self.publish_restore_ranges(list(self.tasks.values()), force=True)
        for task in self.tasks.values():
            self.close_task_state(task, written, clean=clean)
        if self._standbys is not None and self.tasks:
            self._standbys.unclaim(list(self.tasks))
        self.tasks.clear()
        self._input.clear()

    def close_dirty(self) -> None:
        """Abort the open transaction (exactly-once: every task's output since the last commit
        goes), then close every task dirty; a fenced producer is replaced by a new one."""
        collector = self.collector
        if collector is not None:
            collector.abort()
            if collector.streams_producer.needs_reset:
                collector.streams_producer.reset()
        self.close_all(clean=False)

    def mark_corrupted_store(self, exc: StoreCorruptedError) -> TaskId:
        """The task whose store ``exc`` names, its files marked for deletion at the task's close.

        Raises (fatal for the worker) if the store has no changelog -- its files are its only
        copy, nothing to restore it from, so they are left for the operator -- or if no task
        of this worker owns it.
        """
        for task_id, task in self.tasks.items():
            manager = task.state_manager
            if not manager.has_store_at(exc.store, exc.path):
                continue
            if not manager.is_logged(exc.store):
                raise StreamsError(
                    f"store {exc.store} of task {task_id} is corrupt ({exc.reason}) and has no changelog "
                    f"to restore it from (logging disabled): its files at {exc.path} are left as they "
                    "are; repair or delete them (all its data is then lost) and restart"
                ) from exc
            manager.mark_corrupted(exc.store)
            return task_id
        raise StreamsError(
            f"store {exc.store} at {exc.path} is corrupt ({exc.reason}) and belongs to no active task "
            f"of worker {self.name}: it cannot be rebuilt here"
        ) from exc
