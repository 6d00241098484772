"""Rack-aware active placement (KIP-925): translated from Kafka Streams 4.3.1's
``RackAwareTaskAssignorTest`` (streams/src/test/.../processor/internals/assignment/), plus
an exhaustive optimality check of the flow solver on small random instances.

The fixtures are Kafka's ``AssignmentTestUtils``: brokers node0..node4 in rack0..rack4;
``topicX-Y`` replicated on two of them; processes pid1..pid7 in rack0, rack1, rack2,
rack3, rack4, rack0, rack1. Kafka runs each case as stateful (traffic cost 10, non-overlap
cost 1) and stateless (1, 0), under both strategies (``paramStoreType``).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable

import pytest

from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import ClientState
from platform_streams.runtime.task_assignment.rack_aware import RackAwareTaskAssignor
from platform_streams.runtime.task_assignment.standby_assignors import standby_movement_allowed

REPLICA_0, REPLICA_1, REPLICA_2, REPLICA_3, REPLICA_4 = (
    ["rack0", "rack1"],
    ["rack1", "rack2"],
    ["rack0", "rack2"],
    ["rack1", "rack3"],
    ["rack3", "rack4"],
)
#: AssignmentTestUtils.PI_*: each partition's replicas
PARTITION_RACKS: dict[str, list[str | None]] = {
    "topic0/0": list(REPLICA_0),
    "topic0/1": list(REPLICA_1),
    "topic0/2": list(REPLICA_1),
    "topic0/3": list(REPLICA_2),
    "topic0/4": list(REPLICA_3),
    "topic0/5": list(REPLICA_4),
    "topic0/6": list(REPLICA_2),
    "topic1/0": list(REPLICA_2),
    "topic1/1": list(REPLICA_3),
    "topic1/2": list(REPLICA_0),
    "topic1/3": list(REPLICA_1),
}
#: getProcessRacksForAllProcess
PROCESS_RACKS = {
    f"pid{i}": {"1": f"rack{r}"} for i, r in zip(range(1, 8), [0, 1, 2, 3, 4, 0, 1], strict=True)
}

T = TaskId
PARAMS = [
    (True, "balance_subtopology"),
    (False, "min_traffic"),
    (True, "min_traffic"),
    (False, "balance_subtopology"),
]


def costs(stateful: bool) -> tuple[int, int]:
    return (10, 1) if stateful else (1, 0)


def input_partitions(tasks: Iterable[TaskId]) -> dict[TaskId, list[str]]:
    """getTaskTopicPartitionMapForAllTasks: task X_Y reads topicX-Y."""
    return {t: [f"topic{t.subtopology}/{t.partition}"] for t in tasks}


ALL_TASKS = [T(0, p) for p in range(7)] + [T(1, p) for p in range(4)]


def assignor(strategy: str, all_tasks: Iterable[TaskId] = ALL_TASKS, **kw: object) -> RackAwareTaskAssignor:
    tasks = list(all_tasks)
    args: dict[str, object] = {
        "input_partitions": input_partitions(ALL_TASKS),
        "changelog_partitions": {},
        "partition_racks": PARTITION_RACKS,
        "process_racks": PROCESS_RACKS,
        "all_tasks": tasks,
    }
    args.update(kw)
    return RackAwareTaskAssignor(strategy, **args)  # type: ignore[arg-type]


def clients(**active: Iterable[TaskId]) -> dict[str, ClientState]:
    out: dict[str, ClientState] = {}
    for pid, tasks in active.items():
        state = ClientState()
        for task in tasks:
            state.assign_active(task)
        out[pid] = state
    return out


@pytest.mark.parametrize("stateful,strategy", PARAMS)
def test_should_optimize_empty_active_tasks(stateful: bool, strategy: str) -> None:
    """shouldOptimizeEmptyActiveTasks"""
    a = assignor(strategy)
    states = clients(pid1=[T(0, 1), T(1, 1)])
    assert a.can_enable()
    assert a.active_tasks_cost([], states, *costs(stateful)) == 0
    assert a.optimize_active_tasks([], states, *costs(stateful)) == 0
    assert states["pid1"].active == {T(0, 1), T(1, 1)}


@pytest.mark.parametrize("stateful,strategy", PARAMS)
def test_should_optimize_active_tasks(stateful: bool, strategy: str) -> None:
    """shouldOptimizeActiveTasks: the optimum has no cross-rack traffic."""
    a = assignor(strategy, [T(0, 0), T(0, 1), T(1, 0), T(1, 1)])
    states = clients(pid1=[T(0, 1), T(1, 1)], pid2=[T(1, 0)], pid3=[T(0, 0)])
    tasks = [T(0, 0), T(0, 1), T(1, 0), T(1, 1)]
    assert a.can_enable()
    assert a.active_tasks_cost(tasks, states, *costs(stateful)) == (40 if stateful else 4)
    assert a.optimize_active_tasks(tasks, states, *costs(stateful)) == (4 if stateful else 0)
    assert states["pid1"].active == {T(0, 0), T(1, 0)}
    assert states["pid2"].active == {T(1, 1)}
    assert states["pid3"].active == {T(0, 1)}


@pytest.mark.parametrize("stateful,strategy", PARAMS)
def test_should_optimize_active_tasks_with_more_clients(stateful: bool, strategy: str) -> None:
    """shouldOptimizeActiveTasksWithMoreClients: a client without tasks stays without."""
    a = assignor(strategy, [T(0, 0), T(1, 0)])
    states = clients(pid1=[], pid2=[T(1, 0)], pid3=[T(0, 0)])
    tasks = [T(0, 0), T(1, 0)]
    assert a.can_enable()
    assert a.active_tasks_cost(tasks, states, *costs(stateful)) == (20 if stateful else 2)
    assert a.optimize_active_tasks(tasks, states, *costs(stateful)) == (2 if stateful else 0)
    assert states["pid1"].active == set()
    assert states["pid2"].active == {T(0, 0)}
    assert states["pid3"].active == {T(1, 0)}


@pytest.mark.parametrize("stateful,strategy", PARAMS)
def test_should_optimize_active_tasks_with_more_clients_with_more_than_one_task(
    stateful: bool, strategy: str
) -> None:
    """shouldOptimizeActiveTasksWithMoreClientsWithMoreThanOneTask: counts are kept, even
    an unbalanced 0/2/1."""
    a = assignor(strategy, [T(0, 0), T(0, 1), T(1, 0)])
    states = clients(pid1=[], pid2=[T(0, 1), T(1, 0)], pid3=[T(0, 0)])
    tasks = [T(0, 0), T(0, 1), T(1, 0)]
    assert a.can_enable()
    assert a.active_tasks_cost(tasks, states, *costs(stateful)) == (20 if stateful else 2)
    assert a.optimize_active_tasks(tasks, states, *costs(stateful)) == (2 if stateful else 0)
    assert states["pid1"].active == set()
    assert states["pid2"].active == {T(0, 0), T(0, 1)}
    assert states["pid3"].active == {T(1, 0)}


@pytest.mark.parametrize("stateful,strategy", PARAMS)
def test_should_balance_assignment_with_more_cost(stateful: bool, strategy: str) -> None:
    """shouldBalanceAssignmentWithMoreCost: all three tasks are in pid2's rack, but pid5
    keeps its one task; stateless under balance_subtopology, where every placement costs
    the same, the one Kafka's solver picks (its max flow found from scratch)."""
    a = assignor(strategy, [T(0, 0), T(0, 1), T(1, 1)])
    states = clients(pid2=[T(0, 0), T(1, 1)], pid5=[T(0, 1)])
    tasks = [T(0, 0), T(0, 1), T(1, 1)]
    expected = 10 if stateful else 1
    assert a.can_enable()
    assert a.active_tasks_cost(tasks, states, *costs(stateful)) == expected
    assert a.optimize_active_tasks(tasks, states, *costs(stateful)) == expected
    if stateful or strategy == "min_traffic":
        assert states["pid2"].active == {T(0, 0), T(1, 1)}
        assert states["pid5"].active == {T(0, 1)}
    else:
        assert states["pid2"].active == {T(0, 0), T(0, 1)}
        assert states["pid5"].active == {T(1, 1)}


