"""Every stateless DSL operator, end to end through the TopologyTestDriver.

The driver runs the real StreamTask with the real fused code, so these tests cover what
production runs: deserialization, the generated per-source function, sinks and serdes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Branched, Consumed, KStream, Named, Produced, Repartitioned
from platform_streams.serde import Integer, Json, Long, String
from platform_streams.testing import TestRecord, TopologyTestDriver

S = String()
I = Integer()  # noqa: E741 - the Kafka Streams serde name
#: Like Java, value-changing operators drop the value serde: sinks fall back to these defaults.
CONFIG: dict[str, Any] = {"default_key_serde": "string", "default_value_serde": "integer"}


def _stream(builder: StreamsBuilder, topic: str = "in") -> KStream:
    return builder.stream(topic, Consumed(key_serde=S, value_serde=I))


def _run(
    build: Callable[[KStream], None],
    records: list[tuple[Any, Any]],
    outputs: dict[str, tuple[Any, Any]] | None = None,
) -> dict[str, list[tuple[Any, Any]]]:
    """Build ``in -> build(stream)``, pipe ``records``, return the key/values of each output topic."""
    builder = StreamsBuilder()
    build(_stream(builder))
    outputs = outputs or {"out": (S, I)}
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, I)
        for key, value in records:
            source.pipe_input(key, value)
        return {
            topic: driver.create_output_topic(topic, k, v).read_key_values_to_list()
            for topic, (k, v) in outputs.items()
        }


def _out(build: Callable[[KStream], None], records: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return _run(build, records)["out"]


RECORDS = [("a", 1), ("b", 2), ("c", 3), ("d", 4)]


def test_filter_keeps_matching_records_in_order() -> None:
    assert _out(lambda s: s.filter(lambda k, v: v % 2 == 0).to("out"), RECORDS) == [("b", 2), ("d", 4)]


def test_filter_not_drops_matching_records() -> None:
    assert _out(lambda s: s.filter_not(lambda k, v: v % 2 == 0).to("out"), RECORDS) == [("a", 1), ("c", 3)]


def test_map_replaces_key_and_value() -> None:
    got = _out(
        lambda s: s.map(lambda k, v: (k.upper(), v * 10)).to("out", Produced(key_serde=S, value_serde=I)),
        RECORDS[:2],
    )
    assert got == [("A", 10), ("B", 20)]


def test_map_values_with_one_argument() -> None:
    assert _out(lambda s: s.map_values(lambda v: v + 100).to("out"), RECORDS[:2]) == [("a", 101), ("b", 102)]


def test_map_values_with_key_and_value() -> None:
    got = _out(lambda s: s.map_values(lambda k, v: len(k) * 1000 + v).to("out"), [("xyz", 1)])
    assert got == [("xyz", 3001)]


def test_map_values_accepts_builtins_and_callable_objects() -> None:
    class AddKeyLength:
        def __call__(self, key: str, value: int) -> int:
            return value + len(key)

    def build(stream: KStream) -> None:
        stream.map_values(str).to("strs", Produced(value_serde=S))
        stream.map_values(AddKeyLength()).to("out")

    got = _run(
        build,
        [("ab", 5)],
        {"strs": (S, S), "out": (S, I)},
    )
    assert got == {"strs": [("ab", "5")], "out": [("ab", 7)]}


def test_flat_map_emits_zero_or_more_records() -> None:
    def explode(key: str, value: int) -> Iterator[tuple[str, int]]:
        for i in range(value):
            yield f"{key}{i}", i

    got = _out(
        lambda s: s.flat_map(explode).to("out", Produced(key_serde=S, value_serde=I)), [("a", 0), ("b", 2)]
    )
    assert got == [("b0", 0), ("b1", 1)]


def test_flat_map_values_with_one_argument() -> None:
    assert _out(lambda s: s.flat_map_values(lambda v: [v, -v]).to("out"), [("a", 1), ("b", 2)]) == [
        ("a", 1),
        ("a", -1),
        ("b", 2),
        ("b", -2),
    ]


def test_flat_map_values_with_key_and_value() -> None:
    got = _out(lambda s: s.flat_map_values(lambda k, v: [v] * len(k)).to("out"), [("ab", 7), ("", 9)])
    assert got == [("ab", 7), ("ab", 7)]


def test_select_key_keeps_the_value() -> None:
    got = _out(lambda s: s.select_key(lambda k, v: f"{k}-{v}").to("out", Produced(key_serde=S)), RECORDS[:2])
    assert got == [("a-1", 1), ("b-2", 2)]


def test_key_changing_operators_mark_repartition_required() -> None:
    builder = StreamsBuilder()
    stream = _stream(builder)
    assert not stream.filter(lambda k, v: True).repartition_required
    assert not stream.map_values(lambda v: v).repartition_required
    assert stream.map(lambda k, v: (k, v)).repartition_required
    assert stream.flat_map(lambda k, v: []).repartition_required
    assert stream.select_key(lambda k, v: k).repartition_required
    assert stream.select_key(lambda k, v: k).filter(lambda k, v: True).repartition_required
    assert not stream.select_key(lambda k, v: k).repartition().repartition_required


def test_peek_sees_every_record_and_passes_it_on() -> None:
    seen: list[tuple[str, int]] = []
    assert _out(lambda s: s.peek(lambda k, v: seen.append((k, v))).to("out"), RECORDS) == RECORDS
    assert seen == RECORDS


def test_foreach_is_terminal_and_sees_every_record() -> None:
    seen: list[tuple[str, int]] = []

    def build(stream: KStream) -> None:
        stream.foreach(lambda k, v: seen.append((k, v)))  # returns nothing to chain on
        stream.to("out")

    assert _out(build, RECORDS) == RECORDS
    assert seen == RECORDS


def test_operators_chain_and_fan_out_from_one_stream() -> None:
    def build(stream: KStream) -> None:
        stream.filter(lambda k, v: v > 1).map_values(lambda v: v * 2).to("out")
        stream.map_values(lambda v: -v).to("neg")

    got = _run(build, RECORDS[:3], {"out": (S, I), "neg": (S, I)})
    assert got == {"out": [("b", 4), ("c", 6)], "neg": [("a", -1), ("b", -2), ("c", -3)]}


def test_operators_accept_named_and_plain_string_names() -> None:
    builder = StreamsBuilder()
    _stream(builder).filter(lambda k, v: True, Named.as_("keep")).map_values(lambda v: v, "same").to("out")
    nodes = list(builder.build().nodes)
    # a named operator still consumes its index (Kafka's NamedInternal.orElseGenerateWithPrefix)
    assert nodes == ["KSTREAM-SOURCE-0000000000", "keep", "same", "KSTREAM-SINK-0000000003"]


def test_operator_rejects_a_non_callable() -> None:
    builder = StreamsBuilder()
    with pytest.raises(Exception, match="callable"):
        _stream(builder).filter(42)  # type: ignore[arg-type]


# -- split ------------------------------------------------------------------------------------


def test_split_routes_to_first_matching_branch_and_default() -> None:
    def build(stream: KStream) -> None:
        branches = (
            stream.split(Named.as_("sp-"))
            .branch(lambda k, v: v % 2 == 0, Branched.as_("even"))
            .branch(lambda k, v: v > 2, Branched.as_("big"))  # 4 is even: first match wins
            .default_branch(Branched.as_("other"))
        )
        assert set(branches) == {"sp-even", "sp-big", "sp-other"}
        for name, topic in (("sp-even", "even"), ("sp-big", "big"), ("sp-other", "other")):
            branch = branches[name]
            assert branch is not None
            branch.to(topic)

    got = _run(
        build,
        [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)],
        {t: (S, I) for t in ("even", "big", "other")},
    )
    assert got == {"even": [("b", 2), ("d", 4)], "big": [("c", 3), ("e", 5)], "other": [("a", 1)]}


def test_split_without_default_branch_drops_unmatched_records() -> None:
    def build(stream: KStream) -> None:
        branches = stream.split().branch(lambda k, v: v == 1).branch(lambda k, v: v == 2).no_default_branch()
        names = sorted(branches)
        assert names == ["KSTREAM-BRANCH-00000000011", "KSTREAM-BRANCH-00000000012"]
        branches[names[0]].to("one")  # type: ignore[union-attr]
        branches[names[1]].to("two")  # type: ignore[union-attr]

    got = _run(build, [("a", 1), ("b", 2), ("c", 3)], {"one": (S, I), "two": (S, I)})
    assert got == {"one": [("a", 1)], "two": [("b", 2)]}


def test_split_with_chain_functions_and_consumer_branches() -> None:
    def build(stream: KStream) -> None:
        branches = (
            stream.split(Named.as_("s-"))
            .branch(
                lambda k, v: v < 3,
                Branched.with_function(lambda b: b.map_values(lambda v: v * 100), name="small"),
            )
            .branch(lambda k, v: v < 5, Branched.with_function(lambda b: b.to("mid")))  # returns None
            .default_branch()
        )
        small = branches["s-small"]
        assert small is not None
        small.to("small")
        # the chain returned None: no entry (Kafka's BranchedKStreamImpl.createBranch)
        assert "s-2" not in branches
        default = branches["s-0"]
        assert default is not None
        default.to("rest")

    got = _run(
        build, [("a", 1), ("b", 3), ("c", 9), ("d", 2)], {"small": (S, I), "mid": (S, I), "rest": (S, I)}
    )
    assert got == {"small": [("a", 100), ("d", 200)], "mid": [("b", 3)], "rest": [("c", 9)]}


def test_split_with_only_a_default_branch_passes_everything() -> None:
    def build(stream: KStream) -> None:
        branches = stream.split().default_branch()
        (only,) = branches.values()
        assert only is not None
        only.to("out")

    assert _out(build, RECORDS) == RECORDS


# -- merge ------------------------------------------------------------------------------------


def test_merge_interleaves_both_streams_in_processing_order() -> None:
    builder = StreamsBuilder()
    left = _stream(builder, "left")
    right = _stream(builder, "right").map_values(lambda v: v * 10)
    left.merge(right, Named.as_("both")).map_values(lambda v: v + 1).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        lin, rin = driver.create_input_topic("left", S, I), driver.create_input_topic("right", S, I)
        lin.pipe_input("l1", 1)
        rin.pipe_input("r1", 2)
        lin.pipe_input("l2", 3)
        out = driver.create_output_topic("out", S, I).read_key_values_to_list()
    assert out == [("l1", 2), ("r1", 21), ("l2", 4)]


def test_merge_rejects_streams_of_another_builder() -> None:
    with pytest.raises(Exception, match="different StreamsBuilders"):
        _stream(StreamsBuilder()).merge(_stream(StreamsBuilder()))


def test_merge_keeps_serdes_only_when_both_sides_agree() -> None:
    builder = StreamsBuilder()
    a, b = _stream(builder, "a"), _stream(builder, "b")
    assert a.merge(b).value_serde == I
    assert a.merge(b.map_values(str)).value_serde is None


# -- to -------------------------------------------------------------------------------------


def test_to_with_a_topic_extractor_chooses_the_topic_per_record() -> None:
    seen_metadata: list[Any] = []

    def route(key: str, value: int, metadata: Any) -> str:
        seen_metadata.append(metadata)
        return "even" if value % 2 == 0 else "odd"

    got = _run(lambda s: s.to(route), RECORDS[:3], {"even": (S, I), "odd": (S, I)})
    assert got == {"even": [("b", 2)], "odd": [("a", 1), ("c", 3)]}
    assert [(m.topic, m.partition, m.offset) for m in seen_metadata] == [
        ("in", 0, 0),
        ("in", 0, 1),
        ("in", 0, 2),
    ]


def test_to_with_a_custom_partitioner_calls_it_with_topic_key_value_and_count() -> None:
    calls: list[tuple[str, Any, Any, int]] = []

    def partitioner(topic: str, key: Any, value: Any, num_partitions: int) -> int:
        calls.append((topic, key, value, num_partitions))
        return 0

    got = _out(lambda s: s.to("out", Produced(partitioner=partitioner)), RECORDS[:2])
    assert got == RECORDS[:2]
    assert calls == [("out", "a", 1, 1), ("out", "b", 2, 1)]


def test_to_uses_produced_serdes_over_the_stream_serdes() -> None:
    got = _run(
        lambda s: s.to("out", Produced(key_serde=S, value_serde=Long())), [("k", 7)], {"out": (S, Long())}
    )
    assert got == {"out": [("k", 7)]}
    raw = _run(lambda s: s.to("out", Produced(value_serde=Long())), [("k", 7)], {"out": (S, Bytes8())})
    assert raw == {"out": [("k", b"\x00" * 7 + b"\x07")]}


class Bytes8(String):
    """Reads raw bytes back (to check the byte layout a sink wrote)."""

    def deserialize(self, data: bytes | None) -> Any:
        return data


# -- repartition ----------------------------------------------------------------------------


def test_repartition_feeds_records_through_the_internal_topic() -> None:
    builder = StreamsBuilder()
    (
        _stream(builder)
        .select_key(lambda k, v: v % 2)
        .repartition(Repartitioned(key_serde=I, value_serde=I, name="by-parity"))
        .map_values(lambda k, v: f"{k}:{v}")
        .to("out", Produced(key_serde=I, value_serde=S))
    )
    topology = builder.build()
    assert "by-parity-repartition" in topology.internal_topics
    with TopologyTestDriver(topology, {**CONFIG, "application_id": "app"}) as driver:
        source = driver.create_input_topic("in", S, I)
        for key, value in RECORDS:
            source.pipe_input(key, value)
        assert driver.create_output_topic("out", I, S).read_key_values_to_list() == [
            (1, "1:1"),
            (0, "0:2"),
            (1, "1:3"),
            (0, "0:4"),
        ]
        internal = driver.create_output_topic("app-by-parity-repartition", I, I).read_key_values_to_list()
    assert internal == [(1, 1), (0, 2), (1, 3), (0, 4)]


def test_repartition_drops_records_with_a_null_key() -> None:
    builder = StreamsBuilder()
    _stream(builder).select_key(lambda k, v: None if v == 2 else k).repartition(
        Repartitioned(key_serde=S, value_serde=I)
    ).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, I)
        for key, value in RECORDS[:3]:
            source.pipe_input(key, value)
        assert driver.create_output_topic("out", S, I).read_key_values_to_list() == [("a", 1), ("c", 3)]


def test_repartition_topic_settings_are_declared() -> None:
    builder = StreamsBuilder()
    _stream(builder).repartition(Repartitioned(num_partitions=6, name="six")).to("out")
    topic = builder.build().internal_topics["six-repartition"]
    assert (topic.kind, topic.num_partitions) == ("repartition", 6)
    assert dict(topic.config)["cleanup.policy"] == "delete"


# -- timestamps, headers, invalid timestamps ------------------------------------------------


def test_timestamps_and_headers_pass_through_every_operator() -> None:
    builder = StreamsBuilder()
    (
        _stream(builder)
        .filter(lambda k, v: True)
        .map(lambda k, v: (k, v))
        .flat_map_values(lambda v: [v])
        .select_key(lambda k, v: k)
        .peek(lambda k, v: None)
        .to("out")
    )
    headers = [("trace", b"abc"), ("empty", None)]
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        driver.create_input_topic("in", S, I).pipe_input("k", 1, timestamp_ms=12345, headers=headers)
        record = driver.create_output_topic("out", S, I).read_record()
    assert record == TestRecord("k", 1, 12345, headers)


def test_input_topic_timestamps_auto_advance() -> None:
    builder = StreamsBuilder()
    _stream(builder).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, I, start_timestamp_ms=1000, auto_advance_ms=10)
        source.pipe_key_value_list([("a", 1), ("b", 2)])
        source.advance_time(100)
        source.pipe_record(TestRecord("c", 3))
        times = [r.timestamp for r in driver.create_output_topic("out", S, I).read_records_to_list()]
    assert times == [1000, 1010, 1120]


def test_negative_timestamps_are_skipped_and_counted() -> None:
    seen: list[int] = []
    builder = StreamsBuilder()
    _stream(builder).peek(lambda k, v: seen.append(v)).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, I)
        source.pipe_input("a", 1, timestamp_ms=5)
        source.pipe_input("b", 2, timestamp_ms=-1)
        source.pipe_input("c", 3, timestamp_ms=6)
        assert driver.create_output_topic("out", S, I).read_values_to_list() == [1, 3]
        (task,) = driver._tasks
        assert task.records_skipped == 1
        assert task.context.dropped_records == 1
    assert seen == [1, 3]


def test_timestamp_extractor_sets_the_record_timestamp_and_negative_results_are_skipped() -> None:
    def from_value(key: Any, value: Any, record_ts: int, partition_time: int) -> int:
        return int(value["ts"])

    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=Json(), timestamp_extractor=from_value)).to("out")
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, Json())
        source.pipe_input("a", {"ts": 777}, timestamp_ms=1)
        source.pipe_input("b", {"ts": -5}, timestamp_ms=2)
        records = driver.create_output_topic("out", S, Json()).read_records_to_list()
    assert [(r.key, r.timestamp) for r in records] == [("a", 777)]


def test_stream_time_is_the_largest_timestamp_seen() -> None:
    times: list[int] = []
    builder = StreamsBuilder()

    def build(stream: KStream) -> None:
        stream.process(lambda: _StreamTimeProbe(times))

    build(_stream(builder))
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        source = driver.create_input_topic("in", S, I)
        for ts in (10, 30, 20, 40):
            source.pipe_input("k", 1, timestamp_ms=ts)
    assert times == [10, 30, 30, 40]


from platform_streams.processor import Processor, Record  # noqa: E402


class _StreamTimeProbe(Processor):
    def __init__(self, times: list[int]) -> None:
        self.times = times

    def process(self, record: Record) -> None:
        self.times.append(self.context.current_stream_time_ms())


def test_unknown_input_topic_is_rejected() -> None:
    builder = StreamsBuilder()
    _stream(builder).to("out")
    with (
        TopologyTestDriver(builder.build(), CONFIG) as driver,
        pytest.raises(Exception, match="unknown input topic"),
    ):
        driver.create_input_topic("nope", S, I)
