"""Session stores on both backends: find_sessions semantics, merges, retention."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from platform_streams.serde import Long, String
from platform_streams.state import SessionStore, SessionWindow, Stores, Windowed
from platform_streams.state.keys import session_key
from platform_streams.state.session_store import SessionBytesStore

RETENTION = 10 * 60_000


def _supplier(persistent: bool, name: str = "sess") -> Any:
    factory = Stores.persistent_session_store if persistent else Stores.in_memory_session_store
    return factory(name, RETENTION)


@pytest.fixture(params=[False, True], ids=["uncached", "cached"])
def ss(
    request: pytest.FixtureRequest, persistent: bool, open_store: Callable[..., Any]
) -> SessionStore[Any, Any]:
    builder = Stores.session_store_builder(_supplier(persistent), String(), Long())
    if request.param:
        builder.with_caching_enabled()
    store: SessionStore[Any, Any] = open_store(builder.build())
    return store


def _s(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, SessionWindow(start, end))


def test_fetch_session_and_remove(ss: SessionStore[Any, Any]) -> None:
    ss.put(_s("a", 0, 10), 5)
    assert ss.fetch_session("a", 0, 10) == 5
    assert ss.fetch_session("a", 0, 11) is None
    ss.remove(_s("a", 0, 10))
    assert ss.fetch_session("a", 0, 10) is None
    assert list(ss.fetch("a")) == []


def test_find_sessions_bounds(ss: SessionStore[Any, Any]) -> None:
    sessions = [(0, 10), (20, 30), (40, 50), (60, 60)]
    for i, (start, end) in enumerate(sessions):
        ss.put(_s("a", start, end), i)
        ss.put(_s("ab", start, end), 100 + i)  # a key extending "a" must not match
    ss.flush()
    ss.put(_s("a", 70, 80), 4)  # cache only (when cached)
    # sessions that a record at t=45 with gap 10 can merge with: end >= 35, start <= 55
    assert list(ss.find_sessions("a", 35, 55)) == [(_s("a", 40, 50), 2)]
    assert [w.window.start_ms for w, _ in ss.find_sessions("a", 10, 60)] == [0, 20, 40, 60]
    assert [w.window.start_ms for w, _ in ss.backward_find_sessions("a", 10, 60)] == [60, 40, 20, 0]
    assert [w.window.start_ms for w, _ in ss.fetch("a")] == [0, 20, 40, 60, 70]
    assert [w.window.start_ms for w, _ in ss.backward_fetch("a")] == [70, 60, 40, 20, 0]


def test_merge_style_remove_and_put(ss: SessionStore[Any, Any]) -> None:
    """What a session aggregation does: find overlapping sessions, remove them, put the merge."""
    ss.put(_s("k", 0, 10), 1)
    ss.put(_s("k", 30, 40), 2)
    ss.flush()
    # a record at t=20 with gap 10 bridges both sessions
    merged_start, merged_end, total = 20, 20, 1
    for session, value in ss.find_sessions("k", 20 - 10, 20 + 10):
        ss.remove(session)
        merged_start = min(merged_start, session.window.start_ms)
        merged_end = max(merged_end, session.window.end_ms)
        total += value
    ss.put(_s("k", merged_start, merged_end), total)
    assert list(ss.fetch("k")) == [(_s("k", 0, 40), 4)]
    ss.flush()
    assert list(ss.fetch("k")) == [(_s("k", 0, 40), 4)]


def test_retention_by_session_end(ss: SessionStore[Any, Any]) -> None:
    """Sessions live as long as their segment (Kafka's segmented session stores), by session end."""
    interval = RETENTION // 2  # max(retention / 2, 60 s)
    ss.put(_s("k", 0, 10), 1)
    ss.put(_s("k", 0, RETENTION + 10), 2)  # past the retention bound, but segment 0 is still live
    assert ss.fetch_session("k", 0, 10) == 1
    ss.put(_s("k", 0, RETENTION + interval), 3)  # stream time leaves segment 0 behind: it expires
    assert ss.fetch_session("k", 0, 10) is None
    assert list(ss.fetch("k")) == [(_s("k", 0, RETENTION + 10), 2), (_s("k", 0, RETENTION + interval), 3)]
    ss.put(_s("k", 5, 5), 4)  # expired on arrival
    ss.flush()
    assert ss.fetch_session("k", 5, 5) is None


def test_restore_batch_and_all(persistent: bool, open_store: Callable[..., Any]) -> None:
    store: SessionBytesStore = open_store(_supplier(persistent).get())
    store.restore_batch(
        [
            (session_key(b"a", 0, 10), b"1"),
            (session_key(b"b", 5, 15), b"2"),
            (session_key(b"a", 0, 10), None),
            (session_key(b"a", 20, 30), b"3"),
        ]
    )
    assert [(w.key, w.window.start_ms, v) for w, v in store.all()] == [(b"a", 20, b"3"), (b"b", 5, b"2")]
    assert store.observed_stream_time == 30
