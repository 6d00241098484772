"""The fusion code generator: stateless chains become straight-line Python, one function per source."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Produced
from platform_streams.processor.fusion import node_of_traceback
from platform_streams.runtime.tasks.task import StreamTask
from platform_streams.serde import Integer, String
from platform_streams.testing.records import DriverRecord
from tests.support.tasks import Collector, build_tasks

S, INT = String(), Integer()
ENTRY_CALL = re.compile(r"\b_e\d+\(")


def _source_text(fn: Any) -> str:
    """A generated function's source without the node comments and node-name suffixes
    of bound names (``_f1_KSTREAM_FILTER_0000000001`` -> ``_f1``), as the shapes below expect."""
    text: str = fn.__ps_source__
    lines = [line.split("  # ", 1)[0] for line in text.splitlines()]
    return "\n".join(re.sub(r"\b(_[a-z]+\d+)_\w+", r"\1", line) for line in lines)


def _tasks(topology: Topology, tmp_path: Path) -> tuple[list[StreamTask], Collector]:
    return build_tasks(topology, tmp_path, "fuse", default_key_serde=S, default_value_serde=INT)


def _feed(task: StreamTask, topic: str, *values: int) -> None:
    records = [DriverRecord(topic, 0, i, b"k", INT.serialize(v), 10 + i) for i, v in enumerate(values)]
    task.add_records((topic, 0), records)
    task.process(len(records))


def test_filter_map_values_to_chain_is_one_function_without_entry_calls(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=INT)).filter(lambda k, v: v > 1).map_values(
        lambda v: v * 3
    ).to("out", Produced(key_serde=S, value_serde=INT))
    (task,), collector = _tasks(builder.build(), tmp_path)
    source = _source_text(task.graph.sources["in"])
    assert not ENTRY_CALL.search(source), source
    assert source.count("def ") == 1
    lines = [line.strip() for line in source.splitlines()]
    # each node's own call is guarded (its error is the node's: Kafka's ProcessorNode.process)
    assert any(re.fullmatch(r"try: c\d+ = _f\d+\(k, v\)", line) for line in lines)
    assert any(re.fullmatch(r"if c\d+:", line) for line in lines)
    assert any(re.fullmatch(r"if _nodefail\d+\(nx, 'KSTREAM-FILTER-0000000001'\):", line) for line in lines)
    assert any(re.fullmatch(r"try: v\d+ = _f\d+\(v\)", line) for line in lines)
    assert any(
        re.fullmatch(r"_send\d+\(_t\d+, _ks\d+\(k\), _vs\d+\(v\d+\), ts, h, None\)", line) for line in lines
    )
    _feed(task, "in", 1, 2, 5)
    assert [(t, k, INT.deserialize(v), ts) for t, k, v, ts, _h, _p in collector.sent] == [
        ("out", b"k", 6, 11),
        ("out", b"k", 15, 12),
    ]


def test_merge_with_two_parents_is_one_shared_entry(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    a = builder.stream("a", Consumed(key_serde=S, value_serde=INT)).map_values(lambda v: v + 100)
    b = builder.stream("b", Consumed(key_serde=S, value_serde=INT))
    a.merge(b, named="m").map_values(lambda v: -v).to("out")
    (task,), collector = _tasks(builder.build(), tmp_path)
    sources = {t: _source_text(f) for t, f in task.graph.sources.items()}
    assert set(sources) == {"a", "b"}
    for text in sources.values():
        assert len(ENTRY_CALL.findall(text)) == 1, text  # each source calls the merge once
    merge_source = _source_text(task.graph.entry("m"))
    assert not ENTRY_CALL.search(merge_source)  # the merge inlines what follows it
    assert task.graph.entry("m") is task.graph.entry("m")  # compiled once, shared by both parents
    _feed(task, "a", 1)
    _feed(task, "b", 2)
    assert [INT.deserialize(v) for _t, _k, v, *_ in collector.sent] == [-101, -2]


def test_branch_codegen_is_if_elif_else_with_first_match(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    branches = (
        builder.stream("in", Consumed(key_serde=S, value_serde=INT))
        .split(named="s-")
        .branch(lambda k, v: v < 10)
        .branch(lambda k, v: v < 100)
        .default_branch()
    )
    for name, stream in branches.items():
        assert stream is not None
        stream.to(name)
    (task,), collector = _tasks(builder.build(), tmp_path)
    text = _source_text(task.graph.sources["in"])
    keywords = [
        line.strip().split(" ")[0]
        for line in text.splitlines()
        if re.match(r"\s+(if|elif|else)\b", line) and "_nodefail" not in line
    ]
    assert keywords[-3:] == ["if", "elif", "else:"]
    assert not ENTRY_CALL.search(text)
    _feed(task, "in", 5, 50, 500)
    assert [t for t, *_ in collector.sent] == ["s-1", "s-2", "s-0"]


def test_flat_map_codegen_is_a_loop_and_empty_blocks_stay_valid(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=INT))
    stream.flat_map_values(lambda v: range(v)).to("out")
    stream.filter(lambda k, v: True)  # a filter with no children: "if ...: pass"
    stream.split().branch(lambda k, v: False).no_default_branch()
    (task,), collector = _tasks(builder.build(), tmp_path)
    text = _source_text(task.graph.sources["in"])
    assert re.search(r"for v\d+ in _f\d+\(v\):", text)
    assert "pass" in text
    _feed(task, "in", 3)
    assert [INT.deserialize(v) for _t, _k, v, *_ in collector.sent] == [0, 1, 2]


def test_sinks_with_partitioner_or_extractor_and_processors_are_called_through_entries(
    tmp_path: Path,
) -> None:
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=INT))
    stream.to("p", Produced(partitioner=lambda topic, k, v, n: n - 1))
    stream.to(lambda k, v, meta: f"dyn-{meta.offset}")
    (task,), collector = _tasks(builder.build(), tmp_path)
    text = _source_text(task.graph.sources["in"])
    assert len(ENTRY_CALL.findall(text)) == 2
    _feed(task, "in", 7)
    assert [(t, p) for t, _k, _v, _ts, _h, p in collector.sent] == [("p", 2), ("dyn-0", None)]


def test_internal_topics_are_prefixed_in_generated_sinks_and_sources(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=INT)).repartition().to("out")
    tasks, collector = _tasks(builder.build(), tmp_path)
    assert [list(t.graph.sources) for t in tasks] == [
        ["in"],
        ["fuse-KSTREAM-REPARTITION-0000000001-repartition"],
    ]
    _feed(tasks[0], "in", 4)
    assert [t for t, *_ in collector.sent] == ["fuse-KSTREAM-REPARTITION-0000000001-repartition"]


def test_node_of_traceback_maps_generated_lines_to_nodes(tmp_path: Path) -> None:
    def boom(v: int) -> int:
        raise ValueError("boom")

    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=INT)).filter(
        lambda k, v: True, "first"
    ).map_values(boom, "second").to("out")
    (task,), _ = _tasks(builder.build(), tmp_path)
    record = DriverRecord("in", 0, 0, b"k", INT.serialize(1), 1)
    with pytest.raises(ValueError) as info:
        task.graph.sources["in"](record)
    assert node_of_traceback(info.value.__traceback__) == "second"
    assert node_of_traceback(None) is None
    try:
        raise RuntimeError("not from fused code")
    except RuntimeError as exc:
        assert node_of_traceback(exc.__traceback__) is None


def test_deserialization_failure_in_generated_source_goes_to_the_task_handler(tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=INT)).to("out")
    (task,), collector = _tasks(builder.build(), tmp_path)
    from platform_streams.errors import DeserializationError

    task.add_records(("in", 0), [DriverRecord("in", 0, 0, b"k", b"\x01\x02", 1)])  # 2 bytes: not an int
    with pytest.raises(DeserializationError):
        task.process(1)
    assert collector.sent == []


def test_a_stream_aggregation_is_one_step_call_from_the_fused_source(tmp_path: Path) -> None:
    """``NodeProcessor.fused_step``: the source, compiled again after the processors' init,
    calls the aggregation's one-call step (``direct_aggregate``) and its ``process`` only
    for what the step leaves: here a None value, which ``process`` drops (KStreamAggregate)."""
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=INT)).group_by_key().count().to_stream().to(
        "out", Produced(key_serde=S, value_serde=INT)
    )
    (task,), collector = _tasks(builder.build(), tmp_path)
    source = _source_text(task.graph.sources["in"])
    lines = [line.strip() for line in source.splitlines()]
    step_call = re.compile(r"if k is None or v is None or not _step\d+\(k, v, ts\):")
    assert any(step_call.fullmatch(line) for line in lines), source
    assert any(re.fullmatch(r"_e\d+\(k, v, ts, h\)", line) for line in lines)
    values = [INT.serialize(1), None, INT.serialize(2)]
    records = [DriverRecord("in", 0, i, b"k", v, 10 + i) for i, v in enumerate(values)]
    task.add_records(("in", 0), records)
    task.process(3)
    assert task.context.dropped_records == 1
    task.flush_caches()
    sent = [(t, k, INT.deserialize(v)) for t, k, v, _ts, _h, _p in collector.sent if t == "out"]
    assert sent == [("out", b"k", 2)]
