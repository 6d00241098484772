"""The assignment protocol: the consumer group for membership, the control topic for placement.

librdkafka has no pluggable assignor, so (like Kafka Connect's distributed herder, which
assigns its own work over a group) the group is used only for what the broker does well
-- membership, generations, fencing -- and placement is computed by the clients:

* every worker subscribes to ``<application_id>-members`` (``member_slots`` partitions,
  :data:`MEMBER_SLOTS` by default, nobody reads them). A generation's assignment of that
  topic gives every member at least one *slot* (up to as many members as the topic has
  partitions), and the slots of all members tile ``0..P-1`` (P: the partition count,
  which every report carries as ``slot_count``): that is how a member learns the group is
  complete without a member list (the admin API of some brokers shows none);
* after ``on_assign`` of generation G (read from the consumer group metadata) a member
  publishes a :class:`Report` (``report/<member id>`` on the compacted control topic): its
  slots, its process, the changelog positions of every task its process has state for,
  its tasks of the previous generation, its client tags;
* once the reports of G tile the slots, the member with the lowest member id is the
  *leader* of G: it computes the placement (:func:`compute_assignment`, the KIP-441
  assignor) and publishes it once (``assignment``), tagged with G and the member ids;
* the first assignment of a generation on the topic is final: a member runs the tasks it
  gives it, and nothing before it arrives; a repair that re-creates the group (generation
  numbers restart) writes an epoch record, and what came before it belongs to the old group;
* the wait is bounded (docs/scale-out.md, "Bounded wait"): reports are re-published while
  a member waits, the lowest member that reported places the tasks over the reporters
  once the rest had ample time, and a member the final assignment leaves out, or that
  waits too long, makes the group start a new generation.

Safety (docs/scale-out.md, "State-aware assignment"): the group protocol is eager, so a
member revokes (commits and closes) every task before it joins a new generation; within a
generation each task has one owner; a member acts only on an assignment of its own
generation that names it. A member expelled from the group is fenced as before (stale
generation on Kafka, else the membership check). A leader that dies before publishing
leaves the generation without an assignment: nobody processes, the group expels the dead
leader after the session timeout and the next generation elects another.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.task_assignment.client_state import AssignmentConfigs, ClientState
from platform_streams.runtime.task_assignment.high_availability import assign
from platform_streams.runtime.task_assignment.members import distribute_over_members
from platform_streams.runtime.task_assignment.rack_aware import RackAwareTaskAssignor, RackInputs

__all__ = [
    "EPOCH_KEY",
    "MEMBER_SLOTS",
    "Assignment",
    "Report",
    "compute_assignment",
    "group_generation",
    "hold_back_running",
    "members_topic_name",
    "missing_slots",
    "reported_members",
    "slot_count",
]

#: partitions of the members topic unless ``member_slots`` says otherwise, and the slot count
#: of a report that does not carry one: the most group members (stream threads) the
#: completeness check counts; beyond that the leader also takes every report seen
MEMBER_SLOTS = 64

REPORT_PREFIX = "report/"
ASSIGNMENT_KEY = "assignment"
#: written by a worker that deleted and so re-created the group (runtime/membership/rebalance_wait.py):
#: every report and assignment before it on the control topic belongs to the old group
EPOCH_KEY = "assignment-epoch"

#: changelog partition "topic/partition" -> position (the next offset the store needs)
Positions = dict[str, int]


def members_topic_name(application_id: str) -> str:
    return f"{application_id}-members"


def group_generation(metadata: bytes) -> tuple[int, str]:
    """(generation id, member id) from librdkafka's serialized consumer group metadata.

    ``rd_kafka_consumer_group_metadata_write``: ``CGMDv2:``, the generation id (int32,
    host byte order), then the NUL-terminated group id and member id.
    """
    data = bytes(metadata)
    if not data.startswith(b"CGMDv2:") or len(data) < 13:
        raise ValueError(f"unknown consumer group metadata format: {data[:8]!r}")
    (generation,) = struct.unpack("=i", data[7:11])
    parts = data[11:].split(b"\0")
    return generation, parts[1].decode("utf-8", "replace") if len(parts) > 1 else ""


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


@dataclass(frozen=True)
class Report:
    """What one member tells the leader of its generation."""

    generation: int
    member: str
    process: str
    slots: tuple[int, ...]
    time_ms: int
    positions: dict[TaskId, Positions] = field(default_factory=dict)
    prev_active: frozenset[TaskId] = frozenset()
    tags: dict[str, str] = field(default_factory=dict)
    #: cooperative rebalancing: the tasks the member still runs (uncommitted since the
    #: rebalance began); a task moves away from it only after it released it
    running: frozenset[TaskId] = frozenset()
    #: the member's client.rack (rack-aware active placement); None: unset
    rack: str | None = None
    #: the members topic's partition count as this member's client knew it: the slots of a
    #: complete generation tile 0..slot_count-1
    slot_count: int = MEMBER_SLOTS

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "member": self.member,
            "process": self.process,
            "slots": list(self.slots),
            "time": self.time_ms,
            "positions": {str(t): p for t, p in sorted(self.positions.items())},
            "prev_active": sorted(str(t) for t in self.prev_active),
            "tags": self.tags,
            "running": sorted(str(t) for t in self.running),
            "rack": self.rack,
            "slot_count": self.slot_count,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Report:
        return cls(
            generation=int(data["generation"]),
            member=str(data["member"]),
            process=str(data["process"]),
            slots=tuple(int(s) for s in data.get("slots", [])),
            time_ms=int(data.get("time", 0)),
            positions={
                TaskId.parse(t): {str(k): int(v) for k, v in p.items()}
                for t, p in data.get("positions", {}).items()
            },
            prev_active=frozenset(TaskId.parse(t) for t in data.get("prev_active", [])),
            tags={str(k): str(v) for k, v in data.get("tags", {}).items()},
            running=frozenset(TaskId.parse(t) for t in data.get("running", [])),
            rack=None if data.get("rack") is None else str(data["rack"]),
            slot_count=int(data.get("slot_count", MEMBER_SLOTS)),
        )


@dataclass(frozen=True)
class Assignment:
    """One generation's placement, as the leader published it."""

    generation: int
    leader: str
    members: dict[str, list[TaskId]]
    clients: dict[str, dict[str, list[TaskId]]]
    probing: bool = False
    time_ms: int = 0
    #: each member's slots: a static member that rejoined without a rebalance (Kafka) has a
    #: new member id but the same slots in the same generation, and finds its tasks by them
    slots: dict[str, list[int]] = field(default_factory=dict)
    #: per client, the lag the leader computed for each stateful task it gave that client
    lags: dict[str, dict[TaskId, int]] = field(default_factory=dict)
    #: each member's report time, as the leader read it (what the placement was made from)
    reports: dict[str, int] = field(default_factory=dict)
    #: cooperative rebalancing: per member, the tasks it runs that go elsewhere; it commits
    #: and closes them, and their new owners get them in a later generation
    revoking: dict[str, list[TaskId]] = field(default_factory=dict)

    def tasks_of(self, member: str, slots: Iterable[int], instance_id: str | None) -> list[TaskId] | None:
        """The member's tasks, by member id, else (a static member, ``instance_id``) by the
        slots of its previous incarnation, whose id the broker derived from the same instance
        id (``<instance id>-<uuid>``); None if the assignment does not name it."""
        named = self._named(member, slots, instance_id)
        return None if named is None else list(self.members[named])

    def revoking_of(self, member: str, slots: Iterable[int], instance_id: str | None) -> list[TaskId]:
        """The tasks the member must release (commit and close) in this generation."""
        named = self._named(member, slots, instance_id)
        return [] if named is None else list(self.revoking.get(named, []))

    def _named(self, member: str, slots: Iterable[int], instance_id: str | None) -> str | None:
        if member in self.members:
            return member
        mine = sorted(slots)
        if not instance_id or not mine:
            return None
        for other, theirs in self.slots.items():
            if sorted(theirs) == mine and other.startswith(instance_id + "-") and other in self.members:
                return other
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "leader": self.leader,
            "members": {m: [str(t) for t in ts] for m, ts in sorted(self.members.items())},
            "clients": {
                pid: {role: [str(t) for t in ts] for role, ts in roles.items()}
                for pid, roles in sorted(self.clients.items())
            },
            "probing": self.probing,
            "time": self.time_ms,
            "slots": dict(sorted(self.slots.items())),
            "lags": {
                pid: {str(t): n for t, n in sorted(ls.items())} for pid, ls in sorted(self.lags.items())
            },
            "reports": dict(sorted(self.reports.items())),
            "revoking": {m: [str(t) for t in ts] for m, ts in sorted(self.revoking.items()) if ts},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Assignment:
        return cls(
            generation=int(data["generation"]),
            leader=str(data["leader"]),
            members={m: [TaskId.parse(t) for t in ts] for m, ts in data.get("members", {}).items()},
            clients={
                pid: {role: [TaskId.parse(t) for t in ts] for role, ts in roles.items()}
                for pid, roles in data.get("clients", {}).items()
            },
            probing=bool(data.get("probing", False)),
            time_ms=int(data.get("time", 0)),
            slots={m: [int(x) for x in ss] for m, ss in data.get("slots", {}).items()},
            lags={
                pid: {TaskId.parse(t): int(n) for t, n in ls.items()}
                for pid, ls in data.get("lags", {}).items()
            },
            reports={m: int(t) for m, t in data.get("reports", {}).items()},
            revoking={m: [TaskId.parse(t) for t in ts] for m, ts in data.get("revoking", {}).items()},
        )

    def role_of(self, process: str, role: str) -> set[TaskId]:
        return set(self.clients.get(process, {}).get(role, []))


