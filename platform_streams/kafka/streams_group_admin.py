"""Streams groups (KIP-1071) as the operations see them: describe one by id.

librdkafka has no streams-group admin calls: confluent-kafka's ``describe_consumer_groups``
answers a streams group with ``GROUP_ID_NOT_FOUND`` (so it looks ``DEAD`` with no members
while instances run), and ``list_consumer_groups`` does not list it. So the description comes
from StreamsGroupDescribe over :class:`~platform_streams.kafka.streams_group.StreamsGroupClient`
(what Kafka's ``Admin.describeStreamsGroups`` sends). What librdkafka does get right needs
nothing here: DeleteGroups deletes a streams group like any other (refused with
GROUP_NOT_EMPTY while it has members, ``validateDeleteGroup``), OffsetFetch reads its
offsets, and an OffsetCommit naming no member (epoch -1) is accepted once it is empty
(``StreamsGroup.validateOffsetCommit``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.streams_group_describe.v0.request import StreamsGroupDescribeRequest
from kio.schema.streams_group_describe.v0.response import (
    Assignment,
    DescribedGroup,
    StreamsGroupDescribeResponse,
)
from kio.schema.types import GroupId

from platform_streams.errors import BrokerError
from platform_streams.kafka.streams_group.client import (
    STREAMS_GROUP_DESCRIBE_KEY,
    StreamsGroupClient,
    error_name,
)
from platform_streams.kafka.streams_group.security import security_properties

log = logging.getLogger(__name__)

__all__ = ["StreamsGroupView", "StreamsMemberView", "describe_streams_group", "streams_state_name"]

_GROUP_ID_NOT_FOUND = 69


def streams_state_name(raw: str) -> str:
    """A streams group's state as the operations spell states: ``NotReady`` -> ``NOT_READY``."""
    out = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(raw))
    return out.upper()


def _tasks(assignment: Assignment | None) -> dict[str, dict[str, list[int]]]:
    """``{"active"|"standby"|"warmup": {subtopology: partitions}}``, empty kinds left out."""
    if assignment is None:
        return {}
    kinds = {
        "active": assignment.active_tasks,
        "standby": assignment.standby_tasks,
        "warmup": assignment.warmup_tasks,
    }
    return {
        kind: {t.subtopology_id: sorted(int(p) for p in t.partitions) for t in tasks}
        for kind, tasks in kinds.items()
        if tasks
    }


@dataclass(frozen=True)
class StreamsMemberView:
    """One member of a streams group (``kafka-streams-groups.sh --describe --members``)."""

    member_id: str
    member_epoch: int
    process_id: str
    client_id: str
    host: str
    instance_id: str | None = None
    is_classic: bool = False
    tasks: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    target_tasks: dict[str, dict[str, list[int]]] = field(default_factory=dict)


@dataclass(frozen=True)
class StreamsGroupView:
    """A streams group as the broker describes it; ``state`` spelled like ``STABLE``."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    topology_epoch: int | None
    source_topics: tuple[str, ...]
    members: tuple[StreamsMemberView, ...]


def _view(group: DescribedGroup) -> StreamsGroupView:
    topology = group.topology
    sources = sorted({t for s in (topology.subtopologies or ()) for t in s.source_topics}) if topology else []
    return StreamsGroupView(
        group_id=str(group.group_id),
        state=streams_state_name(group.group_state),
        group_epoch=int(group.group_epoch),
        assignment_epoch=int(group.assignment_epoch),
        topology_epoch=None if topology is None else int(topology.epoch),
        source_topics=tuple(sources),
        members=tuple(
            StreamsMemberView(
                member_id=m.member_id,
                member_epoch=int(m.member_epoch),
                process_id=m.process_id,
                client_id=m.client_id,
                host=m.client_host,
                instance_id=m.instance_id,
                is_classic=bool(m.is_classic),
                tasks=_tasks(m.assignment),
                target_tasks=_tasks(m.target_assignment),
            )
            for m in group.members
        ),
    )


class _Describer(StreamsGroupClient):
    """The client's connection handling, answering an unknown group with None instead of raising."""

    def describe_or_none(self) -> DescribedGroup | None:
        conn = self._coordinator()
        if not conn.supports(STREAMS_GROUP_DESCRIBE_KEY, 0):
            return None  # a broker without streams groups (before Kafka 4.2, other brokers)
        try:
            response = conn.send(
                StreamsGroupDescribeRequest(
                    group_ids=(GroupId(self.group_id),), include_authorized_operations=False
                ),
                StreamsGroupDescribeResponse,
            )
        except BrokerError:
            self.forget_coordinator()
            raise
        group = response.groups[0]
        if int(group.error_code) == _GROUP_ID_NOT_FOUND:
            return None  # no group, or a group of another type (classic, consumer)
        if group.error_code != 0:
            reason = f"{error_name(group.error_code)} {group.error_message or ''}".strip()
            raise BrokerError(f"StreamsGroupDescribe {self.group_id}: {reason}")
        return group


def describe_streams_group(conf: Mapping[str, Any], group_id: str) -> StreamsGroupView | None:
    """StreamsGroupDescribe of ``group_id``: None when it is not a streams group (none of that
    id, a classic or consumer group, a broker without streams groups). ``conf``: the
    librdkafka-style client properties, whose security settings the connection uses.

    Settings the streams-group connection cannot honour (GSSAPI, OAUTHBEARER, a keystore)
    also give None, with a warning: no streams member of this client can run there, and the
    consumer-group operations such a cluster runs must keep working."""
    client_id = f"{conf.get('client.id', 'platform-streams')}-streams-admin"
    try:
        client = _Describer(
            str(conf["bootstrap.servers"]), group_id, client_id=client_id, security=security_properties(conf)
        )
    except BrokerError as exc:
        log.warning("group %r not looked up as a streams group: %s", group_id, exc)
        return None
    try:
        group = client.describe_or_none()
    finally:
        client.close()
    return None if group is None else _view(group)
