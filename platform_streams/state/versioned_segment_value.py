"""The row a versioned store keeps per key in one segment: several record versions together.

Kafka Streams' ``RocksDBVersionedStoreSegmentValueFormatter``, with the same bytes layout::

    next_timestamp (8) + min_timestamp (8)
    + [timestamp (8) + value_size (4)] * n   newest first   (value_size -1: a tombstone)
    + values                                  oldest first

A record version is valid from its timestamp to the next newer one's (the newest: to
``next_timestamp``). A *degenerate* row holds one tombstone with ``min == next`` (a delete
of a key with no version it could end). Unlike Kafka's lazily deserialized row, this one is
decoded whole: rows are small (one key's versions within one segment interval) and Python
pays per operation, not per byte.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

__all__ = ["SegmentSearchResult", "SegmentValue", "min_timestamp", "next_timestamp"]

log = logging.getLogger(__name__)

_LONG = struct.Struct(">q")
_HEADER = struct.Struct(">qq")
_ENTRY = struct.Struct(">qi")


def next_timestamp(raw: bytes) -> int:
    """The validTo of the newest version in a serialized row."""
    return int(_LONG.unpack_from(raw, 0)[0])


def min_timestamp(raw: bytes) -> int:
    """The validFrom of the oldest version in a serialized row."""
    return int(_LONG.unpack_from(raw, 8)[0])


@dataclass(frozen=True, slots=True)
class SegmentSearchResult:
    """The version found for a timestamp: its position (0 = newest), validity and value."""

    index: int
    valid_from: int
    valid_to: int
    value: bytes | None


class SegmentValue:
    """One key's versions in one segment, newest first."""

    __slots__ = ("next_ts", "records")

    def __init__(self, next_ts: int, records: list[tuple[int, bytes | None]]) -> None:
        self.next_ts = next_ts
        #: (validFrom, value or None for a tombstone), newest first
        self.records = records

    @classmethod
    def with_record(cls, value: bytes | None, valid_from: int, valid_to: int) -> SegmentValue:
        """A row holding one version (``valid_from == valid_to`` with None: a degenerate row)."""
        return cls(valid_to, [(valid_from, value)])

    @classmethod
    def deserialize(cls, raw: bytes) -> SegmentValue:
        next_ts, min_ts = _HEADER.unpack_from(raw, 0)
        entries: list[tuple[int, int]] = []
        offset = 16
        while True:
            ts, size = _ENTRY.unpack_from(raw, offset)
            offset += 12
            entries.append((ts, size))
            if ts == min_ts:
                break
        records: list[tuple[int, bytes | None]] = []
        end = len(raw)
        for ts, size in entries:  # values are stored oldest first: walk them from the end
            if size < 0:
                records.append((ts, None))
                continue
            records.append((ts, raw[end - size : end]))
            end -= size
        return cls(next_ts, records)

    def serialize(self) -> bytes:
        records = self.records
        parts = [_HEADER.pack(self.next_ts, records[-1][0])]
        parts.extend(_ENTRY.pack(ts, -1 if v is None else len(v)) for ts, v in records)
        parts.extend(v for _, v in reversed(records) if v is not None)
        return b"".join(parts)

    @property
    def min_ts(self) -> int:
        return self.records[-1][0]

    @property
    def degenerate(self) -> bool:
        return self.next_ts == self.min_ts

    # ------------------------------------------------------------------ search

    def find(self, timestamp: int) -> SegmentSearchResult:
        """The version valid at ``timestamp`` (requires ``min_ts <= timestamp < next_ts``)."""
        if timestamp < self.min_ts or timestamp >= self.next_ts:
            raise ValueError(f"timestamp {timestamp} is not within this segment row")
        valid_to = self.next_ts
        for index, (ts, value) in enumerate(self.records):
            if ts <= timestamp:
                return SegmentSearchResult(index, ts, valid_to, value)
            valid_to = ts
        raise AssertionError("search in segment row expected to find a version")

    def find_all(self, time_from: int, time_to: int) -> list[SegmentSearchResult]:
        """Non-tombstone versions valid at some time in ``[time_from, time_to]``, newest first."""
        found = []
        valid_to = self.next_ts
        for index, (ts, value) in enumerate(self.records):
            if value is not None and ts <= time_to and valid_to > time_from:
                found.append(SegmentSearchResult(index, ts, valid_to, value))
            valid_to = ts
        return found

    # ------------------------------------------------------------------ updates

    def insert_as_latest(self, valid_from: int, valid_to: int, value: bytes | None) -> None:
        """Add a version newer than all in the row (a gap before it is filled by a tombstone)."""
        if valid_from < self.next_ts:
            log.warning("inconsistent versioned store segments (an earlier write failed): recovering")
            self._truncate_to(valid_from)
        if self.next_ts == valid_from:
            if self.degenerate:
                self.records = [(valid_from, value)]
            else:
                self.records.insert(0, (valid_from, value))
        elif self.degenerate:
            self.records = [(valid_from, value), (self.next_ts, None)]
        else:
            self.records[0:0] = [(valid_from, value), (self.next_ts, None)]
        self.next_ts = valid_to

    def insert_as_earliest(self, timestamp: int, value: bytes | None) -> None:
        """Add a version older than all in the row (valid until the current oldest)."""
        if self.degenerate:
            self.records = [(timestamp, value)]
        else:
            self.records.append((timestamp, value))

    def insert(self, timestamp: int, value: bytes | None, index: int) -> None:
        """Add a version at ``index`` (as found by :meth:`find`)."""
        self.records.insert(index, (timestamp, value))

    def update_record(self, timestamp: int, value: bytes | None, index: int) -> None:
        """Replace the version at ``index`` (its validTo stays)."""
        self.records[index] = (timestamp, value)

    def _truncate_to(self, timestamp: int) -> None:
        """Drop versions from ``timestamp`` on and end the rest there (Kafka's recovery path)."""
        if timestamp <= self.min_ts:
            self.next_ts = timestamp
            self.records = [(timestamp, None)]
            return
        self.records = [(ts, v) for ts, v in self.records if ts < timestamp]
        self.next_ts = timestamp
