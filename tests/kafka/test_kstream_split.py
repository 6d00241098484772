"""Kafka's ``KStreamSplitTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
KStreamSplitTest.java), translated. ``testTypeVariance`` (Java generics)
has no Python equivalent: a skipped test at the end says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from platform_streams.dsl import Branched, Consumed, KStream, Named, StreamsBuilder
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver
from tests.kafka.support import JAVA_TYPE_VARIANCE, cases_without_python_equivalent

INT, S = Integer(), String()
CONFIG = {"default_key_serde": "integer", "default_value_serde": "string"}


def is_even(key: int, value: Any) -> bool:
    return key % 2 == 0


def is_multiple_of_three(key: int, value: Any) -> bool:
    return key % 3 == 0


def is_multiple_of_five(key: int, value: Any) -> bool:
    return key % 5 == 0


def is_multiple_of_seven(key: int, value: Any) -> bool:
    return key % 7 == 0


def is_negative(key: int, value: Any) -> bool:
    return key < 0


def _source() -> tuple[StreamsBuilder, KStream]:
    builder = StreamsBuilder()
    return builder, builder.stream("topic", Consumed(key_serde=INT, value_serde=S))


def _with_driver(builder: StreamsBuilder, test: Callable[[TopologyTestDriver], None]) -> None:
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("topic", INT, S)
        for key in (-1, 0, 1, 2, 3, 4, 5, 6, 7):
            topic.pipe_input(key, f"V{key}")
        test(driver)


def _values(driver: TopologyTestDriver, topic: str) -> list[Any]:
    return driver.create_output_topic(topic, INT, S).read_values_to_list()


def test_kstream_split() -> None:
    """KStreamSplitTest.testKStreamSplit"""
    builder, source = _source()
    branches = (
        source.split()
        .branch(is_even, Branched.with_consumer(lambda ks: ks.to("x2")))
        .branch(is_multiple_of_three, Branched.with_consumer(lambda ks: ks.to("x3")))
        .branch(is_multiple_of_five, Branched.with_consumer(lambda ks: ks.to("x5")))
        .no_default_branch()
    )
    assert len(branches) == 0

    def check(driver: TopologyTestDriver) -> None:
        assert _values(driver, "x2") == ["V0", "V2", "V4", "V6"]
        assert _values(driver, "x3") == ["V3"]
        assert _values(driver, "x5") == ["V5"]

    _with_driver(builder, check)


def test_resulting_map() -> None:
    """KStreamSplitTest.testResultingMap"""
    builder, source = _source()
    branches = (
        source.split(Named.as_("foo-"))
        .branch(is_even, Branched.as_("bar"))  # "foo-bar"
        .branch(is_multiple_of_three, Branched.with_consumer(lambda ks: None))  # no entry: a consumer
        .branch(is_multiple_of_five, Branched.with_function(lambda ks: None))  # no entry: returns None
        .branch(is_negative, Branched.with_function(lambda ks: ks))  # "foo-4"
        .branch(is_multiple_of_seven)  # "foo-5": named after its position
        .default_branch()  # "foo-0"
    )
    assert len(branches) == 4
    for name, stream in branches.items():
        assert stream is not None
        stream.to(name)

    def check(driver: TopologyTestDriver) -> None:
        assert _values(driver, "foo-bar") == ["V0", "V2", "V4", "V6"]
        assert _values(driver, "foo-4") == ["V-1"]
        assert _values(driver, "foo-5") == ["V7"]
        assert _values(driver, "foo-0") == ["V1"]

    _with_driver(builder, check)


def test_branching_with_no_terminal_operation() -> None:
    """KStreamSplitTest.testBranchingWithNoTerminalOperation"""
    builder, source = _source()
    (
        source.split()
        .branch(is_even, Branched.with_consumer(lambda ks: ks.to("output")))
        .branch(is_multiple_of_five, Branched.with_consumer(lambda ks: ks.to("output")))
    )
    _with_driver(builder, lambda driver: _check_output(driver))


def _check_output(driver: TopologyTestDriver) -> None:
    assert _values(driver, "output") == ["V0", "V2", "V4", "V5", "V6"]


# Java cases with no Python equivalent: skipped tests whose reason says why (pytest -rs)
test_java_case_without_python_equivalent = cases_without_python_equivalent(
    "KStreamSplitTest",
    {
        "testTypeVariance": JAVA_TYPE_VARIANCE,
    },
)
