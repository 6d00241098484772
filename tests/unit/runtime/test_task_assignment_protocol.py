"""Standby spreading over client tags, member distribution and the protocol's pure parts.

The tag tests are translated from Kafka Streams' ``ClientTagAwareStandbyTaskAssignorTest``
(apache/kafka ``streams/src/test/java/org/apache/kafka/streams/processor/internals/assignment/``).
"""

from __future__ import annotations

import struct

from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import AssignmentConfigs, ClientState
from platform_streams.runtime.task_assignment.members import distribute_over_members
from platform_streams.runtime.task_assignment.protocol import (
    MEMBER_SLOTS,
    Assignment,
    Report,
    compute_assignment,
    group_generation,
    missing_slots,
    reported_members,
)
from platform_streams.runtime.task_assignment.standby_assignors import assign_standby_tasks

T00, T01, T02 = (TaskId(0, p) for p in range(3))
T10, T11, T12 = (TaskId(1, p) for p in range(3))
CLUSTER, ZONE = "cluster", "zone"


def _client(capacity: int, tags: dict[str, str], *active: TaskId) -> ClientState:
    state = ClientState(capacity=capacity, tags=dict(tags))
    for task in active:
        state.assign_active(task)
    return state


def _standbys(clients: dict[str, ClientState], task: TaskId) -> set[str]:
    return {c for c, s in clients.items() if task in s.standby}


def _assign(clients: dict[str, ClientState], replicas: int, *tags: str) -> None:
    active = sorted({t for s in clients.values() for t in s.active})
    assign_standby_tasks(
        clients, active, AssignmentConfigs(num_standby_replicas=replicas, rack_aware_assignment_tags=tags)
    )


def test_should_do_the_partial_rack_awareness() -> None:
    """ClientTagAwareStandbyTaskAssignorTest.shouldDoThePartialRackAwareness"""
    clients = {
        "p1": _client(1, {CLUSTER: "c1", ZONE: "z1"}, T00),
        "p2": _client(1, {CLUSTER: "c1", ZONE: "z2"}),
        "p3": _client(1, {CLUSTER: "c1", ZONE: "z3"}),
        "p4": _client(1, {CLUSTER: "c2", ZONE: "z1"}),
        "p5": _client(1, {CLUSTER: "c2", ZONE: "z2"}),
        "p6": _client(1, {CLUSTER: "c2", ZONE: "z3"}, T10),
    }
    _assign(clients, 2, CLUSTER, ZONE)
    assert sum(len(s.standby) for s in clients.values()) == 4
    assert _standbys(clients, T00) in ({"p5", "p3"}, {"p5", "p6"})
    assert _standbys(clients, T10) in ({"p2", "p4"}, {"p2", "p1"})


def test_should_distribute_clients_on_different_zone_tags_even_when_clients_reached_capacity() -> None:
    """ClientTagAwareStandbyTaskAssignorTest.shouldDistributeClientsOnDifferentZoneTagsEvenWhenClientsReachedCapacity"""
    clients = {
        "p1": _client(1, {ZONE: "z1", CLUSTER: "c1"}, T00),
        "p2": _client(1, {ZONE: "z2", CLUSTER: "c1"}, T01),
        "p3": _client(1, {ZONE: "z3", CLUSTER: "c1"}, T02),
        "p4": _client(1, {ZONE: "z1", CLUSTER: "c1"}, T10),
        "p5": _client(1, {ZONE: "z2", CLUSTER: "c1"}, T11),
        "p6": _client(1, {ZONE: "z3", CLUSTER: "c1"}, T12),
    }
    _assign(clients, 1, ZONE, CLUSTER)
    assert all(len(s.standby) == 1 for s in clients.values())
    for task, zone in ((T00, "z1"), (T10, "z1"), (T01, "z2"), (T11, "z2"), (T02, "z3"), (T12, "z3")):
        (holder,) = _standbys(clients, task)
        assert clients[holder].tags[ZONE] != zone


def test_should_ignore_tags_that_are_not_present_in_rack_awareness() -> None:
    """ClientTagAwareStandbyTaskAssignorTest.shouldIgnoreTagsThatAreNotPresentInRackAwareness"""
    clients = {
        "p1": _client(1, {CLUSTER: "c1", ZONE: "z1"}, T00),
        "p2": _client(2, {CLUSTER: "c1", ZONE: "z2"}),
        "p3": _client(1, {CLUSTER: "c2", ZONE: "z1"}),
    }
    _assign(clients, 1, CLUSTER)
    assert sum(len(s.standby) for s in clients.values()) == 1 and len(clients["p3"].standby) == 1


def test_should_handle_overlapping_tag_values_between_different_tag_keys() -> None:
    """ClientTagAwareStandbyTaskAssignorTest.shouldHandleOverlappingTagValuesBetweenDifferentTagKeys"""
    clients = {
        "p1": _client(2, {ZONE: "z1", CLUSTER: "c1"}, T00),
        "p2": _client(2, {ZONE: "c1", CLUSTER: "c3"}),
    }
    _assign(clients, 1, ZONE, CLUSTER)
    assert _standbys(clients, T00) == {"p2"}


