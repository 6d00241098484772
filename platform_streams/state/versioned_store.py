"""The versioned key-value bytes store (KIP-889): every version of a key, each valid for a time.

Kafka Streams' ``RocksDBVersionedStore``, on either storage backend. The latest version of
each key lives in the backend's default column (``timestamp (8) + value``: the "latest value
store"); older versions live in *segment* columns chosen by their validTo timestamp, one
:class:`~platform_streams.state.versioned_segment_value.SegmentValue` row per key and
segment. A segment whose every version ended before ``observed stream time - history
retention`` is dropped whole (a column drop: no per-key work).

The put/get/delete algorithm is Kafka's, step for step, because its results are the contract
(``put`` returns the new version's validTo, :data:`PUT_RETURN_CODE_NOT_PUT` for a write
older than the grace period, which equals the history retention; ``get(key, as_of)`` answers
None beyond the history retention unless the latest version is old enough; restore replays
the changelog with the stream time of the whole batch). Kafka's physical quirks follow
from the same steps (a tombstone written at the latest version's own timestamp leaves no
trace), so results match a Java store fed the same writes.

``observed_stream_time`` (the largest timestamp written) is kept in a metadata column at
each flush so that a reopened store judges grace like the one that wrote it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from platform_streams.state.api import StateStore
from platform_streams.state.backend import BackedStore, BytesMap, ClosedBytesMap, StorageBackend
from platform_streams.state.store_context import TimestampedRestoreCallback
from platform_streams.state.versioned_segment_value import SegmentValue, min_timestamp, next_timestamp

if TYPE_CHECKING:
    from platform_streams.state.store_context import StateStoreContext

__all__ = [
    "NO_TIMESTAMP",
    "PUT_RETURN_CODE_NOT_PUT",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
    "VersionedBytesStore",
    "VersionedRecord",
    "default_segment_interval",
]

#: ``put`` result: the new version is the latest (its validTo is undefined).
PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
#: ``put`` result: the write was older than the grace period and was not stored.
PUT_RETURN_CODE_NOT_PUT = -(2**63)
#: Kafka's ``ConsumerRecord.NO_TIMESTAMP``: no stream time observed yet.
NO_TIMESTAMP = -1

_SENTINEL = -(2**63)
_LONG = struct.Struct(">q")
_SEGMENT_PREFIX = "versioned-segment-"
_META_COLUMN = "versioned-meta"
_STREAM_TIME_KEY = b"observed-stream-time"


@dataclass(frozen=True, slots=True)
class VersionedRecord:
    """One version of a key (Kafka's ``VersionedRecord``); ``valid_to`` None: still current."""

    value: object
    timestamp: int
    valid_to: int | None = None


def default_segment_interval(history_retention_ms: int) -> int:
    """Kafka's ``RocksDbVersionedKeyValueBytesStoreSupplier.defaultSegmentInterval``."""
    if history_retention_ms <= 60_000:
        return max(history_retention_ms // 3, 2_000)
    if history_retention_ms <= 300_000:
        return max(history_retention_ms // 5, 20_000)
    if history_retention_ms <= 3_600_000:
        return max(history_retention_ms // 12, 60_000)
    return max(history_retention_ms // 24, 300_000)


def _java_div(a: int, b: int) -> int:
    """Java's ``long / long`` (rounds toward zero): segment ids of negative times match Kafka's."""
    q = abs(a) // b
    return q if a >= 0 else -q


class VersionedBytesStore(BackedStore, StateStore):
    """``bytes -> versions of bytes`` with history retention (= grace period)."""

    def __init__(
        self, name: str, backend: StorageBackend, history_retention_ms: int, segment_interval_ms: int
    ) -> None:
        super().__init__(name, backend)
        self.history_retention_ms = history_retention_ms
        self.segment_interval_ms = segment_interval_ms
        self.observed_stream_time = NO_TIMESTAMP
        self._latest: BytesMap = ClosedBytesMap(name)
        self._segments: dict[int, BytesMap] = {}
        #: expired puts skipped (Kafka's dropped-records sensor)
        self.expired_records = 0

    # ------------------------------------------------------------------ lifecycle

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._open_backend(context)
        self._open_columns()
        context.register(root, TimestampedRestoreCallback(self.restore_batch), None)

    def _open_columns(self) -> None:
        backend = self._backend
        self._latest = backend.default
        self._segments = {
            int(name[len(_SEGMENT_PREFIX) :]): backend.column(name)
            for name in backend.column_names()
            if name.startswith(_SEGMENT_PREFIX)
        }
        raw = backend.column(_META_COLUMN).get(_STREAM_TIME_KEY)
        self.observed_stream_time = NO_TIMESTAMP if raw is None else int(_LONG.unpack(raw)[0])

    def flush(self) -> None:
        if self._backend.is_open:
            self._backend.column(_META_COLUMN).put(_STREAM_TIME_KEY, _LONG.pack(self.observed_stream_time))
            self._backend.flush()

    def close(self) -> None:
        if self._backend.is_open:
            self.flush()
            self._backend.close()
        self._latest = ClosedBytesMap(self._name)
        self._segments = {}

    def wipe(self) -> None:
        self._backend.wipe()
        self.observed_stream_time = NO_TIMESTAMP
        self._open_columns()

    # ------------------------------------------------------------------ segments

    def _segment_id(self, timestamp: int) -> int:
        return _java_div(timestamp, self.segment_interval_ms)

    def _min_live_segment(self, stream_time: int) -> int:
        return self._segment_id(stream_time - self.history_retention_ms)

    def _segment_if_live(self, segment_id: int, stream_time: int) -> BytesMap | None:
        if segment_id < self._min_live_segment(stream_time):
            return None
        segment = self._segments.get(segment_id)
        if segment is None:
            segment = self._segments[segment_id] = self._backend.column(f"{_SEGMENT_PREFIX}{segment_id}")
        return segment

    def _cleanup_expired(self, stream_time: int) -> None:
        min_live = self._min_live_segment(stream_time)
        for segment_id in [s for s in self._segments if s < min_live]:
            del self._segments[segment_id]
            self._backend.drop_column(f"{_SEGMENT_PREFIX}{segment_id}")

    def _reverse_segments(self, time_from: int) -> list[tuple[int, BytesMap]]:
        """Existing segments holding times >= ``time_from``, newest first."""
        first = self._segment_id(time_from)
        return [(s, self._segments[s]) for s in sorted(self._segments, reverse=True) if s >= first]

    # ------------------------------------------------------------------ reads

    def get_latest(self, key: bytes) -> tuple[bytes, int] | None:
        """The latest version's value and timestamp (None: absent or deleted)."""
        raw = self._latest.get(key)
        if raw is None:
            return None
        return raw[8:], int(_LONG.unpack_from(raw)[0])

    def get_as_of(self, key: bytes, as_of: int) -> tuple[bytes, int, int | None] | None:
        """The version valid at ``as_of``: ``(value, valid_from, valid_to or None)``."""
        latest = self.get_latest(key)
        if latest is not None and latest[1] <= as_of:
            return latest[0], latest[1], None
        if as_of < self.observed_stream_time - self.history_retention_ms:
            return None  # history retention exceeded: None for predictability (Kafka's rule)
        for _, segment in self._reverse_segments(as_of):
            raw = segment.get(key)
            if raw is None:
                continue
            if next_timestamp(raw) <= as_of:
                return None
            if min_timestamp(raw) > as_of:
                continue
            found = SegmentValue.deserialize(raw).find(as_of)
            if found.value is None:
                return None
            return found.value, found.valid_from, found.valid_to
        return None

    def versions(self, key: bytes, time_from: int, time_to: int) -> Iterator[tuple[bytes, int, int | None]]:
        """Versions valid at some time in ``[time_from, time_to]``, newest first (KIP-968)."""
        latest = self.get_latest(key)
        if latest is not None and latest[1] <= time_to:
            yield latest[0], latest[1], None
        if time_to < self.observed_stream_time - self.history_retention_ms:
            return
        for _, segment in sorted(self._segments.items(), reverse=True):
            raw = segment.get(key)
            if raw is None:
                continue
            for found in SegmentValue.deserialize(raw).find_all(time_from, time_to):
                assert found.value is not None
                yield found.value, found.valid_from, found.valid_to

    def approximate_num_entries(self) -> int:
        return self._latest.approximate_num_entries()

    def all_latest(self) -> Iterator[tuple[bytes, bytes, int]]:
        """Every key's latest version: ``(key, value, timestamp)`` in key order."""
        for key, raw in self._latest.items():
            yield key, raw[8:], int(_LONG.unpack_from(raw)[0])

    # ------------------------------------------------------------------ writes

    def put(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        """Store a version; returns its validTo, -1 if it is the latest, NOT_PUT if expired."""
        if timestamp < self.observed_stream_time - self.history_retention_ms:
            self.expired_records += 1
            return PUT_RETURN_CODE_NOT_PUT
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        return self._do_put(self.observed_stream_time, key, value, timestamp)

    def delete(self, key: bytes, timestamp: int) -> tuple[bytes, int, int | None] | None:
        """Write a tombstone at ``timestamp``; returns the version it ended (as of ``timestamp``)."""
        if timestamp < self.observed_stream_time - self.history_retention_ms:
            self.expired_records += 1
            return None
        existing = self.get_as_of(key, timestamp)
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        self._do_put(self.observed_stream_time, key, None, timestamp)
        return existing

    def restore_batch(self, batch: list[tuple[bytes, bytes | None]], timestamps: list[int]) -> None:
        """Replay changelog records (Kafka's ``restoreBatch``): the batch's end stream time decides
        which segments are still worth writing."""
        end_of_batch = max([self.observed_stream_time, *timestamps])
        grace = self.history_retention_ms
        for (key, value), timestamp in zip(batch, timestamps, strict=True):
            if timestamp < self.observed_stream_time - grace:
                continue  # was never written to the store
            self.observed_stream_time = max(self.observed_stream_time, timestamp)
            self._do_put(end_of_batch, key, value, timestamp)

    def _do_put(self, stream_time: int, key: bytes, value: bytes | None, timestamp: int) -> int:
        self._cleanup_expired(stream_time)
        complete, found_ts = self._put_latest(stream_time, key, value, timestamp)
        if not complete:
            complete, found_ts = self._put_segments(stream_time, key, value, timestamp, found_ts)
            if not complete:
                found_ts = self._finish_put(stream_time, key, value, timestamp, found_ts)
        return PUT_RETURN_CODE_VALID_TO_UNDEFINED if found_ts == _SENTINEL else found_ts

    def _put_latest(
        self, stream_time: int, key: bytes, value: bytes | None, timestamp: int
    ) -> tuple[bool, int]:
        latest = self._latest.get(key)
        if latest is None:
            return False, _SENTINEL
        latest_ts = int(_LONG.unpack_from(latest)[0])
        if timestamp < latest_ts:
            return False, latest_ts
        if timestamp > latest_ts:
            # move the current latest version into the segment of its new validTo
            segment = self._segment_if_live(self._segment_id(timestamp), stream_time)
            if segment is not None:
                _append_version(segment, key, latest_ts, timestamp, latest[8:])
        self._latest.put(key, None if value is None else _LONG.pack(timestamp) + value)
        return True, _SENTINEL

    def _put_segments(
        self, stream_time: int, key: bytes, value: bytes | None, timestamp: int, found_ts: int
    ) -> tuple[bool, int]:
        for segment_id, segment in self._reverse_segments(timestamp):
            raw = segment.get(key)
            if raw is None:
                continue
            if next_timestamp(raw) <= timestamp:
                return False, found_ts
            found_min = min_timestamp(raw)
            if found_min <= timestamp:
                return True, self._put_to_segment(
                    stream_time, segment_id, segment, raw, key, value, timestamp
                )
            if found_min < stream_time - self.history_retention_ms:
                return True, PUT_RETURN_CODE_NOT_PUT
            found_ts = found_min
        return False, found_ts

    def _put_to_segment(
        self,
        stream_time: int,
        segment_id: int,
        segment: BytesMap,
        raw: bytes,
        key: bytes,
        value: bytes | None,
        timestamp: int,
    ) -> int:
        own_segment = self._segment_id(timestamp)
        row = SegmentValue.deserialize(raw)
        found = row.find(timestamp)
        if found.valid_from == timestamp:
            row.update_record(timestamp, value, found.index)
        elif own_segment != segment_id:
            # the found version now ends at `timestamp`: it moves to that (older) segment
            older = self._segment_if_live(own_segment, stream_time)
            if older is not None:
                _append_version(older, key, found.valid_from, timestamp, found.value)
            row.update_record(timestamp, value, found.index)
        else:
            row.insert(timestamp, value, found.index)
        segment.put(key, row.serialize())
        return found.valid_to

    def _finish_put(
        self, stream_time: int, key: bytes, value: bytes | None, timestamp: int, found_ts: int
    ) -> int:
        tombstone_at_latest = found_ts == _SENTINEL
        if tombstone_at_latest and value is not None:
            self._latest.put(key, _LONG.pack(timestamp) + value)
            return found_ts
        # tombstones never enter the latest value store: into the segment of their own time;
        # any other version ends where the next newer one (found_ts) starts
        segment_id = self._segment_id(timestamp if tombstone_at_latest else found_ts)
        segment = self._segment_if_live(segment_id, stream_time)
        if segment is None:
            return PUT_RETURN_CODE_NOT_PUT
        raw = segment.get(key)
        if tombstone_at_latest:
            if raw is None:
                _append_to_row(segment, key, raw, timestamp, timestamp, None)
            elif next_timestamp(raw) != timestamp:  # else the row already ends with this tombstone
                _append_to_row(segment, key, raw, next_timestamp(raw), timestamp, None)
        elif raw is not None and next_timestamp(raw) > timestamp:
            row = SegmentValue.deserialize(raw)
            row.insert_as_earliest(timestamp, value)
            segment.put(key, row.serialize())
        else:
            _append_to_row(segment, key, raw, timestamp, found_ts, value)
        return found_ts


def _append_version(
    segment: BytesMap, key: bytes, valid_from: int, valid_to: int, value: bytes | None
) -> None:
    """Add a version as the newest of ``key``'s row in ``segment`` (a new row if there is none)."""
    _append_to_row(segment, key, segment.get(key), valid_from, valid_to, value)


def _append_to_row(
    segment: BytesMap, key: bytes, raw: bytes | None, valid_from: int, valid_to: int, value: bytes | None
) -> None:
    """:func:`_append_version` with ``key``'s row (``raw``, None: no row) already read."""
    if raw is None:
        row = SegmentValue.with_record(value, valid_from, valid_to)
    else:
        row = SegmentValue.deserialize(raw)
        row.insert_as_latest(valid_from, valid_to, value)
    segment.put(key, row.serialize())