def reported_members(reports: Iterable[Report], generation: int, not_before_ms: int = 0) -> list[Report]:
    """The reports of ``generation`` by member, newest first claiming each slot.

    A slot claimed twice (a report left from an earlier run that reused the generation
    number) goes to the newest report; reports older than ``not_before_ms`` are ignored.
    """
    current = [r for r in reports if r.generation == generation and r.time_ms >= not_before_ms]
    owner: dict[int, Report] = {}
    for report in sorted(current, key=lambda r: (r.time_ms, r.member)):
        for slot in report.slots:
            owner[slot] = report
    chosen = {r.member: r for r in owner.values()}
    chosen.update({r.member: r for r in current if not r.slots})  # more members than slots
    return sorted(chosen.values(), key=lambda r: r.member)


def slot_count(members: Iterable[Report]) -> int:
    """The member slots of a generation: the largest partition count of the members topic any
    report saw, and at least one past the highest slot reported (a member whose metadata
    was older than the group assignor's).

    A report carries the count its client knew at the join; before a member may lead it
    reads the count again (after the group assignor read it: the count the slots were
    given out of) and re-publishes its report if it changed, so a leader never judges by an
    older count of its own. Counts disagree only while the topic grows: a count too small
    can make a generation look complete early (the members left out start a new one, which
    reads the new count), one too large holds the placement until the bounded wait places
    over the reporters -- never two placements of one generation, which only the first
    assignment on the control topic decides. No reports: :data:`MEMBER_SLOTS`."""
    counts = [max(r.slot_count, max(r.slots, default=-1) + 1) for r in members]
    return max(counts, default=MEMBER_SLOTS)


