"""The window bytes store: values per (key, window start), segmented by window start.

Layout (see :mod:`~platform_streams.state.keys`): ``key + start(8) + seqnum(4)`` inside the
segment of the window start. A fetch of one key over a time range is one short range scan
per live segment (at most ~3), in key-then-time order, so stream-stream joins and windowed
aggregations read only the key's own windows.

Retention: a window is visible while ``start > stream time - retention`` (stream time = the
largest window start put); writes of already-expired windows are dropped, as in Kafka
Streams. With ``retain_duplicates`` (stream-stream joins) every put gets a fresh seqnum so
equal (key, start) pairs coexist, and a None value is ignored instead of deleting.

Iteration: scans over one key are materialized into a list (they are small, and a list
survives the segment being dropped by a put made while iterating); scans over many keys
open every segment's iterator eagerly (snapshots) and filter lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from platform_streams.state.api import StateStore, WindowStore
from platform_streams.state.backend import StorageBackend
from platform_streams.state.keys import (
    MAX_SEQNUM,
    MAX_TIME,
    WINDOW_SUFFIX_LEN,
    inclusive_to_exclusive,
    keys_upper_bound,
    split_window_key,
    time_bytes,
    time_from,
    window_key,
    window_start_of,
)
from platform_streams.state.segments import SegmentedBytesStore
from platform_streams.state.windowed import TimeWindow, Windowed

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext

__all__ = ["WindowBytesStore"]

_MAX_SEQ_BYTES = b"\xff\xff\xff\xff"


class WindowBytesStore(SegmentedBytesStore, WindowStore[bytes, bytes]):
    """Segmented window store over a storage backend (Kafka Streams' RocksDB/in-memory window stores)."""

    def __init__(
        self,
        name: str,
        backend: StorageBackend,
        retention_ms: int,
        window_size_ms: int,
        retain_duplicates: bool = False,
        segment_interval_ms: int | None = None,
    ) -> None:
        super().__init__(name, backend, retention_ms, segment_interval_ms)
        if window_size_ms <= 0:
            raise ValueError(f"store {name}: window size must be > 0 ms, got {window_size_ms}")
        if retention_ms < window_size_ms:
            raise ValueError(
                f"store {name}: retention ({retention_ms} ms) must be >= window size ({window_size_ms} ms)"
            )
        self._window_size = window_size_ms
        self._retain_duplicates = retain_duplicates
        self._seqnum = 0

    @property
    def window_size_ms(self) -> int:
        return self._window_size

    @property
    def retain_duplicates(self) -> bool:
        return self._retain_duplicates

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._open(context, root, self.restore_batch)

    def restore_batch(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records (binary window keys); expired ones are skipped."""
        advance = self._advance
        for binary, value in batch:
            start = window_start_of(binary)
            if advance(start):
                self._segment_for_write(start).put(binary, value)
            else:
                self.expired_records_dropped += 1

    # ------------------------------------------------------------------ writes

    def next_seqnum(self) -> int:
        """The seqnum of the next put (the change-logging layer keeps the same counter)."""
        if not self._retain_duplicates:
            return 0
        self._seqnum = (self._seqnum + 1) & MAX_SEQNUM
        return self._seqnum

    def put(self, key: bytes, value: bytes | None, window_start_ms: int) -> None:
        if value is None and self._retain_duplicates:
            return
        self._write(window_key(key, window_start_ms, self.next_seqnum()), value)

    def put_binary(self, binary: bytes, value: bytes | None, window_start_ms: int) -> None:
        """:meth:`put` of a window given as its binary key (seqnum 0), as the record cache holds
        it: a cache flush need not split the key and build it again. Not for duplicates."""
        self.binary_writer()(binary, value)

    def binary_writer(self) -> Callable[[bytes, bytes | None], None]:
        """``write(binary, value)``: :meth:`put_binary` in one call, the window start read from
        the key -- what a cache flush does per entry (every window an emit-final aggregation
        closed passes through it once). Not for duplicates."""
        if self._retain_duplicates:
            raise ValueError(f"store {self.name}: put_binary cannot number retained duplicates")
        return self._write

    def _write(self, binary: bytes, value: bytes | None) -> None:
        # _advance and _segment_for_write, their common case in line
        start: int = time_from(binary, len(binary) - WINDOW_SUFFIX_LEN)[0]
        if start > self.observed_stream_time:
            self._advance(start)
        elif start < self._min_live:
            self.expired_records_dropped += 1
            return
        segment = self._segments.get(start // self._interval)
        if segment is None:
            segment = self._segment_for_write(start)
        segment.put(binary, value)

    # ------------------------------------------------------------------ reads

    def fetch_at(self, key: bytes, window_start_ms: int) -> bytes | None:
        if window_start_ms < self._min_live:
            return None
        seg = self._segment_for_read(window_start_ms)
        if seg is None:
            return None
        if not self._retain_duplicates:
            return seg.get(window_key(key, window_start_ms, 0))
        first = window_key(key, window_start_ms, 0)
        expected = len(first)
        for binary, value in seg.items(first, window_key(key, window_start_ms, MAX_SEQNUM) + b"\x00"):
            if len(binary) == expected:
                return value
        return None

    def fetch_between(
        self, key: bytes, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[int, bytes]]:
        time_from_ms = max(time_from_ms, self._min_live_time())
        if time_from_ms > time_to_ms:
            return iter(())
        lower = window_key(key, time_from_ms, 0)
        upper = inclusive_to_exclusive(key + time_bytes(time_to_ms) + _MAX_SEQ_BYTES)
        expected = len(key) + WINDOW_SUFFIX_LEN
        out: list[tuple[int, bytes]] = []
        for seg in self._segments_between(time_from_ms, time_to_ms, backward):
            for binary, value in seg.items(lower, upper, backward):
                if len(binary) == expected:
                    out.append((window_start_of(binary), value))
        return iter(out)

    def fetch_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        time_from_ms: int,
        time_to_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        """Segment by segment; within a segment by key, then window start."""
        time_from_ms = max(time_from_ms, self._min_live_time())
        if time_from_ms > time_to_ms or (key_from is not None and key_to is not None and key_from > key_to):
            return iter(())
        upper = (
            keys_upper_bound(key_to, time_bytes(time_to_ms) + _MAX_SEQ_BYTES) if key_to is not None else None
        )
        segs = self._segments_between(time_from_ms, time_to_ms, backward)
        iters = [seg.items(key_from, upper, backward) for seg in segs]
        return self._windows(iters, key_from, key_to, time_from_ms, time_to_ms)

    def fetch_all(
        self, time_from_ms: int, time_to_ms: int, *, backward: bool = False
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        """Segment by segment; within a segment by key, then window start."""
        time_from_ms = max(time_from_ms, self._min_live_time())
        if time_from_ms > time_to_ms:
            return iter(())
        segs = self._segments_between(time_from_ms, time_to_ms, backward)
        iters = [seg.items(None, None, backward) for seg in segs]
        return self._windows(iters, None, None, time_from_ms, time_to_ms)

    def all(self, *, backward: bool = False) -> Iterator[tuple[Windowed[bytes], bytes]]:
        return self.fetch_all(0, MAX_TIME, backward=backward)

    def _windows(
        self,
        iters: list[Iterator[tuple[bytes, bytes]]],
        key_from: bytes | None,
        key_to: bytes | None,
        time_from_ms: int,
        time_to_ms: int,
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        size = self._window_size
        for it in iters:
            for binary, value in it:
                key, start, _ = split_window_key(binary)
                if start < time_from_ms or start > time_to_ms:
                    continue
                if (key_from is not None and key < key_from) or (key_to is not None and key > key_to):
                    continue
                yield Windowed(key, TimeWindow(start, start + size)), value
