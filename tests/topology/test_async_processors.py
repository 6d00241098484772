"""Async processors (``map_values_async``, ``filter_async``, ``foreach_async``, ``process_async``):
in order per key, concurrent across keys, bounded in flight, completed before a commit.

The driver tests run through the TopologyTestDriver (what a user's unit test does: in-flight
work completes before ``pipe_input`` returns). The concurrency tests feed a real
:class:`~platform_streams.runtime.tasks.task.StreamTask` many records at once, as a worker does,
and capture what its sinks send.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Produced
from platform_streams.errors import ProcessorError
from platform_streams.processor import AsyncOptions, AsyncRecordContext, Processor, PunctuationType, Record
from platform_streams.processor.record_collector import OutgoingRecord
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.tasks.task import StreamTask, start_task
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.testing.driver import TopologyTestDriver
from platform_streams.testing.records import DriverRecord
from platform_streams.topology.compiler import compile_topology

S = String()


def _stream(builder: StreamsBuilder) -> Any:
    return builder.stream("in", Consumed(key_serde=S, value_serde=S))


def _to_out(stream: Any) -> None:
    stream.to("out", Produced(key_serde=S, value_serde=S))


def test_driver_completes_async_work_before_pipe_returns() -> None:
    """A coroutine mapper, a blocking filter and an async foreach: each piped record's results
    are there when ``pipe_input`` returns, in input order."""
    seen: list[str] = []

    async def enrich(key: str, value: str) -> str:
        await asyncio.sleep(0.002)
        return f"{key}:{value.upper()}"

    def keep(value: str) -> bool:
        time.sleep(0.001)
        return not value.endswith("SKIP")

    async def record(value: str) -> None:
        seen.append(value)

    builder = StreamsBuilder()
    mapped = _stream(builder).map_values_async(enrich).filter_async(keep)
    mapped.foreach_async(record)
    _to_out(mapped)
    with TopologyTestDriver(builder.build()) as driver:
        source = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, S)
        for i in range(20):
            source.pipe_input(f"k{i % 3}", "skip" if i == 7 else f"v{i}")
            if i != 7:
                assert out.read_key_value() == (f"k{i % 3}", f"k{i % 3}:V{i}"), "not completed by the pipe"
            assert out.is_empty()
        assert seen == [f"k{i % 3}:V{i}" for i in range(20) if i != 7]


def test_process_async_reads_and_writes_its_own_key_only() -> None:
    """``process_async`` keeps a per-key running total in a store through its context; a store
    it was not given is refused, and the processing exception handler names the node."""

    async def total(record: Record, ctx: AsyncRecordContext) -> None:
        await asyncio.sleep(0)
        running = int(ctx.get("totals") or 0) + int(record.value)
        ctx.put("totals", str(running))
        ctx.forward(record.with_value(str(running)))

    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("totals"), S, S))
    _to_out(_stream(builder).process_async(total, "totals", named="totaller"))
    with TopologyTestDriver(builder.build()) as driver:
        source = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, S)
        source.pipe_key_value_list([("a", "1"), ("b", "10"), ("a", "2"), ("a", "3"), ("b", "5")])
        assert out.read_key_values_to_list() == [("a", "1"), ("b", "10"), ("a", "3"), ("a", "6"), ("b", "15")]
        assert driver.get_key_value_store("totals").get("a") == "6"

    async def sneaky(record: Record, ctx: AsyncRecordContext) -> None:
        ctx.get("elsewhere")

    builder = StreamsBuilder()
    _to_out(_stream(builder).process_async(sneaky, named="sneaky"))
    with TopologyTestDriver(builder.build()) as driver:
        with pytest.raises(ProcessorError, match="not connected to this async processor") as failed:
            driver.create_input_topic("in", S, S).pipe_input("a", "1")
        assert failed.value.node == "sneaky"


def test_timeouts_and_retries_then_the_exception_handler() -> None:
    """A call that times out is retried; one that keeps failing goes to the processing
    exception handler (log_and_continue: the record is skipped, the next ones go on)."""
    attempts: dict[str, int] = defaultdict(int)

    async def flaky(value: str) -> str:
        attempts[value] += 1
        if value == "slow" and attempts[value] == 1:
            await asyncio.sleep(5)
        if value == "bad":
            raise ValueError("the service said no")
        return value

    options = AsyncOptions(timeout_s=0.2, retries=2, retry_backoff_s=0.01)
    builder = StreamsBuilder()
    _to_out(_stream(builder).map_values_async(flaky, options))
    config = {"processing_exception_handler": "log_and_continue"}
    with TopologyTestDriver(builder.build(), config) as driver:
        source = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, S)
        source.pipe_key_value_list([("k", "slow"), ("k", "bad"), ("k", "fine")])
        assert out.read_values_to_list() == ["slow", "fine"]
        assert attempts == {"slow": 2, "bad": 3, "fine": 1}


# -- a task fed many records at once, as a worker feeds it ---------------------------------


class _Capture:
    """What the task's sinks send, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, *record: *OutgoingRecord) -> None:
        _, key, value, *_rest = record
        assert key is not None and value is not None
        self.sent.append((key.decode(), value.decode()))

    def partition_count(self, topic: str) -> int:
        return 1


