"""Restore a task's stores from state snapshots before the changelog tail is replayed.

Runs between store registration and :class:`~platform_streams.state.restore.ChangelogReader`:
for every logged store the state manager would replay, it looks for the newest snapshot
of that store partition; when the local store is missing (or far behind), it downloads the
SST file, checks it, ingests it (one RocksDB file link, milliseconds for millions of keys)
and moves the store's offset to the snapshot's. The ChangelogReader then replays only the
records after that offset. Without snapshots, or when none is usable, nothing changes.

A snapshot is used only if every check passes, otherwise it is skipped with a warning and
the next older one is tried, and finally the changelog is replayed from where the store is
(for an empty key-value store: from offset 0, which a truncated changelog no longer holds,
so the ChangelogReader re-seeds or refuses; see :func:`~platform_streams.state.restore.read_start`):

* the manifest names this application, store, changelog topic and partition, and a
  format version this code reads;
* the SST file's size and sha256 match the manifest (a truncated or corrupted upload);
* the store is a RocksDB store restored from its own ``<application id>-<store>-changelog``
  (a table restored from its source topic rewrites values while restoring, so its
  changelog bytes are not its store bytes): a key-value store, whose snapshot is ingested
  as a file, or a window/session store, whose snapshot records are written through the
  store into their time segments after its stream time is set
  (:mod:`~platform_streams.state.segmented_snapshots`); the snapshot's kind, and for
  window/session stores its retention, must be the store's;
* the snapshot is ahead of the local store (by ``min_gain`` offsets when the store has
  data, which must then be wiped first: ingesting cannot delete keys).

A snapshot from a changelog that was since recreated (its offset lies beyond the new log)
is caught by the ChangelogReader as a position outside the log (the store is wiped; see
docs/spark.md for what an application reset leaves behind).
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platform_streams.state.key_value_store import KeyValueBytesStore
from platform_streams.state.manager import ChangelogPartition, ProcessorStateManager
from platform_streams.state.private_files import make_private_dirs
from platform_streams.state.segmented_snapshots import SegmentedLayout, apply_segmented_snapshot, read_sst
from platform_streams.state.segments import SegmentedBytesStore
from platform_streams.state.snapshots import (
    SNAPSHOT_FORMAT_VERSION,
    SnapshotCatalog,
    SnapshotManifest,
    SnapshotStore,
    file_checksum,
    open_snapshot_store,
)
from platform_streams.state.wrappers.base import changelog_topic_name, innermost

__all__ = ["SnapshotRestore", "SnapshotRestorer"]

log = logging.getLogger(__name__)

_DOWNLOAD_DIR = ".snapshot-download"


@dataclass(frozen=True, slots=True)
class SnapshotRestore:
    """One store restored from a snapshot: which one, and how long download + ingest took."""

    store_name: str
    manifest: SnapshotManifest
    seconds: float


class SnapshotRestorer:
    """Ingests the newest valid snapshot into each store that needs restoring."""

    def __init__(
        self, store: SnapshotStore | str | Path, application_id: str, *, min_gain: int = 10_000
    ) -> None:
        self.catalog = SnapshotCatalog(
            store if isinstance(store, SnapshotStore) else open_snapshot_store(store)
        )
        self.application_id = application_id
        #: a store with local data is wiped for a snapshot only if it gains at least this many offsets
        self.min_gain = min_gain

    def restore(self, manager: ProcessorStateManager) -> list[SnapshotRestore]:
        """Apply snapshots to the stores of one task; returns the ones applied."""
        done = []
        for part in manager.changelog_offsets_to_restore():
            result = self._restore_store(manager, part)
            if result is not None:
                done.append(result)
        return done

    def _restore_store(
        self, manager: ProcessorStateManager, part: ChangelogPartition
    ) -> SnapshotRestore | None:
        store = manager.get_store(part.store_name)
        backend = self._restorable_backend(store, part)
        if backend is None:
            return None
        local = part.start_offset - 1 if part.start_offset >= 0 else None
        try:
            candidates = self.catalog.manifests(self.application_id, part.store_name, part.partition)
        except OSError as exc:
            log.warning(
                "store %s: cannot list snapshots (%s); restoring from the changelog", part.store_name, exc
            )
            return None
        for manifest in candidates:
            if local is not None and manifest.offset < local + self.min_gain:
                return None  # the rest are older still
            problem = self._mismatch(manifest, part) or _kind_mismatch(manifest, backend)
            if problem is not None:
                log.warning("ignoring %s: %s", manifest.describe(), problem)
                continue
            started = time.monotonic()
            if not self._ingest(manager, part, backend, manifest, wipe=local is not None):
                continue
            seconds = time.monotonic() - started
            log.info(
                "store %s restored from %s in %.2fs; replaying the changelog from offset %d",
                part.store_name,
                manifest.describe(),
                seconds,
                manifest.offset + 1,
            )
            return SnapshotRestore(part.store_name, manifest, seconds)
        return None

    def _restorable_backend(self, store: Any, part: ChangelogPartition) -> Any:
        """What a snapshot restores into, else None: the RocksDB backend of a plain key-value
        store, or a RocksDB window/session bytes store, logged to its own changelog."""
        if store is None or not store.persistent:
            return None
        if part.topic != changelog_topic_name(self.application_id, part.store_name):
            return None
        bottom = innermost(store)
        if isinstance(bottom, SegmentedBytesStore):
            return bottom if hasattr(bottom.backend, "ingest_sst") else None
        if not isinstance(bottom, KeyValueBytesStore):
            return None
        backend = bottom.backend
        if not hasattr(backend, "ingest_sst") or backend.column_names():
            return None
        return backend

    def _mismatch(self, manifest: SnapshotManifest, part: ChangelogPartition) -> str | None:
        if manifest.format_version != SNAPSHOT_FORMAT_VERSION:
            return f"format version {manifest.format_version} (this reader knows {SNAPSHOT_FORMAT_VERSION})"
        expected = (self.application_id, part.store_name, part.topic, part.partition)
        actual = (manifest.application_id, manifest.store, manifest.changelog_topic, manifest.partition)
        if actual != expected:
            return f"it belongs to {actual}, not to {expected}"
        if manifest.record_count > 0 and manifest.sst_file is None:
            return "it lists records but no SST file"
        return None

    def _ingest(
        self,
        manager: ProcessorStateManager,
        part: ChangelogPartition,
        backend: Any,
        manifest: SnapshotManifest,
        *,
        wipe: bool,
    ) -> bool:
        """Download, verify and ingest; False (with a warning) if the snapshot is unusable."""
        download = manager.task_dir / _DOWNLOAD_DIR
        shutil.rmtree(download, ignore_errors=True)
        make_private_dirs(download)  # a downloaded SST is state: private like the rest
        try:
            sst: Path | None = None
            if manifest.sst_file is not None and manifest.record_count > 0:
                try:
                    sst = self.catalog.fetch_sst(manifest, download / f"{part.store_name}.sst")
                except OSError as exc:
                    log.warning("ignoring %s: cannot download its SST file (%s)", manifest.describe(), exc)
                    return False
                problem = _verify_file(sst, manifest)
                if problem is not None:
                    log.warning("ignoring %s: %s; falling back", manifest.describe(), problem)
                    return False
            if wipe:
                manager.reset_store(part.store_name)
            try:
                if isinstance(backend, SegmentedBytesStore):
                    assert manifest.stream_time_ms is not None  # _kind_mismatch checked it
                    items = read_sst(sst, download / "reader") if sst is not None else iter(())
                    apply_segmented_snapshot(backend, items, manifest.stream_time_ms)
                elif sst is not None:
                    backend.ingest_sst(sst, move=True)
            except Exception as exc:
                # RocksDB checks the file's own block checksums while ingesting (to read it, too).
                log.warning("ignoring %s: RocksDB refused its SST file (%s)", manifest.describe(), exc)
                manager.reset_store(part.store_name)
                return False
            manager.restore(part.store_name, [], last_offset=manifest.offset)
            return True
        finally:
            shutil.rmtree(download, ignore_errors=True)


def _kind_mismatch(manifest: SnapshotManifest, target: Any) -> str | None:
    """Why a snapshot of another kind of store (or another retention) cannot restore ``target``."""
    if not isinstance(target, SegmentedBytesStore):
        if manifest.store_kind != "key_value":
            return f"it holds a {manifest.store_kind} store, this store is a key-value store"
        return None
    layout = SegmentedLayout.of_store(target)
    if manifest.store_kind != layout.kind:
        return f"it holds a {manifest.store_kind} store, this store is a {layout.kind} store"
    if manifest.retention_ms != layout.retention_ms or manifest.stream_time_ms is None:
        # records past the snapshot's retention are missing from it: a longer one needs them
        return (
            f"it was cut at retention {manifest.retention_ms} ms, this store keeps {layout.retention_ms} ms"
        )
    return None


def _verify_file(path: Path, manifest: SnapshotManifest) -> str | None:
    size = path.stat().st_size
    if manifest.size_bytes and size != manifest.size_bytes:
        return f"SST file has {size} bytes, the manifest says {manifest.size_bytes}"
    checksum = file_checksum(path)
    if checksum != manifest.checksum:
        return f"SST checksum {checksum} does not match the manifest's {manifest.checksum}"
    return None
