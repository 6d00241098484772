"""The ``single.store.self.join`` optimization, translated from Kafka's tests:

* ``KStreamKStreamSelfJoinTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
  KStreamKStreamSelfJoinTest.java): the self-join emits exactly what the two-store inner join
  emits, record by record;
* ``InternalStreamsBuilderTest.shouldMark*SelfJoin*`` / ``shouldNotMark*`` (same folder): which
  joins the pass rewrites (here: the plan's ``StreamStreamJoinNode.self_join`` flag, and the
  number of ``KSTREAM-WINDOWED`` nodes of the built topology, Java's ``countJoinWindowNodes``);
* ``StreamStreamJoinIntegrationTest.testSelfJoin`` (streams/src/test/java/org/apache/kafka/streams/
  integration/), run through the TopologyTestDriver as its ``runSelfJoinTestWithDriver`` does.

``describe()`` of self-joined topologies equals Java's: the expected texts in
``tests/kafka/expected/KafkaStreams431SelfJoin.*.txt`` were printed by Kafka Streams 4.3.1
itself (``tests/kafka/expected/capture/SelfJoin.java``, run against the oracle's jars).
"""

from __future__ import annotations

from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, JoinWindows, StreamJoined, StreamsBuilder
from platform_streams.dsl.kstream import KStream
from platform_streams.dsl.plan import StreamStreamJoinNode
from platform_streams.serde import Long, String
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology.topology import Topology
from tests.kafka.support import EXPECTED_DIR, MockApiProcessorSupplier

S = String()
OPTIMIZE = StreamsConfig(application_id="app", bootstrap_servers="x:9092", topology_optimization="all")
SELF_JOIN_ONLY = StreamsConfig(
    application_id="app", bootstrap_servers="x:9092", topology_optimization="single.store.self.join"
)
CONFIG = {"default_key_serde": "string", "default_value_serde": "string"}


def _joined() -> StreamJoined:
    return StreamJoined(key_serde=S, value_serde=S, other_value_serde=S)


def _concat(v1: str, v2: str) -> str:
    return v1 + v2


def _processed(topology: Topology, topic: str, inputs: list[tuple[str, str, int]], supplier: Any) -> list:  # type: ignore[type-arg]
    with TopologyTestDriver(topology, CONFIG) as driver:
        pipe = driver.create_input_topic(topic, S, S)
        for key, value, ts in inputs:
            pipe.pipe_input(key, value, ts)
    return list(supplier.captured_processors(1)[0].processed)


def _self_join_matches_inner_join(
    windows: JoinWindows, inputs: list[tuple[str, str, int]], *, one_stream: bool
) -> None:
    """Kafka's pattern: the inner join of two streams of topic2 (not optimized) gives ``expected``;
    the join of topic1 with itself, built with optimization, must give the same records."""
    builder = StreamsBuilder()
    inner = MockApiProcessorSupplier()
    stream3 = builder.stream("topic2", Consumed(key_serde=S, value_serde=S))
    stream4 = stream3 if one_stream else builder.stream("topic2", Consumed(key_serde=S, value_serde=S))
    stream3.join(stream4, _concat, windows, _joined()).process(inner)
    expected = _processed(builder.build(), "topic2", inputs, inner)
    assert expected, "the inner join emitted nothing: the comparison would prove nothing"

    self_builder = StreamsBuilder()
    selfjoin = MockApiProcessorSupplier()
    stream1 = self_builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
    stream2 = stream1 if one_stream else self_builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
    stream1.join(stream2, _concat, windows, _joined()).process(selfjoin)
    topology = self_builder.build(OPTIMIZE)
    assert _windowed_nodes(topology) == 1  # it really is the single-store self-join
    assert _processed(topology, "topic1", inputs, selfjoin) == expected


def test_should_match_inner_join_with_self_join_with_single_stream() -> None:
    """KStreamKStreamSelfJoinTest.shouldMatchInnerJoinWithSelfJoinWithSingleStream"""
    inputs = [("A", "1", 1), ("B", "1", 2), ("A", "2", 3), ("B", "2", 4), ("B", "3", 5)]
    _self_join_matches_inner_join(JoinWindows.of_time_difference_with_no_grace(100), inputs, one_stream=True)


