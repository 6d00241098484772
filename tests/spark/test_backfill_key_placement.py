"""Backfills of topics that ordinary Python producers wrote (CRC32, not murmur2).

The streaming app keeps each key where the producer put it; a backfill's final state must
put it in the same task, or the live records of a key that follow are counted from
scratch in another task. And the app must know, from its first query, that such a
store's keys cannot be routed by murmur2.
"""

from __future__ import annotations

import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams
from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin
from platform_streams.ops.spark.backfill import KafkaInput, ParquetInput, backfill
from platform_streams.processor.partitioner import default_partition
from platform_streams.query import KeyQuery, StateQueryRequest
from tests.integration.support_apps import (
    app_config,
    log_ends,
    new_app_id,
    read_to_end,
    running_app,
    wait_until,
)
from tests.spark.apps import CountByKey
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 2
KEYS = 30


def _history() -> list[tuple[str, str]]:
    history = [(f"user-{i % KEYS}", f"h{i}") for i in range(20 * KEYS)]
    crc_only = {k for k, _ in history if zlib.crc32(k.encode()) % 2 != default_partition(k.encode(), 2)}
    assert crc_only, "some keys must land elsewhere than murmur2 puts them"
    return history


def _continue_live(
    streams: KafkaStreams, bootstrap: str, source: str, sink: str, store: str
) -> tuple[list[tuple[str, str]], Counter[tuple[str, int]]]:
    """Produce new records the way Python producers do; the counts they output."""
    wait_until(
        lambda: not streams.interactive_queries.key_routable(store),
        60,
        "the app knows the topic is not murmur2-placed (from the backfill's metadata record)",
    )
    new = [(f"user-{i % KEYS}", f"n{i}") for i in range(3 * KEYS)]
    produce(bootstrap, source, new, partitioner="consistent_random")
    wait_until(
        lambda: len(consume_all(bootstrap, sink, len(new), timeout_s=1)) >= len(new),
        60,
        "the new records counted",
    )
    for i in range(KEYS):
        request = StateQueryRequest.in_store(store).with_query(KeyQuery.with_key(f"user-{i}"))
        only = streams.query(request).get_only_partition_result()
        assert only is not None and only.get_result() == 23, f"user-{i}"
    outputs = read_to_end(bootstrap, sink, PARTITIONS)
    got = Counter(
        (r.key.decode(), int.from_bytes(r.value, "big", signed=True)) for r in outputs if r.key and r.value
    )
    return new, got


def _config(bootstrap: str, tmp_path: Path, snapshots: Path) -> StreamsConfig:
    return app_config(
        bootstrap,
        tmp_path / "state",
        new_app_id("crcbf"),
        statestore_cache_max_bytes=0,
        state_snapshot_location=str(snapshots),
        http_port=0,  # the instance directory (metadata topic) runs
    )


def test_kafka_backfill_of_a_consistent_random_topic_reports_it_and_the_app_continues(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, PARTITIONS, "crc-clicks"), new_topic(admin, PARTITIONS, "crc-counts")
    app = CountByKey(source, sink)
    history = _history()
    ends = log_ends(produce(bootstrap_servers, source, history, partitioner="consistent_random"), source, 2)
    snapshots = tmp_path / "snapshots"
    config = _config(bootstrap_servers, tmp_path, snapshots)
    result = backfill(spark, app, config, [KafkaInput()], None, final_state=snapshots, commit_offsets=True)
    assert list(result.misplaced_topics) == [source] and "murmur2" in result.misplaced_topics[source]
    assert sum(m.record_count for m in result.snapshots) == KEYS
    assert admin.committed_offsets(config.application_id, list(ends)) == ends
    with running_app(app(), config) as streams:
        new, got = _continue_live(streams, bootstrap_servers, source, sink, app.store)
    assert got == Counter((f"user-{i % KEYS}", 20 + 1 + i // KEYS) for i in range(len(new)))


def test_parquet_backfill_places_history_like_the_live_producers(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, PARTITIONS, "pq-clicks"), new_topic(admin, PARTITIONS, "pq-counts")
    app = CountByKey(source, sink)
    history = tmp_path / "history"
    spark.createDataFrame(
        [(k.encode(), v.encode(), 1_700_000_000_000 + i) for i, (k, v) in enumerate(_history())],
        "key BINARY, value BINARY, timestamp BIGINT",
    ).write.parquet(str(history))
    snapshots = tmp_path / "snapshots"
    config = _config(bootstrap_servers, tmp_path, snapshots)
    result = backfill(
        spark,
        app,
        config,
        [ParquetInput(str(history), source, PARTITIONS, partitioner="consistent")],
        None,
        final_state=snapshots,
    )
    assert list(result.misplaced_topics) == [source]
    assert sum(m.record_count for m in result.snapshots) == KEYS
    with running_app(app(), config) as streams:
        new, got = _continue_live(streams, bootstrap_servers, source, sink, app.store)
    # each key's live records reach the task holding its backfilled count: 21, 22, 23
    assert got == Counter((f"user-{i % KEYS}", 20 + 1 + i // KEYS) for i in range(len(new)))
