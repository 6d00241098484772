"""The Processor API through the TopologyTestDriver: forwarding, punctuation, metadata."""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Produced
from platform_streams.errors import InvalidStateStoreError, ProcessorError, TopologyError
from platform_streams.processor import Cancellable, Processor, PunctuationType, Record, RecordMetadata
from platform_streams.processor.node import NodeProcessor
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver

S, INT = String(), Integer()
CONFIG: dict[str, Any] = {"default_key_serde": "string", "default_value_serde": "integer"}


def _papi(processor: Any, *children: str) -> Topology:
    """in -> source -> proc -> one sink per child name (sink ``<child>`` writes topic ``<child>``)."""
    topology = Topology()
    topology.add_source("source", "in")
    topology.add_processor("proc", processor, "source")
    for child in children:
        topology.add_sink(child, child, "proc")
    return topology


class Router(Processor):
    """Forwards to all children, or to the child named by the value's parity."""

    def process(self, record: Record) -> None:
        if record.value < 0:
            self.context.forward(record.with_value(-record.value))
        else:
            self.context.forward(
                record.with_key(record.key.upper()), "even" if record.value % 2 == 0 else "odd"
            )


def test_forward_to_all_children_and_to_one_named_child() -> None:
    with TopologyTestDriver(_papi(Router, "even", "odd"), CONFIG) as driver:
        source = driver.create_input_topic("in", S, INT)
        for key, value in [("a", 1), ("b", 2), ("c", -3)]:
            source.pipe_input(key, value)
        even = driver.create_output_topic("even", S, INT).read_key_values_to_list()
        odd = driver.create_output_topic("odd", S, INT).read_key_values_to_list()
    assert even == [("B", 2), ("c", 3)]
    assert odd == [("A", 1), ("c", 3)]


def test_forward_to_an_unknown_child_names_the_children() -> None:
    class Bad(Processor):
        def process(self, record: Record) -> None:
            self.context.forward(record, "nope")

    # a StreamsError is a programming error: it is raised as is, not given to the handler
    with (
        TopologyTestDriver(
            _papi(Bad, "out"), {**CONFIG, "processing_exception_handler": "log_and_continue"}
        ) as d,
        pytest.raises(TopologyError, match=r"'proc' cannot forward to 'nope'.*\['out'\]"),
    ):
        d.create_input_topic("in", S, INT).pipe_input("k", 1)


class Metadata(Processor):
    seen: list[tuple[RecordMetadata | None, int, str]] = []

    def init(self, context: Any) -> None:
        super().init(context)
        context.schedule(10, PunctuationType.STREAM_TIME, self.punctuate)

    def process(self, record: Record) -> None:
        Metadata.seen.append((self.context.record_metadata(), record.timestamp, str(self.context.task_id)))
        self.context.forward(record)

    def punctuate(self, timestamp: int) -> None:
        Metadata.seen.append((self.context.record_metadata(), timestamp, "punctuation"))


def test_record_metadata_names_the_input_record_and_is_none_in_punctuation() -> None:
    Metadata.seen = []
    with TopologyTestDriver(_papi(Metadata, "out"), {**CONFIG, "application_id": "meta-app"}) as driver:
        source = driver.create_input_topic("in", S, INT)
        source.pipe_input("a", 1, timestamp_ms=5)
        source.pipe_input("b", 2, timestamp_ms=12)
        assert driver.create_output_topic("out", S, INT).read_key_values_to_list() == [("a", 1), ("b", 2)]
    assert Metadata.seen == [
        (RecordMetadata("in", 0, 0), 5, "0_0"),
        (None, 5, "punctuation"),  # stream-time punctuation is aligned to 0: the first record fires it
        (RecordMetadata("in", 0, 1), 12, "0_0"),
        (None, 12, "punctuation"),
    ]


class Punctuating(Processor):
    """Emits a count on every punctuation; stream-time and wall-clock schedules side by side."""

    def __init__(self, kind: PunctuationType, interval: int) -> None:
        self.kind = kind
        self.interval = interval
        self.count = 0
        self.handle: Cancellable | None = None

    def init(self, context: Any) -> None:
        super().init(context)
        self.handle = context.schedule(self.interval, self.kind, self.emit)

    def process(self, record: Record) -> None:
        self.count += 1
        if record.value == 99 and self.handle is not None:
            self.handle.cancel()

    def emit(self, timestamp: int) -> None:
        self.context.forward(Record(self.kind.value, self.count, timestamp))


