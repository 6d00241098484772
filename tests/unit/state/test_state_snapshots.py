"""State snapshots without Spark: SST files, the catalog layout, and the restorer's checks."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from platform_streams.processor.task_id import TaskId
from platform_streams.serde import Long, String
from platform_streams.state import FROM_BEGINNING, ProcessorStateManager, Stores
from platform_streams.state.rocksdb import RocksDBBackend, write_sst_file
from platform_streams.state.snapshot_restore import SnapshotRestorer
from platform_streams.state.snapshots import (
    FileSystemSnapshotStore,
    SnapshotCatalog,
    SnapshotManifest,
    file_checksum,
    open_snapshot_store,
)

from .conftest import FakeContext

L, S = Long(), String()
TASK = TaskId(0, 1)
TOPIC = "app-kv-changelog"


def _publish(
    root: Path, items: list[tuple[bytes, bytes]], *, offset: int, work: Path, **fields: Any
) -> SnapshotManifest:
    sst = work / f"{offset}.sst"
    count = write_sst_file(sst, items)
    values: dict[str, Any] = {
        "snapshot_id": f"s{offset}",
        "application_id": "app",
        "store": "kv",
        "changelog_topic": TOPIC,
        "partition": 1,
        "offset": offset,
        "record_count": count,
        "checksum": file_checksum(sst) if count else "",
        "size_bytes": sst.stat().st_size if count else 0,
        "sst_file": "data.sst" if count else None,
    }
    values.update(fields)
    manifest = SnapshotManifest(**values)
    catalog = SnapshotCatalog(FileSystemSnapshotStore(root))
    if count:
        catalog.upload_sst(manifest, sst)
    if "size_bytes" in fields:  # a manifest its upload does not match: commit() refuses it
        data = manifest.model_dump_json().encode()
        catalog.store.put_bytes(SnapshotCatalog.snapshot_prefix(manifest) + "manifest.json", data)
    else:
        catalog.commit(manifest)
    return manifest


def _start(task_dir: Path, *, persistent: bool = True) -> tuple[ProcessorStateManager, Any]:
    manager = ProcessorStateManager(TASK, task_dir, eos=False)
    context = FakeContext(task_dir, task_id=TASK, manager=manager)
    supplier = (
        Stores.persistent_key_value_store("kv") if persistent else Stores.in_memory_key_value_store("kv")
    )
    store = Stores.key_value_store_builder(supplier, S, L).build()
    store.init(context, store)
    return manager, store


def _items(n: int) -> list[tuple[bytes, bytes]]:
    return sorted((S.serialize(f"k{i}"), L.serialize(i)) for i in range(n))  # type: ignore[misc]


def test_sst_round_trip_and_order_check(tmp_path: Path) -> None:
    items = _items(100)
    assert write_sst_file(tmp_path / "a.sst", items) == 100
    backend = RocksDBBackend("x")
    backend.open(tmp_path / "db")
    backend.default.put(b"zz-local", b"1")
    backend.ingest_sst(tmp_path / "a.sst", move=False)
    assert list(backend.default.items()) == [*items, (b"zz-local", b"1")]  # ingest adds, never deletes
    backend.close()
    with pytest.raises(ValueError, match="cannot add key"):
        write_sst_file(tmp_path / "b.sst", [(b"b", b"1"), (b"a", b"2")])
    assert write_sst_file(tmp_path / "c.sst", []) == 0 and not (tmp_path / "c.sst").exists()


def test_catalog_lists_newest_first_hides_uncommitted_and_prunes(tmp_path: Path) -> None:
    root, work = tmp_path / "snaps", tmp_path / "work"
    for offset in (10, 30, 20):
        _publish(root, _items(3), offset=offset, work=work)
    catalog = SnapshotCatalog(open_snapshot_store(f"file://{root}"))
    pending = SnapshotManifest(
        snapshot_id="p",
        application_id="app",
        store="kv",
        changelog_topic=TOPIC,
        partition=1,
        offset=99,
        record_count=1,
    )
    catalog.upload_sst(pending, work / "10.sst")  # uploaded, never committed: invisible
    (root / "app/kv/1/junk/manifest.json").parent.mkdir(parents=True)
    (root / "app/kv/1/junk/manifest.json").write_text("{not json")
    assert [m.offset for m in catalog.manifests("app", "kv", 1)] == [30, 20, 10]
    assert catalog.prune("app", "kv", 1, keep=1) == 2
    assert [m.offset for m in catalog.manifests("app", "kv", 1)] == [30]
    with pytest.raises(ValueError, match="escapes"):
        FileSystemSnapshotStore(root).get_bytes("../outside")
    with pytest.raises(ValueError, match="no SnapshotStore for scheme 'gs'"):
        open_snapshot_store("gs://bucket/x")  # s3:// is supported (tests/spark_cluster)


def test_empty_store_ingests_the_newest_snapshot_and_resumes_after_its_offset(tmp_path: Path) -> None:
    root = tmp_path / "snaps"
    _publish(root, _items(5), offset=40, work=tmp_path)
    _publish(root, _items(50), offset=90, work=tmp_path)
    manager, store = _start(tmp_path / "0_1")
    [done] = SnapshotRestorer(root, "app").restore(manager)
    assert (done.store_name, done.manifest.offset) == ("kv", 90)
    assert [p.start_offset for p in manager.changelog_offsets_to_restore()] == [91]
    assert store.get("k49") == 49 and store.get("k0") == 0
    manager.close()


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"store": "other"}, "belongs to"),
        ({"changelog_topic": "app-other-changelog"}, "belongs to"),
        ({"partition": 0}, None),  # listed under another partition: never even seen
        ({"format_version": 99}, "format version"),
        ({"checksum": "sha256:00"}, "checksum"),
        ({"size_bytes": 3}, "bytes"),
    ],
)
def test_unusable_snapshot_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, fields: dict[str, Any], why: str | None
) -> None:
    manifest = _publish(tmp_path / "snaps", _items(5), offset=40, work=tmp_path, **fields)
    if manifest.store == "other":  # make it visible under kv's prefix
        catalog = SnapshotCatalog(FileSystemSnapshotStore(tmp_path / "snaps"))
        data = manifest.model_dump_json().encode()
        catalog.store.put_bytes(f"app/kv/1/{manifest.offset:020d}-x/manifest.json", data)
    manager, store = _start(tmp_path / "0_1")
    with caplog.at_level(logging.WARNING):
        assert SnapshotRestorer(tmp_path / "snaps", "app").restore(manager) == []
    assert [p.start_offset for p in manager.changelog_offsets_to_restore()] == [FROM_BEGINNING]
    assert store.get("k1") is None
    if why is not None:
        assert any(why in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    manager.close()


def test_corrupt_newest_falls_back_to_an_older_valid_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "snaps"
    _publish(root, _items(5), offset=40, work=tmp_path)
    newest = _publish(root, _items(9), offset=80, work=tmp_path)
    sst = root / (SnapshotCatalog.snapshot_prefix(newest) + "data.sst")
    sst.write_bytes(sst.read_bytes()[:-10] + b"0123456789")
    manager, store = _start(tmp_path / "0_1")
    [done] = SnapshotRestorer(root, "app").restore(manager)
    assert done.manifest.offset == 40 and store.get("k4") == 4 and store.get("k8") is None
    manager.close()


def test_local_store_is_replaced_only_when_far_behind(tmp_path: Path) -> None:
    root = tmp_path / "snaps"
    _publish(root, _items(3), offset=500, work=tmp_path)
    task_dir = tmp_path / "0_1"
    manager, store = _start(task_dir)
    store.put("local-only", 7)
    manager.flush()
    manager.checkpoint({(TOPIC, 1): 450})
    manager.close()
    manager, store = _start(task_dir)  # 50 offsets behind: replaying is cheaper than a wipe
    assert SnapshotRestorer(root, "app", min_gain=100).restore(manager) == []
    assert store.get("local-only") == 7
    manager.close()
    manager, store = _start(task_dir)
    [done] = SnapshotRestorer(root, "app", min_gain=10).restore(manager)
    assert done.manifest.offset == 500
    assert store.get("local-only") is None and store.get("k2") == 2  # wiped, then ingested
    manager.close()


def test_in_memory_and_empty_snapshots(tmp_path: Path) -> None:
    root = tmp_path / "snaps"
    _publish(root, [], offset=12, work=tmp_path)  # every key deleted: nothing to ingest
    manager, _store = _start(tmp_path / "mem", persistent=False)
    assert SnapshotRestorer(root, "app").restore(manager) == []  # in-memory stores replay
    manager.close()
    manager, _store = _start(tmp_path / "0_1")
    [done] = SnapshotRestorer(root, "app").restore(manager)
    assert done.manifest.record_count == 0
    assert [p.start_offset for p in manager.changelog_offsets_to_restore()] == [13]
    manager.close()


def _start_window_store(task_dir: Path) -> tuple[ProcessorStateManager, Any]:
    manager = ProcessorStateManager(TASK, task_dir, eos=False)
    context = FakeContext(task_dir, task_id=TASK, manager=manager)
    supplier = Stores.persistent_window_store("kv", retention_ms=30_000, window_size_ms=10_000)
    store = Stores.window_store_builder(supplier, S, L).build()
    store.init(context, store)
    return manager, store


def test_window_store_restores_a_window_snapshot_like_a_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A window snapshot holds the windows live at its stream time (105 s, from a tombstone:
    starts > 75 s); the restored store gets that stream time from the manifest, not from its
    newest live window (100 s), so it drops a late write as the replayed one does."""
    from platform_streams.state.keys import window_key
    from platform_streams.state.wrappers.base import innermost

    starts = range(0, 100_001, 10_000)
    changelog: list[tuple[bytes, bytes | None]] = [
        (window_key(S.serialize(k), start), L.serialize(start)) for start in starts for k in "ab"
    ]
    live = sorted((key, value) for key, value in changelog if value and L.deserialize(value) > 75_000)
    changelog.append((window_key(S.serialize("c"), 105_000), None))  # the stream time, in no window
    root = tmp_path / "snaps"
    window = {"store_kind": "window", "stream_time_ms": 105_000, "retention_ms": 30_000}
    _publish(root, live, offset=22, work=tmp_path, **{**window, "retention_ms": 20_000})
    _publish(root, _items(3), offset=20, work=tmp_path)  # a key-value snapshot
    with caplog.at_level(logging.WARNING):
        manager, store = _start_window_store(tmp_path / "none")
        assert SnapshotRestorer(root, "app").restore(manager) == []
        manager.close()
    assert "retention 20000 ms" in caplog.text and "holds a key_value store" in caplog.text
    _publish(root, live, offset=22, work=tmp_path, snapshot_id="good", **window)

    fast_manager, fast = _start_window_store(tmp_path / "fast")
    [done] = SnapshotRestorer(root, "app").restore(fast_manager)
    replay_manager, replay = _start_window_store(tmp_path / "replay")
    replay_manager.restore("kv", changelog, last_offset=22)
    assert done.manifest.snapshot_id == "good"
    for store in (fast, replay):
        store.put("a", -1, 75_000)  # expired at stream time 105 s (not at 100 s): dropped
        store.put("b", -2, 90_000)
    assert list(innermost(fast).all()) == list(innermost(replay).all())
    assert len(list(innermost(fast).all())) == 6
    assert innermost(fast).observed_stream_time == innermost(replay).observed_stream_time == 105_000
    fast_manager.close()
    replay_manager.close()