def missing_slots(members: Iterable[Report]) -> list[int]:
    """The member slots no report of ``members`` claims: members that have not reported."""
    members = list(members)
    claimed = {slot for r in members for slot in r.slots}
    return [slot for slot in range(slot_count(members)) if slot not in claimed]


def _lags(
    reports: list[Report], changelogs: Mapping[TaskId, list[str]], end_offsets: Mapping[str, int]
) -> dict[str, dict[TaskId, int]]:
    """Per process and stateful task: end offset sum - position sum (never below 0).

    The end offset of a changelog partition is the larger of what the broker says and what
    any client reports: a broker whose ListOffsets lags behind cannot make a client
    look further behind than the most caught-up one.
    """
    best: dict[str, int] = dict(end_offsets)
    for report in reports:
        for positions in report.positions.values():
            for tp, pos in positions.items():
                best[tp] = max(best.get(tp, 0), pos)
    # Per process and task, not per member and task: a thousand members over a thousand
    # stateful tasks would otherwise sum every changelog of every task once per member.
    ends = {task: sum(best.get(tp, 0) for tp in tps) for task, tps in changelogs.items()}
    lags: dict[str, dict[TaskId, int]] = {}
    for report in reports:
        mine = lags.get(report.process)
        if mine is None:
            mine = lags[report.process] = dict(ends)
        for task, positions in report.positions.items():
            tps = changelogs.get(task)
            if tps is not None:
                lag = max(0, ends[task] - sum(positions.get(tp, 0) for tp in tps))
                mine[task] = min(mine[task], lag)
    return lags


