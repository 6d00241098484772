"""KIP-1112, ``processor.wrapper.class`` (``StreamsConfig.processor_wrapper``): Kafka's wrapper
cases translated from Kafka Streams 4.3.1's tests --

* StreamsBuilderTest.java ``shouldWrapProcessors...`` (every DSL operator's processor is wrapped;
  the stores its supplier's ``stores()`` provides are counted),
* TopologyTest.java ``shouldWrapProcessors`` (Processor API),
* InternalTopologyBuilderTest.java ``shouldWrapProcessorSupplier`` /
  ``shouldWrapFixedKeyProcessorSupplier`` / ``shouldThrowOnInvalidProcessorWrapperClassName``,
* StreamsConfigTest.java ``shouldAllowConfiguringProcessorWrapperWithClass(Name)``,

with Kafka's ``TestUtils.RecordingProcessorWrapper`` (streams/src/test/java/org/apache/kafka/
streams/utils/TestUtils.java). Java hands the recorder through the config map
(``wrapped.counter``); a StreamsConfig has no free keys, so the translations pass a wrapper
instance that holds it (the class form is tested on its own). The run-time cases at the end
show a wrapper's processors running in the TopologyTestDriver (Kafka's tests stop at build()).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import (
    Consumed,
    Grouped,
    Joined,
    JoinWindows,
    Materialized,
    Named,
    Produced,
    SessionWindows,
    SlidingWindows,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TableJoined,
    TimeWindows,
)
from platform_streams.dsl.suppress import BufferConfig
from platform_streams.processor import (
    FixedKeyProcessor,
    Processor,
    ProcessorContext,
    ProcessorWrapper,
    Record,
)
from platform_streams.processor.fixed_key import FixedKeyRecord
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology import Topology

S = String()
DAY = timedelta(days=1)


class WrapperRecorder:
    """Kafka's ``RecordingProcessorWrapper.WrapperRecorder``."""

    def __init__(self) -> None:
        self.unique_stores: set[str] = set()
        self.processor_stores: set[tuple[str, str]] = set()
        self.wrapped_processor_names: set[str] = set()

    def wrap_state_store(self, processor: str, store: str) -> None:
        self.unique_stores.add(store)
        self.processor_stores.add((processor, store))

    @property
    def num_wrapped_processors(self) -> int:
        return len(self.wrapped_processor_names)

    @property
    def num_unique_state_stores(self) -> int:
        return len(self.unique_stores)

    @property
    def num_connected_state_stores(self) -> int:
        return len(self.processor_stores)


class CountingDelegatingSupplier:
    """Kafka's ``CountingDelegatingProcessorSupplier``: records its name when made and the
    stores of the delegate's ``stores()`` when asked."""

    def __init__(self, recorder: WrapperRecorder, name: str, delegate: Callable[[], Any]) -> None:
        self.recorder, self.name, self.delegate = recorder, name, delegate
        recorder.wrapped_processor_names.add(name)

    def stores(self) -> Any:
        provided = getattr(self.delegate, "stores", None)
        stores = provided() if callable(provided) else None
        for store in stores or ():
            self.recorder.wrap_state_store(self.name, store.name)
        return stores

    def __call__(self) -> Any:
        return self.delegate()


class RecordingProcessorWrapper(ProcessorWrapper):
    """Kafka's ``TestUtils.RecordingProcessorWrapper``."""

    def __init__(self, recorder: WrapperRecorder | None = None) -> None:
        self.recorder = recorder or WrapperRecorder()
        self.configs: Mapping[str, Any] | None = None

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.configs = configs

    def wrap_processor_supplier(self, processor_name: str, supplier: Callable[[], Any]) -> Any:
        return CountingDelegatingSupplier(self.recorder, processor_name, supplier)

    def wrap_fixed_key_processor_supplier(self, processor_name: str, supplier: Callable[[], Any]) -> Any:
        return CountingDelegatingSupplier(self.recorder, processor_name, supplier)


def _config(wrapper: Any, **settings: Any) -> StreamsConfig:
    """``dummyStreamsConfigMap()`` with ``PROCESSOR_WRAPPER_CLASS_CONFIG``."""
    return StreamsConfig(
        application_id="dummy-app-id",
        bootstrap_servers="localhost:9092",
        processor_wrapper=wrapper,
        **settings,
    )


