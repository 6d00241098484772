"""State snapshots: what a snapshot is (its manifest), where snapshots live, how they are laid out.

A snapshot is the content of one store partition as of a changelog offset: a RocksDB SST
file of the latest value of every live key, in key order, plus a manifest. For a key-value
store the keys are the store's; for a window or session store they are its changelog keys,
minus what its retention dropped (:mod:`platform_streams.state.segmented_snapshots`).
Spark jobs write them (:mod:`platform_streams.ops.spark`); workers read them to restore a
missing store quickly (:mod:`platform_streams.state.snapshot_restore`), so this module
must not need pyspark.

Storage is deliberately object-store shaped (:class:`SnapshotStore`: whole objects put and
fetched by key, listed by prefix, no rename, no append), so an S3/GCS implementation is
one small class: :class:`FileSystemSnapshotStore` (paths, ``file://``) and
:class:`~platform_streams.state.object_snapshot_store.S3SnapshotStore` (``s3://``). On top of it
:class:`SnapshotCatalog` owns the layout::

    <application id>/<store>/<partition>/<offset, 20 digits>-<snapshot id>/data.sst
                                                                         /manifest.json
    <application id>/<store>/parquet/<run id>/partition=<n>/part-*.parquet   (analysts' copy)

The manifest is written *last*: a snapshot exists once its manifest does, so a reader
never sees a half-uploaded one (an object-store PUT is atomic, the filesystem store
renames). Offsets follow the checkpoint convention: ``offset`` is the last changelog
record reflected in the snapshot and a restore resumes at ``offset + 1``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ORPHAN_GRACE_S",
    "SNAPSHOT_FORMAT_VERSION",
    "FileSystemSnapshotStore",
    "SnapshotCatalog",
    "SnapshotManifest",
    "SnapshotStore",
    "file_checksum",
    "new_snapshot_id",
    "open_snapshot_store",
]

log = logging.getLogger(__name__)

#: Version of the manifest + SST layout; readers reject versions they do not know.
SNAPSHOT_FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
SST_NAME = "data.sst"
_CHUNK = 1024 * 1024
#: Unpublished uploads younger than this are a job still running, not a killed one's leftovers.
ORPHAN_GRACE_S = 3600.0


class SnapshotManifest(BaseModel):
    """Everything a reader checks before trusting a snapshot's SST file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = SNAPSHOT_FORMAT_VERSION
    snapshot_id: str
    application_id: str
    store: str
    changelog_topic: str
    partition: int = Field(ge=0)
    #: Offset of the last changelog record reflected (checkpoint convention).
    offset: int = Field(ge=0)
    #: Live keys in the SST file (tombstoned keys are absent).
    record_count: int = Field(ge=0)
    #: ``sha256:<hex>`` of the SST file; empty when ``record_count`` is 0 (no file).
    checksum: str = ""
    size_bytes: int = Field(default=0, ge=0)
    #: Object key of the SST file relative to the snapshot's directory; None when empty.
    sst_file: str | None = SST_NAME
    created_at_ms: int = 0
    #: What made it: a changelog compaction, or a backfill's final state.
    source: Literal["compaction", "backfill"] = "compaction"
    #: Where the Parquet copy of the same data lives (a store URI), if one was written.
    parquet_uri: str | None = None
    #: What the SST holds: a key-value store's entries verbatim, or a window/session store's
    #: changelog keys (``key + time...``, Kafka's WindowKeySchema/SessionKeySchema layouts),
    #: which a restore writes through the store so they land in their time segments.
    store_kind: Literal["key_value", "window", "session"] = "key_value"
    #: Window/session stores: the store's stream time at ``offset`` (the largest window start
    #: or session end in the changelog so far) and its retention; records already past
    #: retention at that stream time are left out, as the store itself drops them.
    stream_time_ms: int | None = None
    retention_ms: int | None = None
    #: An incremental snapshot: the snapshot it was built from (that snapshot's content plus
    #: the changelog after its offset). The result is complete on its own: a restore reads
    #: this snapshot only.
    base_snapshot_id: str | None = None

    def describe(self) -> str:
        return (
            f"snapshot {self.snapshot_id} of {self.application_id}/{self.store} partition {self.partition} "
            f"at changelog offset {self.offset} ({self.record_count} keys)"
        )


def new_snapshot_id() -> str:
    """A short unique id; sorting by offset first keeps the newest snapshot last."""
    return uuid.uuid4().hex[:12]


