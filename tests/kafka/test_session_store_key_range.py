"""The key-range cases of Kafka's ``AbstractSessionBytesStoreTest`` (streams/src/test/java/org/
apache/kafka/streams/state/internals/AbstractSessionBytesStoreTest.java), translated, on the
RocksDB and the in-memory session store, each bare, cached and change-logged (the stack a
processor gets from ``Stores.session_store_builder``).

Translated: shouldFetchAllSessionsWithinKeyRange, shouldBackwardFetchAllSessionsWithinKeyRange,
shouldFetchExactKeys, shouldBackwardFetchExactKeys,
shouldReturnSameResultsForSingleKeyFindSessionsAndEqualKeyRangeFindSessions, and the
``fetch(keyFrom, keyTo)`` / ``findSessions(keyFrom, keyTo, ...)`` null-bound and from > to cases
(shouldReturnEmptyIteratorForInvalidKeyRange-style: Kafka logs and returns nothing).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from platform_streams.dsl import Consumed, Materialized, SessionWindows, StreamsBuilder
from platform_streams.serde import Long, String
from platform_streams.state import SessionWindow, Stores, Windowed
from platform_streams.testing import TopologyTestDriver
from tests.unit.state.conftest import FakeContext

RETENTION_PERIOD = 10_000


@pytest.fixture(params=["rocksdb", "in-memory"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["bare", "cached", "logged"])
def layering(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _build(backend: str, layering: str, tmp_path: Path, retention: int = RETENTION_PERIOD) -> Any:
    factory = Stores.persistent_session_store if backend == "rocksdb" else Stores.in_memory_session_store
    builder = Stores.session_store_builder(factory("session-store", retention), String(), Long())
    builder = builder.with_logging_disabled() if layering != "logged" else builder
    if layering == "cached":
        builder.with_caching_enabled()
    store = builder.build()
    store.init(FakeContext(tmp_path / "0_0"), store)
    return store


@pytest.fixture
def session_store(backend: str, layering: str, tmp_path: Path) -> Iterator[Any]:
    store = _build(backend, layering, tmp_path)
    yield store
    store.close()


def _s(key: str, start: int, end: int) -> Windowed[str]:
    return Windowed(key, SessionWindow(start, end))


def _to_set(items: Iterator[tuple[Windowed[Any], Any]]) -> set[tuple[Windowed[Any], Any]]:
    return set(items)


def _values(items: Iterator[tuple[Windowed[Any], Any]]) -> set[Any]:
    return {value for _, value in items}


def _key_range_data(store: Any) -> set[tuple[Windowed[str], int]]:
    expected = {
        (_s("aa", 10, 10), 2),
        (_s("b", 1000, 1000), 4),
        (_s("aaa", 100, 100), 3),
        (_s("bb", 1500, 2000), 5),
    }
    for windowed, value in expected:
        store.put(windowed, value)
    # some that shouldn't appear in the results
    store.put(_s("a", 0, 0), 1)
    store.put(_s("bbb", 2500, 3000), 6)
    return expected


def test_should_fetch_all_sessions_within_key_range(session_store: Any) -> None:
    """AbstractSessionBytesStoreTest.shouldFetchAllSessionsWithinKeyRange"""
    expected = _key_range_data(session_store)
    assert _to_set(session_store.fetch("aa", "bb")) == expected
    ordered = list(session_store.fetch("aa", "bb"))
    assert [(w.window.end_ms, w.key) for w, _ in ordered] == sorted(
        (w.window.end_ms, w.key) for w, _ in ordered
    )


def test_should_backward_fetch_all_sessions_within_key_range(session_store: Any) -> None:
    """AbstractSessionBytesStoreTest.shouldBackwardFetchAllSessionsWithinKeyRange"""
    expected = _key_range_data(session_store)
    assert _to_set(session_store.backward_fetch_range("aa", "bb")) == expected
    assert list(session_store.backward_fetch_range("aa", "bb")) == list(session_store.fetch("aa", "bb"))[::-1]


def _exact_keys(backend: str, layering: str, tmp_path: Path) -> Any:
    store = _build(backend, layering, tmp_path, retention=0x7A00000000000000)
    store.put(_s("a", 0, 0), 1)
    store.put(_s("aa", 0, 10), 2)
    store.put(_s("a", 10, 20), 3)
    store.put(_s("aa", 10, 20), 4)
    store.put(_s("a", 0x7A00000000000000 - 2, 0x7A00000000000000 - 1), 5)
    return store


MAX = 0x7FFFFFFFFFFFFFFF


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_should_fetch_exact_keys(backend: str, layering: str, tmp_path: Path, backward: bool) -> None:
    """AbstractSessionBytesStoreTest.shouldFetchExactKeys / shouldBackwardFetchExactKeys (a
    session ending near 2**63 sorts its key "a" after "aa" in bytes: the range scan must still
    find it)"""
    store = _exact_keys(backend, layering, tmp_path)
    try:
        assert _values(store.find_sessions("a", 0, MAX, backward=backward)) == {1, 3, 5}
        assert _values(store.find_sessions("aa", 0, MAX, backward=backward)) == {2, 4}
        assert _values(store.find_sessions("a", "aa", 0, MAX, backward=backward)) == {1, 2, 3, 4, 5}
        assert _values(store.find_sessions("a", "aa", 10, 0, backward=backward)) == {2}
    finally:
        store.close()
    if backward:  # the named backward forms are the same call
        store = _exact_keys(backend, layering, tmp_path / "again")
        try:
            assert _values(store.backward_find_sessions_range("a", "aa", 10, 0)) == {2}
            assert _values(store.backward_find_sessions("aa", 0, MAX)) == {2, 4}
        finally:
            store.close()


def test_should_return_same_results_for_single_key_find_sessions_and_equal_key_range_find_sessions(
    session_store: Any,
) -> None:
    """AbstractSessionBytesStoreTest.shouldReturnSameResultsForSingleKeyFindSessionsAndEqualKeyRangeFindSessions"""
    session_store.put(_s("a", 0, 1), 0)
    session_store.put(_s("aa", 2, 3), 1)
    session_store.put(_s("aa", 4, 5), 2)
    session_store.put(_s("aaa", 6, 7), 3)
    assert list(session_store.find_sessions("aa", 0, 10)) == list(
        session_store.find_sessions("aa", "aa", 0, 10)
    )
    assert len(list(session_store.find_sessions("aa", "aa", 0, 10))) == 2


def test_null_bounds_are_unbounded_and_from_after_to_is_empty(
    session_store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """ReadOnlySessionStore.fetch(keyFrom, keyTo) with null bounds (KIP-763) and from > to (empty)."""
    expected = _key_range_data(session_store)
    everything = expected | {(_s("a", 0, 0), 1), (_s("bbb", 2500, 3000), 6)}
    assert _to_set(session_store.fetch(None, None)) == everything
    assert _to_set(session_store.fetch(None, "aaa")) == {
        (_s("a", 0, 0), 1),
        (_s("aa", 10, 10), 2),
        (_s("aaa", 100, 100), 3),
    }
    assert _to_set(session_store.fetch("bb", None)) == {(_s("bb", 1500, 2000), 5), (_s("bbb", 2500, 3000), 6)}
    assert list(session_store.fetch("bb", "aa")) == []
    assert "invalid key range" in caplog.text


def test_a_cached_removal_hides_a_stored_session(backend: str, tmp_path: Path) -> None:
    """The caching layer overlays its entries on the store's: a cached delete hides, a cached put shows."""
    store = _build(backend, "cached", tmp_path)
    try:
        store.put(_s("a", 0, 0), 1)
        store.put(_s("b", 5, 5), 2)
        store.flush()
        store.remove(_s("a", 0, 0))
        store.put(_s("c", 7, 7), 3)
        assert list(store.fetch("a", "c")) == [(_s("b", 5, 5), 2), (_s("c", 7, 7), 3)]
    finally:
        store.close()


def test_a_dsl_session_store_answers_key_ranges_through_the_driver() -> None:
    """ReadOnlySessionStore.fetch(keyFrom, keyTo) / findSessions(keyFrom, keyTo, ...) on the store
    of a session-windowed count (what interactive queries read)."""
    s = String()
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=s, value_serde=s))
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
        .count(Materialized.as_("sessions"))
    )
    with TopologyTestDriver(builder.build(), {}) as driver:
        topic = driver.create_input_topic("in", s, s)
        for key, ts in [("a", 0), ("b", 5), ("d", 7), ("b", 12), ("c", 100)]:
            topic.pipe_input(key, "x", ts)
        store = driver.get_session_store("sessions")
        assert list(store.fetch("a", "c")) == [
            (_s("a", 0, 0), 1),
            (_s("b", 5, 12), 2),
            (_s("c", 100, 100), 1),
        ]
        assert list(store.find_sessions("b", "d", 0, 50)) == [(_s("d", 7, 7), 1), (_s("b", 5, 12), 2)]
        assert list(store.find_sessions("b", "d", 0, 50, backward=True)) == [
            (_s("b", 5, 12), 2),
            (_s("d", 7, 7), 1),
        ]
