"""Versioned stores and versioned joins on the broker.

``test_should_restore`` is Kafka's VersionedKeyValueStoreIntegrationTest.shouldRestore (apache/kafka
streams/src/test/java/org/apache/kafka/streams/integration/VersionedKeyValueStoreIntegrationTest.java)
with its shouldSetChangelogTopicProperties check folded in: a Processor API app writes versions
(out of order, replaced, tombstoned, deleted) and checks every ``get(key, as_of)`` after each
record; the state directory is deleted, the store is restored from its changelog (whose records
carry the version timestamps), and every version answers ``as_of`` queries as before.
``test_should_manual_upgrade_from_non_versioned_to_versioned`` is the same class's manual
upgrades: a plain or a timestamped key-value store's changelog restores a versioned store.
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
from platform_streams.query import MultiVersionedKeyQuery, StateQueryRequest, VersionedKeyQuery
from platform_streams.serde import Integer, String
from platform_streams.state import Stores, VersionedRecord
from tests.integration.iq_apps import http_get
from tests.integration.support_apps import app_config, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce
from tests.support.versioned import (
    HISTORY_RETENTION,
    INPUT_BATCHES,
    STORE_NAME,
    DataTracker,
    KeyValueStoreContentCheckerProcessor,
    TimestampedStoreContentCheckerProcessor,
    VersionedStoreContentCheckerProcessor,
    key_value_store_builder,
    store_builder,
    timestamped_key_value_store_builder,
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


@pytest.mark.apache_kafka  # restore depends on the broker keeping the changelog records' timestamps
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


@pytest.mark.apache_kafka  # restore depends on the broker keeping the changelog records' timestamps
@pytest.mark.parametrize(
    ("fusion", "timestamped"),
    [
        pytest.param(True, False, id="fused"),
        pytest.param(False, False, id="plain-nodes", marks=pytest.mark.kafka_side),
        pytest.param(True, True, id="timestamped", marks=pytest.mark.kafka_side),
    ],
)
def test_should_manual_upgrade_from_non_versioned_to_versioned(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, fusion: bool, timestamped: bool
) -> None:
    """VersionedKeyValueStoreIntegrationTest.shouldManualUpgradeFromNonVersionedNonTimestampedToVersioned
    and ...TimestampedToVersioned: an application with a plain (or timestamped) key-value store is
    stopped, its local state wiped, and restarted with a versioned store of the same name,
    restored from the same changelog: every change restores as the version at its record's
    timestamp (an out-of-order update included); a timestamped store's records restore their
    plain values (state/changelog_format.py)."""
    source, sink = new_topic(admin, 1, "upgrade-in"), new_topic(admin, 1, "upgrade-out")
    # plain nodes (fusion=False) stamp the changes as the fused code does
    config = app_config(bootstrap_servers, tmp_path / "state", fusion=fusion)
    base = int(time.time() * 1000)
    builder = StreamsBuilder()
    original = timestamped_key_value_store_builder() if timestamped else key_value_store_builder()
    builder.add_state_store(original)
    checker = TimestampedStoreContentCheckerProcessor if timestamped else KeyValueStoreContentCheckerProcessor
    (
        builder.stream(source, Consumed(key_serde=INT, value_serde=S))
        .process(checker, STORE_NAME)
        .to(sink, Produced(key_serde=INT, value_serde=INT))
    )
    data = DataTracker()
    produced = 0
    with running_app(builder, config):
        for offset, records in INPUT_BATCHES[:3]:  # the third is out of order
            produced += _produce(bootstrap_servers, source, base + offset, records)
            for key, value in records:
                data.add(key, base + offset, value)
        assert _failed_checks(bootstrap_servers, sink, produced) == [0] * produced

    shutil.rmtree(Path(config.state_dir) / config.application_id)
    with running_app(_checker_app(source, sink, data), config):
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


# ---------------------------------------------------------------- IQv2 versioned queries

IQ_STORE = "versioned-store"
RECORD_KEY, NON_EXISTING_KEY = 2, 3
RECORD_VALUES = [2, 20, 200, 2000]


def _verify_store(streams: Any, stamps: list[int]) -> None:
    """IQv2VersionedStoreIntegrationTest.verifyStore (its queries, one after another)."""
    last = len(stamps) - 1
    now = int(time.time() * 1000)

    def versioned(key: int, as_of: int | None) -> Any:
        query = VersionedKeyQuery.with_key(key)
        request = StateQueryRequest.in_store(IQ_STORE).with_query(
            query if as_of is None else query.as_of(as_of)
        )
        # Kafka's getOnlyPartitionResult: None when no partition holds a value
        answer = streams.query(request).get_only_partition_result()
        return None if answer is None else answer.get_result()

    def multi(key: int, time_from: int | None, time_to: int | None, ascending: bool) -> list[Any]:
        query = MultiVersionedKeyQuery.with_key(key)
        query = query if time_from is None else query.from_time_ms(time_from)
        query = query if time_to is None else query.to_time_ms(time_to)
        query = query.with_ascending_timestamps() if ascending else query
        answer = streams.query(
            StateQueryRequest.in_store(IQ_STORE).with_query(query)
        ).get_only_partition_result()
        assert answer is not None and answer.is_success(), answer
        return [(r.value, r.timestamp, r.valid_to) for r in answer.get_result()]

    def expected(low: int, ascending: bool) -> list[Any]:
        rows = [
            (RECORD_VALUES[i], stamps[i], stamps[i + 1] if i < last else None) for i in range(low, last + 1)
        ]
        return rows if ascending else rows[::-1]

    # Versioned Key Queries: the latest, as of now, as of its timestamp; an old one; none
    for as_of in (None, now, stamps[last]):
        assert versioned(RECORD_KEY, as_of) == VersionedRecord(RECORD_VALUES[last], stamps[last], None)
    assert versioned(RECORD_KEY, stamps[0]) == VersionedRecord(RECORD_VALUES[0], stamps[0], stamps[1])
    assert versioned(RECORD_KEY, stamps[0] - 50) is None
    assert versioned(NON_EXISTING_KEY, now) is None
    # Multi Versioned Key Queries
    assert multi(RECORD_KEY, None, None, False) == expected(0, False)
    assert multi(RECORD_KEY, None, None, True) == expected(0, True)
    assert multi(RECORD_KEY, stamps[1] + 5, now, False) == expected(1, False)
    for ascending in (False, True):
        assert multi(RECORD_KEY, stamps[0] - 100, stamps[0] - 50, ascending) == []
        assert multi(NON_EXISTING_KEY, None, None, ascending) == []


def test_iq_versioned_queries_before_and_after_restore(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """IQv2VersionedStoreIntegrationTest.verifyStore (apache/kafka streams/src/test/java/org/apache/
    kafka/streams/integration/IQv2VersionedStoreIntegrationTest.java), then again after the state
    directory is deleted and the versioned table is restored from its changelog.

    Not translated: ``shouldHandleRaceCondition`` (an update while an iterator is open): results
    here are lists taken under the store guard, a snapshot by construction."""
    source = new_topic(admin, 1, "iq-versioned")
    base = 1_672_567_200  # Kafka's BASE_TIMESTAMP_LONG: 2023-01-01T10:00:00Z in *seconds*
    stamps = [base, base + 10, base + 20, base + 30]
    for value, stamp in zip(RECORD_VALUES, stamps, strict=True):
        produce(
            bootstrap_servers, source, [(INT.serialize(RECORD_KEY), INT.serialize(value))], timestamp_ms=stamp
        )
    builder = StreamsBuilder()
    builder.table(
        source,
        Consumed(key_serde=INT, value_serde=INT),
        Materialized.as_(Stores.persistent_versioned_key_value_store(IQ_STORE, 86_400_000, 3_600_000)),
    )
    config = app_config(bootstrap_servers, tmp_path / "state", http_port=0)

    def loaded(streams: Any) -> bool:
        request = StateQueryRequest.in_store(IQ_STORE).with_query(VersionedKeyQuery.with_key(RECORD_KEY))
        answer = streams.query(request).get_only_partition_result()
        return (
            answer is not None
            and answer.is_success()
            and answer.get_result() is not None
            and (answer.get_result().timestamp == stamps[-1])
        )

    with running_app(builder, config) as streams:
        wait_until(lambda: loaded(streams), 60, "the table holds the last version")
        _verify_store(streams, stamps)
    shutil.rmtree(Path(config.state_dir) / config.application_id)
    with running_app(builder, config) as streams:
        assert sum(worker.state_lifecycle.total_restored for worker in streams.workers) == len(stamps)
        _verify_store(streams, stamps)
        _verify_over_http(streams, stamps)


def _verify_over_http(streams: Any, stamps: list[int]) -> None:
    """The same VersionedKeyQuery / MultiVersionedKeyQuery served by the worker's HTTP endpoint:
    ``/keys/<key>?as_of=`` is the version valid at that time, ``/versions/<key>?from=&to=&order=``
    every version overlapping the range."""
    url = f"http://{streams.http_server.address}/stores/{IQ_STORE}"
    status, _, body = http_get(f"{url}/keys/{RECORD_KEY}")
    assert status == 200, body
    assert (body["value"], body["timestamp"], body["valid_to"]) == (RECORD_VALUES[-1], stamps[-1], None)
    status, _, body = http_get(f"{url}/keys/{RECORD_KEY}?as_of={stamps[0]}")
    assert (body["value"], body["timestamp"], body["valid_to"]) == (RECORD_VALUES[0], stamps[0], stamps[1])
    assert http_get(f"{url}/keys/{RECORD_KEY}?as_of={stamps[0] - 50}")[0] == 404
    status, _, body = http_get(f"{url}/versions/{RECORD_KEY}?from={stamps[1] + 5}&order=asc")
    assert status == 200, body
    assert [(v["value"], v["timestamp"], v["valid_to"]) for v in body["versions"]] == [
        (RECORD_VALUES[i], stamps[i], stamps[i + 1] if i < len(stamps) - 1 else None) for i in (1, 2, 3)
    ]
    status, _, body = http_get(f"{url}/versions/{RECORD_KEY}")  # newest first, as Kafka's default
    assert [v["value"] for v in body["versions"]] == RECORD_VALUES[::-1]
    assert http_get(f"{url}/versions/{NON_EXISTING_KEY}")[2]["versions"] == []
    assert http_get(f"{url}/keys/{RECORD_KEY}?as_of=soon")[0] == 400
