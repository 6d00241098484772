"""The coordinator's choice of assignment and leader (pure logic: no broker).

Why these cases: the 60-minute soak of 2026-11-24 (docs/soak/README.md) showed
that generation numbers repeat when a repair deletes and re-creates the group (Tansu starts
the new group at generation 0 again), that a worker then took tasks from an assignment of
the *old* group's generation 0, that a client which had led an old generation of that
number never led the new one, and that a member slot nobody reported held the whole group
without tasks. Two reviews added the cases where a fix could give a task two owners in one
generation (a late reporter, two partial leads, static members restarting one by one).
The broker-level case (a member that never leads) is tests/integration/test_assignment_wait.py.
The consumer here is a stand-in that only serves librdkafka's group metadata and
watermarks: the coordinator's logic, not Kafka.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder
from platform_streams.config import StreamsConfig
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.coordinator import AssignmentCoordinator, slot_ranges
from platform_streams.runtime.task_assignment.protocol import (
    ASSIGNMENT_KEY,
    EPOCH_KEY,
    MEMBER_SLOTS,
    REPORT_PREFIX,
    Assignment,
    Report,
)
from platform_streams.topology.compiler import compile_topology

HALF = MEMBER_SLOTS // 2


class GroupMember:
    """librdkafka's consumer, as far as the coordinator reads it: the group metadata."""

    def __init__(self, generation: int, member: str) -> None:
        self.generation, self.member = generation, member

    def consumer_group_metadata(self) -> bytes:
        return b"CGMDv2:" + struct.pack("=i", self.generation) + b"app\x00" + self.member.encode() + b"\x00"

    def get_watermark_offsets(self, _tp: Any, timeout: float = 0.0) -> tuple[int, int]:
        return 0, 0


class Client:
    """One coordinator and what it published."""

    def __init__(self, tmp_path: Path, process: str) -> None:
        builder = StreamsBuilder()
        builder.stream("in").to("out")
        config = StreamsConfig(application_id="app", bootstrap_servers="unused:9092", state_dir=tmp_path)
        self.published: list[tuple[str, dict[str, Any] | None]] = []
        self.coordinator = AssignmentCoordinator(
            compile_topology(builder.build()),
            config,
            process,
            tmp_path / process,
            publish=lambda key, value: self.published.append((key, value)),
            standby_positions=dict,
            on_assignment=lambda: None,
        )
        self.coordinator.start({"in": 2})

    def assignments(self) -> list[Assignment]:
        return [Assignment.from_json(v) for k, v in self.published if k == ASSIGNMENT_KEY and v is not None]

    def read_back(self, *others: Client) -> None:
        """What the control topic would hand this client: every record published so far."""
        for client in (self, *others):
            for key, value in client.published:
                self.coordinator.on_record(key, value)


def _report(generation: int, member: str, slots: range, time_ms: int) -> dict[str, Any]:
    return Report(generation, member, "other", tuple(slots), time_ms).to_json()


def _tasks(*partitions: int) -> list[TaskId]:
    return [TaskId(0, p) for p in partitions]


def test_an_epoch_record_voids_the_old_groups_generations(tmp_path: Path) -> None:
    """After a repair the group starts at generation 0 again: the old group's generation-0
    assignment (here naming this very member id and instance slots, as Tansu let w0 keep
    its member id through the delete) must neither be taken nor stop this client leading."""
    client = Client(tmp_path, "p1")
    old = Assignment(0, "w0-a", {"w0-a": _tasks(1)}, {}, slots={"w0-a": list(range(MEMBER_SLOTS))})
    client.coordinator.on_record(ASSIGNMENT_KEY, old.to_json())
    client.coordinator._published.add(0)
    client.coordinator.on_record(EPOCH_KEY, {"time": 1, "by": "p2"})
    pending = client.coordinator.join(GroupMember(0, "w0-a"), list(range(MEMBER_SLOTS)), [], instance_id="w0")
    assert client.coordinator.assignment_for(pending, GroupMember(0, "w0-a")) is None
    [placed] = client.assignments()
    assert placed.reports == {"w0-a": pending.report.time_ms}, "it leads the new generation 0"
    client.read_back()
    assert client.coordinator.assignment_for(pending, GroupMember(0, "w0-a")) == _tasks(0, 1)


