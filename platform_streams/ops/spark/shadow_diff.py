"""The diff of a shadow replay: a candidate's output records against a baseline's, on Spark.

Both sides are RDDs of ``(topic, key, value, timestamp)``. A record is the tuple itself; the
diff counts each distinct record on both sides (a multiset difference, so neither Spark's
nor Kafka's partitioning or the order of records inside a partition matters) and reports

* per (topic, key): how many records each side has, for every key with a difference --
  a different count, or the same count with other values or timestamps;
* the first differing records in timestamp order, each with its count on both sides.

Order is deliberately not compared: the backfill orders a task's records by timestamp, the
live app by arrival, and records of one key with the same timestamp have no order to hold
either to. Partitions are not compared either: the backfill places output where Kafka
would, which needs the output topics' partition counts (a shadow run never asks for them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark import RDD

__all__ = ["KeyDiff", "RecordDiff", "ShadowDiff", "diff_outputs", "show_bytes"]

#: (topic, key, value, timestamp ms)
OutRecord = tuple[str, bytes | None, bytes | None, int]


def show_bytes(data: bytes | None) -> str:
    """Printable UTF-8 as text, anything else as ``0x`` + hex, None as ``null``."""
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()
    return text if text.isprintable() else "0x" + data.hex()


@dataclass(frozen=True)
class KeyDiff:
    """One key of one output topic whose records differ: how many each side has."""

    topic: str
    key: str
    candidate: int
    baseline: int


@dataclass(frozen=True)
class RecordDiff:
    """One record (topic, key, value, timestamp) that one side has more often than the other."""

    topic: str
    key: str
    value: str
    timestamp: int
    candidate: int
    baseline: int

    @property
    def side(self) -> str:
        return "only in candidate" if self.candidate > self.baseline else "only in baseline"


@dataclass
class ShadowDiff:
    """What differs between the two outputs (see the module docstring)."""

    candidate_records: dict[str, int] = field(default_factory=dict)
    baseline_records: dict[str, int] = field(default_factory=dict)
    keys_compared: int = 0
    differing_key_count: int = 0
    differing_record_count: int = 0
    #: the first differing keys (by their first differing record's timestamp)
    differing_keys: list[KeyDiff] = field(default_factory=list)
    first_differences: list[RecordDiff] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.differing_record_count == 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["identical"] = self.identical
        return data


def _record_sides(side: int, row: OutRecord) -> tuple[OutRecord, tuple[int, int]]:
    return row, ((1, 0) if side == 0 else (0, 1))


def _candidate_side(row: OutRecord) -> tuple[OutRecord, tuple[int, int]]:
    return _record_sides(0, row)


def _baseline_side(row: OutRecord) -> tuple[OutRecord, tuple[int, int]]:
    return _record_sides(1, row)


def _sum_pairs(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


def _differs(item: tuple[Any, tuple[int, int]]) -> bool:
    return item[1][0] != item[1][1]


def _by_key(item: tuple[OutRecord, tuple[int, int]]) -> tuple[tuple[str, bytes | None], tuple[int, int]]:
    (topic, key, _value, _ts), counts = item
    return (topic, key), counts


def _first_timestamp(item: tuple[OutRecord, tuple[int, int]]) -> tuple[tuple[str, bytes | None], int]:
    (topic, key, _value, ts), _counts = item
    return (topic, key), ts


def _topic_counts(rows: Iterable[OutRecord]) -> Iterator[tuple[str, int]]:
    counts: dict[str, int] = {}
    for topic, *_rest in rows:
        counts[topic] = counts.get(topic, 0) + 1
    return iter(counts.items())


def _add(a: int, b: int) -> int:
    return a + b


def _sort_key(item: tuple[OutRecord, tuple[int, int]]) -> tuple[int, str, bytes, bytes]:
    (topic, key, value, ts), _counts = item
    return ts, topic, key or b"", value or b""


def diff_outputs(candidate: RDD[OutRecord], baseline: RDD[OutRecord], *, show: int = 20) -> ShadowDiff:
    """Compare the two outputs (see the module docstring); ``show`` caps both lists."""
    both = candidate.map(_candidate_side).union(baseline.map(_baseline_side))
    records = both.reduceByKey(_sum_pairs).cache()
    try:
        differing = records.filter(_differs).cache()
        per_key = records.map(_by_key).reduceByKey(_sum_pairs)
        first_ts = differing.map(_first_timestamp).reduceByKey(min)
        result = ShadowDiff(
            candidate_records=dict(candidate.mapPartitions(_topic_counts).reduceByKey(_add).collect()),
            baseline_records=dict(baseline.mapPartitions(_topic_counts).reduceByKey(_add).collect()),
            keys_compared=per_key.count(),
            differing_key_count=first_ts.count(),
            differing_record_count=differing.count(),
        )
        if result.differing_key_count:
            firsts = first_ts.takeOrdered(show, key=lambda kv: (kv[1], kv[0][0], kv[0][1] or b""))
            wanted = {tk for tk, _ts in firsts}
            counts = dict(per_key.filter(lambda kv: kv[0] in wanted).collect())
            result.differing_keys = [
                KeyDiff(topic, show_bytes(key), *counts[(topic, key)]) for (topic, key), _ts in firsts
            ]
            result.first_differences = [
                RecordDiff(topic, show_bytes(key), show_bytes(value), ts, c, b)
                for (topic, key, value, ts), (c, b) in differing.takeOrdered(show, key=_sort_key)
            ]
        differing.unpersist()
    finally:
        records.unpersist()
    return result