def _recording_builder(**settings: Any) -> tuple[StreamsBuilder, WrapperRecorder]:
    recorder = WrapperRecorder()
    return StreamsBuilder(_config(RecordingProcessorWrapper(recorder), **settings)), recorder


def _check(recorder: WrapperRecorder, names: set[str], unique: int, connected: int) -> None:
    assert recorder.wrapped_processor_names == names
    assert recorder.num_wrapped_processors == len(names)
    assert recorder.num_unique_state_stores == unique
    assert recorder.num_connected_state_stores == connected


class _Printing(Processor):
    def process(self, record: Record) -> None:
        random.random()


class _StatefulSupplier:
    def __init__(self, store: Any) -> None:
        self.store = store

    def __call__(self) -> Processor:
        return _Printing()

    def stores(self) -> set[Any]:
        return {self.store}


class _FixedKeyPrinting(FixedKeyProcessor):
    def process(self, record: FixedKeyRecord) -> None:
        random.random()


# -- StreamsBuilderTest ------------------------------------------------------------------------


def test_wrap_processors_for_process() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForProcess"""
    builder, recorder = _recording_builder()
    store = Stores.timestamped_key_value_store_builder(Stores.in_memory_key_value_store("store"), S, S)
    (
        builder.stream("input", Consumed(name="source"))
        .process(_StatefulSupplier(store), named="stateful-process-1")
        .process(_StatefulSupplier(store), named="stateful-process-2")
        .process_values(_FixedKeyPrinting, named="stateless-processValues")
        .to("output", Produced(name="sink"))
    )
    builder.build()
    _check(recorder, {"stateful-process-1", "stateful-process-2", "stateless-processValues"}, 1, 2)


def test_wrap_processors_for_stream_reduce() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForStreamReduce"""
    builder, recorder = _recording_builder()
    (
        builder.stream("input", Consumed(name="source"))
        .group_by(lambda k, v: k, Grouped.as_("groupBy"))
        .reduce(lambda a, b: a, Named.as_("reduce"), Materialized.as_("store"))
        .to_stream(Named.as_("toStream"))
        .to("output", Produced(name="sink"))
    )
    builder.build()
    _check(recorder, {"groupBy", "groupBy-repartition-filter", "reduce", "toStream"}, 1, 1)


def test_wrap_processors_for_stream_aggregate() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForStreamAggregate"""
    builder, recorder = _recording_builder()
    (
        builder.stream("input", Consumed(name="source"))
        .group_by_key()
        .count(Named.as_("count"))
        .to_stream(Named.as_("toStream"))
        .to("output", Produced(name="sink"))
    )
    builder.build()
    _check(recorder, {"count", "toStream"}, 1, 1)


def test_wrap_processors_for_suppress() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForSuppress"""
    builder, recorder = _recording_builder()
    (
        builder.stream("input", Consumed(name="source"))
        .group_by_key()
        .count(Named.as_("count"))
        .suppress(
            Suppressed.until_time_limit(timedelta(seconds=10), BufferConfig.unbounded()).with_name(
                "suppressed"
            )
        )
        .to_stream(Named.as_("toStream"))
        .to("output", Produced(name="sink"))
    )
    builder.build()
    _check(recorder, {"count", "toStream", "suppressed"}, 2, 2)


@pytest.mark.parametrize(
    "windows",
    [
        TimeWindows.of_size_with_no_grace(DAY),
        SlidingWindows.of_time_difference_with_no_grace(DAY),
        SessionWindows.of_inactivity_gap_with_no_grace(DAY),
    ],
    ids=["TimeWindow", "SlidingWindow", "SessionWindow"],
)
def test_wrap_processors_for_windowed_stream_aggregate(windows: Any) -> None:
    """StreamsBuilderTest.shouldWrapProcessorsFor{Time,Sliding,Session}WindowStreamAggregate"""
    builder, recorder = _recording_builder()
    (
        builder.stream("input", Consumed(name="source"))
        .group_by_key()
        .windowed_by(windows)
        .count(Named.as_("count"))
        .to_stream(Named.as_("toStream"))
        .to("output", Produced(name="sink"))
    )
    builder.build()
    _check(recorder, {"count", "toStream"}, 1, 1)


