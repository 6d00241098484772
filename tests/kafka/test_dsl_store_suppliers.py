"""DslStoreSuppliers (KIP-954): Kafka's tests of store suppliers on StreamJoined and Materialized.

Sources (apache/kafka streams/src/test/java/org/apache/kafka/streams/):
kstream/internals/KStreamKStreamJoinTest.java (``shouldJoinWithDslStoreSuppliersIfNoStoreSupplied``
and its ``runJoin``), kstream/internals/MaterializedInternalTest.java (store names).
The application-wide setting (``dsl_store_suppliers`` = Kafka's ``dsl.store.suppliers.class``,
``default_dsl_store`` = ``default.dsl.store``): StreamsBuilderTest.java (``shouldUseDslStoreSupplier*``,
``shouldUseTopologyOverrideStoreTypeOverConfiguredDslStoreSupplier``, the windowed and session
``...ForWindowedOperation`` / ``...ForSessionWindowedOperation`` variants, the three
``...DslStoreSuppliers...ForAllOuterJoinOperationBetweenKStreamAndKStream`` and
``shouldUseThisStoreSupplierEvenIfDslStoreSuppliersConfiguredInTopologyConfig``), KStreamKStreamJoinTest
(``shouldJoinWithDslStoreSuppliersFromStreamsConfig``), MaterializedInternalTest
(``shouldUseStoreTypeWhenProvidedViaTopologyConfig``,
``shouldPreferStoreSupplierWhenProvidedWithStoreTypeViaTopologyConfig``). Kafka's
``StreamsBuilder(TopologyConfig)`` is ``StreamsBuilder(config)`` here; its
``rewriteTopology(StreamsConfig)`` is the config given to the TopologyTestDriver / KafkaStreams.
Not translated: ``shouldJoinWithNonTimestampedStore``:
join window stores are never timestamped here, there is no timestamped window bytes store to tell apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from platform_streams.config import StreamsConfig
from platform_streams.dsl import (
    Consumed,
    JoinWindows,
    Materialized,
    SessionWindows,
    StreamJoined,
    StreamsBuilder,
    TimeWindows,
)
from platform_streams.dsl.materialize import key_value_spec, store_name
from platform_streams.serde import Integer, String
from platform_streams.state import BuiltInDslStoreSuppliers, Stores
from platform_streams.state.dsl_store_suppliers import DslWindowParams
from platform_streams.state.stores import WindowBytesStoreSupplier
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import MockApiProcessorSupplier

S, INT = String(), Integer()


class TrackingDslStoreSuppliers(BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers):
    num_calls = 0

    def window_store(self, params: DslWindowParams) -> WindowBytesStoreSupplier:
        TrackingDslStoreSuppliers.num_calls += 1
        return super().window_store(params)


def run_join(
    stream_joined: StreamJoined, join_windows: JoinWindows, props: dict[str, Any] | None = None
) -> None:
    """KStreamKStreamJoinTest.runJoin (``props``: the driver's config)"""
    builder = StreamsBuilder()
    left = builder.stream("left", Consumed(key_serde=S, value_serde=INT))
    right = builder.stream("right", Consumed(key_serde=S, value_serde=INT))
    supplier = MockApiProcessorSupplier()
    left.join(right, lambda a, b: a + b, join_windows, stream_joined).process(supplier)
    with TopologyTestDriver(builder.build(), props or {}) as driver:
        left_in = driver.create_input_topic("left", S, INT, start_timestamp_ms=0)
        right_in = driver.create_input_topic("right", S, INT, start_timestamp_ms=0)
        left_in.pipe_input("A", 1, 1)
        left_in.pipe_input("B", 1, 2)
        right_in.pipe_input("A", 1, 1)
        right_in.pipe_input("B", 2, 2)
        supplier.captured_processors(1)[0].check_and_clear_process_result(("A", 2, 1), ("B", 3, 2))


def test_should_join_with_dsl_store_suppliers_if_no_store_supplied() -> None:
    """KStreamKStreamJoinTest.shouldJoinWithDslStoreSuppliersIfNoStoreSupplied"""
    TrackingDslStoreSuppliers.num_calls = 0
    join_windows = JoinWindows.of_time_difference_with_no_grace(100)
    stream_joined = StreamJoined(key_serde=S, value_serde=INT, other_value_serde=INT)
    suppliers = TrackingDslStoreSuppliers()
    size, grace = join_windows.size(), join_windows.grace_ms
    this_supplier = Stores.in_memory_window_store("in-memory-join-store-other", size + grace, size, True)
    other_supplier = Stores.in_memory_window_store("in-memory-join-store", size + grace, size, True)

    # neither side is supplied explicitly
    run_join(stream_joined.with_dsl_store_suppliers(suppliers), join_windows)
    assert TrackingDslStoreSuppliers.num_calls == 2
    # one side is supplied explicitly, so we only increment once
    run_join(
        stream_joined.with_dsl_store_suppliers(suppliers).with_this_store_supplier(this_supplier),
        join_windows,
    )
    assert TrackingDslStoreSuppliers.num_calls == 3
    # both sides are supplied explicitly, so we don't increment further
    run_join(
        stream_joined.with_dsl_store_suppliers(suppliers)
        .with_this_store_supplier(this_supplier)
        .with_other_store_supplier(other_supplier),
        join_windows,
    )
    assert TrackingDslStoreSuppliers.num_calls == 3


def test_materialized_dsl_store_suppliers_choose_the_table_store() -> None:
    """Materialized.as_(DslStoreSuppliers) / with_dsl_store_suppliers: the KTable's key-value
    store comes from the suppliers (MaterializedInternalTest: the name stays generated)."""
    builder = StreamsBuilder()
    for suppliers, persistent in (
        (BuiltInDslStoreSuppliers.IN_MEMORY, False),
        (BuiltInDslStoreSuppliers.ROCKS_DB, True),
    ):
        materialized = Materialized.as_(suppliers)
        name = store_name(builder, materialized, "KTABLE-SOURCE-")
        assert name.startswith("KTABLE-SOURCE-STATE-STORE-")
        spec = key_value_spec(builder, name, materialized, key_serde=S, value_serde=S)
        assert spec.persistent is persistent and spec.store_supplier is not None
        assert Materialized().with_dsl_store_suppliers(suppliers).store_type == (
            "rocksdb" if persistent else "in_memory"
        )


def test_in_memory_dsl_store_suppliers_run_a_count() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .count(
            materialized=Materialized(store_name="counts").with_dsl_store_suppliers(
                BuiltInDslStoreSuppliers.IN_MEMORY
            )
        )
        .to_stream()
        .to("out")
    )
    topology = builder.build()
    with TopologyTestDriver(
        topology, {"default_key_serde": "string", "default_value_serde": "long"}
    ) as driver:
        source = driver.create_input_topic("in", S, S)
        for key in ("a", "b", "a"):
            source.pipe_input(key, "x")
        store: Any = driver.get_key_value_store("counts")
        assert (store.get("a"), store.get("b")) == (2, 1)
        assert store.persistent is False