def _punctuation_driver(kind: PunctuationType, interval: int) -> TopologyTestDriver:
    return TopologyTestDriver(_papi(lambda: Punctuating(kind, interval), "out"), CONFIG)


def test_stream_time_punctuation_fires_as_stream_time_passes_each_interval() -> None:
    with _punctuation_driver(PunctuationType.STREAM_TIME, 10) as driver:
        source = driver.create_input_topic("in", S, INT)
        out = driver.create_output_topic("out", S, INT)
        assert out.is_empty()  # no data, no stream time: nothing fires
        source.pipe_input("k", 1, timestamp_ms=3)  # aligned to 0 (as in Kafka Streams): fires at once
        assert [(r.value, r.timestamp) for r in out.read_records_to_list()] == [(1, 3)]
        source.pipe_input("k", 1, timestamp_ms=9)
        assert out.is_empty()
        source.pipe_input("k", 1, timestamp_ms=10)  # next due at 10, 20, ...
        assert [(r.value, r.timestamp) for r in out.read_records_to_list()] == [(3, 10)]
        source.pipe_input("k", 1, timestamp_ms=5)  # out of order: stream time stays 10
        driver.advance_wall_clock_time(1_000)  # wall clock does not drive stream-time punctuation
        assert out.is_empty()
        source.pipe_input("k", 1, timestamp_ms=45)  # a jump fires once, not once per interval
        assert [(r.value, r.timestamp) for r in out.read_records_to_list()] == [(5, 45)]
        source.pipe_input("k", 1, timestamp_ms=49)
        assert out.is_empty()
        source.pipe_input("k", 1, timestamp_ms=50)
        assert [r.value for r in out.read_records_to_list()] == [7]


def test_wall_clock_punctuation_fires_when_the_driver_clock_advances() -> None:
    with _punctuation_driver(PunctuationType.WALL_CLOCK_TIME, 100) as driver:
        source = driver.create_input_topic("in", S, INT)
        out = driver.create_output_topic("out", S, INT)
        source.pipe_input("k", 1, timestamp_ms=10_000)  # record time does not drive it
        assert out.is_empty()
        driver.advance_wall_clock_time(99)
        assert out.is_empty()
        driver.advance_wall_clock_time(1)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            ("wall_clock_time", 1, 100)
        ]
        driver.advance_wall_clock_time(250)  # behind by 2.5 intervals: fires once
        assert [r.timestamp for r in out.read_records_to_list()] == [350]
        source.pipe_input("k", 99)  # cancels the schedule
        driver.advance_wall_clock_time(1_000)
        assert out.is_empty()


def test_wall_clock_time_cannot_go_backwards() -> None:
    with _punctuation_driver(PunctuationType.WALL_CLOCK_TIME, 100) as driver, pytest.raises(ValueError):
        driver.advance_wall_clock_time(-1)


def test_punctuation_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval"):
        _punctuation_driver(PunctuationType.STREAM_TIME, 0)


def test_failing_punctuator_raises_processor_error_naming_the_node() -> None:
    class Failing(Processor):
        def init(self, context: Any) -> None:
            super().init(context)
            context.schedule(5, PunctuationType.STREAM_TIME, self.boom)

        def process(self, record: Record) -> None:
            pass

        def boom(self, timestamp: int) -> None:
            raise RuntimeError("tick failed")

    with TopologyTestDriver(_papi(Failing), CONFIG) as driver, pytest.raises(ProcessorError) as info:
        driver.create_input_topic("in", S, INT).pipe_input("k", 1, timestamp_ms=5)
    assert info.value.node == "proc"
    assert "tick failed" in str(info.value)


def test_processor_lifecycle_init_process_close_one_instance_per_task() -> None:
    events: list[str] = []

    class Tracked(Processor):
        def init(self, context: Any) -> None:
            super().init(context)
            events.append(f"init {context.application_id} {context.task_id}")

        def process(self, record: Record) -> None:
            events.append(f"process {record.key}")

        def close(self) -> None:
            events.append("close")

    with TopologyTestDriver(_papi(Tracked), {**CONFIG, "application_id": "life"}) as driver:
        driver.create_input_topic("in", S, INT).pipe_input("k", 1)
    assert events == ["init life 0_0", "process k", "close"]


