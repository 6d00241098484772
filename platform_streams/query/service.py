"""``InteractiveQueries``: ``KafkaStreams.query`` and key -> host metadata for one client.

How a query reaches a store safely: stores belong to the worker thread running their
task. For every worker the query takes the worker's :class:`StoreGuard` (the worker lets
it in between loop iterations, between restored batches, or at once while it waits in
``poll``), looks the store up in the worker's active tasks (and standby tasks, when the
runtime has them), checks the position bound, runs the query and materializes the rows.

A task counts as *active and running* once its worker is RUNNING and none of its stores
is restoring. A task that is not running answers ``NOT_ACTIVE`` to ``require_active()``
queries, and otherwise answers from its (possibly partial) store with an empty position,
so any position bound fails with ``NOT_UP_TO_BOUND`` rather than read stale data as fresh.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from platform_streams.errors import InvalidStateStoreError, StreamsStateError
from platform_streams.kafka import TopicPartition, log_end_offsets
from platform_streams.processor.partitioner import default_partition
from platform_streams.processor.task_id import TaskId
from platform_streams.query.directory import InstanceDirectory, InstanceSnapshot
from platform_streams.query.execution import execute_query
from platform_streams.query.group_hosts import GroupHosts
from platform_streams.query.lags import ReplicaLag, Role, StoreReplica, lags_of, read_offsets, replicas_of
from platform_streams.query.metadata import HostInfo, KeyQueryMetadata, StreamsMetadata
from platform_streams.query.placement import KeyPlacement
from platform_streams.query.position import Position
from platform_streams.query.request import StateQueryRequest
from platform_streams.query.results import FailureReason, QueryResult, StateQueryResult
from platform_streams.query.task_positions import TaskPositions
from platform_streams.runtime.api import ClientAddOn, RuntimeView, TaskView, WorkerState, WorkerView
from platform_streams.runtime.observer import WorkerObserver
from platform_streams.runtime.tasks.task import store_changelogs
from platform_streams.state.manager import FROM_BEGINNING
from platform_streams.state.restore import StateRestoreListener
from platform_streams.state.versioned import VersionedKeyValueStoreBuilder

if TYPE_CHECKING:
    from platform_streams.serde.base import Serde
    from platform_streams.topology.compiler import SubTopologyPlan

__all__ = ["DEFAULT_QUERY_TIMEOUT_S", "InteractiveQueries"]

log = logging.getLogger(__name__)

DEFAULT_QUERY_TIMEOUT_S = 10.0
#: worker states whose tasks are (being) handed back: they claim nothing
_RELEASING = frozenset({WorkerState.PARTITIONS_REVOKED, WorkerState.PENDING_SHUTDOWN, WorkerState.DEAD})


class InteractiveQueries(ClientAddOn):
    """The query side of one client (built with the runtime's view, see runtime/api.py)."""

    def __init__(self, streams: RuntimeView) -> None:
        self._streams = streams
        self.positions = TaskPositions()
        self.directory: InstanceDirectory | None = None
        self.host: HostInfo | None = None
        #: (worker name, task id) -> stores of the task being restored now
        self._restoring: dict[tuple[str, TaskId], set[str]] = {}
        #: changelog partition -> the end offset its restore read from fetch responses
        self._restore_ends: dict[tuple[str, int], int] = {}
        #: changelog partitions -> their end offsets (a broker call; replaced in unit tests)
        self.fetch_changelog_ends: Callable[
            [Collection[tuple[str, int]]], Mapping[tuple[str, int], int]
        ] = lambda tps: log_end_offsets(streams.config.restore_consumer_configs(), tps, timeout_s=10.0)
        #: which stores' keys may be routed by murmur2 (source topics checked as consumed)
        self.placement = KeyPlacement(
            streams.plan,
            streams.config.application_id,
            streams.config.state_dir,
            lambda: streams.partition_counts,
        )
        #: store -> key queries answered by asking every partition (keys not murmur2-placed)
        self.scatter_queries: dict[str, int] = {}

    # ------------------------------------------------------------------ wiring

    def attach_worker(self, worker: WorkerView) -> None:
        """Persist positions after commits; track restores; let queries in between batches;
        check the key placement of source topics that feed stores."""
        if self.placement.checked_topics:
            worker.key_placement = self.placement
        worker.add_observer(_PositionPersister(self.positions, worker))
        worker.add_restore_listener(_QueryRestoreListener(self, worker))

    def start_directory(self, host: HostInfo) -> None:
        """Share this instance's tasks with the others (needs an application server)."""
        self.host = host
        placement = self.placement
        directory = InstanceDirectory(
            self._streams.config, host, on_misplaced=lambda topic: placement.learn(topic, "metadata topic")
        )
        if self._streams.config.group_protocol == "streams":
            streams = self._streams  # its worker list changes when workers are replaced
            directory.group_hosts = GroupHosts(
                streams.plan,
                streams.config.application_id,
                lambda: [worker.streams_group_endpoints() for worker in list(streams.workers)],
            )
        directory.ensure_topic()
        directory.start()
        self.directory = directory
        placement.publisher = directory.publish_misplaced
        placement.publish_known()
        self.publish()

    def close(self, *, clean: bool) -> None:
        if self.directory is not None:
            self.directory.close(tombstone=clean)

    def on_worker_state(self, worker: WorkerView, state: WorkerState) -> None:
        """On the worker thread, at each of its state changes: seed the positions of freshly
        restored tasks, then publish this instance's tasks."""
        if state is WorkerState.RUNNING:
            self._seed_positions(worker)
        self.publish()

    def publish(self) -> None:
        """Publish this instance's current tasks."""
        if self.directory is not None:
            self.directory.publish(self.local_snapshot)

    def _seed_positions(self, worker: WorkerView) -> None:
        """A restored store reflects at least the input offsets its task's group committed.

        (At-least-once flushes the changelog before committing offsets; exactly-once commits
        both in one transaction.) So once restored, a task's position is at least the
        committed offsets minus one, even on an instance that never ran the task before.
        """
        tasks = [task for task in list(worker.tasks.values()) if task.sub.stores]
        partitions = [TopicPartition(t, p) for task in tasks for t, p in task.partitions]
        if not partitions or worker.consumer is None:
            return
        try:
            committed = worker.consumer.committed(partitions, timeout=5)
        except Exception as exc:
            log.warning("positions of %s stay unseeded: committed offsets unavailable: %s", worker.name, exc)
            return
        offsets = {(tp.topic, tp.partition): tp.offset - 1 for tp in committed if tp.offset > 0}
        for task in tasks:
            mine = {tp: offset for tp, offset in offsets.items() if tp in task.partitions}
            if mine:
                self.positions.seed(task, Position.from_partition_offsets(mine))

    # ------------------------------------------------------------------ metadata

    def local_snapshot(self) -> InstanceSnapshot:
        active: set[str] = set()
        for worker in list(self._streams.workers):
            if worker.state in _RELEASING and not worker.processing:
                continue
            active.update(str(t) for t in _keys(worker.tasks))
        updater = self._streams.standbys
        standby = {str(t) for t in updater.standby_ids()} if updater is not None else set()
        hosted = {TaskId.parse(t).subtopology for t in active | standby}
        stores = {name for sub in self._streams.plan.subtopologies if sub.id in hosted for name in sub.stores}
        return InstanceSnapshot(
            client_id=self._streams.config.effective_client_id,
            state=self._streams.state().value,
            active_tasks=frozenset(active),
            standby_tasks=frozenset(standby),
            stores=frozenset(stores),
        )

    def metadata_for_all_clients(self) -> list[StreamsMetadata]:
        """Every instance known (through the metadata topic; only this one without it)."""
        if self.directory is not None:
            return self.directory.all_instances()
        snap = self.local_snapshot()
        host = self.host or HostInfo.unavailable()
        return [
            StreamsMetadata(
                host, snap.client_id, snap.state, snap.active_tasks, snap.standby_tasks, snap.stores
            )
        ]

    def query_metadata_for_key(
        self, store: str, key: Any, key_serde: Serde | None = None
    ) -> KeyQueryMetadata:
        """Which instance hosts ``key`` of ``store`` as active, which as standbys, and its partition.

        Not available (Kafka Streams' ``KeyQueryMetadata.NOT_AVAILABLE``, with the reason)
        when the store's keys are not murmur2-placed: any partition may hold the key, so
        no single host can be named (query every partition instead).
        """
        sub = self._sub_of(store)
        if not self.placement.is_routable(store):
            return KeyQueryMetadata.not_available(reason=self.placement.reason(store))
        partition = self.key_partition(store, key, key_serde)
        task = str(TaskId(sub.id, partition))
        if self.directory is not None:
            active = self.directory.active_host(task)
            standbys = self.directory.standby_hosts(task)
        else:
            snap = self.local_snapshot()
            local = self.host or HostInfo.unavailable()
            active = local if task in snap.active_tasks else None
            standbys = frozenset({local}) if task in snap.standby_tasks else frozenset()
        if active is None:
            return KeyQueryMetadata(HostInfo.unavailable(), standbys, partition)
        return KeyQueryMetadata(active, standbys - {active}, partition)

    # ------------------------------------------------------------------ store facts

    def has_store(self, store: str) -> bool:
        return any(store in sub.stores for sub in self._streams.plan.subtopologies)

    def _sub_of(self, store: str) -> SubTopologyPlan:
        for sub in self._streams.plan.subtopologies:
            if store in sub.stores:
                return sub
        raise InvalidStateStoreError(f"unknown state store {store!r}", store=store)

    def task_of(self, store: str, partition: int) -> TaskId:
        """The task hosting ``partition`` of ``store``."""
        return TaskId(self._sub_of(store).id, partition)

    def restoring_tasks(self) -> list[str]:
        """Tasks with a store being restored now, as ``<worker>/<task>``."""
        return sorted(f"{worker}/{task}" for worker, task in list(self._restoring))

    def local_lags(self, store: str | None = None, partition: int | None = None) -> list[ReplicaLag]:
        """The lag of every local copy (active, restoring, standby) of the store partitions,
        or of ``store``/``partition`` only (query/lags.py): Kafka's
        ``allLocalStorePartitionLags``; copies whose changelog end is unknown are left out."""
        return lags_of(self.local_replicas(store, partition), self.fetch_changelog_ends)

    def local_replicas(self, store: str | None = None, partition: int | None = None) -> list[StoreReplica]:
        """The local copies of the store partitions, without their lags (no broker call)."""
        plan, app = self._streams.plan, self._streams.config.application_id
        changelogs = {sub.id: store_changelogs(plan, sub, app) for sub in plan.subtopologies}
        if store is not None:
            sub_id = self._sub_of(store).id
            changelogs = {sub_id: {s: t for s, t in changelogs[sub_id].items() if s == store}}

        def of(task_id: TaskId, task: TaskView, role: Role) -> list[StoreReplica]:
            mine = changelogs.get(task_id.subtopology)
            if not mine or (partition is not None and task_id.partition != partition):
                return []
            applied = read_offsets(task.state_manager.changelog_offsets)
            return replicas_of(task_id.partition, mine, applied, role, self._restore_ends)

        out: list[StoreReplica] = []
        for worker in list(self._streams.workers):
            if worker.state in _RELEASING and not worker.processing:
                continue
            running = worker.processing
            for task_id, task in list(worker.tasks.items()):
                fresh = running and not self._restoring.get((worker.name, task_id))
                out += of(task_id, task, Role.ACTIVE if fresh else Role.RESTORING)
        updater = self._streams.standbys
        if updater is not None:
            with updater.reading():
                for task_id, standby in list(updater.tasks.items()):
                    out += of(task_id, standby, Role.STANDBY)
        return out

    def store_partitions(self, store: str) -> int:
        """How many partitions (tasks) the store has: its sub-topology's input partitions."""
        sub = self._sub_of(store)
        counts = self._streams.partition_counts
        app = self._streams.config.application_id
        sizes = [counts.get(self._streams.plan.physical_topic(t, app), 0) for t in sub.source_topics]
        if not any(sizes):
            raise StreamsStateError("partition counts are known once the client has started")
        return max(sizes)

    def store_key_serde(self, store: str) -> Serde:
        """The serde the store's keys are serialized with (the builder's, else the default)."""
        self._sub_of(store)
        builder = self._streams.plan.topology.stores[store]
        serde: Serde | None = getattr(builder, "key_serde", None)
        return serde if serde is not None else self._streams.config.default_key_serde

    def is_versioned(self, store: str) -> bool:
        """True for a versioned store (KIP-889; a versioned KTable's too): it answers only
        VersionedKeyQuery and MultiVersionedKeyQuery."""
        self._sub_of(store)
        builder = self._streams.plan.topology.stores[store]
        versioned = getattr(builder, "versioned", False)
        return isinstance(builder, VersionedKeyValueStoreBuilder) or bool(versioned)

    def key_routable(self, store: str) -> bool:
        """True if a key of ``store`` lives in its murmur2 partition (see query/placement.py)."""
        return self.placement.is_routable(store)

    def count_scatter(self, store: str) -> None:
        """A key query of ``store`` asked every partition (the metric reads the count)."""
        self.scatter_queries[store] = self.scatter_queries.get(store, 0) + 1

    def key_partition(self, store: str, key: Any, key_serde: Serde | None = None) -> int:
        """The partition of ``key`` in ``store`` (murmur2, as the producer placed it; only
        meaningful while :meth:`key_routable`)."""
        raw = (key_serde or self.store_key_serde(store)).serialize(key)
        if raw is None:
            raise ValueError("a key that serializes to None has no partition")
        return default_partition(raw, self.store_partitions(store))

    # ------------------------------------------------------------------ queries

    def query(
        self,
        request: StateQueryRequest,
        *,
        limit: int | None = None,
        timeout_s: float = DEFAULT_QUERY_TIMEOUT_S,
    ) -> StateQueryResult:
        """Run ``request`` against the store partitions this instance hosts (see module doc)."""
        state = self._streams.state()
        if not state.is_running_or_rebalancing():
            raise StreamsStateError(f"cannot query: the client is {state.value}")
        sub = self._sub_of(request.store_name)
        count = self.store_partitions(request.store_name)
        result = StateQueryResult()
        wanted = request.partitions
        if wanted is not None:
            for partition in sorted(p for p in wanted if not 0 <= p < count):
                result.add_result(
                    partition,
                    QueryResult.for_failure(
                        FailureReason.DOES_NOT_EXIST,
                        f"store {request.store_name!r} has partitions 0..{count - 1}, not {partition}",
                    ),
                )
        for worker in list(self._streams.workers):
            with worker.store_guard.hold(timeout_s):
                worker_running = worker.processing
                hosted = [
                    (task_id, task, worker_running and not self._restoring.get((worker.name, task_id)), True)
                    for task_id, task in list(worker.tasks.items())
                ]
                self._answer(hosted, sub.id, request, limit, result)
        updater = self._streams.standbys
        if updater is not None:
            with updater.reading():
                standbys = [(task_id, task, False, False) for task_id, task in list(updater.tasks.items())]
                self._answer(standbys, sub.id, request, limit, result)
        if wanted is not None:
            for partition in sorted(wanted - set(result.partition_results)):
                result.add_result(
                    partition,
                    QueryResult.for_failure(
                        FailureReason.NOT_PRESENT, f"partition {partition} is not hosted by this instance"
                    ),
                )
        return result

    def _answer(
        self,
        hosted: Sequence[tuple[TaskId, TaskView, bool, bool]],
        sub_id: int,
        request: StateQueryRequest,
        limit: int | None,
        out: StateQueryResult,
    ) -> None:
        """Let each hosted ``(task id, task, running, active)`` of the store's sub-topology answer;
        a partition that already succeeded (on an active task) is not asked again."""
        for task_id, task, running, is_active in hosted:
            partition = task_id.partition
            if task_id.subtopology != sub_id or (
                request.partitions is not None and partition not in request.partitions
            ):
                continue
            previous = out.partition_results.get(partition)
            if previous is not None and previous.is_success():
                continue
            if request.active_only and not running:
                reason = "a standby task" if not is_active else "an active task that is still restoring"
                out.add_result(
                    partition,
                    QueryResult.for_failure(
                        FailureReason.NOT_ACTIVE,
                        f"partition {partition} is hosted here by {reason}; the query requires an active one",
                    ),
                )
                continue
            out.add_result(partition, self._query_task(task, task_id, running, request, limit))

    def _query_task(
        self, task: TaskView, task_id: TaskId, running: bool, request: StateQueryRequest, limit: int | None
    ) -> QueryResult:
        store = task.store(request.store_name)
        if store is None:
            return QueryResult.for_failure(
                FailureReason.NOT_PRESENT, f"task {task_id} has no open store {request.store_name!r}"
            )
        position = self.positions.position_of(task) if running else Position()
        if not request.position_bound.satisfied_by(position, task_id.partition):
            return QueryResult.for_failure(
                FailureReason.NOT_UP_TO_BOUND,
                f"task {task_id} is at {position.to_dict()}, the bound is "
                f"{request.position_bound.position.to_dict()}",
            )
        started = time.perf_counter()
        answer = execute_query(store, request.query, limit=limit)
        if answer.is_success():
            answer.position = position
        if request.execution_info:
            answer.execution_info.append(
                f"task {task_id} store {request.store_name} answered {type(request.query).__name__} "
                f"in {(time.perf_counter() - started) * 1e6:.0f} us"
            )
        return answer

    # ------------------------------------------------------------------ restore tracking

    def _restore_started(
        self, worker: WorkerView, store: str, tp: tuple[str, int], start_offset: int
    ) -> None:
        partition = tp[1]
        self._restore_ends.pop(tp, None)  # learned again from this restore's fetches
        task_id = TaskId(self._sub_of(store).id, partition)
        self._restoring.setdefault((worker.name, task_id), set()).add(store)
        if start_offset == FROM_BEGINNING:
            task = worker.tasks.get(task_id)
            if task is not None:
                self.positions.forget(task)

    def _restore_ended(self, worker: WorkerView, store: str, partition: int) -> None:
        key = (worker.name, TaskId(self._sub_of(store).id, partition))
        stores = self._restoring.get(key)
        if stores is not None:
            stores.discard(store)
            if not stores:
                del self._restoring[key]


def _keys(tasks: Any) -> Iterable[TaskId]:
    """A snapshot of a task table's keys (another thread may be changing it)."""
    for _ in range(3):
        try:
            return list(tasks)
        except RuntimeError:
            continue
    return []


class _PositionPersister(WorkerObserver):
    """Writes the positions of a worker's tasks after each of its commits."""

    def __init__(self, positions: TaskPositions, worker: WorkerView) -> None:
        self._positions = positions
        self._worker = worker

    def on_commit(self, started: float) -> None:
        self._positions.persist(self._worker.tasks.values())


class _QueryRestoreListener(StateRestoreListener):
    """Marks tasks as restoring, publishes the tasks once a restore starts, yields to queries."""

    def __init__(self, service: InteractiveQueries, worker: WorkerView) -> None:
        self._service = service
        self._worker = worker

    def on_restore_start(
        self, store_name: str, tp: tuple[str, int], start_offset: int, end_offset_estimate: int | None
    ) -> None:
        self._service._restore_started(self._worker, store_name, tp, start_offset)
        self._service.publish()

    def on_log_end(self, store_name: str, tp: tuple[str, int], log_start: int, log_end: int) -> None:
        self._service._restore_ends[tp] = log_end

    def on_batch_restored(
        self, store_name: str, tp: tuple[str, int], batch_end_offset: int, num_restored: int
    ) -> None:
        self._worker.store_guard.yield_point()

    def on_restore_end(self, store_name: str, tp: tuple[str, int], total_restored: int) -> None:
        self._service._restore_ends.pop(tp, None)
        self._service._restore_ended(self._worker, store_name, tp[1])
