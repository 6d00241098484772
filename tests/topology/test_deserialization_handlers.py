"""Deserialization and processing exception handlers, and the dead-letter topic (KIP-1034)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Produced
from platform_streams.errors import DeserializationError, ProcessorError
from platform_streams.processor import Processor, Record
from platform_streams.processor.exception_handlers import (
    HEADER_EXCEPTION,
    HEADER_MESSAGE,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_STACKTRACE,
    HEADER_TOPIC,
    HandlerResponse,
)
from platform_streams.runtime.tasks.task import StreamTask
from platform_streams.serde import Bytes, Json, String
from platform_streams.testing import TopologyTestDriver

S, J, B = String(), Json(), Bytes()
DLQ = "dead-letters"


def _json_app() -> Topology:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=S, value_serde=J)).map_values(lambda v: v["n"] * 2).to(
        "out", Produced(key_serde=S, value_serde=J)
    )
    return builder.build()


def _driver(**config: Any) -> TopologyTestDriver:
    return TopologyTestDriver(_json_app(), {"application_id": "handlers", **config})


def _pipe_good_bad_good(driver: TopologyTestDriver) -> None:
    driver.pipe_raw("in", b"k1", b'{"n": 1}', 100, None)
    driver.pipe_raw("in", b"k2", b"{not json", 101, [("origin", b"test")])
    driver.pipe_raw("in", b"k3", b'{"n": 3}', 102, None)


def _task(driver: TopologyTestDriver) -> StreamTask:
    (task,) = driver._tasks
    return task


def _out(driver: TopologyTestDriver) -> list[tuple[Any, Any]]:
    return driver.create_output_topic("out", S, J).read_key_values_to_list()


def test_log_and_continue_skips_and_counts_the_record(caplog: pytest.LogCaptureFixture) -> None:
    with _driver(deserialization_exception_handler="log_and_continue") as driver:
        _pipe_good_bad_good(driver)
        assert _out(driver) == [("k1", 2), ("k3", 6)]
        task = _task(driver)
        assert task.deserialization_handler.count == 1
        assert task.records_skipped == 1
        assert task.offsets_to_commit() == {("in", 0): 3}  # the skipped record is consumed
        assert DLQ not in driver.produced_topic_names()
    assert "skipping record at topic in partition 0 offset 1" in caplog.text


def test_log_and_fail_raises_deserialization_error_naming_the_record() -> None:
    with _driver() as driver:  # log_and_fail is the default
        driver.pipe_raw("in", b"k1", b'{"n": 1}', 100, None)
        with pytest.raises(DeserializationError) as info:
            driver.pipe_raw("in", b"k2", b"{not json", 101, None)
    err = info.value
    assert (err.topic, err.partition, err.offset) == ("in", 0, 1)
    assert "in-0@1" in str(err)
    assert isinstance(err.__cause__, DeserializationError)  # the serde's own error


def test_the_deserialization_failure_names_the_setting_that_skips_such_records() -> None:
    """The error line says how to go on: the handler setting (the StreamsConfig field, as
    config files and ``--set`` spell it) and the value that skips."""
    with _driver() as driver, pytest.raises(DeserializationError) as info:
        driver.pipe_raw("in", b"k2", b"{not json", 101, None)
    line = str(info.value)
    assert "in-0@0" in line
    hint = re.search(r"(\w+)=(\w+) skips such records", line)
    assert hint is not None, line
    assert hint.groups() == ("deserialization_exception_handler", "log_and_continue")
    with _driver(**{hint.group(1): hint.group(2)}) as driver:  # what it says works
        driver.pipe_raw("in", b"k2", b"{not json", 101, None)
        assert _task(driver).deserialization_handler.count == 1


def test_key_deserialization_errors_are_handled_too() -> None:
    builder = StreamsBuilder()
    builder.stream("in", Consumed(key_serde=J, value_serde=S)).to("out", Produced(key_serde=J, value_serde=S))
    with TopologyTestDriver(
        builder.build(), {"deserialization_exception_handler": "log_and_continue"}
    ) as driver:
        driver.pipe_raw("in", b"nope", b"v", 1, None)
        driver.pipe_raw("in", b'"ok"', b"v", 2, None)
        assert driver.create_output_topic("out", J, S).read_key_values_to_list() == [("ok", "v")]


@pytest.mark.parametrize(
    ("response", "fails"), [(HandlerResponse.CONTINUE, False), (HandlerResponse.FAIL, True)]
)
def test_custom_handler_decides(response: HandlerResponse, fails: bool) -> None:
    calls: list[tuple[Any, Any, BaseException]] = []

    def handler(context: Any, raw: Any, exc: BaseException) -> HandlerResponse:
        calls.append((context, raw, exc))
        return response

    with _driver(deserialization_exception_handler=handler) as driver:
        if fails:
            with pytest.raises(DeserializationError):
                _pipe_good_bad_good(driver)
        else:
            _pipe_good_bad_good(driver)
            assert _out(driver) == [("k1", 2), ("k3", 6)]
    ((context, raw, exc),) = calls
    assert str(context.task_id) == "0_0"
    assert (raw.topic(), raw.partition(), raw.offset(), raw.value()) == ("in", 0, 1, b"{not json")
    assert isinstance(exc, DeserializationError)


@pytest.mark.parametrize("handler_result", ["raise", "not-a-response"])
def test_a_broken_custom_handler_fails_the_task(handler_result: str) -> None:
    def handler(context: Any, raw: Any, exc: BaseException) -> Any:
        if handler_result == "raise":
            raise RuntimeError("handler bug")
        return "continue"

    with _driver(deserialization_exception_handler=handler) as driver, pytest.raises(DeserializationError):
        _pipe_good_bad_good(driver)


def _dlq_headers(record: Any) -> dict[str, bytes | None]:
    return {k: v for k, v in record.headers if k.startswith("__streams.errors.")}


def test_dead_letter_topic_keeps_raw_record_and_adds_error_headers() -> None:
    with _driver(
        deserialization_exception_handler="log_and_continue", errors_dead_letter_queue_topic_name=DLQ
    ) as d:
        _pipe_good_bad_good(d)
        assert _out(d) == [("k1", 2), ("k3", 6)]
        (dead,) = d.create_output_topic(DLQ, B, B).read_records_to_list()
    assert (dead.key, dead.value, dead.timestamp) == (b"k2", b"{not json", 101)
    assert dead.headers[0] == ("origin", b"test")  # the record's own headers come first
    headers = _dlq_headers(dead)
    assert set(headers) == {
        HEADER_EXCEPTION,
        HEADER_MESSAGE,
        HEADER_STACKTRACE,
        HEADER_TOPIC,
        HEADER_PARTITION,
        HEADER_OFFSET,
    }
    assert headers[HEADER_EXCEPTION] == b"DeserializationError"
    assert b"invalid JSON" in (headers[HEADER_MESSAGE] or b"")
    assert b"Traceback" in (headers[HEADER_STACKTRACE] or b"")
    assert (headers[HEADER_TOPIC], headers[HEADER_PARTITION], headers[HEADER_OFFSET]) == (b"in", b"0", b"1")


def test_dead_letter_record_is_written_even_when_the_handler_fails() -> None:
    with _driver(errors_dead_letter_queue_topic_name=DLQ) as driver:
        with pytest.raises(DeserializationError):
            _pipe_good_bad_good(driver)
        (dead,) = driver.create_output_topic(DLQ, B, B).read_records_to_list()
    assert dead.value == b"{not json"


# -- processing exception handler -----------------------------------------------------------


def _failing_app() -> Topology:
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=S, value_serde=J))
        .filter(lambda k, v: True)
        .map_values(lambda v: 10 // v["n"], named="divide")
        .to("out", Produced(key_serde=S, value_serde=J))
    )
    return builder.build()


def test_processing_log_and_continue_skips_the_failing_record() -> None:
    config = {"processing_exception_handler": "log_and_continue", "errors_dead_letter_queue_topic_name": DLQ}
    with TopologyTestDriver(_failing_app(), config) as driver:
        source = driver.create_input_topic("in", S, J)
        for n in (1, 0, 2):
            source.pipe_input("k", {"n": n})
        assert _out(driver) == [("k", 10), ("k", 5)]
        assert _task(driver).processing_handler.count == 1
        (dead,) = driver.create_output_topic(DLQ, B, B).read_records_to_list()
    assert dead.value == b'{"n":0}'
    assert _dlq_headers(dead)[HEADER_EXCEPTION] == b"ZeroDivisionError"


def test_processing_log_and_fail_names_the_fused_dsl_node() -> None:
    with TopologyTestDriver(_failing_app()) as driver:
        source = driver.create_input_topic("in", S, J)
        source.pipe_input("k", {"n": 1})
        with pytest.raises(ProcessorError) as info:
            source.pipe_input("k", {"n": 0})
    err = info.value
    assert err.node == "divide"
    assert (err.task_id, err.topic, err.partition, err.offset) == ("0_0", "in", 0, 1)
    assert isinstance(err.__cause__, ZeroDivisionError)
    assert "node=divide" in str(err)


def test_processing_error_in_a_generated_node_name_and_in_a_user_processor() -> None:
    class Explode(Processor):
        def process(self, record: Record) -> None:
            raise KeyError("missing field")

    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=J))
    stream.filter(lambda k, v: v["kind"] == "x").to("out")
    stream.process(Explode, named="explode")
    with TopologyTestDriver(builder.build()) as driver:
        with pytest.raises(ProcessorError) as info:
            driver.create_input_topic("in", S, J).pipe_input("k", {})
        assert info.value.node == "KSTREAM-FILTER-0000000001"
        with pytest.raises(ProcessorError) as info:
            driver.create_input_topic("in", S, J).pipe_input("k", {"kind": "y"})
        assert info.value.node == "explode"


def test_custom_processing_handler_sees_the_exception() -> None:
    seen: list[BaseException] = []

    def handler(context: Any, raw: Any, exc: BaseException) -> HandlerResponse:
        seen.append(exc)
        return HandlerResponse.CONTINUE

    with TopologyTestDriver(_failing_app(), {"processing_exception_handler": handler}) as driver:
        driver.create_input_topic("in", S, J).pipe_input("k", {"n": 0})
        assert _out(driver) == []
    assert [type(e) for e in seen] == [ZeroDivisionError]
