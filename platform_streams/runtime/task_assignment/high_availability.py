"""The placement function: Kafka Streams' ``HighAvailabilityTaskAssignor`` (KIP-441).

``assign(clients, all_tasks, stateful_tasks, configs)`` fills each :class:`ClientState`'s
``active``/``standby``/``warmup`` and returns whether a probing rebalance is needed
(movements are waiting for warm-ups). The steps, as in Kafka:

1. stateful active tasks placed stickily (previous owner, else the client with the most
   of the task's state), within each client's share, then balanced by load (active tasks
   per thread), then, with a rack-aware strategy (KIP-925, :mod:`.rack_aware`), swapped
   between clients to cut cross-rack traffic, every client keeping its count;
2. standbys (:mod:`.standby_assignors`), then with a rack-aware strategy swapped between
   clients in different racks to cut changelog traffic, as long as their tags stay spread;
3. active tasks placed on a client that is not caught up while another is: moved to a
   caught-up client, the balanced client keeping a warm-up (:mod:`.task_movement`);
4. standbys likewise;
5. stateless tasks to the least loaded clients, one at a time (then rack-aware likewise,
   where only the traffic counts).

A task therefore only ever starts on a client that is caught up when one exists: its
previous owner or a standby holder; that is what turns a failover or a scale event into
a short tail restore instead of a full one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import (
    AssignmentConfigs,
    ClientState,
    ConstrainedPrioritySet,
    tasks_to_caught_up_clients,
    tasks_to_clients_by_lag,
)
from platform_streams.runtime.task_assignment.rack_aware import (
    DEFAULT_NON_OVERLAP_COST,
    DEFAULT_TRAFFIC_COST,
    STATELESS_NON_OVERLAP_COST,
    STATELESS_TRAFFIC_COST,
    RackAwareTaskAssignor,
)
from platform_streams.runtime.task_assignment.standby_assignors import (
    assign_standby_tasks,
    standby_movement_allowed,
    tag_aware_enabled,
)
from platform_streams.runtime.task_assignment.task_movement import (
    Budget,
    assign_active_task_movements,
    assign_standby_task_movements,
)

__all__ = ["assign", "balance_tasks_over_threads"]


def assign(
    clients: Mapping[str, ClientState],
    all_tasks: Iterable[TaskId],
    stateful_tasks: Iterable[TaskId],
    configs: AssignmentConfigs,
    rack_aware: RackAwareTaskAssignor | None = None,
) -> bool:
    """Place every task (see the module docstring); True when a probing rebalance is needed.

    ``rack_aware`` (built for these clients) re-places the active tasks where it can be
    enabled; without it, or with strategy "none", nothing differs."""
    if not clients:
        return False
    stateful = sorted(set(stateful_tasks))
    stateless = sorted(set(all_tasks) - set(stateful))
    ordered = dict(sorted(clients.items()))
    rack_aware = rack_aware if rack_aware is not None and rack_aware.can_enable() else None
    _assign_active_stateful(ordered, stateful)
    traffic = configs.rack_aware_assignment_traffic_cost
    traffic = DEFAULT_TRAFFIC_COST if traffic is None else traffic
    non_overlap = configs.rack_aware_assignment_non_overlap_cost
    non_overlap = DEFAULT_NON_OVERLAP_COST if non_overlap is None else non_overlap
    if rack_aware is not None:
        rack_aware.optimize_active_tasks(stateful, ordered, traffic, non_overlap)
    assign_standby_tasks(ordered, stateful, configs)
    if rack_aware is not None and configs.num_standby_replicas > 0:
        tags = configs.rack_aware_assignment_tags
        tag_aware = tag_aware_enabled(ordered, tags)
        rack_aware.optimize_standby_tasks(
            ordered,
            traffic,
            non_overlap,
            lambda source, destination, task: (
                not tag_aware or standby_movement_allowed(ordered, tags, source, destination, task)
            ),
        )
    budget = Budget(configs.max_warmup_replicas)
    caught_up = tasks_to_caught_up_clients(stateful, ordered, configs.acceptable_recovery_lag)
    by_lag = tasks_to_clients_by_lag(stateful, ordered)
    warmups: dict[str, set[TaskId]] = {}
    active_moves = assign_active_task_movements(caught_up, by_lag, ordered, warmups, budget)
    standby_moves = assign_standby_task_movements(caught_up, by_lag, ordered, budget, warmups)
    _assign_stateless(ordered, stateless)
    if rack_aware is not None:
        rack_aware.optimize_active_tasks(
            stateless, ordered, STATELESS_TRAFFIC_COST, STATELESS_NON_OVERLAP_COST
        )
    return active_moves + standby_moves > 0


def _assign_active_stateful(clients: Mapping[str, ClientState], tasks: list[TaskId]) -> None:
    """Sticky first, then round-robin, then balanced.

    Kafka places round-robin and relies on the movements to bring tasks back to caught-up
    clients; among several caught-up clients (the owner and its standbys, or every client
    when the changelogs are shorter than ``acceptable_recovery_lag``) that may still move a
    task. Here a task first stays with its previous owner while that client is within its
    share (``ceil(tasks x capacity / total capacity)``); every other task goes to the client
    with room that has the most of its state (then the least loaded): a restarted client
    finds its tasks again through its checkpoints. Placement changes only where balance
    needs it.
    """
    total = sum(s.capacity for s in clients.values())
    quota = {c: -(-len(tasks) * s.capacity // total) for c, s in clients.items()}
    rest: list[TaskId] = []
    for task in tasks:
        owner = next((c for c, s in clients.items() if task in s.prev_active), None)
        if owner is not None and len(clients[owner].active) < quota[owner]:
            clients[owner].assign_active(task)
        else:
            rest.append(task)
    for task in rest:
        room = [c for c in clients if len(clients[c].active) < quota[c]]
        best = min(room, key=lambda c: (clients[c].lag_for(task), clients[c].active_task_load(), c))
        clients[best].assign_active(task)
    balance_tasks_over_threads(
        clients,
        lambda s: s.active,
        ClientState.unassign_active,
        ClientState.assign_active,
    )


def _should_move_a_task(source: ClientState, destination: ClientState) -> bool:
    skew = source.active_task_load() - destination.active_task_load()
    if skew <= 0:
        return False
    proposed = (len(source.active) - 1) / source.capacity - (
        len(destination.active) + 1
    ) / destination.capacity
    return abs(proposed) < skew


def balance_tasks_over_threads(
    clients: Mapping[str, ClientState],
    tasks_of: Callable[[ClientState], set[TaskId]],
    unassign: Callable[[ClientState, TaskId], None],
    assign_to: Callable[[ClientState, TaskId], None],
) -> None:
    """Move tasks from the most to the least loaded clients while that lowers the skew."""
    keep_balancing = True
    while keep_balancing:
        keep_balancing = False
        for source_id, source in clients.items():
            for destination_id, destination in clients.items():
                if source_id == destination_id:
                    continue
                for task in sorted(tasks_of(source)):
                    if not _should_move_a_task(source, destination):
                        break
                    if not destination.has_assigned_task(task):
                        unassign(source, task)
                        assign_to(destination, task)
                        keep_balancing = True


def _assign_stateless(clients: Mapping[str, ClientState], tasks: list[TaskId]) -> None:
    queue = ConstrainedPrioritySet(lambda c, t: True, lambda c: clients[c].active_task_load())
    queue.offer_all(clients)
    for task in tasks:
        client = queue.poll(task)
        assert client is not None
        clients[client].assign_active(task)
        queue.offer(client)
