"""The in-memory backend's blocked sorted key index, checked against a sorted-list model."""

from __future__ import annotations

import random

from platform_streams.state.memory import MemoryBytesMap, SortedKeys


def test_sorted_keys_matches_a_sorted_model_under_random_operations() -> None:
    rng = random.Random(42)
    index = SortedKeys()
    model: set[bytes] = set()
    for step in range(20_000):
        key = rng.randbytes(rng.randint(1, 3))
        if key in model and rng.random() < 0.4:
            index.remove(key)
            model.discard(key)
        elif key not in model:
            index.add(key)
            model.add(key)
        if step % 997 == 0:
            expected = sorted(model)
            assert index.slice(None, None) == expected
            lo, hi = sorted([rng.randbytes(2), rng.randbytes(2)])
            assert index.slice(lo, hi) == [k for k in expected if lo <= k < hi]
            assert index.slice(lo, None) == [k for k in expected if k >= lo]
            assert index.slice(None, hi) == [k for k in expected if k < hi]
    assert len(index) == len(model)


def test_memory_map_scan_skips_entries_deleted_during_iteration() -> None:
    data = MemoryBytesMap()
    for i in range(10):
        data.put(bytes([i]), b"v")
    seen = []
    for key, _ in data.items():
        seen.append(key)
        data.put(bytes([key[0] + 1]), None)  # delete the next key
        data.put(b"\x50" + key, b"new")  # insert beyond the snapshot
    assert seen == [bytes([i]) for i in range(0, 10, 2)]


def test_memory_map_reverse_and_bounds() -> None:
    data = MemoryBytesMap()
    for i in range(5):
        data.put(bytes([i]), bytes([i]))
    assert [k for k, _ in data.items(b"\x01", b"\x04", reverse=True)] == [b"\x03", b"\x02", b"\x01"]
    assert data.approximate_num_entries() == 5
