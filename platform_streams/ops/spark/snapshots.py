"""Writing state snapshots from Spark: compacted rows -> SST per partition -> manifests.

Shared by changelog compaction and by a backfill's final state. The input is an RDD of
:data:`CompactedRow` ``((partition, key), (offset, value))``, partitioned so that each
changelog partition lies in one Spark partition and sorted by ``(partition, key)`` --
which is RocksDB's order too, because Python compares bytes as unsigned, like RocksDB's
bytewise comparator. A ``value`` of None is a tombstone: it moves the offset covered but
writes nothing.

Two phases, so that a failed job never publishes a partial snapshot set:

1. in the tasks, :class:`SnapshotWriter` writes each partition's SST file locally, takes its
   sha256 and uploads it (invisible: no manifest yet), and returns the manifest;
2. on the driver, :func:`commit_snapshots` writes the manifests once every task (and the
   Parquet copy) succeeded.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import groupby
from pathlib import Path
from typing import Any

from platform_streams.serde import Serde
from platform_streams.state.rocksdb import write_sst_file
from platform_streams.state.snapshots import (
    SnapshotCatalog,
    SnapshotManifest,
    SnapshotStore,
    file_checksum,
    new_snapshot_id,
)

__all__ = [
    "CompactedRow",
    "SnapshotWriter",
    "TaskSerde",
    "commit_snapshots",
    "latest_in_sorted",
    "latest_per_key",
    "parquet_rows",
    "task_logger",
]

log = logging.getLogger(__name__)

#: ((changelog partition, key), (offset, value or None for a tombstone))
CompactedRow = tuple[tuple[int, bytes], tuple[int, bytes | None]]


def task_logger(name: str, level: int = logging.INFO) -> logging.Logger:
    """A logger that prints inside Spark's Python workers (they configure no logging)."""
    logger = logging.getLogger(name)
    root = logging.getLogger("platform_streams")
    if not root.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s [spark task] %(name)s: %(message)s")
        )
        root.addHandler(handler)
        root.setLevel(level)
    return logger


def latest_per_key(rows: Iterable[CompactedRow]) -> Iterator[CompactedRow]:
    """Map-side compaction of one task's rows: the highest offset of each key wins."""
    latest: dict[tuple[int, bytes], tuple[int, bytes | None]] = {}
    for key, update in rows:
        seen = latest.get(key)
        if seen is None or update[0] > seen[0]:
            latest[key] = update
    return iter(latest.items())


def latest_in_sorted(rows: Iterable[CompactedRow]) -> Iterator[CompactedRow]:
    """Rows sorted by key (duplicates adjacent, in any offset order): one row per key, the latest."""
    current: tuple[int, bytes] | None = None
    best: tuple[int, bytes | None] = (-1, None)
    for key, update in rows:
        if key != current:
            if current is not None:
                yield current, best
            current, best = key, update
        elif update[0] > best[0]:
            best = update
    if current is not None:
        yield current, best


