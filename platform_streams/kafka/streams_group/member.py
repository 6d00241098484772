"""One member of a streams group: the StreamsGroupHeartbeat state machine (KIP-1071).

What a Kafka Streams client sends (``StreamsMembershipManager``, ``StreamsGroupHeartbeatRequestManager``):
the topology, process id, endpoint and client tags when it joins (epoch 0) and whenever they
change; the tasks it owns when they change; -1 to leave. What it gets back: its member epoch,
the tasks it may own (active, standby, warm-up; absent when unchanged), status codes, the
heartbeat interval and the endpoints' partitions for interactive queries.

The assignment is incremental as in KIP-848: a task the broker takes away is missing from the
returned tasks, and the broker gives it to another member only after this one reports it no
longer owns it. So a caller revokes what is no longer returned, starts what is new, and then
reports the returned set as owned (:meth:`StreamsMember.acknowledge`).

Types here are plain Python (frozensets of ``(subtopology_id, partition)``); kio's generated
classes stay inside this package.
"""

from __future__ import annotations

import datetime
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.streams_group_heartbeat.v0 import request as hb
from kio.schema.streams_group_heartbeat.v0.response import (
    EndpointToPartitions,
    StreamsGroupHeartbeatResponse,
    TopicPartition,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i16, i32, i32Timedelta, i64, u16

from platform_streams.errors import BrokerError
from platform_streams.kafka.streams_group.client import StreamsGroupClient, error_name

__all__ = [
    "STATUS_NAMES",
    "Assignment",
    "EndpointPartitions",
    "HeartbeatOutcome",
    "InternalTopicSpec",
    "StreamsGroupRefused",
    "StreamsMember",
    "SubtopologySpec",
    "TaskSet",
    "TopologySpec",
]

TaskSet = frozenset[tuple[str, int]]

#: StreamsGroupHeartbeatResponse.Status codes (Kafka's clients module)
STATUS_NAMES = {
    0: "STALE_TOPOLOGY",
    1: "MISSING_SOURCE_TOPICS",
    2: "INCORRECTLY_PARTITIONED_TOPICS",
    3: "MISSING_INTERNAL_TOPICS",
    4: "SHUTDOWN_APPLICATION",
    5: "ASSIGNMENT_DELAYED",
}
#: the member is out of the group and must join again with epoch 0 (its tasks are lost)
_REJOIN = {"FENCED_MEMBER_EPOCH", "UNKNOWN_MEMBER_ID"}
#: a heartbeat that changed nothing: try again at the next interval
_RETRY = {"COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"}


#: errors about the topology: the group was started with another one
_TOPOLOGY_ERRORS = {"INVALID_REQUEST", "STREAMS_INVALID_TOPOLOGY", "STREAMS_INVALID_TOPOLOGY_EPOCH"}
_TOPOLOGY_HINT = (
    "; the group keeps the topology it was first given: another version of the application "
    "(or one describing its internal topics differently) is running in this group"
)


class StreamsGroupRefused(BrokerError):
    """A heartbeat error that retrying cannot fix (a different topology, no authorization, an
    invalid request); ``error`` is Kafka's error name."""

    def __init__(self, message: str, error: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class InternalTopicSpec:
    """A repartition or changelog topic; ``partitions`` 0: derived by the broker."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SubtopologySpec:
    id: str
    source_topics: tuple[str, ...] = ()
    repartition_sources: tuple[InternalTopicSpec, ...] = ()
    repartition_sinks: tuple[str, ...] = ()
    changelogs: tuple[InternalTopicSpec, ...] = ()
    #: topic names that must be co-partitioned (source or repartition-source topics)
    copartition_groups: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class TopologySpec:
    epoch: int
    subtopologies: tuple[SubtopologySpec, ...]


@dataclass(frozen=True)
class Assignment:
    active: TaskSet = frozenset()
    standby: TaskSet = frozenset()
    warmup: TaskSet = frozenset()


@dataclass(frozen=True)
class EndpointPartitions:
    """The source partitions (``(topic, partition)``, repartition topics included) of the
    active and standby tasks of every member behind one endpoint: the broker's
    ``EndpointToPartitionsManager`` lists a task as its sub-topology's source topics at the
    task's partition, which is how interactive queries find a key's hosts."""

    active: frozenset[tuple[str, int]] = frozenset()
    standby: frozenset[tuple[str, int]] = frozenset()


@dataclass
class HeartbeatOutcome:
    """What one heartbeat said: the new epoch, the tasks (None: unchanged), the statuses."""

    member_epoch: int
    interval_s: float
    assignment: Assignment | None
    statuses: list[tuple[str, str]] = field(default_factory=list)
    #: the member was fenced or forgotten: its tasks are lost, it joins again
    rejoined: bool = False
    #: endpoint (host, port) -> its partitions, for interactive queries (None: unchanged)
    endpoints: dict[tuple[str, int], EndpointPartitions] | None = None
    #: the broker's endpoint-information epoch the endpoints belong to
    endpoints_epoch: int = 0


def _task_ids(tasks: TaskSet) -> tuple[hb.TaskIds, ...]:
    by_sub: dict[str, list[int]] = {}
    for sub, partition in sorted(tasks):
        by_sub.setdefault(sub, []).append(partition)
    return tuple(
        hb.TaskIds(subtopology_id=s, partitions=tuple(i32(p) for p in ps)) for s, ps in by_sub.items()
    )


def _from_task_ids(tasks: Iterable[object] | None) -> TaskSet:
    return frozenset((t.subtopology_id, int(p)) for t in tasks or () for p in t.partitions)  # type: ignore[attr-defined]


def _topic_info(spec: InternalTopicSpec) -> hb.TopicInfo:
    return hb.TopicInfo(
        name=TopicName(spec.name),
        partitions=i32(spec.partitions),
        replication_factor=i16(spec.replication_factor),
        topic_configs=tuple(hb.KeyValue(key=k, value=v) for k, v in spec.configs),
    )


def _subtopology(sub: SubtopologySpec) -> hb.Subtopology:
    sources = sorted(sub.source_topics)
    repartition = sorted(sub.repartition_sources, key=lambda t: t.name)
    groups = []
    for group in sub.copartition_groups:
        groups.append(
            hb.CopartitionGroup(
                source_topics=tuple(i16(sources.index(t)) for t in group if t in sources),
                repartition_source_topics=tuple(i16(i) for i, r in enumerate(repartition) if r.name in group),
            )
        )
    return hb.Subtopology(
        subtopology_id=sub.id,
        source_topics=tuple(TopicName(t) for t in sources),
        state_changelog_topics=tuple(_topic_info(c) for c in sorted(sub.changelogs, key=lambda t: t.name)),
        repartition_sink_topics=tuple(TopicName(t) for t in sorted(sub.repartition_sinks)),
        repartition_source_topics=tuple(_topic_info(r) for r in repartition),
        copartition_groups=tuple(groups),
    )


class StreamsMember:
    """The heartbeat protocol of one member (thread-safe: one heartbeat at a time)."""

    def __init__(
        self,
        client: StreamsGroupClient,
        topology: TopologySpec,
        *,
        process_id: str,
        endpoint: tuple[str, int] | None = None,
        client_tags: Mapping[str, str] | None = None,
        rebalance_timeout_ms: int = 300_000,
        member_id: str | None = None,
    ) -> None:
        self.client = client
        self.member_id = member_id or str(uuid.uuid4())
        self.member_epoch = 0
        self.process_id = process_id
        self._topology = hb.Topology(
            epoch=i32(topology.epoch), subtopologies=tuple(_subtopology(s) for s in topology.subtopologies)
        )
        self._endpoint = endpoint
        self._client_tags = dict(client_tags or {})
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._endpoint_epoch = 0
        self._owned: Assignment = Assignment()
        self._owned_sent: Assignment | None = None
        self._task_offsets: dict[tuple[str, int], int] | None = None
        self._shutdown_requested = False
        #: a heartbeat carrying the SHUTDOWN_APPLICATION flag was answered
        self.shutdown_sent = False
        self._lock = threading.Lock()

    @property
    def owned(self) -> Assignment:
        return self._owned

    def acknowledge(self, owned: Assignment) -> None:
        """The tasks this member now owns; sent with the next heartbeat."""
        self._owned = owned

    def report_task_offsets(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Changelog offsets of the tasks with state (the broker's warm-up placement reads them)."""
        self._task_offsets = dict(offsets)

    def request_shutdown(self) -> None:
        """SHUTDOWN_APPLICATION: ask every member of the group to stop."""
        self._shutdown_requested = True

    @property
    def shutdown_requested(self) -> bool:
        return self._shutdown_requested

    def heartbeat(self) -> HeartbeatOutcome:
        with self._lock:
            joining = self.member_epoch == 0
            owned_changed = joining or self._owned != self._owned_sent
            endpoint = self._endpoint
            offsets, self._task_offsets = self._task_offsets, None
            request = hb.StreamsGroupHeartbeatRequest(
                group_id=GroupId(self.client.group_id),
                member_id=self.member_id,
                member_epoch=i32(self.member_epoch),
                endpoint_information_epoch=i32(self._endpoint_epoch),
                rebalance_timeout=i32Timedelta.parse(
                    datetime.timedelta(milliseconds=self._rebalance_timeout_ms if joining else -1)
                ),
                topology=self._topology if joining else None,
                active_tasks=_task_ids(self._owned.active) if owned_changed else None,
                standby_tasks=_task_ids(self._owned.standby) if owned_changed else None,
                warmup_tasks=_task_ids(self._owned.warmup) if owned_changed else None,
                process_id=self.process_id if joining else None,
                user_endpoint=hb.Endpoint(host=endpoint[0], port=u16(endpoint[1]))
                if joining and endpoint
                else None,
                client_tags=tuple(hb.KeyValue(key=k, value=v) for k, v in sorted(self._client_tags.items()))
                if joining
                else None,
                task_offsets=_offsets(offsets) if offsets is not None else None,
                task_end_offsets=None,
                shutdown_application=self._shutdown_requested,
            )
            sent_owned = self._owned
            response = self.client.heartbeat(request)
            return self._outcome(response, owned_changed, sent_owned)

    def _outcome(
        self, response: StreamsGroupHeartbeatResponse, owned_changed: bool, sent_owned: Assignment
    ) -> HeartbeatOutcome:
        error = error_name(response.error_code)
        interval_s = max(0.05, response.heartbeat_interval.total_seconds()) if error == "NONE" else 1.0
        if error in _REJOIN:
            self.member_epoch = 0
            self._owned = Assignment()
            self._owned_sent = None
            return HeartbeatOutcome(0, 0.0, Assignment(), rejoined=True)
        if error in _RETRY:
            return HeartbeatOutcome(self.member_epoch, interval_s, None)
        if error != "NONE":
            raise StreamsGroupRefused(
                f"the broker refused this member of streams group {self.client.group_id}: {error}"
                + (f" ({response.error_message})" if response.error_message else "")
                + (_TOPOLOGY_HINT if error in _TOPOLOGY_ERRORS else ""),
                error,
            )
        if owned_changed:
            self._owned_sent = sent_owned
        self.shutdown_sent = self.shutdown_sent or self._shutdown_requested
        self.member_epoch = int(response.member_epoch)
        assignment = None
        if response.active_tasks is not None:
            assignment = Assignment(
                active=_from_task_ids(response.active_tasks),
                standby=_from_task_ids(response.standby_tasks),
                warmup=_from_task_ids(response.warmup_tasks),
            )
        endpoints = None
        if response.partitions_by_user_endpoint is not None:
            self._endpoint_epoch = int(response.endpoint_information_epoch)
            endpoints = _endpoints(response.partitions_by_user_endpoint)
        statuses = [
            (STATUS_NAMES.get(int(s.status_code), f"status {int(s.status_code)}"), s.status_detail)
            for s in response.status or ()
        ]
        return HeartbeatOutcome(
            self.member_epoch,
            interval_s,
            assignment,
            statuses,
            endpoints=endpoints,
            endpoints_epoch=self._endpoint_epoch,
        )

    def leave(self) -> None:
        """Member epoch -1: the broker hands this member's tasks to the others at once."""
        with self._lock:
            if self.member_epoch <= 0:
                return
            request = hb.StreamsGroupHeartbeatRequest(
                group_id=GroupId(self.client.group_id),
                member_id=self.member_id,
                member_epoch=i32(-1),
                endpoint_information_epoch=i32(self._endpoint_epoch),
                active_tasks=None,
                standby_tasks=None,
                warmup_tasks=None,
                client_tags=None,
                task_offsets=None,
                task_end_offsets=None,
            )
            self.member_epoch = -1
            self.client.heartbeat(request)


def _endpoints(entries: Iterable[EndpointToPartitions]) -> dict[tuple[str, int], EndpointPartitions]:
    """Endpoint -> partitions; the broker sends one entry per *member*, so the entries of a
    client's several members (one per worker) are merged under their shared endpoint."""
    merged: dict[tuple[str, int], EndpointPartitions] = {}
    for entry in entries:
        endpoint = (str(entry.user_endpoint.host), int(entry.user_endpoint.port))
        seen = merged.get(endpoint, EndpointPartitions())
        merged[endpoint] = EndpointPartitions(
            seen.active | _partitions(entry.active_partitions),
            seen.standby | _partitions(entry.standby_partitions),
        )
    return merged


def _partitions(topics: Iterable[TopicPartition]) -> frozenset[tuple[str, int]]:
    return frozenset((str(tp.topic), int(p)) for tp in topics for p in tp.partitions)


def _offsets(offsets: Mapping[tuple[str, int], int]) -> tuple[hb.TaskOffset, ...]:
    return tuple(
        hb.TaskOffset(subtopology_id=s, partition=i32(p), offset=i64(o))
        for (s, p), o in sorted(offsets.items())
    )