def _task(builder: StreamsBuilder, tmp_path: Path) -> tuple[StreamTask, _Capture]:
    plan = compile_topology(builder.build())
    config = StreamsConfig(application_id="async-task", bootstrap_servers="dummy:9092", state_dir=tmp_path)
    capture = _Capture()
    task = start_task(TaskId(0, 0), plan, tmp_path, {}, config, capture, lambda: 0)
    task.initialize_processors()
    return task, capture


def _records(n: int, keys: int) -> list[DriverRecord]:
    return [DriverRecord("in", 0, i, f"k{i % keys}".encode(), f"{i}".encode(), i, []) for i in range(n)]


def test_in_order_per_key_concurrent_across_keys_bounded_in_flight(tmp_path: Path) -> None:
    """600 records of 20 keys with random call times: each key's outputs keep its input order,
    calls of different keys overlap, never more than ``max_in_flight`` run at once, and one
    ``process`` call takes no more records than the node has room for (the rest stay in the
    partition buffer, which is what makes the worker pause the partition)."""
    running = 0
    most = 0
    lock = threading.Lock()
    rng = random.Random(7)
    delays = [rng.uniform(0, 0.01) for _ in range(600)]

    def call(value: str) -> str:  # blocking: the thread pool runs it
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(delays[int(value)])
        with lock:
            running -= 1
        return value

    builder = StreamsBuilder()
    _to_out(_stream(builder).map_values_async(call, AsyncOptions(max_in_flight=16)))
    task, capture = _task(builder, tmp_path)
    try:
        task.add_records(("in", 0), _records(600, 20))
        first = task.process(10_000)
        assert first <= 16, f"took {first} records with room for 16"
        while task.process(10_000) or task.complete_in_flight():
            pass
    finally:
        task.close()
    assert len(capture.sent) == 600
    per_key: dict[str, list[int]] = defaultdict(list)
    for key, value in capture.sent:
        per_key[key].append(int(value))
    assert all(values == sorted(values) for values in per_key.values()), "a key's records overtook each other"
    assert 1 < most <= 16, f"{most} calls ran at once"
    assert [int(v) for _, v in capture.sent] != list(range(600)), "keys should complete out of input order"


def test_a_commit_completes_the_work_in_flight_first(tmp_path: Path) -> None:
    """``flush_caches`` (a commit's first step) returns only once every call in flight completed
    and its output was sent: the offsets committed next cover nothing unfinished."""
    gate = threading.Event()

    async def held(value: str) -> str:
        while not gate.is_set():
            await asyncio.sleep(0.005)
        return value

    builder = StreamsBuilder()
    _to_out(_stream(builder).map_values_async(held))
    task, capture = _task(builder, tmp_path)
    try:
        task.add_records(("in", 0), _records(50, 5))
        assert task.process(10_000) == 50
        assert task.offsets_to_commit() == {("in", 0): 50}
        committing = threading.Thread(target=task.flush_caches)
        committing.start()
        committing.join(0.3)
        assert committing.is_alive() and not capture.sent, "the commit went on with calls in flight"
        gate.set()
        committing.join(10)
        assert not committing.is_alive()
        assert len(capture.sent) == 50
    finally:
        gate.set()
        task.close()


def test_what_a_punctuator_forwards_completes_before_advance_returns() -> None:
    """A wall-clock punctuator forwards into an async mapper: its result is there when
    ``advance_wall_clock_time`` returns, as a piped record's is when ``pipe_input`` returns."""

    class Ticker(Processor):
        def init(self, context: Any) -> None:
            super().init(context)
            context.schedule(1000, PunctuationType.WALL_CLOCK_TIME, self.tick)

        def tick(self, now: int) -> None:
            self.context.forward(Record("tick", str(now), now))

        def process(self, record: Record) -> None:
            pass

    async def later(value: str) -> str:
        await asyncio.sleep(0.01)
        return f"at {value}"

    builder = StreamsBuilder()
    _to_out(_stream(builder).process(Ticker).map_values_async(later))
    with TopologyTestDriver(builder.build()) as driver:
        out = driver.create_output_topic("out", S, S)
        driver.advance_wall_clock_time(1000)
        assert out.read_key_values_to_list() == [("tick", "at 1000")]