# --- the application-wide setting: dsl_store_suppliers / default_dsl_store --------------------

IN_MEMORY_CLASS = "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$InMemoryDslStoreSuppliers"
ROCKS_DB_CLASS = "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$RocksDBDslStoreSuppliers"
HOUR = 3_600_000


def app_config(**settings: Any) -> StreamsConfig:
    """StreamsTestUtils.getStreamsConfig() plus ``settings``."""
    return StreamsConfig(application_id="app", bootstrap_servers="dummy:9092", **settings)


def count_store_persistent(
    topology_config: StreamsConfig | None,
    props: dict[str, Any],
    windows: Any = None,
    materialized: Materialized | None = None,
) -> bool:
    """StreamsBuilderTest's ``builder.stream(topic).groupByKey()[.windowedBy(w)].count(m)`` run
    through ``rewriteTopology(new StreamsConfig(props))``: whether store "store" is persistent,
    asked of the store the driver built (Kafka's ``assertTypesForStateStore``)."""
    builder = StreamsBuilder(topology_config)
    grouped: Any = builder.stream("topic", Consumed(key_serde=S, value_serde=S)).group_by_key()
    if windows is not None:
        grouped = grouped.windowed_by(windows)
    grouped.count(materialized=materialized or Materialized.as_("store")).to_stream()
    with TopologyTestDriver(builder.build(), props) as driver:
        return bool(driver.get_state_store("store").persistent)


