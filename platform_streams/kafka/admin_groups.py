"""Consumer-group administration used by the platform operations (application reset).

Split out of :mod:`platform_streams.kafka.admin` to keep that module small; the methods
land on :class:`~platform_streams.kafka.admin.KafkaAdmin` through
:class:`GroupAdminMixin`, so callers still see one facade.

What the reset tool needs to know about a group, and how far each broker tells it:

* **Is anybody in it?** Kafka describes the state *and* the members. Tansu describes the
  state correctly (``STABLE`` while members are active, ``EMPTY`` after they left) but
  never lists members, so :attr:`GroupDescription.active` looks at both: a group is
  active when it lists a member *or* its state is one of the member-bearing states.
* **Removing members** (Kafka's ``RemoveMembersFromConsumerGroup``, what
  ``kafka-streams-application-reset --force`` uses) is not exposed by librdkafka /
  confluent-kafka at all, on any broker; there is deliberately no method for it here.
* **Writing offsets** for a group with active members is refused by Kafka
  (``UNKNOWN_MEMBER_ID``) and accepted by Tansu, so callers must check
  :attr:`GroupDescription.active` themselves right before writing.
* **Streams groups** (KIP-1071) are invisible to librdkafka's describe (it answers
  ``GROUP_ID_NOT_FOUND``: ``DEAD``, no members, while instances run): a ``DEAD`` answer is
  asked again with StreamsGroupDescribe (:mod:`platform_streams.kafka.streams_group_admin`),
  and a streams group comes back with ``group_type="streams"``, its members and Kafka's
  streams states (``NOT_READY``, ``ASSIGNING``, ``RECONCILING`` and ``STABLE`` have members).
* **Members that died without leaving** (kill -9) expire after the session timeout on
  Kafka. Tansu only evaluates expiry when another member joins: with nobody else the
  group stays ``STABLE`` forever (observed for 90 s with a 6 s session).
  :func:`rejoin_group_once` is that other member.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from platform_streams.errors import StreamsTimeoutError
from platform_streams.kafka.clients import create_consumer
from platform_streams.kafka.errors import as_kafka_error, to_broker_error
from platform_streams.kafka.streams_group_admin import describe_streams_group

__all__ = [
    "ACTIVE_GROUP_STATES",
    "GroupAdminMixin",
    "GroupDescription",
    "GroupMember",
    "rejoin_group_once",
    "wait_result",
]

_T = TypeVar("_T")

#: Group states in which members are joined or joining (Java ``ConsumerGroupState`` names,
#: and ``StreamsGroup.StreamsGroupState``'s member-bearing ones).
ACTIVE_GROUP_STATES: frozenset[str] = frozenset(
    {"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "NOT_READY", "ASSIGNING", "RECONCILING"}
)

# Java's ConsumerGroupState names; librdkafka spells two of them differently.
_GROUP_STATE_NAMES: dict[str, str] = {
    "PREPARING_REBALANCING": "PREPARING_REBALANCE",
    "COMPLETING_REBALANCING": "COMPLETING_REBALANCE",
    "UNKOWN": "UNKNOWN",
}


def group_state_name(raw: str) -> str:
    """librdkafka's group state name spelled the way Kafka (and its docs) spell it."""
    return _GROUP_STATE_NAMES.get(raw, raw)


def wait_result(get: Callable[[float], _T], deadline: float, what: str) -> _T:
    """Wait for a future's result until ``deadline``; a timeout becomes StreamsTimeoutError."""
    remaining = max(0.0, deadline - time.monotonic())
    try:
        return get(remaining)
    except TimeoutError as exc:
        raise StreamsTimeoutError(f"timed out: {what}") from exc


@dataclass(frozen=True)
class GroupMember:
    """One member as the broker describes it (Tansu never describes any)."""

    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupDescription:
    """A group's state and members; ``state`` uses Kafka's names. ``group_type`` is
    ``"streams"`` for a streams group, else ``"consumer"`` (classic or consumer protocol)."""

    group_id: str
    state: str
    members: tuple[GroupMember, ...] = field(default_factory=tuple)
    group_type: str = "consumer"

    @property
    def active(self) -> bool:
        """True if members are (or may be) joined: listed members, or a member-bearing state.

        ``UNKNOWN`` counts as active: an operation that must not run next to a live
        application cannot assume it is safe when the broker does not say.
        """
        return bool(self.members) or self.state in ACTIVE_GROUP_STATES or self.state == "UNKNOWN"