class SnapshotWriter:
    """Spark ``mapPartitions`` function: sorted compacted rows -> uploaded SSTs -> manifest dicts."""

    def __init__(
        self,
        store: SnapshotStore,
        application_id: str,
        store_name: str,
        changelog_topic: str,
        *,
        source: str = "compaction",
        offsets: dict[int, int] | None = None,
    ) -> None:
        self.store = store
        self.application_id = application_id
        self.store_name = store_name
        self.changelog_topic = changelog_topic
        self.source = source
        #: partition -> offset covered, when it is known up front (a backfill's seeded changelog)
        self.offsets = offsets or {}

    def __call__(self, rows: Iterator[CompactedRow]) -> Iterator[dict[str, Any]]:
        for partition, group in groupby(rows, key=lambda row: row[0][0]):
            manifest = self._write(partition, group)
            if manifest is not None:
                yield manifest.model_dump()

    def _entries(
        self, partition: int, updates: Iterator[tuple[bytes, bytes | None]], work: Path
    ) -> Iterator[tuple[bytes, bytes]]:
        """What the SST of ``partition`` holds: the live keys of the compacted updates (in
        key order, a None value a tombstone); ``work`` is a scratch directory."""
        return ((key, value) for key, value in updates if value is not None)

    def _manifest_fields(self, partition: int) -> dict[str, Any]:
        """More manifest fields for ``partition`` (subclasses that write other kinds)."""
        return {}

    def _write(self, partition: int, rows: Iterable[CompactedRow]) -> SnapshotManifest | None:
        logger = task_logger(__name__)
        started = time.monotonic()
        highest = [-1]

        def updates() -> Iterator[tuple[bytes, bytes | None]]:
            for (_p, key), (offset, value) in rows:
                if offset > highest[0]:
                    highest[0] = offset
                yield key, value

        catalog = SnapshotCatalog(self.store)
        with tempfile.TemporaryDirectory(prefix="ps-snapshot-") as tmp:
            sst = Path(tmp) / "data.sst"
            count = write_sst_file(sst, self._entries(partition, updates(), Path(tmp)))
            offset = self.offsets.get(partition, highest[0])
            if offset < 0:
                return None
            manifest = SnapshotManifest(
                snapshot_id=new_snapshot_id(),
                application_id=self.application_id,
                store=self.store_name,
                changelog_topic=self.changelog_topic,
                partition=partition,
                offset=offset,
                record_count=count,
                checksum=file_checksum(sst) if count else "",
                size_bytes=sst.stat().st_size if count else 0,
                sst_file="data.sst" if count else None,
                created_at_ms=int(time.time() * 1000),
                source="backfill" if self.source == "backfill" else "compaction",
                **self._manifest_fields(partition),
            )
            if count:
                catalog.upload_sst(manifest, sst)
        logger.info(
            "snapshot of %s partition %d: %d live keys up to offset %d written in %.2fs",
            self.store_name,
            partition,
            count,
            offset,
            time.monotonic() - started,
        )
        return manifest


def commit_snapshots(
    store: SnapshotStore, manifests: Iterable[dict[str, Any]], *, parquet_uri: str | None = None
) -> list[SnapshotManifest]:
    """Publish the manifests the tasks returned (phase 2), sorted by partition."""
    catalog = SnapshotCatalog(store)
    published = []
    for data in sorted(manifests, key=lambda m: m["partition"]):
        manifest = SnapshotManifest.model_validate({**data, "parquet_uri": parquet_uri})
        catalog.commit(manifest)
        published.append(manifest)
    return published


class TaskSerde:
    """A serde shipped to Spark tasks, rebuilt there from its class and constructor params.

    Serdes hold unpicklable parts (bound ``struct`` methods), so they travel as
    ``(class, _params())`` -- nested serdes too -- and are rebuilt with ``cls(*params)``,
    or ``cls()`` when the constructor takes keyword arguments only (options that matter
    for encoding, never for decoding).
    """

    __slots__ = ("serde",)

    def __init__(self, serde: Serde) -> None:
        self.serde = serde

    def __reduce__(self) -> tuple[Any, ...]:
        if type(self.serde).__reduce__ is not object.__reduce__:  # it pickles itself (registry serdes)
            return (TaskSerde, (self.serde,))
        params = tuple(TaskSerde(p) if isinstance(p, Serde) else p for p in self.serde._params())
        return (_rebuild_serde, (type(self.serde), params))


def _rebuild_serde(cls: type[Serde], params: tuple[Any, ...]) -> TaskSerde:
    args = [p.serde if isinstance(p, TaskSerde) else p for p in params]
    try:
        return TaskSerde(cls(*args))
    except TypeError:
        return TaskSerde(cls())


def parquet_rows(
    key_serde: Serde | None = None, value_serde: Serde | None = None
) -> Callable[[CompactedRow], tuple[Any, ...]]:
    """Row maker for the analysts' Parquet copy: raw bytes, plus JSON text when serdes are known."""
    key_decoder = TaskSerde(key_serde) if key_serde is not None else None
    value_decoder = TaskSerde(value_serde) if value_serde is not None else None

    def decode(decoder: TaskSerde | None, data: bytes) -> str | None:
        if decoder is None:
            return None
        try:
            return json.dumps(decoder.serde.deserialize(data), default=_jsonable)
        except Exception as exc:  # a copy for humans: say what failed, keep going
            return json.dumps({"undecodable": f"{type(exc).__name__}: {exc}"})

    def row(item: CompactedRow) -> tuple[Any, ...]:
        (partition, key), (offset, value) = item
        assert value is not None
        return (partition, key, value, offset, decode(key_decoder, key), decode(value_decoder, value))

    return row


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "_asdict"):
        return obj._asdict()
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if isinstance(obj, bytes):
        return obj.hex()
    return str(obj)