WINDOWS = {
    "key-value": None,
    # Kafka windows by JoinWindows.ofTimeDifferenceAndGrace(1h, 0): a 1 h time window here
    "window": TimeWindows.of_size_and_grace(HOUR, 0),
    "session": SessionWindows.of_inactivity_gap_and_grace(HOUR, 0),
}


@pytest.mark.parametrize("kind", list(WINDOWS))
def test_should_use_dsl_store_supplier_defined_in_materialized(kind: str) -> None:
    """StreamsBuilderTest.shouldUseDslStoreSupplierDefinedInMaterialized[ForWindowedOperation|
    ForSessionWindowedOperation]: ``withStoreType(IN_MEMORY)`` with the default config."""
    materialized = Materialized.as_("store").with_store_type("in_memory")
    assert count_store_persistent(None, {}, WINDOWS[kind], materialized) is False


@pytest.mark.parametrize("kind", list(WINDOWS))
def test_should_use_dsl_store_supplier_defined_configured_in_streams_config(kind: str) -> None:
    """StreamsBuilderTest.shouldUseDslStoreSupplierDefinedConfiguredInStreamsConfig[ForWindowed
    Operation|ForSessionWindowedOperation]: the run-time config (Java's class name) decides."""
    props = {"dsl_store_suppliers": IN_MEMORY_CLASS}
    assert count_store_persistent(None, props, WINDOWS[kind]) is False
    assert count_store_persistent(None, {}, WINDOWS[kind]) is True


@pytest.mark.parametrize("kind", list(WINDOWS))
def test_topology_config_over_streams_config(kind: str) -> None:
    """StreamsBuilderTest.shouldUseDslStoreSupplierDefinedConfiguredInTopologyConfigOverStreamsConfig
    [ForWindowedOperation|ForSessionWindowedOperation]: StreamsBuilder(config) beats the run-time one."""
    topology_config = app_config(dsl_store_suppliers=BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers)
    props = {"dsl_store_suppliers": ROCKS_DB_CLASS}
    assert count_store_persistent(topology_config, props, WINDOWS[kind]) is False


def test_should_use_dsl_store_supplier_over_store_type() -> None:
    """StreamsBuilderTest.shouldUseDslStoreSupplierOverStoreType: ``dsl.store.suppliers.class``
    beats ``default.dsl.store``."""
    topology_config = app_config(default_dsl_store="rocksDB", dsl_store_suppliers=IN_MEMORY_CLASS)
    assert count_store_persistent(topology_config, {}) is False


def test_should_use_topology_override_store_type_over_configured_dsl_store_supplier() -> None:
    """StreamsBuilderTest.shouldUseTopologyOverrideStoreTypeOverConfiguredDslStoreSupplier:
    ``default.dsl.store=in_memory`` in the topology config beats the run-time suppliers."""
    topology_config = StreamsConfig.from_properties(
        {"application.id": "app", "bootstrap.servers": "dummy:9092", "default.dsl.store": "in_memory"}
    )
    props = {"dsl_store_suppliers": ROCKS_DB_CLASS}
    assert count_store_persistent(topology_config, props) is False


def test_materialized_store_type_beats_the_config() -> None:
    """Kafka's precedence (DslStoreSuppliers javadoc): the operator's ``Materialized`` over the
    topology config over the StreamsConfig -- an explicit RocksDB store stays RocksDB."""
    in_memory = {"dsl_store_suppliers": IN_MEMORY_CLASS}
    materialized = Materialized.as_("store").with_store_type("rocksdb")
    topology_config = app_config(default_dsl_store="in_memory")
    assert count_store_persistent(topology_config, in_memory, None, materialized) is True


