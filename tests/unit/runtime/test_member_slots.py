"""Member slots beyond 64: how a generation of many members learns it is complete, and the
placement at 1,000 members (pure logic: the slot arithmetic and the assignor, no broker).

A member learns that every member of its generation reported when the reports' member slots
(the partitions of ``<app>-members`` the group's range assignor gave each member) tile
``0..slot_count-1``. With a 64-partition members topic a 65th member gets no slot: the
generation looks complete before it reported, the leader places the tasks without it, and
it has to start a new generation -- with many members, over and over. The slot count is
therefore the members topic's partition count, carried in every report, so a topic with
more partitions (``member_slots``) counts that many members exactly.

The range assignor below is librdkafka's (``rd_kafka_range_assignor_assign_cb``, the same
arithmetic as Kafka's ``RangeAssignor``): members sorted by id, ``P // N`` partitions each,
the first ``P % N`` members one more.
"""

from __future__ import annotations

import random
import struct
from collections import Counter
from pathlib import Path
from typing import Any

from platform_streams import StreamsBuilder
from platform_streams.config import StreamsConfig
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import AssignmentConfigs
from platform_streams.runtime.task_assignment.coordinator import AssignmentCoordinator
from platform_streams.runtime.task_assignment.protocol import (
    MEMBER_SLOTS,
    REPORT_PREFIX,
    Assignment,
    Report,
    compute_assignment,
    encode,
    missing_slots,
    reported_members,
)
from platform_streams.topology.compiler import compile_topology

GENERATION = 7


def range_assign(members: list[str], partitions: int) -> dict[str, tuple[int, ...]]:
    """librdkafka's range assignor for one topic: member id -> its partitions."""
    ordered = sorted(members)
    each, extra = divmod(partitions, len(ordered))
    out: dict[str, tuple[int, ...]] = {}
    for i, member in enumerate(ordered):
        start = each * i + min(i, extra)
        out[member] = tuple(range(start, start + each + (1 if i < extra else 0)))
    return out


def _reports(
    slots: dict[str, tuple[int, ...]], process_of: dict[str, str], slot_count: int, **more: Any
) -> list[Report]:
    return [
        Report(GENERATION, m, process_of[m], s, 1_000, slot_count=slot_count, **more.get(m, {}))
        for m, s in slots.items()
    ]


def _complete(reports: list[Report]) -> bool:
    return not missing_slots(reported_members(reports, GENERATION))


def test_beyond_64_members_a_member_without_a_slot_is_not_waited_for_unless_the_topic_has_more() -> None:
    members = [f"m-{i:03d}" for i in range(65)]
    process_of = {m: "p" for m in members}
    # 64 slots (the default): the last member by id gets none, and the generation looks
    # complete without its report (the leader would place 64 members; it would rejoin)
    slots = range_assign(members, MEMBER_SLOTS)
    assert slots[members[-1]] == ()
    early = _reports(slots, process_of, MEMBER_SLOTS)[:-1]
    assert _complete(early), "64 slots cannot count a 65th member"
    # a 128-partition members topic: every member has a slot, and the generation is complete
    # only with every report
    slots = range_assign(members, 128)
    reports = _reports(slots, process_of, 128)
    assert all(slots.values())
    for i in range(len(reports)):
        assert not _complete(reports[:i] + reports[i + 1 :]), f"complete without {reports[i].member}"
    assert _complete(reports)


def test_the_slot_count_is_the_largest_any_report_shows() -> None:
    """A report from a version without ``slot_count`` counts as 64; a slot beyond the count a
    member saw (its metadata was older than the assignor's) raises it."""
    old = Report.from_json({"generation": GENERATION, "member": "m-a", "process": "p", "slots": [*range(64)]})
    assert old.slot_count == MEMBER_SLOTS
    assert _complete([old])
    b = Report(GENERATION, "m-b", "p", tuple(range(64, 100)), 1_000, slot_count=MEMBER_SLOTS)
    assert missing_slots(reported_members([old, b], GENERATION)) == []  # 0..99 tiled, nobody said more
    c = Report(GENERATION, "m-c", "p", tuple(range(100, 128)), 1_000, slot_count=128)
    assert missing_slots(reported_members([old, c], GENERATION)) == list(range(64, 100))
    assert Report.from_json(c.to_json()) == c
    eight = range_assign(["x", "y"], 8)
    small = [Report(GENERATION, m, "p", ss, 1_000, slot_count=8) for m, ss in eight.items()]
    assert _complete(small) and not _complete(small[:1]), "a topic of fewer than 64 partitions"


