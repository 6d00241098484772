"""The processing exception handler acts at the failing node only (KIP-1033), fused or not.

Kafka Streams' ``ProcessorNode.process`` (streams/src/main/java/org/apache/kafka/streams/
processor/internals/ProcessorNode.java) catches what its own processor raises and asks the
handler: CONTINUE returns to the parent's ``forward`` loop, which goes on with the next
child, so sibling branches -- other children of an upstream node, ``split()`` branches, the
other records a ``flat_map`` forwards -- still get the record; FAIL throws a
``FailedProcessingException`` naming the node, which no node above it handles again.
Translated from ``ProcessorNodeTest`` and ``ProcessingExceptionHandlerIntegrationTest``
(streams/src/test/java/org/apache/kafka/streams/processor/internals/ProcessorNodeTest.java,
streams/src/test/java/org/apache/kafka/streams/integration/
ProcessingExceptionHandlerIntegrationTest.java); each test names its Java source. Every test
runs with fused code and with plain closures (``fusion=False``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Branched, Consumed
from platform_streams.errors import ProcessorError, TaskMigratedError
from platform_streams.processor import Processor, Record
from platform_streams.processor.exception_handlers import HandlerResponse
from platform_streams.runtime.tasks.task import StreamTask
from platform_streams.serde import Bytes, String
from platform_streams.testing import TopologyTestDriver

S, B = String(), Bytes()
DLQ = "dead-letters"


@pytest.fixture(params=[True, False], ids=["fused", "plain"])
def fusion(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _fail_on(bad: str) -> Any:
    def mapper(value: str) -> str:
        if bad in value:
            raise ValueError(f"cannot map {value}")
        return value.upper()

    return mapper


def _driver(
    topology: Topology, fusion: bool, handler: Any = "log_and_continue", **more: Any
) -> TopologyTestDriver:
    config = {
        "application_id": "scope",
        "default_key_serde": "string",
        "default_value_serde": "string",
        "processing_exception_handler": handler,
        "fusion": fusion,
        **more,
    }
    return TopologyTestDriver(topology, config)


def _pipe(driver: TopologyTestDriver, *values: str) -> None:
    topic = driver.create_input_topic("in", S, S)
    for value in values:
        topic.pipe_input("k", value)


def _values(driver: TopologyTestDriver, topic: str) -> list[Any]:
    return driver.create_output_topic(topic, S, S).read_values_to_list()


def _task(driver: TopologyTestDriver) -> StreamTask:
    (task,) = driver._tasks
    return task


def _siblings(first_fails: bool) -> Topology:
    """One stream, two chains: ``a`` fails on "bad" values, ``b`` never does."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=S))
    chains = [("a", _fail_on("bad")), ("b", str.lower)]
    for topic, mapper in chains if first_fails else reversed(chains):
        stream.filter(lambda k, v: True).map_values(mapper, named=f"map-{topic}").to(topic)
    return builder.build()


@pytest.mark.parametrize("first_fails", [True, False], ids=["failing-first", "failing-last"])
def test_continue_lets_sibling_branches_process_the_record(fusion: bool, first_fails: bool) -> None:
    """ProcessorNode.process: CONTINUE returns to the parent's forward, which goes on with
    the next child (ProcessorNodeTest.shouldNotThrowFailedProcessingExceptionWhen
    ProcessingExceptionHandlerRepliesWithContinue; ProcessingExceptionHandlerIntegrationTest.
    shouldContinueWhenProcessingExceptionOccursIfExceptionHandlerReturnsContinue)."""
    with _driver(_siblings(first_fails), fusion, errors_dead_letter_queue_topic_name=DLQ) as driver:
        _pipe(driver, "Good1", "bad2", "Good3")
        assert _values(driver, "a") == ["GOOD1", "GOOD3"]
        assert _values(driver, "b") == ["good1", "bad2", "good3"]
        task = _task(driver)
        assert task.processing_handler.count == 1
        assert task.records_skipped == 1  # Kafka's droppedRecordsSensor: once per handled error
        (dead,) = driver.create_output_topic(DLQ, B, B).read_records_to_list()
    assert dead.value == b"bad2"


