"""The coordinator's choice of assignment and leader (pure logic: no broker).

Why these cases: the 60-minute soak of 2026-11-24 (finding 13, docs/soak/README.md) showed
that generation numbers repeat when a repair deletes and re-creates the group (Tansu starts
the new group at generation 0 again), that a worker then took tasks from an assignment of
the *old* group's generation 0, that a client which had led an old generation of that
number never led the new one, and that a member slot nobody reported held the whole group
without tasks. The broker-level case (a member that never leads) is
tests/integration/test_assignment_wait.py. The consumer here is a stand-in that only
serves librdkafka's group metadata and watermarks: the coordinator's logic, not Kafka.
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


def test_an_assignment_of_an_earlier_group_with_the_same_generation_is_not_taken(tmp_path: Path) -> None:
    client = Client(tmp_path, "p1")
    old = int(time.time() * 1000) - 3_600_000
    stale = Assignment(0, "m-1", {"m-1": [TaskId(0, 0)]}, {}, time_ms=old, reports={"m-1": old})
    client.coordinator.on_record(ASSIGNMENT_KEY, stale.to_json())
    pending = client.coordinator.join(GroupMember(0, "m-1"), list(range(MEMBER_SLOTS)), [])
    client.read_back()
    tasks = client.coordinator.assignment_for(pending, GroupMember(0, "m-1"))
    assert tasks is None, "the stale generation-0 assignment names this member, but not this join's report"
    # this client leads the new generation 0 (alone: every slot reported) and takes its own
    assert len(client.assignments()) == 1
    client.read_back()
    assert client.coordinator.assignment_for(pending, GroupMember(0, "m-1")) == [TaskId(0, 0), TaskId(0, 1)]


def test_a_client_that_led_a_generation_of_an_earlier_group_leads_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client(tmp_path, "p1")
    an_hour_ago = time.time() - 3600
    with monkeypatch.context() as then:  # the old group, an hour ago
        then.setattr(time, "time", lambda: an_hour_ago)
        first = client.coordinator.join(GroupMember(0, "m-1"), list(range(MEMBER_SLOTS)), [])
        client.coordinator.assignment_for(first, GroupMember(0, "m-1"))
    assert len(client.assignments()) == 1
    # the group is deleted and re-created: generation 0 again, with a new member
    again = client.coordinator.join(GroupMember(0, "m-2"), list(range(MEMBER_SLOTS)), [])
    client.coordinator.assignment_for(again, GroupMember(0, "m-2"))
    assert len(client.assignments()) == 2, "the generation-0 lead of the old group does not block this one"


def test_a_generation_synced_again_keeps_its_assignment(tmp_path: Path) -> None:
    """Tansu re-syncs a generation without a new number (seen in the soak): the member's
    second join still takes the assignment made from its first report, and the leader does
    not place the same generation twice."""
    client = Client(tmp_path, "p1")
    first = client.coordinator.join(GroupMember(4, "m-1"), list(range(MEMBER_SLOTS)), [])
    client.coordinator.assignment_for(first, GroupMember(4, "m-1"))
    client.read_back()
    time.sleep(0.002)
    second = client.coordinator.join(GroupMember(4, "m-1"), list(range(MEMBER_SLOTS)), [], earlier=first)
    assert client.coordinator.assignment_for(second, GroupMember(4, "m-1")) == [TaskId(0, 0), TaskId(0, 1)]
    assert len(client.assignments()) == 1
    fresh = client.coordinator.join(GroupMember(4, "m-1"), list(range(MEMBER_SLOTS)), [])
    assert client.coordinator.assignment_for(fresh, GroupMember(4, "m-1")) is None, (
        "without the earlier join (a new consumer), an assignment of another report is not ours"
    )


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
    assert placed.members == {"m-1": [TaskId(0, 0), TaskId(0, 1)]}
    assert "member slots 32-63 have no report" in caplog.text
    client.read_back()
    assert client.coordinator.assignment_for(pending, GroupMember(2, "m-1")) == [TaskId(0, 0), TaskId(0, 1)]


def test_only_the_lowest_member_that_reported_leads_a_partial_generation(tmp_path: Path) -> None:
    client = Client(tmp_path, "p1")
    now = int(time.time() * 1000)
    client.coordinator.on_record(REPORT_PREFIX + "m-0", _report(2, "m-0", range(HALF, MEMBER_SLOTS), now))
    pending = client.coordinator.join(GroupMember(2, "m-1"), list(range(HALF)), [])
    assert client.coordinator.missing_slots(pending) == []
    assert client.coordinator.assignment_for(pending, GroupMember(2, "m-1"), partial=True) is None
    assert client.assignments() == [], "m-0 reported and leads: m-1 waits (and in the end rejoins)"


def test_a_waiting_member_publishes_its_report_again(tmp_path: Path) -> None:
    client = Client(tmp_path, "p1")
    pending = client.coordinator.join(GroupMember(1, "m-1"), list(range(HALF)), [])
    client.coordinator.remind(pending)
    assert [k for k, _v in client.published] == [REPORT_PREFIX + "m-1"], "not before the reminder is due"
    pending.next_reminder = 0.0
    client.coordinator.remind(pending)
    assert [k for k, _v in client.published] == [REPORT_PREFIX + "m-1"] * 2
    assert client.published[0][1] == client.published[1][1], "the same report: the same assignment is ours"


def test_a_static_member_takes_its_old_incarnations_tasks_only_from_the_newest_assignment(
    tmp_path: Path,
) -> None:
    client = Client(tmp_path, "p1")
    now = int(time.time() * 1000)
    older = Assignment(5, "i1-a", {"i1-a": [TaskId(0, 1)]}, {}, time_ms=now - 10, slots={"i1-a": [0]})
    newer = Assignment(6, "i2-b", {"i2-b": [TaskId(0, 0)]}, {}, time_ms=now, slots={"i2-b": [0]})
    for assignment in (older, newer):
        client.coordinator.on_record(ASSIGNMENT_KEY, assignment.to_json())
    at_5 = client.coordinator.join(GroupMember(5, "i1-new"), [0], [], instance_id="i1")
    assert client.coordinator.assignment_for(at_5, GroupMember(5, "i1-new")) is None, (
        "generation 5 is history"
    )
    at_6 = client.coordinator.join(GroupMember(6, "i2-new"), [0], [], instance_id="i2")
    assert client.coordinator.assignment_for(at_6, GroupMember(6, "i2-new")) == [TaskId(0, 0)]


def test_slot_ranges_reads_like_an_operator_writes() -> None:
    assert slot_ranges([0, 1, 2, 5, 7, 8]) == "0-2, 5, 7-8"
    assert slot_ranges([]) == ""