def test_should_match_inner_join_with_self_join_with_two_streams() -> None:
    """KStreamKStreamSelfJoinTest.shouldMatchInnerJoinWithSelfJoinWithTwoStreams (two
    ``builder.stream`` calls of one topic share one source node, as in Kafka)"""
    inputs = [("A", "1", 1), ("B", "1", 2), ("A", "2", 3), ("B", "2", 4), ("B", "3", 5)]
    _self_join_matches_inner_join(JoinWindows.of_time_difference_with_no_grace(100), inputs, one_stream=False)


def test_should_match_inner_join_with_self_join_different_before_after_windows() -> None:
    """KStreamKStreamSelfJoinTest.shouldMatchInnerJoinWithSelfJoinDifferentBeforeAfterWindows"""
    inputs = [
        ("A", "1", 0), ("A", "2", 11000), ("B", "1", 12000), ("A", "3", 13000),
        ("A", "4", 15000), ("C", "1", 16000), ("D", "1", 17000), ("A", "5", 30000),
    ]  # fmt: skip
    windows = JoinWindows.of_time_difference_and_grace(11000, 10000)
    _self_join_matches_inner_join(windows, inputs, one_stream=False)


def test_should_match_inner_join_with_self_join_out_of_order_messages() -> None:
    """KStreamKStreamSelfJoinTest.shouldMatchInnerJoinWithSelfJoinOutOfOrderMessages"""
    inputs = [
        ("A", "1", 0), ("A", "2", 9999), ("B", "1", 11000), ("A", "3", 13000), ("A", "4", 15000),
        ("C", "1", 16000), ("D", "1", 17000), ("A", "5", 30000), ("A", "5", 6000),
    ]  # fmt: skip
    _self_join_matches_inner_join(
        JoinWindows.of_time_difference_with_no_grace(10000), inputs, one_stream=False
    )


# -- InternalStreamsBuilderTest: which joins become self-joins --------------------------------


def _windowed_nodes(topology: Topology) -> int:
    """Java's ``countJoinWindowNodes``: the ``KSTREAM-WINDOWED`` processors of the topology."""
    return sum(1 for name in topology.nodes if name.startswith("KSTREAM-WINDOWED-"))


def _join_nodes(builder: StreamsBuilder) -> list[StreamStreamJoinNode]:
    return [node for node in builder.plan.nodes if isinstance(node, StreamStreamJoinNode)]


def _t(builder: StreamsBuilder, topic: str) -> KStream:
    return builder.stream(topic, Consumed(key_serde=S, value_serde=S))


def _join(left: KStream, right: KStream) -> KStream:
    return left.join(right, _concat, JoinWindows.of_time_difference_with_no_grace(100))


def _single_stream(b: StreamsBuilder) -> None:
    stream = _t(b, "t1")
    _join(stream, stream)


def _two_streams(b: StreamsBuilder) -> None:
    _join(_t(b, "t1"), _t(b, "t1"))


def _merge_two_streams(b: StreamsBuilder) -> None:
    stream3 = _t(b, "t1").merge(_t(b, "t2"))
    _join(stream3, stream3)


def _three_way(b: StreamsBuilder) -> None:
    stream1, stream2, stream3 = _t(b, "t1"), _t(b, "t1"), _t(b, "t3")
    _join(_join(stream1, stream2), stream3)


def _all_self_joins(b: StreamsBuilder) -> None:
    stream1, stream2, stream3, stream4 = _t(b, "t1"), _t(b, "t1"), _t(b, "t2"), _t(b, "t2")
    _join(stream1, stream2).merge(_join(stream3, stream4))


def _n_way_same_source(b: StreamsBuilder) -> None:
    stream1, stream2, stream3 = _t(b, "t1"), _t(b, "t1"), _t(b, "t1")
    _join(_join(stream1, stream2), stream3)


def _n_way(b: StreamsBuilder) -> None:
    stream1, stream2, stream3 = _t(b, "t1"), _t(b, "t1"), _t(b, "t2")
    _join(_join(stream1, stream2), stream3)


def _two_streams_with_no_op_filter(b: StreamsBuilder) -> None:
    stream1, stream2 = _t(b, "t1"), _t(b, "t1")
    stream1.filter(lambda key, value: value is not None)
    _join(stream1, stream2)


