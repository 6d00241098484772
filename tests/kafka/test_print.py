"""Kafka's ``PrintedTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/PrintedTest.java)
and ``KStreamPrintTest`` (streams/src/test/java/org/apache/kafka/streams/kstream/internals/
KStreamPrintTest.java), translated, plus ``KStream.print`` end to end (``KStreamImpl.print``:
node ``KSTREAM-PRINTER-<index>``, default label = the printed stream's node name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from platform_streams.dsl import Consumed, Printed, StreamsBuilder, TimeWindow, Windowed
from platform_streams.dsl.internals.print_processor import PrintFile, PrintProcessor
from platform_streams.errors import TopologyError
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver

S, INT = String(), Integer()


def _process(printed: Printed, *records: tuple[Any, Any]) -> None:
    processor = printed.build("processor")()
    for key, value in records:
        processor.process(key, value, 0, None)
    processor.close()


def test_should_create_processor_that_prints_to_file(tmp_path: Path) -> None:
    """PrintedTest.shouldCreateProcessorThatPrintsToFile"""
    file = tmp_path / "out.txt"
    _process(Printed.to_file(str(file)), ("hi", 1))
    assert file.read_text(encoding="utf-8") == "[processor]: hi, 1\n"


def test_should_create_processor_that_prints_to_std_out(capsys: pytest.CaptureFixture[str]) -> None:
    """PrintedTest.shouldCreateProcessorThatPrintsToStdOut"""
    _process(Printed.to_sysout(), ("good", 2))
    assert capsys.readouterr().out == "[processor]: good, 2\n"


def test_should_print_with_label(capsys: pytest.CaptureFixture[str]) -> None:
    """PrintedTest.shouldPrintWithLabel"""
    _process(Printed.to_sysout().with_label("label"), ("hello", 3))
    assert capsys.readouterr().out == "[label]: hello, 3\n"


def test_should_print_with_key_value_mapper(capsys: pytest.CaptureFixture[str]) -> None:
    """PrintedTest.shouldPrintWithKeyValueMapper"""
    _process(Printed.to_sysout().with_key_value_mapper(lambda k, v: f"{k} -> {v}"), ("hello", 1))
    assert capsys.readouterr().out == "[processor]: hello -> 1\n"


def test_should_throw_if_file_path_is_null() -> None:
    """PrintedTest.shouldThrowNullPointerExceptionIfFilePathIsNull"""
    with pytest.raises(TypeError, match="filePath can't be null"):
        Printed.to_file(None)  # type: ignore[arg-type]


def test_should_throw_if_mapper_is_null() -> None:
    """PrintedTest.shouldThrowNullPointerExceptionIfMapperIsNull"""
    with pytest.raises(TypeError, match="mapper"):
        Printed.to_sysout().with_key_value_mapper(None)  # type: ignore[arg-type]


def test_should_throw_if_label_is_null() -> None:
    """PrintedTest.shouldThrowNullPointerExceptionIfLabelIsNull"""
    with pytest.raises(TypeError, match="label"):
        Printed.to_sysout().with_label(None)  # type: ignore[arg-type]


def test_should_throw_topology_exception_if_file_path_is_empty() -> None:
    """PrintedTest.shouldThrowTopologyExceptionIfFilePathIsEmpty"""
    with pytest.raises(TopologyError, match="empty"):
        Printed.to_file("")


def test_should_throw_topology_exception_if_file_path_doesnt_exist() -> None:
    """PrintedTest.shouldThrowTopologyExceptionIfFilePathDoesntExist"""
    with pytest.raises(TopologyError, match=r"Unable to write stream to file at \[/this/should/not/exist\]"):
        Printed.to_file("/this/should/not/exist")


def test_print_stream_with_provided_key_value_mapper(tmp_path: Path) -> None:
    """KStreamPrintTest.testPrintStreamWithProvidedKeyValueMapper"""
    file = PrintFile(str(tmp_path / "out.txt"))
    processor = PrintProcessor(file, lambda k, v: f"{k}, {v}", "test-stream")
    for key, value in [(0, "zero"), (1, "one"), (2, "two"), (3, "three")]:
        processor.process(key, value, 0, None)
    processor.close()
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == [
        "[test-stream]: 0, zero",
        "[test-stream]: 1, one",
        "[test-stream]: 2, two",
        "[test-stream]: 3, three",
    ]


def test_kstream_print_through_the_driver(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """KStreamImpl.print: KSTREAM-PRINTER-<index>, the label defaults to the parent's node name,
    null renders as Java's ``null``; a file printer survives its processors being re-made."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=INT, value_serde=S))
    stream.print(Printed.to_sysout())
    file = tmp_path / "printed.txt"
    stream.map_values(str.upper).print(Printed.to_file(str(file)).with_label("upper").with_name("printer"))
    topology = builder.build()
    description = str(topology.describe())
    assert "Processor: KSTREAM-PRINTER-0000000001 (stores: [])" in description
    assert "Processor: printer (stores: [])" in description
    for round_ in range(2):
        with TopologyTestDriver(topology, {}) as driver:
            source = driver.create_input_topic("in", INT, S)
            source.pipe_input(round_, "a")
            source.pipe_input(None, "b")
    assert capsys.readouterr().out == (
        "[KSTREAM-SOURCE-0000000000]: 0, a\n[KSTREAM-SOURCE-0000000000]: null, b\n"
        "[KSTREAM-SOURCE-0000000000]: 1, a\n[KSTREAM-SOURCE-0000000000]: null, b\n"
    )
    assert file.read_text(encoding="utf-8") == (
        "[upper]: 0, A\n[upper]: null, B\n[upper]: 1, A\n[upper]: null, B\n"
    )


def test_windowed_keys_print_as_kafka_windowed_to_string(capsys: pytest.CaptureFixture[str]) -> None:
    """Windowed.toString: ``[key@start/end]``."""
    _process(Printed.to_sysout(), (Windowed("k", TimeWindow(0, 10)), 3))
    assert capsys.readouterr().out == "[processor]: [k@0/10], 3\n"
