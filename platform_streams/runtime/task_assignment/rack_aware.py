"""Rack-aware active task placement (KIP-925): Kafka Streams' ``RackAwareTaskAssignor``.

After the balanced placement of the active tasks, the tasks are re-placed over the same
clients so that the total cost is minimal, where placing a task on a client costs

* ``traffic_cost`` for each of the task's input partitions with no replica in the
  client's rack (``client.rack``: the task would fetch across racks), plus
* ``non_overlap_cost`` if the client is not the one the balanced placement chose.

Every client keeps exactly as many active tasks as the balanced placement gave it, so
the optimization never undoes the balance. ``min_traffic`` minimizes only that cost;
``balance_subtopology`` also caps each client's share of every sub-topology's tasks at
``ceil(its tasks x the sub-topology's tasks / all tasks)``, so one sub-topology's tasks
are spread as its own share says.

Standbys are then improved the same way over their changelog partitions, but only by
swaps between two clients of different racks that the standby assignor allows
(:meth:`RackAwareTaskAssignor.optimize_standby_tasks`, Kafka's ``optimizeStandbyTasks``).

It is a min-cost flow (source -> task -> client [-> client per sub-topology] -> sink),
solved by :mod:`.min_cost_flow`, a port of Kafka's solver: where two placements have the
same cost, the one chosen is Kafka's (see that module).

It is enabled only when every client reports a rack (all threads of a process the same)
and every replica of every task's input partition -- with standbys, of every changelog
partition too -- has a rack; otherwise the placement is left as it is, as in Kafka.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import ClientState, RackAwareStrategy
from platform_streams.runtime.task_assignment.min_cost_flow import Graph

__all__ = [
    "DEFAULT_NON_OVERLAP_COST",
    "DEFAULT_TRAFFIC_COST",
    "STATELESS_NON_OVERLAP_COST",
    "STATELESS_TRAFFIC_COST",
    "RackAwareTaskAssignor",
    "RackInputs",
    "Strategy",
]

log = logging.getLogger(__name__)

Strategy = RackAwareStrategy

#: Kafka's HighAvailabilityTaskAssignor defaults for stateful tasks
DEFAULT_TRAFFIC_COST = 10
DEFAULT_NON_OVERLAP_COST = 1
#: stateless tasks move freely: only the traffic counts
STATELESS_TRAFFIC_COST = 1
STATELESS_NON_OVERLAP_COST = 0

_SOURCE = -1

Tasks = Collection[TaskId]
Clients = Mapping[str, ClientState]
#: whether a standby may move from the first client to the second (the standby assignor's rule)
MoveStandby = Callable[[str, str, TaskId], bool]

#: Kafka stops the standby optimization after this many rounds (it settles in about 3)
STANDBY_OPTIMIZER_MAX_ITERATION = 4


@dataclass(frozen=True)
class RackInputs:
    """What the leader learns from the cluster for the optimization: each task's input
    partitions ("topic/partition") and each partition's replica racks (None: the topics
    could not be described; a None rack: a broker without ``broker.rack``)."""

    input_partitions: Mapping[TaskId, Collection[str]]
    partition_racks: Mapping[str, Sequence[str | None]] | None


def _holds(state: ClientState, task: TaskId, standby: bool) -> bool:
    return task in (state.standby if standby else state.active)


class RackAwareTaskAssignor:
    """The optimizer over one assignment's clients (one per leader computation).

    ``input_partitions``: each task's input partitions ("topic/partition");
    ``changelog_partitions``: each stateful task's changelog partitions;
    ``partition_racks``: per partition, the rack of each replica (None: a broker without
    a rack); ``process_racks``: per process, the ``client.rack`` each of its members
    reported (None: unset); ``all_tasks``: every task of the application (the sub-topology
    groups of ``balance_subtopology``).
    """

    def __init__(
        self,
        strategy: Strategy,
        input_partitions: Mapping[TaskId, Collection[str]],
        changelog_partitions: Mapping[TaskId, Collection[str]],
        partition_racks: Mapping[str, Sequence[str | None]] | None,
        process_racks: Mapping[str, Mapping[str, str | None]],
        all_tasks: Collection[TaskId],
        num_standby_replicas: int = 0,
    ) -> None:
        self.strategy = strategy
        self.input_partitions = input_partitions
        self.changelog_partitions = changelog_partitions
        self.partition_racks = partition_racks
        self.num_standby_replicas = num_standby_replicas
        groups: dict[int, set[TaskId]] = {}
        for task in all_tasks:
            groups.setdefault(task.subtopology, set()).add(task)
        self.tasks_per_subtopology = [sorted(groups[s]) for s in sorted(groups)]
        self.racks_for_partition: dict[str, set[str]] = {}
        self.rack_for_process: dict[str, str] = {}
        self.valid_client_rack = self._validate_client_racks(process_racks)
        self._can_enable: bool | None = None

    # -- can it run ------------------------------------------------------------------------

    def _validate_client_racks(self, process_racks: Mapping[str, Mapping[str, str | None]]) -> bool:
        """Every process has a rack, the same for all its members (Kafka's validateClientRack)."""
        for process, members in sorted(process_racks.items()):
            racks = {rack for rack in members.values() if rack is not None}
            if not members or len(racks) < len(set(members.values())) or not racks:
                if self.strategy != "none":
                    log.warning(
                        "rack-aware assignment off: process %s has a member without client.rack", process
                    )
                return False
            if len(racks) > 1:
                log.warning(
                    "rack-aware assignment off: process %s has members in racks %s", process, sorted(racks)
                )
                return False
            self.rack_for_process[process] = next(iter(racks))
        return True

    def can_enable(self) -> bool:
        """Whether the optimization runs (the strategy, client racks, partition racks)."""
        if self.strategy == "none":
            return False
        if self._can_enable is None:
            ok = self.valid_client_rack and self._validate_partition_racks(self.input_partitions)
            if ok and self.num_standby_replicas > 0:
                ok = self._validate_partition_racks(self.changelog_partitions)
            self._can_enable = ok
        return self._can_enable

    def _validate_partition_racks(self, partitions: Mapping[TaskId, Collection[str]]) -> bool:
        if self.partition_racks is None:
            log.warning("rack-aware assignment off: the partitions' replica racks are unknown")
            return False
        for tps in partitions.values():
            for tp in tps:
                replicas = self.partition_racks.get(tp)
                if not replicas:
                    log.warning("rack-aware assignment off: partition %s is not in the cluster metadata", tp)
                    return False
                if any(rack is None for rack in replicas):
                    log.warning(
                        "rack-aware assignment off: a replica of %s is on a broker without a rack", tp
                    )
                    return False
                self.racks_for_partition.setdefault(tp, set()).update(r for r in replicas if r is not None)
        return True

    # -- costs -----------------------------------------------------------------------------

    def cost(
        self,
        task: TaskId,
        process: str,
        in_current: bool,
        traffic_cost: int,
        non_overlap_cost: int,
        standby: bool = False,
    ) -> int:
        """The cost of ``task`` on ``process`` (Kafka's getCost): an active task reads its
        input partitions, a standby its changelog partitions."""
        rack = self.rack_for_process.get(process)
        if rack is None:
            raise ValueError(
                f"Client {process} doesn't have rack configured. Maybe forgot to call can_enable first"
            )
        tps = (self.changelog_partitions if standby else self.input_partitions).get(task)
        if not tps:
            raise ValueError(f"Task {task} has no TopicPartitions")
        total = 0
        for tp in sorted(tps):
            racks = self.racks_for_partition.get(tp)
            if not racks:
                raise ValueError(
                    f"TopicPartition {tp} has no rack information. Maybe forgot to call can_enable first"
                )
            if rack not in racks:
                total += traffic_cost
        return total if in_current else total + non_overlap_cost

    def active_tasks_cost(
        self, tasks: Tasks, clients: Clients, traffic_cost: int, non_overlap_cost: int
    ) -> int:
        """The cost of the current placement of ``tasks``."""
        if not tasks:
            return 0
        return self._min_traffic_graph(
            _Problem.of(tasks, clients, traffic_cost, non_overlap_cost)
        ).total_cost()

    # -- the optimization --------------------------------------------------------------------

    def optimize_active_tasks(
        self, tasks: Tasks, clients: Clients, traffic_cost: int, non_overlap_cost: int
    ) -> int:
        """Re-place ``tasks`` (each active on exactly one of ``clients``) at minimal cost,
        every client keeping its number of them; returns the cost reached."""
        if not tasks:
            return 0
        balance = self.strategy == "balance_subtopology"
        group_of = {t: i for i, group in enumerate(self.tasks_per_subtopology) for t in group}
        if balance:
            for task in sorted(tasks):
                if task not in group_of:
                    raise ValueError(f"Task {task} not in tasksForTopicGroup")
        problem = _Problem.of(tasks, clients, traffic_cost, non_overlap_cost)
        n_tasks = len(problem.tasks)
        if balance:
            graph = self._balance_subtopology_graph(problem)
            wanted = set(problem.tasks)
            ordered = [t for group in self.tasks_per_subtopology for t in group if t in wanted]
        else:
            graph = self._min_traffic_graph(problem)
            ordered = problem.tasks
        graph.solve_min_cost_flow()
        total = graph.total_cost()
        _apply_flow(graph, problem, ordered, group_of if balance else None, clients)
        log.info("rack-aware (%s) placement of %d active tasks: cost %d", self.strategy, n_tasks, total)
        return total

    def standby_tasks_cost(self, clients: Clients, traffic_cost: int, non_overlap_cost: int) -> int:
        """The cost of the current standbys: each counts as placed where it is."""
        return sum(
            self.cost(task, process, True, traffic_cost, non_overlap_cost, standby=True)
            for process, state in sorted(clients.items())
            for task in sorted(state.standby)
        )

    def optimize_standby_tasks(
        self, clients: Clients, traffic_cost: int, non_overlap_cost: int, can_move: MoveStandby
    ) -> int:
        """Kafka's optimizeStandbyTasks: for each pair of clients in different racks, swap
        standbys between them (each keeping its count) at minimal cost over their changelog
        partitions, where ``can_move(source, destination, task)`` allows (the standby
        assignor's rule: tags stay spread); up to four rounds while anything moved."""
        client_list = sorted(clients)

        def movable(source: str, destination: str) -> list[TaskId]:
            return sorted(
                t
                for t in clients[source].standby
                if not clients[destination].has_assigned_task(t) and can_move(source, destination, t)
            )

        moved, rounds = True, 0
        while moved and rounds < STANDBY_OPTIMIZER_MAX_ITERATION:
            moved, rounds = False, rounds + 1
            for i, first in enumerate(client_list):
                for second in client_list[i + 1 :]:
                    if self.rack_for_process[first] == self.rack_for_process[second]:
                        continue  # no traffic to save
                    one, other = movable(first, second), movable(second, first)
                    if not one or not other:
                        continue  # only swaps keep both counts
                    pair = {first: clients[first], second: clients[second]}
                    problem = _Problem.of(one + other, pair, traffic_cost, non_overlap_cost, standby=True)
                    graph = self._min_traffic_graph(problem)
                    graph.solve_min_cost_flow()
                    moved |= _apply_flow(graph, problem, problem.tasks, None, pair)
        return self.standby_tasks_cost(clients, traffic_cost, non_overlap_cost)

    def _min_traffic_graph(self, problem: _Problem) -> Graph:
        """Kafka's MinTrafficGraphConstructor: the current placement is the initial flow."""
        graph = Graph()
        n_tasks = len(problem.tasks)
        for node, task in enumerate(problem.tasks):
            for index, process in enumerate(problem.clients):
                flow = 1 if problem.owner[task] == process else 0
                graph.add_edge(node, n_tasks + index, 1, problem.cost_of(self, task, process), flow)
            graph.add_edge(_SOURCE, node, 1, 0, 1)
        sink = len(problem.clients) + n_tasks
        for index, process in enumerate(problem.clients):
            capacity = problem.count.get(process, 0)
            graph.add_edge(n_tasks + index, sink, capacity, 0, capacity)
        graph.source, graph.sink = _SOURCE, sink
        return graph

    def _balance_subtopology_graph(self, problem: _Problem) -> Graph:
        """Kafka's BalanceSubtopologyGraphConstructor: a second stage per client caps its
        share of each sub-topology; the initial flow is a max flow found from scratch."""
        wanted = set(problem.tasks)
        count = problem.count
        n_tasks, n_clients, n_groups = (
            len(problem.tasks),
            len(problem.clients),
            len(self.tasks_per_subtopology),
        )
        second_stage = n_tasks + n_clients * n_groups
        sink = second_stage + n_clients
        graph = Graph()
        task_node = 0
        for group_index, group in enumerate(self.tasks_per_subtopology):
            valid = [t for t in group if t in wanted]
            for index, process in enumerate(problem.clients):
                client_node = n_tasks + n_clients * group_index + index
                for offset, task in enumerate(valid):
                    graph.add_edge(
                        task_node + offset, client_node, 1, problem.cost_of(self, task, process), 0
                    )
                if valid:
                    share = count[process] * 1.0 / n_tasks * len(valid) if process in count else 0.0
                    graph.add_edge(client_node, second_stage + index, math.ceil(share), 0, 0)
            task_node += len(valid)
        for node in range(n_tasks):
            graph.add_edge(_SOURCE, node, 1, 0, 0)
        for index, process in enumerate(problem.clients):
            graph.add_edge(second_stage + index, sink, count.get(process, 0), 0, 0)
        graph.source, graph.sink = _SOURCE, sink
        max_flow = graph.calculate_max_flow()
        if max_flow != n_tasks:
            raise ValueError(f"max flow calculated: {max_flow} doesn't match taskSize: {n_tasks}")
        return graph


@dataclass(frozen=True)
class _Problem:
    """One optimization: the clients and tasks in order, each task's current client, each
    client's number of the tasks, and the two costs."""

    clients: list[str]
    tasks: list[TaskId]
    owner: dict[TaskId, str]
    count: dict[str, int]
    traffic_cost: int
    non_overlap_cost: int
    #: standbys (their changelog partitions), else active tasks (their input partitions)
    standby: bool = False

    @classmethod
    def of(
        cls,
        tasks: Collection[TaskId],
        clients: Mapping[str, ClientState],
        traffic_cost: int,
        non_overlap_cost: int,
        standby: bool = False,
    ) -> _Problem:
        client_list, task_list = sorted(clients), sorted(tasks)
        owner: dict[TaskId, str] = {}
        count: dict[str, int] = {}
        for task in task_list:
            for process in client_list:
                if _holds(clients[process], task, standby):
                    if task in owner and not standby:
                        raise ValueError(f"Task {task} assigned to multiple clients {process}, {owner[task]}")
                    owner[task] = process
                    count[process] = count.get(process, 0) + 1
            if task not in owner:
                raise ValueError(f"Task {task} not assigned to any client")
        return cls(client_list, task_list, owner, count, traffic_cost, non_overlap_cost, standby)

    def cost_of(self, assignor: RackAwareTaskAssignor, task: TaskId, process: str) -> int:
        in_current = self.owner[task] == process
        return assignor.cost(
            task, process, in_current, self.traffic_cost, self.non_overlap_cost, self.standby
        )


def _apply_flow(
    graph: Graph,
    problem: _Problem,
    ordered: list[TaskId],
    group_of: Mapping[TaskId, int] | None,
    clients: Clients,
) -> bool:
    """Kafka's assignTaskFromMinCostFlow: move each task (task node ``i`` is
    ``ordered[i]``) to the client its unit of flow reaches -- client nodes follow the task
    nodes, one row of clients per sub-topology with ``group_of``; True if any moved."""
    standby = problem.standby
    n_tasks, n_clients = len(problem.tasks), len(problem.clients)
    assigned, moved = 0, False
    for node, task in enumerate(ordered):
        for edge in graph.edges(node):
            if edge.flow <= 0:
                continue
            assigned += 1
            first_client_node = n_tasks + (n_clients * group_of[task] if group_of is not None else 0)
            process = problem.clients[edge.destination - first_client_node]
            owner = problem.owner[task]
            if process == owner:
                break
            if standby:
                clients[owner].unassign_standby(task)
                clients[process].assign_standby(task)
            else:
                clients[owner].unassign_active(task)
                clients[process].assign_active(task)
            moved = True
    _validate_assigned(problem.tasks, assigned, clients, problem.count, standby)
    return moved


def _validate_assigned(
    task_list: list[TaskId],
    assigned: int,
    clients: Mapping[str, ClientState],
    before: Mapping[str, int],
    standby: bool,
) -> None:
    """Every task placed once, and every client holds as many of them as before."""
    if assigned != len(task_list):
        raise ValueError(f"Computed task assignment number {assigned} is different size {len(task_list)}")
    after: dict[str, int] = {}
    for task in task_list:
        for process, state in clients.items():
            if _holds(state, task, standby):
                after[process] = after.get(process, 0) + 1
    if after != dict(before):
        raise ValueError(f"clients' task counts changed from {dict(before)} to {after}")
