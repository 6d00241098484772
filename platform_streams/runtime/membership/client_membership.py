"""``ClientMembership``: this client's place in its application, beyond the consumer group.

One per :class:`KafkaStreams`. It holds what the group protocol cannot give us here:

* the client's stable identity and the lock on its state directory
  (:mod:`.process_identity`) -- the source of the workers' transactional ids;
* the control channel (:mod:`.control_channel`): heartbeats with the tasks each client
  runs, and SHUTDOWN_APPLICATION requests;
* the standby tasks (:mod:`platform_streams.runtime.restore.standby`) this client keeps, re-placed
  (:mod:`.placement`) whenever the published view or the local assignment changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.membership.control_channel import ControlChannel, control_topic_name
from platform_streams.runtime.membership.placement import standby_tasks_of
from platform_streams.runtime.membership.process_identity import ProcessIdentity
from platform_streams.runtime.restore.restore_ranges import RestoreRanges
from platform_streams.runtime.restore.standby import StandbyUpdater, stateful_tasks
from platform_streams.runtime.task_assignment.coordinator import AssignmentCoordinator
from platform_streams.runtime.task_assignment.protocol import members_topic_name
from platform_streams.state.private_files import app_state_dir
from platform_streams.topology.compiler import TopologyPlan
from platform_streams.topology.manifest import TOPOLOGY_KEY, topology_manifest

__all__ = ["ClientMembership", "grow_members_topic"]

log = logging.getLogger(__name__)


class ClientMembership:
    """Identity, control channel and standby tasks of one client (see the module docstring)."""

    def __init__(
        self,
        plan: TopologyPlan,
        config: StreamsConfig,
        *,
        local_active: Callable[[], Iterable[TaskId]],
        on_shutdown_request: Callable[[str], None],
    ) -> None:
        self.plan = plan
        self.config = config
        self._local_active = local_active
        self._on_shutdown_request = on_shutdown_request
        state_root = app_state_dir(Path(config.state_dir), config.application_id)
        self.identity = ProcessIdentity(config.application_id, state_root, config.group_instance_id)
        self.control_topic = control_topic_name(config.application_id)
        self.standbys: StandbyUpdater | None = None
        # under a streams group the broker places tasks and standbys (worker_streams_group.py):
        # how many is the group's config there, so any stateful topology may be given some
        classic = config.group_protocol == "classic"
        state_aware = config.task_assignor == "state_aware" and classic
        broker_placed = not classic and any(
            plan.changelog_topic(store) is not None for sub in plan.subtopologies for store in sub.stores
        )
        if (config.num_standby_replicas > 0 and classic) or state_aware or broker_placed:  # warm-ups too
            self.standbys = StandbyUpdater(plan, config, state_root)
        #: group_protocol="streams": per worker (each a member), the standby and warm-up tasks
        #: the broker gave it; this client keeps their union
        self._broker_standbys: dict[int, frozenset[TaskId]] = {}
        #: whether that updater was started, whether close() began (never started after it)
        self._updating, self._closed = False, False
        self._broker_lock = threading.Lock()
        self.channel: ControlChannel | None = None
        self._denied: BaseException | None = None
        #: close() runs from the error-shutdown thread and from the caller's close() alike
        self._closing = threading.RLock()
        #: changelog ranges written for committed input: read and written on the control topic
        self.restore_ranges = RestoreRanges(
            publish=self._send_record, caught_up=lambda: self.channel is None or self.channel.caught_up
        )
        #: state-aware placement (runtime/task_assignment), None under the range assignor
        self.coordinator: AssignmentCoordinator | None = None
        if state_aware:
            self.coordinator = AssignmentCoordinator(
                plan,
                config,
                self.process_id,
                state_root,
                publish=self._publish_record,
                standby_positions=self._standby_positions,
                on_assignment=self.replace_standbys,
            )
        self._stateful: list[TaskId] = []

    @property
    def process_id(self) -> str:
        return self.identity.process_id

    def transactional_id(self, worker_index: int) -> str | None:
        """The transactional.id of worker ``worker_index`` under exactly-once, else None."""
        return self.identity.transactional_id(worker_index) if self.config.exactly_once else None

    def start(self, partition_counts: Mapping[str, int]) -> None:
        """Lock the state directory, create the control topic, start tailing it (and standbys)."""
        self.identity.lock()
        try:
            with KafkaAdmin(self.config.admin_configs()) as admin:
                compact = {"cleanup.policy": "compact"}
                specs = [TopicSpec(self.control_topic, 1, self.config.replication_factor, compact)]
                if self.coordinator is not None:  # its partitions are the group's member slots
                    name, slots = members_topic_name(self.config.application_id), self.config.member_slots
                    specs.append(TopicSpec(name, slots, self.config.replication_factor, compact))
                created = admin.create_topics(specs)
                if self.coordinator is not None:
                    self.coordinator.slot_count = (
                        slots if created[name] == "created" else grow_members_topic(admin, name, slots)
                    )
            if self.coordinator is not None:
                self.coordinator.start(partition_counts)
            self._stateful = stateful_tasks(self.plan, self.config.application_id, partition_counts)
            self.channel = ControlChannel(
                self.config,
                self.process_id,
                local_tasks=self._local_tasks,
                on_shutdown_request=self._on_shutdown_request,
                on_members_changed=self.replace_standbys,
                on_assignment_record=self.coordinator.on_record if self.coordinator is not None else None,
                on_range_record=self.restore_ranges.on_record,
            )
            self.channel.start()
            # What this client runs, where the deploy gate (ops/deployed_topology.py) reads it
            manifest = topology_manifest(self.plan.topology, self.plan)
            self.channel.publish_record(TOPOLOGY_KEY, {**manifest, "process": self.process_id})
            # a streams group's updater starts with the first standby the broker gives: where
            # the group has none (the default) it runs no consumer and no thread
            if self.standbys is not None and self.config.group_protocol == "classic":
                self.standbys.start()
        except BaseException:
            self.close(leave=False)
            raise

    def _publish_record(self, key: str, value: dict[str, Any] | None) -> None:
        channel = self.channel  # read once: close() clears it from another thread
        if channel is None:
            if self._denied is not None:  # the broker refused it and the client is stopping
                return
            raise RuntimeError("the control channel is not running")
        channel.publish_record(key, value)

    def _send_record(self, key: str, value: dict[str, Any] | None) -> None:
        channel = self.channel  # read once: close() clears it from another thread
        if channel is not None:
            channel.send_record(key, value)

    def _standby_positions(self) -> Mapping[TaskId, Mapping[tuple[str, int], int]]:
        return self.standbys.positions() if self.standbys is not None else {}

    def _local_tasks(self) -> tuple[set[TaskId], set[TaskId]]:
        standby = self.standbys.standby_ids() if self.standbys is not None else set()
        return set(self._local_active()), standby

    def on_local_tasks_changed(self) -> None:
        """A worker's assignment changed: tell the others soon, re-place standbys now."""
        if self.channel is not None:
            self.channel.publish_soon()
        self.replace_standbys()

    def set_broker_standbys(self, worker_index: int, tasks: frozenset[TaskId]) -> None:
        """Under a streams group: the standby and warm-up tasks the broker gave one worker."""
        with self._broker_lock:
            if tasks:
                self._broker_standbys[worker_index] = tasks
            else:
                self._broker_standbys.pop(worker_index, None)
            if tasks and self.standbys is not None and not (self._updating or self._closed):
                self._updating = True
                self.standbys.start()
        self.replace_standbys()

    def replace_standbys(self) -> None:
        """Recompute which standby tasks this client keeps from the current view."""
        if self.standbys is None or self.channel is None:
            return
        if self.config.group_protocol != "classic":
            with self._broker_lock:
                given: set[TaskId] = set().union(*self._broker_standbys.values())
            self.standbys.set_desired(given - set(self._local_active()))
            return
        if self.coordinator is not None:
            self.standbys.set_desired(self.coordinator.standby_tasks() - set(self._local_active()))
            return
        desired = standby_tasks_of(
            self.process_id,
            self.channel.members(),
            self._stateful,
            self.config.num_standby_replicas,
            self._local_active(),
        )
        self.standbys.set_desired(desired)

    def denied(self) -> BaseException | None:
        """Why the broker refused the control channel (an ACL), None if it has not.

        Read once: the CLI asks from its thread while ``close`` clears the channel in another
        (``close`` sets ``_denied`` before it clears ``channel``)."""
        channel = self.channel
        return self._denied if channel is None else channel.denied

    def request_application_shutdown(self, reason: str) -> None:
        """SHUTDOWN_APPLICATION: ask every client (this one included) to shut down."""
        if self.channel is None:
            log.error("SHUTDOWN_APPLICATION requested before the control channel started: %s", reason)
            return
        self.channel.request_shutdown(reason)

    def close(self, *, leave: bool = True) -> None:
        """Stop standbys (checkpointed) and the channel (``leave``: tell the others now)."""
        with self._closing:
            try:
                with self._broker_lock:
                    self._closed = True
                if self.standbys is not None:
                    self.standbys.close()
                channel = self.channel
                if channel is not None:
                    channel.close(leave=leave)
                    self._denied = channel.denied  # still the reason the client stopped
                    self.channel = None
            finally:
                self.identity.unlock()


def grow_members_topic(admin: KafkaAdmin, name: str, slots: int) -> int:
    """Grow the existing members topic ``name`` to ``slots`` partitions if it has fewer;
    return its partition count.

    Growing needs CreatePartitions (a broker without it refuses at once): where it fails the topic
    keeps its count, which stays the most members a generation waits for (a warning says
    how to migrate). Nothing is ever read from the topic, so adding partitions loses
    nothing; the group rebalances once over the new count.
    """
    count = admin.partition_counts([name]).get(name) or slots
    if count >= slots:
        return count
    try:
        admin.create_partitions(name, slots, timeout=10.0)
    except Exception as exc:  # the smaller topic still works, for up to ``count`` members
        log.warning(
            "member_slots=%d, but %s has %d partitions and could not be grown (%s): a generation "
            "waits for the reports of at most %d members; with the application stopped, delete "
            "the topic (it holds no data) to have it re-created with %d (docs/scale-out.md)",
            slots,
            name,
            count,
            exc,
            count,
            slots,
        )
        return count
    log.info("grew %s from %d to %d partitions (member_slots)", name, count, slots)
    return slots
