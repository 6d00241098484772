"""The typed seam between the runtime and its add-ons (metrics, interactive queries, HTTP).

Why a seam: the add-ons read the runtime (worker states, task tables, stores) and the
runtime must tell them about workers and state changes -- but the runtime must not depend
on them. So the runtime publishes *views* here (:class:`RuntimeView`, :class:`WorkerView`,
:class:`TaskView`), and each add-on implements :class:`ClientAddOn`. The composed client
(:class:`platform_streams.kafka_streams.KafkaStreams`) builds the add-ons with the view and
hands them to :class:`~platform_streams.runtime.streams_runtime.StreamsRuntime`; the
import-linter contract "runtime never imports server, query or metrics" (pyproject.toml)
keeps it that way.

The views are :class:`typing.Protocol` s: the runtime's own classes satisfy them
structurally, and mypy checks every add-on against the attributes it actually reads, so
no add-on needs ``Any`` or a ``getattr`` chain to reach the runtime.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.kafka.streams_group.member import EndpointPartitions
    from platform_streams.processor.partitioner import PlacementChecks
    from platform_streams.processor.task_id import TaskId
    from platform_streams.runtime.lifecycle import State
    from platform_streams.runtime.observer import WorkerObserver
    from platform_streams.runtime.producing.kafka_record_collector import KafkaRecordCollector
    from platform_streams.runtime.restore.standby import StandbyUpdater
    from platform_streams.runtime.store_guard import StoreGuard
    from platform_streams.runtime.task_assignment.coordinator import AssignmentCoordinator
    from platform_streams.runtime.tasks.task import StreamTask
    from platform_streams.runtime.workers.input_queues import InputQueues
    from platform_streams.state.cache import RecordCache
    from platform_streams.state.manager import ProcessorStateManager
    from platform_streams.state.restore import StateRestoreListener
    from platform_streams.topology.compiler import TopologyPlan

__all__ = ["ClientAddOn", "RuntimeView", "TaskView", "WorkerState", "WorkerView"]


class WorkerState(enum.Enum):
    """Kafka Streams' StreamThread states, as the client aggregates them."""

    CREATED = "CREATED"
    STARTING = "STARTING"
    PARTITIONS_REVOKED = "PARTITIONS_REVOKED"
    PARTITIONS_ASSIGNED = "PARTITIONS_ASSIGNED"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    DEAD = "DEAD"


class TaskView(Protocol):
    """What a query reads of a task, active or standby: its id, inputs and stores (and, for
    its lag, the changelog offsets its state manager applied)."""

    task_id: TaskId
    partitions: list[tuple[str, int]]
    state_manager: ProcessorStateManager

    def store(self, name: str) -> Any | None:
        """The open store ``name`` of this task (None if the task has no such store)."""


class WorkerView(Protocol):
    """What an add-on reads of a stream worker (read on other threads: copy before iterating)."""

    name: str
    plan: TopologyPlan
    state: WorkerState
    failure: BaseException | None
    processed_total: int
    consumer: Any
    collector: KafkaRecordCollector | None
    record_cache: RecordCache
    store_guard: StoreGuard
    observer: WorkerObserver
    key_placement: PlacementChecks | None

    @property
    def input_queues(self) -> InputQueues:
        """The assigned partitions' queues (what each received: topic-level metrics)."""

    @property
    def tasks(self) -> Mapping[TaskId, StreamTask]:
        """The active tasks (the metrics recorder hooks into them, queries read their stores)."""

    @property
    def processing(self) -> bool:
        """Its active tasks process: RUNNING, or kept through a cooperative rebalance (queries
        answer from them as from running actives)."""

    def add_observer(self, observer: WorkerObserver) -> None:
        """Also call ``observer`` from the worker loop (before the worker starts)."""

    def streams_group_view(self) -> dict[str, Any] | None:
        """Its streams-group member and the broker's group state/epoch (None: classic)."""

    def streams_group_endpoints(self) -> tuple[int, Mapping[tuple[str, int], EndpointPartitions]] | None:
        """The broker's latest endpoint information (its epoch, endpoint -> the partitions of
        the tasks behind it) as this worker's streams-group member heard it (None: classic)."""

    def add_restore_listener(self, listener: StateRestoreListener) -> None:
        """Also tell ``listener`` about this worker's restores (before the worker starts)."""


class RuntimeView(Protocol):
    """What an add-on reads of the client: config, plan, state, workers, standbys."""

    config: StreamsConfig
    plan: TopologyPlan
    partition_counts: dict[str, int]

    @property
    def workers(self) -> Sequence[WorkerView]: ...

    @property
    def standbys(self) -> StandbyUpdater | None:
        """The standby tasks' updater (``num_standby_replicas`` > 0, or a streams group), None without."""

    @property
    def coordinator(self) -> AssignmentCoordinator | None:
        """The state-aware task assignor of this client, None before start."""

    def state(self) -> State: ...

    def is_paused(self) -> bool: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def restart_workers(self, timeout_s: float = 60.0) -> bool: ...


class ClientAddOn:
    """Something the client drives alongside its workers; every hook is a no-op here.

    Hooks run in this order: :meth:`attach_worker` before each worker starts (on the
    client's thread), :meth:`on_worker_state` on the worker thread at each of its state
    changes, :meth:`close` when the client stops serving.
    """

    def attach_worker(self, worker: WorkerView) -> object:
        """A worker is about to start: add observers and restore listeners to it (what it
        returns, e.g. the metrics recorder, is for the caller's tests; the runtime ignores it)."""

    def on_worker_state(self, worker: WorkerView, state: WorkerState) -> None:
        """``worker`` entered ``state`` (called on the worker's thread)."""

    def close(self, *, clean: bool) -> None:
        """The client stopped serving (``clean``: its workers committed and left)."""