@pytest.mark.parametrize("stateful,strategy", PARAMS)
def test_should_throw_if_missing_call_can_enable(stateful: bool, strategy: str) -> None:
    """shouldThrowIfMissingCallCanEnableRackAwareAssignor"""
    a = assignor(strategy)
    states = clients(pid2=[T(0, 0), T(1, 1)], pid5=[T(0, 1)])
    with pytest.raises(ValueError, match="TopicPartition topic0/0 has no rack information"):
        a.optimize_active_tasks([T(0, 0), T(0, 1), T(1, 1)], states, *costs(stateful))


@pytest.mark.parametrize("stateful,strategy", PARAMS)
def test_should_throw_if_task_in_multiple_clients(stateful: bool, strategy: str) -> None:
    """shouldThrowIfTaskInMultipleClients"""
    a = assignor(strategy)
    states = clients(pid2=[T(0, 0), T(1, 1)], pid5=[T(0, 1), T(1, 1)])
    assert a.can_enable()
    with pytest.raises(ValueError, match="Task 1_1 assigned to multiple clients pid5, pid2"):
        a.optimize_active_tasks([T(0, 0), T(0, 1), T(1, 1)], states, *costs(stateful))


@pytest.mark.parametrize("stateful,strategy", PARAMS)
def test_should_throw_if_task_missing_in_clients(stateful: bool, strategy: str) -> None:
    """shouldThrowIfTaskMissingInClients"""
    a = assignor(strategy)
    states = clients(pid2=[T(0, 0), T(1, 1)], pid5=[T(0, 1)])
    assert a.can_enable()
    with pytest.raises(ValueError, match="Task 1_0 not assigned to any client"):
        a.optimize_active_tasks([T(0, 0), T(0, 1), T(1, 0), T(1, 1)], states, *costs(stateful))