def test_supplier_must_return_a_processor() -> None:
    with pytest.raises(TypeError, match=r"must return a platform_streams\.processor\.Processor"):
        TopologyTestDriver(_papi(lambda: object()), CONFIG)


def test_supplier_must_be_callable() -> None:
    with pytest.raises(TopologyError, match="callable"):
        Topology().add_source("s", "in").add_processor("p", 42, "s")  # type: ignore[arg-type]


def test_store_access_requires_a_connection() -> None:
    class Lookup(Processor):
        def process(self, record: Record) -> None:
            self.context.get_state_store("missing")

    with (
        TopologyTestDriver(_papi(Lookup), CONFIG) as driver,
        pytest.raises(InvalidStateStoreError, match="connect"),
    ):
        driver.create_input_topic("in", S, INT).pipe_input("k", 1)


def test_node_processor_works_on_fields_and_requests_commits() -> None:
    class Doubler(NodeProcessor):
        def process(self, key: Any, value: Any, timestamp: int, headers: Any) -> None:
            self.context.commit()
            self.forward(key, value * 2, timestamp + 1, headers)

    with TopologyTestDriver(_papi(Doubler, "out"), CONFIG) as driver:
        driver.create_input_topic("in", S, INT).pipe_input("k", 21, timestamp_ms=100, headers=[("h", b"1")])
        record = driver.create_output_topic("out", S, INT).read_record()
        (task,) = driver._tasks
        assert task.commit_requested
    assert (record.key, record.value, record.timestamp, record.headers) == ("k", 42, 101, [("h", b"1")])


def test_dsl_process_runs_a_processor_between_dsl_operators() -> None:
    class Tag(Processor):
        def process(self, record: Record) -> None:
            self.context.forward(record.with_value(f"{record.value}@{record.timestamp}").with_timestamp(1))

    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=INT))
        .filter(lambda k, v: v > 0)
        .process(Tag, named="tagger")
        .map_values(str.upper)
        .to("out", Produced(key_serde=S, value_serde=S))
    )
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, INT)
        source.pipe_input("a", 0, timestamp_ms=7)
        source.pipe_input("b", 5, timestamp_ms=8)
        records = driver.create_output_topic("out", S, S).read_records_to_list()
    assert [(r.key, r.value, r.timestamp) for r in records] == [("b", "5@8", 1)]


def test_record_copies_and_equality() -> None:
    record = Record("k", 1, 5, [("h", b"v")])
    assert record.with_key("x") == Record("x", 1, 5, [("h", b"v")])
    assert record.with_value(2).value == 2 and record.value == 1
    assert record.with_timestamp(9).timestamp == 9
    assert record.with_headers(None).headers is None
    assert record != record.with_value(3)
    assert hash(record) == hash(record.with_value(3))
    assert "key='k'" in repr(record)


def test_a_schedule_made_inside_process_fires_without_any_refresh(tmp_path: Any) -> None:
    """The worker never re-scans schedules: a stream-time schedule made in ``process`` must
    still fire on the following records (driven here through the bare StreamTask)."""
    from platform_streams import StreamsConfig
    from platform_streams.processor import TaskId
    from platform_streams.runtime.tasks.task import StreamTask
    from platform_streams.testing.records import DriverRecord
    from platform_streams.topology import compile_topology

    fired: list[int] = []

    class Late(Processor):
        def process(self, record: Record) -> None:
            if record.value == 1:
                self.context.schedule(10, PunctuationType.STREAM_TIME, fired.append)

    class Sent:
        def send(self, *args: Any) -> None:
            raise AssertionError("nothing is sent")

        def partition_count(self, topic: str) -> int:
            return 1

    plan = compile_topology(_papi(Late))
    config = StreamsConfig(application_id="late", bootstrap_servers="x:1", state_dir=tmp_path, **CONFIG)
    task = StreamTask(
        TaskId(0, 0),
        plan,
        plan.subtopologies[0],
        config=config,
        collector=Sent(),
        clock_ms=lambda: 0,
        task_dir=tmp_path,
    )
    task.initialize_stores()
    task.initialize_processors()
    task.refresh_punctuation_flags()
    records = [
        DriverRecord("in", 0, i, b"k", INT.serialize(v), ts) for i, (v, ts) in enumerate([(1, 4), (2, 12)])
    ]
    task.add_records(("in", 0), records)
    assert task.process(10) == 2
    assert fired == [4, 12]
    assert task.offsets_to_commit() == {("in", 0): 2}
