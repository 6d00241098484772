"""A fused batch (``processor/fused_source.py``: ``compile_batch``) processes many records in
one call exactly as ``StreamTask.process`` does one at a time with ``fusion=False``.

Kafka Streams' ``StreamTask.process`` handles one record per call (``doProcess``: record
context, the processing exception handler, ``maybePunctuateStreamTime``, then the consumed
offset); here a task with one input partition runs a batch of records in one generated
function, with an aggregation's step on a cached key in line and its values bound once a
batch (``FusedFragment.prologue``). These tests feed hundreds of records per call with a
cache small enough to evict and flush inside a batch, an aggregator that raises on some
records (skipped by ``log_and_continue``), values the String deserializer refuses, and a
stream-time punctuator, and compare everything the task did with the plain path.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced
from platform_streams.errors import ProcessorError
from platform_streams.processor.api import Processor, PunctuationType, Record
from platform_streams.serde import Bytes, Long, String
from platform_streams.testing.records import DriverRecord
from tests.support.tasks import build_tasks
from tests.support.windowed_apps import bytes_windowed_long

B, S, LONG = Bytes(), String(), Long()


def _count_raising(value: str, aggregate: int) -> int:
    if value == "boom":
        raise ValueError("boom")
    return aggregate + 1


def _topology() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=B, value_serde=S))
        .group_by_key(Grouped(key_serde=B, value_serde=S))
        .aggregate(
            lambda: 0,
            lambda k, v, agg: _count_raising(v, agg),
            materialized=Materialized.as_("counts").with_value_serde(LONG),
        )
        .to_stream()
        .to("out", Produced(key_serde=B, value_serde=LONG))
    )
    return builder.build()


def _windowed_topology(final: bool = True) -> Topology:
    """Tumbling windows, emitted when they close or at every update: the window fragment
    (window_fragment.py)."""
    builder = StreamsBuilder()
    bytes_windowed_long(
        builder,
        lambda k, v, agg: _count_raising(v, agg),
        size_ms=60,
        grace_ms=10,
        final=final,
        out_serde=LONG,
        out_value=lambda n: n,
    )
    return builder.build()


def _eager_windowed_topology() -> Topology:
    return _windowed_topology(final=False)


def _records(count: int) -> list[DriverRecord]:
    rng = random.Random(7)
    records = []
    for offset in range(count):
        draw = rng.random()
        value = b"boom" if draw < 0.05 else b"\xff\xfe" if draw < 0.08 else b"x"
        key = b"k%d" % rng.randrange(30)
        timestamp = 1_000 + offset * 3 - rng.randrange(20)
        records.append(DriverRecord("in", 0, offset, key, value, timestamp, [("n", b"%d" % offset)]))
    return records


def _run(tmp_path: Path, fusion: bool, cache_bytes: int, batch: int, topology: Topology) -> tuple[Any, ...]:
    (task,), collector = build_tasks(
        topology,
        tmp_path,
        fusion=fusion,
        statestore_cache_max_bytes=cache_bytes,
        processing_exception_handler="log_and_continue",
        deserialization_exception_handler="log_and_continue",
    )
    assert bool(task.graph.batches) is fusion
    records = _records(400)
    for start in range(0, len(records), batch):
        task.add_records(("in", 0), records[start : start + batch])
        assert task.process(batch) == len(records[start : start + batch])
    task.flush_caches()
    sent = [(topic, key, value, ts, headers) for topic, key, value, ts, headers, _p in collector.sent]
    # no processor keeps the headers of a record it is done with (the window fragment's finally)
    assert all(getattr(p, "_headers", None) is None for p in task.graph.processors.values())
    return sent, task.records_processed, task.records_skipped, dict(task.consumed), task.context.current


@pytest.mark.parametrize("cache_bytes", [10 * 1024 * 1024, 700, 300])
@pytest.mark.parametrize("batch", [1, 50, 400])
@pytest.mark.parametrize("topology", [_topology, _windowed_topology, _eager_windowed_topology])
def test_a_fused_batch_does_what_the_plain_loop_does(
    tmp_path: Path, cache_bytes: int, batch: int, topology: Any
) -> None:
    fused = _run(tmp_path / "fused", True, cache_bytes, batch, topology())
    plain = _run(tmp_path / "plain", False, cache_bytes, 1, topology())
    assert all(".move_to_end" in fn.__ps_source__ for fn in _fused_functions(tmp_path, topology()))
    sent, processed, skipped, consumed, current = fused
    assert processed == 400 and consumed == {("in", 0): 399} and current is None
    assert skipped > 20  # the aggregator's failures and the undecodable values
    assert any(topic == "out" for topic, *_ in sent) and any(t.endswith("-changelog") for t, *_ in sent)
    assert fused == plain


def _fused_functions(tmp_path: Path, topology: Topology) -> list[Any]:
    (task,), _collector = build_tasks(topology, tmp_path / "shape")
    return [*task.graph.sources.values(), *task.graph.batches.values()]


@pytest.mark.parametrize("fusion", [True, False])
def test_a_failing_record_stops_the_batch_before_its_offset(tmp_path: Path, fusion: bool) -> None:
    """``log_and_fail``: the record that raised is not consumed, the ones before it are, and
    the error names the aggregation (the fused code's line map, or the plain node's)."""
    (task,), _collector = build_tasks(_topology(), tmp_path, fusion=fusion)
    values = [b"x"] * 5 + [b"boom"] + [b"x"] * 4
    task.add_records(("in", 0), [DriverRecord("in", 0, i, b"k", v, 10 + i) for i, v in enumerate(values)])
    with pytest.raises(ProcessorError) as failure:
        task.process(10)
    assert task.consumed == {("in", 0): 4}
    assert task.records_processed == 5
    assert task.context.current is None
    assert failure.value.offset == 5
    assert failure.value.node is not None and "KSTREAM-" in failure.value.node
    if fusion:
        assert "AGGREGATE" in failure.value.node


class _EveryTenMs(Processor):
    """Punctuates on stream time every 10 ms, forwarding the stream time it saw."""

    def init(self, context: Any) -> None:
        self.context = context
        context.schedule(10, PunctuationType.STREAM_TIME, self._punctuate)

    def _punctuate(self, timestamp: int) -> None:
        self.context.forward(Record(b"tick", str(timestamp), timestamp))

    def process(self, record: Record) -> None:
        self.context.forward(record)


@pytest.mark.parametrize("fusion", [True, False])
def test_stream_time_punctuation_fires_between_the_records_of_a_batch(tmp_path: Path, fusion: bool) -> None:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=B, value_serde=S))
        .process(_EveryTenMs)
        .to("out", Produced(key_serde=B, value_serde=S))
    )
    (task,), collector = build_tasks(builder.build(), tmp_path, fusion=fusion)
    records = [DriverRecord("in", 0, i, b"k", b"v%d" % i, 4 * i) for i in range(20)]
    task.add_records(("in", 0), records)
    assert task.process(20) == 20
    out = [(key, S.deserialize(value)) for topic, key, value, *_ in collector.sent if topic == "out"]
    # each tick right after the record that moved stream time (records 4 ms apart) to its
    # due time or past it, carrying that stream time (Kafka's PunctuationQueue.mayPunctuate)
    ticks = [i for i, (key, _) in enumerate(out) if key == b"tick"]
    assert len(ticks) == 8 and all(out[i - 1][0] == b"k" for i in ticks)
    assert [value for key, value in out if key == b"tick"] == ["0", "12", "20", "32", "40", "52", "60", "72"]
    assert [out[i - 1][1] for i in ticks] == ["v0", "v3", "v5", "v8", "v10", "v13", "v15", "v18"]


def test_only_a_sub_topology_of_one_source_topic_gets_a_batch(tmp_path: Path) -> None:
    """A task reading two topics picks each next record by timestamp (PartitionGroup), so it
    never runs a batch, and none is compiled for it."""
    builder = StreamsBuilder()
    left = builder.stream("left", Consumed(key_serde=B, value_serde=S))
    left.merge(builder.stream("right", Consumed(key_serde=B, value_serde=S))).to(
        "out", Produced(key_serde=B, value_serde=S)
    )
    (task,), _collector = build_tasks(builder.build(), tmp_path)
    assert sorted(task.graph.sources) == ["left", "right"]
    assert task.graph.batches == {}