def _two_joins_same_source(b: StreamsBuilder) -> None:
    stream1, stream2, stream3, stream4 = _t(b, "t1"), _t(b, "t1"), _t(b, "t1"), _t(b, "t1")
    _join(stream1, stream2)
    _join(stream3, stream4)


def _two_streams_with_filter(b: StreamsBuilder) -> None:
    stream1, stream2 = _t(b, "t1"), _t(b, "t1")
    _join(stream1.filter(lambda key, value: value is not None), stream2)


def _one_stream_with_map(b: StreamsBuilder) -> None:
    stream1 = _t(b, "t1")
    stream3 = stream1.map_values(lambda v: v)
    _join(stream3, _t(b, "t1"))


def _multiple_sources(b: StreamsBuilder) -> None:
    _join(_t(b, "t1"), _t(b, "t2"))


@pytest.mark.parametrize(
    ("java_test", "build", "self_joins", "windowed"),
    [
        ("shouldMarkStreamStreamJoinAsSelfJoinSingleStream", _single_stream, [True], 1),
        ("shouldMarkStreamStreamJoinAsSelfJoinTwoStreams", _two_streams, [True], 1),
        ("shouldMarkStreamStreamJoinAsSelfJoinMergeTwoStreams", _merge_two_streams, [True], 1),
        ("shouldMarkFirstStreamStreamJoinAsSelfJoin3WayJoin", _three_way, [True, False], 3),
        ("shouldMarkAllStreamStreamJoinsAsSelfJoin", _all_self_joins, [True, True], 2),
        ("shouldMarkFirstStreamStreamJoinAsSelfJoinNwaySameSource", _n_way_same_source, [True, False], 3),
        ("shouldMarkFirstStreamStreamJoinAsSelfJoinNway", _n_way, [True, False], 3),
        (
            "shouldMarkStreamStreamJoinAsSelfJoinTwoStreamsWithNoOpFilter",
            _two_streams_with_no_op_filter,
            [True],
            1,
        ),
        ("shouldMarkStreamStreamJoinAsSelfJoinTwoJoinsSameSource", _two_joins_same_source, [True, True], 2),
        ("shouldNotMarkStreamStreamJoinAsSelfJoinTwoStreamsWithFilter", _two_streams_with_filter, [False], 2),
        ("shouldNotMarkStreamStreamJoinAsSelfJoinOneStreamWithMap", _one_stream_with_map, [False], 2),
        ("shouldNotMarkStreamStreamJoinAsSelfJoinMultipleSources", _multiple_sources, [False], 2),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_internal_streams_builder_marks_self_joins(
    java_test: str, build: Any, self_joins: list[bool], windowed: int
) -> None:
    """InternalStreamsBuilderTest.<java_test>: with optimization on, exactly the joins whose two
    sides read one node are self-joins, and the topology keeps one windowed node per self-join."""
    builder = StreamsBuilder()
    build(builder)
    topology = builder.build(OPTIMIZE)
    assert [node.self_join for node in _join_nodes(builder)] == self_joins
    assert _windowed_nodes(topology) == windowed


def test_the_pass_is_switched_by_its_own_setting() -> None:
    """``single.store.self.join`` alone rewrites the self-join; without it (``none``) the join keeps
    its two windowed nodes and two stores (StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG's values)."""
    for config, windowed in ((SELF_JOIN_ONLY, 1), (None, 2)):
        builder = StreamsBuilder()
        _single_stream(builder)
        topology = builder.build(config)
        assert _windowed_nodes(topology) == windowed
        assert len(topology.stores) == windowed


# -- describe(): Java's own text ------------------------------------------------------------


def _expected(case: str) -> str:
    return (EXPECTED_DIR / f"KafkaStreams431SelfJoin.{case}.txt").read_text()


def _single_stream_join(kind: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    stream = builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
    join = {"inner": stream.join, "left": stream.left_join, "outer": stream.outer_join}[kind]
    join(stream, _concat, JoinWindows.of_time_difference_with_no_grace(100), _joined()).process(
        MockApiProcessorSupplier()
    )
    return builder


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
def test_describe_of_a_self_join_equals_javas(kind: str) -> None:
    """Kafka rewrites inner, left and outer self-joins alike (a record always finds itself, so
    a self-join never pads with null): one windowed node, the merge node runs the self-join."""
    topology = _single_stream_join(kind).build(OPTIMIZE)
    assert str(topology.describe()) == _expected(f"{kind}SingleStreamOptimized")


def test_describe_of_a_self_join_without_optimization_equals_javas() -> None:
    assert str(_single_stream_join("inner").build().describe()) == _expected("innerSingleStreamNotOptimized")


def test_describe_of_a_self_join_of_two_streams_of_one_topic_equals_javas() -> None:
    builder = StreamsBuilder()
    stream1 = builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
    stream2 = builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
    windows = JoinWindows.of_time_difference_with_no_grace(100)
    stream1.join(stream2, _concat, windows, _joined()).process(MockApiProcessorSupplier())
    assert str(builder.build(OPTIMIZE).describe()) == _expected("twoStreamsOfOneTopicOptimized")


def test_describe_of_a_named_self_join_equals_javas() -> None:
    builder = StreamsBuilder()
    stream = builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
    joined = _joined().with_name("self")
    joined = StreamJoined(**{**joined.__dict__, "store_name": "st"})
    stream.join(stream, _concat, JoinWindows.of_time_difference_with_no_grace(100), joined).to("out")
    assert str(builder.build(OPTIMIZE).describe()) == _expected("namedSingleStreamOptimized")


def test_describe_of_a_join_below_a_map_values_equals_javas() -> None:
    builder = StreamsBuilder()
    stream1 = builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
    stream2 = builder.stream("topic1", Consumed(key_serde=S, value_serde=S))
    stream1.map_values(lambda v: v).join(
        stream2, _concat, JoinWindows.of_time_difference_with_no_grace(100)
    ).to("out")
    assert str(builder.build(OPTIMIZE).describe()) == _expected("mapValuesThenJoinOneTopicOptimized")


# -- StreamStreamJoinIntegrationTest.testSelfJoin ---------------------------------------------

ANY_UNIQUE_KEY = 0
#: (value, expected output after it: None = not checked) -- AbstractJoinIntegrationTest.leftInput
SELF_JOIN_CASES: list[tuple[str | None, list[tuple[str, int]] | None]] = [
    (None, None),
    ("A", [("A-A", 2)]),
    ("B", [("B-A", 3), ("A-B", 3), ("B-B", 3)]),
    (None, None),
    ("C", [("C-A", 5), ("C-B", 5), ("A-C", 5), ("B-C", 5), ("C-C", 5)]),
    (None, None),
    ("D", [("D-A", 7), ("D-B", 7), ("D-C", 7), ("A-D", 7), ("B-D", 7), ("C-D", 7), ("D-D", 7)]),
]


@pytest.mark.parametrize("caching", [True, False], ids=["cache", "no-cache"])
def test_stream_stream_join_integration_self_join(caching: bool) -> None:
    """StreamStreamJoinIntegrationTest.testSelfJoin (runSelfJoinTestWithDriver)"""
    builder = StreamsBuilder()
    left = builder.stream("inputTopicLeft", Consumed(key_serde=Long(), value_serde=S))
    windows = JoinWindows.of_time_difference_and_grace(10_000, 24 * 3600 * 1000)
    left.join(left, lambda v1, v2: f"{v1}-{v2}", windows).to("outputTopic")
    topology = builder.build(OPTIMIZE)
    assert _windowed_nodes(topology) == 1
    config = {**CONFIG, "statestore_cache_max_bytes": 10 * 1024 * 1024 if caching else 0}
    first = 1_700_000_000_000
    with TopologyTestDriver(topology, config) as driver:
        pipe = driver.create_input_topic("inputTopicLeft", Long(), S)
        out = driver.create_output_topic("outputTopic", Long(), S)
        for offset, (value, expected) in enumerate(SELF_JOIN_CASES, start=1):
            pipe.pipe_input(ANY_UNIQUE_KEY, value, first + offset)
            if expected is not None:
                got = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
                assert got == [(ANY_UNIQUE_KEY, v, first + ts) for v, ts in expected]
