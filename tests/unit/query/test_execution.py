"""Typed queries answered by real stores (built and filled through the TopologyTestDriver)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from platform_streams.dsl import Consumed, Materialized, StreamsBuilder
from platform_streams.dsl.windows import SessionWindows, TimeWindows
from platform_streams.query import (
    FailureReason,
    KeyQuery,
    Query,
    RangeQuery,
    StateQueryResult,
    WindowKeyQuery,
    WindowRangeQuery,
)
from platform_streams.query.execution import execute_query
from platform_streams.query.results import QueryResult
from platform_streams.serde import String
from platform_streams.state.windowed import TimeWindow, Windowed
from platform_streams.testing import TopologyTestDriver

S = String()


@pytest.fixture
def driver() -> Iterator[TopologyTestDriver]:
    builder = StreamsBuilder()
    grouped = builder.stream("in", Consumed(key_serde=S, value_serde=S)).group_by_key()
    grouped.count(materialized=Materialized.as_("counts"))
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(100)).count(
        materialized=Materialized.as_("windows").with_retention(10_000)
    )
    grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(50)).count(
        materialized=Materialized.as_("sessions").with_retention(10_000)
    )
    with TopologyTestDriver(builder.build()) as test_driver:
        topic = test_driver.create_input_topic("in", S, S)
        for key, ts in [("a", 10), ("a", 20), ("b", 30), ("ab", 40), ("c", 150), ("a", 160)]:
            topic.pipe_input(key, "v", ts)
        yield test_driver


def test_key_query(driver: TopologyTestDriver) -> None:
    store = driver.get_state_store("counts")
    assert execute_query(store, KeyQuery.with_key("a")).get_result() == 3
    assert execute_query(store, KeyQuery.with_key("zzz")).get_result() is None


def test_range_queries_bounded_unbounded_prefix_descending(driver: TopologyTestDriver) -> None:
    store = driver.get_state_store("counts")
    assert execute_query(store, RangeQuery.with_no_bounds()).get_result() == [
        ("a", 3), ("ab", 1), ("b", 1), ("c", 1)
    ]  # fmt: skip
    assert execute_query(store, RangeQuery.with_range("ab", "b")).get_result() == [("ab", 1), ("b", 1)]
    assert execute_query(store, RangeQuery.with_lower_bound("b")).get_result() == [("b", 1), ("c", 1)]
    assert execute_query(store, RangeQuery.with_upper_bound("a")).get_result() == [("a", 3)]
    assert execute_query(store, RangeQuery.with_prefix("a")).get_result() == [("a", 3), ("ab", 1)]
    descending = RangeQuery.with_prefix("a").with_descending_keys()
    assert execute_query(store, descending).get_result() == [("ab", 1), ("a", 3)]
    assert execute_query(store, RangeQuery.with_no_bounds().with_descending_keys()).get_result()[0] == (
        "c",
        1,
    )
    assert execute_query(store, RangeQuery.with_no_bounds(), limit=2).get_result() == [("a", 3), ("ab", 1)]


def test_window_queries(driver: TopologyTestDriver) -> None:
    store = driver.get_state_store("windows")
    assert execute_query(
        store, WindowKeyQuery.with_key_and_window_start_range("a", 0, 1000)
    ).get_result() == [
        (0, 2),
        (100, 1),
    ]
    assert execute_query(
        store, WindowKeyQuery.with_key_and_window_start_range("a", 50, 1000)
    ).get_result() == [(100, 1)]
    by_key = execute_query(store, WindowRangeQuery.with_key("a")).get_result()
    assert by_key == [(Windowed("a", TimeWindow(0, 100)), 2), (Windowed("a", TimeWindow(100, 200)), 1)]
    in_range = execute_query(store, WindowRangeQuery.with_window_start_range(100, 100)).get_result()
    assert sorted((w.key, v) for w, v in in_range) == [("a", 1), ("c", 1)]


def test_session_store_answers_window_range_by_key_only(driver: TopologyTestDriver) -> None:
    store = driver.get_state_store("sessions")
    sessions = execute_query(store, WindowRangeQuery.with_key("a")).get_result()
    assert [(w.window.start_ms, w.window.end_ms, v) for w, v in sessions] == [(10, 20, 2), (160, 160, 1)]
    failed = execute_query(store, KeyQuery.with_key("a"))
    assert failed.failure_reason is FailureReason.UNKNOWN_QUERY_TYPE


def test_unknown_query_type_and_store_exception(driver: TopologyTestDriver) -> None:
    class Custom(Query):
        pass

    store = driver.get_state_store("counts")
    assert execute_query(store, Custom()).failure_reason is FailureReason.UNKNOWN_QUERY_TYPE
    assert execute_query(store, WindowKeyQuery("a", 0, 1)).failure_reason is FailureReason.UNKNOWN_QUERY_TYPE
    broken = execute_query(store, KeyQuery(None))  # a None key cannot be serialized
    assert broken.failure_reason is FailureReason.STORE_EXCEPTION and "counts" in broken.failure_message
    with pytest.raises(ValueError):
        broken.get_result()


def test_state_query_result_helpers() -> None:
    result = StateQueryResult()
    result.add_result(0, QueryResult.for_result(None))
    result.add_result(1, QueryResult.for_result(5))
    result.add_result(2, QueryResult.for_failure(FailureReason.NOT_PRESENT, "elsewhere"))
    only = result.get_only_partition_result()
    assert only is not None and only.get_result() == 5
    result.add_result(3, QueryResult.for_result(6))
    with pytest.raises(ValueError):
        result.get_only_partition_result()
    with pytest.raises(ValueError):
        KeyQuery.with_key(None)
