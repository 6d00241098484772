"""Compaction beyond key-value stores and beyond full runs: window/session and incremental snapshots.

**Window and session stores.** Their changelog keys are the store's binary keys
(``key + window start + seqnum``, ``key + session end + session start``), so the same
latest-value-per-key compaction applies, with the store's retention on top
(:mod:`platform_streams.state.segmented_snapshots`): the driver takes each partition's
stream time (the largest record time up to the snapshot's offset, tombstones included),
and rows below the retention floor at that time become tombstones -- they still move the
offset covered, they are written nowhere.

**Incremental snapshots.** A run that finds a usable previous snapshot of a partition
reads only the changelog after that snapshot's offset, compacts it as usual (shuffle and
sort the delta only), and in the writing task merges it with the previous snapshot's SST
(both in key order, one pass): the delta wins, its tombstones delete, and for window and
session stores the floor of the new stream time drops what has expired since. The new
snapshot is complete (a restore reads it alone), equal to what a full compaction writes
at the same offset, and the previous one is untouched (prune decides when it goes).

The previous snapshot is the partition's newest of this store kind and retention that lies
inside the changelog as it is now (a recreated, shorter changelog, or one truncated past
it, makes it unusable). Its SST is checked against the manifest's size and sha256 in the
task; a missing or corrupt one is reported back instead of a manifest, and the driver
runs those partitions again on the next older snapshot (see :func:`split_fallbacks`),
down to a full compaction -- which a key-value changelog truncated below its snapshots
cannot give: such a partition gets no new snapshot, with an error saying why
(:func:`plan_incremental`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.ops.spark.kafka_ranges import admin_conf
from platform_streams.ops.spark.snapshots import CompactedRow, SnapshotWriter
from platform_streams.state.segmented_snapshots import SegmentedLayout, read_sst, segmented_layout
from platform_streams.state.snapshots import (
    SNAPSHOT_FORMAT_VERSION,
    SnapshotCatalog,
    SnapshotManifest,
    SnapshotStore,
    file_checksum,
)
from platform_streams.topology.compiler import compile_topology
from platform_streams.topology.topology import Topology

__all__ = [
    "IncrementalPlan",
    "LayeredSnapshotWriter",
    "UnusableBase",
    "expire_below_floor",
    "merge_updates",
    "plan_incremental",
    "segmented_snapshot_stores",
    "split_fallbacks",
    "start_offsets",
    "stream_times",
]

log = logging.getLogger(__name__)

_FALLBACK = "fallback"


class UnusableBase(Exception):
    """The previous snapshot of a partition cannot be read back as it was published."""


def segmented_snapshot_stores(topology: Topology, config: StreamsConfig) -> dict[str, SegmentedLayout]:
    """The persistent window and session stores of ``topology`` logged to their own
    ``<store>-changelog``, with their retention layout."""
    plan = compile_topology(topology)
    out: dict[str, SegmentedLayout] = {}
    for name, builder in topology.stores.items():
        if plan.changelog_topic(name) != f"{name}-changelog":
            continue
        layout = segmented_layout(builder)
        if layout is not None:
            out[name] = layout
    return out


@dataclass
class IncrementalPlan:
    """What an incremental run builds on, per changelog partition."""

    #: partition -> the snapshot its read starts after
    bases: dict[int, SnapshotManifest] = field(default_factory=dict)
    #: partition -> why it gets no snapshot in this run (see :func:`plan_incremental`)
    blocked: dict[int, str] = field(default_factory=dict)


def plan_incremental(
    target: SnapshotStore,
    consumer_conf: Mapping[str, Any],
    application_id: str,
    store: str,
    topic: str,
    layout: SegmentedLayout | None,
    *,
    skip: Iterable[str] = (),
) -> IncrementalPlan:
    """The newest usable snapshot of each partition to build on (not one of ``skip``: ids
    found unusable), i.e. one of this store kind and retention lying inside the changelog
    as it is now (``log start <= offset + 1 <= log end``).

    A key-value partition without one whose changelog no longer starts at 0 is *blocked*:
    records below its start were deleted (DeleteRecords truncation keeps only what the
    newest snapshot covers), so a full compaction of it would write a snapshot missing
    them. A window/session changelog loses old records to retention, which the store
    has expired anyway: it is compacted in full from its start.
    """
    kind = layout.kind if layout is not None else "key_value"
    skipped = set(skip)
    candidates: dict[int, list[SnapshotManifest]] = {}
    for manifest in SnapshotCatalog(target).manifests(application_id, store):  # newest first
        if manifest.snapshot_id in skipped:
            continue
        problem = _base_mismatch(manifest, topic, kind, layout)
        if problem is not None:
            log.warning("%s: not a base for an incremental snapshot (%s)", manifest.describe(), problem)
            continue
        candidates.setdefault(manifest.partition, []).append(manifest)
    with KafkaAdmin(admin_conf(consumer_conf)) as admin:
        count = admin.partition_counts([topic]).get(topic) or 0
        tps = [(topic, p) for p in range(count)]
        starts = {tp: off for tp, (off, _ts) in admin.list_offsets(tps, "earliest").items()} if tps else {}
    ends = log_end_offsets(consumer_conf, tps) if tps else {}
    plan = IncrementalPlan()
    for tp in tps:
        partition = tp[1]
        start, end = max(starts.get(tp, 0), 0), ends.get(tp, 0)
        for manifest in candidates.get(partition, []):
            if start <= manifest.offset + 1 <= end:
                plan.bases[partition] = manifest
                break
            log.warning("%s lies outside the changelog [%d, %d]: not a base", manifest.describe(), start, end)
        if partition not in plan.bases and kind == "key_value" and start > 0:
            plan.blocked[partition] = (
                f"no usable snapshot to build on and the changelog starts at offset {start} "
                "(truncated): a full compaction would miss the records below it"
            )
    return plan


def _base_mismatch(
    manifest: SnapshotManifest, topic: str, kind: str, layout: SegmentedLayout | None
) -> str | None:
    if manifest.format_version != SNAPSHOT_FORMAT_VERSION:
        return f"format version {manifest.format_version}"
    if manifest.changelog_topic != topic:
        return f"it was made from {manifest.changelog_topic}"
    if manifest.store_kind != kind:
        return f"it holds a {manifest.store_kind} store, not a {kind} store"
    if layout is not None and (
        manifest.retention_ms != layout.retention_ms or manifest.stream_time_ms is None
    ):
        return f"it was cut at retention {manifest.retention_ms} ms, the store keeps {layout.retention_ms} ms"
    return None


def start_offsets(
    topic: str, bases: Mapping[int, SnapshotManifest]
) -> dict[tuple[str, int], int] | Literal["earliest"]:
    """Where each partition's read starts: after its base snapshot, else at the beginning."""
    if not bases:
        return "earliest"
    return {(topic, p): m.offset + 1 for p, m in bases.items()}


