"""Kafka's ``KStreamKStreamJoinTest`` naming cases (streams/src/test/java/org/apache/kafka/streams/
kstream/internals/KStreamKStreamJoinTest.java), translated: a re-keyed stream joined twice.

Unnamed joins share one repartition topic with a generated name (Kafka's cached
``repartitionNode`` in ``KStreamImpl.repartitionForJoin``) instead of failing with "topic(s)
already read by another source"; named joins get one topic each. ``describe()`` equals Kafka's
expected text. Also ``testJoin``, ``testOuterJoin``, ``testWindowing``,
``testAsymmetricWindowingAfter/Before``, the StreamJoined logging cases and the custom store
supplier cases (checks of their names, window settings and retained duplicates).
``shouldJoinWithDslStoreSuppliers*`` are in tests/kafka/test_dsl_store_suppliers.py.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, JoinWindows, StreamJoined, StreamsBuilder
from platform_streams.errors import TopologyError
from platform_streams.serde import Integer, String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import (
    MockApiProcessorSupplier,
    dropped_records,
    expected_description,
)
from tests.kafka.test_dsl_store_suppliers import run_join

S, INT = String(), Integer()
NO_OPTIMIZATION = StreamsConfig(
    application_id="app", bootstrap_servers="x:9092", topology_optimization="none"
)


def _streams(builder: StreamsBuilder) -> tuple:  # type: ignore[type-arg]
    stream1 = builder.stream("topic", Consumed(key_serde=S, value_serde=S))
    stream2 = builder.stream("topic2", Consumed(key_serde=S, value_serde=S))
    stream3 = builder.stream("topic3", Consumed(key_serde=S, value_serde=S))
    return stream1.map(lambda k, v: (v, k)), stream2, stream3


def test_should_reuse_repartition_topic_with_generated_name() -> None:
    """KStreamKStreamJoinTest.shouldReuseRepartitionTopicWithGeneratedName"""
    builder = StreamsBuilder()
    new_stream, stream2, stream3 = _streams(builder)
    window = JoinWindows.of_time_difference_with_no_grace(100)
    new_stream.join(stream2, lambda v1, v2: v1 + v2, window).to("out-one")
    new_stream.join(stream3, lambda v1, v2: v1 + v2, window).to("out-to")
    topology = builder.build(NO_OPTIMIZATION)
    assert str(topology.describe()) == expected_description(
        "KStreamKStreamJoinTest", "shouldReuseRepartitionTopicWithGeneratedName"
    )
    # and it runs: both joins read the one repartition topic
    config = {"default_key_serde": "string", "default_value_serde": "string"}
    with TopologyTestDriver(topology, config) as driver:
        driver.create_input_topic("topic2", S, S).pipe_input("v", "two", 0)
        driver.create_input_topic("topic3", S, S).pipe_input("v", "three", 0)
        driver.create_input_topic("topic", S, S).pipe_input("k", "v", 0)
        assert driver.create_output_topic("out-one", S, S).read_key_values_to_list() == [("v", "ktwo")]
        assert driver.create_output_topic("out-to", S, S).read_key_values_to_list() == [("v", "kthree")]


def test_should_create_repartition_topics_with_user_provided_name() -> None:
    """KStreamKStreamJoinTest.shouldCreateRepartitionTopicsWithUserProvidedName"""
    builder = StreamsBuilder()
    new_stream, stream2, stream3 = _streams(builder)
    window = JoinWindows.of_time_difference_with_no_grace(100)
    joined = StreamJoined(key_serde=S, value_serde=S, other_value_serde=S)
    new_stream.join(stream2, lambda v1, v2: v1 + v2, window, joined.with_name("first-join")).to("out-one")
    new_stream.join(stream3, lambda v1, v2: v1 + v2, window, joined.with_name("second-join")).to("out-two")
    assert str(builder.build(NO_OPTIMIZATION).describe()) == expected_description(
        "KStreamKStreamJoinTest", "shouldCreateRepartitionTopicsWithUserProvidedName"
    )


def _pipe(topic: Any, keys: range, prefix: str) -> None:
    for key in keys:
        topic.pipe_input(key, f"{prefix}{key}")


#: KStreamKStreamJoinTest.testJoin / testOuterJoin: (input topic, keys, value prefix) -> output
#: (``MockValueJoiner.TOSTRING_JOINER``: "left+right"); every record at time 0
JOIN_STEPS: list[tuple[int, range, str, list[tuple[int, str]]]] = [
    (1, range(2), "A", []),
    (2, range(2), "a", [(0, "A0+a0"), (1, "A1+a1")]),
    (1, range(4), "B", [(0, "B0+a0"), (1, "B1+a1")]),
    (2, range(4), "b", [(0, "A0+b0"), (0, "B0+b0"), (1, "A1+b1"), (1, "B1+b1"), (2, "B2+b2"), (3, "B3+b3")]),
    (1, range(4), "C", [(0, "C0+a0"), (0, "C0+b0"), (1, "C1+a1"), (1, "C1+b1"), (2, "C2+b2"), (3, "C3+b3")]),
    (2, range(2), "c", [(0, "A0+c0"), (0, "B0+c0"), (0, "C0+c0"), (1, "A1+c1"), (1, "B1+c1"), (1, "C1+c1")]),
]


@pytest.mark.parametrize(
    ("java_test", "kind", "windows"),
    [
        ("testJoin", "join", JoinWindows.of_time_difference_with_no_grace(100)),
        # 24 h grace: no non-joined record is emitted before the window closes
        ("testOuterJoin", "outer_join", JoinWindows.of_time_difference_and_grace(100, 24 * 3600 * 1000)),
    ],
    ids=["testJoin", "testOuterJoin"],
)
def test_join(java_test: str, kind: str, windows: JoinWindows) -> None:
    """KStreamKStreamJoinTest.<java_test>: both topics in one co-partition group; each record
    joins every record of the other side's window with its key."""
    builder = StreamsBuilder()
    consumed = Consumed(key_serde=INT, value_serde=S)
    stream1, stream2 = builder.stream("topic1", consumed), builder.stream("topic2", consumed)
    joined = getattr(stream1, kind)(
        stream2,
        lambda v1, v2: f"{v1}+{v2}",
        windows,
        StreamJoined(key_serde=INT, value_serde=S, other_value_serde=S),
    )
    supplier = MockApiProcessorSupplier()
    joined.process(supplier)
    topology = builder.build()
    assert list(topology.copartition_groups) == [frozenset({"topic1", "topic2"})]
    with TopologyTestDriver(topology, {}) as driver:
        topics = {n: driver.create_input_topic(f"topic{n}", INT, S, start_timestamp_ms=0) for n in (1, 2)}
        processor = supplier.captured_processors(1)[0]
        for topic, keys, prefix, expected in JOIN_STEPS:
            _pipe(topics[topic], keys, prefix)
            processor.check_and_clear_process_result(*[(k, v, 0) for k, v in expected])


