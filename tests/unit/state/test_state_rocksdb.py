"""The RocksDB backend: write overlay, durability, corruption (wiped) vs. lock (never wiped)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from platform_streams.errors import InvalidStateStoreError
from platform_streams.state.rocksdb import RocksDBBackend


def _open(path: Path) -> RocksDBBackend:
    backend = RocksDBBackend("store")
    backend.open(path)
    return backend


def test_reads_see_pending_writes_and_flush_persists(tmp_path: Path) -> None:
    backend = _open(tmp_path / "db")
    assert backend.started_empty
    data = backend.default
    data.put(b"a", b"1")
    data.put(b"b", b"2")
    data.put(b"a", None)
    assert backend.pending_count == 3  # nothing written to RocksDB yet
    assert data.get(b"a") is None and data.get(b"b") == b"2"
    assert list(data.items()) == [(b"b", b"2")]  # a scan writes the pending batch first
    assert backend.pending_count == 0
    data.put(b"c", b"3")
    backend.flush()
    backend.close()
    again = _open(tmp_path / "db")
    try:
        assert not again.started_empty
        assert list(again.default.items()) == [(b"b", b"2"), (b"c", b"3")]
    finally:
        again.close()


def test_close_writes_pending(tmp_path: Path) -> None:
    backend = _open(tmp_path / "db")
    backend.default.put(b"k", b"v")
    backend.close()
    again = _open(tmp_path / "db")
    try:
        assert again.default.get(b"k") == b"v"
    finally:
        again.close()


def test_columns_survive_reopen_and_drop(tmp_path: Path) -> None:
    backend = _open(tmp_path / "db")
    backend.column("seg-1").put(b"k", b"1")
    backend.column("seg-2").put(b"k", b"2")
    backend.flush()
    backend.drop_column("seg-1")
    backend.close()
    again = _open(tmp_path / "db")
    try:
        assert again.column_names() == ["seg-2"]
        assert again.column("seg-2").get(b"k") == b"2"
    finally:
        again.close()


def test_corrupt_database_is_wiped_and_reported_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "db"
    backend = _open(path)
    backend.default.put(b"k", b"v")
    backend.flush()
    backend.close()
    (path / "CURRENT").write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING):
        again = _open(path)
    try:
        assert again.started_empty
        assert again.default.get(b"k") is None
        assert "unreadable" in caplog.text
    finally:
        again.close()


def test_locked_database_is_never_wiped(tmp_path: Path) -> None:
    path = tmp_path / "db"
    holder = _open(path)
    holder.default.put(b"k", b"v")
    holder.flush()
    try:
        with pytest.raises(InvalidStateStoreError, match="locked"):
            _open(path)
        assert holder.default.get(b"k") == b"v"
    finally:
        holder.close()


def test_wipe_deletes_everything(tmp_path: Path) -> None:
    backend = _open(tmp_path / "db")
    backend.default.put(b"k", b"v")
    backend.column("seg-1").put(b"k", b"v")
    backend.flush()
    backend.wipe()
    try:
        assert backend.started_empty
        assert backend.column_names() == []
        assert list(backend.default.items()) == []
    finally:
        backend.close()


def test_pending_overlay_is_bounded(tmp_path: Path) -> None:
    from platform_streams.state import rocksdb_columns as rocksdb

    backend = _open(tmp_path / "db")
    try:
        for i in range(rocksdb.MAX_PENDING + 5):
            backend.default.put(i.to_bytes(4, "big"), b"v")
        assert backend.pending_count == 5
        assert backend.default.approximate_num_entries() > 0
    finally:
        backend.close()


def test_write_all_goes_to_rocksdb_after_the_overlay(tmp_path: Path) -> None:
    """The restore path (``RocksDBStore.restoreBatch``: one WriteBatch per restored batch):
    older overlay writes land first, the batch's own order decides within it."""
    backend = _open(tmp_path / "db")
    told: list[bool] = []
    backend.on_uncommitted_write = lambda: told.append(True)
    data = backend.default
    data.put(b"a", b"old")
    data.put(b"keep", b"k")
    data.write_all([(b"a", b"1"), (b"b", b"2"), (b"b", None), (b"c", b"3"), (b"c", b"33")])
    assert backend.pending_count == 0 and told
    assert list(data.items()) == [(b"a", b"1"), (b"c", b"33"), (b"keep", b"k")]
    backend.flush()
    backend.close()
    again = _open(tmp_path / "db")
    try:
        assert list(again.default.items()) == [(b"a", b"1"), (b"c", b"33"), (b"keep", b"k")]
    finally:
        again.close()