def test_the_repairing_worker_writes_the_epoch_and_forgets_the_old_group(tmp_path: Path) -> None:
    client = Client(tmp_path, "p1")
    first = client.coordinator.join(GroupMember(0, "m-1"), list(range(MEMBER_SLOTS)), [])
    client.coordinator.assignment_for(first, GroupMember(0, "m-1"))
    client.read_back()
    client.published.clear()
    client.coordinator.group_recreated()
    assert [k for k, _v in client.published] == [EPOCH_KEY]
    again = client.coordinator.join(GroupMember(0, "m-2"), list(range(MEMBER_SLOTS)), [])
    client.coordinator.assignment_for(again, GroupMember(0, "m-2"))
    assert len(client.assignments()) == 1, "the old group's lead of generation 0 does not block this one"


def test_a_generation_synced_again_keeps_its_assignment(tmp_path: Path) -> None:
    """Tansu re-syncs a generation without a new number (seen in the soak): the member's
    second join takes the same assignment, and nobody places the generation twice."""
    client = Client(tmp_path, "p1")
    first = client.coordinator.join(GroupMember(4, "m-1"), list(range(MEMBER_SLOTS)), [])
    client.coordinator.assignment_for(first, GroupMember(4, "m-1"))
    client.read_back()
    second = client.coordinator.join(GroupMember(4, "m-1"), list(range(MEMBER_SLOTS)), [])
    assert client.coordinator.assignment_for(second, GroupMember(4, "m-1"), partial=True) == _tasks(0, 1)
    assert len(client.assignments()) == 1


