"""What the assignor knows about one client (process), and the priority set it polls.

Translated from Kafka Streams' ``ClientState``, ``AssignmentConfigs`` and
``ConstrainedPrioritySet`` (``streams/.../processor/internals/assignment/``). A client is
a process (one state directory); its *capacity* is its number of group members (stream
threads). Lags are per task: ``end offset sum - the client's offset sum`` of the task's
changelogs, with :data:`LATEST_OFFSET` for a task the client runs right now (always
caught up) and the full end offset sum for a task it has no state of.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from platform_streams.processor.task_id import TaskId

__all__ = ["LATEST_OFFSET", "AssignmentConfigs", "ClientState", "ConstrainedPrioritySet", "RackAwareStrategy"]

#: KIP-925's rack.aware.assignment.strategy values (runtime/task_assignment/rack_aware.py)
RackAwareStrategy = Literal["none", "min_traffic", "balance_subtopology"]

#: the lag of a task the client is running as an active task now (Kafka's Task.LATEST_OFFSET)
LATEST_OFFSET = -2


@dataclass(frozen=True)
class AssignmentConfigs:
    """The assignor's settings (Kafka's ``AssignorConfiguration.AssignmentConfigs``)."""

    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    num_standby_replicas: int = 0
    probing_rebalance_interval_ms: int = 600_000
    rack_aware_assignment_tags: tuple[str, ...] = ()
    #: KIP-925: "none", "min_traffic" or "balance_subtopology" (active task placement)
    rack_aware_assignment_strategy: RackAwareStrategy = "none"
    #: None: the assignor's defaults (10 and 1 for stateful tasks)
    rack_aware_assignment_traffic_cost: int | None = None
    rack_aware_assignment_non_overlap_cost: int | None = None


@dataclass
class ClientState:
    """One client: its capacity, lags, tags, previous tasks and the assignment being built."""

    capacity: int = 1
    lags: dict[TaskId, int] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    prev_active: set[TaskId] = field(default_factory=set)
    prev_standby: set[TaskId] = field(default_factory=set)
    active: set[TaskId] = field(default_factory=set)
    standby: set[TaskId] = field(default_factory=set)
    #: the subset of ``standby`` that are warm-ups for a planned move of an active task
    warmup: set[TaskId] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {self.capacity}")

    # -- lags ------------------------------------------------------------------------------

    def lag_for(self, task: TaskId, end_offset_sum: int | None = None) -> int:
        """The task's lag on this client; without a reported lag, the whole changelog."""
        lag = self.lags.get(task)
        if lag is not None:
            return lag
        return end_offset_sum if end_offset_sum is not None else _NO_STATE

    # -- assignment ------------------------------------------------------------------------

    def assign_active(self, task: TaskId) -> None:
        self.standby.discard(task)
        self.warmup.discard(task)
        self.active.add(task)

    def unassign_active(self, task: TaskId) -> None:
        self.active.discard(task)

    def assign_standby(self, task: TaskId) -> None:
        if task in self.active:
            raise ValueError(f"task {task} is already active on this client")
        self.standby.add(task)

    def unassign_standby(self, task: TaskId) -> None:
        self.standby.discard(task)
        self.warmup.discard(task)

    def has_assigned_task(self, task: TaskId) -> bool:
        return task in self.active or task in self.standby

    def has_standby_task(self, task: TaskId) -> bool:
        return task in self.standby

    def active_task_load(self) -> float:
        return len(self.active) / self.capacity

    def assigned_task_load(self) -> float:
        return (len(self.active) + len(self.standby)) / self.capacity


#: the lag of a client that has no state of a task and no end offset was given
_NO_STATE = 1 << 62


class ConstrainedPrioritySet:
    """Clients by least load (then id) that may be polled only for tasks they are eligible for."""

    def __init__(
        self,
        constraint: Callable[[str, TaskId], bool],
        load: Callable[[str], float],
    ) -> None:
        self._constraint = constraint
        self._load = load
        self._clients: set[str] = set()

    def offer(self, client: str) -> None:
        self._clients.add(client)

    def offer_all(self, clients: Iterable[str]) -> None:
        self._clients.update(clients)

    def poll(self, task: TaskId, extra: Callable[[str], bool] | None = None) -> str | None:
        """Remove and return the least loaded eligible client (None if there is none)."""
        eligible = [c for c in self._clients if self._constraint(c, task) and (extra is None or extra(c))]
        if not eligible:
            return None
        best = min(eligible, key=lambda c: (self._load(c), c))
        self._clients.discard(best)
        return best


def tasks_to_caught_up_clients(
    stateful_tasks: Iterable[TaskId], clients: Mapping[str, ClientState], acceptable_recovery_lag: int
) -> dict[TaskId, set[str]]:
    """Per task, the clients within ``acceptable_recovery_lag`` (or running it)."""
    out: dict[TaskId, set[str]] = {}
    for task in stateful_tasks:
        for client, state in clients.items():
            if state.lag_for(task) <= acceptable_recovery_lag:
                out.setdefault(task, set()).add(client)
    return out


def tasks_to_clients_by_lag(
    stateful_tasks: Iterable[TaskId], clients: Mapping[str, ClientState]
) -> dict[TaskId, list[str]]:
    """Per task, every client sorted from the most caught up (lag, then id)."""
    return {task: sorted(clients, key=lambda c: (clients[c].lag_for(task), c)) for task in stateful_tasks}
