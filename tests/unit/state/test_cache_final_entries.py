"""Entries marked final leave an overflowing record cache first.

``NamedCache.mark_final`` is how an emit-final windowed aggregation tells the cache which of
its windows closed. Kafka Streams' ``NamedCache`` evicts by LRU order only, flushing every
dirty entry when the eldest is dirty; ours does the same once the final entries are gone.
While the budget holds, marking changes nothing (Kafka's ``CachingWindowStore.fetch`` keeps
answering a cached window, KStreamWindowAggregateTest.testJoin, tests/kafka).
"""

from __future__ import annotations

from platform_streams.state.cache import ENTRY_OVERHEAD_BYTES, NamedCache, RecordCache

#: one entry of the keys and values below (1-byte key, 4-byte value)
ENTRY = ENTRY_OVERHEAD_BYTES + 1 + 4


def _cache(entries: int) -> tuple[RecordCache, NamedCache, list[list[tuple[bytes, bytes | None, int]]]]:
    flushed: list[list[tuple[bytes, bytes | None, int]]] = []
    cache = RecordCache(max_bytes=entries * ENTRY)
    named = cache.named("0_0-windows", lambda batch: flushed.append(list(batch)))
    return cache, named, flushed


def test_marking_changes_nothing_while_the_budget_holds() -> None:
    _, named, flushed = _cache(4)
    for key in (b"a", b"b", b"c"):
        named.put(key, b"v" + key * 3, 1)
    named.mark_final([b"a", b"b"])
    named.put(b"d", b"vddd", 2)  # exactly at the budget: nothing leaves
    assert flushed == [] and len(named) == 4 and named.dirty_count == 4
    assert named.get(b"a") == (b"vaaa", 1, None)
    named.flush()
    assert [key for key, _, _ in flushed[0]] == [b"a", b"b", b"c", b"d"]


def test_an_overflow_evicts_the_final_entries_first_and_flushes_only_them() -> None:
    cache, named, flushed = _cache(4)
    for key in (b"a", b"b", b"c", b"d"):
        named.put(key, b"v" + key * 3, 1)
    named.mark_final([b"b", b"c"])
    named.put(b"e", b"veee", 2)  # over the budget
    # only the final entries were written, in the order marked; the live ones stay dirty
    assert flushed == [[(b"b", b"vbbb", 1), (b"c", b"vccc", 1)]]
    assert b"b" not in named and b"c" not in named
    assert [key for key in (b"a", b"d", b"e") if key in named] == [b"a", b"d", b"e"]
    assert named.dirty_count == 3 and cache.size_bytes == 3 * ENTRY and cache.evictions == 2


def test_a_clean_final_entry_is_evicted_without_a_flush() -> None:
    _, named, flushed = _cache(2)
    named.put(b"a", b"vaaa", 1)
    named.flush()
    flushed.clear()
    named.put(b"b", b"vbbb", 1)
    named.mark_final([b"a"])
    named.put(b"c", b"vccc", 1)
    assert flushed == [] and b"a" not in named and named.dirty_count == 2


def test_lru_eviction_follows_when_the_final_entries_are_not_enough() -> None:
    """Kafka's rule then: the eldest is dirty, so every dirty entry is flushed first."""
    cache, named, flushed = _cache(2)
    named.put(b"a", b"vaaa", 1)
    named.put(b"b", b"vbbb", 1)
    named.mark_final([b"zz"])  # not cached (evicted meanwhile): skipped
    named.put(b"c", b"vccc", 1)
    assert flushed == [[(b"a", b"vaaa", 1), (b"b", b"vbbb", 1), (b"c", b"vccc", 1)]]
    assert b"a" not in named and len(named) == 2 and cache.size_bytes == 2 * ENTRY


def test_the_final_list_stays_bounded_by_the_entries() -> None:
    _, named, _ = _cache(1000)
    named.put(b"a", b"vaaa", 1)
    for i in range(1000):
        named.mark_final([b"gone-%d" % i])
    assert len(named._final) <= 2 * len(named) + 64
    named.mark_final([b"a"])
    assert b"a" in named._final


def test_clear_forgets_the_marks() -> None:
    _, named, flushed = _cache(1)
    named.put(b"a", b"vaaa", 1)
    named.mark_final([b"a"])
    named.clear()
    named.put(b"b", b"vbbb", 1)
    named.put(b"c", b"vccc", 1)  # over: LRU (b is dirty: flush all), no stale final key
    assert flushed == [[(b"b", b"vbbb", 1), (b"c", b"vccc", 1)]]


def test_a_failing_write_leaves_the_final_entries_cached() -> None:
    """As after a failed ``flush``: the entries stay readable (clean) and the error propagates."""
    cache = RecordCache(max_bytes=2 * ENTRY)

    def fail(batch: list[tuple[bytes, bytes | None, int]]) -> None:
        raise RuntimeError("changelog send refused")

    named = cache.named("0_0-windows", fail)
    named.put(b"a", b"vaaa", 1)
    named.put(b"b", b"vbbb", 1)
    named.mark_final([b"a"])
    try:
        named.put(b"c", b"vccc", 1)
    except RuntimeError:
        pass
    else:
        raise AssertionError("the write's failure was swallowed")
    assert named.get(b"a") == (b"vaaa", 1, None) and named.dirty_count == 2