def test_should_distribute_standby_tasks_on_least_loaded_clients_when_not_on_different_tag_dimensions() -> (
    None
):
    """ClientTagAwareStandbyTaskAssignorTest.shouldDistributeStandbyTasksOnLeastLoadedClientsWhenClientsAreNotOnDifferentTagDimensions"""
    same = {CLUSTER: "c1", ZONE: "z1"}
    clients = {
        "p1": _client(3, same, T00),
        "p2": _client(3, same, T01),
        "p3": _client(3, same, T02),
        "p4": _client(3, same, T10),
    }
    _assign(clients, 1, CLUSTER, ZONE)
    assert [len(s.standby) for s in clients.values()] == [1, 1, 1, 1]


def test_should_not_assign_standby_tasks_if_there_are_no_enough_clients() -> None:
    """ClientTagAwareStandbyTaskAssignorTest.shouldNotAssignStandbyTasksIfThereAreNoEnoughClients"""
    clients = {"p1": _client(3, {CLUSTER: "c1", ZONE: "z1"}, T00)}
    _assign(clients, 1, CLUSTER, ZONE)
    assert not clients["p1"].standby


def test_two_racks_every_standby_on_the_other_rack() -> None:
    tasks = [TaskId(0, p) for p in range(8)]
    clients = {f"p{i}": _client(1, {"rack": "a" if i % 2 else "b"}) for i in range(4)}
    for i, task in enumerate(tasks):
        clients[f"p{i % 4}"].assign_active(task)
    _assign(clients, 1, "rack")
    for task in tasks:
        owner = next(c for c, s in clients.items() if task in s.active)
        (holder,) = _standbys(clients, task)
        assert clients[holder].tags["rack"] != clients[owner].tags["rack"]


# -- members and the protocol -----------------------------------------------------------------


def test_distribute_over_members_is_balanced_and_sticky() -> None:
    tasks = [TaskId(0, p) for p in range(7)]
    out = distribute_over_members(tasks, ["m1", "m2", "m3"], {"m2": tasks[:4], "m3": [tasks[6]]})
    assert sorted(t for ts in out.values() for t in ts) == tasks
    assert sorted(len(ts) for ts in out.values()) == [2, 2, 3]
    assert set(out["m2"]) <= set(tasks[:4]) and tasks[6] in out["m3"]


def test_group_generation_reads_librdkafka_metadata() -> None:
    metadata = b"CGMDv2:" + struct.pack("=i", 7) + b"app\x00rdkafka-abc\x00\x01"
    assert group_generation(metadata) == (7, "rdkafka-abc")


def _report(member: str, process: str, slots: range, generation: int = 3, **more: object) -> Report:
    return Report(generation, member, process, tuple(slots), 1_000, **more)  # type: ignore[arg-type]


def test_a_generation_is_complete_once_its_reports_claim_every_slot() -> None:
    half = MEMBER_SLOTS // 2
    a, b = _report("m-a", "p1", range(half)), _report("m-b", "p2", range(half, MEMBER_SLOTS))
    assert missing_slots(reported_members([a], 3)) == list(range(half, MEMBER_SLOTS))
    other_generation = _report("m-x", "p3", range(half, MEMBER_SLOTS), generation=2)
    assert missing_slots(reported_members([a, other_generation], 3)), "another generation's report"
    assert [r.member for r in reported_members([b, a], 3)] == ["m-a", "m-b"]
    assert missing_slots(reported_members([b, a], 3)) == []
    assert missing_slots(reported_members([a, b], 3, not_before_ms=2_000)), "old reports are ignored"


def test_compute_assignment_prefers_caught_up_clients_and_round_trips() -> None:
    tasks = [TaskId(0, p) for p in range(4)]
    changelogs = {t: [f"cl/{t.partition}"] for t in tasks}
    ends = {f"cl/{p}": 50_000 for p in range(4)}
    full = {t: {f"cl/{t.partition}": 50_000} for t in tasks}
    reports = [
        _report("m-1", "p1", range(0, 32), positions=full, prev_active=frozenset(tasks[:2])),
        _report("m-2", "p2", range(32, 64), positions={}),
    ]
    configs = AssignmentConfigs(acceptable_recovery_lag=10_000, max_warmup_replicas=2, num_standby_replicas=1)
    assignment = compute_assignment(3, reports, tasks, changelogs, ends, configs)
    assert set(assignment.members["m-1"]) == set(tasks), "only p1 is caught up: it keeps every task"
    # p2 keeps a copy of every task (its standbys double as warm-ups: the moves were swaps)
    # and a probing rebalance will move tasks once p2 has caught up
    assert assignment.probing
    assert set(assignment.clients["p2"]["standby"]) | set(assignment.clients["p2"]["warmup"]) == set(tasks)
    assert Assignment.from_json(assignment.to_json()) == assignment
    assert Report.from_json(reports[0].to_json()) == reports[0]


def test_a_static_member_that_rejoined_without_a_rebalance_finds_its_tasks_by_slots() -> None:
    assignment = Assignment(
        5, "i1-aaa", {"i1-aaa": [T00], "i2-bbb": [T01]}, {}, slots={"i1-aaa": [0, 1], "i2-bbb": [2, 3]}
    )
    assert assignment.tasks_of("i2-new", [2, 3], "i2") == [T01], "same instance id, same slots"
    assert assignment.tasks_of("i2-new", [2, 3], None) is None, "a dynamic member must be named"
    assert assignment.tasks_of("i3-new", [2, 3], "i3") is None, "another instance's slots are not ours"
