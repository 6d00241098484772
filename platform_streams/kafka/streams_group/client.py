"""The Streams group protocol (KIP-1071) spoken to a group coordinator, plus the commit path.

librdkafka speaks neither StreamsGroupHeartbeat nor an OffsetCommit that carries a streams
member's id and epoch, and a streams group's coordinator refuses a commit from anyone who
is not a member at the current epoch once the group has members
(``StreamsGroup.validateOffsetCommit``: UNKNOWN_MEMBER_ID for ``""``/-1, STALE_MEMBER_EPOCH
for a wrong epoch, UNSUPPORTED_VERSION below OffsetCommit v9). So:

* heartbeats, describes and at-least-once commits go over :class:`KafkaConnection` with
  kio's generated messages (OffsetCommit v9: member id + member epoch);
* exactly-once commits stay with librdkafka's transactional producer, whose
  ``send_offsets_to_transaction`` takes the consumer-group metadata as librdkafka's own
  serialized form (``rd_kafka_consumer_group_metadata_write``): :func:`group_metadata`
  writes that form with the streams member's id and epoch as the generation, so the
  TxnOffsetCommit the producer sends carries both and the coordinator checks them.
"""

from __future__ import annotations

import dataclasses
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.offset_commit.v9 import request as oc_req
from kio.schema.offset_commit.v9.response import OffsetCommitResponse
from kio.schema.streams_group_describe.v0.request import StreamsGroupDescribeRequest
from kio.schema.streams_group_describe.v0.response import DescribedGroup, StreamsGroupDescribeResponse
from kio.schema.streams_group_heartbeat.v0.request import StreamsGroupHeartbeatRequest
from kio.schema.streams_group_heartbeat.v0.response import StreamsGroupHeartbeatResponse
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from platform_streams.errors import BrokerError
from platform_streams.kafka.streams_group.connection import (
    AuthenticationFailed,
    KafkaConnection,
    split_bootstrap,
)
from platform_streams.kafka.streams_group.security import connection_security

__all__ = [
    "STREAMS_GROUP_DESCRIBE_KEY",
    "STREAMS_GROUP_HEARTBEAT_KEY",
    "CommitRefused",
    "StreamsGroupClient",
    "broker_supports_streams_groups",
    "error_name",
    "group_metadata",
]

STREAMS_GROUP_HEARTBEAT_KEY = 88
STREAMS_GROUP_DESCRIBE_KEY = 89
_OFFSET_COMMIT_KEY = 8

_RETRIABLE_COORDINATOR = {14, 15, 16}
#: what each request of this client needs, by the authorization error that says it is missing
#: (Kafka 4.4's KafkaApis: handleStreamsGroupHeartbeat checks READ on the group, then
#: DESCRIBE on every topic of the topology; StreamsGroupDescribe DESCRIBE on the group;
#: OffsetCommit READ on the group and on each topic)
_GROUP_DENIED = "GROUP_AUTHORIZATION_FAILED"
_TOPIC_DENIED = "TOPIC_AUTHORIZATION_FAILED"


def error_name(code: int) -> str:
    """Kafka's name for an error code (``STALE_MEMBER_EPOCH``), from kio's generated table."""
    try:
        return ErrorCode(int(code)).name.upper()
    except ValueError:
        return f"error {int(code)}"


def _denied(error: str, group_id: str, operation: str, topics: str) -> str:
    """The ACL an authorization error means, as the line to act on ("" for other errors)."""
    if error == _GROUP_DENIED:
        return f"not allowed: {operation} on group {group_id!r}"
    if error == _TOPIC_DENIED and topics:
        return f"not allowed: {topics}"
    return ""


