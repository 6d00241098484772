"""Broker capability probes: what the broker really does, found by trying it, not by name.

The embedded Tansu broker advertises APIs it does not implement the way Apache Kafka does
(the project's broker notes list them), so ApiVersions cannot tell. Each probe here makes
the smallest request that shows the difference, on a scratch topic it deletes again:

* ``delete_records`` -- DeleteRecords works (Tansu drops the connection). Used to purge
  consumed repartition records after a commit, as Kafka Streams does.
* ``txn_offset_commit_fencing`` -- a transactional offset commit from a stale group
  member is rejected (KIP-447: ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID on Kafka; Tansu
  accepts it). Where it is, the broker alone fences a zombie and the worker's extra
  membership-check commits are unnecessary.
* ``aborts_fenced_transactions`` -- when a new producer initialises a transactional.id, the
  coordinator aborts the transaction its previous incarnation left open (Kafka; Tansu
  commits it). Where it does, a record sent in an open transaction can always be taken back,
  so exactly-once workers send records as they come instead of holding them until the commit.
* ``offsets_only_transactions`` -- a transaction holding input offsets and no records
  stores them, every time (Kafka; Tansu stores them for a producer's first transaction only
  and drops them without an error afterwards). Where it does not, an exactly-once worker
  commits offsets that no record goes with as a plain, membership-checked offset commit.
* ``exact_list_offsets`` -- ListOffsets(latest) is the log end and ListOffsets(timestamp)
  matches record timestamps (Tansu answers the last batch's start + 1, and matches its own
  write time). Where it is, log ends and time lookups come from ListOffsets directly.

Two behaviours cannot be provoked on demand, so they are answered by the probe of the
storage they come from (``STORAGE_BEHAVIOURS``; docs/brokers.md, "Features are probed"):

* ``high_watermark_after_append`` -- the high watermark moves only once a batch is stored,
  so a fetch never skips a batch still being stored (a race inside the broker).
* ``fetch_answers_when_wait_expires`` -- a fetch whose ``fetch.wait.max.ms`` runs out is
  answered with what the broker has, however large the partition (a slow read of hundreds
  of thousands of records).

Both hold on a broker that keeps each partition as one appended log, and that broker's
ListOffsets is exact; both fail on Tansu's memory storage, whose ListOffsets answers a
batch's start (``exact_list_offsets``).

Results are cached per ``bootstrap.servers`` for the life of the process (a broker does
not change what it supports under a running application), so many workers and tools in
one process probe once. A probe that answers "no" is cached; one that cannot finish (a
slow or starting broker) is retried once and then counts as "unsupported" for that caller
only, without caching: the fallbacks are correct on every broker, only slower.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from platform_streams.errors import StreamsTimeoutError
from platform_streams.kafka.admin_groups import wait_result
from platform_streams.kafka.clients import create_admin, create_producer
from platform_streams.kafka.errors import as_kafka_error
from platform_streams.kafka.log_reader import read_partition_range

if TYPE_CHECKING:
    from platform_streams.kafka.admin import KafkaAdmin

__all__ = ["FEATURES", "STORAGE_BEHAVIOURS", "broker_supports", "known_support"]

_log = logging.getLogger(__name__)

_cache: dict[tuple[str, str], bool] = {}
_ATTEMPTS = 2
_TXN_TIMEOUT_S = 60.0  # init_transactions on a fresh broker waits for __transaction_state
_lock = threading.Lock()


def broker_supports(admin: KafkaAdmin, feature: str) -> bool:
    """Whether the broker behind ``admin`` supports ``feature``; probed once per process."""
    feature = STORAGE_BEHAVIOURS.get(feature, feature)
    if feature not in FEATURES:
        known = sorted([*FEATURES, *STORAGE_BEHAVIOURS])
        raise ValueError(f"unknown broker feature {feature!r}; known: {known}")
    key = (str(admin.conf.get("bootstrap.servers", "")), feature)
    with _lock:
        if key in _cache:
            return _cache[key]
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                _cache[key] = FEATURES[feature](admin)
            except Exception as exc:  # inconclusive (a slow or starting broker): try again
                _log.debug("probe %s attempt %d was inconclusive: %r", feature, attempt, exc)
                last: Exception = exc
                continue
            _log.info("broker feature %s supported: %s", feature, _cache[key])
            return _cache[key]
        # not cached: the next caller probes again; until then do not rely on the feature.
        # A least-privilege principal may not create the probe's scratch resources: that is
        # expected (docs/security.md), not worth a warning line on every command.
        denied = "AUTHORIZATION_FAILED" in repr(last).upper()
        _log.log(
            logging.INFO if denied else logging.WARNING,
            "could not find out whether the broker supports %s (%r): assuming not",
            feature,
            last,
        )
        return False


def known_support(conf: Mapping[str, Any], feature: str) -> bool | None:
    """What an earlier probe of this process found for ``conf``'s broker, None if nobody asked.

    For clients that hold no admin (readers): never probes, never waits.
    """
    feature = STORAGE_BEHAVIOURS.get(feature, feature)
    return _cache.get((str(conf.get("bootstrap.servers", "")), feature))


def _scratch_topic(admin: KafkaAdmin, feature: str) -> str:
    from platform_streams.kafka.admin import TopicSpec

    name = f"platform-streams-probe-{feature.replace('_', '-')}-{uuid.uuid4().hex[:12]}"
    admin.create_topics([TopicSpec(name, 1)], timeout=15.0)
    return name


def _drop(admin: KafkaAdmin, topic: str) -> None:
    try:
        admin.delete_topics([topic], timeout=15.0)
    except Exception as exc:  # the probe's verdict matters more than the cleanup
        _log.warning("could not delete probe topic %s: %s", topic, exc)


def _probe_delete_records(admin: KafkaAdmin) -> bool:
    """DeleteRecords before offset 0 of an empty partition: a valid no-op on Kafka.

    Tansu answers by closing the connection (its handler panics), so the request goes
    through a separate client whose connection may be lost, bounded by a short timeout.
    """
    scratch = _scratch_topic(admin, "delete_records")
    try:
        probe_client = create_admin({**admin.conf, "log_level": 0})
        futures = probe_client.delete_records(
            [TopicPartition(scratch, 0, 0)], request_timeout=5.0, operation_timeout=5.0
        )
        deadline = time.monotonic() + 8.0
        for future in futures.values():
            wait_result(future.result, deadline, "probe DeleteRecords")
        return True
    except (KafkaException, StreamsTimeoutError) as exc:  # what Tansu's dropped connection gives
        _log.debug("DeleteRecords probe failed: %s", exc)
        return False
    finally:
        _drop(admin, scratch)


def stale_group_metadata(group_id: str, generation: int = 3, member_id: str = "probe-member") -> bytes:
    """Consumer group metadata of a member that is not in ``group_id`` (for probes only).

    confluent-kafka hands group metadata around as librdkafka's serialized form
    (``rd_kafka_consumer_group_metadata_write``: magic, native int32 generation, group id,
    member id, "no instance id" flag); a stale member is one whose generation the group
    never had. Building it saves joining and leaving a group just to become stale.
    """
    return (
        b"CGMDv2:"
        + struct.pack("=i", generation)
        + group_id.encode()
        + b"\0"
        + member_id.encode()
        + b"\0\x01"
    )


_FENCING_CODES = frozenset(
    {KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID, KafkaError.FENCED_INSTANCE_ID}
)


def _probe_txn_offset_commit_fencing(admin: KafkaAdmin) -> bool:
    """Commit an offset in a transaction as a member the group never had: Kafka refuses."""
    scratch = _scratch_topic(admin, "txn_offset_commit_fencing")
    producer = create_producer(
        {**admin.conf, "transactional.id": f"platform-streams-probe-{uuid.uuid4().hex}", "log_level": 0}
    )
    try:
        producer.init_transactions(_TXN_TIMEOUT_S)
        producer.begin_transaction()
        group = f"platform-streams-probe-{uuid.uuid4().hex[:12]}"
        try:
            producer.send_offsets_to_transaction(
                [TopicPartition(scratch, 0, 0)], stale_group_metadata(group), _TXN_TIMEOUT_S
            )
            producer.commit_transaction(_TXN_TIMEOUT_S)
        except KafkaException as exc:
            err = as_kafka_error(exc)
            if err is not None and err.code() in _FENCING_CODES:
                return True
            raise  # another failure says nothing about fencing
        return False
    finally:
        _drop(admin, scratch)


def _probe_aborts_fenced_transactions(admin: KafkaAdmin) -> bool:
    """A producer leaves a record in an open transaction; a new one takes its transactional.id.

    Kafka's coordinator aborts the open transaction (a read_committed reader sees nothing);
    Tansu commits it (the reader sees the record).
    """
    scratch = _scratch_topic(admin, "aborts_fenced_transactions")
    transactional_id = f"platform-streams-probe-{uuid.uuid4().hex}"
    conf = {**admin.conf, "transactional.id": transactional_id, "log_level": 0}
    try:
        first = create_producer(conf)
        first.init_transactions(_TXN_TIMEOUT_S)
        first.begin_transaction()
        first.produce(scratch, b"left open", partition=0)
        if first.flush(10.0):
            raise StreamsTimeoutError("probe record not acknowledged")
        create_producer(conf).init_transactions(_TXN_TIMEOUT_S)  # fences `first`
        committed = {**admin.conf, "isolation.level": "read_committed", "log_level": 0}
        visible = read_partition_range(committed, scratch, 0, OFFSET_BEGINNING, max_records=1, timeout_s=15.0)
        return not list(visible)
    finally:
        _drop(admin, scratch)


def _probe_offsets_only_transactions(admin: KafkaAdmin) -> bool:
    """Two transactions of one producer, each with only an offset for a scratch group: Kafka
    stores both; Tansu stores the first and silently drops the second."""
    scratch = _scratch_topic(admin, "offsets_only_transactions")
    group = f"platform-streams-probe-{uuid.uuid4().hex[:12]}"
    producer = create_producer(
        {**admin.conf, "transactional.id": f"platform-streams-probe-{uuid.uuid4().hex}", "log_level": 0}
    )
    try:
        producer.init_transactions(_TXN_TIMEOUT_S)
        for offset in (1, 2):
            producer.begin_transaction()
            # generation -1, no member: the commit of a client outside group management,
            # which Kafka accepts for a group that does not exist yet
            producer.send_offsets_to_transaction(
                [TopicPartition(scratch, 0, offset)], stale_group_metadata(group, -1, ""), _TXN_TIMEOUT_S
            )
            producer.commit_transaction(_TXN_TIMEOUT_S)
        # require_stable: Kafka answers once the second transaction's offsets are applied
        stored = admin.committed_offsets(group, [(scratch, 0)], 15.0, require_stable=True).get((scratch, 0))
        if stored not in (1, 2):
            raise StreamsTimeoutError(f"probe offsets not stored (read {stored})")  # inconclusive
        return stored == 2
    finally:
        try:
            admin.delete_group(group)
        except Exception as exc:  # the probe's verdict matters more than the cleanup
            _log.warning("could not delete probe group %s: %s", group, exc)
        _drop(admin, scratch)


def _probe_exact_list_offsets(admin: KafkaAdmin) -> bool:
    """20 records in 5 batches, timestamps an hour ago + 1..20 s: ListOffsets must say 20 and 7.

    (Recent timestamps: ancient ones could make time-based retention delete the segment.)
    """
    scratch = _scratch_topic(admin, "exact_list_offsets")
    base = int(time.time() * 1000) - 3_600_000
    try:
        producer = create_producer({**admin.conf, "linger.ms": 0, "log_level": 0})
        for batch in range(5):
            for i in range(4):
                n = batch * 4 + i
                producer.produce(scratch, b"v", partition=0, timestamp=base + (n + 1) * 1000)
            if producer.flush(10.0):
                return False
        latest = admin.list_offsets([(scratch, 0)], "latest")[(scratch, 0)][0]
        at_time = admin.list_offsets([(scratch, 0)], base + 7500)[(scratch, 0)]
        return latest == 20 and at_time == (7, base + 8000)
    finally:
        _drop(admin, scratch)


FEATURES: dict[str, Callable[[Any], bool]] = {
    "delete_records": _probe_delete_records,
    "txn_offset_commit_fencing": _probe_txn_offset_commit_fencing,
    "exact_list_offsets": _probe_exact_list_offsets,
    "aborts_fenced_transactions": _probe_aborts_fenced_transactions,
    "offsets_only_transactions": _probe_offsets_only_transactions,
}

#: behaviours that cannot be provoked on demand, and the probe that answers them (module docstring)
STORAGE_BEHAVIOURS: dict[str, str] = {
    "high_watermark_after_append": "exact_list_offsets",
    "fetch_answers_when_wait_expires": "exact_list_offsets",
}
