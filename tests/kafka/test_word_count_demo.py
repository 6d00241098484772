"""Kafka's ``WordCountDemoTest`` (streams/examples/src/test/java/org/apache/kafka/streams/examples/
wordcount/WordCountDemoTest.java) over ``WordCountDemo.createWordCountStream``, translated.

``testStreamsConfig`` (reading a properties file from the command line) has no equivalent (a
skipped test at the end): the Python demo takes a ``StreamsConfig``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from platform_streams.dsl import Produced, StreamsBuilder
from platform_streams.serde import Long, String
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import cases_without_python_equivalent

INPUT_TOPIC, OUTPUT_TOPIC = "streams-plaintext-input", "streams-wordcount-output"
S, L = String(), Long()
# WordCountDemo.streamsConfig: String default serdes, caching off
CONFIG = {"default_key_serde": "string", "default_value_serde": "string", "statestore_cache_max_bytes": 0}


def create_word_count_stream(builder: StreamsBuilder) -> None:
    """WordCountDemo.createWordCountStream"""
    counts = (
        builder.stream(INPUT_TOPIC)
        .flat_map_values(lambda value: [w for w in re.split(r"\W+", value.lower()) if w])
        .group_by(lambda key, value: value)
        .count()
    )
    counts.to_stream().to(OUTPUT_TOPIC, Produced(key_serde=S, value_serde=L))


@pytest.fixture
def driver() -> Iterator[TopologyTestDriver]:
    builder = StreamsBuilder()
    create_word_count_stream(builder)
    with TopologyTestDriver(builder.build(), CONFIG) as test_driver:
        yield test_driver


def test_one_word(driver: TopologyTestDriver) -> None:
    """WordCountDemoTest.testOneWord"""
    driver.create_input_topic(INPUT_TOPIC, S, S).pipe_input(None, "Hello")
    output = driver.create_output_topic(OUTPUT_TOPIC, S, L)
    assert output.read_key_value() == ("hello", 1)
    assert output.is_empty()


def test_count_list_of_words(driver: TopologyTestDriver) -> None:
    """WordCountDemoTest.testCountListOfWords"""
    driver.create_input_topic(INPUT_TOPIC, S, S).pipe_value_list(
        [
            "Apache   Kafka Streams   Example",
            "Using  \t\t Kafka   Streams\tTest Utils",
            "Reading and Writing Kafka Topic",
        ]
    )
    expected = {
        "apache": 1, "kafka": 3, "streams": 2, "example": 1, "using": 1, "test": 1, "utils": 1,
        "reading": 1, "and": 1, "writing": 1, "topic": 1,
    }  # fmt: skip
    assert driver.create_output_topic(OUTPUT_TOPIC, S, L).read_key_values_to_map() == expected


PROPERTIES_FILE = "reads a properties file named on the command line; the Python demo takes a StreamsConfig"

# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "WordCountDemoTest",
    {
        "testStreamsConfig": PROPERTIES_FILE,
    },
)
