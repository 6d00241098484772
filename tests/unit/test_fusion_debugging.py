"""Debuggable generated code: tracebacks through fused code show the generated line with its
node and the user's own line; code is compiled once per sub-topology and freed with its
tasks; sink failures take an explicit path; ``fusion=False`` gives the same results."""

from __future__ import annotations

import gc
import linecache
import threading
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from platform_streams import StreamsBuilder, Topology
from platform_streams.dsl import Consumed, Produced
from platform_streams.errors import ProcessorError
from platform_streams.processor import fusion
from platform_streams.processor.exception_handlers import HandlerResponse
from platform_streams.serde import Integer, String
from platform_streams.testing import TopologyTestDriver

S, INT = String(), Integer()


def _explode(value: int) -> int:
    if value == 13:
        raise ValueError("unlucky value")  # THE USER'S LINE
    return value * 2


def _branch_topology() -> Topology:
    builder = StreamsBuilder()
    branches = (
        builder.stream("in", Consumed(key_serde=S, value_serde=INT))
        .filter(lambda k, v: v >= 0, "keep-positive")
        .map_values(_explode, "double")
        .flat_map_values(lambda v: [v, v + 1], "twice")
        .split(named="s-")
        .branch(lambda k, v: v % 2 == 0)
        .default_branch()
    )
    for name, stream in branches.items():
        assert stream is not None
        stream.to(name, Produced(key_serde=S, value_serde=INT))
    return builder.build()


def _driver(fusion_on: bool) -> TopologyTestDriver:
    return TopologyTestDriver(
        _branch_topology(), {"application_id": "dbg", "bootstrap_servers": "x:1", "fusion": fusion_on}
    )


@pytest.fixture(params=[True, False], ids=["fused", "plain"])
def driver(request: pytest.FixtureRequest) -> Iterator[TopologyTestDriver]:
    d = _driver(request.param)
    yield d
    d.close()


def _failure_traceback(fusion_on: bool) -> str:
    """The traceback of the user's exception (the ProcessorError's cause) for record 13,
    after checking the error names the DSL node whose function raised."""
    d = _driver(fusion_on)
    try:
        with pytest.raises(ProcessorError) as info:
            d.create_input_topic("in", S, INT).pipe_input("k", 13)
        assert info.value.node == "double"
        # formatted while the driver's tasks (and so the fused code's linecache entry) live
        return "".join(traceback.format_exception(info.value.__cause__))
    finally:
        d.close()


def test_traceback_through_fused_code_shows_the_users_line_and_the_node() -> None:
    text = _failure_traceback(True)
    # the generated line, from linecache, with the node it belongs to ...
    assert 'File "<fused ' in text
    fused_line = next(line for line in text.splitlines() if "= _f" in line and "(v)" in line)
    assert fused_line.rstrip().endswith("# double") and "_double(v)" in fused_line
    # ... and then the user's own line
    assert 'raise ValueError("unlucky value")  # THE USER\'S LINE' in text
    assert text.index("# double") < text.index("THE USER'S LINE")


def test_plain_closures_name_the_node_and_show_the_users_line() -> None:
    text = _failure_traceback(False)
    assert "<fused" not in text and "plain_nodes.py" in text
    assert "THE USER'S LINE" in text


def test_fused_and_plain_produce_the_same_records(driver: TopologyTestDriver) -> None:
    inputs = driver.create_input_topic("in", S, INT)
    for i, value in enumerate([4, -1, 7, 0, 20]):
        inputs.pipe_input(f"k{i}", value, timestamp_ms=i)
    even = driver.create_output_topic("s-1", S, INT).read_key_values_to_list()
    odd = driver.create_output_topic("s-0", S, INT).read_key_values_to_list()
    assert even == [("k0", 8), ("k2", 14), ("k3", 0), ("k4", 40)]
    assert odd == [("k0", 9), ("k2", 15), ("k3", 1), ("k4", 41)]


def test_generated_code_is_compiled_once_per_subtopology_and_freed_with_its_tasks() -> None:
    gc.collect()
    before = fusion.compiled_sources()
    drivers = [_driver(True) for _ in range(5)]
    sources = [d._tasks[0].graph.sources["in"] for d in drivers]
    batches = [d._tasks[0].graph.batches["in"] for d in drivers]
    assert len({fn.__code__ for fn in sources}) == 1  # one compilation, five tasks
    assert len({fn.__code__ for fn in batches}) == 1
    assert fusion.compiled_sources() == before + 2  # the record's function and the batch's
    filename = sources[0].__code__.co_filename
    assert linecache.getline(filename, 2).strip()  # registered for tracebacks
    del sources, batches
    for one in drivers:
        one.close()
    del drivers, one
    gc.collect()
    assert fusion.compiled_sources() == before
    assert filename not in fusion._LINE_MAPS and filename not in linecache.cache


def test_a_failing_sink_goes_to_the_production_handler_with_its_node() -> None:
    def bad_serializer(value: Any) -> bytes:
        raise ValueError("cannot serialize")

    class BadSerde(String):
        def serialize(self, value: Any) -> bytes | None:
            return bad_serializer(value)

    seen: list[str] = []

    def production_handler(context: Any, record: Any, exc: BaseException) -> HandlerResponse:
        seen.append(type(exc).__name__)
        return HandlerResponse.CONTINUE

    for fusion_on in (True, False):
        builder = StreamsBuilder()
        builder.stream("in", Consumed(key_serde=S, value_serde=INT)).map_values(str).to(
            "out", Produced(key_serde=S, value_serde=BadSerde())
        )
        d = TopologyTestDriver(
            builder.build(),
            {
                "application_id": "sinkfail",
                "bootstrap_servers": "x:1",
                "fusion": fusion_on,
                "production_exception_handler": production_handler,
            },
        )
        try:
            d.create_input_topic("in", S, INT).pipe_input("k", 1)
        finally:
            d.close()
    assert seen == ["ValueError", "ValueError"]


def test_a_release_inside_a_compile_does_not_deadlock() -> None:
    """Finalizers of dropped tasks' functions run inside garbage collection, which can start
    while the same thread holds the compile lock; a release must then not wait for that
    lock (it did once, and the unit suite hung). A daemon thread stands in for that thread,
    so a regression fails here after 10 s instead of hanging."""

    def release_while_compiling() -> None:
        with fusion._COMPILED_LOCK:
            fusion._release("a source no task uses")

    thread = threading.Thread(target=release_while_compiling, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert fusion.compiled_sources() >= 0  # drains the queued release
