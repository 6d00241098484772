"""The leader's half of cooperative rebalancing: a task a member still runs moves in two steps.

Kafka's rule (``StreamsPartitionAssignor.addClientAssignments`` /
``populateActiveTaskAndPartitionsLists``, cooperative protocol): a task whose partitions
another consumer still owns is removed from its new owner's assignment
(``activeTasksRemovedPendingRevokation``) and a follow-up rebalance is scheduled; the new
owner gets it then, after the previous owner revoked it.
"""

from __future__ import annotations

from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import AssignmentConfigs
from platform_streams.runtime.task_assignment.protocol import (
    Assignment,
    Report,
    compute_assignment,
    hold_back_running,
)

T0, T1, T2, T3 = (TaskId(0, p) for p in range(4))


def _report(member: str, process: str, slots: range, **more: object) -> Report:
    return Report(3, member, process, tuple(slots), 1_000, **more)  # type: ignore[arg-type]


def test_a_task_its_member_still_runs_is_released_by_it_before_anyone_else_gets_it() -> None:
    placed = {"a": [T0], "b": [T1, T2], "c": [T3]}
    reports = [
        _report("a", "p1", range(0, 20), running=frozenset({T0, T3})),
        _report("b", "p2", range(20, 40), running=frozenset({T1, T2})),
        _report("c", "p3", range(40, 64)),
    ]
    revoking = hold_back_running(placed, reports)
    assert revoking == {"a": [T3]}, "a runs T3, which goes to c: a releases it"
    assert placed == {"a": [T0], "b": [T1, T2], "c": []}, "c gets T3 only in the follow-up generation"


def test_a_task_two_members_claim_goes_to_no_one_and_neither_may_commit_it() -> None:
    placed = {"a": [T0], "b": [T1]}
    reports = [
        _report("a", "p1", range(0, 32), running=frozenset({T0, T1})),
        _report("b", "p2", range(32, 64), running=frozenset({T1})),
    ]
    revoking = hold_back_running(placed, reports)
    assert revoking == {}, "a release would commit: neither knows it is the only one that ran T1"
    assert placed == {"a": [T0], "b": []}


def test_an_eager_generation_is_placed_as_before_and_revoking_round_trips() -> None:
    tasks = [T0, T1, T2, T3]
    configs = AssignmentConfigs(acceptable_recovery_lag=10_000, max_warmup_replicas=2, num_standby_replicas=0)
    eager = [
        _report("m-1", "p1", range(0, 32), prev_active=frozenset(tasks)),
        _report("m-2", "p2", range(32, 64)),
    ]
    placed = compute_assignment(3, eager, tasks, {}, {}, configs)
    assert placed.revoking == {} and sorted(placed.members["m-1"] + placed.members["m-2"]) == tasks
    cooperative = [
        _report("m-1", "p1", range(0, 32), prev_active=frozenset(tasks), running=frozenset(tasks)),
        _report("m-2", "p2", range(32, 64)),
    ]
    held = compute_assignment(3, cooperative, tasks, {}, {}, configs)
    moving = placed.members["m-2"]
    assert moving and sorted(held.revoking["m-1"]) == sorted(moving)
    assert held.members["m-2"] == [] and held.members["m-1"] == placed.members["m-1"]
    assert held.revoking_of("m-1", range(0, 32), None) == held.revoking["m-1"]
    assert Assignment.from_json(held.to_json()) == held
    assert Report.from_json(cooperative[0].to_json()) == cooperative[0]
