"""A worker as a member of a streams group (``group_protocol="streams"``, KIP-1071).

The broker's group coordinator assigns the tasks; the worker runs exactly its active tasks
(its standby and warm-up tasks go to the client's standby updater, :mod:`..restore.standby`, and their
changelog positions back to the broker as task offsets) and changes them incrementally, as
``StreamThread`` does under the streams protocol: the
heartbeat thread (:class:`~..membership.streams_group_membership.StreamsGroupMembership`) only records
the broker's target; the worker, on its own thread between two loop iterations, commits and
closes the revoked tasks, starts the added ones (the cooperative handover's release and add
steps, :mod:`.worker_handover`), and only then reports the new set -- the broker gives a
revoked task to its new owner after that report, so two members never run one task.

The consumer never subscribes: it is ``assign()``-ed the tasks' input partitions, and reads
the committed offsets with a member-less OffsetFetch (the coordinator accepts those). Commits
name the member and its epoch (docs/streams-groups.md): OffsetCommit v9 at-least-once, the
member's group metadata in the transaction under exactly-once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from platform_streams.errors import StreamsError, TaskMigratedError, UnsupportedBrokerFeatureError
from platform_streams.kafka.streams_group import (
    CommitRefused,
    StreamsGroupClient,
    broker_supports_streams_groups,
    error_name,
)
from platform_streams.kafka.streams_group.member import Assignment, EndpointPartitions, TopologySpec
from platform_streams.kafka.streams_group.security import security_properties
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.membership.streams_group_membership import StreamsGroupMembership, topology_spec

if TYPE_CHECKING:
    from platform_streams.config import StreamsConfig
    from platform_streams.runtime.restore.standby import StandbyUpdater
    from platform_streams.runtime.tasks.task import StreamTask
    from platform_streams.topology.compiler import TopologyPlan

__all__ = ["StreamsGroupSettings", "StreamsGroupTasks", "streams_group_settings"]

log = logging.getLogger(__name__)

#: OffsetCommit answers meaning "this member no longer runs these tasks"
_MOVED_ON = frozenset(
    {"STALE_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH", "ILLEGAL_GENERATION"}
)
#: how often moving standby positions are reported (Kafka's task offset interval is a group
#: config the v0 heartbeat does not carry)
_OFFSETS_INTERVAL_S = 10.0


@dataclass(frozen=True)
class StreamsGroupSettings:
    """What every worker of a client sends when it joins (each worker is one member)."""

    topology: TopologySpec
    process_id: str
    endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    #: the broker's SHUTDOWN_APPLICATION status: called with who asked
    on_shutdown_request: Callable[[str], None] | None = None
    #: (worker index, its standby and warm-up tasks): the client keeps them
    #: (:meth:`~..membership.client_membership.ClientMembership.set_broker_standbys`)
    on_standby_tasks: Callable[[int, frozenset[TaskId]], None] | None = None


def _task_ids(tasks: frozenset[tuple[str, int]]) -> list[TaskId]:
    return sorted(TaskId(int(sub), partition) for sub, partition in tasks)


class StreamsGroupTasks:
    """The worker's side of a streams group (see the module docstring)."""

    if TYPE_CHECKING:  # the worker's attributes and methods this part uses
        name: str
        index: int
        config: StreamsConfig
        consumer: Any
        _standbys: StandbyUpdater | None

        @property
        def tasks(self) -> dict[TaskId, StreamTask]: ...

        def _commit_on_revocation(self) -> bool: ...
        def _release(self, task_ids: list[TaskId]) -> None: ...
        def _add(self, task_ids: list[TaskId]) -> None: ...
        def _abort_and_close_tasks(self) -> None: ...

    streams_group: StreamsGroupMembership | None = None
    _streams_settings: StreamsGroupSettings | None = None
    _kept_standbys: frozenset[TaskId] = frozenset()
    _offsets_reported: dict[tuple[str, int], int] | None = None
    _offsets_reported_at = 0.0
    _standbys_changed_at = 0.0

    def _join_streams_group(self, settings: StreamsGroupSettings) -> None:
        self.streams_group = StreamsGroupMembership(
            self.config.bootstrap_servers,
            self.config.application_id,
            settings.topology,
            process_id=settings.process_id,
            endpoint=settings.endpoint,
            client_tags=settings.client_tags,
            client_id=f"{self.config.effective_client_id}-StreamThread-{self.index + 1}",
            # the member authenticates as the worker's consumer does
            security=security_properties(self.config.consumer_configs(self.index)),
            on_shutdown_request=_shutdown_hook(settings),
        )
        self.streams_group.start()

    def _reconcile_streams_group(self) -> None:
        """Apply what the broker decided since the last look (on the worker's thread)."""
        group = self.streams_group
        assert group is not None
        if group.failure is not None:
            raise group.failure
        if group.take_lost() and self.tasks:
            log.warning(
                "%s: partitions lost (the streams group dropped this member); closing tasks uncommitted",
                self.name,
            )
            self._abort_and_close_tasks()
        change = group.take_change()
        if change is None:
            self._report_task_offsets()
            return
        target, revoked, _ = change
        leaving = [t for t in _task_ids(revoked.active) if t in self.tasks]
        if leaving:
            log.info("%s: the streams group moves %s away", self.name, [str(t) for t in leaving])
            if self._commit_on_revocation():  # else every task was aborted and closed
                self._release(leaving)
        starting = [t for t in _task_ids(target.active) if t not in self.tasks]
        if starting:
            log.info("%s: the streams group assigns %s", self.name, [str(t) for t in starting])
        self._add(starting)
        # standbys and warm-ups alike are standby tasks here, as StreamThread hands both to
        # TaskManager.handleAssignment as standbys; one moving to active was claimed by _add
        self._keep_standbys(frozenset(_task_ids(target.standby | target.warmup)))
        group.applied(Assignment(target.active, target.standby, target.warmup))
        self._report_task_offsets(force=True)

    def _keep_standbys(self, tasks: frozenset[TaskId]) -> None:
        settings = self._streams_settings
        if tasks == self._kept_standbys or settings is None or settings.on_standby_tasks is None:
            return
        self._kept_standbys = tasks
        self._standbys_changed_at = time.monotonic()
        if tasks:
            log.info("%s: the streams group gives standbys %s", self.name, [str(t) for t in sorted(tasks)])
        settings.on_standby_tasks(self.index, tasks)

    def _report_task_offsets(self, *, force: bool = False) -> None:
        """The changelog position of each standby and warm-up task of this member (the next
        offset to read, summed over its changelog partitions: Kafka's task offset sum from
        ``ProcessorStateManager.changelogOffsets``), in the next heartbeat: the broker
        ranks standby candidates by it and decides from it when a warm-up has caught up. Sent
        when the tasks change, once a new standby has a position, and then, if the positions
        moved, every ``_OFFSETS_INTERVAL_S`` (the updater's lock is not taken more often)."""
        group = self.streams_group
        if group is None or self._standbys is None or not self._kept_standbys:
            return
        now = time.monotonic()
        reported = self._offsets_reported or {}
        # a new standby not reported yet (still opening) is looked at again soon; one whose
        # changelog is empty has no position for a while: not every second forever
        complete = all((str(t.subtopology), t.partition) in reported for t in self._kept_standbys)
        soon = not complete and now - self._standbys_changed_at < _OFFSETS_INTERVAL_S * 3
        if not force and now - self._offsets_reported_at < (1.0 if soon else _OFFSETS_INTERVAL_S):
            return
        self._offsets_reported_at = now
        positions = self._standbys.positions()
        offsets = {
            (str(t.subtopology), t.partition): sum(offset + 1 for offset in positions[t].values())
            for t in self._kept_standbys
            if positions.get(t)
        }
        if offsets != self._offsets_reported:
            self._offsets_reported = offsets
            group.member.report_task_offsets(offsets)

    def streams_group_view(self) -> dict[str, Any] | None:
        """This worker's streams-group membership as ``/state`` shows it (None: classic)."""
        group = self.streams_group
        return None if group is None else group.view()

    def streams_group_endpoints(self) -> tuple[int, dict[tuple[str, int], EndpointPartitions]] | None:
        """The broker's latest endpoint information as this worker's member heard it (None:
        classic, or not heard yet)."""
        group = self.streams_group
        return None if group is None else group.endpoints

    def _streams_group_metadata(self) -> bytes:
        assert self.streams_group is not None
        return self.streams_group.group_metadata()

    def _commit_streams_group(self, offsets: dict[tuple[str, int], int]) -> None:
        """OffsetCommit naming the member. A commit refused for its epoch means the broker
        moved on: once more with the epoch a heartbeat brought meanwhile (the member still
        runs these tasks: the worker applies every change before it commits), else the
        tasks migrated -- as librdkafka's UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION mean."""
        group = self.streams_group
        assert group is not None
        epoch = group.member_epoch
        try:
            group.commit(offsets)
        except CommitRefused as exc:
            reason = error_name(exc.error_code)
            if reason == "STALE_MEMBER_EPOCH" and group.member_epoch not in (epoch, 0, -1):
                try:
                    group.commit(offsets)
                    return
                except CommitRefused as again:
                    exc, reason = again, error_name(again.error_code)
            if reason in _MOVED_ON:
                raise TaskMigratedError(
                    f"offset commit: the streams group moved on without this member ({exc})"
                ) from exc
            raise

    def _leave_streams_group(self) -> None:
        """After the final commit. A failing worker stays a member until the client decided
        what its failure means (:meth:`leave_streams_group`)."""
        if getattr(self, "failure", None) is None:
            self.leave_streams_group()

    def leave_streams_group(self, *, shutdown_application: bool = False) -> None:
        """Leave the group (``shutdown_application``: first ask every member to stop)."""
        group, self.streams_group = self.streams_group, None
        self._keep_standbys(frozenset())
        if group is not None:
            if shutdown_application:
                group.request_shutdown()
            group.close(leave=True)


