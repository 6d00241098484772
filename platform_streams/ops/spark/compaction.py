"""Changelog compaction on Spark: the latest value of every key, as state snapshots.

Kafka's log compaction keeps a changelog's size proportional to its keys, but only
eventually, only on brokers that compact (Tansu does not), and a restore still reads the
whole compacted log record by record. This job does what compaction promises, on demand,
and turns the result into files a worker ingests in milliseconds::

    driver:   offset ranges of every changelog partition, up to the log end seen by fetching
    stage 1:  one task per range reads it (read_committed) and keeps the latest record per key
    shuffle:  by changelog partition, sorted by key (Spark's external sort: spills, never OOMs)
    stage 2:  one task per partition keeps the highest offset per key, drops tombstones,
              writes the SST file, uploads it and returns its manifest
    Parquet:  the same compacted rows for analysts (raw bytes; JSON text when serdes are given)
    driver:   manifests written last (the snapshots appear all at once)

It works on raw bytes, so it is format-agnostic: a timestamped store's values stay wrapped,
exactly as the store keeps them. Only key-value stores restore from these snapshots (see
:mod:`platform_streams.state.snapshot_restore`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from platform_streams.ops.spark.kafka_ranges import (
    OffsetRange,
    RawRecord,
    plan_offset_ranges,
    read_offset_ranges,
    reader_conf,
)
from platform_streams.ops.spark.snapshots import (
    CompactedRow,
    SnapshotWriter,
    commit_snapshots,
    latest_in_sorted,
    latest_per_key,
    parquet_rows,
    task_logger,
)
from platform_streams.serde import Serde
from platform_streams.state.snapshots import (
    SnapshotCatalog,
    SnapshotManifest,
    SnapshotStore,
    open_snapshot_store,
)
from platform_streams.state.wrappers.base import changelog_topic_name

__all__ = ["CompactionResult", "compact_changelog"]

log = logging.getLogger(__name__)

_PARQUET_SCHEMA = (
    "partition INT, key BINARY, value BINARY, offset BIGINT, key_decoded STRING, value_decoded STRING"
)


@dataclass
class CompactionResult:
    """What one compaction run read and published."""

    run_id: str
    changelog_topic: str
    ranges: list[OffsetRange]
    manifests: list[SnapshotManifest] = field(default_factory=list)
    parquet_uri: str | None = None
    seconds: float = 0.0

    @property
    def offsets_read(self) -> int:
        return sum(r.size for r in self.ranges)

    def summary(self) -> str:
        keys = sum(m.record_count for m in self.manifests)
        return (
            f"compacted {self.changelog_topic}: {self.offsets_read} offsets in {len(self.ranges)} ranges -> "
            f"{len(self.manifests)} snapshots, {keys} live keys, in {self.seconds:.1f}s"
        )


def _keyed(records: Iterable[RawRecord]) -> Iterator[CompactedRow]:
    for topic, partition, offset, key, value, _ts, _headers in records:
        if key is not None:
            yield (partition, key), (offset, value)


def _read_latest(
    conf: dict[str, Any], timeout_s: float, ranges: Iterable[OffsetRange]
) -> Iterator[CompactedRow]:
    task_logger(__name__)
    return latest_per_key(_keyed(read_offset_ranges(conf, ranges, timeout_s=timeout_s)))


def _partition_number(key: tuple[int, bytes]) -> int:
    return key[0]


def compact_changelog(
    spark: SparkSession,
    consumer_conf: Mapping[str, Any],
    application_id: str,
    store: str,
    snapshots: SnapshotStore | str,
    *,
    changelog_topic: str | None = None,
    partitions: Iterable[int] | None = None,
    isolation_level: str = "read_committed",
    max_offsets_per_task: int = 2_000_000,
    parquet: bool = True,
    key_serde: Serde | None = None,
    value_serde: Serde | None = None,
    keep: int | None = None,
    read_timeout_s: float = 60.0,
) -> CompactionResult:
    """Compact ``store``'s changelog into one snapshot per partition and publish them.

    ``consumer_conf`` needs ``bootstrap.servers`` (plus any security settings).
    ``partitions`` limits the run to some changelog partitions. ``keep`` prunes older
    snapshots of each partition afterwards. ``key_serde``/``value_serde`` (the serdes of
    the bytes in the changelog, e.g. a ``ValueAndTimestampSerde`` for DSL tables) add
    decoded JSON columns to the Parquet copy.
    """
    started = time.monotonic()
    target = snapshots if isinstance(snapshots, SnapshotStore) else open_snapshot_store(snapshots)
    topic = changelog_topic or changelog_topic_name(application_id, store)
    run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"
    ranges = plan_offset_ranges(
        consumer_conf, [topic], partitions=partitions, max_offsets_per_range=max_offsets_per_task
    )
    result = CompactionResult(run_id, topic, ranges)
    if not ranges:
        log.info("changelog %s is empty: no snapshot to write", topic)
        return result
    sc = spark.sparkContext
    conf = reader_conf(consumer_conf, isolation_level)
    count = max(r.partition for r in ranges) + 1
    sc.setJobDescription(f"compact {topic}: read {len(ranges)} ranges, sort by key")
    compacted = (
        sc.parallelize(ranges, len(ranges))
        .mapPartitions(lambda it: _read_latest(conf, read_timeout_s, it))
        .repartitionAndSortWithinPartitions(count, partitionFunc=_partition_number)
        .mapPartitions(latest_in_sorted, preservesPartitioning=True)
    )
    if parquet:
        compacted.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        writer = SnapshotWriter(target, application_id, store, topic)
        sc.setJobDescription(f"compact {topic}: write SST snapshots")
        manifests = compacted.mapPartitions(writer).collect()
        if parquet:
            prefix = SnapshotCatalog.parquet_prefix(application_id, store, run_id)
            result.parquet_uri = target.uri(prefix)
            sc.setJobDescription(f"compact {topic}: Parquet copy")
            _write_parquet(spark, compacted, result.parquet_uri, key_serde, value_serde)
    finally:
        compacted.unpersist()
        sc.setJobDescription(None)  # type: ignore[arg-type]
    result.manifests = commit_snapshots(target, manifests, parquet_uri=result.parquet_uri)
    if keep is not None:
        catalog = SnapshotCatalog(target)
        for manifest in result.manifests:
            catalog.prune(application_id, store, manifest.partition, keep)
    result.seconds = time.monotonic() - started
    log.info("%s", result.summary())
    return result


def _write_parquet(
    spark: SparkSession, compacted: Any, uri: str, key_serde: Serde | None, value_serde: Serde | None
) -> None:
    make_row = parquet_rows(
        key_serde.deserialize if key_serde is not None else None,
        value_serde.deserialize if value_serde is not None else None,
    )
    rows = compacted.filter(lambda item: item[1][1] is not None).map(make_row)
    frame = spark.createDataFrame(rows, _PARQUET_SCHEMA)
    frame.write.mode("overwrite").partitionBy("partition").parquet(uri)