#: KStreamKStreamJoinTest.testAsymmetricWindowingAfter / Before: the other stream's records
#: (all four keys, one letter per step) at a time -> the keys of stream1's A0..A3 (at 1000..1003)
#: they join; the joined record carries the larger of the two timestamps
ASYMMETRIC_STEPS = {
    "testAsymmetricWindowingAfter": [
        (999, []),
        (1000, [0]),
        (1001, [0, 1]),
        (1002, [0, 1, 2]),
        (1003, [0, 1, 2, 3]),
        (1100, [0, 1, 2, 3]),
        (1101, [1, 2, 3]),
        (1102, [2, 3]),
        (1103, [3]),
        (1104, []),
    ],
    "testAsymmetricWindowingBefore": [
        (899, []),
        (900, [0]),
        (901, [0, 1]),
        (902, [0, 1, 2]),
        (903, [0, 1, 2, 3]),
        (1000, [0, 1, 2, 3]),
        (1001, [1, 2, 3]),
        (1002, [2, 3]),
        (1003, [3]),
        (1004, []),
    ],
}


@pytest.mark.parametrize(
    ("java_test", "windows"),
    [
        ("testAsymmetricWindowingAfter", JoinWindows.of_time_difference_with_no_grace(0).after(100)),
        ("testAsymmetricWindowingBefore", JoinWindows.of_time_difference_with_no_grace(0).before(100)),
    ],
    ids=["testAsymmetricWindowingAfter", "testAsymmetricWindowingBefore"],
)
def test_asymmetric_windowing(java_test: str, windows: JoinWindows) -> None:
    """KStreamKStreamJoinTest.<java_test>: a window that reaches only after (or before) the
    stream1 record joins the other stream's records of that side only."""
    builder = StreamsBuilder()
    consumed = Consumed(key_serde=INT, value_serde=S)
    stream1, stream2 = builder.stream("topic1", consumed), builder.stream("topic2", consumed)
    joined = StreamJoined(key_serde=INT, value_serde=S, other_value_serde=S)
    supplier = MockApiProcessorSupplier()
    stream1.join(stream2, lambda v1, v2: f"{v1}+{v2}", windows, joined).process(supplier)
    with TopologyTestDriver(builder.build(), {}) as driver:
        topic1 = driver.create_input_topic("topic1", INT, S, start_timestamp_ms=0)
        topic2 = driver.create_input_topic("topic2", INT, S, start_timestamp_ms=0)
        processor = supplier.captured_processors(1)[0]
        for key in range(4):
            topic1.pipe_input(key, f"A{key}", 1000 + key)
        processor.check_and_clear_process_result()
        for letter, (time, keys) in zip("abcdefghij", ASYMMETRIC_STEPS[java_test], strict=True):
            for key in range(4):
                topic2.pipe_input(key, f"{letter}{key}", time)
            processor.check_and_clear_process_result(
                *[(k, f"A{k}+{letter}{k}", max(time, 1000 + k)) for k in keys]
            )