def test_continue_goes_on_with_the_other_split_branches_and_the_parents_other_children(fusion: bool) -> None:
    """A ``split()`` branch that fails on a record leaves the split's siblings their record
    (KStreamBranch forwards to one child, whose ProcessorNode handles the error)."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=S))
    (
        stream.split()
        .branch(
            lambda k, v: v.startswith("x"),
            Branched.with_consumer(lambda s: s.map_values(_fail_on("bad")).to("x")),
        )
        .default_branch(Branched.with_consumer(lambda s: s.to("other")))
    )
    stream.map_values(str.lower).to("all")
    with _driver(builder.build(), fusion) as driver:
        _pipe(driver, "x-ok", "x-bad", "plain")
        assert _values(driver, "x") == ["X-OK"]
        assert _values(driver, "other") == ["plain"]
        assert _values(driver, "all") == ["x-ok", "x-bad", "plain"]


def test_a_failing_predicate_of_a_split_skips_only_the_split(fusion: bool) -> None:
    """The split's own predicate raising is the split node's error: its parent's other
    children still get the record."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=S))

    def starts_with_x(key: str, value: str) -> bool:
        if "bad" in value:
            raise ValueError("cannot test")
        return value.startswith("x")

    stream.split().branch(starts_with_x, Branched.with_consumer(lambda s: s.to("x"))).default_branch(
        Branched.with_consumer(lambda s: s.to("other"))
    )
    stream.to("all")
    with _driver(builder.build(), fusion) as driver:
        _pipe(driver, "x1", "bad", "y")
        assert _values(driver, "x") == ["x1"]
        assert _values(driver, "other") == ["y"]
        assert _values(driver, "all") == ["x1", "bad", "y"]


def test_continue_in_a_child_of_flat_map_lets_the_other_records_through(fusion: bool) -> None:
    """flat_map_values forwards each element through its child's ProcessorNode: one element
    failing there leaves the others (and the rest of the record's work) alone."""
    builder = StreamsBuilder()
    words = builder.stream("in", Consumed(key_serde=S, value_serde=S)).flat_map_values(str.split)
    words.map_values(_fail_on("bad")).to("upper")
    words.to("words")
    with _driver(builder.build(), fusion) as driver:
        _pipe(driver, "one bad two")
        assert _values(driver, "upper") == ["ONE", "TWO"]
        assert _values(driver, "words") == ["one", "bad", "two"]
        assert _task(driver).processing_handler.count == 1


def test_an_error_in_the_flat_map_itself_keeps_what_it_forwarded(fusion: bool) -> None:
    """The flat-map's own function failing part-way: the elements forwarded before stay
    forwarded (Kafka's processor forwarded them), the rest of the record is skipped there."""

    def words(value: str) -> Iterator[str]:
        for word in value.split():
            if word == "bad":
                raise ValueError("bad word")
            yield word

    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=S))
    stream.flat_map_values(words).to("words")
    stream.to("all")
    with _driver(builder.build(), fusion) as driver:
        _pipe(driver, "one bad two", "three")
        assert _values(driver, "words") == ["one", "three"]
        assert _values(driver, "all") == ["one bad two", "three"]


class _Fanout(Processor):
    """Forwards each record to both children, then forwards "done" to ``after``."""

    def process(self, record: Record) -> None:
        self.context.forward(record, "fails")
        self.context.forward(record, "after")
        self.context.forward(record.with_value(record.value + "-done"), "after")


def test_continue_in_a_child_of_a_user_processor_returns_to_its_forward(fusion: bool) -> None:
    """A Processor API processor's ``forward``: the failing child's node handles the error,
    the processor's next forwards happen (ProcessorNode of each child)."""
    topology = Topology()
    topology.add_source("source", "in", key_serde=S, value_serde=S)
    topology.add_processor("fanout", _Fanout, "source")
    topology.add_processor("fails", lambda: _MapProcessor(_fail_on("bad")), "fanout")
    topology.add_processor("after", lambda: _MapProcessor(str.lower), "fanout")
    topology.add_sink("fails-sink", "fails-out", "fails", key_serde=S, value_serde=S)
    topology.add_sink("after-sink", "after-out", "after", key_serde=S, value_serde=S)
    with _driver(topology, fusion) as driver:
        _pipe(driver, "ok", "bad")
        assert _values(driver, "fails-out") == ["OK"]
        assert _values(driver, "after-out") == ["ok", "ok-done", "bad", "bad-done"]


