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
