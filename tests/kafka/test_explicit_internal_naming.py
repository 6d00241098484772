"""KIP-1111, ``ensure_explicit_internal_resource_naming``: Kafka's ``StreamsBuilderTest`` cases
(streams/src/test/java/org/apache/kafka/streams/StreamsBuilderTest.java, Kafka Streams 4.3.1,
``shouldThrowWhen...`` / ``shouldNotThrowWhen...``), translated. The builder gets the setting
through its config (Java's ``new StreamsBuilder(new TopologyConfig(new StreamsConfig(props)))``);
the messages are Kafka's (``InternalTopologyBuilder.checkUnprovidedNames``).

Also: with the setting off, ``build()`` logs the same list in one WARN and succeeds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import (
    Grouped,
    Joined,
    JoinWindows,
    Materialized,
    Produced,
    Repartitioned,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)
from platform_streams.dsl.suppress import BufferConfig
from platform_streams.errors import TopologyError
from platform_streams.serde import Long, String
from platform_streams.state import Stores

S, L = String(), Long()
STREAM_TOPIC, STREAM_TOPIC_TWO = "stream-topic", "stream-topic-two"
HOUR_MS = 3600 * 1000
CHANGELOGS = "Following changelog topic(s) has not been named"
STORES = "Following state store(s) has not been named"
REPARTITIONS = "Following repartition topic(s) has not been named"


def _builder(ensure: bool = True) -> StreamsBuilder:
    config = StreamsConfig(
        application_id="app",
        bootstrap_servers="localhost:9092",
        ensure_explicit_internal_resource_naming=ensure,
    )
    return StreamsBuilder(config)


def _refused(builder: StreamsBuilder) -> str:
    with pytest.raises(TopologyError) as refused:
        builder.build()
    return str(refused.value)


# -- group by + aggregation -----------------------------------------------------------------


def _group_by_aggregation(
    grouped: Grouped, materialized: Materialized, by_key: bool = False
) -> StreamsBuilder:
    builder = _builder()
    stream = builder.stream("input1")
    grouping = (
        stream.select_key(lambda k, v: v).group_by_key(grouped)
        if by_key
        else stream.group_by(lambda k, v: v, grouped)
    )
    grouping.count(materialized).to_stream().to("output", Produced(name="sink"))
    return builder


NAMED_GROUPED = Grouped(name="repartition-name", key_serde=S, value_serde=S)
UNNAMED_GROUPED = Grouped(key_serde=S, value_serde=S)
NAMED_STORE = Materialized.as_("materialized-name").with_key_serde(S).with_value_serde(L)
UNNAMED_STORE = Materialized(key_serde=S, value_serde=L)


@pytest.mark.parametrize("by_key", [False, True], ids=["GroupBy", "GroupByKey"])
def test_should_throw_when_aggregation_with_repartition_name_and_logging_enabled(by_key: bool) -> None:
    """shouldThrowWhenGroupBy{,Key}AggregationWithRepartitionNameAndLoggingEnabled"""
    message = _refused(_group_by_aggregation(NAMED_GROUPED, UNNAMED_STORE, by_key))
    assert f"{CHANGELOGS}: KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog" in message
    assert f"{STORES}: KSTREAM-AGGREGATE-STATE-STORE-0000000003" in message
    assert REPARTITIONS not in message


@pytest.mark.parametrize("by_key", [False, True], ids=["GroupBy", "GroupByKey"])
def test_should_throw_when_aggregation_with_repartition_name_and_logging_disabled(by_key: bool) -> None:
    """shouldThrowWhenGroupBy{,Key}AggregationWithRepartitionNameAndLoggingDisabled"""
    message = _refused(_group_by_aggregation(NAMED_GROUPED, UNNAMED_STORE.with_logging_disabled(), by_key))
    assert f"{STORES}: KSTREAM-AGGREGATE-STATE-STORE-0000000003" in message
    assert CHANGELOGS not in message and REPARTITIONS not in message


@pytest.mark.parametrize("by_key", [False, True], ids=["GroupBy", "GroupByKey"])
@pytest.mark.parametrize("grouped", [UNNAMED_GROUPED, NAMED_GROUPED], ids=["", "RepartitionNameAnd"])
def test_should_not_throw_when_aggregation_with_materialized_name(by_key: bool, grouped: Grouped) -> None:
    """shouldNotThrowWhenGroupBy{,Key}AggregationWith{,RepartitionNameAnd}MaterializedName"""
    _group_by_aggregation(grouped, NAMED_STORE, by_key).build()


@pytest.mark.parametrize("by_key", [False, True], ids=["GroupBy", "GroupByKey"])
def test_should_throw_when_aggregation_without_repartition_name_and_materialized_name(by_key: bool) -> None:
    """shouldThrowWhenGroupBy{,Key}AggregationWithoutRepartitionNameAndMaterializedName"""
    message = _refused(_group_by_aggregation(UNNAMED_GROUPED, UNNAMED_STORE, by_key))
    assert f"{CHANGELOGS}: KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog" in message
    assert f"{STORES}: KSTREAM-AGGREGATE-STATE-STORE-0000000003" in message
    assert f"{REPARTITIONS}: KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition" in message
    assert message.startswith("Invalid topology: ")


# -- suppress -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("named", "logged", "refused"),
    [(True, True, False), (False, True, True), (False, False, False)],
    ids=["WithSuppressName", "WithoutSuppressName", "WithoutSuppressNameAndLoggingDisabled"],
)
def test_suppress(named: bool, logged: bool, refused: bool) -> None:
    """shouldNotThrowWhenSuppressWithSuppressName, shouldThrowWhenSuppressWithoutSuppressName,
    shouldThrowWhenSuppressWithoutSuppressNameAndLoggingDisabled (which does not throw)"""
    builder = _builder()
    table = (
        builder.stream("input1")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(HOUR_MS))
        .count(Materialized.as_("materialized-name"))
    )
    buffer = BufferConfig.unbounded() if logged else BufferConfig.unbounded().with_logging_disabled()
    suppressed = Suppressed.until_window_closes(buffer)
    if named:
        suppressed = suppressed.with_name("suppressed-name")
    table.suppress(suppressed).to_stream().to("output", Produced(name="sink"))
    if not refused:
        builder.build()
        return
    message = _refused(builder)
    assert f"{CHANGELOGS}: KTABLE-SUPPRESS-STATE-STORE-0000000003-changelog" in message
    assert STORES not in message and REPARTITIONS not in message


# -- stream-stream join ---------------------------------------------------------------------


def _stream_stream_join(joined: StreamJoined) -> StreamsBuilder:
    builder = _builder()
    one, two = builder.stream(STREAM_TOPIC), builder.stream(STREAM_TOPIC_TWO)
    one.select_key(lambda k, v: v).left_join(
        two.select_key(lambda k, v: v),
        lambda v1, v2: v1,
        JoinWindows.of_time_difference_with_no_grace(HOUR_MS),
        joined,
    )
    return builder


JOINED = StreamJoined(key_serde=S, value_serde=S, other_value_serde=S)
JOIN_STORES = (
    "KSTREAM-JOINTHIS-0000000012-store, KSTREAM-OUTEROTHER-0000000013-store, "
    "KSTREAM-OUTERSHARED-0000000012-store"
)
JOIN_CHANGELOGS = (
    "KSTREAM-JOINTHIS-0000000012-store-changelog, KSTREAM-OUTEROTHER-0000000013-store-changelog, "
    "KSTREAM-OUTERSHARED-0000000012-store-changelog"
)
JOIN_REPARTITIONS = "KSTREAM-KEY-SELECT-0000000002-repartition, KSTREAM-KEY-SELECT-0000000003-repartition"


def test_should_throw_when_kstream_kstream_join_with_repartition_name_and_logging_enabled() -> None:
    message = _refused(_stream_stream_join(JOINED.with_name("repartition-name")))
    assert f"{CHANGELOGS}: {JOIN_CHANGELOGS}" in message
    assert f"{STORES}: {JOIN_STORES}" in message
    assert REPARTITIONS not in message


def test_should_throw_when_kstream_kstream_join_with_repartition_name_and_logging_disabled() -> None:
    message = _refused(_stream_stream_join(JOINED.with_name("repartition-name").with_logging_disabled()))
    assert f"{STORES}: {JOIN_STORES}" in message
    assert REPARTITIONS not in message and CHANGELOGS not in message


def test_should_throw_when_kstream_kstream_join_with_materialized_name() -> None:
    message = _refused(_stream_stream_join(JOINED.with_store_name("store-name")))
    assert CHANGELOGS not in message and STORES not in message
    assert f"{REPARTITIONS}: {JOIN_REPARTITIONS}" in message


def test_should_not_throw_when_kstream_kstream_join_with_repartition_name_and_materialized_name() -> None:
    _stream_stream_join(JOINED.with_name("repartition-name").with_store_name("store-name")).build()


def test_should_throw_when_kstream_kstream_join_without_repartition_name_and_materialized_name() -> None:
    message = _refused(_stream_stream_join(JOINED))
    assert f"{CHANGELOGS}: {JOIN_CHANGELOGS}" in message
    assert f"{STORES}: {JOIN_STORES}" in message
    assert f"{REPARTITIONS}: {JOIN_REPARTITIONS}" in message


# -- stream-table, stream-versioned-table and stream-global-table joins ----------------------


def _stream_table_join(joined: Joined, materialized: Materialized) -> StreamsBuilder:
    builder = _builder()
    stream = builder.stream(STREAM_TOPIC)
    table = builder.table(STREAM_TOPIC_TWO, materialized=materialized)
    stream.select_key(lambda k, v: v).join(table, lambda v1, v2: v1, joined)
    return builder


TABLE_STORE = "stream-topic-two-STATE-STORE-0000000001"
J = Joined(key_serde=S, value_serde=S, other_value_serde=S)
TABLE_MAT = Materialized(key_serde=S, value_serde=S)
TABLE_NAMED = Materialized.as_("materialized-name").with_key_serde(S).with_value_serde(S)


def test_should_throw_when_kstream_ktable_join_with_repartition_name_and_logging_enabled() -> None:
    message = _refused(_stream_table_join(Joined(key_serde=S, name="repartition-name"), TABLE_MAT))
    assert f"{CHANGELOGS}: {TABLE_STORE}-changelog" in message
    assert f"{STORES}: {TABLE_STORE}" in message
    assert REPARTITIONS not in message


def test_should_throw_when_kstream_ktable_join_with_repartition_name_and_logging_disabled() -> None:
    message = _refused(
        _stream_table_join(Joined(key_serde=S, name="repartition-name"), TABLE_MAT.with_logging_disabled())
    )
    assert f"{STORES}: {TABLE_STORE}" in message
    assert REPARTITIONS not in message and CHANGELOGS not in message


def test_should_throw_when_kstream_ktable_join_with_materialized_name() -> None:
    message = _refused(_stream_table_join(J, TABLE_NAMED))
    assert CHANGELOGS not in message and STORES not in message
    assert f"{REPARTITIONS}: KSTREAM-KEY-SELECT-0000000003-repartition" in message


def test_should_not_throw_when_kstream_ktable_join_with_repartition_name_and_materialized_name() -> None:
    _stream_table_join(Joined(key_serde=S, name="repartition-name"), TABLE_NAMED).build()


def test_should_throw_when_kstream_ktable_join_without_repartition_name_and_materialized_name() -> None:
    message = _refused(_stream_table_join(J, TABLE_MAT))
    assert f"{CHANGELOGS}: {TABLE_STORE}-changelog" in message
    assert f"{STORES}: {TABLE_STORE}" in message
    assert f"{REPARTITIONS}: KSTREAM-KEY-SELECT-0000000004-repartition" in message


def _stream_versioned_table_join(joined: Joined) -> StreamsBuilder:
    builder = _builder()
    supplier = Stores.persistent_versioned_key_value_store("versioned-ktable-store", 24 * HOUR_MS)
    materialized = Materialized.as_(supplier).with_key_serde(S).with_value_serde(S)
    stream = builder.stream(STREAM_TOPIC)
    table = builder.table(STREAM_TOPIC_TWO, materialized=materialized)
    stream.select_key(lambda k, v: v).join(table, lambda v1, v2: v1, joined.with_grace_period(HOUR_MS)).to(
        "test-topic"
    )
    return builder


def test_should_not_throw_when_kstream_versioned_ktable_join_with_repartition_name() -> None:
    _stream_versioned_table_join(Joined(key_serde=S, name="repartition-name")).build()


def test_should_throw_when_kstream_versioned_ktable_join_without_repartition_name() -> None:
    message = _refused(_stream_versioned_table_join(J))
    assert f"{CHANGELOGS}: KSTREAM-JOIN-0000000007-Buffer-changelog" in message
    assert f"{STORES}: KSTREAM-JOIN-0000000007-Buffer" in message
    assert f"{REPARTITIONS}: KSTREAM-KEY-SELECT-0000000003-repartition" in message


def _stream_global_table_join(materialized: Materialized | None) -> StreamsBuilder:
    builder = _builder()
    stream = builder.stream(STREAM_TOPIC)
    table = builder.global_table(STREAM_TOPIC_TWO, materialized=materialized)
    stream.select_key(lambda k, v: v).join(table, lambda k, v: k, lambda v1, v2: v1)
    return builder


def test_should_not_throw_when_kstream_global_ktable_join_with_materialized_name() -> None:
    _stream_global_table_join(TABLE_NAMED).build()


def test_should_throw_when_kstream_global_ktable_join_without_store_name() -> None:
    message = _refused(_stream_global_table_join(None))
    assert CHANGELOGS not in message and REPARTITIONS not in message
    assert f"{STORES}: {TABLE_STORE}" in message


# -- repartition and cogroup ----------------------------------------------------------------


def _repartition(repartitioned: Repartitioned) -> StreamsBuilder:
    builder = _builder()
    builder.stream("input1").repartition(repartitioned).to("output", Produced(name="sink"))
    return builder


def test_should_not_throw_when_repartition_with_repartition_name() -> None:
    _repartition(Repartitioned(key_serde=S, value_serde=S, name="repartition-name")).build()


def test_should_throw_when_repartition_without_repartition() -> None:
    message = _refused(_repartition(Repartitioned(key_serde=S, value_serde=S)))
    assert CHANGELOGS not in message and STORES not in message
    assert f"{REPARTITIONS}: KSTREAM-REPARTITION-0000000001-repartition" in message


def _cogroup(grouped: Grouped, materialized: Materialized) -> StreamsBuilder:
    builder = _builder()
    one, two = builder.stream(STREAM_TOPIC), builder.stream(STREAM_TOPIC_TWO)
    grouped_one = one.group_by(lambda k, v: v, grouped)
    grouped_two = two.group_by_key()
    cogrouped = grouped_one.cogroup(lambda k, v, agg: agg + v).cogroup(grouped_two, lambda k, v, agg: agg + v)
    cogrouped.aggregate(lambda: "", materialized).to_stream().to("output")
    return builder


COGROUP_STORE = "COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003"
COGROUP_MAT = Materialized(key_serde=S, value_serde=S)
COGROUP_NAMED = Materialized.as_("materialized-name").with_key_serde(S).with_value_serde(S)


def test_should_throw_when_cogroup_with_repartition_name_and_logging_enabled() -> None:
    message = _refused(_cogroup(NAMED_GROUPED, COGROUP_MAT))
    assert f"{CHANGELOGS}: {COGROUP_STORE}-changelog" in message
    assert f"{STORES}: {COGROUP_STORE}" in message
    assert REPARTITIONS not in message


def test_should_throw_when_cogroup_with_repartition_name_and_logging_disabled() -> None:
    message = _refused(_cogroup(NAMED_GROUPED, COGROUP_MAT.with_logging_disabled()))
    assert f"{STORES}: {COGROUP_STORE}" in message
    assert REPARTITIONS not in message and CHANGELOGS not in message


@pytest.mark.parametrize("grouped", [UNNAMED_GROUPED, NAMED_GROUPED], ids=["", "RepartitionNameAnd"])
def test_should_not_throw_when_cogroup_with_materialized_name(grouped: Grouped) -> None:
    """shouldNotThrowWhenCoGroupWith{,RepartitionNameAnd}MaterializedName"""
    _cogroup(grouped, COGROUP_NAMED).build()


def test_should_throw_when_cogroup_without_repartition_name_and_materialized_name() -> None:
    message = _refused(_cogroup(UNNAMED_GROUPED, COGROUP_MAT))
    assert f"{CHANGELOGS}: {COGROUP_STORE}-changelog" in message
    assert f"{STORES}: {COGROUP_STORE}" in message
    assert f"{REPARTITIONS}: {COGROUP_STORE}-repartition" in message


# -- off: one WARN, and the topology builds ----------------------------------------------------


@pytest.mark.parametrize("make", [lambda: _builder(ensure=False), StreamsBuilder], ids=["off", "unset"])
def test_unnamed_resources_are_logged_when_the_setting_is_off(
    make: Callable[[], StreamsBuilder], caplog: pytest.LogCaptureFixture
) -> None:
    builder = make()
    builder.stream("input1").group_by(lambda k, v: v).count().to_stream().to("output")
    with caplog.at_level(logging.WARNING, logger="platform_streams.dsl.internal_naming"):
        builder.build()
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "platform_streams.dsl.internal_naming"]
    assert warning.startswith("Explicit naming for internal resources is currently disabled.")
    # count() draws no extra store index (count(Materialized) does)
    assert f"{REPARTITIONS}: KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition" in warning
