"""Punctuation by stream time and by wall-clock time, as Kafka Streams schedules it.

Kafka Streams' ``StreamTask.schedule``: stream-time punctuation is aligned to 0 (it fires
with the first data, then each time stream time reaches the next multiple of the
interval; a jump fires once), wall-clock punctuation first fires one interval after it
was scheduled. The callback gets the stream time / wall-clock time it fires at, may
forward records (without input record metadata) and use stores, and may cancel its own
schedule. The basics are in ``test_processor_api.py``; this module covers punctuators at
work: with stores, several schedules per processor, self-cancelling, downstream of a
repartition, and wall-clock driven output with no input at all.
"""

from __future__ import annotations

from typing import Any

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Produced
from platform_streams.processor import Cancellable, Processor, PunctuationType, Record
from platform_streams.serde import Long, String
from platform_streams.state import Stores
from platform_streams.testing import TopologyTestDriver

S, L = String(), Long()
STREAM, WALL = PunctuationType.STREAM_TIME, PunctuationType.WALL_CLOCK_TIME


class WordCount(Processor):
    """Kafka Streams' Processor API WordCount: count in a store, emit all counts on punctuation."""

    def __init__(self, kind: PunctuationType, interval: int) -> None:
        self.kind = kind
        self.interval = interval

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("counts")
        context.schedule(self.interval, self.kind, self.emit_all)

    def process(self, record: Record) -> None:
        for word in record.value.split():
            self.store.put(word, (self.store.get(word) or 0) + 1)

    def emit_all(self, timestamp: int) -> None:
        assert self.context.record_metadata() is None  # no input record during punctuation
        for word, count in self.store.all():
            self.context.forward(Record(word, count, timestamp))


def _word_count(kind: PunctuationType, interval: int) -> Topology:
    topology = Topology()
    topology.add_source("source", "lines", key_serde=S, value_serde=S)
    topology.add_processor("count", lambda: WordCount(kind, interval), "source")
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), S, L), "count"
    )
    topology.add_sink("sink", "counts-out", "count", key_serde=S, value_serde=L)
    return topology


def test_stream_time_punctuator_emits_store_contents_per_interval_of_data_time() -> None:
    with TopologyTestDriver(_word_count(STREAM, 1_000)) as driver:
        lines = driver.create_input_topic("lines", S, S)
        out = driver.create_output_topic("counts-out", S, L)
        lines.pipe_input(None, "a b", 500)  # first data: fires at once (aligned to 0)
        assert out.read_key_values_to_map() == {"a": 1, "b": 1}
        lines.pipe_input(None, "a", 999)
        assert out.is_empty()
        lines.pipe_input(None, "c", 1_000)
        records = out.read_records_to_list()
        assert {r.key: r.value for r in records} == {"a": 2, "b": 1, "c": 1}
        assert {r.timestamp for r in records} == {1_000}  # stamped with the stream time


def test_wall_clock_punctuator_emits_without_any_new_input() -> None:
    with TopologyTestDriver(_word_count(WALL, 1_000), initial_wall_clock_ms=10_000) as driver:
        lines = driver.create_input_topic("lines", S, S)
        out = driver.create_output_topic("counts-out", S, L)
        lines.pipe_input(None, "x y x", 1)
        assert out.is_empty()  # data does not drive wall-clock punctuation
        driver.advance_wall_clock_time(1_000)  # scheduled at 10 000: first due at 11 000
        records = out.read_records_to_list()
        assert {r.key: r.value for r in records} == {"x": 2, "y": 1}
        assert {r.timestamp for r in records} == {11_000}
        driver.advance_wall_clock_time(999)
        assert out.is_empty()
        driver.advance_wall_clock_time(1)
        assert out.read_key_values_to_map() == {"x": 2, "y": 1}


class TwoClocks(Processor):
    """One schedule of each type; the stream-time one cancels itself after its third firing."""

    def __init__(self) -> None:
        self.fired: list[tuple[str, int]] = []
        self.stream_handle: Cancellable | None = None

    def init(self, context: Any) -> None:
        super().init(context)
        self.stream_handle = context.schedule(10, STREAM, self.on_stream)
        context.schedule(100, WALL, lambda ts: self.fired.append(("wall", ts)))

    def process(self, record: Record) -> None:
        pass

    def on_stream(self, timestamp: int) -> None:
        self.fired.append(("stream", timestamp))
        if sum(1 for kind, _ in self.fired if kind == "stream") == 3:
            assert self.stream_handle is not None
            self.stream_handle.cancel()


def test_stream_and_wall_clock_schedules_are_independent_and_can_cancel_themselves() -> None:
    instances: list[TwoClocks] = []

    def supplier() -> TwoClocks:
        instances.append(TwoClocks())
        return instances[-1]

    topology = Topology()
    topology.add_source("source", "in", key_serde=S, value_serde=S)
    topology.add_processor("proc", supplier, "source")
    with TopologyTestDriver(topology) as driver:
        topic = driver.create_input_topic("in", S, S)
        topic.pipe_input("k", "v", 0)
        driver.advance_wall_clock_time(100)
        topic.pipe_input("k", "v", 10)
        topic.pipe_input("k", "v", 25)
        driver.advance_wall_clock_time(100)
        topic.pipe_input("k", "v", 30)  # the stream-time schedule cancelled itself at 25
        topic.pipe_input("k", "v", 100)
        (processor,) = instances
        assert processor.fired == [
            ("stream", 0),
            ("wall", 100),
            ("stream", 10),
            ("stream", 25),
            ("wall", 200),
        ]


class Buffering(Processor):
    """Holds records and releases them on wall-clock punctuation (a common PAPI pattern)."""

    def init(self, context: Any) -> None:
        super().init(context)
        self.pending: list[Record] = []
        context.schedule(500, WALL, self.release)

    def process(self, record: Record) -> None:
        self.pending.append(record)

    def release(self, timestamp: int) -> None:
        for record in self.pending:
            self.context.forward(record)
        self.pending.clear()


def test_wall_clock_punctuation_runs_in_every_task_including_after_a_repartition() -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=S))
        .select_key(lambda k, v: v)
        .repartition()
        .process(Buffering)
        .to("out", Produced(key_serde=S, value_serde=S))
    )
    config = {"default_key_serde": "string", "default_value_serde": "string"}
    with TopologyTestDriver(builder.build(), config) as driver:
        topic = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, S)
        topic.pipe_input("k1", "a", 1)
        topic.pipe_input("k2", "b", 2)
        assert out.is_empty()
        driver.advance_wall_clock_time(500)  # the downstream task's punctuator releases both
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            ("a", "a", 1),
            ("b", "b", 2),
        ]