class GroupAdminMixin:
    """Group methods of :class:`~platform_streams.kafka.admin.KafkaAdmin` (see module docstring)."""

    _conf: dict[str, Any]

    def _admin(self) -> AdminClient:
        raise NotImplementedError

    def committed_offsets(
        self,
        group_id: str,
        partitions: Iterable[tuple[str, int]] | None = None,
        timeout: float = 10.0,
        *,
        require_stable: bool = False,
    ) -> dict[tuple[str, int], int | None]:
        """Return the group's committed offset per ``(topic, partition)``, ``None`` if none.

        With ``partitions=None`` every partition the group has an offset for is returned.
        Only offsets: commit metadata is not returned because Tansu drops it. Tansu also
        answers for partitions of topics that do not exist (with "no offset"), and for
        unknown groups (with nothing), so both brokers yield ``None`` for those.
        ``require_stable`` (KIP-447) waits out pending transactional commits on Kafka.
        """
        wanted = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        if wanted is not None and not wanted:
            return {}
        deadline = time.monotonic() + timeout
        request = ConsumerGroupTopicPartitions(group_id, wanted)
        while True:
            try:
                futures = self._admin().list_consumer_group_offsets(
                    [request], require_stable=require_stable, request_timeout=timeout
                )
                what = f"list offsets of group {group_id!r}"
                listed = wait_result(futures[group_id].result, deadline, what)
            except KafkaException as exc:
                err = as_kafka_error(exc)
                if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    return {} if wanted is None else {(tp.topic, tp.partition): None for tp in wanted}
                raise to_broker_error(exc, f"list committed offsets of group {group_id!r}") from exc
            # Kafka answers UNSTABLE_OFFSET_COMMIT until a pending transaction's offset markers
            # are written (just after its commit returns, too): ask again until the deadline
            unstable = any(
                tp.error is not None and tp.error.code() == KafkaError.UNSTABLE_OFFSET_COMMIT
                for tp in listed.topic_partitions or []
            )
            if not (unstable and time.monotonic() < deadline - 0.1):
                break
            time.sleep(0.1)
        offsets: dict[tuple[str, int], int | None] = (
            {} if wanted is None else {(tp.topic, tp.partition): None for tp in wanted}
        )
        for tp in listed.topic_partitions or []:
            if tp.error is not None and tp.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise to_broker_error(tp.error, f"committed offset of {tp.topic}-{tp.partition}")
            key = (tp.topic, tp.partition)
            if tp.error is None and tp.offset >= 0:
                offsets[key] = tp.offset
            elif wanted is not None:
                offsets[key] = None
        return offsets

    def group_state(self, group_id: str, timeout: float = 10.0) -> str:
        """Return the group state by its Kafka name ("STABLE", "EMPTY", "DEAD", ...).

        An unknown group is "DEAD" on Kafka and "EMPTY" on Tansu: both mean no members.
        """
        return self.describe_group(group_id, timeout).state

    def describe_group(self, group_id: str, timeout: float = 10.0) -> GroupDescription:
        """Describe ``group_id``, a streams group too; an unknown group is ``DEAD`` (Kafka) or
        ``EMPTY`` (Tansu)."""
        deadline = time.monotonic() + timeout
        try:
            futures = self._admin().describe_consumer_groups([group_id], request_timeout=timeout)
            desc = wait_result(futures[group_id].result, deadline, f"describe group {group_id!r}")
        except KafkaException as exc:
            err = as_kafka_error(exc)
            if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return self._streams_or_dead(group_id)
            raise to_broker_error(exc, f"describe group {group_id!r}") from exc
        state = group_state_name(desc.state.name if desc.state is not None else "UNKNOWN")
        if state == "DEAD":
            return self._streams_or_dead(group_id)
        members = tuple(
            GroupMember(m.member_id, m.client_id, m.host, getattr(m, "group_instance_id", None))
            for m in desc.members or []
        )
        return GroupDescription(group_id, state, members)

    def _streams_or_dead(self, group_id: str) -> GroupDescription:
        streams = describe_streams_group(self._conf, group_id)
        if streams is None:
            return GroupDescription(group_id, "DEAD")
        members = tuple(GroupMember(m.member_id, m.client_id, m.host, m.instance_id) for m in streams.members)
        return GroupDescription(group_id, streams.state, members, group_type="streams")

    def list_group_ids(self, timeout: float = 10.0) -> list[str]:
        """The ids of every consumer group the broker lists, sorted.

        Kafka lists groups with members or committed offsets; Tansu only those with
        committed offsets. A broker that answers only in part raises :class:`BrokerError`:
        callers use the list to decide what is someone else's, so a partial list is no answer.
        """
        deadline = time.monotonic() + timeout
        try:
            future = self._admin().list_consumer_groups(request_timeout=timeout)
            listed = wait_result(future.result, deadline, "list consumer groups")
        except KafkaException as exc:
            raise to_broker_error(exc, "list consumer groups") from exc
        if listed.errors:
            raise to_broker_error(listed.errors[0], "list consumer groups")
        return sorted(g.group_id for g in listed.valid or [])

    def delete_group(self, group_id: str, timeout: float = 10.0) -> str | None:
        """Delete ``group_id`` and its committed offsets; None when deleted, else the broker's reason.

        Kafka refuses a group that has members (GROUP_NOT_EMPTY); Tansu deletes even an
        active group. Used only to repair a group Tansu can no longer rebalance
        (runtime/membership/rebalance_wait.py), which is why a refusal is an answer, not an error.
        """
        deadline = time.monotonic() + timeout
        try:
            futures = self._admin().delete_consumer_groups([group_id], request_timeout=timeout)
            wait_result(futures[group_id].result, deadline, f"delete group {group_id!r}")
        except KafkaException as exc:
            err = as_kafka_error(exc)
            return err.name() if err is not None else str(exc)
        return None

    def alter_committed_offsets(
        self, group_id: str, offsets: Mapping[tuple[str, int], int], timeout: float = 10.0
    ) -> None:
        """Set the group's committed offset of each ``(topic, partition)``.

        The group must have no active member (Kafka refuses otherwise, Tansu does not:
        check :meth:`describe_group` first). Raises :class:`BrokerError` naming the first
        partition the broker rejected; offsets are written in one request, so on Kafka a
        rejection is all-or-nothing per partition, not per call.
        """
        if not offsets:
            return
        if any(o < 0 for o in offsets.values()):
            raise ValueError(f"committed offsets must be >= 0, got {dict(offsets)}")
        deadline = time.monotonic() + timeout
        request = ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        )
        try:
            futures = self._admin().alter_consumer_group_offsets([request], request_timeout=timeout)
            result = wait_result(futures[group_id].result, deadline, f"alter offsets of group {group_id!r}")
        except KafkaException as exc:
            raise to_broker_error(exc, f"alter committed offsets of group {group_id!r}") from exc
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                raise to_broker_error(tp.error, f"alter committed offset of {tp.topic}-{tp.partition}")


