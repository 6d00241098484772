"""Versioned stores and versioned joins on the broker.

``test_should_restore`` is Kafka's VersionedKeyValueStoreIntegrationTest.shouldRestore (apache/kafka
streams/src/test/java/org/apache/kafka/streams/integration/VersionedKeyValueStoreIntegrationTest.java)
with its shouldSetChangelogTopicProperties check folded in: a Processor API app writes versions
(out of order, replaced, tombstoned, deleted) and checks every ``get(key, as_of)`` after each
record; the state directory is deleted, the store is restored from its changelog (whose records
carry the version timestamps), and every version answers ``as_of`` queries as before.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Joined, Materialized, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.serde import Integer, String
from platform_streams.state import Stores
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce
from tests.support.versioned import (
    HISTORY_RETENTION,
    INPUT_BATCHES,
    STORE_NAME,
    DataTracker,
    VersionedStoreContentCheckerProcessor,
    store_builder,
)

pytestmark = [pytest.mark.broker]

INT, S = Integer(), String()


def _checker_app(source: str, sink: str, data: DataTracker | None = None) -> StreamsBuilder:
    builder = StreamsBuilder()
    builder.add_state_store(store_builder())
    (
        builder.stream(source, Consumed(key_serde=INT, value_serde=S))
        .process(lambda: VersionedStoreContentCheckerProcessor(True, data), STORE_NAME)
        .to(sink, Produced(key_serde=INT, value_serde=INT))
    )
    return builder


def _produce(bootstrap: str, topic: str, timestamp: int, records: list[tuple[int, str | None]]) -> int:
    raw = [(INT.serialize(k), S.serialize(v)) for k, v in records]
    produce(bootstrap, topic, raw, timestamp_ms=timestamp)
    return len(records)


def _failed_checks(bootstrap: str, sink: str, expected: int) -> list[int]:
    def read() -> list[int]:
        records = consume_all(bootstrap, sink, expected, timeout_s=5)
        return [INT.deserialize(r.value) for r in records] if len(records) >= expected else []

    return wait_until(read, 90, f"{expected} checked records in {sink}", interval_s=0.2)


def test_should_restore(bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path) -> None:
    """VersionedKeyValueStoreIntegrationTest.shouldRestore (+ shouldSetChangelogTopicProperties)."""
    source, sink = new_topic(admin, 1, "versioned-in"), new_topic(admin, 1, "versioned-out")
    config = app_config(bootstrap_servers, tmp_path / "state")
    base = int(time.time() * 1000)
    data = DataTracker()
    produced = 0
    with running_app(_checker_app(source, sink), config):
        for offset, records in [*INPUT_BATCHES, (10, [(1, "a10"), (2, "b10"), (3, "c10")])]:
            produced += _produce(bootstrap_servers, source, base + offset, records)
            for key, value in records:
                data.add(key, base + offset, value)
        assert _failed_checks(bootstrap_servers, sink, produced) == [0] * produced

    changelog = f"{config.application_id}-{STORE_NAME}-changelog"
    topic_config = admin.describe_topic_configs([changelog])[changelog]
    assert topic_config["cleanup.policy"] == "compact"
    assert topic_config["min.compaction.lag.ms"] == str(HISTORY_RETENTION + 24 * 60 * 60 * 1000)

    # wipe the local state: the restart restores the store from the changelog
    shutil.rmtree(Path(config.state_dir) / config.application_id)
    with running_app(_checker_app(source, sink, data), config) as streams:
        restored = sum(worker.state_lifecycle.total_restored for worker in streams.workers)
        assert restored == produced  # one changelog record per put and per delete
        produced += _produce(bootstrap_servers, source, base + 12, [(1, "a12"), (2, "b12"), (3, "c12")])
        assert _failed_checks(bootstrap_servers, sink, produced) == [0] * produced


def _changelog_count(bootstrap: str, topic: str, expected: int) -> None:
    wait_until(
        lambda: len(consume_all(bootstrap, topic, expected, timeout_s=2)) >= expected,
        60,
        f"{topic} has {expected}",
    )


def test_versioned_stream_table_join_with_out_of_order_table_updates(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """KIP-914/923 on the broker: table updates arrive out of order (v50 after v100, and v55 after
    the stream record at 60 it should meet); the grace period holds stream records, which then
    join the table as of their own timestamps, in timestamp order."""
    stream_topic, table_topic = new_topic(admin, 1, "vj-stream"), new_topic(admin, 1, "vj-table")
    sink = new_topic(admin, 1, "vj-out")
    builder = StreamsBuilder()
    consumed = Consumed(key_serde=INT, value_serde=S)
    table = builder.table(
        table_topic,
        consumed,
        Materialized.as_(Stores.persistent_versioned_key_value_store("vj-table", 60_000)),
    )
    joined = Joined(key_serde=INT, value_serde=S, other_value_serde=S).with_grace_period(1_000)
    (
        builder.stream(stream_topic, consumed)
        .left_join(table, lambda s, t: f"{s}+{t}", joined)
        .to(sink, Produced(key_serde=INT, value_serde=S))
    )
    config = app_config(bootstrap_servers, tmp_path / "state")
    changelog = f"{config.application_id}-vj-table-changelog"
    base = 1_000_000
    with running_app(builder, config):
        _produce(bootstrap_servers, table_topic, base + 100, [(1, "v100")])
        _produce(bootstrap_servers, table_topic, base + 50, [(1, "v50")])  # out of order
        _changelog_count(bootstrap_servers, changelog, 2)
        _produce(bootstrap_servers, stream_topic, base + 120, [(1, "s120")])
        _produce(bootstrap_servers, stream_topic, base + 60, [(1, "s60")])
        _produce(bootstrap_servers, stream_topic, base + 40, [(1, "s40")])
        _produce(bootstrap_servers, table_topic, base + 55, [(1, "v55")])  # late, within grace
        _changelog_count(bootstrap_servers, changelog, 3)
        _produce(bootstrap_servers, stream_topic, base + 5_000, [(2, "flush")])  # stream time moves on

        def joined_values() -> list[Any]:
            records = consume_all(bootstrap_servers, sink, 3, timeout_s=2)
            return [(INT.deserialize(r.key), S.deserialize(r.value), r.timestamp) for r in records]

        out = wait_until(lambda: len(joined_values()) >= 3 and joined_values(), 90, "3 joined records")
    assert out == [(1, "s40+None", base + 40), (1, "s60+v55", base + 60), (1, "s120+v100", base + 120)]