#: KStreamKStreamJoinTest.testWindowing: (input topic, value prefix, how many keys, time, whether
#: key i is piped at time + i, the joined (key, value, timestamp) results); the window is
#: 100 ms either side with no grace, and a result carries the larger of the two timestamps
WINDOWING_STEPS: list[tuple[int, str, int, int, bool, list[tuple[int, str, int]]]] = [
    (1, "A", 2, 0, False, []),
    (2, "a", 2, 0, False, [(0, "A0+a0", 0), (1, "A1+a1", 0)]),
    (1, "B", 4, 1000, True, []),
    (2, "b", 4, 1100, False, [(k, f"B{k}+b{k}", 1100) for k in range(4)]),
    (2, "c", 4, 1101, False, [(k, f"B{k}+c{k}", 1101) for k in (1, 2, 3)]),
    (2, "d", 4, 1102, False, [(k, f"B{k}+d{k}", 1102) for k in (2, 3)]),
    (2, "e", 4, 1103, False, [(3, "B3+e3", 1103)]),
    (2, "f", 4, 1104, False, []),
    (2, "g", 4, 899, False, []),
    (2, "h", 4, 900, False, [(0, "B0+h0", 1000)]),
    (2, "i", 4, 901, False, [(k, f"B{k}+i{k}", 1000 + k) for k in (0, 1)]),
    (2, "j", 4, 902, False, [(k, f"B{k}+j{k}", 1000 + k) for k in (0, 1, 2)]),
    (2, "k", 4, 903, False, [(k, f"B{k}+k{k}", 1000 + k) for k in range(4)]),
    (2, "l", 4, 2000, True, []),
    (1, "C", 4, 2100, False, [(k, f"C{k}+l{k}", 2100) for k in range(4)]),
    (1, "D", 4, 2101, False, [(k, f"D{k}+l{k}", 2101) for k in (1, 2, 3)]),
    (1, "E", 4, 2102, False, [(k, f"E{k}+l{k}", 2102) for k in (2, 3)]),
    (1, "F", 4, 2103, False, [(3, "F3+l3", 2103)]),
    (1, "G", 4, 2104, False, []),
    (1, "H", 4, 1899, False, []),
    (1, "I", 4, 1900, False, [(0, "I0+l0", 2000)]),
    (1, "J", 4, 1901, False, [(k, f"J{k}+l{k}", 2000 + k) for k in (0, 1)]),
    (1, "K", 4, 1902, False, [(k, f"K{k}+l{k}", 2000 + k) for k in (0, 1, 2)]),
    (1, "L", 4, 1903, False, [(k, f"L{k}+l{k}", 2000 + k) for k in range(4)]),
]


