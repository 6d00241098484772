"""Kafka's ``KStreamKStreamJoinTest`` naming cases (streams/src/test/java/org/apache/kafka/streams/
kstream/internals/KStreamKStreamJoinTest.java), translated: a re-keyed stream joined twice.

Unnamed joins share one repartition topic with a generated name (Kafka's cached
``repartitionNode`` in ``KStreamImpl.repartitionForJoin``) instead of failing with "topic(s)
already read by another source"; named joins get one topic each. ``describe()`` equals Kafka's
expected text.
"""

from __future__ import annotations

from platform_streams.config import StreamsConfig
from platform_streams.dsl import Consumed, JoinWindows, StreamJoined, StreamsBuilder
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver

S = String()
NO_OPTIMIZATION = StreamsConfig(
    application_id="app", bootstrap_servers="x:9092", topology_optimization="none"
)


def _streams(builder: StreamsBuilder) -> tuple:  # type: ignore[type-arg]
    stream1 = builder.stream("topic", Consumed(key_serde=S, value_serde=S))
    stream2 = builder.stream("topic2", Consumed(key_serde=S, value_serde=S))
    stream3 = builder.stream("topic3", Consumed(key_serde=S, value_serde=S))
    return stream1.map(lambda k, v: (v, k)), stream2, stream3


def test_should_reuse_repartition_topic_with_generated_name() -> None:
    """KStreamKStreamJoinTest.shouldReuseRepartitionTopicWithGeneratedName"""
    builder = StreamsBuilder()
    new_stream, stream2, stream3 = _streams(builder)
    window = JoinWindows.of_time_difference_with_no_grace(100)
    new_stream.join(stream2, lambda v1, v2: v1 + v2, window).to("out-one")
    new_stream.join(stream3, lambda v1, v2: v1 + v2, window).to("out-to")
    topology = builder.build(NO_OPTIMIZATION)
    assert str(topology.describe()) == EXPECTED_GENERATED
    # and it runs: both joins read the one repartition topic
    config = {"default_key_serde": "string", "default_value_serde": "string"}
    with TopologyTestDriver(topology, config) as driver:
        driver.create_input_topic("topic2", S, S).pipe_input("v", "two", 0)
        driver.create_input_topic("topic3", S, S).pipe_input("v", "three", 0)
        driver.create_input_topic("topic", S, S).pipe_input("k", "v", 0)
        assert driver.create_output_topic("out-one", S, S).read_key_values_to_list() == [("v", "ktwo")]
        assert driver.create_output_topic("out-to", S, S).read_key_values_to_list() == [("v", "kthree")]


def test_should_create_repartition_topics_with_user_provided_name() -> None:
    """KStreamKStreamJoinTest.shouldCreateRepartitionTopicsWithUserProvidedName"""
    builder = StreamsBuilder()
    new_stream, stream2, stream3 = _streams(builder)
    window = JoinWindows.of_time_difference_with_no_grace(100)
    joined = StreamJoined(key_serde=S, value_serde=S, other_value_serde=S)
    new_stream.join(stream2, lambda v1, v2: v1 + v2, window, joined.with_name("first-join")).to("out-one")
    new_stream.join(stream3, lambda v1, v2: v1 + v2, window, joined.with_name("second-join")).to("out-two")
    assert str(builder.build(NO_OPTIMIZATION).describe()) == EXPECTED_USER_NAMED


