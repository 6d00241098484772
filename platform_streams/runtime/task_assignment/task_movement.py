"""Moving active and standby tasks to caught-up clients, with warm-ups for the rest.

Translated from Kafka Streams' ``TaskMovement`` (KIP-441). The balanced placement may put
a stateful task on a client that is not caught up on it. Such a task is not moved there
yet: it goes (in order of preference) to a caught-up client holding its standby (the two
swap roles), else to the least loaded caught-up client, else to the most caught-up client;
and, while warm-up replicas remain (``max_warmup_replicas``), the client the balance wanted
keeps a *warm-up* of it: a standby that builds the state there, so a later (probing)
rebalance can move the task once the warm-up is caught up. The number of planned
movements is returned: more than zero means a probing rebalance is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import ClientState, ConstrainedPrioritySet

__all__ = ["assign_active_task_movements", "assign_standby_task_movements"]


@dataclass(frozen=True)
class _Movement:
    task: TaskId
    destination: str
    caught_up_clients: frozenset[str]

    def order(self) -> tuple[int, TaskId]:
        """Tasks with fewer caught-up clients first (they have fewer places to go)."""
        return (len(self.caught_up_clients), self.task)


class _Budget:
    """The warm-up replicas still available (Kafka's AtomicInteger remainingWarmupReplicas)."""

    def __init__(self, count: int) -> None:
        self.count = count

    def take(self) -> bool:
        if self.count > 0:
            self.count -= 1
            return True
        return False


def _holds_standby(clients: Mapping[str, ClientState], task: TaskId) -> Callable[[str], bool]:
    return lambda c: clients[c].has_standby_task(task)


def _lacks(clients: Mapping[str, ClientState], task: TaskId) -> Callable[[str], bool]:
    return lambda c: not clients[c].has_assigned_task(task)


def _caught_up(task: TaskId, client: str, caught_up: Mapping[TaskId, set[str]]) -> bool:
    return client in caught_up.get(task, set())


def _not_caught_up_and_better_exists(
    task: TaskId,
    client: str,
    clients: Mapping[str, ClientState],
    caught_up: Mapping[TaskId, set[str]],
    by_lag: Mapping[TaskId, list[str]],
) -> bool:
    if _caught_up(task, client, caught_up):
        return False
    most = by_lag[task][0]
    return clients[most].lag_for(task) < clients[client].lag_for(task)


def _move_active_and_try_to_warm_up(
    budget: _Budget, task: TaskId, source: ClientState, destination: ClientState, warmups: set[TaskId]
) -> None:
    """``source`` (caught up) takes the active task; ``destination`` keeps a warm-up if allowed."""
    source.assign_active(task)
    destination.unassign_active(task)
    if budget.take():
        destination.assign_standby(task)
        destination.warmup.add(task)
        warmups.add(task)


def assign_active_task_movements(
    caught_up: Mapping[TaskId, set[str]],
    by_lag: Mapping[TaskId, list[str]],
    clients: Mapping[str, ClientState],
    warmups: dict[str, set[TaskId]],
    remaining_warmups: _Budget | int,
) -> int:
    """Move active tasks off clients that are not caught up (see the module docstring)."""
    budget = remaining_warmups if isinstance(remaining_warmups, _Budget) else _Budget(remaining_warmups)
    movements: list[_Movement] = []
    for client, state in sorted(clients.items()):
        for task in sorted(state.active):
            if task in by_lag and _not_caught_up_and_better_exists(task, client, clients, caught_up, by_lag):
                movements.append(_Movement(task, client, frozenset(caught_up.get(task, set()))))
    queue = ConstrainedPrioritySet(
        lambda c, t: _caught_up(t, c, caught_up), lambda c: clients[c].assigned_task_load()
    )
    queue.offer_all(clients)
    for movement in sorted(movements, key=_Movement.order):
        task, destination = movement.task, movement.destination
        dest_state = clients[destination]
        standby_holder = queue.poll(task, _holds_standby(clients, task))
        if standby_holder is not None:
            holder = clients[standby_holder]
            holder.unassign_standby(task)
            holder.assign_active(task)
            dest_state.unassign_active(task)
            dest_state.assign_standby(task)
            queue.offer_all([standby_holder, destination])
            continue
        caught_up_client = queue.poll(task)
        if caught_up_client is not None:
            _move_active_and_try_to_warm_up(
                budget, task, clients[caught_up_client], dest_state, warmups.setdefault(destination, set())
            )
            queue.offer_all([caught_up_client, destination])
            continue
        most = by_lag[task][0]
        if most == destination:
            raise RuntimeError(f"task {task}: planned a move to a more caught-up client but none exists")
        if clients[most].has_standby_task(task):  # the most caught up holds a standby: swap roles
            clients[most].assign_active(task)
            dest_state.unassign_active(task)
            dest_state.assign_standby(task)
            continue
        _move_active_and_try_to_warm_up(
            budget, task, clients[most], dest_state, warmups.setdefault(destination, set())
        )
    return len(movements)


def assign_standby_task_movements(
    caught_up: Mapping[TaskId, set[str]],
    by_lag: Mapping[TaskId, list[str]],
    clients: Mapping[str, ClientState],
    remaining_warmups: _Budget | int,
    warmups: Mapping[str, set[TaskId]],
) -> int:
    """Move standbys off clients that are not caught up to caught-up clients without a copy."""
    budget = remaining_warmups if isinstance(remaining_warmups, _Budget) else _Budget(remaining_warmups)
    queue = ConstrainedPrioritySet(
        lambda c, t: _caught_up(t, c, caught_up), lambda c: clients[c].assigned_task_load()
    )
    movements: list[_Movement] = []
    for destination, state in sorted(clients.items()):
        for task in sorted(state.standby):
            if task in warmups.get(destination, set()):
                continue  # a warm-up for an active move: never moved again
            if task in by_lag and _not_caught_up_and_better_exists(
                task, destination, clients, caught_up, by_lag
            ):
                movements.append(_Movement(task, destination, frozenset(caught_up.get(task, set()))))
        queue.offer(destination)
    needed = 0
    for movement in sorted(movements, key=_Movement.order):
        task = movement.task
        source = queue.poll(task, _lacks(clients, task))
        if source is None:
            continue  # every caught-up client already has a copy: nowhere to move it
        clients[source].assign_standby(task)
        dest_state = clients[movement.destination]
        if budget.take():
            dest_state.warmup.add(task)  # keeps warming up where the balance wants it
        else:
            dest_state.unassign_standby(task)
        queue.offer_all([source, movement.destination])
        needed += 1
    return needed


Budget = _Budget
