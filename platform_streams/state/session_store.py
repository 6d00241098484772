"""The session bytes store: aggregates per (key, session), segmented by session end.

Layout (see :mod:`~platform_streams.state.keys`): ``key + end(8) + start(8)`` in the segment
of the session end. ``find_sessions(key, earliest_end, latest_start)`` -- called for every
record by a session aggregation -- seeks to ``key + earliest_end`` in each segment that can
hold such an end and stops at the end of the key, so it reads only the key's sessions that
end late enough; the start bound is a filter.

Retention: a session is visible while its segment is live, i.e. its segment holds times after
``stream time - retention`` (stream time = the largest session end put). The store of an
emit-final aggregation (``time_ordered``, Kafka's time-ordered session store) is stricter in
its key-based reads: they return a session only while it ends after ``stream time -
retention``. Results are
materialized lists: they are per key and small, and a session merge removes and puts
sessions while the caller still holds the result.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import TYPE_CHECKING

from platform_streams.state.api import SessionStore, StateStore
from platform_streams.state.backend import StorageBackend
from platform_streams.state.keys import (
    MAX_TIME,
    SESSION_SUFFIX_LEN,
    in_key_range,
    inclusive_to_exclusive,
    key_range_valid,
    session_end_of,
    session_key,
    session_range_bounds,
    split_session_key,
)
from platform_streams.state.segments import SegmentedBytesStore
from platform_streams.state.windowed import SessionWindow, Windowed

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext

__all__ = ["SessionBytesStore"]


class SessionBytesStore(SegmentedBytesStore, SessionStore[bytes, bytes]):
    """Segmented session store over a storage backend.

    A session stays (for merging and ``fetch``) until its segment expires, as in Kafka Streams'
    segmented session stores: with a 5 s gap and no grace, records at 0, 8,000 and then 4,000
    make one session [0, 8000] -- the session at 0 ended before the retention bound but its
    segment is still live.
    """

    segment_granular = True

    def __init__(
        self,
        name: str,
        backend: StorageBackend,
        retention_ms: int,
        segment_interval_ms: int | None = None,
        *,
        time_ordered: bool = False,
    ) -> None:
        super().__init__(name, backend, retention_ms, segment_interval_ms)
        #: Kafka's emit-final session store (RocksDbTimeOrderedSessionBytesStoreSupplier): its
        #: key-based reads skip sessions that ended before ``stream time - retention``
        #: (AbstractRocksDBTimeOrderedSegmentedBytesStore.fetch's getActualFrom), so a closed,
        #: emitted session is gone from fetches and merges at once; writes, the single-session
        #: read and the emit scan still keep whole live segments
        self._time_ordered = time_ordered

    def _key_read_floor(self) -> int:
        """The smallest session end a key-based read returns."""
        floor = self._min_live_time()
        if self._time_ordered:
            return max(floor, self.observed_stream_time - self._retention_ms + 1)
        return floor

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._open(context, root, self.restore_batch)

    def restore_batch(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        """Apply changelog records (binary session keys); expired ones are skipped."""
        advance = self._advance
        for binary, value in batch:
            end = session_end_of(binary)
            if advance(end):
                self._segment_for_write(end).put(binary, value)
            else:
                self.expired_records_dropped += 1

    def put(self, session_key_: Windowed[bytes], aggregate: bytes | None) -> None:
        window = session_key_.window
        end = window.end_ms
        if self._advance(end):
            self._segment_for_write(end).put(session_key(session_key_.key, window.start_ms, end), aggregate)
        else:
            self.expired_records_dropped += 1

    def put_binary(self, binary: bytes, aggregate: bytes | None) -> None:
        """Put by binary session key (the caching layer flushes these)."""
        end = session_end_of(binary)
        if self._advance(end):
            self._segment_for_write(end).put(binary, aggregate)
        else:
            self.expired_records_dropped += 1

    def remove(self, session_key_: Windowed[bytes]) -> None:
        self.put(session_key_, None)

    def fetch_session(self, key: bytes, session_start_ms: int, session_end_ms: int) -> bytes | None:
        if session_end_ms < self._min_live_time():
            return None
        seg = self._segment_for_read(session_end_ms)
        if seg is None:
            return None
        return seg.get(session_key(key, session_start_ms, session_end_ms))

    def find_sessions(
        self,
        key: bytes,
        earliest_session_end_ms: int,
        latest_session_start_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        earliest_end = max(earliest_session_end_ms, self._key_read_floor())
        lower = session_key(key, 0, earliest_end)
        upper = inclusive_to_exclusive(session_key(key, MAX_TIME, MAX_TIME))
        expected = len(key) + SESSION_SUFFIX_LEN
        out: list[tuple[Windowed[bytes], bytes]] = []
        for seg in self._segments_between(earliest_end, MAX_TIME, backward):
            for binary, value in seg.items(lower, upper, backward):
                if len(binary) != expected:
                    continue
                _, start, end = split_session_key(binary)
                if start <= latest_session_start_ms:
                    out.append((Windowed(key, SessionWindow(start, end)), value))
        return iter(out)

    def fetch(self, key: bytes, *, backward: bool = False) -> Iterator[tuple[Windowed[bytes], bytes]]:
        return self.find_sessions(key, 0, MAX_TIME, backward=backward)

    def find_sessions_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        earliest_session_end_ms: int,
        latest_session_start_ms: int,
        *,
        backward: bool = False,
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        if not key_range_valid(self.name, key_from, key_to):
            return iter(())
        earliest_end = max(earliest_session_end_ms, self._key_read_floor())
        lower, upper = session_range_bounds(key_from, key_to)
        found: list[tuple[tuple[int, bytes, int], tuple[Windowed[bytes], bytes]]] = []
        for seg in self._segments_between(earliest_end, MAX_TIME, False):
            for binary, value in seg.items(lower, upper, False):
                key, start, end = split_session_key(binary)
                if (
                    end >= earliest_end
                    and start <= latest_session_start_ms
                    and in_key_range(key, key_from, key_to)
                ):
                    found.append(((end, key, start), (Windowed(key, SessionWindow(start, end)), value)))
        found.sort(key=itemgetter(0), reverse=backward)
        return iter([item for _, item in found])

    def all(self, *, backward: bool = False) -> Iterator[tuple[Windowed[bytes], bytes]]:
        """Every live session, segment by segment, then by key (for tests and interactive queries)."""
        min_live = self._key_read_floor()
        segs = self._segments_between(min_live, MAX_TIME, backward)
        iters = [seg.items(None, None, backward) for seg in segs]
        return self._sessions(iters, min_live)

    @staticmethod
    def _sessions(
        iters: list[Iterator[tuple[bytes, bytes]]], min_live: int
    ) -> Iterator[tuple[Windowed[bytes], bytes]]:
        for it in iters:
            for binary, value in it:
                key, start, end = split_session_key(binary)
                if end >= min_live:
                    yield Windowed(key, SessionWindow(start, end)), value