def test_placement_of_1000_members_by_simulation() -> None:
    """1,000 members (250 processes of 4 stream threads) over a 1,024-partition members topic:
    no leader places before every member reported, every task has exactly one owner,
    members are balanced, standbys never share a process with their active, and the next
    generation (one process gone, one new) moves no stateful task but the departed
    process's."""
    rnd = random.Random(48)
    slot_count = 1024
    # member ids as librdkafka makes them: the client.id (application, process, thread), a UUID
    members = [
        f"app-{i // 4:08x}-StreamThread-{i % 4 + 1}-consumer-{rnd.getrandbits(128):032x}" for i in range(1000)
    ]
    process_of = {m: f"proc-{i // 4:03d}" for i, m in enumerate(members)}
    tasks = [TaskId(0, p) for p in range(1000)] + [TaskId(1, p) for p in range(500)]
    changelogs = {t: [f"store-changelog/{t.partition}"] for t in tasks if t.subtopology == 1}
    ends = {tp: 1_000 for tps in changelogs.values() for tp in tps}
    configs = AssignmentConfigs(num_standby_replicas=1)

    def generation(members: list[str], prev: Assignment | None) -> Assignment:
        slots = range_assign(members, slot_count)
        assert all(slots.values()), "every member has a slot"
        more: dict[str, dict[str, Any]] = {}
        if prev is not None:  # every process is caught up on what it ran or kept as a standby
            for m in members:
                pid = process_of[m]
                held = prev.role_of(pid, "active") | prev.role_of(pid, "standby")
                more[m] = {
                    "prev_active": frozenset(prev.members.get(m, [])),
                    "positions": {t: {tp: 1_000 for tp in changelogs[t]} for t in held if t in changelogs},
                }
        reports = _reports(slots, process_of, slot_count, **more)
        rnd.shuffle(reports)  # the order reports reach the control topic
        # the completeness check with any one report missing (a sample): nobody may lead yet
        owner = {s: r.member for r in reports for s in r.slots}
        for r in [*reports[:100], min(reports, key=lambda r: r.member), max(reports, key=lambda r: r.member)]:
            assert set(missing_slots([x for x in reports if x is not r])) == set(r.slots)
        assert not missing_slots(reported_members(reports, GENERATION)) and len(owner) == slot_count
        chosen = reported_members(reports, GENERATION)
        assert len(chosen) == len(members)
        return compute_assignment(GENERATION, chosen, tasks, changelogs, ends, configs, prev)

    first = generation(members, None)
    _check(first, members, tasks, process_of, changelogs)
    # one record on the control topic: within the producer's default message.max.bytes
    assert len(encode(first)) < 1_000_000

    gone = [m for m in members if process_of[m] == "proc-000"]
    new = [f"rdkafka-new-{i}" for i in range(4)]
    process_of.update({m: "proc-new" for m in new})
    survivors = [m for m in members if m not in gone]
    second = generation(survivors + new, first)
    _check(second, survivors + new, tasks, process_of, changelogs)
    before = {t: process_of[m] for m, ts in first.members.items() for t in ts}
    after = {t: process_of[m] for m, ts in second.members.items() for t in ts}
    departed = {t for t in changelogs if before[t] == "proc-000"}
    moved = {t for t in changelogs if before[t] != after[t]}
    # Stateful tasks stay with their caught-up owners: only the departed process's move.
    # Stateless ones are dealt to the least loaded clients afresh, as Kafka's
    # HighAvailabilityTaskAssignor.assignStatelessActiveTasks does: no stickiness asserted.
    assert moved == departed, f"{len(moved)} stateful tasks moved, {len(departed)} had to"


