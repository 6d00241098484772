"""The instance directory: which instance runs which tasks, shared through a Kafka topic.

Kafka Streams learns every member's assignment from its group leader's assignor. Here
librdkafka's assignors are used, and no member can see another's assignment: the
consumer API shows only its own, and on some brokers ``describe_consumer_groups`` returns no
members at all (shared/BROKER.md). So every instance publishes its own view to an
internal topic and reads everybody's:

* topic ``<application_id>-metadata`` (:func:`metadata_topic`): one partition,
  ``cleanup.policy=compact``, created at start-up by instances that have an
  ``application_server`` (only they can be routed to);
* key: the instance's ``application_server``; value: JSON with its client id, state,
  active and standby task ids and store names; a tombstone on clean close;
* written on every worker state change (rebalance start and end, restore start), under a
  lock so an instance's records are in the order its state changed, and again every
  :data:`REPUBLISH_S` seconds when it changed (standby tasks come and go on their own);
* read by a background consumer from the beginning, without a group.

The same topic carries the applications' key-placement verdicts (query/placement.py):
key ``key-placement:<source topic>``, value JSON ``{"v": 1, "murmur2_placed": false}``, written
by the instance (or Spark backfill) that found the topic's records not murmur2-placed, and
never deleted (an application reset deletes the whole topic).

Conflicts -- two instances claiming a task around a rebalance, or a killed instance that
never wrote its tombstone -- are settled by log order: the claim at the highest offset
wins, so the instance that got the task last is its owner. A task nobody claims (between
revocation and assignment) has no owner: callers answer "not available, retry".

An instance knows its own assignment before the topic tells it: from a publication until
the reader reads that record back, the instance's entry is what it published, ranked above
every record read (it is the newest claim there is). So at RUNNING, key metadata already
names this instance for its own tasks, as Kafka Streams' does (its metadata comes with the
assignment), instead of "unavailable" for one round trip through the topic.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError
from platform_streams.kafka import (
    OFFSET_BEGINNING,
    KafkaAdmin,
    KafkaError,
    TopicPartition,
    TopicSpec,
    create_consumer,
    create_producer,
)
from platform_streams.query.group_hosts import GroupHosts, TaskHosts
from platform_streams.query.metadata import HostInfo, StreamsMetadata

__all__ = [
    "METADATA_TOPIC_SUFFIX",
    "PLACEMENT_KEY_PREFIX",
    "REPUBLISH_S",
    "InstanceDirectory",
    "InstanceSnapshot",
    "ensure_metadata_topic",
    "metadata_topic",
    "publish_misplaced_topics",
]

log = logging.getLogger(__name__)

METADATA_TOPIC_SUFFIX = "-metadata"
#: how often an instance checks whether its published view is still current
REPUBLISH_S = 2.0
_VERSION = 1


#: the rank of this instance's own publication until it is read back: above any offset
_UNREAD_OFFSET = 2**63

#: metadata-topic keys of key-placement verdicts: ``key-placement:<source topic>``
PLACEMENT_KEY_PREFIX = "key-placement:"


def metadata_topic(application_id: str) -> str:
    """The internal topic where instances publish their tasks: ``<application_id>-metadata``."""
    return f"{application_id}{METADATA_TOPIC_SUFFIX}"


def ensure_metadata_topic(config: StreamsConfig) -> str:
    """Create the compacted one-partition metadata topic if it does not exist; its name."""
    topic = metadata_topic(config.application_id)
    spec = TopicSpec(topic, 1, config.replication_factor, {"cleanup.policy": "compact"})
    with KafkaAdmin(config.admin_configs()) as admin:
        admin.create_topics([spec])
    return topic


def _placement_record(topic: str) -> tuple[bytes, bytes]:
    value = json.dumps({"v": _VERSION, "murmur2_placed": False})
    return f"{PLACEMENT_KEY_PREFIX}{topic}".encode(), value.encode()


def publish_misplaced_topics(config: StreamsConfig, topics: list[str], timeout_s: float = 30.0) -> None:
    """Record that ``topics`` are not murmur2-placed, for the application's instances (e.g.
    from a Spark backfill whose state they will serve); waits for the acknowledgements."""
    if not topics:
        return
    topic = ensure_metadata_topic(config)
    producer = create_producer({"bootstrap.servers": config.bootstrap_servers, **config.client_config})
    for source in topics:
        key, value = _placement_record(source)
        producer.produce(topic, value, key, partition=0)
    if producer.flush(timeout_s):
        raise BrokerError(f"key-placement records for {topics} not acknowledged within {timeout_s}s")


@dataclass(frozen=True, slots=True)
class InstanceSnapshot:
    """What an instance publishes about itself."""

    client_id: str
    state: str
    active_tasks: frozenset[str]
    standby_tasks: frozenset[str]
    stores: frozenset[str]

    def to_json(self, host: HostInfo) -> bytes:
        return json.dumps(
            {
                "v": _VERSION,
                "host": str(host),
                "client_id": self.client_id,
                "state": self.state,
                "active": sorted(self.active_tasks),
                "standby": sorted(self.standby_tasks),
                "stores": sorted(self.stores),
                "ts": int(time.time() * 1000),
            }
        ).encode()


@dataclass(frozen=True, slots=True)
class _Entry:
    offset: int
    metadata: StreamsMetadata


def _parse(key: bytes, value: bytes) -> StreamsMetadata:
    data = json.loads(value)
    if not isinstance(data, Mapping) or data.get("v") != _VERSION:
        raise ValueError("unknown metadata record version")
    return StreamsMetadata(
        host_info=HostInfo.parse(key.decode()),
        client_id=str(data.get("client_id", "")),
        state=str(data.get("state", "")),
        active_tasks=frozenset(str(t) for t in data.get("active", ())),
        standby_tasks=frozenset(str(t) for t in data.get("standby", ())),
        state_store_names=frozenset(str(s) for s in data.get("stores", ())),
    )


class InstanceDirectory:
    """Publishes this instance's tasks and keeps every instance's latest record."""

    def __init__(
        self, config: StreamsConfig, host: HostInfo, on_misplaced: Callable[[str], None] | None = None
    ) -> None:
        self.config = config
        #: called with a source topic found not murmur2-placed (by any instance, any time)
        self._on_misplaced = on_misplaced
        self.host = host
        self.topic = metadata_topic(config.application_id)
        self._entries: dict[HostInfo, _Entry] = {}
        self._entries_lock = threading.Lock()
        self._publish_lock = threading.Lock()
        self._stop = threading.Event()
        self._caught_up = threading.Event()
        self._producer: Any = None
        self._reader: threading.Thread | None = None
        self._snapshot: Callable[[], InstanceSnapshot] | None = None
        self._published: InstanceSnapshot | None = None
        #: what this instance published last and the reader has not read back yet
        self._own_pending: tuple[bytes, StreamsMetadata] | None = None
        self._base: dict[str, Any] = {"bootstrap.servers": config.bootstrap_servers, **config.client_config}
        #: under ``group_protocol="streams"``: the broker's word on who runs a task, which
        #: ranks above every claim here once the broker has said anything (query/group_hosts.py)
        self.group_hosts: GroupHosts | None = None

    # ------------------------------------------------------------------ lifecycle

    def ensure_topic(self) -> None:
        """Create the compacted one-partition metadata topic if it does not exist."""
        ensure_metadata_topic(self.config)

    def start(self) -> None:
        """Create the producer and start reading the topic in the background."""
        self._producer = create_producer(
            {
                **self._base,
                "client.id": f"{self.config.effective_client_id}-metadata-producer",
                "linger.ms": 0,
            }
        )
        self._reader = threading.Thread(target=self._read, name="streams-metadata-reader", daemon=True)
        self._reader.start()

    def close(self, *, tombstone: bool = True) -> None:
        """Stop reading; on a clean close tell the others this instance is gone."""
        producer, self._producer = self._producer, None
        if producer is not None:
            with self._publish_lock:
                if tombstone:
                    self._produce_with(producer, None)
                producer.flush(5)
        self._stop.set()
        if self._reader is not None:
            self._reader.join(5)

    def wait_caught_up(self, timeout_s: float) -> bool:
        """True once the reader has reached the end of the topic at least once."""
        return self._caught_up.wait(timeout_s)

    # ------------------------------------------------------------------ publishing

    def publish(self, snapshot: Callable[[], InstanceSnapshot]) -> None:
        """Publish ``snapshot()``, taken under the publish lock so records follow state order."""
        if self._producer is None:
            return
        self._snapshot = snapshot
        with self._publish_lock:
            producer = self._producer
            if producer is not None:
                self._published = snapshot()
                self._produce_with(producer, self._published)

    def _republish_if_changed(self) -> None:
        snapshot = self._snapshot
        if snapshot is None:
            return
        with self._publish_lock:
            producer = self._producer
            current = snapshot()
            if producer is not None and current != self._published:
                self._published = current
                self._produce_with(producer, current)

    def publish_misplaced(self, topic: str) -> None:
        """Tell every instance (now and after restarts) that ``topic`` is not murmur2-placed."""
        producer = self._producer
        if producer is None:
            return
        key, value = _placement_record(topic)
        try:
            producer.produce(self.topic, value, key, partition=0)
            producer.poll(0)
        except Exception as exc:  # the local file still keeps the verdict
            log.warning("could not publish the key placement of %s: %s", topic, exc)

    def _produce_with(self, producer: Any, snapshot: InstanceSnapshot | None) -> None:
        key = str(self.host).encode()
        value = snapshot.to_json(self.host) if snapshot is not None else None
        try:
            producer.produce(self.topic, value, key, partition=0)
            producer.poll(0)
        except Exception as exc:  # routing metadata must never break processing
            log.warning("could not publish instance metadata: %s", exc)
            return
        with self._entries_lock:
            self._own_pending = None if value is None else (value, _parse(key, value))

    # ------------------------------------------------------------------ reading

    def _read(self) -> None:
        consumer = create_consumer(
            {
                **self._base,
                "group.id": f"{self.config.application_id}-metadata-reader",
                "client.id": f"{self.config.effective_client_id}-metadata-reader",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 50,
                "fetch.queue.backoff.ms": 10,
            }
        )
        try:
            consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            next_check = time.monotonic() + REPUBLISH_S
            while not self._stop.is_set():
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + REPUBLISH_S
                    self._republish_if_changed()
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        self._caught_up.set()
                    else:
                        log.debug("metadata reader: %s", err)
                    continue
                self._apply(msg.key(), msg.value(), msg.offset() or 0)
        except Exception:
            log.exception("metadata reader stopped")
        finally:
            consumer.close()

    def _apply(self, key: bytes | None, value: bytes | None, offset: int) -> None:
        if key is None:
            return
        if key.startswith(PLACEMENT_KEY_PREFIX.encode()):
            if value is not None and self._on_misplaced is not None:
                self._on_misplaced(key[len(PLACEMENT_KEY_PREFIX) :].decode(errors="replace"))
            return
        try:
            host = HostInfo.parse(key.decode())
        except (UnicodeDecodeError, ValueError):
            log.warning("ignoring metadata record with key %r", key)
            return
        with self._entries_lock:
            if host == self.host and self._own_pending is not None and value == self._own_pending[0]:
                self._own_pending = None  # read back: its offset now ranks it
            if value is None:
                self._entries.pop(host, None)
                return
            try:
                self._entries[host] = _Entry(offset, _parse(key, value))
            except (ValueError, TypeError) as exc:
                log.warning("ignoring malformed metadata record of %s: %s", host, exc)

    # ------------------------------------------------------------------ lookups

    def _current(self) -> list[_Entry]:
        """Every instance's entry, this instance's own not-yet-read publication ranked newest.
        The caller holds ``_entries_lock``."""
        pending = self._own_pending
        if pending is None:
            return list(self._entries.values())
        others = [e for host, e in self._entries.items() if host != self.host]
        return [*others, _Entry(_UNREAD_OFFSET, pending[1])]

    def all_instances(self) -> list[StreamsMetadata]:
        with self._entries_lock:
            entries = self._current()
        return [e.metadata for e in sorted(entries, key=lambda e: e.metadata.host_info)]

    def active_host(self, task: str) -> HostInfo | None:
        """The instance that claimed ``task`` (e.g. ``"0_3"``) last, None if nobody does (or
        the instance the streams group gives it to, see :attr:`group_hosts`)."""
        hosts = self._broker_hosts()
        if hosts is not None:
            return hosts.active_host(task)
        with self._entries_lock:
            claims = [e for e in self._current() if task in e.metadata.active_tasks]
        if not claims:
            return None
        return max(claims, key=lambda e: e.offset).metadata.host_info

    def standby_hosts(self, task: str) -> frozenset[HostInfo]:
        hosts = self._broker_hosts()
        if hosts is not None:
            return hosts.standby_hosts(task)
        with self._entries_lock:
            entries = self._current()
        return frozenset(e.metadata.host_info for e in entries if task in e.metadata.standby_tasks)

    def _broker_hosts(self) -> TaskHosts | None:
        group = self.group_hosts
        return None if group is None else group.current()
