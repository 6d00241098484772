"""The ``__ps_src`` changelog header: which input a state change was written for.

Why: a broker may let records of an unfinished transaction become visible (one broker commits a
crashed producer's open transaction when the member restarts, and delivers records sent
before an explicit abort), and under at-least-once there is no transaction at all. Either
way the changelog can hold writes made for input records whose offsets were never
committed; those inputs will be processed again, so replaying such writes would count
them twice. Each changelog record therefore carries the input position it was written
for, and a restore applies it only if that position is below the committed offsets
(Quix Streams does the same).

Encoding (ASCII, compact, parsed only on restore): the offsets of the task's input
partitions in :func:`canonical_partitions` order, comma-separated, ``-1`` where nothing
was consumed yet; a single-input task writes one number. For a write made while a record
is processed, the record's own partition holds its offset; for writes made with no
current record (cache flush on commit, punctuation) every partition holds the last
offset consumed.

A record is *committed* when every listed offset is below that partition's committed
offset (the next offset to read). Commits cover all partitions of a worker atomically, so
for a consistent history the writes that pass form a prefix of the task's writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "SOURCE_HEADER",
    "SourcePositionHeader",
    "canonical_partitions",
    "decode_positions",
    "is_committed",
]

SOURCE_HEADER = "__ps_src"

TopicPartitionKey = tuple[str, int]


def canonical_partitions(partitions: Iterable[TopicPartitionKey]) -> list[TopicPartitionKey]:
    """The order positions are written in: sorted by topic name (a task has one partition number)."""
    return sorted(set(partitions))


def decode_positions(value: bytes) -> list[int]:
    """``b"12"`` -> ``[12]``; ``b"3,-1"`` -> ``[3, -1]``. Raises ValueError on garbage."""
    return [int(part) for part in value.split(b",")]


def is_committed(positions: Sequence[int], committed: Sequence[int]) -> bool:
    """True if every written-for offset is below the committed offset of its partition.

    ``committed`` uses Kafka's meaning (next offset to read; 0 when nothing was committed).
    A header of another shape (the task's inputs changed) cannot be judged: it is kept.
    """
    if len(positions) != len(committed):
        return True
    return all(pos < limit for pos, limit in zip(positions, committed, strict=True))


def find_header(headers: Any) -> bytes | None:
    """The ``__ps_src`` value among a confluent message's headers (list of pairs), if any."""
    if not headers:
        return None
    for name, value in headers:
        if name == SOURCE_HEADER:
            return value if isinstance(value, bytes) else None
    return None


class SourcePositionHeader:
    """Builds the header list for changelog writes of one task, cached per input record.

    ``positions`` is the task's live ``consumed`` mapping (last offset processed per
    partition); it is read, never copied, so the header always reflects the moment of the
    write. A store writing many keys for one record (or one flush) builds the header once.
    """

    __slots__ = ("_cached", "_cached_for", "_cached_key", "_partitions", "_positions", "_single")

    def __init__(self, partitions: Iterable[TopicPartitionKey], positions: Mapping[TopicPartitionKey, int]):
        self._partitions = canonical_partitions(partitions)
        self._positions = positions
        self._single = self._partitions[0] if len(self._partitions) == 1 else None
        self._cached_for: Any = None
        self._cached_key: Any = None
        self._cached: list[tuple[str, bytes | None]] = []

    @property
    def partitions(self) -> list[TopicPartitionKey]:
        return list(self._partitions)

    def headers(self, current: Any) -> list[tuple[str, bytes | None]]:
        """Headers for a write made while ``current`` (a raw record, or None) is processed."""
        if current is not None:
            if current is self._cached_for:
                return self._cached
            if self._single is not None:
                value = str(current.offset()).encode()
            else:
                here = (current.topic(), current.partition())
                offset = current.offset()
                positions = self._positions
                value = ",".join(
                    str(offset if tp == here else positions.get(tp, -1)) for tp in self._partitions
                ).encode()
            self._cached_for = current
            self._cached_key = None
            self._cached = [(SOURCE_HEADER, value)]
            return self._cached
        positions = self._positions
        if self._single is not None:
            key: Any = positions.get(self._single, -1)
        else:
            key = tuple(positions.get(tp, -1) for tp in self._partitions)
        if self._cached_for is None and key == self._cached_key and self._cached:
            return self._cached
        text = str(key) if self._single is not None else ",".join(str(o) for o in key)
        self._cached_for = None
        self._cached_key = key
        self._cached = [(SOURCE_HEADER, text.encode())]
        return self._cached
