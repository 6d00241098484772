"""Kafka's ``KGroupedStreamImplTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
KGroupedStreamImplTest.java), translated: materialized results, session windows, queryable
names and Kafka's overloads (an option object passed positionally is taken by its type).

Java cases with no Python equivalent are skipped tests at the end of this module, each
saying why in its skip reason."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from platform_streams.dsl import (
    Consumed,
    Grouped,
    KGroupedStream,
    Materialized,
    Named,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    Windowed,
)
from platform_streams.serde import Integer, Long, String
from platform_streams.state.timestamped import ValueAndTimestamp
from platform_streams.state.windowed import SessionWindow, TimeWindow
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    INVALID_STORE_NAME,
    JAVA_OPTIONAL_NULL,
    MockApiProcessorSupplier,
    cases_without_python_equivalent,
    dropped_records,
    refuses_invalid_name,
    refuses_null_argument,
)

S = String()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def _grouped() -> tuple[StreamsBuilder, KGroupedStream]:
    builder = StreamsBuilder()
    grouped = builder.stream("topic", Consumed(key_serde=S, value_serde=S)).group_by_key(
        Grouped(key_serde=S, value_serde=S)
    )
    return builder, grouped


def _last_value_and_timestamp_per_key(supplier: MockApiProcessorSupplier) -> dict[Any, tuple[Any, int]]:
    (processor,) = supplier.captured_processors(1)
    return {key: (value, ts) for key, value, ts in processor.processed}


def _pipe(builder: StreamsBuilder, records: list[tuple[str, str | None, int]]) -> TopologyTestDriver:
    driver = TopologyTestDriver(builder.build(), CONFIG)
    topic = driver.create_input_topic("topic", S, S)
    for key, value, ts in records:
        topic.pipe_input(key, value, ts)
    return driver


SESSION_INPUT = [
    ("1", "1", 10),
    ("2", "2", 15),
    ("1", "1", 30),
    ("1", "1", 70),
    ("1", "1", 100),
    ("1", "1", 90),
]


def _check_session_counts(builder: StreamsBuilder, table: Any, supplier: MockApiProcessorSupplier) -> None:
    """doCountSessionWindows / doAggregateSessionWindows: SESSION_INPUT counted per session."""
    table.to_stream().process(supplier)
    _pipe(builder, SESSION_INPUT).close()
    result = _last_value_and_timestamp_per_key(supplier)
    assert result[Windowed("1", SessionWindow(10, 30))] == (2, 30)
    assert result[Windowed("2", SessionWindow(15, 15))] == (1, 15)
    assert result[Windowed("1", SessionWindow(70, 100))] == (3, 100)


@pytest.mark.parametrize("store", ["session-store", None], ids=["named", "internal_store_name"])
def test_should_count_session_windows(store: str | None) -> None:
    """KGroupedStreamImplTest.shouldCountSessionWindows / shouldCountSessionWindowsWithInternalStoreName"""
    builder, grouped = _grouped()
    supplier = MockApiProcessorSupplier()
    windowed = grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(30))
    table = windowed.count(Materialized.as_(store)) if store else windowed.count()
    _check_session_counts(builder, table, supplier)
    assert table.queryable_store_name() == store


@pytest.mark.parametrize("store", ["session-store", None], ids=["named", "internal_store_name"])
def test_should_reduce_session_windows(store: str | None) -> None:
    """KGroupedStreamImplTest.shouldReduceSessionWindows / shouldReduceSessionWindowsWithInternalStoreName"""
    builder, grouped = _grouped()
    supplier = MockApiProcessorSupplier()
    windowed = grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(30))
    reducer = lambda v1, v2: f"{v1}:{v2}"  # noqa: E731
    table = windowed.reduce(reducer, Materialized.as_(store)) if store else windowed.reduce(reducer)
    table.to_stream().process(supplier)
    _pipe(
        builder,
        [("1", "A", 10), ("2", "Z", 15), ("1", "B", 30), ("1", "A", 70), ("1", "B", 100), ("1", "C", 90)],
    ).close()
    result = _last_value_and_timestamp_per_key(supplier)
    assert result[Windowed("1", SessionWindow(10, 30))] == ("A:B", 30)
    assert result[Windowed("2", SessionWindow(15, 15))] == ("Z", 15)
    assert result[Windowed("1", SessionWindow(70, 100))] == ("A:B:C", 100)
    assert table.queryable_store_name() == store


@pytest.mark.parametrize("store", ["session-store", None], ids=["named", "internal_store_name"])
def test_should_aggregate_session_windows(store: str | None) -> None:
    """KGroupedStreamImplTest.shouldAggregateSessionWindows /
    shouldAggregateSessionWindowsWithInternalStoreName
    (with doAggregateSessionWindows): count by aggregate, sessions merged by adding."""
    builder, grouped = _grouped()
    supplier = MockApiProcessorSupplier()
    windowed = grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(30))
    materialized = (Materialized.as_(store) if store else Materialized()).with_value_serde(Integer())
    table = windowed.aggregate(
        lambda: 0,
        lambda key, value, aggregate: aggregate + 1,
        lambda key, one, two: one + two,
        materialized=materialized,
    )
    _check_session_counts(builder, table, supplier)
    if store:
        assert table.queryable_store_name() == store


def _count_windowed(windows: Any, store: str | None, records: list[tuple[str, str | None, int]]) -> list[Any]:
    """``groupedStream.windowedBy(windows).count([Materialized.as(store)]).toStream().process(...)``
    over ``records``: what the processor saw."""
    builder, grouped = _grouped()
    supplier = MockApiProcessorSupplier()
    windowed = grouped.windowed_by(windows)
    (windowed.count(Materialized.as_(store)) if store else windowed.count()).to_stream().process(supplier)
    _pipe(builder, records).close()
    (processor,) = supplier.captured_processors(1)
    return processor.processed


@pytest.mark.parametrize("store", ["aggregate-by-key-windowed", None], ids=["named", "internal_store_name"])
def test_should_count_windowed(store: str | None) -> None:
    """KGroupedStreamImplTest.shouldCountWindowed / shouldCountWindowedWithInternalStoreName
    (with doCountWindowed): 500 ms windows, 100 ms grace; "3"@100 still counts after stream time 500."""
    records = [("1", "A", 0), ("1", "A", 499), ("1", "A", 100), ("2", "B", 0), ("2", "B", 100)]
    records += [("2", "B", 200), ("3", "C", 1), ("1", "A", 500), ("1", "A", 500), ("2", "B", 500)]
    records += [("2", "B", 500), ("3", "B", 100)]
    processed = _count_windowed(TimeWindows.of_size_and_grace(500, 100), store, records)

    def w(key: str, start: int) -> Windowed:
        return Windowed(key, TimeWindow(start, start + 500))

    assert processed == [
        (w("1", 0), 1, 0),
        (w("1", 0), 2, 499),
        (w("1", 0), 3, 499),
        (w("2", 0), 1, 0),
        (w("2", 0), 2, 100),
        (w("2", 0), 3, 200),
        (w("3", 0), 1, 1),
        (w("1", 500), 1, 500),
        (w("1", 500), 2, 500),
        (w("2", 500), 1, 500),
        (w("2", 500), 2, 500),
        (w("3", 0), 2, 100),
    ]


#: KGroupedStreamImplTest.doCountSlidingWindows: (key, window start, count, timestamp), sorted
#: by key and window start as the Java test sorts them (500 ms windows: end = start + 500)
SLIDING_COUNTS = [
    ("1", 0, 1, 500),
    ("1", 100, 2, 600),
    ("1", 499, 2, 999),
    ("1", 499, 3, 999),
    ("1", 500, 4, 1000),
    ("1", 500, 5, 1000),
    ("1", 501, 1, 999),
    ("1", 501, 2, 999),
    ("1", 501, 3, 1000),
    ("1", 501, 4, 1000),
    ("1", 601, 1, 999),
    ("1", 601, 2, 1000),
    ("1", 601, 3, 1000),
    ("1", 1000, 1, 1000),
    ("1", 1000, 2, 1000),
    ("2", 0, 1, 500),
    ("2", 100, 2, 600),
    ("2", 200, 3, 700),
    ("2", 500, 4, 1000),
    ("2", 500, 5, 1000),
    ("2", 501, 1, 600),
    ("2", 501, 2, 700),
    ("2", 501, 3, 1000),
    ("2", 501, 4, 1000),
    ("2", 601, 1, 700),
    ("2", 601, 2, 1000),
    ("2", 601, 3, 1000),
    ("2", 701, 1, 1000),
    ("2", 701, 2, 1000),
    ("3", 1, 1, 501),
    ("3", 100, 2, 600),
    ("3", 502, 1, 600),
]


@pytest.mark.parametrize("store", ["aggregate-by-key-windowed", None], ids=["named", "internal_store_name"])
def test_should_count_sliding_windows(store: str | None) -> None:
    """KGroupedStreamImplTest.shouldCountSlidingWindows / shouldCountSlidingWindowsWithInternalStoreName
    (with doCountSlidingWindows): 500 ms time difference, 2000 ms grace."""
    records = [("1", "A", 500), ("1", "A", 999), ("1", "A", 600), ("2", "B", 500), ("2", "B", 600)]
    records += [("2", "B", 700), ("3", "C", 501), ("1", "A", 1000), ("1", "A", 1000), ("2", "B", 1000)]
    records += [("2", "B", 1000), ("3", "C", 600)]
    processed = _count_windowed(SlidingWindows.of_time_difference_and_grace(500, 2000), store, records)
    # a stable sort by (key, window start), as Java's List.sort with its comparator
    actual = sorted(processed, key=lambda r: (r[0].key, r[0].window.start()))
    assert actual == [
        (Windowed(k, TimeWindow(start, start + 500)), count, ts) for k, start, count, ts in SLIDING_COUNTS
    ]


PROCESS_DATA = [
    ("1", "A", 5),
    ("2", "B", 1),
    ("1", "C", 3),
    ("1", "D", 10),
    ("3", "E", 8),
    ("3", "F", 9),
    ("3", None, 9),
]


def _check_store(driver: TopologyTestDriver, name: str, expected: dict[str, tuple[Any, int]]) -> None:
    store = driver.get_key_value_store(name)
    for key, (value, ts) in expected.items():
        assert store.get(key) == value
        assert store.get_timestamped(key) == ValueAndTimestamp(value, ts)


def test_should_count_and_materialize_results() -> None:
    """KGroupedStreamImplTest.shouldCountAndMaterializeResults: ``count(Materialized)`` positionally"""
    builder, grouped = _grouped()
    grouped.count(Materialized.as_("count").with_key_serde(S))
    with _pipe(builder, PROCESS_DATA) as driver:
        _check_store(driver, "count", {"1": (3, 10), "2": (1, 1), "3": (2, 9)})


def test_should_reduce_and_materialize_results() -> None:
    """KGroupedStreamImplTest.shouldReduceAndMaterializeResults: ``reduce(reducer, Materialized)``"""
    builder, grouped = _grouped()
    grouped.reduce(
        lambda v1, v2: f"{v1}+{v2}", Materialized.as_("reduce").with_key_serde(S).with_value_serde(S)
    )
    with _pipe(builder, PROCESS_DATA) as driver:
        _check_store(driver, "reduce", {"1": ("A+C+D", 10), "2": ("B", 1), "3": ("E+F", 9)})


@pytest.mark.parametrize("java_test", [f"shouldLogAndMeasureSkipsIn{op}" for op in ("Aggregate", "Reduce")])
def test_should_log_and_measure_skips(java_test: str, caplog: pytest.LogCaptureFixture) -> None:
    """KGroupedStreamImplTest.<java_test>: the record with a null value (offset 6) is skipped:
    counted in dropped-records (Kafka's older tests: skipped-records-total 1) and Kafka's
    warning is logged; the store holds the other records only."""
    builder, grouped = _grouped()
    if java_test.endswith("Aggregate"):
        grouped.count(Materialized.as_("count").with_key_serde(S))
        store, expected = "count", {"1": (3, 10), "2": (1, 1), "3": (2, 9)}
    else:
        grouped.reduce(
            lambda v1, v2: f"{v1}+{v2}", Materialized.as_("reduce").with_key_serde(S).with_value_serde(S)
        )
        store, expected = "reduce", {"1": ("A+C+D", 10), "2": ("B", 1), "3": ("E+F", 9)}
    with caplog.at_level(logging.WARNING), _pipe(builder, PROCESS_DATA) as driver:
        assert dropped_records(driver) == 1
        kafka_text = "Skipping record due to null key or value. topic=[topic] partition=[0] offset=[6]"
        assert kafka_text in caplog.messages
        _check_store(driver, store, expected)


def test_should_aggregate_and_materialize_results() -> None:
    """KGroupedStreamImplTest.shouldAggregateAndMaterializeResults: ``aggregate(init, agg, Materialized)``"""
    builder, grouped = _grouped()
    grouped.aggregate(
        lambda: "0",
        lambda k, v, agg: f"{agg}+{v}",
        Materialized.as_("aggregate").with_key_serde(S).with_value_serde(S),
    )
    with _pipe(builder, PROCESS_DATA) as driver:
        _check_store(driver, "aggregate", {"1": ("0+A+C+D", 10), "2": ("0+B", 1), "3": ("0+E+F", 9)})


def test_should_aggregate_with_default_serdes() -> None:
    """KGroupedStreamImplTest.shouldAggregateWithDefaultSerdes"""
    builder, grouped = _grouped()
    supplier = MockApiProcessorSupplier()
    grouped.aggregate(lambda: "0", lambda k, v, agg: f"{agg}+{v}").to_stream().process(supplier)
    _pipe(builder, PROCESS_DATA).close()
    result = _last_value_and_timestamp_per_key(supplier)
    assert result["1"] == ("0+A+C+D", 10)
    assert result["2"] == ("0+B", 1)
    assert result["3"] == ("0+E+F", 9)


def test_options_are_taken_by_type_and_anything_else_names_the_parameter() -> None:
    """Kafka's overloads: ``count(Named)`` names the processor, ``count(Materialized)`` the store."""
    builder, grouped = _grouped()
    assert grouped.count(Named.as_("counter")).queryable_store_name() is None
    assert "counter" in builder.build().nodes
    with pytest.raises(TypeError, match="'named'"):
        grouped.count(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'materialized'"):
        grouped.count(None, Long())  # type: ignore[arg-type]


def _java_setup() -> KGroupedStream:
    """The Java setup's ``groupedStream``."""
    return _grouped()[1]


def _string_init() -> str:
    return "0"


def _tostring_adder(key: Any, value: Any, aggregate: Any) -> str:
    return f"{aggregate}+{value}"


def _merger(key: Any, agg1: Any, agg2: Any) -> Any:
    return None


def test_should_accept_null_store_name_when_aggregating_session_windows() -> None:
    """KGroupedStreamImplTest.shouldAcceptNullStoreNameWhenAggregatingSessionWindows:
    ``Materialized.with(serdes)`` (no store name) is accepted (a generated store name)."""
    windowed = _java_setup().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
    windowed.aggregate(_string_init, _tostring_adder, _merger, Materialized(key_serde=S, value_serde=S))


#: Java test -> the call Java refuses with a NullPointerException (``s`` is the setup's object)
NULL_ARGUMENTS: dict[str, Any] = {
    "shouldNotHaveNullAggregatorOnCogroup": lambda s: s.cogroup(None),
    "shouldNotHaveNullReducerOnReduce": lambda s: s.reduce(None),
    "shouldNotHaveNullReducerWithWindowedReduce": lambda s: s.windowed_by(
        TimeWindows.of_size_with_no_grace(10)
    ).reduce(None, Materialized.as_("store")),
    "shouldNotHaveNullWindowsWithWindowedReduce": lambda s: s.windowed_by(None),
    "shouldNotHaveNullInitializerOnAggregate": lambda s: s.aggregate(
        None, _tostring_adder, Materialized.as_("store")
    ),
    "shouldNotHaveNullAdderOnAggregate": lambda s: s.aggregate(_string_init, None, Materialized.as_("store")),
    "shouldNotHaveNullInitializerOnWindowedAggregate": lambda s: s.windowed_by(
        TimeWindows.of_size_with_no_grace(10)
    ).aggregate(None, _tostring_adder, Materialized.as_("store")),
    "shouldNotHaveNullAdderOnWindowedAggregate": lambda s: s.windowed_by(
        TimeWindows.of_size_with_no_grace(10)
    ).aggregate(_string_init, None, Materialized.as_("store")),
    "shouldNotHaveNullWindowsOnWindowedAggregate": lambda s: s.windowed_by(None),
    "shouldNotHaveNullReducerWithSlidingWindowedReduce": lambda s: s.windowed_by(
        SlidingWindows.of_time_difference_and_grace(10, 100)
    ).reduce(None, Materialized.as_("store")),
    "shouldNotHaveNullWindowsWithSlidingWindowedReduce": lambda s: s.windowed_by(None),
    "shouldNotHaveNullInitializerOnSlidingWindowedAggregate": lambda s: s.windowed_by(
        SlidingWindows.of_time_difference_and_grace(10, 100)
    ).aggregate(None, _tostring_adder, Materialized.as_("store")),
    "shouldNotHaveNullAdderOnSlidingWindowedAggregate": lambda s: s.windowed_by(
        SlidingWindows.of_time_difference_and_grace(10, 100)
    ).aggregate(_string_init, None, Materialized.as_("store")),
    "shouldNotAcceptNullReducerWhenReducingSessionWindows": lambda s: s.windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(30)
    ).reduce(None, Materialized.as_("store")),
    "shouldNotAcceptNullSessionWindowsReducingSessionWindows": lambda s: s.windowed_by(None),
    "shouldNotAcceptNullStateStoreSupplierWhenReducingSessionWindows": lambda s: s.windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(30)
    ).reduce(None, Materialized()),
    "shouldNotAcceptNullInitializerWhenAggregatingSessionWindows": lambda s: s.windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(30)
    ).aggregate(None, _tostring_adder, _merger, Materialized.as_("store")),
    "shouldNotAcceptNullAggregatorWhenAggregatingSessionWindows": lambda s: s.windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(30)
    ).aggregate(_string_init, None, _merger, Materialized.as_("store")),
    "shouldNotAcceptNullSessionMergerWhenAggregatingSessionWindows": lambda s: s.windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(30)
    ).aggregate(_string_init, _tostring_adder, None, Materialized.as_("store")),
    "shouldNotAcceptNullSessionWindowsWhenAggregatingSessionWindows": lambda s: s.windowed_by(None),
}


