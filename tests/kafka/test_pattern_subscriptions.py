"""Regex (``Pattern``) source subscriptions, from Kafka's own tests:

- ``KStreamImplTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
  KStreamImplTest.java): ``shouldProcessFromSourceThatMatchPattern``,
  ``shouldProcessFromSourcesThatMatchMultiplePattern`` (TopologyTestDriver);
- ``TopologyTest`` (streams/src/test/java/org/apache/kafka/streams/TopologyTest.java):
  ``testPatternMatchesAlreadyProvidedTopicSource``, ``testNamedTopicMatchesAlreadyProvidedPattern``,
  ``singleSourcePatternShouldHaveSingleSubtopology`` (the description of a pattern source);
- ``InternalTopologyBuilderTest.shouldNotAllowToAddTopicTwice``-style conflicts between two patterns
  matching one topic (``SourceNodeFactory.topics``: "Topic ... is already matched for another
  regex pattern ...").

StreamsBuilderTest's three pattern cases are in test_streams_builder_naming.py.
"""

from __future__ import annotations

import re

import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.errors import TopologyError
from platform_streams.serde import String
from platform_streams.testing import TopologyTestDriver
from platform_streams.topology.compiler import compile_topology
from tests.kafka.support import MockApiProcessorSupplier, streams_config

S = String()
PROPS = streams_config("string", "string")


def _pipe(driver: TopologyTestDriver, topic: str, key: str, value: str, ts: int) -> None:
    driver.create_input_topic(topic, S, S, start_timestamp_ms=0).pipe_input(key, value, ts)


def test_should_process_from_source_that_match_pattern() -> None:
    """KStreamImplTest.shouldProcessFromSourceThatMatchPattern"""
    builder = StreamsBuilder()
    supplier = MockApiProcessorSupplier()
    builder.stream(re.compile(r"topic-\d")).process(supplier)
    with TopologyTestDriver(builder.build(), PROPS) as driver:
        for topic, key, value, ts in [
            ("topic-3", "A", "aa", 1),
            ("topic-4", "B", "bb", 5),
            ("topic-5", "C", "cc", 10),
            ("topic-6", "D", "dd", 8),
            ("topic-7", "E", "ee", 3),
        ]:
            _pipe(driver, topic, key, value, ts)
    assert supplier.captured_processors(1)[0].processed == [
        ("A", "aa", 1),
        ("B", "bb", 5),
        ("C", "cc", 10),
        ("D", "dd", 8),
        ("E", "ee", 3),
    ]


def test_should_process_from_sources_that_match_multiple_pattern() -> None:
    """KStreamImplTest.shouldProcessFromSourcesThatMatchMultiplePattern"""
    topic3 = "topic-without-pattern"
    builder = StreamsBuilder()
    supplier = MockApiProcessorSupplier()
    pattern2_source1 = builder.stream(re.compile(r"topic-\d"))
    pattern2_source2 = builder.stream(re.compile("topic-[A-Z]"))
    source3 = builder.stream(topic3)
    pattern2_source1.merge(pattern2_source2).merge(source3).process(supplier)
    with TopologyTestDriver(builder.build(), PROPS) as driver:
        for topic, key, value, ts in [
            ("topic-3", "A", "aa", 1),
            ("topic-4", "B", "bb", 5),
            ("topic-A", "C", "cc", 10),
            ("topic-Z", "D", "dd", 8),
            (topic3, "E", "ee", 3),
        ]:
            _pipe(driver, topic, key, value, ts)
        # a topic no pattern matches is still refused
        with pytest.raises(TopologyError, match="unknown input topic"):
            driver.create_input_topic("topic-33", S, S)
    assert supplier.captured_processors(1)[0].processed == [
        ("A", "aa", 1),
        ("B", "bb", 5),
        ("C", "cc", 10),
        ("D", "dd", 8),
        ("E", "ee", 3),
    ]


def test_pattern_matches_already_provided_topic_source() -> None:
    """TopologyTest.testPatternMatchesAlreadyProvidedTopicSource"""
    topology = Topology().add_source("source-1", "foo")
    with pytest.raises(TopologyError, match="will match a topic that has already been registered"):
        topology.add_source("source-2", re.compile("f.*"))


def test_named_topic_matches_already_provided_pattern() -> None:
    """TopologyTest.testNamedTopicMatchesAlreadyProvidedPattern"""
    topology = Topology().add_source("source-1", re.compile("f.*"))
    with pytest.raises(TopologyError, match="matches a Pattern already registered by another source"):
        topology.add_source("source-2", "foo")


def test_single_source_pattern_should_have_single_subtopology() -> None:
    """TopologyTest.singleSourcePatternShouldHaveSingleSubtopology: Kafka describes a pattern
    source by its regex (``InternalTopologyBuilder.Source.toString``)."""
    topology = Topology().add_source("source", re.compile("topic[0-9]"))
    assert str(topology.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: source (topics: topic[0-9])\n"
        "      --> none\n\n"
    )


def test_matched_topics_are_the_sources_and_one_topic_matches_one_pattern() -> None:
    """InternalTopologyBuilder.SourceNodeFactory.topics: the topics the metadata lists that a
    pattern matches become its source's topics; a topic two patterns match is refused with
    Kafka's message."""
    topology = Topology().add_source("a", re.compile("orders-.*")).add_source("b", re.compile(".*-eu"))
    plan = compile_topology(topology)
    assert plan.external_source_topics() == []  # no topic is known before the listing
    assert plan.subscribe(["orders-us", "payments", "__consumer_offsets"]) is True
    assert plan.external_source_topics() == ["orders-us"]
    assert plan.subscribe(["orders-us", "payments"]) is False  # nothing new: no change
    with pytest.raises(TopologyError, match="is already matched for another regex pattern"):
        plan.subscribe(["orders-us", "orders-eu"])