def test_windowing() -> None:
    """KStreamKStreamJoinTest.testWindowing: records join while their timestamps are at most
    100 ms apart, on either side of the window, whichever stream arrives second."""
    builder = StreamsBuilder()
    consumed = Consumed(key_serde=INT, value_serde=S)
    stream1, stream2 = builder.stream("topic1", consumed), builder.stream("topic2", consumed)
    joined = stream1.join(
        stream2,
        lambda v1, v2: f"{v1}+{v2}",
        JoinWindows.of_time_difference_with_no_grace(100),
        StreamJoined(key_serde=INT, value_serde=S, other_value_serde=S),
    )
    supplier = MockApiProcessorSupplier()
    joined.process(supplier)
    topology = builder.build()
    assert list(topology.copartition_groups) == [frozenset({"topic1", "topic2"})]
    with TopologyTestDriver(topology, {}) as driver:
        topics = {n: driver.create_input_topic(f"topic{n}", INT, S, start_timestamp_ms=0) for n in (1, 2)}
        processor = supplier.captured_processors(1)[0]
        for topic, prefix, keys, time, staggered, expected in WINDOWING_STEPS:
            for key in range(keys):
                topics[topic].pipe_input(key, f"{prefix}{key}", time + key if staggered else time)
            processor.check_and_clear_process_result(*expected)


#: KStreamKStreamJoinTest's fields ``joinWindows`` (size 100, grace 50) and ``streamJoined``
JOIN_WINDOWS = JoinWindows.of_time_difference_and_grace(50, 50)
STRING_INT_INT = StreamJoined(key_serde=S, value_serde=INT, other_value_serde=INT)


def _left_join_right(stream_joined: StreamJoined, windows: JoinWindows = JOIN_WINDOWS) -> Any:
    """``left.join(right, Integer::sum, windows, streamJoined)``; returns (builder, joined)."""
    builder = StreamsBuilder()
    consumed = Consumed(key_serde=S, value_serde=INT)
    left, right = builder.stream("left", consumed), builder.stream("right", consumed)
    return builder, left.join(right, lambda v1, v2: v1 + v2, windows, stream_joined)


def test_should_disable_logging_on_stream_joined() -> None:
    """KStreamKStreamJoinTest.shouldDisableLoggingOnStreamJoined"""
    joined = STRING_INT_INT.with_store_name("store").with_logging_disabled()
    builder, _ = _left_join_right(joined)
    stores = builder.build().stores
    assert not stores["store-this-join-store"].logging_enabled
    assert not stores["store-other-join-store"].logging_enabled


def test_should_enable_logging_with_custom_config_on_stream_joined() -> None:
    """KStreamKStreamJoinTest.shouldEnableLoggingWithCustomConfigOnStreamJoined: both join
    stores are changelogged (the sub-topology's two changelog topics) with the given config."""
    joined = STRING_INT_INT.with_store_name("store").with_logging_enabled({"test": "property"})
    builder, _ = _left_join_right(joined)
    stores = builder.build().stores
    logged = [name for name, store in stores.items() if store.logging_enabled]
    assert sorted(logged) == ["store-other-join-store", "store-this-join-store"]
    for name in logged:
        assert stores[name].changelog_topic_config()["test"] == "property"


