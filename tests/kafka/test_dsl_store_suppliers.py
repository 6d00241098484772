"""DslStoreSuppliers (KIP-954): Kafka's tests of store suppliers on StreamJoined and Materialized.

Sources (apache/kafka streams/src/test/java/org/apache/kafka/streams/):
kstream/internals/KStreamKStreamJoinTest.java (``shouldJoinWithDslStoreSuppliersIfNoStoreSupplied``
and its ``runJoin``), kstream/internals/MaterializedInternalTest.java (store names).
Not translated: the ``dsl.store.suppliers.class`` / ``default.dsl.store`` config cases
(``shouldJoinWithDslStoreSuppliersFromStreamsConfig``, ``shouldUseStoreTypeWhenProvidedViaTopologyConfig``,
``shouldPreferStoreSupplierWhenProvidedWithStoreTypeViaTopologyConfig``): the application-wide
setting is not implemented, suppliers are chosen per operator. ``shouldJoinWithNonTimestampedStore``:
join window stores are never timestamped here, there is no timestamped window bytes store to tell apart.
"""

from __future__ import annotations

from typing import Any

from platform_streams.dsl import Consumed, JoinWindows, Materialized, StreamJoined, StreamsBuilder
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


def run_join(stream_joined: StreamJoined, join_windows: JoinWindows) -> None:
    """KStreamKStreamJoinTest.runJoin"""
    builder = StreamsBuilder()
    left = builder.stream("left", Consumed(key_serde=S, value_serde=INT))
    right = builder.stream("right", Consumed(key_serde=S, value_serde=INT))
    supplier = MockApiProcessorSupplier()
    left.join(right, lambda a, b: a + b, join_windows, stream_joined).process(supplier)
    with TopologyTestDriver(builder.build(), {}) as driver:
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
