"""A backfill's final state, handed to the streaming application: seeded changelogs + snapshots.

After a backfill each store partition's final state is known (the latest value per key of
what the tasks wrote to their changelog). For a streaming application to *continue* from
it, two things must hold, as if the application itself had processed the history:

* the changelog must contain that state -- it stays the source of truth: later
  compactions and full restores read it. So the state is produced to the (empty)
  changelog partition, one record per live key;
* a snapshot covers exactly those records (its offset is the last one produced), so a
  worker ingests it instead of replaying them;
* optionally, the application's group commits the offsets the backfill read up to, so it
  resumes the input right after the history.

Refused when a changelog partition is not empty (the state would mix with an older one:
reset the application first) or when the group has active members.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from itertools import groupby
from typing import Any

from pyspark import RDD

from platform_streams.config import StreamsConfig
from platform_streams.kafka import (
    KafkaAdmin,
    TopicPartition,
    create_consumer,
    create_producer,
    log_end_offsets,
)
from platform_streams.ops.spark.kafka_ranges import admin_conf
from platform_streams.ops.spark.snapshots import CompactedRow, SnapshotWriter, commit_snapshots, task_logger
from platform_streams.ops.spark.task_runner import Output
from platform_streams.state.snapshots import SnapshotManifest, SnapshotStore

__all__ = ["commit_input_offsets", "seed_and_snapshot"]

log = logging.getLogger(__name__)


def _state_row(topic: str, row: Output) -> bool:
    return row[0] == "state" and row[1] == topic


def _compacted(row: Output) -> CompactedRow:
    _kind, _topic, partition, key, value, _ts, _headers, _seq = row
    assert key is not None
    return (partition, key), (0, value)


def _partition_number(key: tuple[int, bytes]) -> int:
    return key[0]


class _SeedingWriter:
    """Spark task: produce a partition's state to its changelog, then snapshot those records."""

    def __init__(
        self, producer_conf: Mapping[str, Any], topic: str, store: SnapshotStore, app_id: str, store_name: str
    ) -> None:
        self.producer_conf = dict(producer_conf)
        self.topic = topic
        self.store = store
        self.app_id = app_id
        self.store_name = store_name

    def __call__(self, rows: Iterable[CompactedRow]) -> Iterator[dict[str, Any]]:
        logger = task_logger(__name__)
        for partition, group in groupby(rows, key=lambda row: row[0][0]):
            live = [row for row in group if row[1][1] is not None]
            if not live:
                continue
            last = self._produce(partition, live)
            logger.info("seeded %s-%d with %d keys (last offset %d)", self.topic, partition, len(live), last)
            positioned = [(key, (last, value)) for key, (_o, value) in live]
            writer = SnapshotWriter(
                self.store,
                self.app_id,
                self.store_name,
                self.topic,
                source="backfill",
                offsets={partition: last},
            )
            yield from writer(iter(positioned))

    def _produce(self, partition: int, rows: list[CompactedRow]) -> int:
        offsets: list[int] = []
        errors: list[str] = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                offsets.append(msg.offset())

        producer = create_producer({**self.producer_conf, "on_delivery": on_delivery})
        for (_p, key), (_o, value) in rows:
            while True:
                try:
                    producer.produce(self.topic, value, key, partition)
                    break
                except BufferError:
                    producer.poll(0.05)
        remaining = producer.flush(60)
        if remaining or errors or len(offsets) != len(rows):
            raise RuntimeError(
                f"seeding {self.topic}-{partition}: {remaining} undelivered, errors {errors[:3]}"
            )
        return max(offsets)


def seed_and_snapshot(
    outputs: RDD[Any],
    config: StreamsConfig,
    stores: Mapping[str, tuple[str, int]],
    snapshots: SnapshotStore,
) -> list[SnapshotManifest]:
    """Seed each store's changelog with its final state and publish snapshots of it.

    ``outputs`` are the backfill stages' rows (their ``"state"`` rows are used); ``stores``
    maps a store name to its physical changelog topic and partition count.
    """
    consumer_conf = config.restore_consumer_configs()
    tps = [(topic, p) for topic, count in stores.values() for p in range(count)]
    with KafkaAdmin(admin_conf(consumer_conf)) as admin:
        earliest = {tp: off for tp, (off, _ts) in admin.list_offsets(tps, "earliest").items()}
    ends = log_end_offsets(consumer_conf, tps)
    busy = sorted(f"{t}-{p}" for (t, p) in tps if ends[(t, p)] > max(earliest[(t, p)], 0))
    if busy:
        raise ValueError(f"changelog partitions are not empty: {busy}; reset the application before seeding")
    producer_conf = {k: v for k, v in config.producer_configs().items() if k != "transactional.id"}
    published: list[SnapshotManifest] = []
    for name, (topic, count) in sorted(stores.items()):
        writer = _SeedingWriter(producer_conf, topic, snapshots, config.application_id, name)
        manifests = (
            outputs.filter(partial(_state_row, topic))
            .map(_compacted)
            .repartitionAndSortWithinPartitions(count, partitionFunc=_partition_number)
            .mapPartitions(writer)
            .collect()
        )
        published += commit_snapshots(snapshots, manifests)
    return published


def commit_input_offsets(config: StreamsConfig, offsets: Mapping[tuple[str, int], int]) -> None:
    """Commit ``offsets`` (next offsets to read) for the application's group, which must be idle."""
    if not offsets:
        return
    group = config.application_id
    with KafkaAdmin(admin_conf(config.restore_consumer_configs())) as admin:
        state = admin.group_state(group)
    if state not in ("EMPTY", "DEAD", "UNKNOWN"):
        raise ValueError(f"group {group} is {state}: stop the application before committing backfill offsets")
    conf = {k: v for k, v in config.restore_consumer_configs().items() if k != "enable.partition.eof"}
    consumer = create_consumer({**conf, "group.id": group})
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()
    log.info("committed backfill end offsets for group %s: %s", group, dict(offsets))