def file_checksum(path: Path) -> str:
    """``sha256:<hex>`` of a file, read in chunks (SST files can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


class SnapshotStore(ABC):
    """Flat key -> object storage with the semantics every object store offers.

    Keys are ``/``-separated relative paths. ``put_*`` replaces an object atomically (a
    reader sees the old or the new object, never part of one); there is no rename and no
    append. Implementations for object stores map this onto PUT/GET/LIST/DELETE.
    """

    @abstractmethod
    def put_file(self, key: str, source: Path) -> None:
        """Upload the local file ``source`` as object ``key``."""

    @abstractmethod
    def get_file(self, key: str, destination: Path) -> None:
        """Download object ``key`` to the local file ``destination``; ``FileNotFoundError`` if absent."""

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None:
        """Write a small object (a manifest)."""

    @abstractmethod
    def get_bytes(self, key: str) -> bytes:
        """Read a small object; ``FileNotFoundError`` if absent."""

    @abstractmethod
    def list_keys(self, prefix: str) -> list[str]:
        """Every object key under ``prefix`` (recursively), sorted."""

    def list_modified(self, prefix: str) -> dict[str, float]:
        """Every object key under ``prefix`` -> when it was last written (epoch seconds)."""
        raise NotImplementedError(f"{type(self).__name__} does not report modification times")

    def list_sizes(self, prefix: str) -> dict[str, int | None]:
        """Every object key under ``prefix`` -> its size in bytes (None: not reported)."""
        return dict.fromkeys(self.list_keys(prefix))

    @abstractmethod
    def delete_prefix(self, prefix: str) -> None:
        """Delete every object under ``prefix``."""

    @abstractmethod
    def uri(self, key: str) -> str:
        """A URI for ``key`` that other tools (Spark's Parquet writer) can address."""


class FileSystemSnapshotStore(SnapshotStore):
    """Objects are files under ``root`` (a local disk, or a shared mount such as NFS)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()

    def __repr__(self) -> str:
        return f"FileSystemSnapshotStore({str(self.root)!r})"

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if path != self.root and self.root not in path.parents:
            raise ValueError(f"snapshot key {key!r} escapes the store root {self.root}")
        return path

    def put_file(self, key: str, source: Path) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        shutil.copyfile(source, tmp)
        os.replace(tmp, target)

    def get_file(self, key: str, destination: Path) -> None:
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._path(key), destination)

    def put_bytes(self, key: str, data: bytes) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)

    def get_bytes(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def list_keys(self, prefix: str) -> list[str]:
        base = self._path(prefix) if prefix else self.root
        if not base.is_dir():
            return []
        return sorted(
            str(p.relative_to(self.root))
            for p in base.rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )

    def list_modified(self, prefix: str) -> dict[str, float]:
        return {key: self._path(key).stat().st_mtime for key in self.list_keys(prefix)}

    def list_sizes(self, prefix: str) -> dict[str, int | None]:
        return {key: self._path(key).stat().st_size for key in self.list_keys(prefix)}

    def delete_prefix(self, prefix: str) -> None:
        path = self._path(prefix)
        if path == self.root:
            raise ValueError("refusing to delete the whole snapshot store")
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    def uri(self, key: str) -> str:
        return self._path(key).as_uri()


def open_snapshot_store(location: str | Path) -> SnapshotStore:
    """The store for a configured location: a path, a ``file://`` URI or ``s3://bucket/prefix``."""
    text = str(location)
    if text.startswith("file://"):
        return FileSystemSnapshotStore(text[len("file://") :])
    if text.startswith(("s3://", "s3a://")):
        # obstore is imported only where an object store is configured.
        from platform_streams.state.object_snapshot_store import S3SnapshotStore

        return S3SnapshotStore(text)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise ValueError(
            f"snapshot location {text!r}: no SnapshotStore for scheme {scheme!r} yet "
            "(use a path, or pass a SnapshotStore implementation)"
        )
    return FileSystemSnapshotStore(text)


class SnapshotCatalog:
    """The snapshot layout over a :class:`SnapshotStore`: publish, list, fetch, prune."""

    def __init__(self, store: SnapshotStore) -> None:
        self.store = store

    @staticmethod
    def partition_prefix(application_id: str, store: str, partition: int) -> str:
        return f"{application_id}/{store}/{partition}/"

    @staticmethod
    def snapshot_prefix(manifest: SnapshotManifest) -> str:
        return (
            SnapshotCatalog.partition_prefix(manifest.application_id, manifest.store, manifest.partition)
            + f"{manifest.offset:020d}-{manifest.snapshot_id}/"
        )

    @staticmethod
    def parquet_prefix(application_id: str, store: str, run_id: str) -> str:
        return f"{application_id}/{store}/parquet/{run_id}/"

    def upload_sst(self, manifest: SnapshotManifest, sst: Path) -> None:
        """Upload a snapshot's SST file (step 1 of 2; invisible until :meth:`commit`)."""
        if manifest.sst_file is None:
            raise ValueError(f"{manifest.describe()} has no SST file")
        self.store.put_file(self.snapshot_prefix(manifest) + manifest.sst_file, sst)

    def commit(self, manifest: SnapshotManifest) -> None:
        """Write the manifest (step 2 of 2): from now on readers see the snapshot.

        Refused (``ValueError``) unless the SST file is there with the manifest's size: an
        upload deleted meanwhile (``prune_orphans`` with a grace shorter than the job) must
        not become a published snapshot without data.
        """
        problem = self.missing_data(manifest)
        if problem is not None:
            raise ValueError(f"not publishing {manifest.describe()}: {problem}")
        data = manifest.model_dump_json(indent=2).encode("utf-8")
        self.store.put_bytes(self.snapshot_prefix(manifest) + MANIFEST_NAME, data)
        log.info("published %s", manifest.describe())

    def manifests(
        self, application_id: str, store: str, partition: int | None = None
    ) -> list[SnapshotManifest]:
        """Readable manifests of one store partition (or of all), newest (highest offset) first.

        A manifest that does not parse is skipped with a warning: one bad object must not
        hide the older good ones.
        """
        out: list[SnapshotManifest] = []
        if partition is None:
            prefix = f"{application_id}/{store}/"
        else:
            prefix = self.partition_prefix(application_id, store, partition)
        for key in self.store.list_keys(prefix):
            if not key.endswith("/" + MANIFEST_NAME):
                continue
            try:
                out.append(SnapshotManifest.model_validate_json(self.store.get_bytes(key)))
            except (ValueError, OSError) as exc:
                log.warning("ignoring unreadable snapshot manifest %s: %s", key, exc)
        out.sort(key=lambda m: (m.offset, m.created_at_ms), reverse=True)
        return out

    def fetch_sst(self, manifest: SnapshotManifest, destination: Path) -> Path:
        """Download the SST file of ``manifest`` to ``destination`` and return it."""
        if manifest.sst_file is None:
            raise ValueError(f"{manifest.describe()} has no SST file")
        self.store.get_file(self.snapshot_prefix(manifest) + manifest.sst_file, destination)
        return destination

    def missing_data(
        self, manifest: SnapshotManifest, sizes: dict[str, int | None] | None = None
    ) -> str | None:
        """Why ``manifest``'s SST file is not in the store as the manifest describes it, or None.

        ``sizes``: a listing (:meth:`SnapshotStore.list_sizes`) covering the snapshot's prefix.
        """
        if manifest.sst_file is None or manifest.record_count == 0:
            return None
        prefix = self.snapshot_prefix(manifest)
        found = sizes if sizes is not None else self.store.list_sizes(prefix)
        key = prefix + manifest.sst_file
        if key not in found:
            return f"its SST file {key} is missing"
        size = found[key]
        if size is not None and manifest.size_bytes and size != manifest.size_bytes:
            return f"its SST file {key} has {size} bytes, the manifest says {manifest.size_bytes}"
        return None

    def prune(self, application_id: str, store: str, partition: int, keep: int) -> int:
        """Delete all but the ``keep`` newest snapshots of a partition whose SST file is there;
        returns how many went. A newer snapshot without its data is not counted (and left: it
        is never used), so the last usable ones are never pruned for it."""
        if keep < 1:
            raise ValueError("keep at least one snapshot")
        sizes = self.store.list_sizes(self.partition_prefix(application_id, store, partition))
        kept = 0
        old = []
        for manifest in self.manifests(application_id, store, partition):
            if kept >= keep:
                old.append(manifest)
            elif self.missing_data(manifest, sizes) is None:
                kept += 1
            else:
                why = self.missing_data(manifest, sizes)
                log.warning("%s is not counted as kept: %s", manifest.describe(), why)
        for manifest in old:
            self.store.delete_prefix(self.snapshot_prefix(manifest))
        return len(old)

    def prune_orphans(self, application_id: str, store: str, grace_s: float) -> list[str]:
        """Delete uploads no manifest publishes whose newest object is older than ``grace_s``.

        A job killed between its SST upload and its manifest leaves a snapshot directory
        without ``manifest.json``; no reader ever uses it. ``grace_s`` must exceed the
        longest compaction run: a directory of a job still uploading is younger than that
        and is kept. Returns the snapshot prefixes deleted.
        """
        if grace_s < 0:
            raise ValueError("the grace period cannot be negative")
        directories: dict[str, list[tuple[str, float]]] = {}
        for key, modified in self.store.list_modified(f"{application_id}/{store}/").items():
            parts = key.split("/")
            # <app>/<store>/<partition>/<offset>-<id>/<object>: the analysts' parquet/ copy is not here
            if len(parts) == 5 and parts[2].isdigit():
                directories.setdefault("/".join(parts[:4]) + "/", []).append((parts[4], modified))
        cutoff = time.time() - grace_s
        deleted = []
        for prefix, objects in sorted(directories.items()):
            if any(name == MANIFEST_NAME for name, _ in objects):
                continue
            if max(modified for _, modified in objects) > cutoff:
                continue
            self.store.delete_prefix(prefix)
            log.info("deleted unpublished upload %s (%d objects)", prefix, len(objects))
            deleted.append(prefix)
        return deleted

    def prune_store(self, application_id: str, store: str, keep: int) -> dict[int, int]:
        """:meth:`prune` every partition of ``store`` that has snapshots; partition -> deleted.

        Deletes by manifest, the newest first kept: each partition keeps its ``keep``
        highest-offset snapshots, so a worker restoring while this runs still finds a
        snapshot (the manifest of a kept snapshot is never touched). Uploads without a
        manifest (a job killed mid-write, or one still running) are left alone.
        """
        if keep < 1:
            raise ValueError("keep at least one snapshot")
        partitions = sorted({m.partition for m in self.manifests(application_id, store)})
        return {p: self.prune(application_id, store, p, keep) for p in partitions}