class _MapProcessor(Processor):
    def __init__(self, mapper: Any) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(self.mapper(record.value)))


def test_fail_names_the_failing_node_and_stops_the_siblings_after_it(fusion: bool) -> None:
    """FAIL: the failing node's error, not handled again above it
    (ProcessorNodeTest.shouldThrowFailedProcessingExceptionWhenProcessingExceptionHandler
    RepliesWithFail; ProcessingExceptionHandlerIntegrationTest.shouldStopOnFailedProcessor
    WhenProcessingExceptionOccursInFailProcessingExceptionHandler: nothing after it runs)."""
    seen: list[str] = []

    def fail(context: Any, raw: Any, exc: BaseException) -> HandlerResponse:
        seen.append(str(exc))
        return HandlerResponse.FAIL

    with _driver(_siblings(first_fails=True), fusion, handler=fail) as driver:
        _pipe(driver, "Good1")
        with pytest.raises(ProcessorError) as info:
            _pipe(driver, "bad2")
        assert _values(driver, "a") == ["GOOD1"]
        assert _values(driver, "b") == ["good1"]  # the sibling after the failing node: not run
    assert info.value.node == "map-a"
    assert (info.value.topic, info.value.offset) == ("in", 1)
    assert isinstance(info.value.__cause__, ValueError)
    assert seen == ["cannot map bad2"]  # asked once, by the failing node only


def test_continue_from_a_nested_node_is_handled_once(fusion: bool) -> None:
    """The innermost node handles its error; the nodes above it see nothing (one handler
    call, one dropped record) and go on with their own other children."""
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=S))
    inner = stream.map_values(str.strip).filter(lambda k, v: True)
    inner.map_values(_fail_on("bad"), named="deep").to("deep")
    inner.to("inner")
    stream.to("all")
    calls: list[Any] = []

    def handler(context: Any, raw: Any, exc: BaseException) -> HandlerResponse:
        calls.append(exc)
        return HandlerResponse.CONTINUE

    with _driver(builder.build(), fusion, handler=handler) as driver:
        _pipe(driver, " bad ")
        assert _values(driver, "deep") == []
        assert _values(driver, "inner") == ["bad"]
        assert _values(driver, "all") == [" bad "]
    assert [type(e) for e in calls] == [ValueError]


def test_internal_exceptions_are_not_handled(fusion: bool) -> None:
    """ProcessorNodeTest.shouldNotHandleInternalExceptionsThrownDuringProcessing: a task
    migration raised inside a node passes every node unhandled, the handler never asked."""
    calls: list[Any] = []

    def handler(context: Any, raw: Any, exc: BaseException) -> HandlerResponse:
        calls.append(exc)
        return HandlerResponse.CONTINUE

    def migrated(value: str) -> str:
        raise TaskMigratedError("the group moved on")

    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=S, value_serde=S))
    stream.map_values(migrated).to("a")
    stream.to("b")
    with _driver(builder.build(), fusion, handler=handler) as driver, pytest.raises(TaskMigratedError):
        _pipe(driver, "v")
    assert calls == []


def test_a_handler_that_raises_fails_at_the_node(fusion: bool) -> None:
    """ProcessorNodeTest.shouldThrowFailedProcessingExceptionWhenProcessingExceptionHandler
    ThrowsAnException: the handler's own error fails the task, naming the failing node."""

    def handler(context: Any, raw: Any, exc: BaseException) -> HandlerResponse:
        raise RuntimeError("KABOOM!")

    with _driver(_siblings(first_fails=True), fusion, handler=handler) as driver:
        with pytest.raises(ProcessorError) as info:
            _pipe(driver, "bad")
        assert _values(driver, "b") == []
    assert info.value.node == "map-a"
