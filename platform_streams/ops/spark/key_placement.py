"""Key placement in backfills: where history goes, and telling the app what it saw.

The streaming runtime keeps each record in its Kafka partition, so a store partition holds
the keys of that input partition, wherever the producer put them (query/placement.py). A
backfill must do the same, or its final state and the live records that follow disagree:

* Kafka input keeps each record's partition (as before); the tasks now also check, with
  the runtime's :class:`PlacementCheck`, whether records of topics that feed stores are
  murmur2-placed, and count those that are not (:class:`PlacementProbe`, a Spark
  accumulator);
* Parquet input is placed by ``ParquetInput.partitioner``: ``"murmur2"`` (Java clients,
  librdkafka ``murmur2_random``) or ``"consistent"`` (librdkafka's default
  ``consistent_random`` and ``consistent``: CRC32 of the key). It must match the live
  topic's producers, or a key's backfilled state sits in another task than its new records.

Topics found (or declared) not murmur2-placed are reported in ``BackfillResult``, logged
with the producer setting, and -- when the streaming app is to continue from the backfill
(``final_state`` or ``commit_offsets``) -- published to the app's metadata topic, so that
its key queries of those stores ask every partition from the start.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from pyspark import Accumulator, AccumulatorParam, SparkContext

from platform_streams.processor.partitioner import PlacementCheck, default_partition
from platform_streams.query.placement import PRODUCER_SETTING

__all__ = ["Partitioner", "PlacementProbe", "place_key", "report_misplaced"]

log = logging.getLogger(__name__)

#: how the producers of a topic chose partitions for keyed records
Partitioner = Literal["murmur2", "consistent"]


def place_key(key: bytes, partitions: int, partitioner: Partitioner) -> int:
    """The partition a producer with ``partitioner`` gives a non-null ``key``."""
    if partitioner == "consistent":
        return zlib.crc32(key) % partitions  # librdkafka's rd_crc32: the IEEE CRC-32, as zlib's
    return default_partition(key, partitions)


class _CountsParam(AccumulatorParam[dict[str, int]]):
    """Accumulates ``{topic: count}`` dicts."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        return {}

    def addInPlace(self, value1: dict[str, int], value2: dict[str, int]) -> dict[str, int]:
        for topic, count in value2.items():
            value1[topic] = value1.get(topic, 0) + count
        return value1


class PlacementProbe:
    """Counts, in Spark tasks, the records of checked topics that murmur2 would place elsewhere."""

    def __init__(self, sc: SparkContext, partition_counts: Mapping[str, int]) -> None:
        #: physical topic -> partition count, for the topics feeding stores
        self.partition_counts = dict(partition_counts)
        self.found: Accumulator[dict[str, int]] = sc.accumulator({}, _CountsParam())

    def watch(self, records: Iterable[Any]) -> Iterator[Any]:
        """Pass :data:`RawRecord` tuples through, checking the keys of checked topics."""
        counts: dict[str, int] = {}
        checks: dict[tuple[str, int], PlacementCheck] = {}

        def mismatch(topic: str, _partition: int) -> None:
            counts[topic] = counts.get(topic, 0) + 1

        for record in records:
            topic, partition, key = record[0], record[1], record[3]
            total = self.partition_counts.get(topic)
            if total:
                check = checks.get((topic, partition))
                if check is None:
                    check = checks[(topic, partition)] = PlacementCheck(topic, partition, total, mismatch)
                if key not in check.good:
                    check.check(key)
            yield record
        if counts:
            self.found.add(counts)

    def misplaced(self) -> dict[str, int]:
        """Topic -> records seen outside their murmur2 partition (read after the jobs ran)."""
        return dict(self.found.value)


def report_misplaced(topics: Mapping[str, str], config: Any, *, publish: bool) -> None:
    """Warn about each topic (topic -> what was seen) and, with ``publish``, record the
    verdict in the application's metadata topic for its instances."""
    for topic, seen in sorted(topics.items()):
        log.warning(
            "backfill: source topic %s is not murmur2-placed (%s); the application's key queries of "
            "the stores it feeds ask every partition. Producers should set %s.",
            topic,
            seen,
            PRODUCER_SETTING,
        )
    if publish and topics:
        from platform_streams.query.directory import publish_misplaced_topics

        publish_misplaced_topics(config, sorted(topics))
