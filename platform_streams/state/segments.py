"""Time segments: how window and session stores enforce retention without scanning.

Records are partitioned by time (window start, or session end) into segments of
``segment_interval_ms``; each segment is a column of the storage backend (a RocksDB column
family, or an in-memory map). Kafka Streams' rule is kept: ``interval = max(retention / 2,
60 s)``, so at most about three segments are live, and a segment is dropped whole once
everything in it is older than ``stream time - retention``. Reads filter the exact bound
(``time > stream time - retention``), so expiry is precise even though deletion is per
segment.

:class:`SegmentedBytesStore` holds what the window and session bytes stores share:
lifecycle, the store's own stream time (persisted in the default column at flush, in the
same atomic write as the data, so a reopened store keeps its retention horizon) and
segment bookkeeping.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, insort
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from platform_streams.state.backend import BackedStore, BytesMap, StorageBackend

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext

__all__ = ["SegmentedBytesStore", "default_segment_interval", "live_from", "live_segment_start"]

_SEGMENT_PREFIX = "seg-"
_STREAM_TIME_KEY = b"__stream_time__"
_LONG = struct.Struct(">q")
_MIN_SEGMENT_INTERVAL_MS = 60_000


def default_segment_interval(retention_ms: int) -> int:
    """Kafka Streams' default: half the retention, at least one minute."""
    return max(retention_ms // 2, _MIN_SEGMENT_INTERVAL_MS)


def live_segment_start(observed_ms: int, retention_ms: int, interval_ms: int) -> int:
    """The first time of the oldest live segment: what a segment-granular store still keeps."""
    return max((observed_ms - retention_ms) // interval_ms, 0) * interval_ms


def live_from(observed_ms: int, retention_ms: int, interval_ms: int, segment_granular: bool) -> int:
    """The smallest record time a store still shows at stream time ``observed_ms`` (what a
    snapshot of the store keeps, too)."""
    if segment_granular:
        return live_segment_start(observed_ms, retention_ms, interval_ms)
    return max(observed_ms - retention_ms + 1, 0)


class SegmentedBytesStore(BackedStore):
    """Shared base of the window and session bytes stores (not a store by itself)."""

    #: records live as long as their segment (session stores, as Kafka's segmented stores)
    #: rather than exactly ``retention`` after the stream time (window stores)
    segment_granular = False

    def __init__(
        self, name: str, backend: StorageBackend, retention_ms: int, segment_interval_ms: int | None
    ) -> None:
        if retention_ms <= 0:
            raise ValueError(f"store {name}: retention must be > 0 ms, got {retention_ms}")
        super().__init__(name, backend)
        backend.recycle_columns = True  # a segment's keys are never empty
        self._retention_ms = retention_ms
        self._interval = segment_interval_ms or default_segment_interval(retention_ms)
        self._segment_ids: list[int] = []
        self._segments: dict[int, BytesMap] = {}
        #: Largest record time seen (window start / session end); -1 before any record.
        #: Set through :meth:`_observe` only (it keeps ``_min_live`` with it).
        self.observed_stream_time = -1
        #: ``_min_live_time()``, kept as stream time moves (read per window written or fetched)
        self._min_live = 0
        self._persisted_stream_time = -1
        self._min_live_segment = 0
        #: Records dropped because they were already expired when written (a metric later).
        self.expired_records_dropped = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def retention_ms(self) -> int:
        return self._retention_ms

    @property
    def segment_interval_ms(self) -> int:
        return self._interval

    @property
    def segment_ids(self) -> list[int]:
        """Ids (``time // interval``) of the live segments, oldest first."""
        return list(self._segment_ids)

    def _open(self, context: StateStoreContext, root: Any, restore: Callable[[Any], None]) -> None:
        self._open_backend(context)
        self._load_segments()
        context.register(root, restore, None)

    def _load_segments(self) -> None:
        backend = self._backend
        self._segments = {}
        ids = []
        for column in backend.column_names():
            if column.startswith(_SEGMENT_PREFIX):
                sid = int(column[len(_SEGMENT_PREFIX) :])
                ids.append(sid)
                self._segments[sid] = backend.column(column)
        self._segment_ids = sorted(ids)
        raw = backend.default.get(_STREAM_TIME_KEY)
        self._observe(_LONG.unpack(raw)[0] if raw is not None else -1)
        self._persisted_stream_time = self.observed_stream_time
        self._min_live_segment = 0
        self._expire_segments()

    def flush(self) -> None:
        if self.observed_stream_time != self._persisted_stream_time:
            self._backend.default.put(_STREAM_TIME_KEY, _LONG.pack(self.observed_stream_time))
            self._persisted_stream_time = self.observed_stream_time
        self._backend.flush()

    def close(self) -> None:
        if self._backend.is_open:
            self.flush()
        self._segments = {}
        self._segment_ids = []
        self._backend.close()

    def wipe(self) -> None:
        # drop the column handles first: they keep the RocksDB instance (and its lock) alive
        self._segments = {}
        self._segment_ids = []
        self._backend.wipe()
        self._load_segments()

    # ------------------------------------------------------------------ segments

    def _advance(self, time_ms: int) -> bool:
        """Record ``time_ms``; returns False if a record at that time is already expired."""
        if time_ms > self.observed_stream_time:
            self._observe(time_ms)
            if (time_ms - self._retention_ms) // self._interval > self._min_live_segment:
                self._expire_segments()
            return True
        return time_ms >= self._min_live

    def advance_stream_time(self, time_ms: int) -> None:
        """Move the stream time to ``time_ms`` if it is later, expiring segments as a write
        at that time would (a snapshot restore sets the time its records were kept for)."""
        self._advance(time_ms)

    def _observe(self, time_ms: int) -> None:
        """Set the stream time, and the smallest record time still visible with it."""
        self.observed_stream_time = time_ms
        self._min_live = self._live_from(time_ms)

    def _min_live_time(self) -> int:
        """The smallest record time still visible."""
        return self._min_live

    def _live_from(self, observed_ms: int) -> int:
        """The smallest record time still visible at stream time ``observed_ms``."""
        return live_from(observed_ms, self._retention_ms, self._interval, self.segment_granular)

    def _expire_segments(self) -> None:
        min_live = max((self.observed_stream_time - self._retention_ms) // self._interval, 0)
        self._min_live_segment = min_live
        ids = self._segment_ids
        cut = bisect_left(ids, min_live)
        if cut:
            for sid in ids[:cut]:
                del self._segments[sid]
                self._backend.drop_column(f"{_SEGMENT_PREFIX}{sid}")
            del ids[:cut]

    def _segment_for_write(self, time_ms: int) -> BytesMap:
        sid = time_ms // self._interval
        seg = self._segments.get(sid)
        if seg is None:
            seg = self._segments[sid] = self._backend.column(f"{_SEGMENT_PREFIX}{sid}")
            insort(self._segment_ids, sid)
        return seg

    def _segment_for_read(self, time_ms: int) -> BytesMap | None:
        return self._segments.get(time_ms // self._interval)

    def _segments_between(self, time_from_ms: int, time_to_ms: int, reverse: bool) -> list[BytesMap]:
        """Existing segments that may hold times in ``[time_from, time_to]``, oldest first."""
        first = time_from_ms // self._interval
        last = time_to_ms // self._interval
        segs = [self._segments[sid] for sid in self._segment_ids if first <= sid <= last]
        if reverse:
            segs.reverse()
        return segs
