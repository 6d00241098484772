"""Changelog compaction on Spark: the latest value of every key, as state snapshots.

Kafka's log compaction keeps a changelog's size proportional to its keys, but only
eventually, only on brokers that compact (not all do), and a restore still reads the
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
exactly as the store keeps them. Key-value, window and session stores restore from these
snapshots (see :mod:`platform_streams.state.snapshot_restore`); window and session stores
keep only what their retention keeps, and an incremental run reads only the changelog after
the previous snapshots (both in :mod:`.snapshot_layers`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession

from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin
from platform_streams.ops.changelog_truncation import snapshot_restorable
from platform_streams.ops.spark.kafka_ranges import OffsetRange, RawRecord, admin_conf, plan_offset_ranges
from platform_streams.ops.spark.kafka_source import KafkaReader, read_ranges, resolve_reader
from platform_streams.ops.spark.s3a import parquet_writable
from platform_streams.ops.spark.snapshot_layers import (
    LayeredSnapshotWriter,
    expire_below_floor,
    plan_incremental,
    segmented_snapshot_stores,
    split_fallbacks,
    start_offsets,
    stream_times,
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
from platform_streams.processor.serialized_record import SerializedRecord
from platform_streams.serde import Serde
from platform_streams.state.builders import KeyValueStoreBuilder
from platform_streams.state.restore import deletes_by_retention
from platform_streams.state.segmented_snapshots import SegmentedLayout
from platform_streams.state.snapshots import (
    SnapshotCatalog,
    SnapshotManifest,
    SnapshotStore,
    open_snapshot_store,
)
from platform_streams.state.timestamped import ValueAndTimestampSerde
from platform_streams.state.timestamped_builders import TimestampedKeyValueStoreBuilder, resolve_serde
from platform_streams.state.wrappers.base import changelog_topic_name
from platform_streams.topology.compiler import compile_topology
from platform_streams.topology.topology import Topology

__all__ = ["CompactionResult", "compact_application", "compact_changelog", "snapshot_stores"]

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
    #: partition -> first changelog offset left out (written for uncommitted input)
    cuts: dict[int, int] = field(default_factory=dict)
    parquet_uri: str | None = None
    #: the Kafka reader that read the changelog ("spark-kafka" or "confluent")
    reader: str = ""
    #: partition -> why an incremental run wrote no snapshot of it (a truncated changelog)
    skipped: dict[int, str] = field(default_factory=dict)
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


class _CommittedPrefix:
    """Keeps only the prefix of each partition written for committed input, compacted.

    The runtime stamps every changelog record with the input position it was written for
    (``__ps_src``), and the records that a restore may apply form a prefix of the log
    (:mod:`platform_streams.runtime.restore.changelog_filter`). A snapshot must cover that prefix
    and nothing after it: records of input not committed yet (in flight, or leaked by a
    crashed producer) are left to the tail, where the worker's restore judges them with
    the offsets committed by then. A task stops at its range's first such record and
    reports the offset as a cut; the driver cuts each partition at its lowest.

    Spark ``mapPartitions`` function over the records of one planned range (either reader
    of :mod:`.kafka_source`), in offset order.
    """

    def __init__(self, source_topics: Sequence[str] | None, committed: Mapping[tuple[str, int], int]) -> None:
        self.source_topics = list(source_topics or ())
        self.committed = dict(committed)

    def __call__(self, records: Iterable[RawRecord]) -> Iterator[tuple[str, Any, Any]]:
        task_logger(__name__)
        for (_topic, partition), run in groupby(records, key=lambda r: (r[0], r[1])):
            rows: list[CompactedRow] = []
            cut = self._read(partition, run, rows)
            for key, update in latest_per_key(rows):
                yield "row", key, update
            if cut is not None:
                yield "cut", partition, cut

    def _read(self, partition: int, run: Iterable[RawRecord], rows: list[CompactedRow]) -> int | None:
        judge = None
        if self.source_topics:
            from platform_streams.runtime.restore.changelog_filter import CommittedInputFilter

            judge = CommittedInputFilter([(t, partition) for t in self.source_topics], self.committed)
        for topic, _p, offset, key, value, ts, headers in run:
            if judge is not None and not judge.is_committed(
                SerializedRecord(topic, partition, offset, key, value, ts, headers)
            ):
                return offset
            if key is not None:
                rows.append(((partition, key), (offset, value)))
        return None


def _is_row(item: tuple[str, Any, Any]) -> bool:
    return item[0] == "row"


def _row(item: tuple[str, Any, Any]) -> CompactedRow:
    return item[1], item[2]


def _partition_number(key: tuple[int, bytes]) -> int:
    return key[0]


def compact_changelog(
    spark: SparkSession,
    consumer_conf: Mapping[str, Any],
    application_id: str,
    store: str,
    snapshots: SnapshotStore | str | Path,
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
    source_topics: Sequence[str] | None = None,
    reader: KafkaReader | None = None,
    layout: SegmentedLayout | None = None,
    incremental: bool = False,
    skip_bases: Iterable[str] = (),
    from_zero: bool = True,
) -> CompactionResult:
    """Compact ``store``'s changelog into one snapshot per partition and publish them.

    ``consumer_conf`` needs ``bootstrap.servers`` (plus any security settings).
    ``partitions`` limits the run to some changelog partitions. ``keep`` prunes older
    snapshots of each partition afterwards. ``key_serde``/``value_serde`` (the serdes of
    the bytes in the changelog, e.g. a ``ValueAndTimestampSerde`` for DSL tables) add
    decoded JSON columns to the Parquet copy. ``source_topics`` (the physical input topics
    of the store's sub-topology) enables the committed-input cut: each partition's snapshot
    ends before its first changelog record written for input the application has not
    committed yet (see :class:`_CommittedPrefix`); without them every record counts.
    ``reader`` chooses Spark's Kafka source or confluent-kafka (:mod:`.kafka_source`);
    both give the same snapshots. ``layout`` makes it a window/session store's snapshot
    (its retention applies). ``incremental`` builds on each partition's newest snapshot and
    reads only the changelog after it; partitions without a usable one are compacted in
    full (:mod:`.snapshot_layers`; ``skip_bases``: snapshot ids not to build on). An
    incremental run writes no Parquet copy. A full run of a key-value changelog (one that
    keeps every record until DeleteRecords: ``from_zero``) refuses partitions that no
    longer start at 0.
    """
    started = time.monotonic()
    target = snapshots if isinstance(snapshots, SnapshotStore) else open_snapshot_store(snapshots)
    topic = changelog_topic or changelog_topic_name(application_id, store)
    run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"
    bases: dict[int, SnapshotManifest] = {}
    blocked: dict[int, str] = {}
    if incremental:
        layers = plan_incremental(
            target, consumer_conf, application_id, store, topic, layout, skip=skip_bases
        )
        chosen = _partitions(consumer_conf, topic, partitions)
        bases = {p: m for p, m in layers.bases.items() if p in chosen}
        blocked = {p: why for p, why in layers.blocked.items() if p in chosen}
        for partition, why in sorted(blocked.items()):
            log.error("%s partition %d: no snapshot written: %s", topic, partition, why)
        partitions = [p for p in chosen if p not in blocked]
    elif layout is None and from_zero:
        _refuse_truncated(consumer_conf, topic, partitions)
    ranges = plan_offset_ranges(
        consumer_conf,
        [topic],
        partitions=partitions,
        start=start_offsets(topic, bases),
        max_offsets_per_range=max_offsets_per_task,
        strict_start=True,  # a base snapshot's next offset must still be there
    )
    result = CompactionResult(run_id, topic, ranges, skipped=blocked)
    if not ranges:
        log.info("changelog %s has nothing %s: no snapshot to write", topic, "new" if bases else "in it")
        return result
    sc = spark.sparkContext
    result.reader = resolve_reader(spark, consumer_conf, reader)
    parquet = parquet and not bases and parquet_writable(spark, target)
    count = max(r.partition for r in ranges) + 1
    committed = _committed_offsets(consumer_conf, application_id, source_topics, count)
    sc.setJobDescription(f"compact {topic}: read {len(ranges)} ranges ({result.reader})")
    records = read_ranges(
        spark,
        consumer_conf,
        ranges,
        isolation_level=isolation_level,
        reader=result.reader,
        timeout_s=read_timeout_s,
    )
    read = records.mapPartitions(_CommittedPrefix(source_topics, committed)).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    compacted: Any = None
    try:
        cuts = dict(
            read.filter(lambda i: i[0] == "cut").map(lambda i: (i[1], i[2])).reduceByKey(min).collect()
        )
        result.cuts = cuts
        for partition, offset in sorted(cuts.items()):
            log.info(
                "partition %d: the snapshot stops before offset %d (uncommitted input)", partition, offset
            )
        sc.setJobDescription(f"compact {topic}: sort by key, write SST snapshots")
        rows = read.filter(_is_row).map(_row)
        rows = rows.filter(lambda row: row[1][0] < cuts.get(row[0][0], row[1][0] + 1))
        times = stream_times(rows, layout, bases) if layout is not None else {}
        if layout is not None:
            rows = rows.map(expire_below_floor(layout, times))
        compacted = rows.repartitionAndSortWithinPartitions(
            count, partitionFunc=_partition_number
        ).mapPartitions(latest_in_sorted, preservesPartitioning=True)
        if parquet:
            compacted.persist(StorageLevel.MEMORY_AND_DISK)
        writer: SnapshotWriter = SnapshotWriter(target, application_id, store, topic)
        if layout is not None or bases:
            writer = LayeredSnapshotWriter(
                target, application_id, store, topic, layout=layout, times=times, bases=bases
            )
        manifests, fallbacks = split_fallbacks(compacted.mapPartitions(writer).collect())
        if parquet:
            prefix = SnapshotCatalog.parquet_prefix(application_id, store, run_id)
            result.parquet_uri = target.uri(prefix)
            sc.setJobDescription(f"compact {topic}: Parquet copy")
            _write_parquet(spark, compacted, result.parquet_uri, key_serde, value_serde)
    finally:
        if compacted is not None:
            compacted.unpersist()
        read.unpersist()
        sc.setJobDescription(None)  # type: ignore[arg-type]
    result.manifests = commit_snapshots(target, manifests, parquet_uri=result.parquet_uri)
    if keep is not None:
        catalog = SnapshotCatalog(target)
        for manifest in result.manifests:
            catalog.prune(application_id, store, manifest.partition, keep)
    if fallbacks:
        for partition, reason in sorted(fallbacks.items()):
            log.warning("partition %d: %s; building on the next older snapshot instead", partition, reason)
        again = compact_changelog(
            spark,
            consumer_conf,
            application_id,
            store,
            target,
            changelog_topic=topic,
            partitions=sorted(fallbacks),
            isolation_level=isolation_level,
            max_offsets_per_task=max_offsets_per_task,
            parquet=False,
            keep=keep,
            read_timeout_s=read_timeout_s,
            source_topics=source_topics,
            reader=reader,
            layout=layout,
            incremental=True,
            skip_bases=[*skip_bases, *(bases[p].snapshot_id for p in fallbacks)],
        )
        result.ranges += again.ranges
        result.manifests = sorted(result.manifests + again.manifests, key=lambda m: m.partition)
        result.cuts.update(again.cuts)
        result.skipped.update(again.skipped)
    result.seconds = time.monotonic() - started
    log.info("%s", result.summary())
    return result


def _refuse_truncated(consumer_conf: Mapping[str, Any], topic: str, partitions: Iterable[int] | None) -> None:
    """A full compaction of a key-value changelog reads it from offset 0. Such a changelog is
    compact-only: a start above 0 means records were deleted (``snapshot truncate``), and a
    snapshot of what is left would miss every key last written below the cut (the offset
    planner raises a start below the log start to it). Refused; an incremental run builds
    on the snapshots the truncation kept. (A window/session changelog loses old records to
    its retention, as its store does: compacted in full from its start.)"""
    chosen = _partitions(consumer_conf, topic, partitions)
    if not chosen:
        return
    with KafkaAdmin(admin_conf(consumer_conf)) as admin:
        starts = admin.list_offsets([(topic, p) for p in chosen], "earliest")
    cut = {p: offset for (_, p), (offset, _ts) in sorted(starts.items()) if offset > 0}
    if cut:
        raise ValueError(
            f"changelog {topic}: partitions {sorted(cut)} start at offsets {list(cut.values())} (records "
            "below were deleted by a truncation): a full compaction would publish snapshots missing the "
            "keys last written below; use an incremental run (--incremental), which builds on the "
            "snapshots the truncation kept"
        )


def _partitions(consumer_conf: Mapping[str, Any], topic: str, partitions: Iterable[int] | None) -> list[int]:
    """``partitions``, or every partition of ``topic``."""
    if partitions is not None:
        return sorted(set(partitions))
    with KafkaAdmin(admin_conf(consumer_conf)) as admin:
        return list(range(admin.partition_counts([topic]).get(topic) or 0))


def _committed_offsets(
    consumer_conf: Mapping[str, Any], group: str, source_topics: Sequence[str] | None, partitions: int
) -> dict[tuple[str, int], int]:
    """The application's committed input offsets (0 where none), read once on the driver."""
    if not source_topics:
        return {}
    tps = [(t, p) for t in source_topics for p in range(partitions)]
    with KafkaAdmin(admin_conf(consumer_conf)) as admin:
        found = admin.committed_offsets(group, tps)
    return {tp: found.get(tp) or 0 for tp in tps}


def _write_parquet(
    spark: SparkSession, compacted: Any, uri: str, key_serde: Serde | None, value_serde: Serde | None
) -> None:
    make_row = parquet_rows(
        key_serde,
        value_serde,
    )
    rows = compacted.filter(lambda item: item[1][1] is not None).map(make_row)
    frame = spark.createDataFrame(rows, _PARQUET_SCHEMA)
    frame.write.mode("overwrite").partitionBy("partition").parquet(uri)


def snapshot_stores(topology: Topology, config: StreamsConfig) -> dict[str, tuple[Serde, Serde]]:
    """The stores of ``topology`` that snapshots can restore, with their changelog's serdes.

    Key-value stores (PAPI builders and DSL tables/aggregations) logged to their own
    ``<store>-changelog`` topic and kept in RocksDB as the run-time ``config`` builds them
    (the workers restore only those from snapshots: an in-memory store is rebuilt from its
    changelog); DSL values are stored as ``ValueAndTimestamp``.
    """
    plan = compile_topology(topology)
    restorable = snapshot_restorable(topology, config)
    out: dict[str, tuple[Serde, Serde]] = {}
    for name, builder in topology.stores.items():
        if plan.changelog_topic(name) != f"{name}-changelog" or restorable.get(name) != "key_value":
            continue
        if not isinstance(builder, TimestampedKeyValueStoreBuilder | KeyValueStoreBuilder):
            continue
        value = resolve_serde(builder.value_serde, config, "value")
        if isinstance(builder, TimestampedKeyValueStoreBuilder) or builder.timestamped:
            value = ValueAndTimestampSerde(value)
        out[name] = (resolve_serde(builder.key_serde, config, "key"), value)
    return out


def compact_application(
    spark: SparkSession,
    topology: Topology,
    config: StreamsConfig,
    snapshots: SnapshotStore | str | None = None,
    *,
    stores: Iterable[str] | None = None,
    **options: Any,
) -> dict[str, CompactionResult]:
    """Snapshot every restorable store of an application (or the named ``stores``).

    The location defaults to ``config.state_snapshot_location``; ``options`` go to
    :func:`compact_changelog`. The Parquet copies of key-value stores get decoded columns
    from the stores' serdes (window/session stores' copies keep raw bytes).
    """
    target = snapshots if snapshots is not None else config.state_snapshot_location
    if target is None:
        raise ValueError("no snapshot location: pass one or set state_snapshot_location")
    eligible: dict[str, tuple[Serde | None, Serde | None]] = dict(snapshot_stores(topology, config))
    restorable = snapshot_restorable(topology, config)
    layouts = {
        name: layout
        for name, layout in segmented_snapshot_stores(topology, config).items()
        if restorable.get(name) == "segmented"
    }
    eligible.update((name, (None, None)) for name in layouts)
    plan = compile_topology(topology)
    chosen = list(stores) if stores is not None else sorted(eligible)
    unknown = [s for s in chosen if s not in eligible]
    if unknown:
        raise ValueError(
            f"cannot snapshot {unknown}: snapshots cover persistent key-value, window and session stores "
            f"logged to their own changelog ({sorted(eligible) or 'none in this topology'})"
        )
    consumer_conf = config.restore_consumer_configs()
    options.setdefault("isolation_level", "read_committed")
    results = {}
    for name in chosen:
        key_serde, value_serde = eligible[name]
        sub = plan.subtopology_of_store(name)
        results[name] = compact_changelog(
            spark,
            consumer_conf,
            config.application_id,
            name,
            target,
            key_serde=key_serde,
            value_serde=value_serde,
            source_topics=[plan.physical_topic(t, config.application_id) for t in sub.source_topics],
            layout=layouts.get(name),
            from_zero=not deletes_by_retention(topology.stores[name]),
            **options,
        )
    return results
