"""Where a failing record stops the application: exactly at the record, on both brokers.

Kafka Streams' ``LogAndFailExceptionHandler`` (and a processing handler answering FAIL) stops
the task at the failing record: no record after it is processed, so nothing derived from
one is produced (``StreamTask.process`` processes one record at a time and rethrows; the
StreamThread dies before it polls or processes again). Here a task processes a batch of
records in one call (processor/fused_source.py), the worker polls and routes thousands of
records at a time, and a failure goes through the worker's close path: each could let a
record after the failing one through. A word count (flat_map_values -> group_by -> count)
shows it in its repartition topic, read uncommitted so that anything written is seen, and
a restart with the handler set to continue must then count every word exactly once more
than the crashed run left committed.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, State, StreamsBuilder
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced
from platform_streams.errors import StreamsStateError
from platform_streams.kafka import KafkaAdmin
from platform_streams.serde import Long, String
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

S = String()
#: the record at offset 4 is undecodable (not UTF-8) or fails the mapper ("poison"); every
#: line names its offset in its words, so a word says which input record it came from
POISON_AT = 4
LINES = [f"common line{i} word{i}" for i in range(10)]


def _split(line: str) -> list[str]:
    if "poison" in line:
        raise ValueError("cannot split a poisoned line")
    return [w for w in re.split(r"\W+", line.lower()) if w]


def _word_count(source: str, sink: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed(key_serde=S, value_serde=S))
        .flat_map_values(_split)
        .group_by(lambda key, word: word, Grouped(key_serde=S, value_serde=S, name="words"))
        .count(materialized=Materialized.as_("word-counts"))
        .to_stream()
        .to(sink, Produced(key_serde=S, value_serde=Long()))
    )
    return builder


def _records(poison: bytes) -> list[tuple[str | None, bytes]]:
    values = [line.encode() for line in LINES]
    values[POISON_AT] = poison
    return [(None, value) for value in values]


def _lines_of(words: list[Any]) -> set[int]:
    """The input offsets the repartitioned words came from (``lineN``/``wordN``)."""
    found = set()
    for record in words:
        match = re.fullmatch(rb"(?:line|word)(\d+)", record.key or b"")
        if match:
            found.add(int(match.group(1)))
    return found


@pytest.mark.parametrize(
    ("poison", "setting"),
    [
        (b"\xff\xfe not utf-8", "deserialization_exception_handler"),
        (b"poison line", "processing_exception_handler"),
    ],
    ids=["deserialization", "processing"],
)
def test_log_and_fail_stops_at_the_failing_record_and_a_lenient_restart_counts_exactly(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, poison: bytes, setting: str
) -> None:
    source, sink = new_topic(admin, 1, "text-lines"), new_topic(admin, 1, "counts")
    produce(bootstrap_servers, source, _records(poison))
    config = app_config(bootstrap_servers, tmp_path, **{setting: "log_and_fail"})
    repartition = f"{config.application_id}-words-repartition"
    streams = KafkaStreams(_word_count(source, sink), config)
    streams.start()
    try:
        with pytest.raises(StreamsStateError):
            streams.wait_for_state(State.NOT_RUNNING, timeout_s=60)
    finally:
        streams.close(timeout_s=30)
    # everything the crashed run wrote, committed or not: 3 words a good line before the poison
    written = consume_all(bootstrap_servers, repartition, 3 * POISON_AT + 1, timeout_s=10)
    assert _lines_of(written) <= set(range(POISON_AT)), "a record after the failing one was processed"
    committed = admin.committed_offsets(config.application_id, [(source, 0)])[(source, 0)]
    assert (committed or 0) <= POISON_AT, "nothing after the failing record was committed"

    lenient = app_config(
        bootstrap_servers, tmp_path, app_id=config.application_id, **{setting: "log_and_continue"}
    )
    good = [line for i, line in enumerate(LINES) if i != POISON_AT]
    with running_app(_word_count(source, sink), lenient):
        counts: dict[str, int] = {}

        def counted() -> bool:
            for record in consume_all(bootstrap_servers, sink, 10_000, timeout_s=2):
                counts[(record.key or b"").decode()] = int.from_bytes(record.value or b"", "big", signed=True)
            return counts.get("common") == len(good) and len(counts) == 1 + 2 * len(good)

        with contextlib.suppress(AssertionError):  # the comparison below shows what was counted
            wait_until(counted, 60, "every good line counted")
    expected = Counter(w for line in good for w in _split(line))
    assert counts == dict(expected), "each word counted once: the crash neither lost nor repeated a line"