def _check(
    assignment: Assignment,
    members: list[str],
    tasks: list[TaskId],
    process_of: dict[str, str],
    changelogs: dict[TaskId, list[str]],
) -> None:
    assert set(assignment.members) == set(members), "every member is named"
    owners = Counter(t for ts in assignment.members.values() for t in ts)
    assert sorted(owners) == sorted(tasks) and set(owners.values()) == {1}, "every task exactly once"
    loads = [len(ts) for ts in assignment.members.values()]
    assert max(loads) - min(loads) <= 1, f"members hold {min(loads)}..{max(loads)} tasks"
    for pid, roles in assignment.clients.items():
        assert not set(roles["active"]) & set(roles["standby"]), f"{pid} has a standby of its own active"
        mine = {t for m, ts in assignment.members.items() if process_of[m] == pid for t in ts}
        assert mine == set(roles["active"])
    standbys = Counter(t for roles in assignment.clients.values() for t in roles["standby"] + roles["warmup"])
    assert all(standbys[t] >= 1 for t in changelogs), "every stateful task has a standby"


class _Consumer:
    """librdkafka's consumer as the coordinator reads it at a join: the group metadata and
    the members topic's partition count."""

    def __init__(self, member: str, partitions: int) -> None:
        self.member, self.partitions = member, partitions

    def consumer_group_metadata(self) -> bytes:
        return b"CGMDv2:" + struct.pack("=i", GENERATION) + b"app\x00" + self.member.encode() + b"\x00"

    def list_topics(self, topic: str, timeout: float = 0.0) -> Any:
        class Meta:
            topics = {topic: type("T", (), {"partitions": dict.fromkeys(range(self.partitions))})()}

        return Meta()

    def get_watermark_offsets(self, _tp: Any, timeout: float = 0.0) -> tuple[int, int]:
        return 0, 0


def test_a_leader_reads_the_slot_count_before_it_leads_and_waits_for_every_member(tmp_path: Path) -> None:
    """65 members over a members topic another client grew to 128 partitions, while this
    client still knew 64: the reports of the first 64 members tile slots 0..126 and carry
    64, which would look complete; the leader reads the count (128) before it may lead,
    publishes its report again with it, and waits for the 65th member."""
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    config = StreamsConfig(application_id="app", bootstrap_servers="unused:9092", state_dir=tmp_path)
    published: list[tuple[str, Any]] = []
    coordinator = AssignmentCoordinator(
        compile_topology(builder.build()),
        config,
        "p1",
        tmp_path / "p1",
        publish=lambda key, value: published.append((key, value)),
        standby_positions=dict,
        on_assignment=lambda: None,
    )
    coordinator.start({"in": 4})
    members = [f"m-{i:03d}" for i in range(65)]
    slots = range_assign(members, 128)
    pendings = {m: coordinator.join(_Consumer(m, 128), list(slots[m]), []) for m in members[:-1]}
    reports = [Report.from_json(v) for k, v in published if k.startswith(REPORT_PREFIX)]
    assert {r.slot_count for r in reports} == {MEMBER_SLOTS}, "the count known at the join"
    assert not missing_slots(reports), "by those counts alone the generation looks complete"
    lead = pendings[members[0]]
    assert coordinator.assignment_for(lead, _Consumer(members[0], 128)) is None
    assert not [k for k, _ in published if k == "assignment"], "placed before the 65th member reported"
    assert published[-1] == (REPORT_PREFIX + members[0], lead.report.to_json())
    assert lead.report.slot_count == 128 == coordinator.slot_count
    late = coordinator.join(_Consumer(members[-1], 128), list(slots[members[-1]]), [])
    assert late.report.slot_count == 128, "a later join carries the count read since"
    coordinator.assignment_for(lead, _Consumer(members[0], 128))
    (assignment,) = [Assignment.from_json(v) for k, v in published if k == "assignment"]
    assert set(assignment.members) == set(members)
