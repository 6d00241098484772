"""Kafka's ``KStreamNewProcessorApiTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/
internals/KStreamNewProcessorApiTest.java; KStreamProcessorApiTest.java in newer Kafka, same
cases), translated, plus the ``processValues`` contract of
``KStreamImpl.processValues`` (streams/src/main/java/org/apache/kafka/streams/kstream/internals/
KStreamImpl.java): the node is ``KSTREAM-PROCESSVALUES-<index>``, the key serde is kept and no
repartition is inserted before a grouping (unlike ``process``).
"""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.dsl import Consumed, Produced, StreamsBuilder
from platform_streams.processor import FixedKeyProcessor, FixedKeyProcessorContext, FixedKeyRecord, Record
from platform_streams.serde import Long, String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver

S = String()
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


class TransformerSupplier:
    """Kafka's ``TransformerSupplier``: a FixedKeyProcessorSupplier that may provide its store."""

    def __init__(self, store_builder: Any) -> None:
        self.store_builder = store_builder

    def __call__(self) -> FixedKeyProcessor:
        return _Updater()

    def stores(self) -> set[Any] | None:
        return {self.store_builder} if self.store_builder is not None else None


class _Updater(FixedKeyProcessor):
    def init(self, context: FixedKeyProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store("store")
        assert self.store is not None, "State store can't be null"

    def process(self, record: FixedKeyRecord) -> None:
        self.store.put_if_absent(record.key, record.value + "Updated")
        self.context.forward(record.with_value(record.value + "Updated"))


def _run_test(should_add_store_directly: bool) -> None:
    builder = StreamsBuilder()
    store_builder = Stores.key_value_store_builder(Stores.in_memory_key_value_store("store"), S, S)
    if should_add_store_directly:
        builder.add_state_store(store_builder)
    builder.stream("input", Consumed(key_serde=S, value_serde=S)).process_values(
        TransformerSupplier(None if should_add_store_directly else store_builder), "store"
    ).to("output", Produced(key_serde=S, value_serde=S))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("input", S, S)
        for key, value in [("a", "foo"), ("b", "bar"), ("c", "baz")]:
            source.pipe_input(key, value)
        actual = driver.create_output_topic("output", S, S).read_values_to_list()
        store = driver.get_key_value_store("store")
        assert actual == ["fooUpdated", "barUpdated", "bazUpdated"]
        assert store.get("a") == "fooUpdated"
        assert store.get("b") == "barUpdated"
        assert store.get("c") == "bazUpdated"


def test_should_get_state_store_with_connected_store_provider() -> None:
    """KStreamNewProcessorApiTest.shouldGetStateStoreWithConnectedStoreProvider"""
    _run_test(False)


def test_should_get_state_store_with_stream_builder() -> None:
    """KStreamNewProcessorApiTest.shouldGetStateStoreWithStreamBuilder"""
    _run_test(True)


class _Counter(FixedKeyProcessor):
    """Replaces each value by its length; keeps key, timestamp and headers."""

    def process(self, record: FixedKeyRecord) -> None:
        self.context.forward(record.with_value(len(record.value)).with_timestamp(record.timestamp + 1))


def test_process_values_keeps_the_key_and_needs_no_repartition() -> None:
    """KStreamImpl.processValues: (name, keySerde, null, sourceNodes, repartitionRequired): the
    key serde is kept and a following group_by_key inserts no repartition topic."""
    builder = StreamsBuilder()
    counted = builder.stream("input", Consumed(key_serde=S, value_serde=S)).process_values(_Counter)
    counted.group_by_key().count().to_stream().to("output", Produced(value_serde=Long()))
    topology = builder.build()
    description = str(topology.describe())
    assert "KSTREAM-PROCESSVALUES-0000000001" in description
    assert "repartition" not in description
    with TopologyTestDriver(topology, CONFIG) as driver:
        source = driver.create_input_topic("input", S, S)
        source.pipe_input("a", "xx", timestamp_ms=5)
        source.pipe_input("a", "yyy", timestamp_ms=6)
        out = driver.create_output_topic("output", S, Long())
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            ("a", 1, 6),
            ("a", 2, 7),
        ]


def test_process_values_keeps_an_upstream_key_change_pending() -> None:
    """KStreamImpl.processValues keeps ``repartitionRequired``: after map() the grouping below
    process_values still repartitions (KStreamImpl.process sets it; processValues only passes it on)."""
    builder = StreamsBuilder()
    stream = builder.stream("input", Consumed(key_serde=S, value_serde=S))
    stream.map(lambda k, v: (v, k)).process_values(_Counter).group_by_key().count()
    assert "KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition" in str(builder.build().describe())


def test_fixed_key_context_refuses_a_record_that_could_change_the_key() -> None:
    """FixedKeyProcessorContext.forward takes FixedKeyRecord only (KIP-820)."""

    class Rekeying(FixedKeyProcessor):
        def process(self, record: FixedKeyRecord) -> None:
            self.context.forward(Record("other", record.value))  # type: ignore[arg-type]

    builder = StreamsBuilder()
    builder.stream("input", Consumed(key_serde=S, value_serde=S)).process_values(Rekeying).to("output")
    assert not hasattr(FixedKeyRecord("k", "v"), "with_key")
    with (
        TopologyTestDriver(builder.build(), CONFIG) as driver,
        pytest.raises(Exception, match="FixedKeyRecord"),
    ):
        driver.create_input_topic("input", S, S).pipe_input("k", "v")


def test_process_values_named_and_generated_names() -> None:
    """KStreamImpl.processValues: Named.as(newProcessorName(PROCESSVALUES_NAME)) or the given name."""
    builder = StreamsBuilder()
    stream = builder.stream("input")
    stream.process_values(_Counter).process_values(_Counter, named="second").to("output")
    description = str(builder.build().describe())
    assert "Processor: KSTREAM-PROCESSVALUES-0000000001 (stores: [])" in description
    assert "Processor: second (stores: [])" in description
