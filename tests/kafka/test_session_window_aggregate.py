"""Kafka's ``KStreamSessionWindowAggregateProcessorTest`` (streams/src/test/java/org/apache/kafka/
streams/kstream/internals/KStreamSessionWindowAggregateProcessorTest.java), the store-level cases
translated to a session-windowed count run by the TopologyTestDriver (the Java test drives the
processor with a mock context that never commits: where a case checks what a cached store
forwards, the records are processed without a commit between them, as there). The log/metric
cases check the task's dropped-records metric and the log line (Kafka's text for a null key;
for a late record our debug line with the same facts).

Plus the issue's example of Kafka's segmented session stores: a record can merge with a session
that ended before the retention bound, because the session lives until its segment expires.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from platform_streams.dsl import Consumed, Materialized, SessionWindows, StreamsBuilder, Windowed
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.state.windowed import SessionWindow
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    MockApiProcessorSupplier,
    dropped_records,
    pipe_uncommitted,
)

S = String()
GAP_MS = 5 * 60 * 1000
STORE_NAME = "session-store"


class Fixture:
    def __init__(self, windows: SessionWindows, materialized: Materialized) -> None:
        builder = StreamsBuilder()
        self.supplier = MockApiProcessorSupplier()
        builder.stream("in", Consumed(key_serde=S, value_serde=S)).group_by_key().windowed_by(windows).count(
            materialized
        ).to_stream().process(self.supplier)
        self.driver = TopologyTestDriver(
            builder.build(), {"default_key_serde": "string", "metrics_recording_level": "DEBUG"}
        )
        self.topic = self.driver.create_input_topic("in", S, S)

    def process(self, key: str | None, value: str, ts: int) -> None:
        self.topic.pipe_input(key, value, ts)

    def process_uncommitted(self, records: list[tuple[str, str, int]]) -> None:
        """As the Java test's mock context: no commit until the store is flushed at the end."""
        pipe_uncommitted(self.driver, "in", S, S, records)  # type: ignore[arg-type]

    def results(self) -> list[tuple[Any, Any, int]]:
        """What the aggregation forwarded: Kafka's ``results`` (``Change.newValue``; old values
        are not sent, so ``Change.oldValue`` is always null there)."""
        (processor,) = self.supplier.captured_processors(1)
        return processor.processed

    def find_sessions(self, key: str, earliest_end: int, latest_start: int) -> list[tuple[Any, Any]]:
        return list(self.driver.get_session_store(STORE_NAME).find_sessions(key, earliest_end, latest_start))


def _setup(caching: bool = True, windows: SessionWindows | None = None) -> Fixture:
    """``setup``: a gap of 5 minutes, no grace, a persistent store kept 3 gaps, caching on."""
    supplier = Stores.persistent_session_store(STORE_NAME, GAP_MS * 3)
    materialized = Materialized(store_supplier=supplier).with_logging_disabled()
    return Fixture(
        windows or SessionWindows.of_inactivity_gap_with_no_grace(GAP_MS),
        materialized if caching else materialized.with_caching_disabled(),
    )


@pytest.fixture
def fx() -> Iterator[Fixture]:
    fixture = _setup()
    yield fixture
    fixture.driver.close()


@pytest.fixture
def uncached() -> Iterator[Fixture]:
    """``initStore(false)``: the same store without caching."""
    fixture = _setup(caching=False)
    yield fixture
    fixture.driver.close()


def _s(key: str, start: int, end: int, value: int | None) -> tuple[Any, Any, int]:
    """Kafka's ``KeyValueTimestamp(Windowed(key, SessionWindow(start, end)), Change(value, null), end)``."""
    return Windowed(key, SessionWindow(start, end)), value, end


