"""``AssignmentCoordinator``: one per client, runs the assignment protocol for its workers.

See :mod:`.protocol` for the protocol and its safety argument. The coordinator keeps
what the control channel reads (reports and assignments), publishes this client's
reports, lets a worker that is the leader of its generation compute and publish the
placement, and tells the standby updater which standby and warm-up tasks this client
keeps. It also records what monitoring shows: the tasks per role, the lags the leader
saw, and how long each member waited for its generation's assignment.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.kafka import TopicPartition
from platform_streams.kafka.admin import KafkaAdmin
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.membership.control_channel import control_topic_name
from platform_streams.runtime.task_assignment.client_state import AssignmentConfigs
from platform_streams.runtime.task_assignment.protocol import (
    ASSIGNMENT_KEY,
    EPOCH_KEY,
    MEMBER_SLOTS,
    REPORT_PREFIX,
    Assignment,
    Positions,
    Report,
    compute_assignment,
    group_generation,
    members_topic_name,
    missing_slots,
    reported_members,
    tp_key,
)
from platform_streams.runtime.task_assignment.rack_aware import RackInputs
from platform_streams.runtime.tasks.task import store_changelogs
from platform_streams.state.checkpoint import CHECKPOINT_FILE_NAME, CheckpointFormatError, OffsetCheckpoint
from platform_streams.topology.compiler import TopologyPlan

__all__ = ["AssignmentCoordinator", "Pending", "slot_ranges"]

log = logging.getLogger(__name__)

#: reports written longer than this before a member joined belong to an earlier group
_REPORT_HORIZON_MS = 60_000
#: a waiting member publishes its report again this often
_REMIND_S = 5.0


class Pending:
    """A member waiting for its generation's assignment (one per join: per ``on_assign``)."""

    def __init__(self, report: Report, instance_id: str | None) -> None:
        self.report = report
        self.generation = report.generation
        self.member = report.member
        self.slots = sorted(report.slots)
        self.instance_id = instance_id
        self.joined = time.monotonic()
        self.joined_ms = int(time.time() * 1000)
        #: when the report is published again (a reader may have missed it: docs/brokers.md)
        self.next_reminder = self.joined + _REMIND_S
        #: set by the worker: when it gives up on this generation and starts a new one
        self.rejoin_at: float | None = None
        self.next_warning: float | None = None
        #: the generation's final assignment does not name this member: it must rejoin
        self.unplaced = False
        #: the worker started a new generation for this one
        self.resubscribed = False
        #: cooperative rebalancing: what the final assignment tells this member to release
        self.revoking: list[TaskId] = []
        #: the members topic's partition count was read again after the join
        self.slot_count_checked = False