EXPECTED_GENERATED = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])
      --> KSTREAM-MAP-0000000003
    Processor: KSTREAM-MAP-0000000003 (stores: [])
      --> KSTREAM-FILTER-0000000005
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KSTREAM-MAP-0000000003
    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-MAP-0000000003-repartition)
      <-- KSTREAM-FILTER-0000000005

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-MAP-0000000003-repartition])
      --> KSTREAM-WINDOWED-0000000007, KSTREAM-WINDOWED-0000000016
    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])
      --> KSTREAM-WINDOWED-0000000008
    Source: KSTREAM-SOURCE-0000000002 (topics: [topic3])
      --> KSTREAM-WINDOWED-0000000017
    Processor: KSTREAM-WINDOWED-0000000007 (stores: [KSTREAM-JOINTHIS-0000000009-store])
      --> KSTREAM-JOINTHIS-0000000009
      <-- KSTREAM-SOURCE-0000000006
    Processor: KSTREAM-WINDOWED-0000000008 (stores: [KSTREAM-JOINOTHER-0000000010-store])
      --> KSTREAM-JOINOTHER-0000000010
      <-- KSTREAM-SOURCE-0000000001
    Processor: KSTREAM-WINDOWED-0000000016 (stores: [KSTREAM-JOINTHIS-0000000018-store])
      --> KSTREAM-JOINTHIS-0000000018
      <-- KSTREAM-SOURCE-0000000006
    Processor: KSTREAM-WINDOWED-0000000017 (stores: [KSTREAM-JOINOTHER-0000000019-store])
      --> KSTREAM-JOINOTHER-0000000019
      <-- KSTREAM-SOURCE-0000000002
    Processor: KSTREAM-JOINOTHER-0000000010 (stores: [KSTREAM-JOINTHIS-0000000009-store])
      --> KSTREAM-MERGE-0000000011
      <-- KSTREAM-WINDOWED-0000000008
    Processor: KSTREAM-JOINOTHER-0000000019 (stores: [KSTREAM-JOINTHIS-0000000018-store])
      --> KSTREAM-MERGE-0000000020
      <-- KSTREAM-WINDOWED-0000000017
    Processor: KSTREAM-JOINTHIS-0000000009 (stores: [KSTREAM-JOINOTHER-0000000010-store])
      --> KSTREAM-MERGE-0000000011
      <-- KSTREAM-WINDOWED-0000000007
    Processor: KSTREAM-JOINTHIS-0000000018 (stores: [KSTREAM-JOINOTHER-0000000019-store])
      --> KSTREAM-MERGE-0000000020
      <-- KSTREAM-WINDOWED-0000000016
    Processor: KSTREAM-MERGE-0000000011 (stores: [])
      --> KSTREAM-SINK-0000000012
      <-- KSTREAM-JOINTHIS-0000000009, KSTREAM-JOINOTHER-0000000010
    Processor: KSTREAM-MERGE-0000000020 (stores: [])
      --> KSTREAM-SINK-0000000021
      <-- KSTREAM-JOINTHIS-0000000018, KSTREAM-JOINOTHER-0000000019
    Sink: KSTREAM-SINK-0000000012 (topic: out-one)
      <-- KSTREAM-MERGE-0000000011
    Sink: KSTREAM-SINK-0000000021 (topic: out-to)
      <-- KSTREAM-MERGE-0000000020

"""

EXPECTED_USER_NAMED = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])
      --> KSTREAM-MAP-0000000003
    Processor: KSTREAM-MAP-0000000003 (stores: [])
      --> second-join-left-repartition-filter, first-join-left-repartition-filter
      <-- KSTREAM-SOURCE-0000000000
    Processor: first-join-left-repartition-filter (stores: [])
      --> first-join-left-repartition-sink
      <-- KSTREAM-MAP-0000000003
    Processor: second-join-left-repartition-filter (stores: [])
      --> second-join-left-repartition-sink
      <-- KSTREAM-MAP-0000000003
    Sink: first-join-left-repartition-sink (topic: first-join-left-repartition)
      <-- first-join-left-repartition-filter
    Sink: second-join-left-repartition-sink (topic: second-join-left-repartition)
      <-- second-join-left-repartition-filter

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])
      --> first-join-other-windowed
    Source: first-join-left-repartition-source (topics: [first-join-left-repartition])
      --> first-join-this-windowed
    Processor: first-join-other-windowed (stores: [KSTREAM-JOINOTHER-0000000010-store])
      --> first-join-other-join
      <-- KSTREAM-SOURCE-0000000001
    Processor: first-join-this-windowed (stores: [KSTREAM-JOINTHIS-0000000009-store])
      --> first-join-this-join
      <-- first-join-left-repartition-source
    Processor: first-join-other-join (stores: [KSTREAM-JOINTHIS-0000000009-store])
      --> first-join-merge
      <-- first-join-other-windowed
    Processor: first-join-this-join (stores: [KSTREAM-JOINOTHER-0000000010-store])
      --> first-join-merge
      <-- first-join-this-windowed
    Processor: first-join-merge (stores: [])
      --> KSTREAM-SINK-0000000012
      <-- first-join-this-join, first-join-other-join
    Sink: KSTREAM-SINK-0000000012 (topic: out-one)
      <-- first-join-merge

  Sub-topology: 2
    Source: KSTREAM-SOURCE-0000000002 (topics: [topic3])
      --> second-join-other-windowed
    Source: second-join-left-repartition-source (topics: [second-join-left-repartition])
      --> second-join-this-windowed
    Processor: second-join-other-windowed (stores: [KSTREAM-JOINOTHER-0000000019-store])
      --> second-join-other-join
      <-- KSTREAM-SOURCE-0000000002
    Processor: second-join-this-windowed (stores: [KSTREAM-JOINTHIS-0000000018-store])
      --> second-join-this-join
      <-- second-join-left-repartition-source
    Processor: second-join-other-join (stores: [KSTREAM-JOINTHIS-0000000018-store])
      --> second-join-merge
      <-- second-join-other-windowed
    Processor: second-join-this-join (stores: [KSTREAM-JOINOTHER-0000000019-store])
      --> second-join-merge
      <-- second-join-this-windowed
    Processor: second-join-merge (stores: [])
      --> KSTREAM-SINK-0000000021
      <-- second-join-this-join, second-join-other-join
    Sink: KSTREAM-SINK-0000000021 (topic: out-two)
      <-- second-join-merge

"""
