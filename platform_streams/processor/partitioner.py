"""Kafka's default key partitioner: ``toPositive(murmur2(key)) % numPartitions``.

Streams must place a keyed record in exactly the partition the Java producer would,
otherwise repartition topics, joins and interactive-query routing disagree with Java
applications (and with librdkafka's ``murmur2_random`` partitioner) sharing the topic.
The hash is ``murmurhash2`` (a compiled MurmurHash2, seeded with Java's ``0x9747b28c``):
bit-identical to ``org.apache.kafka.common.utils.Utils.murmur2`` (tests/unit/test_partitioner.py
checks Kafka's vectors and a line-by-line port of the Java code) and ~9x faster than the
pure-Python port this module had, which cost a tenth of a worker's time when every record
carries a new key (the source-topic placement check below; bench/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from murmurhash2 import murmurhash2 as _murmurhash2

__all__ = [
    "SEED",
    "PlacementCheck",
    "PlacementChecks",
    "default_partition",
    "murmur2",
    "murmur2_with_seed",
    "to_positive",
]

_SEED = 0x9747B28C


def _murmur2_unsigned(data: bytes) -> int:
    """murmur2 as an unsigned 32-bit int; avoids the signed conversion in the partitioner."""
    return _murmurhash2(data, _SEED)


#: ``murmur2_with_seed(data, SEED)``, unsigned: the C hash itself, for generated code
murmur2_with_seed = _murmurhash2


def murmur2(data: bytes) -> int:
    """Signed 32-bit murmur2 of ``data``, bit-identical to Java's ``Utils.murmur2``."""
    h = _murmur2_unsigned(data)
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Clear the sign bit (Java ``Utils.toPositive``); unlike ``abs`` it maps MIN_VALUE to 0."""
    return n & 0x7FFFFFFF


def default_partition(key_bytes: bytes, num_partitions: int) -> int:
    """Partition for a serialized non-null key, as Java's ``BuiltInPartitioner.partitionForKey``."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (_murmur2_unsigned(key_bytes) & 0x7FFFFFFF) % num_partitions


#: keys remembered as correctly placed per check before the memory is reset (bounds memory)
_GOOD_KEYS_MAX = 65_536
#: batches of mostly new keys in a row after which fused batches stop remembering keys ...
_NEW_KEY_BATCHES = 4
#: ... for this many batches (then they try again)
_FORGETFUL_BATCHES = 64
#: batches smaller than this say nothing about how often keys repeat
_SAMPLE_MIN = 100
#: the seed of Kafka's murmur2 (fused code calls the hash with it)
SEED = _SEED


class PlacementCheck:
    """Checks that one task's records of one source topic sit where murmur2 puts their key.

    Interactive queries route a key to the owner of ``murmur2(key) % partitions``; that is
    only right if the producers placed the records that way (Java clients, librdkafka with
    ``partitioner=murmur2_random``). confluent-kafka's default (``consistent_random``,
    CRC32) is not. Fused source code calls :meth:`check` for every keyed record whose key is
    not in :attr:`good` -- a set lookup per record; the murmur2 hash (a C call, ~0.19 us)
    runs once per distinct key until the set is reset at :data:`_GOOD_KEYS_MAX`.
    Keys seen misplaced are remembered too (:attr:`bad`), so a topic that is not
    murmur2-placed costs a set lookup and a call per record, not a hash.
    A fused batch (``compile_batch``) hashes in line instead: the key not in :attr:`good`
    is hashed there, added to it while :attr:`remember` holds, and a misplaced one goes to
    :meth:`misplaced`; :meth:`after_batch` then decides whether remembering pays.
    ``on_mismatch(topic, partition)`` hears of every misplaced record.
    """

    __slots__ = (
        "_off",
        "_size_before",
        "_streak",
        "bad",
        "good",
        "on_mismatch",
        "partition",
        "partitions",
        "remember",
        "topic",
    )

    def __init__(
        self, topic: str, partition: int, partitions: int, on_mismatch: Callable[[str, int], None]
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.partitions = partitions
        self.on_mismatch = on_mismatch
        #: raw keys seen in the right partition; None is in it, so null keys skip the check
        self.good: set[bytes | None] = {None}
        #: raw keys seen in another partition than murmur2's (counted again, not hashed again)
        self.bad: set[bytes] = set()
        #: whether a fused batch adds the keys it finds in place to :attr:`good`
        #: (:meth:`after_batch` decides, once a batch)
        self.remember = True
        self._size_before = 1
        self._streak = 0
        self._off = 0

    def check(self, key: bytes) -> None:
        if key in self.bad:
            self.on_mismatch(self.topic, self.partition)
            return
        # the C hash called directly: once per record of an every-key-new input
        placed = (_murmurhash2(key, _SEED) & 0x7FFFFFFF) % self.partitions == self.partition
        seen = self.good if placed else self.bad
        if len(seen) >= _GOOD_KEYS_MAX:
            seen.clear()
            if placed:
                self.good.add(None)
        seen.add(key)
        if not placed:
            self.on_mismatch(self.topic, self.partition)

    def misplaced(self, key: bytes) -> None:
        """A fused batch found ``key`` (hashed there) outside murmur2's partition."""
        self.on_mismatch(self.topic, self.partition)

    def after_batch(self, records: int) -> None:
        """A fused batch of ``records`` ends: decide whether the next ones remember the keys
        they find in place, and bound :attr:`good`.

        Remembering pays when keys repeat (a set lookup instead of the hash); when nine in
        ten records of several batches in a row bring a new key (an every-key-new input),
        it only fills the set with keys no record asks for again (~0.3 us a record of a
        count's 6, measured: bench/RESULTS.md). Then batches stop
        remembering for a while and try again, in case the keys start repeating. The check
        stays exact either way: every key not in the set is hashed.
        """
        size = len(self.good)
        if self.remember:
            if records >= _SAMPLE_MIN and (size - self._size_before) * 10 >= records * 9:
                self._streak += 1
                if self._streak >= _NEW_KEY_BATCHES:
                    self.remember, self._off = False, 0
            else:
                self._streak = 0
        else:
            self._off += 1
            if self._off >= _FORGETFUL_BATCHES:
                self.remember, self._streak = True, 0
        if size >= _GOOD_KEYS_MAX:
            self.good.clear()
            self.good.add(None)
        self._size_before = len(self.good)


class PlacementChecks(Protocol):
    """Hands a task the :class:`PlacementCheck` of each of its source topics that needs one."""

    def checks_for(self, topics: Iterable[str], partition: int) -> Mapping[str, PlacementCheck]:
        """Physical topic -> its check, for the topics (of one task, at ``partition``) to check."""
        ...
