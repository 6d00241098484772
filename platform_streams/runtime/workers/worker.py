"""``StreamWorker``: one consumer, one producer, the tasks assigned to them, and the loop.

Kafka Streams calls this a StreamThread. Under the GIL a worker is a thread whose
work is mostly C (librdkafka) plus the tasks' Python; parallelism across cores
comes from running several processes with the same ``application_id``.

The loop: consume a batch -> route records to their task's partition queue -> let each
task process -> pause backlogged / resume drained partitions -> run wall-clock
punctuators -> commit every ``commit_interval_ms``. Rebalance callbacks run inside
``consume``: revocation commits and closes tasks; assignment creates, restores and
initialises them (see :meth:`StreamWorker._on_assign`).

The tasks themselves -- their registry, creation, commit and close -- are the
:class:`~platform_streams.runtime.tasks.task_manager.TaskManager`'s (Kafka Streams' TaskManager);
the worker decides when: a commit every ``commit_interval_ms`` (under a streams group, once
its membership is verified), on revocation, before a stop.

When the group moved on without this worker (:class:`TaskMigratedError`: a failed
membership check, a fenced producer) its tasks are closed dirty and it rejoins; when a
transaction had to be aborted (:class:`TaskCorruptedError`) its tasks are rebuilt from
the changelogs and the input is read again from the committed offsets. Either way nothing
is written as a zombie: the records of the failed commit never reach a committed
transaction.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import DeserializationError, StreamsError, TaskCorruptedError, TaskMigratedError
from platform_streams.kafka import (
    KafkaAdmin,
    KafkaError,
    KafkaException,
    TopicPartition,
    create_consumer,
    group_membership,
    is_denied,
)
from platform_streams.processor.async_processing import calls_in_flight
from platform_streams.processor.partitioner import PlacementChecks
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.api import WorkerState
from platform_streams.runtime.broker_calls import retrying
from platform_streams.runtime.broker_features import RepartitionPurger, broker_may_skip_batches
from platform_streams.runtime.membership.leave_guard import LeaveGuard
from platform_streams.runtime.membership.rebalance_wait import AssignmentWait, observe_group, repair_group
from platform_streams.runtime.observer import WorkerObserver, chain_observer, chain_restore_listener
from platform_streams.runtime.producing.kafka_record_collector import (
    KafkaRecordCollector,
    dead_letter_topic_limit,
)
from platform_streams.runtime.producing.producer_settings import producer_settings
from platform_streams.runtime.producing.streams_producer import StreamsProducer
from platform_streams.runtime.restore.restore_ranges import RestoreRanges
from platform_streams.runtime.restore.task_state import TaskStateLifecycle
from platform_streams.runtime.store_guard import StoreGuard
from platform_streams.runtime.tasks.task import StreamTask, store_changelogs
from platform_streams.runtime.tasks.task_manager import TaskManager
from platform_streams.runtime.workers.input_queues import InputQueues
from platform_streams.runtime.workers.offset_gaps import OffsetGapGuard
from platform_streams.runtime.workers.worker_rebalance import TaskRebalancing
from platform_streams.runtime.workers.worker_streams_group import StreamsGroupSettings, StreamsGroupTasks
from platform_streams.state.cache import RecordCache
from platform_streams.state.private_files import app_state_dir
from platform_streams.state.restore import StateRestoreListener
from platform_streams.topology.compiler import TopologyPlan

if TYPE_CHECKING:
    from platform_streams.runtime.restore.standby import StandbyUpdater
    from platform_streams.runtime.task_assignment.coordinator import AssignmentCoordinator, Pending

log = logging.getLogger(__name__)

#: records taken from librdkafka per poll
_BATCH = 5000
#: the idle poll's wait while async processors have calls in flight, seconds
_ASYNC_POLL_S = 0.005


#: worker states in which the consumer is in the group but holds no assignment yet
_AWAITING_ASSIGNMENT = frozenset({WorkerState.STARTING, WorkerState.PARTITIONS_REVOKED})


class StreamWorker(TaskRebalancing, StreamsGroupTasks, threading.Thread):
    """Runs the poll -> process -> punctuate -> commit loop for its assigned tasks."""

    def __init__(
        self,
        index: int,
        plan: TopologyPlan,
        config: StreamsConfig,
        *,
        partition_counts: dict[str, int],
        on_state_change: Callable[[StreamWorker, WorkerState], None],
        on_failure: Callable[[StreamWorker, BaseException], None],
        wait_until_ready: Callable[[], None] | None = None,
        transactional_id: str | None = None,
        standbys: StandbyUpdater | None = None,
        control_topic: str | None = None,
        coordinator: AssignmentCoordinator | None = None,
        eager_sends: bool = False,
        offsets_alone_in_transactions: bool = True,
        restore_ranges: RestoreRanges | None = None,
        streams_group: StreamsGroupSettings | None = None,
    ) -> None:
        super().__init__(name=f"{config.effective_client_id}-StreamThread-{index + 1}", daemon=True)
        self.index = index
        self.plan = plan
        self.config = config
        self.partition_counts = partition_counts
        self._on_state_change = on_state_change
        self._on_failure = on_failure
        self._wait_until_ready = wait_until_ready
        self.state = WorkerState.CREATED
        self._input = InputQueues(
            config.buffered_records_per_partition,
            count_bytes=config.metrics_recording_level != "INFO",
            gap_guard=self._gap_guard(plan, config),
        )
        self._stop_event = threading.Event()
        self.failure: BaseException | None = None
        app = config.application_id
        self.source_topics = sorted(
            {plan.physical_topic(t, app) for s in plan.subtopologies for t in s.source_topics}
        )
        self._changelogs = {t for s in plan.subtopologies for t in store_changelogs(plan, s, app).values()}
        self._commit_interval_s = config.commit_interval_ms / 1000.0
        self._poll_s = config.poll_ms / 1000.0
        self._timeout_s = config.task_timeout_ms / 1000.0
        #: exactly_once_v2: the transactional.id of this worker's producer (stable across restarts)
        self.transactional_id = (
            (transactional_id or f"{app}-{config.effective_client_id}-{index + 1}")
            if config.exactly_once
            else None
        )
        self._standbys = standbys
        self._control_topic = control_topic
        self._eager_sends = eager_sends  # EOS: send before the commit (runtime/broker_features.py)
        #: state-aware placement: the group only gives membership, the coordinator the tasks
        self._coordinator = coordinator
        self._pending: Pending | None = None
        self._member: str | None = None
        self._previous_tasks: list[TaskId] = []
        #: cooperative rebalancing (worker_rebalance.py): commits wait for the new generation;
        #: the kept tasks' input is to be assigned again; where each input started
        self._commits_held = False
        self._refetch = False
        self._fetch_from: dict[tuple[str, int], int | None] = {}
        self._follow_up_of: int | None = None
        self._recreations_seen = 0
        #: deletes consumed repartition records after commits (brokers with DeleteRecords)
        self.repartition_purger = RepartitionPurger(plan, config)
        self.consumer: Any = None
        #: restore_ranges: the client's changelog ranges written for committed input
        #: (runtime/restore/restore_ranges.py), read and published through the state lifecycle
        self.state_lifecycle = TaskStateLifecycle(config, restore_ranges=restore_ranges)
        self.record_cache = RecordCache(config.statestore_cache_max_bytes)
        #: the active tasks: their registry, creation, commit and close (runtime/tasks/task_manager.py)
        self.task_manager = TaskManager(
            self.name,
            plan,
            config,
            state_root=app_state_dir(Path(config.state_dir), app),
            input_queues=self._input,
            state_lifecycle=self.state_lifecycle,
            record_cache=self.record_cache,
            standbys=standbys,
            repartition_purger=self.repartition_purger,
            offsets_alone_in_transactions=offsets_alone_in_transactions,
            timeout_s=self._timeout_s,
            commit_offsets=lambda positions: self._commit_offsets(positions),
            check_membership=lambda: self._check_membership(),
            group_metadata=lambda: self._group_metadata(),
        )
        self.processed_total = 0
        #: times this worker found itself fenced / migrated, and had to abort a transaction
        self.migrations = 0
        self.corruptions = 0
        #: set after a migration: tasks are re-created when the group answers (or at this time)
        self._rejoin_deadline: float | None = None
        #: lets interactive queries read this worker's stores safely (runtime/store_guard.py)
        self.store_guard = StoreGuard()
        #: metrics and query hooks: one call per loop iteration and per commit (runtime/observer.py)
        self.observer = WorkerObserver()
        #: KafkaStreams.pause()/resume(): read by the loop, which applies it on its own thread
        self.pause_requested = False
        #: says so when the group takes long to assign this worker anything
        self.assignment_wait = AssignmentWait(self.name, config)
        self._leave_guard = LeaveGuard(self.name, config)
        #: the stop's sequence began: rebalance callbacks start no task (worker_rebalance.py)
        self._stopping = False
        self._tasks_finished = False
        #: group_protocol="streams": the broker assigns the tasks (runtime/workers/worker_streams_group.py)
        self._streams_settings = streams_group

    @property
    def tasks(self) -> dict[TaskId, StreamTask]:
        """The active tasks, by id (the task manager's registry)."""
        return self.task_manager.tasks

    @property
    def collector(self) -> KafkaRecordCollector | None:
        """The producer side of the tasks (None until the clients started)."""
        return self.task_manager.collector

    @collector.setter
    def collector(self, collector: KafkaRecordCollector | None) -> None:
        self.task_manager.collector = collector

    @property
    def global_stores(self) -> Mapping[str, Any]:
        """The client's global stores (GlobalKTable), readable by every task."""
        return self.task_manager.global_stores

    @global_stores.setter
    def global_stores(self, stores: Mapping[str, Any]) -> None:
        self.task_manager.global_stores = stores

    @property
    def key_placement(self) -> PlacementChecks | None:
        """Checks source-topic records are murmur2-placed (query/placement.py); set by the client."""
        return self.task_manager.key_placement

    @key_placement.setter
    def key_placement(self, checks: PlacementChecks | None) -> None:
        self.task_manager.key_placement = checks

    @property
    def committed_total(self) -> int:
        return self.task_manager.committed_total

    @property
    def input_queues(self) -> InputQueues:
        """The assigned partitions' queues (and what each received: topic-level metrics)."""
        return self._input

    @property
    def processing(self) -> bool:
        """RUNNING, or its tasks kept processing through a cooperative rebalance (commits held
        until the new generation's assignment: worker_handover.py)."""
        return self.state is WorkerState.RUNNING or (self._commits_held and bool(self.tasks))

    # -- thread ---------------------------------------------------------------------------

    def add_observer(self, observer: WorkerObserver) -> None:
        """Also call ``observer`` from the loop (before the worker starts)."""
        self.observer = chain_observer(self.observer, observer)

    def add_restore_listener(self, listener: StateRestoreListener) -> None:
        """Also tell ``listener`` about this worker's restores (before the worker starts)."""
        lifecycle = self.state_lifecycle
        lifecycle.listener = chain_restore_listener(lifecycle.listener, listener)

    def shutdown(self) -> None:
        """Ask the loop to stop; it commits and leaves the group."""
        self._stop_event.set()

    def run(self) -> None:
        self.store_guard.acquire_for_worker()
        clean = False
        try:
            self._set_state(WorkerState.STARTING)
            if self._wait_until_ready is not None:
                self._wait_until_ready()
            self._start_clients()
            while not self._stop_event.is_set():
                try:
                    self.run_once()
                except TaskMigratedError as exc:
                    self._on_task_migrated(exc)
                except TaskCorruptedError as exc:
                    self._on_task_corrupted(exc)
            self._stopping = True
            clean = self._finish_tasks(clean=True)
            self._finish_rebalance()
        except BaseException as exc:  # the client decides what a dead worker means
            self.failure = exc
            log.error("worker %s failed: %s", self.name, exc, exc_info=exc)
        finally:
            self._set_state(WorkerState.PENDING_SHUTDOWN)
            self._close(clean)
            self._set_state(WorkerState.DEAD)
            self.store_guard.release_for_worker()
            if self.failure is not None:
                self._on_failure(self, self.failure)

    def _partition_count(self, topic: str) -> int:
        """Partitions of ``topic``, for custom partitioners.

        Topics known at start-up come from ``prepare_topics``; a topic chosen per record by
        a topic extractor is looked up once in all-topics metadata (naming the topic in the
        request could auto-create it on some brokers) and cached.
        """
        count = self.partition_counts.get(topic)
        if count is None:
            with KafkaAdmin(self.config.admin_configs()) as admin:
                found = admin.partition_counts([topic])[topic]
            if not found:
                raise StreamsError(f"sink topic {topic!r} does not exist: cannot partition records for it")
            count = self.partition_counts[topic] = found
        return count

    def _route_statistics(self, conf: dict[str, Any], client: str) -> None:
        """With ``statistics.interval.ms`` set, librdkafka's statistics go to the observer
        (the metrics recorder); librdkafka calls back from poll, on this worker's thread."""
        if int(conf.get("statistics.interval.ms", 0) or 0) > 0:
            conf["stats_cb"] = lambda document: self.observer.on_client_statistics(client, document)

    def _start_clients(self) -> None:
        settings = producer_settings(
            self.config, self.index, self.transactional_id, self._changelogs, self._route_statistics
        )

        def producer_factory(**callbacks: Any) -> StreamsProducer:
            return StreamsProducer(
                settings.conf,
                transactional_id=self.transactional_id,
                timeout_s=self._timeout_s,
                eager=self._eager_sends,
                changelog_conf=settings.changelog_conf,
                changelog_topics=self._changelogs,
                changelog_reports_only=settings.changelog_reports_only,
                quiet_changelogs=settings.quiet_changelogs,
                **callbacks,
            )

        dead_letter = self.config.errors_dead_letter_queue_topic_name
        admin_conf = self.config.admin_configs()
        self.collector = KafkaRecordCollector(
            producer_factory,
            partition_count=self._partition_count,
            tracked_topics=self._changelogs,
            production_policy=self.config.production_exception_handler,
            dead_letter_topic=dead_letter,
            dead_letter_topic_max_bytes=(
                partial(dead_letter_topic_limit, admin_conf, dead_letter) if dead_letter else None
            ),
            count_bytes=settings.count_bytes,  # the producer reports what the collector counts
        )
        self._join_group()
        self._next_commit = time.monotonic() + self._commit_interval_s

    def _join_group(self) -> None:
        """A new consumer, hence a new member of the application's group."""
        consumer_conf = self.config.consumer_configs(self.index)
        self._route_statistics(consumer_conf, "consumer")
        self.consumer = create_consumer(consumer_conf)
        if self._streams_settings is not None:  # assign()-ed by the streams group, never subscribed
            self._join_streams_group(self._streams_settings)
            return
        coordinator = self._coordinator
        self._subscribe(self.source_topics if coordinator is None else [coordinator.members_topic])

    def _subscribe(self, topics: list[str]) -> None:
        """Join the group (again: a changed subscription is how a probing rebalance starts)."""
        guarded = self.store_guard.wrap
        self.subscribed = list(topics)  # librdkafka's Python client cannot be asked
        self.consumer.subscribe(
            topics,
            on_assign=guarded(self._on_assign if self._coordinator is None else self._on_generation),
            on_revoke=guarded(self._on_revoke),
            on_lost=guarded(self._on_lost),
        )

    def _check_group(self) -> None:
        """While waiting for an assignment: look at the group; repair it once it is wedged
        (runtime/membership/rebalance_wait.py: never on a rebalance that is merely slow)."""
        partitions = [(t, p) for t in self.source_topics for p in range(self.partition_counts.get(t, 0))]
        try:
            seen = observe_group(self.config, partitions, group_membership(self.consumer)[1])
            recreations = self._coordinator.recreations if self._coordinator is not None else 0
            if self.assignment_wait.wedged(seen, recreations):
                recreated = self._coordinator.group_recreated if self._coordinator is not None else None
                coordinator = self._coordinator
                repair_group(
                    self.config,
                    partitions,
                    seen,
                    leave=self._leave_group,
                    on_deleted=recreated,
                    superseded=lambda: coordinator is not None and coordinator.recreations != recreations,
                )
        except StreamsError as exc:
            log.warning("%s: could not check or repair the group: %s", self.name, exc)
        if self.consumer is None:
            self._join_group()

    def _finish_rebalance(self) -> None:
        """After the final commit, before the leave: serve the group, processing nothing (what a
        poll returns is read again by the next owner), while the leave guard holds
        (runtime/membership/leave_guard.py). The commit comes first because this may last 1.5 session
        timeouts: a kill after a shorter grace period would lose the processed work, and an
        open transaction would outlive transaction.timeout.ms."""
        if self.consumer is None or self.streams_group is not None:  # a streams group's leave is final
            return
        try:
            alone = self._alone_in_generation()
            while self.consumer is not None and self._leave_guard.hold(
                self.state in _AWAITING_ASSIGNMENT, alone
            ):
                with self.store_guard.released():
                    self.consumer.poll(0.1)
        except Exception as exc:
            log.warning("%s: serving the group before leaving it failed: %s", self.name, exc)

    def _alone_in_generation(self) -> bool:
        """This worker was the only member of its last generation (the state-aware
        coordinator's generation lists its members). Under the range assignor a member learns
        only its own partitions: holding every one does not make it alone (more members than
        partitions, members with standbys only), so it is never taken as alone there."""
        if self._coordinator is not None:
            current = self._coordinator.current
            return current is not None and len(current.members) <= 1
        return False

    def _leave_group(self) -> None:
        consumer, self.consumer = self.consumer, None
        consumer.close()

    # -- the loop -------------------------------------------------------------------------

    def run_once(self) -> int:
        """One iteration: poll, process, punctuate, maybe commit. Returns records processed."""
        self.store_guard.yield_point()
        if self.streams_group is not None:
            self._reconcile_streams_group()
        elif self.assignment_wait.waiting:
            self.assignment_wait.warn_if_long(self.consumer, self.state.value)
            if self.assignment_wait.check_due():
                self._check_group()
        if self._pending is not None:
            return self._await_assignment()
        if self._member is not None and self._coordinator is not None:
            self._coordinator.maybe_probe(self._member, self.subscribed, self._subscribe)
        if self.pause_requested:
            return self._run_paused()
        if self._rejoin_deadline is not None and time.monotonic() >= self._rejoin_deadline:
            self._recreate_tasks("the group did not rebalance after a failed membership check")
        return self._process_iteration()

    def _process_iteration(self) -> int:
        """Poll, process, punctuate, and commit when due (never while a cooperative rebalance
        holds the commits: worker_handover.py)."""
        if self._refetch:  # cooperative: a rebalance callback unassigned the kept tasks' input
            self._assign_inputs(self._input_positions())
        started = time.perf_counter()
        messages = self._poll_batch()
        if self.streams_group is not None:
            self.streams_group.verify_before_processing()  # a dropped member must not write
        polled = time.perf_counter()
        inputs = self._input
        touched = self._route(messages) if messages else None
        collector = self.collector
        assert collector is not None
        processed = self.task_manager.process(10_000, self._commit_before_failure)
        if touched:
            inputs.pause_backlogged(self.consumer, touched)
        if inputs.paused:
            inputs.resume_drained(self.consumer)
        self.task_manager.punctuate(int(time.time() * 1000))
        collector.poll()
        self.processed_total += processed
        self.observer.on_loop(started, polled, len(messages), processed)
        due = time.monotonic() >= self._next_commit or self.task_manager.commit_needed()
        if due and self._commit_allowed():
            self.commit()
        return processed

    def _run_paused(self) -> int:
        """An iteration under ``KafkaStreams.pause()``: stay in the group, process nothing.

        Every assigned partition is paused (again each time: a rebalance may have assigned
        new ones) and added to the backpressure set, so once the pause is lifted the normal
        loop resumes them as their queues drain. Polling goes on, so rebalances are served
        and ``max.poll.interval.ms`` is not exceeded; what a poll still returns is queued.
        """
        consumer = self.consumer
        self._input.pause_all(consumer)
        with self.store_guard.released():
            message = consumer.poll(self._poll_s)
        if message is not None:
            self._route([message])
        if time.monotonic() >= self._next_commit:
            self.commit()
        return 0

    def _gap_guard(self, plan: TopologyPlan, config: StreamsConfig) -> OffsetGapGuard | None:
        """At-least-once reads its repartition topics with read_uncommitted; they are written
        without transactions, so their offsets follow on and a gap is a skipping broker
        (none where the high watermark moves only after the append: Apache Kafka)."""
        if config.exactly_once:
            return None
        topics = plan.repartition_topics(config.application_id)
        if not topics or not broker_may_skip_batches(config):
            return None
        return OffsetGapGuard(
            topics, lambda tp, offset: self.consumer.seek(TopicPartition(tp[0], tp[1], offset))
        )

    def _poll_batch(self) -> list[Any]:
        """What librdkafka has ready; when idle, wait up to ``poll_ms`` for the first record.

        ``consume(n, timeout)`` waits for the whole timeout unless ``n`` records are ready,
        which would add up to ``poll_ms`` of latency per loop under moderate load; a
        single ``poll`` returns as soon as one record arrives.
        """
        consumer = self.consumer
        messages: list[Any] = consumer.consume(_BATCH, 0)
        if messages or self._input.backlog():
            return messages
        # async processors' calls in flight: come back soon to forward what completes
        wait_s = _ASYNC_POLL_S if calls_in_flight(self.tasks.values()) else self._poll_s
        with self.store_guard.released():
            first = consumer.poll(wait_s)
        if first is None:
            return []
        return [first, *consumer.consume(_BATCH - 1, 0)]

    def _route(self, messages: list[Any]) -> set[tuple[str, int]]:
        # records of a partition no longer assigned are expected (and not worth a warning)
        # while the worker waits to rejoin after a migration
        return self._input.route(
            messages, self._on_consume_error, warn_unassigned=self._rejoin_deadline is None
        )

    def _on_consume_error(self, err: Any) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.fatal():
            raise KafkaException(err)
        if is_denied(err):
            # librdkafka would retry an ACL refusal forever: the worker would never join
            group = self.config.application_id
            denied = f"{err.str()} ({err.name()})"
            raise StreamsError(f"the broker denied the consumer of group {group!r}: {denied}")
        log.warning("consumer error (will retry): %s", err)

    # -- commit ---------------------------------------------------------------------------

    def _commit_before_failure(self, failed: StreamTask, exc: Exception) -> None:
        """``failed`` stopped at a record it could not process (a handler said FAIL): under
        at-least-once, commit what was processed before that record, so that the records
        before the stop point, whose outputs librdkafka delivers anyway, are not processed
        again after a restart (Kafka Streams' TaskExecutor commits the tasks that processed
        successfully before it rethrows; the failing task's consumed offset is the record
        before the failing one). The failing task itself is left out where the failing record
        may have changed its stores before it failed (a processing error in a task with
        stores): as in Kafka, it restarts from its last commit. Stores are not checkpointed
        (a restart restores them from the changelog, which applies only writes for committed
        input); exactly-once aborts instead (the close)."""
        collector = self.collector
        if collector is None or collector.eos:
            return
        clean = isinstance(exc, DeserializationError) or not failed.sub.stores
        try:
            self.commit(skip=None if clean else failed, persist=False)
        except Exception as commit_failure:
            log.warning("could not commit the records processed before the failure: %s", commit_failure)

    def commit(self, *, skip: StreamTask | None = None, persist: bool = True) -> None:
        """Commit the tasks' progress (the task manager's steps, runtime/tasks/task_manager.py);
        ``skip``: a task left out, ``persist=False``: no store written to disk or checkpointed."""
        assert self.collector is not None
        started = time.perf_counter()
        if self.streams_group is not None:
            # a dropped member's caches hold state its tasks' new owner has moved past
            self.streams_group.verify_membership()
        self.task_manager.commit([task for task in self.tasks.values() if task is not skip], persist=persist)
        if not persist:
            return
        self._next_commit = time.monotonic() + self._commit_interval_s
        self.observer.on_commit(started)

    def _group_metadata(self) -> Any:
        """The group metadata a transaction's offsets are sent with (the streams group's member
        and epoch under ``group_protocol="streams"``)."""
        if self.streams_group is None:
            return self.consumer.consumer_group_metadata()
        return self._streams_group_metadata()

    def _commit_offsets(self, positions: list[Any]) -> None:
        if self.streams_group is not None:
            self._commit_streams_group({(tp.topic, tp.partition): tp.offset for tp in positions})
            return
        result = self.consumer.commit(offsets=positions, asynchronous=False)
        failed = [tp for tp in result or () if tp.error is not None]
        if failed:
            raise KafkaException(failed[0].error)

    def _check_membership(self) -> None:
        """Exactly-once's last step before committing: is this worker still in the group?

        Kafka rejects a transactional offset commit from a stale generation (KIP-447); a
        broker that accepts it (probed at start) would let a paused-and-resumed zombie commit over
        the new owner. A plain offset commit is checked against the membership everywhere,
        so one is made for the control topic (partition 0, offset 0: nobody reads it).
        """
        if self._control_topic is None:
            return
        positions = [TopicPartition(self._control_topic, 0, 0)]
        retrying(lambda: self._commit_offsets(positions), "membership check", self._timeout_s)

    # -- migrations and aborted transactions ------------------------------------------------

    def _close(self, clean: bool) -> None:
        try:
            if not self._tasks_finished:
                self._finish_tasks(clean)
        finally:
            self._close_clients()

    def _finish_tasks(self, clean: bool) -> bool:
        """The final commit (``clean``; under exactly-once the transaction's), then the tasks
        closed -- dirty, the transaction aborted, when the commit failed or was not allowed.
        Returns whether the stop is still clean."""
        if clean and self._commits_held and self.tasks:
            # a cooperative rebalance is under way: the tasks are not confirmed in the new
            # generation yet, so their progress since it began is not committed
            log.info("%s: closing during a rebalance: uncommitted input will be read again", self.name)
            clean = False
        try:
            if clean and self.tasks and self.collector is not None:
                self.commit()
        except TaskMigratedError as exc:
            log.warning(
                "final commit failed (the group moved on; the input will be processed again): %s", exc
            )
            clean = False
        except Exception as exc:
            # records that could not be written (or a broker that never answered): the stop
            # was not clean, and whoever runs the client must be able to tell (exit status)
            log.error("final commit failed: %s", exc)
            self.failure = self.failure or exc
            clean = False
        if not clean and self.collector is not None:
            self.collector.abort()
        self._close_tasks(clean=clean)
        self._tasks_finished = True
        return clean

    def _close_clients(self) -> None:
        # Closed clients are dropped too: one left referenced lives (and keeps reconnecting)
        # until garbage collection. The collector stays for its counters; closing its
        # producer releases the librdkafka client.
        self.repartition_purger.close()
        self._leave_streams_group()  # after the final commit: the tasks go to the others at once
        consumer = self.consumer
        if consumer is not None:
            # confluent-kafka's close can raise after its rebalance callbacks ran (a SystemError
            # from its C code, on Apache Kafka): the producer must still be closed and the
            # worker still reach DEAD, or its client would wait for it
            try:
                consumer.close()
            except Exception as exc:
                log.warning("%s: closing the consumer failed: %s", self.name, exc)
            finally:
                self.consumer = None
        if self.collector is not None:
            try:
                self.collector.streams_producer.close()
            except Exception as exc:
                log.warning("closing the producer failed: %s", exc)

    def _set_state(self, state: WorkerState) -> None:
        if self.state is not state:
            self.state = state
            self.assignment_wait.on_state(state in _AWAITING_ASSIGNMENT)
            if state is WorkerState.RUNNING:
                self._leave_guard.joined()  # the broker probed in the background, once
            self._on_state_change(self, state)
