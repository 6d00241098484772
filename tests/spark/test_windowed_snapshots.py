"""Window and session store snapshots, and incremental snapshots (previous snapshot + delta).

A streaming run of a windowed count and a session count builds the state (records 50 ms
apart over 170 s, far beyond the stores' 30 s / 11 s retention; the session store merges
sessions, which writes tombstones); a Spark compaction snapshots both stores halfway and
more input makes a changelog tail. A worker restored from the snapshots plus the tail must
hold exactly what a full replay holds (the stores' fetch results compared), before and
after more input; Kafka's retention rule is the store's own (RocksDBWindowStore /
RocksDBSessionStore restore through the same segmented bytes store, AbstractSegments).
Then an incremental compaction, which reads only the changelog after those snapshots, must
write what a full compaction writes; and with tombstones over a key-value changelog, and
with a corrupt previous snapshot (that partition is built on the snapshot before it).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import KafkaAdmin, TopicSpec
from platform_streams.ops.spark.compaction import compact_application, compact_changelog
from platform_streams.processor.partitioner import default_partition
from platform_streams.runtime.tasks.task import StreamTask
from platform_streams.state.segmented_snapshots import SegmentedLayout
from platform_streams.state.snapshots import SnapshotCatalog, SnapshotManifest, open_snapshot_store
from platform_streams.state.wrappers.base import innermost
from tests.integration.support_apps import app_config, log_ends, new_app_id, running_app, wait_committed
from tests.spark.apps import WindowedAndSessionCounts
from tests.spark.support import restore_then_process, snapshot_config, snapshot_content
from tests.support.kafka import new_topic, produce

# kafka_side: Spark is a JVM of its own (the shadow-replay suite's session is reused there)
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.kafka_side]

PARTITIONS = 2
STORES = ("sessions", "windows")
#: the first record's time (a producer sends 0 as "now")
T0 = 1_000_000


@dataclass
class Built:
    app: WindowedAndSessionCounts
    app_id: str
    bootstrap: str
    snapshots: Path
    manifests: dict[str, list[SnapshotManifest]]
    committed: dict[tuple[str, int], int]
    config: Any


def _inputs(start: int, n: int) -> tuple[list[tuple[str, str]], list[int]]:
    """Users every 4 s (a session each), three hot keys every 300 ms (merged sessions), 50 ms
    apart; every 25th record 5 s late (within the grace periods)."""
    records = [(f"user-{i % 80}" if i % 2 else f"hot-{i % 3}", f"v{i}") for i in range(start, start + n)]
    times = [T0 + i * 50 - (5_000 if i % 25 == 0 else 0) for i in range(start, start + n)]
    return records, times


@pytest.fixture(scope="module")
def built(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path_factory: pytest.TempPathFactory
) -> Built:
    tmp = tmp_path_factory.mktemp("windowed-snapshots")
    source = new_topic(admin, PARTITIONS, "events")
    app, app_id = WindowedAndSessionCounts(source), new_app_id("wsnap")
    config = app_config(bootstrap_servers, tmp / "state", app_id, statestore_cache_max_bytes=0)
    (first, first_ts), (tail, tail_ts) = _inputs(0, 2_000), _inputs(2_000, 1_400)
    with running_app(app(), config):
        placed = produce(bootstrap_servers, source, first, timestamp_ms=first_ts)
        wait_committed(admin, app_id, log_ends(placed, source, PARTITIONS), "the first batch is committed")
        results = compact_application(spark, app(), config, str(tmp / "snaps"))
        placed += produce(bootstrap_servers, source, tail, timestamp_ms=tail_ts)
        ends = log_ends(placed, source, PARTITIONS)
        wait_committed(admin, app_id, ends, "the tail is committed")
    assert sorted(results) == list(STORES)
    return Built(
        app,
        app_id,
        bootstrap_servers,
        tmp / "snaps",
        {name: r.manifests for name, r in results.items()},
        {tp: o or 0 for tp, o in admin.committed_offsets(app_id, list(ends)).items()},
        config,
    )


def _restore(built: Built, state_dir: Path, snapshots: Path | None) -> tuple[dict[Any, list[Any]], Any]:
    """Restore (from snapshots + tail, or the changelog alone), then process more input;
    every store's content ``(phase, partition, store) -> all()`` after each step."""
    seen: dict[Any, list[Any]] = {}

    def inspect(phase: str, tasks: list[StreamTask]) -> None:
        for task in tasks:
            for name in STORES:
                bottom = innermost(task.state_manager.get_store(name))
                seen[(phase, task.task_id.partition, name)] = list(bottom.all())

    new, new_ts = _inputs(3_400, 300)
    _out, lifecycle = restore_then_process(
        built.app(),
        snapshot_config(built.bootstrap, built.app_id, state_dir, snapshots),
        built.app.source,
        PARTITIONS,
        new,
        built.committed,
        timestamps=[t - 15_000 if i % 7 == 0 else t for i, t in enumerate(new_ts)],  # some expired
        inspect=inspect,
    )
    return seen, lifecycle


def test_snapshots_keep_what_retention_keeps(built: Built, tmp_path: Path) -> None:
    for name, kind in (("windows", "window"), ("sessions", "session")):
        manifests = built.manifests[name]
        assert sorted(m.partition for m in manifests) == [0, 1]
        for manifest in manifests:
            retention = 30_000 if kind == "window" else 11_000
            assert (manifest.store_kind, manifest.retention_ms) == (kind, retention)
            assert manifest.stream_time_ms is not None
            layout = SegmentedLayout(kind, manifest.retention_ms, 60_000)
            floor = layout.floor(manifest.stream_time_ms)
            entries = snapshot_content(built.snapshots, manifest, tmp_path / f"{name}{manifest.partition}")
            times = [layout.time_of(key) for key, _ in entries]
            # the run started at 0 ms, the floor is well past it: old windows/sessions were left out
            assert entries and floor > T0 + 30_000 and min(times) >= floor
            assert max(times) == manifest.stream_time_ms