def test_the_leader_places_the_tasks_over_the_members_that_reported_only_when_told(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = Client(tmp_path, "p1")
    pending = client.coordinator.join(GroupMember(2, "m-1"), list(range(HALF)), [])
    assert client.coordinator.missing_slots(pending) == list(range(HALF, MEMBER_SLOTS))
    assert client.coordinator.assignment_for(pending, GroupMember(2, "m-1")) is None
    assert client.assignments() == [], "slots 32-63 have not reported: no placement yet"
    assert client.coordinator.assignment_for(pending, GroupMember(2, "m-1"), partial=True) is None
    [placed] = client.assignments()
    assert placed.members == {"m-1": _tasks(0, 1)}
    assert "member slots 32-63 have no report" in caplog.text
    client.read_back()
    assert client.coordinator.assignment_for(pending, GroupMember(2, "m-1")) == _tasks(0, 1)


def test_only_the_lowest_member_that_reported_leads_a_partial_generation(tmp_path: Path) -> None:
    client = Client(tmp_path, "p1")
    now = int(time.time() * 1000)
    client.coordinator.on_record(REPORT_PREFIX + "m-0", _report(2, "m-0", range(16, HALF), now))
    pending = client.coordinator.join(GroupMember(2, "m-1"), list(range(16)), [])
    assert client.coordinator.missing_slots(pending) == list(range(HALF, MEMBER_SLOTS))
    assert client.coordinator.assignment_for(pending, GroupMember(2, "m-1"), partial=True) is None
    assert client.assignments() == [], "m-0 reported and is lower: it leads, m-1 waits"


def test_a_member_that_reports_after_a_partial_lead_does_not_lead_again(tmp_path: Path) -> None:
    """X placed the tasks over the reporters; W (a lower member id) reports late and
    completes the slots. W must not place the generation a second time (two owners of a
    task): it is left out and starts a new generation."""
    x, w = Client(tmp_path, "px"), Client(tmp_path, "pw")
    at_x = x.coordinator.join(GroupMember(3, "m-2"), list(range(HALF)), [])
    x.coordinator.assignment_for(at_x, GroupMember(3, "m-2"), partial=True)
    x.read_back()
    assert x.coordinator.assignment_for(at_x, GroupMember(3, "m-2")) == _tasks(0, 1)
    at_w = w.coordinator.join(GroupMember(3, "m-1"), list(range(HALF, MEMBER_SLOTS)), [])
    w.read_back(x)
    assert w.coordinator.missing_slots(at_w) == [], "every slot has reported now"
    assert w.coordinator.assignment_for(at_w, GroupMember(3, "m-1"), partial=True) is None
    assert w.assignments() == [], "the generation has its assignment: nobody leads it again"
    assert at_w.unplaced, "left out: the worker starts a new generation"


def test_of_two_partial_leads_the_first_on_the_topic_is_final(tmp_path: Path) -> None:
    one, two = Client(tmp_path, "p1"), Client(tmp_path, "p2")
    at_one = one.coordinator.join(GroupMember(4, "m-1"), list(range(HALF)), [])
    at_two = two.coordinator.join(GroupMember(4, "m-2"), list(range(HALF, MEMBER_SLOTS)), [])
    # each saw only its own report at its deadline: each leads over itself
    one.coordinator.assignment_for(at_one, GroupMember(4, "m-1"), partial=True)
    two.coordinator.assignment_for(at_two, GroupMember(4, "m-2"), partial=True)
    assert len(one.assignments()) == len(two.assignments()) == 1
    topic = [*one.published, *two.published]  # one partition: one order for every reader
    for client in (one, two):
        for key, value in topic:
            client.coordinator.on_record(key, value)
    assert one.coordinator.assignment_for(at_one, GroupMember(4, "m-1")) == _tasks(0, 1)
    assert two.coordinator.assignment_for(at_two, GroupMember(4, "m-2")) is None
    assert at_two.unplaced, "m-2's own assignment came second: it starts a new generation instead"


def test_a_waiting_member_publishes_its_report_again(tmp_path: Path) -> None:
    client = Client(tmp_path, "p1")
    pending = client.coordinator.join(GroupMember(1, "m-1"), list(range(HALF)), [])
    client.coordinator.remind(pending)
    assert [k for k, _v in client.published] == [REPORT_PREFIX + "m-1"], "not before the reminder is due"
    pending.next_reminder = 0.0
    client.coordinator.remind(pending)
    assert [k for k, _v in client.published] == [REPORT_PREFIX + "m-1"] * 2
    assert client.published[0][1] == client.published[1][1]


def test_static_members_restarting_one_by_one_keep_their_tasks_and_nobody_leads_again(
    tmp_path: Path,
) -> None:
    """Kafka: a static member restarted within the session timeout rejoins the same
    generation with a new member id and the same slots, however old the generation. A
    rolling restart (the Helm chart's pods, one after another) must not place it again."""
    client = Client(tmp_path, "p1")
    long_ago = int(time.time() * 1000) - 7_200_000
    placed = Assignment(
        6,
        "i1-a",
        {"i1-a": _tasks(0), "i2-b": _tasks(1)},
        {},
        time_ms=long_ago,
        slots={"i1-a": list(range(HALF)), "i2-b": list(range(HALF, MEMBER_SLOTS))},
    )
    client.coordinator.on_record(ASSIGNMENT_KEY, placed.to_json())
    one = client.coordinator.join(GroupMember(6, "i1-new"), list(range(HALF)), [], instance_id="i1")
    assert client.coordinator.assignment_for(one, GroupMember(6, "i1-new"), partial=True) == _tasks(0)
    two = client.coordinator.join(
        GroupMember(6, "i2-new"), list(range(HALF, MEMBER_SLOTS)), [], instance_id="i2"
    )
    assert client.coordinator.assignment_for(two, GroupMember(6, "i2-new"), partial=True) == _tasks(1)
    assert client.assignments() == []
    other = client.coordinator.join(GroupMember(6, "i3-new"), list(range(HALF)), [], instance_id="i3")
    assert client.coordinator.assignment_for(other, GroupMember(6, "i3-new")) is None
    assert other.unplaced, "another instance's slots are not its own"


def test_the_new_generation_toggles_the_control_topic_in_this_consumers_subscription(tmp_path: Path) -> None:
    client = Client(tmp_path, "p1")
    subscribed: list[list[str]] = []
    client.coordinator.resubscribe(["app-members"], subscribed.append)
    client.coordinator.resubscribe(subscribed[-1], subscribed.append)
    assert subscribed == [["app-members", "app-control"], ["app-members"]]


def test_slot_ranges_reads_like_an_operator_writes() -> None:
    assert slot_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert slot_ranges([]) == ""
