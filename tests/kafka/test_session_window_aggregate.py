"""Kafka's ``KStreamSessionWindowAggregateProcessorTest`` (streams/src/test/java/org/apache/kafka/
streams/kstream/internals/KStreamSessionWindowAggregateProcessorTest.java), the store-level cases
translated to a session-windowed count run by the TopologyTestDriver (the Java test drives the
processor with a mock context; the forwarded-``Change`` assertions, which depend on that mock's
flushing, and the log/metric cases are not translated).

Plus the issue's example of Kafka's segmented session stores: a record can merge with a session
that ended before the retention bound, because the session lives until its segment expires.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from platform_streams.dsl import Consumed, Materialized, SessionWindows, StreamsBuilder, Windowed
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.state.windowed import SessionWindow
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import JAVA_LOG_TEXT, cases_without_python_equivalent

S = String()
GAP_MS = 5 * 60 * 1000
STORE_NAME = "session-store"


class Fixture:
    def __init__(self, windows: SessionWindows, materialized: Materialized) -> None:
        builder = StreamsBuilder()
        builder.stream("in", Consumed(key_serde=S, value_serde=S)).group_by_key().windowed_by(windows).count(
            materialized
        )
        self.driver = TopologyTestDriver(builder.build(), {"default_key_serde": "string"})
        self.topic = self.driver.create_input_topic("in", S, S)

    def process(self, key: str, value: str, ts: int) -> None:
        self.topic.pipe_input(key, value, ts)

    def find_sessions(self, key: str, earliest_end: int, latest_start: int) -> list[tuple[Any, Any]]:
        return list(self.driver.get_session_store(STORE_NAME).find_sessions(key, earliest_end, latest_start))


@pytest.fixture
def fx() -> Iterator[Fixture]:
    """``setup``: a gap of 5 minutes, no grace, a persistent store kept 3 gaps, caching on."""
    supplier = Stores.persistent_session_store(STORE_NAME, GAP_MS * 3)
    fixture = Fixture(
        SessionWindows.of_inactivity_gap_with_no_grace(GAP_MS),
        Materialized(store_supplier=supplier).with_logging_disabled(),
    )
    yield fixture
    fixture.driver.close()


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


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "KStreamSessionWindowAggregateProcessorTest",
    {
        "shouldLogAndMeterWhenSkippingNullKeyWithBuiltInMetrics": JAVA_LOG_TEXT,
        "shouldLogAndMeterWhenSkippingLateRecordWithZeroGrace": JAVA_LOG_TEXT,
        "shouldLogAndMeterWhenSkippingLateRecordWithNonzeroGrace": JAVA_LOG_TEXT,
    },
)
