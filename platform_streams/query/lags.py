"""How far behind its changelog each local copy of a store partition is (Kafka's ``LagInfo``).

Kafka Streams' ``KafkaStreams#allLocalStorePartitionLags`` (KIP-535): for every store
partition this client holds -- active tasks running or restoring, and standbys -- the
changelog offset the copy has applied up to (the next offset it would apply), the
changelog's end offset, and the difference. A running active task reflects its changelog
to the end by definition (it writes it): its position *is* the end offset, its lag 0, as
Kafka reports it (``Task.LATEST_OFFSET``). A copy with no applied offset yet counts from 0
(Kafka's choice too: the relative order of copies is right, the lag an over-estimate).

End offsets come from fetch responses (:func:`platform_streams.kafka.log_end_offsets`), not
ListOffsets(latest), which one supported broker answers wrongly (docs/brokers.md);
a restoring task's end is the one its restore read from the same fetch responses, so
asking about it costs no broker round trip. Lags are in records (offsets): Kafka Streams
dropped time lags from KIP-535 (they need a record fetch per partition), and so do we.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "LagInfo",
    "ReplicaLag",
    "Role",
    "StoreReplica",
    "by_store",
    "lags_of",
    "read_offsets",
    "replicas_of",
]

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LagInfo:
    """One store partition copy: applied up to ``current_offset_position`` of its changelog,
    whose end is ``end_offset_position``; ``offset_lag`` records behind (never negative)."""

    current_offset_position: int
    end_offset_position: int

    @property
    def offset_lag(self) -> int:
        return max(0, self.end_offset_position - self.current_offset_position)

    def to_dict(self) -> dict[str, int]:
        return {
            "current_offset_position": self.current_offset_position,
            "end_offset_position": self.end_offset_position,
            "offset_lag": self.offset_lag,
        }


class Role(enum.Enum):
    """What a local copy of a store partition is."""

    ACTIVE = "active"  # an active task that is running: fresh by definition
    RESTORING = "restoring"  # an active task still restoring (or waiting to restore)
    STANDBY = "standby"


@dataclass(frozen=True, slots=True)
class StoreReplica:
    """A local copy of one store partition: its changelog partition and how far it applied it.

    ``position`` is the next changelog offset to apply (None: a running active, at the end);
    ``known_end`` the end its restore read from fetch responses, if it is restoring.
    """

    store: str
    partition: int
    role: Role
    changelog: TopicPartitionKey
    position: int | None
    known_end: int | None = None


@dataclass(frozen=True, slots=True)
class ReplicaLag:
    """A local copy of a store partition with its lag."""

    replica: StoreReplica
    lag: LagInfo

    @property
    def role(self) -> Role:
        return self.replica.role

    @property
    def offset_lag(self) -> int:
        return self.lag.offset_lag


def replicas_of(
    task_partition: int,
    changelogs: Mapping[str, str],
    applied: Mapping[TopicPartitionKey, int],
    role: Role,
    known_ends: Mapping[TopicPartitionKey, int] | None = None,
) -> list[StoreReplica]:
    """The copies one task holds: one per changelogged store (``changelogs``: store ->
    changelog topic). ``applied`` is the task's state manager's last applied offset per
    changelog partition (Kafka's changelog offsets are the next offset: + 1)."""
    out = []
    for store, topic in changelogs.items():
        tp = (topic, task_partition)
        position = None if role is Role.ACTIVE else applied.get(tp, -1) + 1
        known = known_ends.get(tp) if known_ends is not None and role is Role.RESTORING else None
        out.append(StoreReplica(store, task_partition, role, tp, position, known))
    return out


def lags_of(
    replicas: Iterable[StoreReplica],
    fetch_ends: Callable[[Collection[TopicPartitionKey]], Mapping[TopicPartitionKey, int]],
) -> list[ReplicaLag]:
    """The lag of every copy whose changelog end is known. Ends a restore already read are
    used as they are; the others are fetched in one call (copies whose end cannot be
    fetched are left out, as Kafka leaves out partitions it got no end offset for)."""
    replicas = list(replicas)
    wanted = {r.changelog for r in replicas if r.known_end is None}
    ends: Mapping[TopicPartitionKey, int] = {}
    if wanted:
        try:
            ends = fetch_ends(wanted)
        except Exception as exc:  # a broker that does not answer: those lags are unknown
            log.warning("end offsets of %d changelog partitions unknown: %s", len(wanted), exc)
    out = []
    for replica in replicas:
        end = replica.known_end if replica.known_end is not None else ends.get(replica.changelog)
        if end is None:
            continue
        out.append(ReplicaLag(replica, LagInfo(end if replica.position is None else replica.position, end)))
    return out


def by_store(lags: Iterable[ReplicaLag]) -> dict[str, dict[int, LagInfo]]:
    """``{store: {partition: LagInfo}}``, Kafka's ``allLocalStorePartitionLags`` shape."""
    out: dict[str, dict[int, LagInfo]] = {}
    for item in lags:
        out.setdefault(item.replica.store, {})[item.replica.partition] = item.lag
    return {store: dict(sorted(parts.items())) for store, parts in sorted(out.items())}


def read_offsets(read: Callable[[], Mapping[TopicPartitionKey, int]]) -> dict[TopicPartitionKey, int]:
    """A snapshot of a state manager's changelog offsets taken from another thread (the
    owning thread may be registering a store meanwhile: a changed dict is read again)."""
    for _ in range(3):
        try:
            return dict(read())
        except RuntimeError:
            continue
    return {}