def test_restored_window_and_session_stores_equal_a_replay(built: Built, tmp_path: Path) -> None:
    fast, fast_lifecycle = _restore(built, tmp_path / "fast", built.snapshots)
    full, full_lifecycle = _restore(built, tmp_path / "full", None)

    restores = [r for rs in fast_lifecycle.last_snapshots.values() for r in rs]
    used = sorted((r.store_name, r.manifest.partition) for r in restores)
    assert used == sorted((s, p) for s in STORES for p in range(PARTITIONS))
    assert 0 < fast_lifecycle.total_restored < full_lifecycle.total_restored / 2
    assert set(fast) == set(full)
    for key, content in full.items():
        assert content, key
        assert fast[key] == content, key


def test_incremental_compaction_of_window_and_session_stores_equals_a_full_one(
    spark: Any, built: Built, tmp_path: Path
) -> None:
    incremental = compact_application(
        spark, built.app(), built.config, str(built.snapshots), incremental=True
    )
    full = compact_application(spark, built.app(), built.config, str(tmp_path / "full"))
    catalog = SnapshotCatalog(open_snapshot_store(built.snapshots))
    for name in STORES:
        assert incremental[name].offsets_read < full[name].offsets_read / 2
        bases = {m.partition: m.snapshot_id for m in built.manifests[name]}
        assert sorted(m.partition for m in incremental[name].manifests) == [0, 1]  # both had a tail
        for whole in full[name].manifests:
            inc = catalog.manifests(built.app_id, name, whole.partition)[0]
            assert inc.base_snapshot_id == bases[inc.partition]
            assert (inc.partition, inc.offset, inc.stream_time_ms, inc.record_count) == (
                whole.partition,
                whole.offset,
                whole.stream_time_ms,
                whole.record_count,
            )
            work = tmp_path / f"{name}-{inc.partition}"
            assert snapshot_content(built.snapshots, inc, work / "i") == snapshot_content(
                tmp_path / "full", whole, work / "f"
            )


def test_incremental_compaction_with_tombstones_and_a_corrupt_base(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app, store = new_app_id("incr"), "kv"
    topic = f"{app}-{store}-changelog"
    admin.create_topics([TopicSpec(topic, 2)])
    conf = {"bootstrap.servers": bootstrap_servers}
    rng = random.Random(52)
    keys = [f"k{i:04d}".encode() for i in range(1_500)]
    produce(bootstrap_servers, topic, [(k, f"v0-{k.decode()}", default_partition(k, 2)) for k in keys])
    location = tmp_path / "snaps"
    first = compact_changelog(spark, conf, app, store, location, parquet=False)

    def change(round_: int) -> None:
        # updates, deletes of snapshotted keys, new keys, and a delete of a key never written
        changed = rng.sample(keys, 60)
        records: list[Any] = [(k, None if i % 3 == 0 else f"v{round_}-{i}") for i, k in enumerate(changed)]
        records += [(f"new{round_}-{i}".encode(), b"n") for i in range(10)] + [(b"never-written", None)]
        produce(bootstrap_servers, topic, [(k, v, default_partition(k, 2)) for k, v in records])

    def same_as_full(result: Any, name: str) -> None:
        full = compact_changelog(spark, conf, app, store, tmp_path / name, parquet=False)
        pairs = zip(result.manifests, full.manifests, strict=True)
        for inc, whole in pairs:
            assert (inc.partition, inc.offset, inc.record_count) == (
                whole.partition,
                whole.offset,
                whole.record_count,
            )
            work = tmp_path / f"{name}-{inc.partition}"
            assert snapshot_content(location, inc, work / "i") == snapshot_content(
                tmp_path / name, whole, work / "f"
            )

    change(1)
    second = compact_changelog(spark, conf, app, store, location, parquet=False, incremental=True)
    assert second.offsets_read == 71 < first.offsets_read / 10
    assert [m.base_snapshot_id for m in second.manifests] == [m.snapshot_id for m in first.manifests]

    # one flipped byte in partition 0's newest snapshot: that partition builds on the one before
    catalog = SnapshotCatalog(open_snapshot_store(location))
    broken = next(m for m in second.manifests if m.partition == 0)
    sst = location / (catalog.snapshot_prefix(broken) + "data.sst")
    data = bytearray(sst.read_bytes())
    data[len(data) // 2] ^= 0xFF
    sst.write_bytes(bytes(data))
    change(2)
    with caplog.at_level(logging.WARNING, logger="platform_streams.ops.spark.compaction"):
        third = compact_changelog(spark, conf, app, store, location, parquet=False, incremental=True)
    assert any("checksum" in r.getMessage() and "next older" in r.getMessage() for r in caplog.records)
    by_partition = {m.partition: m for m in third.manifests}
    older = next(m.snapshot_id for m in first.manifests if m.partition == 0)
    kept = next(m.snapshot_id for m in second.manifests if m.partition == 1)
    assert (by_partition[0].base_snapshot_id, by_partition[1].base_snapshot_id) == (older, kept)
    # partition 1: previous snapshot + delta; partition 0: the one before + both deltas
    same_as_full(third, "full")