def test_should_disable_assignor_from_config() -> None:
    """shouldDisableAssignorFromConfig: strategy none never enables."""
    assert not assignor("none").can_enable()


@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
def test_should_disable_active_when_rack_missing_in_node(strategy: str) -> None:
    """shouldDisableActiveWhenRackMissingInNode (a replica on a broker without a rack),
    shouldDisableActiveWhenMissingClusterInfo (a partition not in the metadata), and no
    metadata at all (the leader could not describe the topics)."""
    no_rack = dict(PARTITION_RACKS, **{"topic0/0": ["rack0", None]})
    assert not assignor(strategy, partition_racks=no_rack).can_enable()
    missing = {k: v for k, v in PARTITION_RACKS.items() if k != "topic1/3"}
    assert not assignor(strategy, partition_racks=missing).can_enable()
    assert not assignor(strategy, partition_racks=None).can_enable()


@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
def test_client_rack_validation(strategy: str) -> None:
    """shouldReturnInvalidClientRackWhenRackMissingInClientConsumer,
    shouldReturnFalseWhenRackMissingInProcess, shouldReturnInvalidClientRackWhenRackDiffersInSameProcess,
    shouldPopulateRacksForProcess."""
    missing = dict(PROCESS_RACKS, pid1={"1": None})
    assert not assignor(strategy, process_racks=missing).valid_client_rack
    assert not assignor(strategy, process_racks=missing).can_enable()
    differs = dict(PROCESS_RACKS, pid1={"1": "rack0", "2": "rack1"})
    assert not assignor(strategy, process_racks=differs).valid_client_rack
    ok = assignor(strategy, process_racks={"pid1": {"1": "rack0", "2": "rack0"}})
    assert ok.valid_client_rack and ok.rack_for_process == {"pid1": "rack0"}