def test_wrap_processors_for_cogrouped_stream_aggregate() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForCoGroupedStreamAggregate"""
    builder, recorder = _recording_builder()
    grouped1 = builder.stream("one", Consumed(name="source-1")).group_by_key(Grouped.as_("groupByKey-1"))
    grouped2 = builder.stream("two", Consumed(name="source-2")).group_by_key(Grouped.as_("groupByKey-2"))
    (
        grouped1.cogroup(lambda k, v, a: a + v)
        .cogroup(grouped2, lambda k, v, a: a + v)
        .aggregate(lambda: "", Named.as_("aggregate"), Materialized.as_("store"))
        .to_stream(Named.as_("toStream"))
        .to("output", Produced(name="sink"))
    )
    builder.build()
    names = {"aggregate-cogroup-agg-0", "aggregate-cogroup-agg-1", "aggregate-cogroup-merge", "toStream"}
    _check(recorder, names, 1, 2)


def test_wrap_processors_for_map_values_with_materialized_store() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForMapValuesWithMaterializedStore"""
    builder, recorder = _recording_builder()
    (
        builder.table("input", Consumed(name="source-table"))
        .map_values(lambda v: None, Named.as_("map-values"), Materialized.as_("map-values-store"))
        .to_stream(Named.as_("to-stream"))
        .to("output-topic", Produced(name="sink"))
    )
    builder.build()
    _check(recorder, {"source-table", "map-values", "to-stream"}, 1, 1)


def test_wrap_processor_and_store_for_filter_table() -> None:
    """StreamsBuilderTest.shouldWrapProcessorAndStoreForFilterTable"""
    builder, recorder = _recording_builder()
    (
        builder.table("input", Consumed(name="source-table"))
        .filter(lambda k, v: True, Named.as_("filter"), Materialized.as_("filter"))
        .to_stream(Named.as_("to-stream"))
        .to("output-topic", Produced(name="sink"))
    )
    builder.build()
    _check(recorder, {"source-table", "filter", "to-stream"}, 1, 1)


@pytest.mark.parametrize("operation", ["count", "reduce"])
def test_wrap_processors_for_table_aggregate_and_reduce(operation: str) -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForTableAggregate / shouldWrapProcessorsForTableReduce"""
    builder, recorder = _recording_builder()
    grouped = builder.table("input", Consumed(name="source-table")).group_by(
        lambda k, v: (k, v), Grouped.as_("groupBy")
    )
    if operation == "count":
        table = grouped.count(Named.as_("count"))
    else:
        reducer = lambda a, b: ""  # noqa: E731 - Java's (l, r) -> ""
        table = grouped.reduce(reducer, reducer, Named.as_("reduce"), Materialized.as_("store"))
    table.to_stream(Named.as_("toStream")).to("output", Produced(name="sink"))
    builder.build()
    _check(recorder, {"source-table", "groupBy", operation, "toStream"}, 2, 2)


def test_wrap_processors_for_stateless_operators() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForStatelessOperators"""
    builder, recorder = _recording_builder()
    (
        builder.stream("input", Consumed(name="source"))
        .filter(lambda k, v: True, Named.as_("filter-stream"))
        .map(lambda k, v: (k, v), Named.as_("map"))
        .select_key(lambda k, v: k, Named.as_("selectKey"))
        .peek(lambda k, v: None, Named.as_("peek"))
        .flat_map_values(lambda v: [], Named.as_("flatMap"))
        .to("output", Produced(name="sink"))
    )
    builder.build()
    _check(recorder, {"filter-stream", "map", "selectKey", "peek", "flatMap"}, 0, 0)


