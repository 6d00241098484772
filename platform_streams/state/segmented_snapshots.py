"""Snapshots of window and session stores: what a snapshot keeps, and how a restore applies it.

A window or session store keeps its records in time segments (column families), under the
changelog's own binary keys (Kafka's ``WindowKeySchema``/``SessionKeySchema`` layouts, see
:mod:`~platform_streams.state.keys`). Its snapshot is therefore the compacted changelog --
the latest value of every binary key -- minus what the store would no longer hold: the
records whose time (window start, session end) is below the store's retention floor at the
snapshot's stream time. The stream time travels in the manifest, because the largest time
in the changelog may belong to a record that is gone (a tombstone, an expired window), and
a store restored with a smaller stream time would accept late records a replayed one drops.

Why this equals a replay: every record of one binary key carries the same time, and a
store's retention floor only rises with stream time, so a replay ends with exactly the
latest value of each key whose time is at or above the floor of the final stream time.

A restore sets the stream time first and then writes the records through the store's own
changelog-restore path (they land in their segments); it is not a file ingest like a
key-value snapshot, but it reads only the live windows, from a local file.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from platform_streams.state.keys import SESSION_SUFFIX_LEN, WINDOW_SUFFIX_LEN, session_end_of, window_start_of
from platform_streams.state.rocksdb import RocksDBBackend
from platform_streams.state.segments import SegmentedBytesStore, live_from
from platform_streams.state.session_store import SessionBytesStore
from platform_streams.state.stores import SessionBytesStoreSupplier, WindowBytesStoreSupplier
from platform_streams.state.window_store import WindowBytesStore

__all__ = ["SegmentedLayout", "apply_segmented_snapshot", "read_sst", "segmented_layout"]

_BATCH = 10_000


@dataclass(frozen=True, slots=True)
class SegmentedLayout:
    """The retention rule of one window or session store, as its snapshots apply it."""

    kind: Literal["window", "session"]
    retention_ms: int
    segment_interval_ms: int

    @classmethod
    def of_store(cls, store: SegmentedBytesStore) -> SegmentedLayout:
        kind: Literal["window", "session"] = "session" if isinstance(store, SessionBytesStore) else "window"
        return cls(kind, store.retention_ms, store.segment_interval_ms)

    def time_of(self, binary: bytes) -> int:
        """The record time of a changelog key: window start, or session end."""
        return session_end_of(binary) if self.kind == "session" else window_start_of(binary)

    def floor(self, stream_time_ms: int) -> int:
        """The smallest record time the store still holds at ``stream_time_ms``."""
        # sessions live as long as their segment, windows exactly ``retention`` (segments.py)
        return live_from(stream_time_ms, self.retention_ms, self.segment_interval_ms, self.kind == "session")

    def valid_key(self, binary: bytes) -> bool:
        return len(binary) >= (SESSION_SUFFIX_LEN if self.kind == "session" else WINDOW_SUFFIX_LEN)


def segmented_layout(builder: Any) -> SegmentedLayout | None:
    """The layout of a store builder's persistent window/session store, None for other stores.

    Reads the bytes store supplier (DSL builders make it on demand, PAPI builders hold it),
    so retention and segment interval are the ones the running store uses.
    """
    if hasattr(builder, "bytes_supplier"):
        supplier = builder.bytes_supplier()
    else:
        supplier = getattr(builder, "supplier", None)
    if not isinstance(supplier, WindowBytesStoreSupplier | SessionBytesStoreSupplier):
        return None
    if not supplier.persistent:
        return None
    store = supplier.get()
    if not isinstance(store, WindowBytesStore | SessionBytesStore):
        return None
    return SegmentedLayout.of_store(store)


def read_sst(path: Path, work: Path) -> Iterator[tuple[bytes, bytes]]:
    """The entries of an SST file in key order, read by ingesting it (moved) into a scratch
    RocksDB under ``work`` (RocksDB checks the file's block checksums on the way)."""
    backend = RocksDBBackend("sst-reader")
    backend.open(work)
    try:
        backend.ingest_sst(path, move=True)
        yield from backend.default.items()
    finally:
        backend.close()
        shutil.rmtree(work, ignore_errors=True)


def apply_segmented_snapshot(
    store: SegmentedBytesStore, items: Iterable[tuple[bytes, bytes]], stream_time_ms: int
) -> int:
    """Write a snapshot's records into an empty window/session store; returns how many.

    The stream time is set first, so every record lands (they are all at or above its
    floor) and the store expires exactly what the replayed store would have expired.
    """
    store.advance_stream_time(stream_time_ms)
    restore: Any = store.restore_batch  # type: ignore[attr-defined]
    batch: list[tuple[bytes, bytes | None]] = []
    count = 0
    for item in items:
        batch.append(item)
        if len(batch) >= _BATCH:
            restore(batch)
            count += len(batch)
            batch = []
    if batch:
        restore(batch)
        count += len(batch)
    return count
