"""Recycled column families of the segmented stores (platform_streams/state/rocksdb_columns.py).

An expired window segment's family is emptied and kept for the next segment instead of
dropped (creating and dropping one costs RocksDB ~3 ms each). What must hold: the store
answers exactly as with fresh families (nothing of an expired segment shows through the
segment that reuses its family, through reads, scans, a reopen or a crash), a state
directory written before recycling opens as it was, and stores whose keys may be empty
(the versioned store's segments) still drop theirs. Over the real RocksDB, no mocks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rocksdict import Options, Rdict

from platform_streams.state import Stores
from platform_streams.state.backend import store_directory
from platform_streams.state.keys import window_start_of
from platform_streams.state.rocksdb import RocksDBBackend
from platform_streams.state.window_store import WindowBytesStore

from .conftest import FakeContext

MINUTE = 60_000
#: retention two minutes: segments of one minute (Kafka's ``max(retention / 2, 60 s)``),
#: three live at a time, the windows of the last two minutes visible
RETENTION = 2 * MINUTE


def _store(context: FakeContext) -> WindowBytesStore:
    store: WindowBytesStore = Stores.persistent_window_store("win", RETENTION, MINUTE).get()
    store.init(context, store)
    return store


def _families(store: WindowBytesStore) -> list[str]:
    path = store.backend.path
    assert path is not None
    return sorted(name for name in Rdict.list_cf(str(path), Options(raw_mode=True)) if name != "default")


def _starts_per_segment(store: WindowBytesStore) -> dict[str, set[int]]:
    """The window starts each live segment's family holds, read from the family itself
    (below the store's own time filter, which would hide an expired window left behind)."""
    return {
        name: {window_start_of(key) for key, _ in store.backend.column(name).items()}
        for name in store.backend.column_names()
    }


def _windows(store: WindowBytesStore) -> list[tuple[bytes, int, bytes]]:
    return [(w.key, w.window.start_ms, v) for w, v in store.all()]


def test_expired_segments_families_are_reused_and_hold_nothing_old(context: FakeContext) -> None:
    store = _store(context)
    try:
        for minute in range(12):
            for key in (b"a", b"b", b"c"):
                store.put(key, f"{key.decode()}{minute}".encode(), minute * MINUTE)
            store.flush()
        live = store.segment_ids
        assert live == [9, 10, 11]
        # three live segments in the first three families (a segment expires as stream time
        # reaches the next one, which takes its family); without recycling one family a minute
        # is created and one dropped, and the families would be seg-9, seg-10 and seg-11
        assert _families(store) == ["seg-0", "seg-1", "seg-2"]
        assert _starts_per_segment(store) == {
            "seg-9": {9 * MINUTE},
            "seg-10": {10 * MINUTE},
            "seg-11": {11 * MINUTE},
        }
        assert sorted(store.backend.column_names()) == ["seg-10", "seg-11", "seg-9"]
        # only the live windows, each with its own value: nothing of the expired segments
        assert _windows(store) == [  # segment by segment, by key within one
            (b"a", 10 * MINUTE, b"a10"),
            (b"b", 10 * MINUTE, b"b10"),
            (b"c", 10 * MINUTE, b"c10"),
            (b"a", 11 * MINUTE, b"a11"),
            (b"b", 11 * MINUTE, b"b11"),
            (b"c", 11 * MINUTE, b"c11"),
        ]
        forward = [(10 * MINUTE, b"b10"), (11 * MINUTE, b"b11")]
        assert list(store.fetch_between(b"b", 0, 12 * MINUTE)) == forward
        assert list(store.fetch_between(b"b", 0, 12 * MINUTE, backward=True)) == [
            (11 * MINUTE, b"b11"),
            (10 * MINUTE, b"b10"),
        ]
        assert store.fetch_at(b"a", 3 * MINUTE) is None
    finally:
        store.close()


def test_a_reopened_store_finds_its_segments_in_recycled_families(context: FakeContext) -> None:
    store = _store(context)
    for minute in range(8):
        store.put(b"k", str(minute).encode(), minute * MINUTE)
    store.close()  # flushes
    again = _store(context)
    try:
        assert again.segment_ids == [5, 6, 7]
        assert _windows(again) == [(b"k", 6 * MINUTE, b"6"), (b"k", 7 * MINUTE, b"7")]
        before = _families(again)
        again.put(b"k", b"8", 8 * MINUTE)  # expires segment 5; segment 8 takes a free family
        assert _families(again) == before
        assert _windows(again) == [(b"k", 7 * MINUTE, b"7"), (b"k", 8 * MINUTE, b"8")]
    finally:
        again.close()


def test_a_directory_written_before_recycling_opens_as_it_was(context: FakeContext) -> None:
    """Families named after their segments, no labels (every state directory made before)."""
    path = store_directory(context.state_dir, "win")
    old = RocksDBBackend("win")
    old.open(path)
    old.default.put(b"__stream_time__", (2 * MINUTE).to_bytes(8, "big", signed=True))
    old.column("seg-1").put(b"k" + MINUTE.to_bytes(8, "big") + bytes(4), b"old-1")
    old.column("seg-2").put(b"k" + (2 * MINUTE).to_bytes(8, "big") + bytes(4), b"old-2")
    old.close()
    store = _store(context)
    try:
        assert store.segment_ids == [1, 2]
        assert _windows(store) == [(b"k", MINUTE, b"old-1"), (b"k", 2 * MINUTE, b"old-2")]
        store.put(b"k", b"new-3", 3 * MINUTE)  # seg-1 expires: its family becomes free
        store.put(b"k", b"new-4", 4 * MINUTE)  # seg-2 expires, seg-4 reuses seg-1's family
        assert _windows(store) == [(b"k", 3 * MINUTE, b"new-3"), (b"k", 4 * MINUTE, b"new-4")]
        assert "seg-4" not in _families(store)
    finally:
        store.close()


def test_a_new_segment_named_like_a_recycled_family_gets_its_own(context: FakeContext) -> None:
    """A family named ``seg-5`` that holds another segment (or is free) is never taken by name."""
    backend = RocksDBBackend("win")
    backend.recycle_columns = True
    backend.open(context.state_dir / "db")
    try:
        backend.column("seg-5").put(b"key-of-5", b"5")
        backend.drop_column("seg-5")  # free
        backend.column("seg-9").put(b"key-of-9", b"9")  # reuses the family named seg-5
        backend.column("seg-5").put(b"again-5", b"5b")  # must not be that family
        assert backend.column("seg-9").get(b"key-of-9") == b"9"
        assert list(backend.column("seg-5").items()) == [(b"again-5", b"5b")]
        assert list(backend.column("seg-9").items()) == [(b"key-of-9", b"9")]
        assert list(backend.column("seg-9").items(reverse=True)) == [(b"key-of-9", b"9")]
        backend.flush()
    finally:
        backend.close()
    backend = RocksDBBackend("win")
    backend.recycle_columns = True
    backend.open(context.state_dir / "db")
    try:
        assert sorted(backend.column_names()) == ["seg-5", "seg-9"]
        assert list(backend.column("seg-5").items()) == [(b"again-5", b"5b")]
        assert list(backend.column("seg-9").items()) == [(b"key-of-9", b"9")]
    finally:
        backend.close()


def test_stores_whose_keys_may_be_empty_drop_their_families(context: FakeContext) -> None:
    backend = RocksDBBackend("plain")  # recycle_columns not set: the versioned store's case
    backend.open(context.state_dir / "db")
    try:
        backend.column("segment-1").put(b"", b"an empty key is data here")
        backend.flush()
        backend.drop_column("segment-1")
        backend.flush()
        path = context.state_dir / "db"
        assert Rdict.list_cf(str(path), Options(raw_mode=True)) == ["default"]
        assert list(backend.column("segment-2").items()) == []
    finally:
        backend.close()


CRASH_WRITER = """
import os, sys
from pathlib import Path
from platform_streams.state.backend import store_directory
from platform_streams.state.keys import window_start_of
from platform_streams.state.rocksdb import RocksDBBackend

def backend():
    b = RocksDBBackend("win")
    b.recycle_columns = True
    b.open(Path(sys.argv[1]))
    return b

b = backend()
b.column("seg-1").put(b"old-key-of-seg-1", b"old")
b.flush()
b.drop_column("seg-1")      # emptied and free: not flushed
b.column("seg-7").put(b"new-key-of-seg-7", b"new")  # reuses it: not flushed
os._exit(0)  # as kill -9: no close, no flush
"""


def test_a_crash_before_the_flush_leaves_the_family_as_it_was_flushed(tmp_path: Path) -> None:
    """The WAL is off: what was not flushed is lost, and since a family's label is written in
    the family itself, it is lost with the data it names -- never old data under a new name."""
    path = tmp_path / "db"
    subprocess.run([sys.executable, "-c", CRASH_WRITER, str(path)], check=True, timeout=60)
    backend = RocksDBBackend("win")
    backend.recycle_columns = True
    backend.open(path)
    try:
        assert backend.column_names() == ["seg-1"]
        assert list(backend.column("seg-1").items()) == [(b"old-key-of-seg-1", b"old")]
    finally:
        backend.close()