def test_wrap_processors_when_multiple_table_operators() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsWhenMultipleTableOperators"""
    builder, recorder = _recording_builder()
    (
        builder.stream("input", Consumed(name="source"))
        .to_table(Named.as_("to-table"))
        .map_values(lambda v: v, Named.as_("map-values"))
        .map_values(lambda v: v, Named.as_("map-values-stateful"), Materialized.as_("map-values-stateful"))
        .filter(lambda k, v: True, Named.as_("filter-table"))
        .filter(
            lambda k, v: True,
            Named.as_("filter-table-stateful"),
            Materialized.as_("filter-table-stateful"),
        )
        .to_stream(Named.as_("to-stream"))
        .to("output", Produced(name="sink"))
    )
    builder.build()
    names = {"to-table", "map-values", "map-values-stateful", "filter-table", "filter-table-stateful"}
    names.add("to-stream")
    _check(recorder, names, 2, 2)


@pytest.mark.parametrize("materialized", [False, True], ids=["Unmaterialized", "Materialized"])
def test_wrap_processors_for_source_table(materialized: bool) -> None:
    """StreamsBuilderTest.shouldWrapProcessorsFor{Unmaterialized,Materialized}SourceTable"""
    builder, recorder = _recording_builder()
    table = (
        builder.table("input", Consumed(name="source"), Materialized.as_("store"))
        if materialized
        else builder.table("input", Consumed(name="source"))
    )
    table.to_stream(Named.as_("toStream")).to("output", Produced(name="sink"))
    builder.build()
    _check(recorder, {"source", "toStream"}, int(materialized), int(materialized))


@pytest.mark.parametrize(
    ("join", "this_kind", "other_kind", "stores"),
    [
        ("join", "JOINTHIS", "JOINOTHER", (2, 4)),
        ("left_join", "JOINTHIS", "OUTEROTHER", (3, 6)),
        ("outer_join", "OUTERTHIS", "OUTEROTHER", (3, 6)),
    ],
    ids=["Inner", "Left", "Outer"],
)
def test_wrap_processors_for_stream_stream_join(
    join: str, this_kind: str, other_kind: str, stores: tuple[int, int]
) -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForStreamStream{Inner,Left,Outer}Join"""
    builder, recorder = _recording_builder()
    stream1 = builder.stream("input-1", Consumed(name="source-1"))
    stream2 = builder.stream("input-2", Consumed(name="source-2"))
    windows = JoinWindows.of_time_difference_and_grace(DAY, DAY)
    store_named = StreamJoined(store_name="ss-join")  # Java's StreamJoined.as("ss-join")
    joined = getattr(stream1, join)(stream2, lambda a, b: f"{a}+{b}", windows, store_named)
    joined.to("output", Produced(name="sink"))
    builder.build()
    names = {
        f"KSTREAM-{this_kind}-0000000004",
        f"KSTREAM-{other_kind}-0000000005",
        "KSTREAM-WINDOWED-0000000003",
        "KSTREAM-WINDOWED-0000000002",
        "KSTREAM-MERGE-0000000006",
    }
    _check(recorder, names, *stores)


@pytest.mark.parametrize("optimize", [False, True], ids=["", "WithSharedStoreOptimization"])
def test_wrap_processors_for_stream_stream_self_join(optimize: bool) -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForStreamStreamSelfJoin[WithSharedStoreOptimization]"""
    builder, recorder = _recording_builder(**({"topology_optimization": "all"} if optimize else {}))
    stream1 = builder.stream("input", Consumed(name="source"))
    windows = JoinWindows.of_time_difference_with_no_grace(DAY)
    stream1.join(stream1, lambda a, b: f"{a}+{b}", windows, StreamJoined(store_name="ss-join")).to(
        "output", Produced(name="sink")
    )
    builder.build()
    if optimize:
        _check(recorder, {"KSTREAM-WINDOWED-0000000001", "KSTREAM-MERGE-0000000005"}, 1, 2)
    else:
        names = {
            "KSTREAM-JOINTHIS-0000000003",
            "KSTREAM-JOINOTHER-0000000004",
            "KSTREAM-WINDOWED-0000000001",
            "KSTREAM-WINDOWED-0000000002",
            "KSTREAM-MERGE-0000000005",
        }
        _check(recorder, names, 2, 4)


def test_wrap_processors_for_stream_table_join() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForStreamTableJoin"""
    builder, recorder = _recording_builder()
    stream = builder.stream("input", Consumed(name="source-stream"))
    table = builder.table("input-table", Consumed(name="source-table"))
    stream.join(table, lambda a, b: f"{a}+{b}", Joined(name="st-join")).to("output", Produced(name="sink"))
    builder.build()
    _check(recorder, {"source-table", "st-join"}, 1, 1)


def test_wrap_processors_for_stream_table_join_with_grace_period() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForStreamTableJoinWithGracePeriod: the versioned
    table's store and the join's buffer"""
    builder, recorder = _recording_builder()
    stream = builder.stream("input", Consumed(name="source-stream"))
    store = Stores.persistent_versioned_key_value_store("table-store", 24 * 3600 * 1000)
    table = builder.table("input-table", Consumed(name="versioned-source-table"), Materialized.as_(store))
    joined = Joined(name="st-join").with_grace_period(DAY)
    stream.join(table, lambda a, b: f"{a}+{b}", joined).to("output", Produced(name="sink"))
    builder.build()
    _check(recorder, {"versioned-source-table", "st-join"}, 2, 2)


@pytest.mark.skip(
    reason="StreamsBuilderTest.shouldWrapProcessorsForStreamStreamOuterJoinWithoutSpuriousResultsFix: "
    "needs Java's deprecated JoinWindows.of (a join without the outer-join store), which this "
    "project does not offer"
)
def test_wrap_processors_for_stream_stream_outer_join_without_spurious_results_fix() -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForStreamStreamOuterJoinWithoutSpuriousResultsFix"""