def rejoin_group_once(consumer_conf: Mapping[str, Any], topics: Iterable[str], timeout_s: float) -> bool:
    """Join the group of ``consumer_conf`` with a throw-away member, wait for the rebalance, leave.

    A rebalance completes only once every member known to the coordinator has rejoined
    or has been expired, so afterwards members that died without leaving are gone --
    on Tansu, the only way to make that happen. Live members rebalance twice (our join,
    our leave): only use this when the application is meant to be stopped. The member
    never commits (auto commit off, nothing stored) and is dynamic even if
    ``consumer_conf`` names a ``group.instance.id`` (reusing it would fence a live
    instance). ``consumer_conf`` must carry the group's session timeout and assignor
    (Tansu keeps a group's first session timeout and never admits another). Returns
    True if the rebalance completed within ``timeout_s``.
    """
    conf = {**consumer_conf, "enable.auto.commit": False, "enable.auto.offset.store": False}
    conf.pop("group.instance.id", None)
    assigned: list[bool] = []

    def on_assign(_consumer: Consumer, _partitions: list[TopicPartition]) -> None:
        assigned.append(True)  # the rebalance completed; what we were given does not matter

    consumer = create_consumer(conf)
    try:
        consumer.subscribe(list(topics), on_assign=on_assign)
        deadline = time.monotonic() + timeout_s
        while not assigned and time.monotonic() < deadline:
            consumer.poll(0.1)
    finally:
        consumer.close()  # LeaveGroup
    return bool(assigned)