def test_should_use_store_type_when_provided_via_topology_config() -> None:
    """MaterializedInternalTest.shouldUseStoreTypeWhenProvidedViaTopologyConfig /
    shouldPreferStoreSupplierWhenProvidedWithStoreTypeViaTopologyConfig: ``default.dsl.store``
    in the topology config picks in-memory; a store supplier of the operator still wins."""
    builder = StreamsBuilder(app_config(default_dsl_store="in_memory"))
    spec = key_value_spec(builder, "store", Materialized.as_("store"), key_serde=S, value_serde=S)
    assert spec.persistent is False
    supplier = Stores.persistent_key_value_store("store")
    spec = key_value_spec(builder, "store", Materialized.as_(supplier), key_serde=S, value_serde=S)
    assert spec.store_supplier is supplier and spec.persistent is True


def test_should_join_with_dsl_store_suppliers_from_streams_config() -> None:
    """KStreamKStreamJoinTest.shouldJoinWithDslStoreSuppliersFromStreamsConfig: neither side is
    supplied explicitly, so the config's suppliers are called twice."""
    TrackingDslStoreSuppliers.num_calls = 0
    join_windows = JoinWindows.of_time_difference_with_no_grace(100)
    stream_joined = StreamJoined(key_serde=S, value_serde=INT, other_value_serde=INT)
    run_join(stream_joined, join_windows, {"dsl_store_suppliers": TrackingDslStoreSuppliers})
    assert TrackingDslStoreSuppliers.num_calls == 2


def test_bad_dsl_store_suppliers_setting_names_the_field() -> None:
    """A value that names no suppliers is refused with the field's name."""
    with pytest.raises(ValidationError, match="dsl_store_suppliers"):
        app_config(dsl_store_suppliers="com.example.NoSuchSuppliers")
    with pytest.raises(ValidationError, match="default_dsl_store"):
        app_config(default_dsl_store="leveldb")


def test_in_memory_app_creates_no_rocksdb_directory(tmp_path: Path) -> None:
    """An application with ``dsl_store_suppliers`` in memory builds only in-memory stores --
    table, aggregation, window, session, stream-stream join (with its outer store) and
    foreign-key join stores: nothing is written under the state directory."""
    config = app_config(
        dsl_store_suppliers="InMemoryDslStoreSuppliers",
        state_dir=str(tmp_path),
        default_key_serde="string",
        default_value_serde="string",
    )
    builder = StreamsBuilder(config)
    events = builder.stream("events", Consumed(key_serde=S, value_serde=S))
    table = builder.table("table", Consumed(key_serde=S, value_serde=S), Materialized.as_("table-store"))
    events.group_by_key().count(materialized=Materialized.as_("counts"))
    events.group_by_key().windowed_by(TimeWindows.of_size_and_grace(HOUR, 0)).count()
    events.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(HOUR, 0)).count()
    events.left_join(
        builder.stream("other", Consumed(key_serde=S, value_serde=S)),
        lambda a, b: f"{a}{b}",
        JoinWindows.of_time_difference_with_no_grace(100),
        StreamJoined(key_serde=S, value_serde=S, other_value_serde=S),
    ).to("joined")
    table.join(table, lambda v: v, lambda a, b: a + b).to_stream().to("fk")
    topology = builder.build()
    with TopologyTestDriver(topology, config) as driver:
        for topic in ("events", "other", "table"):
            driver.create_input_topic(topic, S, S).pipe_input("k", "k", 5)
        assert driver.get_key_value_store("counts").get("k") == 1
        stores = {name: driver.get_state_store(name) for name in topology.stores}
        assert len(stores) >= 8 and not [n for n, s in stores.items() if s.persistent]
        assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == []


def test_should_use_dsl_store_supplier_defined_in_materialized_over_topology_overrides() -> None:
    """StreamsBuilderTest.shouldUseDslStoreSupplierDefinedInMaterializedOverTopologyOverrides:
    ``withStoreType(IN_MEMORY)`` beats the topology config's RocksDB suppliers."""
    topology_config = app_config(dsl_store_suppliers=BuiltInDslStoreSuppliers.RocksDBDslStoreSuppliers)
    materialized = Materialized.as_("store").with_store_type("in_memory")
    assert count_store_persistent(topology_config, {}, None, materialized) is False