@pytest.mark.parametrize("join", ["join", "left_join", "outer_join"])
def test_wrap_processors_for_table_table_join(join: str) -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForTableTable{Inner,Left,Outer}Join"""
    builder, recorder = _recording_builder()
    t1 = builder.table("input1", Consumed(name="input1"))
    t2 = builder.table("input2", Consumed(name="input2"))
    named = Named.as_("join-processor")
    joined = getattr(t1, join)(t2, lambda a, b: f"{a}{b}", named, Materialized.as_("the_join"))
    joined.to_stream(Named.as_("toStream")).to("output", Produced(name="sink"))
    builder.build()
    names = {"input1", "input2", "join-processor-join-this", "join-processor-join-other"}
    _check(recorder, names | {"join-processor", "toStream"}, 3, 3)


@pytest.mark.parametrize(("join", "prefix"), [("join", "join"), ("left_join", "l-join")])
def test_wrap_processors_for_foreign_key_join(join: str, prefix: str) -> None:
    """StreamsBuilderTest.shouldWrapProcessorsForForeignKey{Inner,Left}Join"""
    builder, recorder = _recording_builder()
    left = builder.table("input1", Consumed(name="input1"))
    right = builder.table("input2", Consumed(name="input2"))
    materialized = Materialized.as_("materialized-store").with_value_serde(S)
    joined = getattr(left, join)(
        right, lambda v: v, lambda a, b: f"{a}{b}", TableJoined.as_(prefix), materialized
    )
    joined.to_stream(Named.as_("toStream")).to("output", Produced(name="sink"))
    builder.build()
    suffixes = [
        "foreign-join-subscription",
        "subscription-join-foreign",
        "subscription-registration-processor",
        "subscription-receive",
        "result",
        "subscription-response-resolver",
    ]
    _check(recorder, {"input1", "input2", "toStream"} | {f"{prefix}-{s}" for s in suffixes}, 4, 5)


# -- TopologyTest, InternalTopologyBuilderTest, StreamsConfigTest ------------------------------


def test_wrap_processors_processor_api() -> None:
    """TopologyTest.shouldWrapProcessors"""
    recorder = WrapperRecorder()
    topology = Topology(_config(RecordingProcessorWrapper(recorder)))
    topology.add_source("source", "topic")
    topology.add_processor("p1", _Printing, "source")
    topology.add_processor("p2", _Printing, "p1")
    topology.add_processor("p3", _Printing, "p2")
    assert recorder.num_wrapped_processors == 3
    assert recorder.wrapped_processor_names == {"p1", "p2", "p3"}


class _Throwing(Processor):
    def process(self, record: Record) -> None:
        raise RuntimeError("oops, don't call process on me!")


class _ThrowingFixedKey(FixedKeyProcessor):
    def process(self, record: FixedKeyRecord) -> None:
        raise RuntimeError("oops, don't call process on me!")


class _DoNothing(Processor):
    def process(self, record: Record) -> None:
        pass


class _DoNothingFixedKey(FixedKeyProcessor):
    def process(self, record: FixedKeyRecord) -> None:
        pass


class ProcessorSkippingWrapper(ProcessorWrapper):
    """InternalTopologyBuilderTest.ProcessorSkippingWrapper: every processor does nothing."""

    def wrap_processor_supplier(self, processor_name: str, supplier: Callable[[], Any]) -> Any:
        return _DoNothing

    def wrap_fixed_key_processor_supplier(self, processor_name: str, supplier: Callable[[], Any]) -> Any:
        return _DoNothingFixedKey


SKIPPING = f"{__name__}.ProcessorSkippingWrapper"


def test_wrap_processor_supplier() -> None:
    """InternalTopologyBuilderTest.shouldWrapProcessorSupplier: the wrapped supplier's processor
    is what the topology runs (here through the test driver)."""
    topology = Topology(_config(ProcessorSkippingWrapper))
    topology.add_source("source", "input").add_processor("name", _Throwing, "source")
    with pytest.raises(RuntimeError):
        _Throwing().process(Record("key", "value", 0))
    config = {"default_key_serde": "string", "default_value_serde": "string"}
    with TopologyTestDriver(topology, config) as driver:
        driver.create_input_topic("input", S, S).pipe_input("key", "value", 0)  # does not raise


def test_wrap_fixed_key_processor_supplier() -> None:
    """InternalTopologyBuilderTest.shouldWrapFixedKeyProcessorSupplier (class name form)"""
    builder = StreamsBuilder(_config(SKIPPING))
    builder.stream("input").process_values(_ThrowingFixedKey).to("output")
    config = {"default_key_serde": "string", "default_value_serde": "string"}
    with TopologyTestDriver(builder.build(), config) as driver:
        driver.create_input_topic("input", S, S).pipe_input("key", "value", 0)  # does not raise
        assert driver.create_output_topic("output", S, S).read_values_to_list() == []


def test_throw_on_invalid_processor_wrapper_class_name() -> None:
    """InternalTopologyBuilderTest.shouldThrowOnInvalidProcessorWrapperClassName"""
    with pytest.raises(ValueError, match="processor_wrapper"):
        _config("org.apache.kafka.streams.NotAWrapper")
    with pytest.raises(ValueError, match="processor_wrapper"):
        _config(f"{__name__}.WrapperRecorder")  # a class, but not a ProcessorWrapper


def test_configure_processor_wrapper_with_class() -> None:
    """StreamsConfigTest.shouldAllowConfiguringProcessorWrapperWithClass(Name): a class is made
    and configured with the application's settings once per topology."""
    for setting in (RecordingProcessorWrapper, f"{__name__}.RecordingProcessorWrapper"):
        topology = Topology(_config(setting))
        wrapper = topology._wrapper
        assert isinstance(wrapper, RecordingProcessorWrapper)
        assert wrapper.configs is not None and wrapper.configs["application_id"] == "dummy-app-id"
    assert StreamsConfig(application_id="a", bootstrap_servers="localhost:9092").processor_wrapper is None


