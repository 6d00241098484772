"""The Kafka boundary: the only package of platform_streams that imports confluent_kafka.

Everything else reaches Kafka through the names below, so the client library, its
quirks and the broker's quirks (the embedded Tansu broker differs from Apache Kafka in
many ways) are dealt with in one place:

* client types and constants re-exported from confluent-kafka (``Consumer``,
  ``Producer``, ``TopicPartition``, ``Message``, ``KafkaError``, offsets, timestamps);
* factories that validate and log configurations (:mod:`.clients`);
* error classification and translation to :class:`~platform_streams.errors.BrokerError`
  (:mod:`.errors`);
* a blocking admin facade returning plain data (:mod:`.admin`, groups in :mod:`.admin_groups`);
* log positions that are right on Kafka and Tansu: log end, offset for a time (:mod:`.positions`);
* a partition range reader that finds the log end from fetches (:mod:`.log_reader`);
* what the broker really does, probed (:mod:`.capabilities`).

The local brokers (the embedded one, Apache Kafka from its jars) are development tools:
:mod:`platform_streams.dev.brokers`.
"""

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from platform_streams.kafka.admin import KafkaAdmin, TopicSpec
from platform_streams.kafka.admin_groups import GroupDescription, GroupMember, rejoin_group_once
from platform_streams.kafka.clients import (
    create_admin,
    create_consumer,
    create_producer,
    group_membership,
    redact_config,
)
from platform_streams.kafka.errors import (
    as_kafka_error,
    is_denied,
    is_fatal,
    is_fenced,
    is_retriable,
    is_txn_requires_abort,
    to_broker_error,
)
from platform_streams.kafka.fetch_wait import FetchWaitEscalation
from platform_streams.kafka.log_reader import (
    LogEndListener,
    PartitionReader,
    high_watermark_from_fetch,
    read_partition_batches,
    read_partition_range,
)
from platform_streams.kafka.positions import TimeLookup, empty_partitions, log_end_offsets, offsets_for_time

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "AdminClient",
    "Consumer",
    "FetchWaitEscalation",
    "GroupDescription",
    "GroupMember",
    "KafkaAdmin",
    "KafkaError",
    "KafkaException",
    "LogEndListener",
    "Message",
    "PartitionReader",
    "Producer",
    "TimeLookup",
    "TopicPartition",
    "TopicSpec",
    "as_kafka_error",
    "create_admin",
    "create_consumer",
    "create_producer",
    "empty_partitions",
    "group_membership",
    "high_watermark_from_fetch",
    "is_denied",
    "is_fatal",
    "is_fenced",
    "is_retriable",
    "is_txn_requires_abort",
    "log_end_offsets",
    "offsets_for_time",
    "read_partition_batches",
    "read_partition_range",
    "redact_config",
    "rejoin_group_once",
    "to_broker_error",
]