class AssignmentCoordinator:
    """Reports, leader election and assignments of one client (see the module docstring)."""

    def __init__(
        self,
        plan: TopologyPlan,
        config: StreamsConfig,
        process_id: str,
        state_root: Path,
        *,
        publish: Callable[[str, dict[str, Any] | None], None],
        standby_positions: Callable[[], Mapping[TaskId, Mapping[tuple[str, int], int]]],
        on_assignment: Callable[[], None],
    ) -> None:
        self.plan = plan
        self.config = config
        self.process_id = process_id
        self.state_root = state_root
        self._publish = publish
        self._standby_positions = standby_positions
        self._on_assignment = on_assignment
        self._lock = threading.Lock()
        self._reports: dict[str, Report] = {}
        #: per generation, the assignments read since the last epoch record, in read order
        self._assignments: dict[int, list[Assignment]] = {}
        #: the generations this client led since the last epoch record
        self._published: set[int] = set()
        #: the last assignment that named this client (its standbys and warm-ups come from it)
        self.current: Assignment | None = None
        self.configs = AssignmentConfigs(
            acceptable_recovery_lag=config.acceptable_recovery_lag,
            max_warmup_replicas=config.max_warmup_replicas,
            num_standby_replicas=config.num_standby_replicas,
            probing_rebalance_interval_ms=config.probing_rebalance_interval_ms,
            rack_aware_assignment_tags=tuple(config.rack_aware_assignment_tags or ["rack"]),
            rack_aware_assignment_strategy=config.rack_aware_assignment_strategy,
            rack_aware_assignment_traffic_cost=config.rack_aware_assignment_traffic_cost,
            rack_aware_assignment_non_overlap_cost=config.rack_aware_assignment_non_overlap_cost,
        )
        self.tags = dict(config.client_tags)
        rack = config.consumer_configs().get("client.rack")
        #: this client's client.rack, reported for rack-aware active placement
        self.rack = str(rack) if rack else None
        if rack:
            self.tags.setdefault("rack", str(rack))
        self.all_tasks: list[TaskId] = []
        self.changelogs: dict[TaskId, list[str]] = {}
        #: seconds each generation's assignment took to reach a member of this client
        self.rebalance_latencies: list[float] = []
        self.rebalances = 0
        #: group re-creations (a repair's epoch record, this client's own included) read so far
        self.recreations = 0
        self.members_topic = members_topic_name(config.application_id)
        self.control_topic = control_topic_name(config.application_id)
        #: the members topic's partition count as last read: set when the topic is created,
        #: read again before a member may lead (:meth:`_check_slot_count`)
        self.slot_count = MEMBER_SLOTS
        self._slotless_warned = False
        self._probed: set[int] = set()
        self.probing_rebalances = 0

    def start(self, partition_counts: Mapping[str, int]) -> None:
        """Learn the application's tasks and their changelog partitions."""
        app = self.config.application_id
        tasks: list[TaskId] = []
        changelogs: dict[TaskId, list[str]] = {}
        for sub in self.plan.subtopologies:
            counts = [partition_counts.get(self.plan.physical_topic(t, app), 0) for t in sub.source_topics]
            topics = sorted(store_changelogs(self.plan, sub, app).values())
            for p in range(max(counts, default=0)):
                task = TaskId(sub.id, p)
                tasks.append(task)
                if topics:
                    changelogs[task] = [tp_key(t, p) for t in topics]
        self.all_tasks, self.changelogs = tasks, changelogs

    # -- what the control channel reads ------------------------------------------------------

    def on_record(self, key: str, value: Mapping[str, Any] | None) -> None:
        """A report or an assignment was read from the control topic."""
        try:
            if key.startswith(REPORT_PREFIX):
                member = key[len(REPORT_PREFIX) :]
                with self._lock:
                    if value is None:
                        self._reports.pop(member, None)
                    else:
                        self._reports[member] = Report.from_json(value)
            elif key == EPOCH_KEY and value is not None:
                log.info("control topic: the group was re-created at %s; earlier assignments void", value)
                with self._lock:
                    self._forget_group()
                    self.recreations += 1
            elif key == ASSIGNMENT_KEY and value is not None:
                assignment = Assignment.from_json(value)
                with self._lock:
                    self._assignments.setdefault(assignment.generation, []).append(assignment)
                    if self.process_id in assignment.clients and (
                        self.current is None or assignment.time_ms >= self.current.time_ms
                    ):
                        self.current = assignment
                self._on_assignment()
        except (KeyError, ValueError, TypeError) as exc:
            log.warning("control topic: ignoring malformed %s record: %s", key, exc)

    def _forget_group(self) -> None:
        """The group was deleted and re-created: its generation numbers start again, so every
        report, assignment and lead of the old group is void; caller holds the lock."""
        self._reports.clear()
        self._assignments.clear()
        self._published.clear()

    def group_recreated(self) -> None:
        """Called by the worker whose repair deleted the group (before anyone can join the new
        one: a join takes seconds, this write milliseconds): tell every client, on the
        topic the assignments travel on, that what came before belongs to the old group."""
        with self._lock:
            self._forget_group()
        self._publish(EPOCH_KEY, {"time": int(time.time() * 1000), "by": self.process_id})

    # -- a worker joins a generation -----------------------------------------------------------

    def join(
        self,
        consumer: Any,
        slots: list[int],
        prev_active: list[TaskId],
        instance_id: str | None = None,
        running: list[TaskId] | None = None,
    ) -> Pending:
        """Publish this member's report for the generation it just joined."""
        generation, member = group_generation(consumer.consumer_group_metadata())
        slot_count = self.slot_count
        if not slots and not self._slotless_warned:
            self._slotless_warned = True
            log.warning(
                "member %s of generation %d got no member slot: the group has more members than the "
                "%d partitions of %s, so a generation looks complete without this member's report "
                "and may be placed without it (it then starts another generation); raise member_slots "
                "(docs/scale-out.md, \"Membership\")",
                member,
                generation,
                slot_count,
                self.members_topic,
            )
        report = Report(
            generation=generation,
            member=member,
            process=self.process_id,
            slots=tuple(sorted(slots)),
            time_ms=int(time.time() * 1000),
            positions=self.local_positions(),
            prev_active=frozenset(prev_active),
            tags=self.tags,
            running=frozenset(running or ()),
            rack=self.rack,
            slot_count=slot_count,
        )
        self._publish(REPORT_PREFIX + member, report.to_json())
        with self._lock:
            self._reports[member] = report
        self.rebalances += 1
        log.info(
            "member %s joined generation %d (slots %s); waiting for its assignment", member, generation, slots
        )
        return Pending(report, instance_id)

    def assignment_for(
        self, pending: Pending, consumer: Any, *, partial: bool = False
    ) -> list[TaskId] | None:
        """The tasks of ``pending``'s member in its generation, once published; the leader
        computes and publishes the assignment here.

        The first assignment of the generation on the control topic (one partition: every
        client reads the same order) since the last epoch record is final: nobody leads the
        generation again, a member finds its tasks in it by member id (a static member that
        rejoined without a rebalance, by its slots), and a member it does not name is marked
        ``unplaced`` (the worker starts a new generation). Until it exists, the leader waits
        for the reports of every member slot; with ``partial`` (the worker waited longer
        than a member needs to report) the lowest member that reported places the tasks
        over the members that reported. A member that never reports -- one the broker kept
        in the group after it died, or whose report the broker lost -- would otherwise hold
        every other member without tasks for as long as the generation lasts (seen in the
        60-minute soak run, docs/soak/README.md).
        """
        with self._lock:
            final = next(iter(self._assignments.get(pending.generation, [])), None)
        if final is None and not pending.slot_count_checked:
            self._check_slot_count(pending, consumer)
        if final is not None:
            tasks = final.tasks_of(pending.member, pending.slots, pending.instance_id)
            if tasks is None:
                pending.unplaced = True
                return None
            pending.revoking = final.revoking_of(pending.member, pending.slots, pending.instance_id)
            self.rebalance_latencies.append(time.monotonic() - pending.joined)
            del self.rebalance_latencies[:-100]
            return tasks
        members = self._reported(pending)
        missing = missing_slots(members)
        if missing and not partial:
            return None
        if min((r.member for r in members), default=None) != pending.member:
            return None
        if pending.generation not in self._published:
            if missing:
                log.warning(
                    "leader of generation %d: member slots %s have no report %.0fs after the rebalance "
                    "(a member the broker keeps in the group without it running, or a lost report): "
                    "placing the tasks over the %d members that reported",
                    pending.generation,
                    slot_ranges(missing),
                    time.monotonic() - pending.joined,
                    len(members),
                )
            self._lead(pending.generation, members, consumer)
        return None

    def _check_slot_count(self, pending: Pending, consumer: Any) -> None:
        """Read the members topic's partition count again, once per join and before this
        member can lead; if it differs from the count ``pending``'s report carries (another
        client grew the topic), publish the report again with it.

        Read after the group assignor read it, it is the count the slots were given out of,
        so a leader never judges completeness by an older count of its own. Not read in
        the join itself: that runs in librdkafka's rebalance callback, and a blocking client
        call nested there breaks confluent-kafka's per-thread call state (the process
        aborts: ``CallState_get: Assertion `cs != NULL' failed``).
        """
        pending.slot_count_checked = True
        try:
            meta = consumer.list_topics(self.members_topic, timeout=5.0)
            count = len(meta.topics[self.members_topic].partitions)
        except Exception as exc:  # the count the report carries still bounds the slots
            log.debug("partitions of %s unknown (%s)", self.members_topic, exc)
            return
        if count <= 0:
            return
        self.slot_count = count
        if count == pending.report.slot_count:
            return
        report = dataclasses.replace(pending.report, slot_count=count)
        pending.report = report
        self._publish(REPORT_PREFIX + report.member, report.to_json())
        with self._lock:
            stored = self._reports.get(report.member)
            if stored is not None and stored.generation == report.generation:
                self._reports[report.member] = report

    def resubscribe(self, current: Sequence[str], subscribe: Callable[[list[str]], None]) -> None:
        """Start a new generation: a changed subscription makes the group rebalance (the
        control topic toggled in or out of the consumer's ``current`` subscription; its
        partition is never read). A static member's close and rejoin would not rebalance on
        Kafka."""
        topics = [self.members_topic] + ([] if self.control_topic in current else [self.control_topic])
        subscribe(topics)

    def remind(self, pending: Pending) -> None:
        """Publish ``pending``'s report again every few seconds while it waits: a broker that
        lets a fetch skip a record (docs/brokers.md, two producers on one partition) can hide
        a report from the leader, and then nobody would ever place the generation."""
        now = time.monotonic()
        if now < pending.next_reminder:
            return
        pending.next_reminder = now + _REMIND_S
        self._publish(REPORT_PREFIX + pending.member, pending.report.to_json())

    def missing_slots(self, pending: Pending) -> list[int]:
        """The member slots of ``pending``'s generation that no report claims yet."""
        return missing_slots(self._reported(pending))

    def _reported(self, pending: Pending) -> list[Report]:
        """The members that reported in ``pending``'s generation (within the report horizon)."""
        with self._lock:
            reports = list(self._reports.values())
        return reported_members(reports, pending.generation, pending.joined_ms - _REPORT_HORIZON_MS)

    def maybe_probe(
        self, member: str, subscribed: Sequence[str], subscribe: Callable[[list[str]], None]
    ) -> None:
        """The leader starts a probing rebalance ``probing_rebalance_interval_ms`` after an
        assignment that left warm-ups behind: a changed subscription makes the group
        rebalance (toggling the control topic in and out of it; its partition is never read)."""
        current = self.current
        if current is None or not current.probing or current.leader != member:
            return
        if current.generation in self._probed:
            return
        age_ms = time.time() * 1000 - current.time_ms
        if age_ms < self.configs.probing_rebalance_interval_ms:
            return
        self._probed.add(current.generation)
        log.info("probing rebalance after generation %d: warm-ups may have caught up", current.generation)
        self.probing_rebalances += 1
        self.resubscribe(subscribed, subscribe)

    def _lead(self, generation: int, members: list[Report], consumer: Any) -> None:
        ends = self._end_offsets(consumer)
        racks = self._rack_inputs() if self.configs.rack_aware_assignment_strategy != "none" else None
        assignment = compute_assignment(
            generation, members, self.all_tasks, self.changelogs, ends, self.configs, self.current, racks
        )
        self._publish(ASSIGNMENT_KEY, assignment.to_json())
        self._published.add(generation)
        log.info(
            "leader of generation %d: %d members, %d tasks placed%s",
            generation,
            len(members),
            len(self.all_tasks),
            " (probing rebalance needed: warm-ups)" if assignment.probing else "",
        )

    def _rack_inputs(self) -> RackInputs:
        """Each task's input partitions and the racks of their replicas (and, for the
        standbys' check, of the changelogs'), described by the cluster; unknown racks
        (the describe failed) turn the rack-aware placement off for this generation."""
        inputs = {
            task: [tp_key(tp.topic, tp.partition) for tp in self.partitions_of([task])]
            for task in self.all_tasks
        }
        every = (*inputs.values(), *self.changelogs.values())
        topics = {key.rpartition("/")[0] for tps in every for key in tps}
        try:
            with KafkaAdmin(self.config.admin_configs(), request_timeout=5.0) as admin:
                described = admin.partition_racks(sorted(topics), timeout=5.0)
        except Exception as exc:  # the placement is still valid without racks
            log.warning("rack-aware assignment off for this generation: describe topics failed: %s", exc)
            return RackInputs(inputs, None)
        return RackInputs(inputs, {tp_key(t, p): racks for (t, p), racks in described.items()})

    def _end_offsets(self, consumer: Any) -> dict[str, int]:
        ends: dict[str, int] = {}
        for tps in self.changelogs.values():
            for key in tps:
                topic, _, part = key.rpartition("/")
                try:
                    _low, high = consumer.get_watermark_offsets(TopicPartition(topic, int(part)), timeout=5.0)
                except Exception as exc:  # the reported positions still bound the lags
                    log.warning("end offset of %s unknown (%s)", key, exc)
                    continue
                ends[key] = int(high)
        return ends

    # -- this client's state -----------------------------------------------------------------

    def local_positions(self) -> dict[TaskId, Positions]:
        """Per stateful task, the position of every changelog partition this client has state for."""
        live = self._standby_positions()
        out: dict[TaskId, Positions] = {}
        for task in self.changelogs:
            offsets = live.get(task)
            if offsets is None:
                try:
                    offsets = OffsetCheckpoint(self.state_root / str(task) / CHECKPOINT_FILE_NAME).read()
                except (CheckpointFormatError, OSError):
                    offsets = {}
            if offsets:
                out[task] = {tp_key(t, p): o + 1 for (t, p), o in offsets.items()}
        return out

    def standby_tasks(self) -> set[TaskId]:
        """The standby and warm-up tasks the latest assignment gives this client."""
        current = self.current
        if current is None:
            return set()
        return current.role_of(self.process_id, "standby") | current.role_of(self.process_id, "warmup")

    def roles(self) -> dict[str, set[TaskId]]:
        """This client's tasks by role in the latest assignment (metrics, /state)."""
        current = self.current
        return {
            role: current.role_of(self.process_id, role) if current is not None else set()
            for role in ("active", "standby", "warmup")
        }

    def task_view(self) -> dict[str, dict[str, Any]]:
        """Per task this client holds: its role and the lag the leader saw (``/state``)."""
        current = self.current
        lags = current.lags.get(self.process_id, {}) if current is not None else {}
        return {
            str(task): {"role": role, "lag_at_assignment": lags.get(task)}
            for role, tasks in self.roles().items()
            for task in sorted(tasks)
        }

    def partitions_of(self, tasks: list[TaskId]) -> list[TopicPartition]:
        """The input partitions of ``tasks`` (all of a sub-topology's sources: co-partitioned)."""
        app = self.config.application_id
        return [
            TopicPartition(self.plan.physical_topic(t, app), task.partition)
            for task in tasks
            for t in self.plan.subtopologies[task.subtopology].source_topics
        ]


def slot_ranges(slots: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2, 5`` (log lines)."""
    parts: list[str] = []
    for slot in slots:
        if parts and slot == int(parts[-1].rpartition("-")[2]) + 1:
            parts[-1] = f"{parts[-1].partition('-')[0]}-{slot}"
        else:
            parts.append(str(slot))
    return ", ".join(parts)