def stream_times(rows: Any, layout: SegmentedLayout, bases: Mapping[int, SnapshotManifest]) -> dict[int, int]:
    """partition -> stream time at the snapshot's offset (driver; ``rows`` an RDD of
    :data:`CompactedRow`): the largest record time read, or the base snapshot's if larger.

    Every record of a binary key carries the same time, so the compacted rows (one per
    key, tombstones included) have the same largest time as the records read."""
    time_of = layout.time_of
    found: dict[int, int] = dict(
        rows.map(lambda row: (row[0][0], time_of(row[0][1]))).reduceByKey(max).collect()
    )
    for partition, base in bases.items():
        if base.stream_time_ms is not None:
            found[partition] = max(found.get(partition, -1), base.stream_time_ms)
    return found


def expire_below_floor(
    layout: SegmentedLayout, times: Mapping[int, int]
) -> Callable[[CompactedRow], CompactedRow]:
    """Row map: a row whose time is below its partition's retention floor becomes a tombstone."""
    floors = {p: layout.floor(t) for p, t in times.items()}
    time_of = layout.time_of

    def expire(row: CompactedRow) -> CompactedRow:
        (partition, key), (offset, value) = row
        if value is not None and time_of(key) < floors.get(partition, 0):
            return (partition, key), (offset, None)
        return row

    return expire


