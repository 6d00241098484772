"""Helpers of the Spark suite: read a published snapshot back, run tasks restored by the worker's code."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.processor.partitioner import default_partition
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.restore.task_state import TaskStateLifecycle
from platform_streams.runtime.tasks.task import StreamTask
from platform_streams.state.rocksdb import RocksDBBackend
from platform_streams.state.snapshots import SnapshotCatalog, SnapshotManifest, open_snapshot_store
from platform_streams.testing.records import DriverRecord
from platform_streams.topology.compiler import compile_topology
from platform_streams.topology.topology import Topology
from tests.integration.support_apps import app_config


def snapshot_config(bootstrap: str, app_id: str, state_dir: Path, snapshots: Path | None) -> StreamsConfig:
    """An application's settings for a restore test: no cache (every update reaches the
    changelog), and snapshots read from ``snapshots`` when given (else the changelog alone)."""
    return app_config(
        bootstrap,
        state_dir,
        app_id,
        statestore_cache_max_bytes=0,
        state_snapshot_location=str(snapshots) if snapshots else None,
    )


def snapshot_content(location: Path, manifest: SnapshotManifest, work: Path) -> list[tuple[bytes, bytes]]:
    """The key/values of a snapshot, read back by ingesting its SST into an empty RocksDB."""
    if manifest.record_count == 0:
        return []
    sst = SnapshotCatalog(open_snapshot_store(location)).fetch_sst(manifest, work / "check.sst")
    backend = RocksDBBackend("check")
    backend.open(work / "check-db")
    try:
        backend.ingest_sst(sst, move=False)
        return list(backend.default.items())
    finally:
        backend.close()


class ListCollector:
    """A RecordCollector keeping (topic, key, value) of everything sent except changelogs."""

    def __init__(self) -> None:
        self.records: list[tuple[str, bytes | None, bytes | None]] = []

    def send(self, topic: str, key: Any, value: Any, timestamp: int, headers: Any, partition: Any) -> None:
        if not topic.endswith("-changelog"):
            self.records.append((topic, key, value))

    def partition_count(self, topic: str) -> int:
        return 2


def restore_then_process(
    topology: Topology,
    config: StreamsConfig,
    source: str,
    partitions: int,
    records: Iterable[tuple[str, str]],
    committed: Mapping[tuple[str, int], int],
    *,
    timestamps: Sequence[int] | None = None,
    inspect: Callable[[str, list[StreamTask]], None] | None = None,
) -> tuple[list[tuple[str, bytes | None, bytes | None]], TaskStateLifecycle]:
    """Do what a worker does on assignment (build tasks, restore through TaskStateLifecycle
    given the group's ``committed`` input offsets, init processors), then process
    ``records`` (at ``timestamps``, default their index) and commit; returns the
    output and the lifecycle. ``inspect(phase, tasks)`` sees the tasks once ``"restored"``
    and once ``"processed"``."""
    plan = compile_topology(topology)
    sub = plan.subtopologies[0]
    collector = ListCollector()
    lifecycle = TaskStateLifecycle(config)
    root = Path(config.state_dir) / config.application_id
    tasks = [
        StreamTask(
            TaskId(sub.id, p),
            plan,
            sub,
            config=config,
            collector=collector,
            clock_ms=lambda: 0,
            task_dir=root / f"{sub.id}_{p}",
        )
        for p in range(partitions)
    ]
    try:
        for task in tasks:
            task.initialize_stores()
        lifecycle.restore(tasks, committed)
        for task in tasks:
            task.initialize_processors()
        if inspect is not None:
            inspect("restored", tasks)
        for i, (key, value) in enumerate(records):
            raw = key.encode()
            p = default_partition(raw, partitions)
            ts = timestamps[i] if timestamps is not None else i
            record = DriverRecord(source, p, 1_000_000 + i, raw, value.encode(), ts)
            tasks[p].add_records((source, p), [record])
            tasks[p].process(10)
        for task in tasks:
            task.flush_stores()
        if inspect is not None:
            inspect("processed", tasks)
    finally:
        for task in tasks:
            task.close()
    return collector.records, lifecycle


def expected_counts(counts: Counter[str], new: list[tuple[str, str]]) -> Counter[tuple[str, int]]:
    """The ``(key, count)`` outputs a counting app emits for ``new`` on top of ``counts``."""
    running = Counter(counts)
    out: Counter[tuple[str, int]] = Counter()
    for key, _ in new:
        running[key] += 1
        out[(key, running[key])] += 1
    return out


def count_outputs(records: list[tuple[str, bytes | None, bytes | None]]) -> Counter[tuple[str, int]]:
    """The ``(key, count)`` pairs of collected output records (String keys, Long counts)."""
    return Counter((k.decode(), int.from_bytes(v, "big", signed=True)) for _t, k, v in records if k and v)