# -- run time: what a wrapper returns is what runs ------------------------------------------------


class _Tracing(Processor):
    """Forwards what its delegate forwards, each value tagged with the node's name."""

    def __init__(self, name: str, delegate: Any, trace: list[str]) -> None:
        self.name, self.delegate, self.trace = name, delegate, trace

    def init(self, context: ProcessorContext) -> None:
        self.delegate.init(context)

    def process(self, record: Record) -> None:
        self.trace.append(self.name)
        self.delegate.process(record)

    def close(self) -> None:
        self.delegate.close()


class TracingWrapper(ProcessorWrapper):
    def __init__(self) -> None:
        self.trace: list[str] = []

    def wrap_processor_supplier(self, processor_name: str, supplier: Callable[[], Any]) -> Any:
        return lambda: _Tracing(processor_name, supplier(), self.trace)

    def wrap_fixed_key_processor_supplier(self, processor_name: str, supplier: Callable[[], Any]) -> Any:
        return supplier


def test_wrapped_dsl_processors_run_and_keep_their_results() -> None:
    """Every DSL processor a record passes runs inside the wrapper's processor, stateless and
    stateful ones alike, and the output is what it is without a wrapper."""
    wrapper = TracingWrapper()
    builder = StreamsBuilder(_config(wrapper))
    (
        builder.stream("input", Consumed(name="source"))
        .filter(lambda k, v: v != "drop", Named.as_("filter"))
        .map_values(str.upper, Named.as_("upper"))
        .group_by_key()
        .count(Named.as_("count"), Materialized.as_("counts"))
        .to_stream(Named.as_("toStream"))
        .to("output", Produced(name="sink"))
    )
    config = {"default_key_serde": "string", "default_value_serde": "string"}
    with TopologyTestDriver(builder.build(), config) as driver:
        source = driver.create_input_topic("input", S, S)
        for value in ("a", "drop", "b"):
            source.pipe_input("k", value, 0)
        output = driver.create_output_topic("output", S, _long())
        assert output.read_key_values_to_list() == [("k", 1), ("k", 2)]
        assert driver.get_key_value_store("counts").get("k") == 2
    passed = ["filter", "upper", "count", "toStream"]
    assert wrapper.trace == [*passed, "filter", *passed]


def _long() -> Any:
    from platform_streams.serde import Long

    return Long()