def merge_updates(
    base: Iterable[tuple[bytes, bytes]], delta: Iterable[tuple[bytes, bytes | None]]
) -> Iterator[tuple[bytes, bytes | None]]:
    """Two key-ordered streams merged in one pass; on equal keys the delta's value wins
    (a None value -- a tombstone -- included, so the caller drops the key)."""
    base_it, delta_it = iter(base), iter(delta)
    b = next(base_it, None)
    d = next(delta_it, None)
    while b is not None and d is not None:
        if b[0] < d[0]:
            yield b
            b = next(base_it, None)
        elif d[0] < b[0]:
            yield d
            d = next(delta_it, None)
        else:
            yield d
            b, d = next(base_it, None), next(delta_it, None)
    while b is not None:
        yield b
        b = next(base_it, None)
    while d is not None:
        yield d
        d = next(delta_it, None)


class LayeredSnapshotWriter(SnapshotWriter):
    """:class:`SnapshotWriter` for window/session stores and incremental runs.

    ``layout`` and ``times`` (partition -> stream time): the store's retention applies and
    the manifest says so. ``bases`` (partition -> previous snapshot): the task merges the
    sorted delta with the previous snapshot's SST. A partition whose base cannot be read
    yields ``{"fallback": partition, "reason": ...}`` instead of a manifest.
    """

    def __init__(
        self,
        store: SnapshotStore,
        application_id: str,
        store_name: str,
        changelog_topic: str,
        *,
        layout: SegmentedLayout | None = None,
        times: Mapping[int, int] | None = None,
        bases: Mapping[int, SnapshotManifest] | None = None,
    ) -> None:
        super().__init__(store, application_id, store_name, changelog_topic)
        self.layout = layout
        self.times = dict(times or {})
        self.bases = dict(bases or {})

    def __call__(self, rows: Iterator[CompactedRow]) -> Iterator[dict[str, Any]]:
        from itertools import groupby

        for partition, group in groupby(rows, key=lambda row: row[0][0]):
            try:
                manifest = self._write(partition, group)
            except UnusableBase as exc:
                yield {_FALLBACK: partition, "reason": str(exc)}
                continue
            if manifest is not None:
                yield manifest.model_dump()

    def _entries(
        self, partition: int, updates: Iterator[tuple[bytes, bytes | None]], work: Path
    ) -> Iterator[tuple[bytes, bytes]]:
        merged: Iterable[tuple[bytes, bytes | None]] = updates
        base = self.bases.get(partition)
        if base is not None:
            merged = merge_updates(self._base_entries(base, work), updates)
        floor = None
        if self.layout is not None and partition in self.times:
            floor = self.layout.floor(self.times[partition])
        return _live(merged, self.layout, floor)

    def _base_entries(self, base: SnapshotManifest, work: Path) -> Iterator[tuple[bytes, bytes]]:
        """The previous snapshot's entries, after checking its SST against its manifest."""
        if base.record_count == 0 or base.sst_file is None:
            return iter(())
        sst = work / "base.sst"
        try:
            SnapshotCatalog(self.store).fetch_sst(base, sst)
        except OSError as exc:
            raise UnusableBase(f"{base.describe()}: cannot download its SST file ({exc})") from exc
        size = sst.stat().st_size
        if base.size_bytes and size != base.size_bytes:
            raise UnusableBase(f"{base.describe()}: SST file has {size} bytes, not {base.size_bytes}")
        checksum = file_checksum(sst)
        if checksum != base.checksum:
            raise UnusableBase(f"{base.describe()}: SST checksum {checksum} does not match {base.checksum}")
        return read_sst(sst, work / "base-db")

    def _manifest_fields(self, partition: int) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.layout is not None:
            fields.update(
                store_kind=self.layout.kind,
                stream_time_ms=self.times.get(partition, -1),
                retention_ms=self.layout.retention_ms,
            )
        base = self.bases.get(partition)
        if base is not None:
            fields["base_snapshot_id"] = base.snapshot_id
        return fields


def _live(
    entries: Iterable[tuple[bytes, bytes | None]], layout: SegmentedLayout | None, floor: int | None
) -> Iterator[tuple[bytes, bytes]]:
    if layout is None or floor is None:
        for key, value in entries:
            if value is not None:
                yield key, value
        return
    time_of = layout.time_of
    for key, value in entries:
        if value is not None and time_of(key) >= floor:
            yield key, value


def split_fallbacks(outputs: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """The tasks' outputs as (manifests to publish, partition -> why its base was unusable)."""
    manifests, fallbacks = [], {}
    for item in outputs:
        if _FALLBACK in item:
            fallbacks[int(item[_FALLBACK])] = str(item["reason"])
        else:
            manifests.append(item)
    return manifests, fallbacks