def _check_group_access(config: StreamsConfig, security: dict[str, str]) -> None:
    """Refuse at start, naming the ACL, a principal the broker will not let use the group (an
    authenticated connection only: a PLAINTEXT cluster has no principals to tell apart)."""
    client = StreamsGroupClient(config.bootstrap_servers, config.application_id, security=security)
    try:
        problem = client.group_access_problem()
    finally:
        client.close()
    if problem:
        raise StreamsError(f"group_protocol='streams': GROUP_AUTHORIZATION_FAILED: {problem}")


def _shutdown_hook(settings: StreamsGroupSettings) -> Callable[[], None] | None:
    hook = settings.on_shutdown_request
    if hook is None:
        return None
    return lambda: hook("a member of the streams group (the broker's SHUTDOWN_APPLICATION status)")


def streams_group_settings(
    plan: TopologyPlan,
    config: StreamsConfig,
    process_id: str,
    on_shutdown_request: Callable[[str], None] | None = None,
    on_standby_tasks: Callable[[int, frozenset[TaskId]], None] | None = None,
) -> StreamsGroupSettings | None:
    """The workers' settings under ``group_protocol="streams"`` (None under "classic").

    Refused, with the reason, on a broker without streams groups (no StreamsGroupHeartbeat in
    ApiVersions: the embedded broker, Kafka before 4.2 or with ``streams.version`` 0): Kafka
    Streams fails the same way rather than fall back to another protocol the user did not
    choose. The probe connects with the consumer's security settings (TLS, SASL PLAIN/SCRAM),
    so wrong credentials or an unsupported mechanism are refused here, before any worker runs.
    """
    if config.group_protocol != "streams":
        return None
    security = security_properties(config.consumer_configs(0))
    if not broker_supports_streams_groups(config.bootstrap_servers, security=security):
        raise UnsupportedBrokerFeatureError(
            "group_protocol='streams': the broker does not support streams groups (no "
            "StreamsGroupHeartbeat; Apache Kafka 4.2+ needed); use group_protocol='classic'"
        )
    if security.get("security.protocol", "PLAINTEXT").upper() != "PLAINTEXT":
        _check_group_access(config, security)
    if config.num_standby_replicas:
        log.warning(
            "num_standby_replicas=%d is ignored under group_protocol='streams': standby replicas "
            "are the streams group's config on the broker (streams.num.standby.replicas; "
            "kafka-configs.sh --entity-type groups or an admin client sets it)",
            config.num_standby_replicas,
        )
    endpoint = None
    if config.application_server:
        host, _, port = config.application_server.rpartition(":")
        endpoint = (host, int(port))
    return StreamsGroupSettings(
        topology=topology_spec(plan, config.application_id, config.replication_factor),
        process_id=process_id,
        endpoint=endpoint,
        client_tags=dict(config.client_tags),
        on_shutdown_request=on_shutdown_request,
        on_standby_tasks=on_standby_tasks,
    )
