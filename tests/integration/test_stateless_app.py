"""A stateless application on the real broker: exact output at volume, placement, lifecycle."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, State, StreamsBuilder, StreamsUncaughtExceptionResponse
from platform_streams.dsl import Consumed, Produced
from platform_streams.errors import MissingSourceTopicError, ProcessorError, StreamsStateError
from platform_streams.kafka import KafkaAdmin, log_end_offsets
from platform_streams.processor.partitioner import default_partition
from platform_streams.serde import Json, String
from tests.integration.support_apps import active_tasks, app_config, log_ends, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = pytest.mark.broker

S, J = String(), Json()


def _filter_map_app(source: str, sink: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=S, value_serde=J)).filter(
        lambda k, v: v["n"] % 3 != 0
    ).map_values(lambda v: {"n": v["n"], "double": v["n"] * 2}).to(sink, Produced(key_serde=S, value_serde=J))
    return builder


def test_hundred_thousand_records_across_four_partitions_exactly(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 4, "in"), new_topic(admin, 4, "out")
    total = 100_000
    placed = produce(bootstrap_servers, source, ((f"k{i % 977}", json.dumps({"n": i})) for i in range(total)))
    assert {p for p, _ in placed} == {0, 1, 2, 3}
    expected = Counter(
        (f"k{i % 977}", json.dumps({"n": i, "double": 2 * i}, separators=(",", ":")))
        for i in range(total)
        if i % 3 != 0
    )
    config = app_config(bootstrap_servers, tmp_path, commit_interval_ms=1000)
    with running_app(_filter_map_app(source, sink), config) as streams:
        assert active_tasks(streams) == ["0_0", "0_1", "0_2", "0_3"]
        records = consume_all(bootstrap_servers, sink, sum(expected.values()), timeout_s=90)
        assert streams.state() is State.RUNNING
    got = Counter((r.key.decode(), r.value.decode()) for r in records if r.key and r.value)
    assert got == expected
    # nothing beyond the expected records was written, and keys kept their partition
    ends = log_end_offsets({"bootstrap.servers": bootstrap_servers}, [(sink, p) for p in range(4)])
    assert sum(ends.values()) == sum(expected.values())
    assert all(r.partition == default_partition(r.key, 4) for r in records if r.key)
    # the graceful close committed every input offset
    assert admin.committed_offsets(config.application_id, [(source, p) for p in range(4)]) == log_ends(
        placed, source, 4
    )


def test_custom_partitioner_timestamps_and_headers_on_the_broker(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 4, "in"), new_topic(admin, 3, "out")
    calls: list[int] = []

    def last_partition(topic: str, key: Any, value: Any, num_partitions: int) -> int:
        calls.append(num_partitions)
        return num_partitions - 1

    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=S, value_serde=S)).to(
        sink, Produced(key_serde=S, value_serde=S, partitioner=last_partition)
    )
    produce(
        bootstrap_servers,
        source,
        [(f"k{i}", f"v{i}") for i in range(20)],
        timestamp_ms=1_600_000_000_000,
        headers=[("trace", b"t-1")],
    )
    with running_app(builder, app_config(bootstrap_servers, tmp_path)):
        records = consume_all(bootstrap_servers, sink, 20, timeout_s=30)
    assert len(records) == 20
    assert {r.partition for r in records} == {2}
    assert set(calls) == {3}
    assert {r.timestamp for r in records} == {1_600_000_000_000}
    assert all(r.headers == [("trace", b"t-1")] for r in records)


def test_missing_source_topic_fails_start_and_ends_in_error(bootstrap_servers: str, tmp_path: Path) -> None:
    builder = StreamsBuilder()
    builder.stream("no-such-topic-for-platform-streams").to("out")
    streams = KafkaStreams(builder, app_config(bootstrap_servers, tmp_path))
    with pytest.raises(MissingSourceTopicError, match="no-such-topic"):
        streams.start()
    assert streams.state() is State.ERROR
    with pytest.raises(StreamsStateError):
        streams.wait_for_state(State.RUNNING, timeout_s=1)
    streams.close()


def test_a_processing_failure_reaches_the_uncaught_exception_handler_and_stops_the_client(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 1, "in"), new_topic(admin, 1, "out")
    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=S, value_serde=S)).map_values(
        lambda v: str(1 // int(v)), "inverse"
    ).to(sink, Produced(key_serde=S, value_serde=S))
    failures: list[BaseException] = []
    states: list[State] = []
    streams = KafkaStreams(builder, app_config(bootstrap_servers, tmp_path))

    def handler(exc: BaseException) -> StreamsUncaughtExceptionResponse:
        failures.append(exc)
        return StreamsUncaughtExceptionResponse.SHUTDOWN_CLIENT

    streams.set_uncaught_exception_handler(handler)
    streams.set_state_listener(lambda new, old: states.append(new))
    try:
        streams.start()
        streams.wait_for_state(State.RUNNING, timeout_s=30)
        produce(bootstrap_servers, source, [("k", "1"), ("k", "0")])
        wait_until(lambda: streams.state() is State.ERROR, 30, "the client is in ERROR")
    finally:
        streams.close(timeout_s=30)
    (failure,) = failures
    assert isinstance(failure, ProcessorError)
    assert failure.node == "inverse" and failure.offset == 1
    assert states[-2:] == [State.PENDING_ERROR, State.ERROR]
    assert [r.value for r in consume_all(bootstrap_servers, sink, 1, timeout_s=30)] == [b"1"]


def test_topic_extractor_with_a_custom_partitioner_on_topics_unknown_at_start(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """The partitioner needs the partition count of a topic chosen per record at run time."""
    source, even, odd = new_topic(admin, 1, "in"), new_topic(admin, 2, "even"), new_topic(admin, 3, "odd")
    seen: list[tuple[str, int]] = []

    def partitioner(topic: str, key: Any, value: Any, num_partitions: int) -> int:
        seen.append((topic, num_partitions))
        return num_partitions - 1

    builder = StreamsBuilder()
    builder.stream(source, Consumed(key_serde=S, value_serde=S)).to(
        lambda k, v, meta: even if int(v) % 2 == 0 else odd,
        Produced(key_serde=S, value_serde=S, partitioner=partitioner),
    )
    produce(bootstrap_servers, source, [(f"k{i}", str(i)) for i in range(10)])
    with running_app(builder, app_config(bootstrap_servers, tmp_path)):
        to_even = consume_all(bootstrap_servers, even, 5, timeout_s=30)
        to_odd = consume_all(bootstrap_servers, odd, 5, timeout_s=30)
    assert sorted(int(r.value or b"") for r in to_even) == [0, 2, 4, 6, 8]
    assert {r.partition for r in to_even} == {1} and {r.partition for r in to_odd} == {2}
    assert set(seen) == {(even, 2), (odd, 3)}
