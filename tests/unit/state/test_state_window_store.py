"""Window stores on both backends: fetches by time range, key ranges, retention, duplicates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from platform_streams.serde import Bytes, Long, String
from platform_streams.state import Stores, TimeWindow, Windowed, WindowStore
from platform_streams.state.keys import window_key
from platform_streams.state.window_store import WindowBytesStore

from .conftest import FakeContext

MINUTE = 60_000
RETENTION = 10 * MINUTE
SIZE = MINUTE


def _supplier(persistent: bool, *, retention: int = RETENTION, dups: bool = False, name: str = "win") -> Any:
    factory = Stores.persistent_window_store if persistent else Stores.in_memory_window_store
    return factory(name, retention, SIZE, retain_duplicates=dups)


@pytest.fixture(params=[False, True], ids=["uncached", "cached"])
def ws(
    request: pytest.FixtureRequest, persistent: bool, open_store: Callable[..., Any]
) -> WindowStore[Any, Any]:
    builder = Stores.window_store_builder(_supplier(persistent), String(), Long())
    if request.param:
        builder.with_caching_enabled()
    store: WindowStore[Any, Any] = open_store(builder.build())
    return store


def _w(key: Any, start: int) -> Windowed[Any]:
    return Windowed(key, TimeWindow(start, start + SIZE))


def test_point_fetch(ws: WindowStore[Any, Any]) -> None:
    ws.put("a", 1, 0)
    ws.put("a", 2, MINUTE)
    ws.put("a", 3, 0)  # overwrite
    assert ws.fetch("a", 0) == 3
    assert ws.fetch("a", MINUTE) == 2
    assert ws.fetch("a", 2 * MINUTE) is None
    assert ws.fetch("b", 0) is None
    ws.put("a", None, 0)  # delete
    assert ws.fetch("a", 0) is None


def test_fetch_by_time_range_forward_and_backward(ws: WindowStore[Any, Any]) -> None:
    for i in range(6):
        ws.put("a", i, i * MINUTE)
        ws.put("ab", 100 + i, i * MINUTE)  # a key that extends "a": must not leak into fetch("a")
    ws.flush()
    ws.put("a", 99, 6 * MINUTE)  # cached only (when cached)
    assert list(ws.fetch("a", MINUTE, 3 * MINUTE)) == [(MINUTE, 1), (2 * MINUTE, 2), (3 * MINUTE, 3)]
    assert list(ws.backward_fetch("a", MINUTE, 3 * MINUTE)) == [(3 * MINUTE, 3), (2 * MINUTE, 2), (MINUTE, 1)]
    assert [t for t, _ in ws.fetch("a", 0, 10 * MINUTE)] == [i * MINUTE for i in range(7)]
    assert list(ws.fetch("a", 3 * MINUTE, MINUTE)) == []


def test_fetch_range_and_all(ws: WindowStore[Any, Any]) -> None:
    for key in ["a", "b", "c"]:
        for i in range(3):
            ws.put(key, i, i * MINUTE)
    got = list(ws.fetch_range("a", "b", MINUTE, 2 * MINUTE))
    assert sorted(got, key=lambda kv: (kv[0].key, kv[0].window.start_ms)) == [
        (_w("a", MINUTE), 1),
        (_w("a", 2 * MINUTE), 2),
        (_w("b", MINUTE), 1),
        (_w("b", 2 * MINUTE), 2),
    ]
    assert len(list(ws.fetch_all(MINUTE, MINUTE))) == 3
    assert len(list(ws.all())) == 9
    assert list(ws.backward_all()) == list(reversed(list(ws.all())))
    assert all(
        isinstance(w.window, TimeWindow) and w.window.end_ms - w.window.start_ms == SIZE for w, _ in ws.all()
    )


def test_fetch_range_with_prefix_keys(persistent: bool, open_store: Callable[..., Any]) -> None:
    store = open_store(Stores.window_store_builder(_supplier(persistent), Bytes(), Long()).build())
    keys = [b"a", b"a\x00", b"a\x00\x00\x00\x00\x00\x00\x00\x05", b"a\xff", b"b", b""]
    for key in keys:
        store.put(key, 1, 5)
    got = sorted(w.key for w, _ in store.fetch_range(b"a", b"a\xff", 0, 10))
    assert got == sorted([b"a", b"a\x00", b"a\x00\x00\x00\x00\x00\x00\x00\x05", b"a\xff"])
    assert [w.key for w, _ in store.fetch_range(b"a\x00", b"a\x00", 0, 10)] == [b"a\x00"]
    assert list(store.fetch(b"a", 0, 10)) == [(5, 1)]


def test_retention_hides_and_drops_old_windows(ws: WindowStore[Any, Any]) -> None:
    ws.put("a", 1, 0)
    ws.put("a", 2, 5 * MINUTE)
    ws.put("a", 3, RETENTION)  # stream time = retention: window 0 is now expired
    # a caching layer answers the single-window fetch(key, time) from its cache first, even
    # for a window the store expired (Kafka's CachingWindowStore.fetch); range reads hide it
    cached = "CachingWindowStore" in repr(ws)
    assert ws.fetch("a", 0) == (1 if cached else None)
    assert [t for t, _ in ws.fetch("a", 0, RETENTION)] == [5 * MINUTE, RETENTION]
    ws.put("a", 4, 0)  # a write to an expired window is dropped
    ws.flush()
    assert ws.fetch("a", 0) == (4 if cached else None)
    assert [w.window.start_ms for w, _ in ws.all()] == [5 * MINUTE, RETENTION]


def test_expired_segments_are_dropped_whole(persistent: bool, open_store: Callable[..., Any]) -> None:
    store: WindowBytesStore = open_store(_supplier(persistent).get())
    interval = store.segment_interval_ms
    assert interval == RETENTION // 2
    store.put(b"k", b"v", 0)
    store.put(b"k", b"v", interval)
    assert store.segment_ids == [0, 1]
    store.put(b"k", b"v", 3 * interval)  # stream time - retention = interval: segment 0 is gone
    assert store.segment_ids == [1, 3]
    store.put(b"k", b"v", 10 * interval)
    assert store.segment_ids == [10]
    assert store.expired_records_dropped == 0
    store.put(b"k", b"late", 0)
    assert store.expired_records_dropped == 1
    if persistent:
        assert sorted(store.backend.column_names()) == ["seg-10"]


def test_retain_duplicates(persistent: bool, open_store: Callable[..., Any]) -> None:
    builder = Stores.window_store_builder(_supplier(persistent, dups=True), String(), Long())
    builder.with_caching_enabled()  # refused: duplicates cannot be cached
    assert not builder.caching_enabled
    store = open_store(builder.build())
    store.put("a", 1, 0)
    store.put("a", 2, 0)
    store.put("a", None, 0)  # ignored with duplicates
    store.put("a", 3, MINUTE)
    assert list(store.fetch("a", 0, MINUTE)) == [(0, 1), (0, 2), (MINUTE, 3)]
    assert store.fetch("a", 0) == 1


def test_stream_time_survives_reopen(context: FakeContext) -> None:
    store: WindowBytesStore = _supplier(True).get()
    store.init(context, store)
    store.put(b"k", b"1", 0)
    store.put(b"k", b"2", RETENTION)
    store.close()
    again: WindowBytesStore = _supplier(True).get()
    again.init(context, again)
    try:
        assert again.observed_stream_time == RETENTION
        assert again.fetch_at(b"k", 0) is None  # still expired after the restart
        assert again.fetch_at(b"k", RETENTION) == b"2"
        again.put(b"k", b"late", 0)  # and a write to it is dropped
        assert again.expired_records_dropped == 1 and again.fetch_at(b"k", 0) is None
    finally:
        again.close()


def test_restore_batch_uses_binary_keys(persistent: bool, open_store: Callable[..., Any]) -> None:
    store: WindowBytesStore = open_store(_supplier(persistent).get())
    store.restore_batch(
        [
            (window_key(b"k", 0, 0), b"a"),
            (window_key(b"k", MINUTE, 0), b"b"),
            (window_key(b"k", 0, 0), None),
            (window_key(b"k", 2 * RETENTION, 0), b"c"),  # advances stream time: the rest expires
        ]
    )
    assert store.observed_stream_time == 2 * RETENTION
    assert list(store.fetch_between(b"k", 0, 3 * RETENTION)) == [(2 * RETENTION, b"c")]


def test_invalid_window_store_specs() -> None:
    with pytest.raises(ValueError):
        Stores.persistent_window_store("w", retention_ms=10, window_size_ms=20)
    with pytest.raises(ValueError):
        Stores.in_memory_window_store("w", retention_ms=10, window_size_ms=0)
    with pytest.raises(ValueError):
        Stores.in_memory_window_store("a/b", retention_ms=10, window_size_ms=5)
