"""Kafka's ``UnlimitedWindowsTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/
UnlimitedWindowsTest.java) and ``KStreamAggregationIntegrationTest.shouldCountUnlimitedWindows``
(streams/integration-tests/.../integration/KStreamAggregationIntegrationTest.java), translated.

The integration test runs here through the TopologyTestDriver (same records, same timestamps)
with the default persistent (RocksDB) window store and with an in-memory one. Kafka's
``UnlimitedWindow(start)`` is ``TimeWindow(start, MAX_TIME_MS)``. ``shouldThrowOnUntil``
(a deprecated Java method) has no Python counterpart.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from platform_streams.dsl import Consumed, Grouped, Materialized, StreamsBuilder, UnlimitedWindows, Windowed
from platform_streams.dsl.windows import MAX_TIME_MS
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.state.windowed import TimeWindow
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import MockApiProcessorSupplier, cases_without_python_equivalent

S = String()
ANY_START_TIME = 10


def test_should_set_window_start_time() -> None:
    """UnlimitedWindowsTest.shouldSetWindowStartTime"""
    assert UnlimitedWindows.of().start_on(ANY_START_TIME).start_ms == ANY_START_TIME
    instant = datetime.fromtimestamp(ANY_START_TIME / 1000, tz=UTC)
    assert UnlimitedWindows.of().start_on(instant).start_ms == ANY_START_TIME


def test_start_time_must_not_be_negative() -> None:
    """UnlimitedWindowsTest.startTimeMustNotBeNegative"""
    with pytest.raises(ValueError, match="window start time"):
        UnlimitedWindows.of().start_on(-1)


def test_should_include_records_that_happened_on_window_start() -> None:
    """UnlimitedWindowsTest.shouldIncludeRecordsThatHappenedOnWindowStart"""
    w = UnlimitedWindows.of().start_on(ANY_START_TIME)
    matched = w.windows_for(w.start_ms)
    assert len(matched) == 1
    assert matched[ANY_START_TIME] == TimeWindow(ANY_START_TIME, MAX_TIME_MS)


def test_should_include_records_that_happened_after_window_start() -> None:
    """UnlimitedWindowsTest.shouldIncludeRecordsThatHappenedAfterWindowStart"""
    w = UnlimitedWindows.of().start_on(ANY_START_TIME)
    matched = w.windows_for(w.start_ms + 1)
    assert len(matched) == 1
    assert matched[ANY_START_TIME] == TimeWindow(ANY_START_TIME, MAX_TIME_MS)


def test_should_exclude_records_that_happened_before_window_start() -> None:
    """UnlimitedWindowsTest.shouldExcludeRecordsThatHappenedBeforeWindowStart"""
    w = UnlimitedWindows.of().start_on(ANY_START_TIME)
    assert w.windows_for(w.start_ms - 1) == {}


def test_equals_and_hashcode_should_be_valid_for_positive_cases() -> None:
    """UnlimitedWindowsTest.equalsAndHashcodeShouldBeValidForPositiveCases"""
    assert UnlimitedWindows.of() == UnlimitedWindows.of()
    assert hash(UnlimitedWindows.of()) == hash(UnlimitedWindows.of())
    assert UnlimitedWindows.of().start_on(1) == UnlimitedWindows.of().start_on(1)
    assert hash(UnlimitedWindows.of().start_on(1)) == hash(UnlimitedWindows.of().start_on(1))


def test_equals_and_hashcode_should_be_valid_for_negative_cases() -> None:
    """UnlimitedWindowsTest.equalsAndHashcodeShouldBeValidForNegativeCases"""
    assert UnlimitedWindows.of().start_on(9) != UnlimitedWindows.of().start_on(1)


MOCK_TIME_MS = 1_700_000_000_000
T1 = MOCK_TIME_MS - 3_600_000
INCREMENT_TIME = 86_400_000
T2, T3, T4 = T1 + INCREMENT_TIME, T1 + 2 * INCREMENT_TIME, T1 + 3 * INCREMENT_TIME


def _count_unlimited(start_time: int, persistent: bool) -> dict[Windowed[str], tuple[int, int]]:
    builder = StreamsBuilder()
    materialized = (
        Materialized()
        if persistent
        else Materialized(
            store_supplier=Stores.in_memory_window_store("counts", MAX_TIME_MS, MAX_TIME_MS - start_time)
        )
    )
    supplier = MockApiProcessorSupplier()
    (
        builder.stream("user-sessions", Consumed(key_serde=S, value_serde=S))
        .group_by_key(Grouped(key_serde=S, value_serde=S))
        .windowed_by(UnlimitedWindows.of().start_on(start_time))
        .count(materialized)
        .to_stream()
        .process(supplier)
    )
    with TopologyTestDriver(builder.build(), {"statestore_cache_max_bytes": 0}) as driver:
        topic = driver.create_input_topic("user-sessions", S, S)
        for ts, records in [
            (T1, [("bob", "start"), ("penny", "start"), ("jo", "pause"), ("emily", "pause")]),
            (T2, [("emily", "resume")]),
            (T3, [("bob", "pause"), ("penny", "stop")]),
            (T4, [("bob", "resume"), ("jo", "resume")]),
        ]:
            for key, value in records:
                topic.pipe_input(key, value, ts)
    return {key: (value, ts) for key, value, ts in supplier.captured_processors(1)[0].processed}


def _window(key: str, start_time: int) -> Windowed[str]:
    return Windowed(key, TimeWindow(start_time, MAX_TIME_MS))


@pytest.mark.parametrize("persistent", [True, False], ids=["rocksdb", "in-memory"])
def test_should_count_unlimited_windows(persistent: bool) -> None:
    """KStreamAggregationIntegrationTest.shouldCountUnlimitedWindows: the window starts just
    after t1, so the t1 records are outside it."""
    start_time = MOCK_TIME_MS - 3_600_000 + 1
    results = _count_unlimited(start_time, persistent)
    assert results[_window("bob", start_time)] == (2, T4)
    assert results[_window("penny", start_time)] == (1, T3)
    assert results[_window("jo", start_time)] == (1, T4)
    assert results[_window("emily", start_time)] == (1, T2)
    assert len(results) == 4


@pytest.mark.parametrize("persistent", [True, False], ids=["rocksdb", "in-memory"])
def test_unlimited_windows_of_start_at_the_epoch_and_count_everything(persistent: bool) -> None:
    """UnlimitedWindows.of() (start 0): every record counts, in one window per key."""
    results = _count_unlimited(0, persistent)
    assert results == {
        _window("bob", 0): (3, T4),
        _window("penny", 0): (2, T3),
        _window("jo", 0): (2, T4),
        _window("emily", 0): (2, T2),
    }


UNTIL = "tests the deprecated Windows.until(), removed in Kafka 4 and never in this API"

# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "UnlimitedWindowsTest",
    {
        "shouldThrowOnUntil": UNTIL,
    },
)