SETTINGS_MISMATCH = "Window settings mismatch. WindowBytesStoreSupplier settings"
NOT_DUPLICATES = "The StoreSupplier must set retainDuplicates=true, found retainDuplicates=false"
SAME_NAMES = "Both StoreSuppliers have the same name.  StoreSuppliers must provide unique names"
#: Java test -> this and other supplier (name, retention, window size, retain duplicates), the
#: error's start (``buildStreamsJoinThatShouldThrow``); the join windows are 100 ms + 50 ms grace
THIS_OK = ("in-memory-join-store", 150, 100, True)
OTHER_OK = ("in-memory-join-store-other", 150, 100, True)
SUPPLIER_CHECKS = {
    "shouldThrowExceptionThisStoreSupplierRetentionDoNotMatchWindowsSizeAndGrace": (
        ("in-memory-join-store", 500, 100, True), OTHER_OK, SETTINGS_MISMATCH
    ),
    "shouldThrowExceptionThisStoreSupplierWindowSizeDoesNotMatchJoinWindowsWindowSize": (
        ("in-memory-join-store", 150, 150, True), OTHER_OK, SETTINGS_MISMATCH
    ),
    "shouldThrowExceptionWhenThisJoinStoreSetsRetainDuplicatesFalse": (
        ("in-memory-join-store", 150, 100, False), OTHER_OK, NOT_DUPLICATES
    ),
    "shouldThrowExceptionOtherStoreSupplierRetentionDoNotMatchWindowsSizeAndGrace": (
        THIS_OK, ("in-memory-join-store-other", 500, 100, True), SETTINGS_MISMATCH
    ),
    "shouldThrowExceptionOtherStoreSupplierWindowSizeDoesNotMatchJoinWindowsWindowSize": (
        THIS_OK, ("in-memory-join-store-other", 150, 150, True), SETTINGS_MISMATCH
    ),
    "shouldThrowExceptionWhenOtherJoinStoreSetsRetainDuplicatesFalse": (
        THIS_OK, ("in-memory-join-store-other", 150, 100, False), NOT_DUPLICATES
    ),
    "shouldExceptionWhenJoinStoresDoNotHaveUniqueNames": (THIS_OK, THIS_OK, SAME_NAMES),
}  # fmt: skip


@pytest.mark.parametrize("java_test", list(SUPPLIER_CHECKS))
def test_store_supplier_checks(java_test: str) -> None:
    """KStreamKStreamJoinTest.<java_test>: the join refuses explicit store suppliers whose
    settings do not fit the join windows (Kafka's KStreamImplJoin.assertWindowSettings /
    assertUniqueStoreNames)."""
    this, other, message = SUPPLIER_CHECKS[java_test]
    joined = STRING_INT_INT.with_this_store_supplier(Stores.in_memory_window_store(*this))
    joined = joined.with_other_store_supplier(Stores.in_memory_window_store(*other))
    with pytest.raises(TopologyError) as error:
        _left_join_right(joined)
    assert error.value.args[0].startswith(message)


def test_should_build_join_with_custom_stores_and_correct_window_settings() -> None:
    """KStreamKStreamJoinTest.shouldBuildJoinWithCustomStoresAndCorrectWindowSettings"""
    builder, _ = _left_join_right(STRING_INT_INT)
    builder.build()