def test_should_create_single_session_when_within_gap(fx: Fixture) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldCreateSingleSessionWhenWithinGap"""
    fx.process("john", "first", 0)
    fx.process("john", "second", 500)
    assert [v for _, v in fx.find_sessions("john", 0, 2000)] == [2]


def test_should_merge_sessions(fx: Fixture) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldMergeSessions"""
    fx.process("mel", "first", 0)
    assert fx.find_sessions("mel", 0, 0)
    fx.process("mel", "second", GAP_MS + 1)  # beyond the gap
    assert fx.find_sessions("mel", GAP_MS + 1, GAP_MS + 1)
    assert fx.find_sessions("mel", 0, 0)  # still there: not within the gap
    fx.process("mel", "third", GAP_MS // 2)  # back in time: bridges both
    assert [v for _, v in fx.find_sessions("mel", 0, GAP_MS + 1)] == [3]


def test_should_update_session_if_the_same_time(fx: Fixture) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldUpdateSessionIfTheSameTime"""
    fx.process("mel", "first", 0)
    fx.process("mel", "second", 0)
    assert [v for _, v in fx.find_sessions("mel", 0, 0)] == [2]


def test_should_remove_merged_sessions_from_state_store(fx: Fixture) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldRemoveMergedSessionsFromStateStore"""
    fx.process("a", "1", 0)
    assert fx.find_sessions("a", 0, 0) == [(Windowed("a", SessionWindow(0, 0)), 1)]
    fx.process("a", "2", 100)
    assert fx.find_sessions("a", 0, 100) == [(Windowed("a", SessionWindow(0, 100)), 2)]


@pytest.mark.parametrize("caching", [True, False], ids=["cached", "uncached"])
def test_a_session_lives_until_its_segment_expires(caching: bool) -> None:
    """Gap 5 s, no grace (retention 5 s): records at 0, 8,000, then 4,000 -> one session [0, 8000],
    count 3 -- the session at 0 ended before the retention bound (3,000) but its segment is live."""
    materialized = Materialized.as_(STORE_NAME)
    fixture = Fixture(
        SessionWindows.of_inactivity_gap_with_no_grace(5000),
        materialized if caching else materialized.with_caching_disabled(),
    )
    with fixture.driver:
        for ts in (0, 8000, 4000):
            fixture.process("k", "v", ts)
        assert fixture.find_sessions("k", 0, 10_000) == [(Windowed("k", SessionWindow(0, 8000)), 3)]
        assert list(fixture.driver.get_session_store(STORE_NAME).fetch("k")) == [
            (Windowed("k", SessionWindow(0, 8000)), 3)
        ]


def test_should_have_multiple_sessions_for_same_id_when_timestamp_apart_by_session_gap(fx: Fixture) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldHaveMultipleSessionsForSameIdWhenTimestampApartBySessionGap"""
    t1, t2 = GAP_MS + 1, 2 * (GAP_MS + 1)
    fx.process_uncommitted(
        [("mel", "first", 0), ("mel", "second", t1), ("mel", "second", t1)] + [("mel", "third", t2)] * 3
    )
    assert fx.results() == [_s("mel", 0, 0, 1), _s("mel", t1, t1, 2), _s("mel", t2, t2, 3)]


def test_should_handle_multiple_sessions_and_merging(fx: Fixture) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldHandleMultipleSessionsAndMerging"""
    half, t1 = GAP_MS // 2, GAP_MS + 1
    t2 = t1 + half
    records = [
        ("a", "1", 0), ("b", "1", 0), ("c", "1", 0), ("d", "1", 0), ("d", "2", half),
        ("a", "2", t1), ("b", "2", t1), ("a", "3", t2), ("c", "3", t2),
    ]  # fmt: skip
    fx.process_uncommitted(records)
    assert fx.results() == [
        _s("a", 0, 0, 1), _s("b", 0, 0, 1), _s("c", 0, 0, 1), _s("d", 0, half, 2),
        _s("b", t1, t1, 1), _s("a", t1, t2, 2), _s("c", t2, t2, 1),
    ]  # fmt: skip


def test_should_get_aggregated_values_from_value_getter(fx: Fixture) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldGetAggregatedValuesFromValueGetter: the
    session table's value getter reads the store by exact session (``fetchSession``)."""
    fx.process("a", "1", 0)
    fx.process("a", "1", GAP_MS + 1)
    fx.process("a", "2", GAP_MS + 1)
    store = fx.driver.get_session_store(STORE_NAME)
    assert store.fetch_session("a", 0, 0) == 1
    assert store.fetch_session("a", GAP_MS + 1, GAP_MS + 1) == 2


def test_should_immediately_forward_new_session_when_non_cached_store(uncached: Fixture) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldImmediatelyForwardNewSessionWhenNonCachedStore"""
    for key in "abc":
        uncached.process(key, "1", 0)
    assert uncached.results() == [_s("a", 0, 0, 1), _s("b", 0, 0, 1), _s("c", 0, 0, 1)]


def test_should_immediately_forward_removed_sessions_when_merging(uncached: Fixture) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldImmediatelyForwardRemovedSessionsWhenMerging:
    the merged-away session is forwarded as a tombstone (``Change(null, null)``) at its end."""
    uncached.process("a", "1", 0)
    uncached.process("a", "1", 5)
    assert uncached.results() == [_s("a", 0, 0, 1), _s("a", 0, 0, None), _s("a", 0, 5, 2)]


def test_should_log_and_meter_when_skipping_null_key_with_built_in_metrics(
    uncached: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    """KStreamSessionWindowAggregateProcessorTest.shouldLogAndMeterWhenSkippingNullKeyWithBuiltInMetrics:
    dropped-records-total is 1 and Kafka's warning is logged (for our input topic and offset)."""
    with caplog.at_level(logging.WARNING):
        uncached.process(None, "1", 0)
    assert dropped_records(uncached.driver) == 1
    assert "Skipping record due to null key. topic=[in] partition=[0] offset=[0]" in caplog.messages
    assert uncached.results() == []


#: Java test -> (grace, the (key, timestamp) records in order, the stream time at the end); the
#: last one, Late1 at 0, is late: stream time is past its window [0,0] plus gap 10 and grace
LATE_CASES = {
    "shouldLogAndMeterWhenSkippingLateRecordWithZeroGrace": (
        0,
        [("dummy", 0), ("OnTime1", 0), ("dummy", 11), ("Late1", 0)],
        11,
    ),
    "shouldLogAndMeterWhenSkippingLateRecordWithNonzeroGrace": (
        1,
        [("dummy", 0), ("OnTime1", 0), ("dummy", 11), ("OnTime2", 0), ("dummy", 12), ("Late1", 0)],
        12,
    ),
}


@pytest.mark.parametrize("java_test", list(LATE_CASES))
def test_should_log_and_meter_when_skipping_late_record(
    java_test: str, caplog: pytest.LogCaptureFixture
) -> None:
    """KStreamSessionWindowAggregateProcessorTest.<java_test>: a gap of 10 ms; the late record is
    dropped (dropped-records-total 1), the on-time ones aggregate, and the log line says what
    Kafka's says ("Skipping record for expired window. key=[Late1] ... timestamp=[0]
    window=[0,0] expiration=[1] streamTime=[N]"; expiration is stream time - grace - gap)."""
    grace, records, stream_time = LATE_CASES[java_test]
    fixture = _setup(caching=False, windows=SessionWindows.of_inactivity_gap_and_grace(10, grace))
    with fixture.driver, caplog.at_level(logging.DEBUG, logger="platform_streams.dsl"):
        for key, ts in records:
            fixture.process(key, "1", ts)
        assert dropped_records(fixture.driver) == 1
        skipped = [r.getMessage() for r in caplog.records if "expired window" in r.getMessage()]
        assert len(skipped) == 1 and "key='Late1'" in skipped[0], skipped
        for fact in ("timestamp=0 ", "window=[0,0] ", "expiration=1 ", f"streamTime={stream_time} "):
            assert fact in skipped[0], skipped[0]
        assert "Late1" not in [w.key for w, _, _ in fixture.results()]