def outer_join_stores_persistent(
    topology_config: StreamsConfig | None, props: dict[str, Any], stream_joined: StreamJoined
) -> list[bool]:
    """StreamsBuilderTest's ``streamOne.outerJoin(streamTwo, ..., ofTimeDifferenceWithNoGrace(1h),
    StreamJoined.as(OP).withName(OP)...)`` run through ``rewriteTopology(new StreamsConfig(props))``:
    whether each of its three stores (this side, other side, outer) is persistent, in build order
    (Kafka's ``assertTypesForStateStore``)."""
    builder = StreamsBuilder(topology_config)
    one = builder.stream("stream-topic", Consumed(key_serde=S, value_serde=S))
    two = builder.stream("stream-topic-two", Consumed(key_serde=S, value_serde=S))
    windows = JoinWindows.of_time_difference_with_no_grace(HOUR)
    one.outer_join(two, lambda v1, v2: v1, windows, stream_joined)
    topology = builder.build()
    with TopologyTestDriver(topology, props) as driver:
        stores = list(topology.stores)
        assert len(stores) == 3, stores
        return [bool(driver.get_state_store(name).persistent) for name in stores]


OP_JOINED = StreamJoined(
    key_serde=S, value_serde=S, other_value_serde=S, name="stream-operation", store_name="stream-operation"
)


@pytest.mark.parametrize(
    ("java_test", "topology_suppliers", "props", "stream_joined"),
    [
        (
            "shouldUseSpecifiedDslStoreSuppliersForAllOuterJoinOperationBetweenKStreamAndKStream",
            None,
            {},
            OP_JOINED.with_dsl_store_suppliers(BuiltInDslStoreSuppliers.IN_MEMORY),
        ),
        (
            "shouldUseConfiguredInStreamsConfigIfNoTopologyOverrideDslStoreSuppliersForAllOuterJoin"
            "OperationBetweenKStreamAndKStream",
            None,
            {"dsl_store_suppliers": IN_MEMORY_CLASS},
            OP_JOINED,
        ),
        (
            "shouldUseConfiguredTopologyOverrideDslStoreSuppliersForAllOuterJoinOperationBetweenKStream"
            "AndKStream",
            IN_MEMORY_CLASS,
            {"dsl_store_suppliers": ROCKS_DB_CLASS},
            OP_JOINED,
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("should") else "",
)
def test_outer_join_stores_follow_the_dsl_store_suppliers(
    java_test: str, topology_suppliers: str | None, props: dict[str, Any], stream_joined: StreamJoined
) -> None:
    """StreamsBuilderTest.<java_test>: both window stores and the outer store are in memory."""
    topology_config = (
        None if topology_suppliers is None else app_config(dsl_store_suppliers=topology_suppliers)
    )
    assert outer_join_stores_persistent(topology_config, props, stream_joined) == [False, False, False]


def test_should_use_this_store_supplier_even_if_dsl_store_suppliers_configured_in_topology_config() -> None:
    """StreamsBuilderTest.shouldUseThisStoreSupplierEvenIfDslStoreSuppliersConfiguredInTopologyConfig:
    the explicit suppliers win over the topology config's RocksDB suppliers; the outer store
    follows this side's supplier (in memory)."""
    windows = JoinWindows.of_time_difference_with_no_grace(HOUR)
    retention, size = windows.size() + windows.grace_ms, windows.size()
    stream_joined = OP_JOINED.with_this_store_supplier(
        Stores.in_memory_window_store("thisSupplier", retention, size, True)
    ).with_other_store_supplier(Stores.persistent_window_store("otherSupplier", retention, size, True))
    topology_config = app_config(dsl_store_suppliers=ROCKS_DB_CLASS)
    assert outer_join_stores_persistent(topology_config, {}, stream_joined) == [False, True, False]