def test_should_join_with_custom_store_suppliers() -> None:
    """KStreamKStreamJoinTest.shouldJoinWithCustomStoreSuppliers: both, this or the other side
    from an explicit in-memory supplier of the join's size and retention."""
    windows = JoinWindows.of_time_difference_with_no_grace(100)
    settings = windows.size() + windows.grace_ms, windows.size()  # retention, window size
    this = Stores.in_memory_window_store("in-memory-join-store", *settings, True)
    other = Stores.in_memory_window_store("in-memory-join-store-other", *settings, True)
    run_join(STRING_INT_INT.with_this_store_supplier(this).with_other_store_supplier(other), windows)
    run_join(STRING_INT_INT.with_this_store_supplier(this), windows)
    run_join(STRING_INT_INT.with_other_store_supplier(other), windows)


def test_should_log_and_meter_on_skipped_records_with_null_value(caplog: pytest.LogCaptureFixture) -> None:
    """KStreamKStreamJoinTest.shouldLogAndMeterOnSkippedRecordsWithNullValueWithBuiltInMetricsVersionLatest:
    an inner join skips a record with a null value, counts it in dropped-records and logs Kafka's
    warning."""
    builder = StreamsBuilder()
    left = builder.stream("left", Consumed(key_serde=S, value_serde=INT))
    right = builder.stream("right", Consumed(key_serde=S, value_serde=INT))
    left.join(
        right,
        lambda v1, v2: v1 + v2,
        JoinWindows.of_time_difference_with_no_grace(100),
        StreamJoined(key_serde=S, value_serde=INT, other_value_serde=INT),
    )
    with caplog.at_level(logging.WARNING), TopologyTestDriver(builder.build()) as driver:
        driver.create_input_topic("left", S, INT).pipe_input("A", None)
        assert dropped_records(driver) == 1
    kafka_text = "Skipping record due to null key or value. topic=[left] partition=[0] offset=[0]"
    assert kafka_text in caplog.messages


def test_should_throttle_emit_non_joined_outer_records_even_when_clock_drift() -> None:
    """KStreamKStreamJoinTest.shouldThrottleEmitNonJoinedOuterRecordsEvenWhenClockDrift: an outer
    join's right side parks unmatched records in the outer-join store and scans it for closed
    ones at most once per ``__emit.interval.ms.kstreams.outer.join.spurious.results.fix__`` of
    wall clock, the next scan due one interval after the last one's wall clock (not after the
    time the previous one was due). The Java test drives the right-side processor through a
    mock context at system times 1000, 2100, 2500 and 4000 with Kafka's default interval, 1 s;
    here the driver's wall clock, with the interval set (platform_streams' default is 0)."""
    builder = StreamsBuilder()
    left = builder.stream("left", Consumed(key_serde=S, value_serde=S))
    right = builder.stream("right", Consumed(key_serde=S, value_serde=S))
    window = JoinWindows.of_time_difference_with_no_grace(1000)
    left.outer_join(right, lambda v1, v2: f"{v1}{v2}", window).to("out")
    config = {
        "default_key_serde": "string",
        "default_value_serde": "string",
        "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__": 1000,
    }
    with TopologyTestDriver(builder.build(), config, initial_wall_clock_ms=1000) as driver:
        topic = driver.create_input_topic("right", S, S)
        outer_store = driver.get_key_value_store("KSTREAM-OUTERSHARED-0000000004-store")
        topic.pipe_input("key1", "value1", 10_000)
        driver.advance_wall_clock_time(1100)  # 2100
        topic.pipe_input("key2", "value2", 13_000)
        driver.advance_wall_clock_time(400)  # 2500
        topic.pipe_input("key3", "value3", 15_000)
        # being throttled, so the older value still exists
        assert len(list(outer_store.all())) == 2
        driver.advance_wall_clock_time(1500)  # 4000
        topic.pipe_input("key4", "value4", 17_000)
        assert len(list(outer_store.all())) == 1
        output = driver.create_output_topic("out", S, S)
        assert [(r.key, r.value, r.timestamp) for r in output.read_records_to_list()] == [
            ("key1", "Nonevalue1", 10_000),
            ("key2", "Nonevalue2", 13_000),
            ("key3", "Nonevalue3", 15_000),
        ]
