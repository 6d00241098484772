"""The record cache and the caching layer: dedup, eviction, disabled cache, merged reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from platform_streams.serde import Long, String
from platform_streams.state import RecordCache, SessionWindow, Stores, TimeWindow, Windowed
from platform_streams.state.cache import DECODED_OVERHEAD_BYTES, ENTRY_OVERHEAD_BYTES, merge_sorted

from .conftest import FakeContext

Change = tuple[Any, Any, Any, int]


def _kv(persistent: bool, *, caching: bool, logging: bool = True, name: str = "kv") -> Any:
    supplier = (
        Stores.persistent_key_value_store(name) if persistent else Stores.in_memory_key_value_store(name)
    )
    builder = Stores.key_value_store_builder(supplier, String(), Long())
    if caching:
        builder.with_caching_enabled()
    if not logging:
        builder.with_logging_disabled()
    return builder.build()


def _listen(store: Any, send_old_values: bool = True) -> list[Change]:
    changes: list[Change] = []
    store.set_flush_listener(lambda k, new, old, ts: changes.append((k, new, old, ts)), send_old_values)
    return changes


def test_cache_deduplicates_until_flush(
    persistent: bool, open_store: Callable[..., Any], context: FakeContext
) -> None:
    store = open_store(_kv(persistent, caching=True))
    changes = _listen(store)
    context.stream_time = 42
    store.put("a", 1)
    store.flush()
    assert changes == [("a", 1, None, 42)]
    store.put("a", 2)
    store.put("a", 3)
    store.put("b", 7)
    assert store.get("a") == 3  # served from the cache
    assert len(changes) == 1 and context.logged[-1][1] == b"a"  # nothing forwarded or logged yet
    store.flush()
    assert changes[1:] == [("a", 3, 1, 42), ("b", 7, None, 42)]
    assert [(k, v) for _, k, v, _ in context.logged] == [
        (b"a", Long().serialize(1)),
        (b"a", Long().serialize(3)),
        (b"b", Long().serialize(7)),
    ]


def test_cached_delete(persistent: bool, open_store: Callable[..., Any], context: FakeContext) -> None:
    store = open_store(_kv(persistent, caching=True))
    changes = _listen(store)
    store.put("a", 1)
    store.flush()
    store.delete("a")
    store.put("never", 1)
    store.delete("never")  # created and deleted within one commit: nothing to tell
    assert store.get("a") is None
    store.flush()
    assert changes[1:] == [("a", None, 1, 0)]
    assert store.get("a") is None


def test_send_old_values_false(persistent: bool, open_store: Callable[..., Any]) -> None:
    store = open_store(_kv(persistent, caching=True))
    changes = _listen(store, send_old_values=False)
    store.put("a", 1)
    store.flush()
    store.put("a", 2)
    store.flush()
    assert [old for _, _, old, _ in changes] == [None, None]


def test_eviction_over_the_byte_bound_forwards(
    persistent: bool, tmp_path: Path, open_store: Callable[..., Any]
) -> None:
    entry = ENTRY_OVERHEAD_BYTES + 2 + 8  # key "kN" + 8-byte long
    context = FakeContext(tmp_path / "t", cache_max_bytes=3 * entry)
    store = open_store(_kv(persistent, caching=True), context)
    changes = _listen(store)
    for i in range(3):
        store.put(f"k{i}", i)
    assert changes == []  # fits
    store.put("k3", 3)  # over the bound: LRU k0 is dirty -> all dirty entries leave, k0 is evicted
    assert [k for k, *_ in changes] == ["k0", "k1", "k2", "k3"]
    assert store.get("k0") == 0  # read back from the store below
    assert len(context.logged) == 4


def test_cache_size_zero_forwards_every_put(
    persistent: bool, tmp_path: Path, open_store: Callable[..., Any]
) -> None:
    context = FakeContext(tmp_path / "t", cache_max_bytes=0)
    store = open_store(_kv(persistent, caching=True), context)
    changes = _listen(store)
    store.put("a", 1)
    store.put("a", 2)
    assert changes == [("a", 1, None, 0), ("a", 2, 1, 0)]


def test_disabled_cache_forwards_every_put(
    persistent: bool, open_store: Callable[..., Any], context: FakeContext
) -> None:
    store = open_store(_kv(persistent, caching=False))
    changes: list[Change] = []
    assert store.set_flush_listener(lambda *c: changes.append(c), True) is False
    store.put("a", 1)
    store.put("a", 2)
    assert store.delete("a") == 2
    store.delete("missing")
    assert store.put_if_absent("b", 5) is None
    assert store.put_if_absent("b", 6) == 5
    assert changes == [("a", 1, None, 0), ("a", 2, 1, 0), ("a", None, 2, 0), ("b", 5, None, 0)]
    assert len(context.logged) == 5  # four writes + the delete of a missing key (logged, as in Kafka Streams)


def test_caching_flag(persistent: bool) -> None:
    assert _kv(persistent, caching=True).caching_enabled
    assert not _kv(persistent, caching=False).caching_enabled


def test_shared_record_cache_evicts_from_the_growing_store(
    tmp_path: Path, open_store: Callable[..., Any]
) -> None:
    context = FakeContext(tmp_path / "t")
    shared = RecordCache(max_bytes=4 * (ENTRY_OVERHEAD_BYTES + 10))
    context.record_cache = shared  # type: ignore[attr-defined]
    first = open_store(_kv(False, caching=True, name="one"), context)
    second = open_store(_kv(False, caching=True, name="two"), context)
    first_changes, second_changes = _listen(first), _listen(second)
    for i in range(3):
        first.put(f"k{i}", i)
    second.put("x0", 0)
    assert first_changes == [] and second_changes == []
    second.put("x1", 1)  # the budget is shared: the store that grew evicts from itself
    assert [k for k, *_ in second_changes] == ["x0", "x1"]
    assert first_changes == []
    assert shared.size_bytes <= shared.max_bytes


def test_window_cache_dedups_and_merges(persistent: bool, open_store: Callable[..., Any]) -> None:
    supplier = (Stores.persistent_window_store if persistent else Stores.in_memory_window_store)(
        "w", 600_000, 1000
    )
    store = open_store(Stores.window_store_builder(supplier, String(), Long()).with_caching_enabled().build())
    changes = _listen(store)
    store.put("a", 1, 0)
    store.flush()
    store.put("a", 2, 0)
    store.put("a", 3, 0)
    store.put("a", 9, 2000)
    assert list(store.fetch("a", 0, 5000)) == [(0, 3), (2000, 9)]
    store.flush()
    win = Windowed("a", TimeWindow(0, 1000))
    assert changes == [(win, 1, None, 0), (win, 3, 1, 0), (Windowed("a", TimeWindow(2000, 3000)), 9, None, 0)]


def test_session_cache_merges_and_hides_removed(persistent: bool, open_store: Callable[..., Any]) -> None:
    supplier = (Stores.persistent_session_store if persistent else Stores.in_memory_session_store)(
        "s", 600_000
    )
    store = open_store(
        Stores.session_store_builder(supplier, String(), Long()).with_caching_enabled().build()
    )
    changes = _listen(store)
    old = Windowed("k", SessionWindow(0, 10))
    store.put(old, 1)
    store.flush()
    store.remove(old)
    merged = Windowed("k", SessionWindow(0, 20))
    store.put(merged, 2)
    assert list(store.find_sessions("k", 0, 100)) == [(merged, 2)]
    store.flush()
    assert changes == [(old, 1, None, 0), (old, None, 1, 0), (merged, 2, None, 0)]
    assert list(store.fetch("k")) == [(merged, 2)]


def test_merge_sorted() -> None:
    store = iter([(b"a", 1), (b"c", 3), (b"e", 5)])
    cached: list[tuple[Any, int | None]] = [(b"b", 2), (b"c", 30), (b"e", None), (b"f", 6)]
    assert list(merge_sorted(store, cached, False)) == [(b"a", 1), (b"b", 2), (b"c", 30), (b"f", 6)]
    rev = iter([(b"e", 5), (b"c", 3), (b"a", 1)])
    assert list(merge_sorted(rev, [(b"d", 4), (b"a", None)], True)) == [(b"e", 5), (b"d", 4), (b"c", 3)]


def test_a_kept_decoded_value_is_charged_and_given_back() -> None:
    """An entry keeping its decoded form costs DECODED_OVERHEAD_BYTES more while it
    does: replacing it by a plain put, evicting or removing it gives the bytes back. A key's
    first put keeps no decoded form (a key seen once would pay for it and never read it)."""
    cache = RecordCache(max_bytes=10_000)
    named = cache.named("0_0-s", lambda entries: None)
    plain = ENTRY_OVERHEAD_BYTES + 1 + 16
    named.put(b"a", b"w" * 16, 0, (6, 0))
    assert cache.size_bytes == plain and named.get(b"a") == (b"w" * 16, 0, None)
    named.put(b"a", b"x" * 16, 1, (7, 1))
    assert cache.size_bytes == plain + DECODED_OVERHEAD_BYTES and named.get(b"a") == (b"x" * 16, 1, (7, 1))
    named.put(b"a", b"y" * 16, 2)
    assert cache.size_bytes == plain and named.get(b"a") == (b"y" * 16, 2, None)
    named.put(b"a", b"z" * 8, 3, (8, 3))
    assert cache.size_bytes == plain - 8 + DECODED_OVERHEAD_BYTES
    named.flush()
    named.evict()
    assert cache.size_bytes == 0 and named.size_bytes == 0 and len(named) == 0


def test_record_cache_rejects_negative_size() -> None:
    with pytest.raises(ValueError):
        RecordCache(-1)
