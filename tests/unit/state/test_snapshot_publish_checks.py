"""A manifest is published only over its data, and ``prune --keep`` counts only snapshots whose
data is there: an orphan prune (or anything else) that deleted a running job's SST file must
not leave a published snapshot without data, nor let prune delete the last good one for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams.state.rocksdb import write_sst_file
from platform_streams.state.snapshots import (
    FileSystemSnapshotStore,
    SnapshotCatalog,
    SnapshotManifest,
    file_checksum,
)


def _uploaded(catalog: SnapshotCatalog, offset: int, work: Path) -> SnapshotManifest:
    sst = work / f"{offset}.sst"
    count = write_sst_file(sst, [(f"k{i:04d}".encode(), b"v") for i in range(offset)])
    manifest = SnapshotManifest(
        snapshot_id=f"s{offset}", application_id="app", store="kv", changelog_topic="app-kv-changelog",
        partition=0, offset=offset, record_count=count, checksum=file_checksum(sst),
        size_bytes=sst.stat().st_size, sst_file="data.sst",
    )  # fmt: skip
    catalog.upload_sst(manifest, sst)
    return manifest


def _sst(root: Path, manifest: SnapshotManifest) -> Path:
    assert manifest.sst_file is not None
    return root / SnapshotCatalog.snapshot_prefix(manifest) / manifest.sst_file


def test_a_manifest_is_not_published_without_its_sst(tmp_path: Path) -> None:
    root = tmp_path / "snapshots"
    catalog = SnapshotCatalog(FileSystemSnapshotStore(root))
    gone = _uploaded(catalog, 10, tmp_path)
    _sst(root, gone).unlink()  # an orphan prune took it while the job ran
    with pytest.raises(ValueError, match=r"SST file .*missing"):
        catalog.commit(gone)
    short = _uploaded(catalog, 20, tmp_path)
    _sst(root, short).write_bytes(b"part of it")
    with pytest.raises(ValueError, match="bytes"):
        catalog.commit(short)
    assert catalog.manifests("app", "kv") == []
    good = _uploaded(catalog, 30, tmp_path)
    catalog.commit(good)
    assert [m.offset for m in catalog.manifests("app", "kv")] == [30]


def test_prune_keeps_the_newest_snapshots_whose_data_is_there(tmp_path: Path) -> None:
    root = tmp_path / "snapshots"
    catalog = SnapshotCatalog(FileSystemSnapshotStore(root))
    for offset in (10, 20, 30):
        catalog.commit(_uploaded(catalog, offset, tmp_path))
    newest = catalog.manifests("app", "kv")[0]
    _sst(root, newest).unlink()  # published, then its SST file was lost
    assert catalog.prune_store("app", "kv", keep=1) == {0: 1}
    # 20 is the newest usable one: kept; 10 goes; 30 (no data) is not counted
    assert sorted(m.offset for m in catalog.manifests("app", "kv")) == [20, 30]