@pytest.mark.parametrize("java_test", list(NULL_ARGUMENTS))
def test_null_argument_is_refused(java_test: str) -> None:
    """KGroupedStreamImplTest.<java_test>: a null function (or windows) is refused when the
    topology is built."""
    refuses_null_argument(lambda: NULL_ARGUMENTS[java_test](_java_setup()))


#: Java test -> its call with ``Materialized.as(INVALID_STORE_NAME)``
INVALID_STORE_NAMES: dict[str, Any] = {
    "shouldNotHaveInvalidStoreNameOnReduce": lambda s: s.reduce(
        lambda a, v: a + v, Materialized.as_(INVALID_STORE_NAME)
    ),
    "shouldNotHaveInvalidStoreNameWithWindowedReduce": lambda s: s.windowed_by(
        TimeWindows.of_size_with_no_grace(10)
    ).reduce(lambda a, v: a + v, Materialized.as_(INVALID_STORE_NAME)),
    "shouldNotHaveInvalidStoreNameOnAggregate": lambda s: s.aggregate(
        _string_init, _tostring_adder, Materialized.as_(INVALID_STORE_NAME)
    ),
    "shouldNotHaveInvalidStoreNameOnWindowedAggregate": lambda s: s.windowed_by(
        TimeWindows.of_size_with_no_grace(10)
    ).aggregate(_string_init, _tostring_adder, Materialized.as_(INVALID_STORE_NAME)),
    "shouldNotHaveInvalidStoreNameWithSlidingWindowedReduce": lambda s: s.windowed_by(
        SlidingWindows.of_time_difference_and_grace(10, 100)
    ).reduce(lambda a, v: a + v, Materialized.as_(INVALID_STORE_NAME)),
    "shouldNotHaveInvalidStoreNameOnSlidingWindowedAggregate": lambda s: s.windowed_by(
        SlidingWindows.of_time_difference_and_grace(10, 100)
    ).aggregate(_string_init, _tostring_adder, Materialized.as_(INVALID_STORE_NAME)),
    "shouldNotAcceptInvalidStoreNameWhenReducingSessionWindows": lambda s: s.windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(30)
    ).reduce(lambda a, v: a + v, Materialized.as_(INVALID_STORE_NAME)),
    "shouldNotAcceptInvalidStoreNameWhenAggregatingSessionWindows": lambda s: s.windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(30)
    ).aggregate(_string_init, _tostring_adder, _merger, Materialized.as_(INVALID_STORE_NAME)),
}


@pytest.mark.parametrize("java_test", list(INVALID_STORE_NAMES))
def test_invalid_store_name_is_refused(java_test: str) -> None:
    """KGroupedStreamImplTest.<java_test>"""
    refuses_invalid_name(lambda: INVALID_STORE_NAMES[java_test](_java_setup()))


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "KGroupedStreamImplTest",
    {
        "shouldThrowNullPointerOnReduceWhenMaterializedIsNull": JAVA_OPTIONAL_NULL,
        "shouldThrowNullPointerOnAggregateWhenMaterializedIsNull": JAVA_OPTIONAL_NULL,
        "shouldThrowNullPointerOnCountWhenMaterializedIsNull": JAVA_OPTIONAL_NULL,
    },
)