class CommitRefused(BrokerError):
    """The coordinator refused an offset commit; ``error_code`` is Kafka's."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.error_code = code


def group_metadata(group_id: str, member_id: str, member_epoch: int, instance_id: str | None = None) -> bytes:
    """librdkafka's serialized consumer-group metadata naming a streams member.

    The layout is ``rd_kafka_consumer_group_metadata_write``'s (the bytes
    ``Consumer.consumer_group_metadata()`` returns and ``send_offsets_to_transaction``
    reads back): the magic ``CGMDv2:``, the generation id as a native int32, then the
    NUL-terminated group id and member id, a null flag for the group instance id and
    that id NUL-terminated when present. The generation carries the member epoch, so the
    TxnOffsetCommit names this member at this epoch.
    """
    for name, value in (("group_id", group_id), ("member_id", member_id)):
        if "\x00" in value:
            raise ValueError(f"{name} must not contain NUL")
    out = (
        b"CGMDv2:"
        + struct.pack("=i", member_epoch)
        + group_id.encode()
        + b"\x00"
        + member_id.encode()
        + b"\x00"
    )
    if instance_id is None:
        return out + b"\x01"
    return out + b"\x00" + instance_id.encode() + b"\x00"


def broker_supports_streams_groups(bootstrap: str, *, security: Mapping[str, str] | None = None) -> bool:
    """Whether the first reachable bootstrap broker advertises StreamsGroupHeartbeat v0.

    ``security``: librdkafka-style connection properties (``security.protocol``, ``ssl.*``,
    ``sasl.*``); a broker that refuses the credentials raises at once (the next broker
    would refuse them too)."""
    secured = connection_security(security)
    last: Exception | None = None
    for host, port in split_bootstrap(bootstrap):
        try:
            conn = KafkaConnection(host, port, timeout_s=10.0, security=secured)
        except BrokerError as exc:
            if isinstance(exc, AuthenticationFailed):
                raise
            last = exc
            continue
        try:
            return conn.supports(STREAMS_GROUP_HEARTBEAT_KEY, 0)
        finally:
            conn.close()
    raise BrokerError(f"no bootstrap broker answered ApiVersions: {last}")


@dataclass(frozen=True)
class _Coordinator:
    host: str
    port: int


class StreamsGroupClient:
    """Requests to the coordinator of one streams group (found once, found again on
    NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE)."""

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        *,
        client_id: str = "platform-streams",
        security: Mapping[str, str] | None = None,
    ) -> None:
        """``security``: the application's librdkafka-style connection properties
        (``security.protocol``, ``ssl.*``, ``sasl.*``; None: PLAINTEXT), read now: a bad or
        unsupported one raises :class:`BrokerError` naming it."""
        self._bootstrap = split_bootstrap(bootstrap)
        self.group_id = group_id
        self._client_id = client_id
        self._security = connection_security(security)
        self._conn: KafkaConnection | None = None
        self._lock = threading.Lock()

    def _any_broker(self) -> KafkaConnection:
        last: Exception | None = None
        for host, port in self._bootstrap:
            try:
                return KafkaConnection(host, port, client_id=self._client_id, security=self._security)
            except BrokerError as exc:
                if isinstance(exc, AuthenticationFailed):
                    raise
                last = exc
        raise BrokerError(f"no bootstrap broker reachable: {last}")

    def _find_coordinator(self, boot: KafkaConnection) -> FindCoordinatorResponse:
        return boot.send(
            FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(self.group_id,)),
            FindCoordinatorResponse,
        )

    def group_access_problem(self) -> str | None:
        """Why this principal may not use the group, before anything else touches it, or None.

        FindCoordinator needs DESCRIBE on the group, which READ implies: a refusal means READ
        is missing, and the app should stop with the ACL to add rather than let a consumer
        report "Group authorization failed". Other outcomes (a coordinator still loading,
        a broker not answering) are the heartbeat's to retry: None. READ missing while
        DESCRIBE is granted surfaces at the first heartbeat (GROUP_AUTHORIZATION_FAILED).
        """
        try:
            boot = self._any_broker()
        except AuthenticationFailed:
            raise
        except BrokerError:
            return None
        try:
            found = self._find_coordinator(boot)
        except BrokerError:
            return None
        finally:
            boot.close()
        error = error_name(found.coordinators[0].error_code)
        return _denied(error, self.group_id, "READ", "") or None

    def _coordinator(self) -> KafkaConnection:
        with self._lock:
            if self._conn is not None and self._conn.session_expiring():
                self._conn.close()
                self._conn = None
            if self._conn is not None:
                return self._conn
            boot = self._any_broker()
            try:
                found = self._find_coordinator(boot)
            finally:
                boot.close()
            coord = found.coordinators[0]
            if coord.error_code != 0:
                error = error_name(coord.error_code)
                hint = _denied(error, self.group_id, "READ", "") or coord.error_message or ""
                raise BrokerError(f"FindCoordinator for group {self.group_id}: {error} {hint}".rstrip())
            self._conn = KafkaConnection(
                coord.host, int(coord.port), client_id=self._client_id, security=self._security
            )
            return self._conn

    def forget_coordinator(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn = None

    def supports_streams_groups(self) -> bool:
        return self._coordinator().supports(STREAMS_GROUP_HEARTBEAT_KEY, 0)

    def heartbeat(self, request: StreamsGroupHeartbeatRequest) -> StreamsGroupHeartbeatResponse:
        try:
            response = self._coordinator().send(request, StreamsGroupHeartbeatResponse)
        except BrokerError:
            self.forget_coordinator()
            raise
        if int(response.error_code) in _RETRIABLE_COORDINATOR:
            self.forget_coordinator()
        # the broker's own message ("Group authorization failed.") does not say which ACL
        hint = _denied(
            error_name(response.error_code), self.group_id, "READ",
            "DESCRIBE on a topic of the topology (its source, repartition or changelog topics)",
        )  # fmt: skip
        if hint:
            response = dataclasses.replace(response, error_message=hint)
        return response

    def describe(self) -> DescribedGroup:
        response = self._coordinator().send(
            StreamsGroupDescribeRequest(
                group_ids=(GroupId(self.group_id),), include_authorized_operations=False
            ),
            StreamsGroupDescribeResponse,
        )
        group = response.groups[0]
        if group.error_code != 0:
            error = error_name(group.error_code)
            hint = _denied(error, self.group_id, "DESCRIBE", "")
            raise BrokerError(
                f"StreamsGroupDescribe {self.group_id}: {error}" + (f": {hint}" if hint else "")
            )
        return group

    def commit(self, member_id: str, member_epoch: int, offsets: Mapping[tuple[str, int], int]) -> None:
        """OffsetCommit v9 naming the member and its epoch; raises :class:`CommitRefused`
        with the first partition error (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, ...)."""
        by_topic: dict[str, list[oc_req.OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                oc_req.OffsetCommitRequestPartition(
                    partition_index=i32(partition),
                    committed_offset=i64(offset),
                    committed_leader_epoch=i32(-1),
                    committed_metadata="",
                )
            )
        request = oc_req.OffsetCommitRequest(
            group_id=GroupId(self.group_id),
            generation_id_or_member_epoch=i32(member_epoch),
            member_id=member_id,
            group_instance_id=None,
            topics=tuple(
                oc_req.OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(p))
                for t, p in by_topic.items()
            ),
        )
        conn = self._coordinator()
        if not conn.supports(_OFFSET_COMMIT_KEY, 9):
            raise BrokerError(
                "the group coordinator does not accept OffsetCommit v9 (needed by streams groups)"
            )
        try:
            response = conn.send(request, OffsetCommitResponse)
        except BrokerError:
            self.forget_coordinator()
            raise
        for answered in response.topics:
            for part in answered.partitions:
                if part.error_code != 0:
                    if int(part.error_code) in _RETRIABLE_COORDINATOR:
                        self.forget_coordinator()
                    error = error_name(part.error_code)
                    hint = _denied(error, self.group_id, "READ", f"READ on topic {answered.name!r}")
                    raise CommitRefused(
                        f"offset commit for {answered.name}-{part.partition_index} refused: "
                        f"{error}" + (f": {hint}" if hint else ""),
                        int(part.error_code),
                    )

    def close(self) -> None:
        self.forget_coordinator()