@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
def test_should_check_changelog_racks_with_standbys(strategy: str) -> None:
    """shouldEnableRackAwareAssignorWithStandbyDescribingTopics /
    shouldDisableRackAwareAssignorWithStandbyDescribingTopicsFailure: with standbys the
    changelog partitions need racks too."""
    changelogs = {T(0, 0): ["store-0-changelog/0"]}
    without = assignor(strategy, changelog_partitions=changelogs, num_standby_replicas=1)
    assert not without.can_enable()
    racks = dict(PARTITION_RACKS, **{"store-0-changelog/0": list(REPLICA_0)})
    assert assignor(
        strategy, changelog_partitions=changelogs, partition_racks=racks, num_standby_replicas=1
    ).can_enable()
    assert assignor(strategy, changelog_partitions=changelogs, num_standby_replicas=0).can_enable()


def _random_instance(
    rng: random.Random, n_clients: int, n_tasks: int
) -> tuple[RackAwareTaskAssignor, dict[str, ClientState]]:
    """getRandomCluster / getRandomProcessRacks / getRandomClientState, small."""
    racks = [f"rack{i}" for i in range(3)]
    tasks = [T(s, p) for s in range(2) for p in range(n_tasks // 2 + n_tasks % 2)][:n_tasks]
    partition_racks: dict[str, list[str | None]] = {
        f"topic{t.subtopology}/{t.partition}": list(rng.sample(racks, rng.randint(1, 2))) for t in tasks
    }
    process_racks = {f"pid{i}": {"1": rng.choice(racks)} for i in range(n_clients)}
    order = list(tasks)
    rng.shuffle(order)
    states = {pid: ClientState() for pid in process_racks}
    for i, task in enumerate(order):
        states[f"pid{i % n_clients}"].assign_active(task)
    a = RackAwareTaskAssignor(
        "min_traffic",
        input_partitions=input_partitions(tasks),
        changelog_partitions={},
        partition_racks=partition_racks,
        process_racks=process_racks,
        all_tasks=tasks,
    )
    return a, states


@pytest.mark.parametrize("seed", range(12))
def test_min_traffic_cost_is_the_exhaustive_optimum(seed: int) -> None:
    """shouldOptimizeRandomActive, checked harder: the cost reached is the minimum over
    every placement that keeps each client's task count (enumerated), never above the
    original, and the counts are kept."""
    rng = random.Random(seed)
    a, states = _random_instance(rng, n_clients=3, n_tasks=6)
    tasks = sorted(t for s in states.values() for t in s.active)
    traffic, non_overlap = (10, 1) if seed % 2 else (1, 0)
    assert a.can_enable()
    counts = {pid: len(s.active) for pid, s in states.items()}
    owner = {t: pid for pid, s in states.items() for t in s.active}
    original = a.active_tasks_cost(tasks, states, traffic, non_overlap)
    best = min(
        sum(
            a.cost(t, pid, owner[t] == pid, traffic, non_overlap)
            for t, pid in zip(tasks, placement, strict=True)
        )
        for placement in itertools.product(sorted(states), repeat=len(tasks))
        if all(placement.count(pid) == n for pid, n in counts.items())
    )
    cost = a.optimize_active_tasks(tasks, states, traffic, non_overlap)
    assert cost == best <= original
    assert {pid: len(s.active) for pid, s in states.items()} == counts
    assert a.active_tasks_cost(tasks, states, traffic, 0) <= original


@pytest.mark.parametrize("seed", range(4))
def test_should_maintain_original_assignment_for_min_cost(seed: int) -> None:
    """shouldMaintainOriginalAssignmentForMinCost: with traffic cost 0 min_traffic keeps
    the placement as it is."""
    a, states = _random_instance(random.Random(seed), n_clients=4, n_tasks=10)
    before = {pid: set(s.active) for pid, s in states.items()}
    tasks = sorted(t for s in before.values() for t in s)
    assert a.can_enable()
    assert a.active_tasks_cost(tasks, states, 0, 1) == 0
    assert a.optimize_active_tasks(tasks, states, 0, 1) == 0
    assert {pid: s.active for pid, s in states.items()} == before


#: mockInternalTopicManagerForChangelog: the changelogs' replicas
CHANGELOG_RACKS: dict[str, list[str | None]] = {
    "store-0-changelog/0": list(REPLICA_0),
    "store-0-changelog/1": list(REPLICA_1),
    "store-0-changelog/2": list(REPLICA_1),
    "store-1-changelog/0": list(REPLICA_2),
    "store-1-changelog/1": list(REPLICA_3),
    "store-1-changelog/2": list(REPLICA_0),
}
STANDBY_TASKS = [T(0, 0), T(0, 1), T(0, 2), T(1, 0), T(1, 1), T(1, 2)]


def _standby_setup(strategy: str) -> tuple[RackAwareTaskAssignor, dict[str, ClientState]]:
    """The clients of shouldOptimizeStandbyTasks*: one active each, two standbys each."""
    a = assignor(
        strategy,
        changelog_partitions={t: [f"store-{t.subtopology}-changelog/{t.partition}"] for t in STANDBY_TASKS},
        partition_racks={**PARTITION_RACKS, **CHANGELOG_RACKS},
        num_standby_replicas=2,
    )
    layout = {
        "pid1": (T(0, 0), [T(0, 1), T(1, 1)]),
        "pid2": (T(0, 1), [T(0, 0), T(1, 0)]),
        "pid3": (T(1, 0), [T(0, 0), T(0, 2)]),
        "pid4": (T(1, 1), [T(0, 1), T(1, 2)]),
        "pid6": (T(0, 2), [T(1, 0), T(1, 2)]),
        "pid7": (T(1, 2), [T(0, 2), T(1, 1)]),
    }
    states: dict[str, ClientState] = {}
    for pid, (active, standbys) in layout.items():
        state = ClientState(tags={"rack": PROCESS_RACKS[pid]["1"] or ""})
        state.assign_active(active)
        for task in standbys:
            state.assign_standby(task)
        states[pid] = state
    return a, states


def _holders_in_distinct_racks(states: dict[str, ClientState]) -> bool:
    return all(
        len({s.tags["rack"] for s in states.values() if s.has_assigned_task(t)}) == 3 for t in STANDBY_TASKS
    )


@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
def test_should_optimize_standby_tasks_when_tasks_all_movable(strategy: str) -> None:
    """shouldOptimizeStandbyTasksWhenTasksAllMovable: 60 -> 20, counts kept."""
    a, states = _standby_setup(strategy)
    counts = {pid: len(s.standby) for pid, s in states.items()}
    assert a.can_enable() and _holders_in_distinct_racks(states)
    assert a.standby_tasks_cost(states, 10, 1) == 60
    assert a.optimize_standby_tasks(states, 10, 1, lambda source, destination, task: True) == 20
    assert {pid: len(s.standby) for pid, s in states.items()} == counts


@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
def test_should_optimize_standby_tasks_with_moving_constraint(strategy: str) -> None:
    """shouldOptimizeStandbyTasksWithMovingConstraint: with the tag-aware assignor's rule
    (the holders' racks stay distinct) only 60 -> 50."""
    a, states = _standby_setup(strategy)
    counts = {pid: len(s.standby) for pid, s in states.items()}

    def can_move(source: str, destination: str, task: TaskId) -> bool:
        return standby_movement_allowed(states, ["rack"], source, destination, task)

    assert a.can_enable() and a.standby_tasks_cost(states, 10, 1) == 60
    assert a.optimize_standby_tasks(states, 10, 1, can_move) == 50
    assert {pid: len(s.standby) for pid, s in states.items()} == counts
    assert _holders_in_distinct_racks(states)