def compute_assignment(
    generation: int,
    reports: list[Report],
    all_tasks: Iterable[TaskId],
    changelogs: Mapping[TaskId, list[str]],
    end_offsets: Mapping[str, int],
    configs: AssignmentConfigs,
    previous: Assignment | None = None,
    racks: RackInputs | None = None,
) -> Assignment:
    """The leader's work: the KIP-441 placement over processes, then over their members.

    With a rack-aware strategy in ``configs``, ``racks`` (the tasks' input partitions and
    their replicas' racks) and every member's reported rack, the active tasks are placed
    to cut cross-rack traffic (:mod:`.rack_aware`)."""
    lags = _lags(reports, changelogs, end_offsets)
    by_process: dict[str, list[Report]] = {}
    for report in reports:
        by_process.setdefault(report.process, []).append(report)
    clients: dict[str, ClientState] = {}
    for pid, members in sorted(by_process.items()):
        tags: dict[str, str] = {}
        for member in members:
            tags.update(member.tags)
        prev_standby = previous.role_of(pid, "standby") if previous is not None else set()
        clients[pid] = ClientState(
            capacity=len(members),
            lags=dict(lags.get(pid, {})),
            tags=tags,
            prev_active={t for m in members for t in m.prev_active},
            prev_standby=prev_standby,
        )
    all_tasks = list(all_tasks)
    rack_aware = None
    if configs.rack_aware_assignment_strategy != "none":
        rack_aware = RackAwareTaskAssignor(
            configs.rack_aware_assignment_strategy,
            input_partitions=racks.input_partitions if racks is not None else {},
            changelog_partitions=changelogs,
            partition_racks=racks.partition_racks if racks is not None else None,
            process_racks={pid: {m.member: m.rack for m in ms} for pid, ms in by_process.items()},
            all_tasks=all_tasks,
            num_standby_replicas=configs.num_standby_replicas,
        )
    probing = assign(clients, all_tasks, list(changelogs), configs, rack_aware)
    member_tasks: dict[str, list[TaskId]] = {}
    for pid, members in by_process.items():
        member_tasks.update(
            distribute_over_members(
                clients[pid].active, [m.member for m in members], {m.member: m.prev_active for m in members}
            )
        )
    revoking = hold_back_running(member_tasks, reports)
    leader = min(r.member for r in reports)
    return Assignment(
        generation=generation,
        leader=leader,
        members=member_tasks,
        clients={
            pid: {
                "active": sorted(s.active),
                "standby": sorted(s.standby - s.warmup),
                "warmup": sorted(s.warmup),
            }
            for pid, s in clients.items()
        },
        probing=probing,
        time_ms=int(time.time() * 1000),
        slots={r.member: list(r.slots) for r in reports},
        lags={
            pid: {t: n for t, n in lags.get(pid, {}).items() if t in s.active or t in s.standby}
            for pid, s in clients.items()
        },
        reports={r.member: r.time_ms for r in reports},
        revoking=revoking,
    )


def hold_back_running(
    member_tasks: dict[str, list[TaskId]], reports: list[Report]
) -> dict[str, list[TaskId]]:
    """Cooperative handover (KIP-429's rule: a partition is given out only once no member
    owns it): a task a member still runs goes to no one else in this generation.

    A task one member runs and the placement gives to another is *revoking*: taken out of
    the new owner's list (``member_tasks`` is changed in place) and returned as that
    member's to release; its new owner gets it in the follow-up generation, which the
    releasing member starts once it committed and closed the task. A task that two members
    claim to run (only after a member missed a generation) goes to no one and is released
    by neither: each drops it uncommitted, and the next generation places it.
    Returns the revoking tasks per member.
    """
    claims: dict[TaskId, list[str]] = {}
    for report in reports:
        for task in report.running:
            claims.setdefault(task, []).append(report.member)
    revoking: dict[str, list[TaskId]] = {}
    for task, members in sorted(claims.items()):
        owner = members[0] if len(members) == 1 else None
        if owner is not None and task in member_tasks.get(owner, []):
            continue  # it stays where it runs
        for tasks in member_tasks.values():
            if task in tasks:
                tasks.remove(task)
        if owner is not None:
            revoking.setdefault(owner, []).append(task)
    return revoking


def encode(value: Report | Assignment) -> bytes:
    return json.dumps(value.to_json(), sort_keys=True).encode()
