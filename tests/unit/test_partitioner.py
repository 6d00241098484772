"""murmur2 / default partitioner must be bit-identical to the Java client."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from platform_streams.processor.partitioner import default_partition, murmur2, to_positive

# apache/kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java#testMurmur2
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (bytes([97, 98, 99]), 479470107),
]


def _reference_murmur2(data: bytes) -> int:
    """Line-by-line port of Java's Utils.murmur2 emulating int overflow, for cross-checking."""

    def i32(x: int) -> int:
        x &= 0xFFFFFFFF
        return x - (1 << 32) if x & 0x80000000 else x

    def ushr(x: int, n: int) -> int:
        return (x & 0xFFFFFFFF) >> n

    length = len(data)
    m, r = 0x5BD1E995, 24
    h = i32(0x9747B28C ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = (data[i4] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + ((data[i4 + 2] & 0xFF) << 16)
        k = i32(k + ((data[i4 + 3] & 0xFF) << 24))
        k = i32(k * m)
        k = i32(k ^ ushr(k, r))
        k = i32(k * m)
        h = i32(h * m)
        h = i32(h ^ k)
    rem = length % 4
    base = length & ~3
    if rem == 3:
        h = i32(h ^ ((data[base + 2] & 0xFF) << 16))
    if rem >= 2:
        h = i32(h ^ ((data[base + 1] & 0xFF) << 8))
    if rem >= 1:
        h = i32(h ^ (data[base] & 0xFF))
        h = i32(h * m)
    h = i32(h ^ ushr(h, 13))
    h = i32(h * m)
    return i32(h ^ ushr(h, 15))


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_matches_reference_port_on_random_inputs() -> None:
    rng = random.Random(1234)
    for length in [*range(17), 31, 64, 255, 1000]:
        for _ in range(20):
            data = rng.randbytes(length)
            assert murmur2(data) == _reference_murmur2(data), data


def test_murmur2_is_signed_32_bit() -> None:
    rng = random.Random(7)
    for _ in range(500):
        assert -(2**31) <= murmur2(rng.randbytes(rng.randrange(40))) < 2**31


def test_murmur2_empty() -> None:
    assert murmur2(b"") == _reference_murmur2(b"")


def test_to_positive() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(0) == 0
    assert to_positive(123) == 123
    assert to_positive(-973932308) == (-973932308) & 0x7FFFFFFF


def test_default_partition_matches_java_formula() -> None:
    for data, hashed in KAFKA_VECTORS:
        for n in (1, 2, 3, 6, 12, 50, 1000):
            assert default_partition(data, n) == to_positive(hashed) % n


def test_default_partition_in_range_and_spread() -> None:
    counts = Counter(default_partition(f"key-{i}".encode(), 12) for i in range(12_000))
    assert set(counts) == set(range(12))
    # ~1000 expected per partition; murmur2 should stay well within +-20%.
    assert all(800 < c < 1200 for c in counts.values()), counts


def test_default_partition_rejects_non_positive_counts() -> None:
    with pytest.raises(ValueError):
        default_partition(b"k", 0)
