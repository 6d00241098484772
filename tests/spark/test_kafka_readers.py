"""Spark's own Kafka source and the confluent-kafka fallback give the same snapshots and backfills.

Both readers get the same planned offset ranges (the driver's, ends from fetch responses);
the changelog and input here hold what tells readers apart: tombstones, null keys, headers
(the ``__ps_src`` cut of snapshots), explicit timestamps, committed and aborted
transactions (read_committed must drop the aborted records; on Tansu the commit markers
take offsets, on Kafka the aborted records do too), and ranges split within a partition.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import KafkaAdmin, TopicPartition, TopicSpec, create_consumer, create_producer
from platform_streams.ops.spark.backfill import KafkaInput, ParquetOutput, backfill
from platform_streams.ops.spark.compaction import CompactionResult, compact_changelog
from platform_streams.ops.spark.kafka_source import kafka_source_available, resolve_reader
from platform_streams.serde import String
from tests.integration.support_apps import app_config, new_app_id
from tests.spark.apps import CountByCustomer
from tests.spark.support import snapshot_content
from tests.support.kafka import new_topic, produce
from tests.support.spark_connector import CONNECTOR_PROBLEM

# Each test runs a job twice (several Spark jobs each) and the first one also starts the
# shared session: generous time on a loaded 2-core machine.
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.slow, pytest.mark.timeout(900)]

READERS = ("spark-kafka", "confluent")


@pytest.fixture(autouse=True)
def _connector(spark: Any) -> None:
    """The comparison needs Spark's source: skipped without Maven locally, a failure in CI."""
    if kafka_source_available(spark):
        return
    why = "; ".join(CONNECTOR_PROBLEM) or "the kafka data source did not load"
    if os.environ.get("CI"):
        pytest.fail(f"Spark's Kafka connector is missing in CI: {why}")
    pytest.skip(f"Spark's Kafka connector is missing: {why}")


def _transaction(bootstrap: str, topic: str, records: list[Any], *, commit: bool) -> None:
    producer = create_producer({"bootstrap.servers": bootstrap, "transactional.id": new_app_id("tx")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for key, value, partition, headers in records:
        producer.produce(topic, key=key, value=value, partition=partition, headers=headers)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def _snapshot(location: Path, result: CompactionResult, work: Path) -> dict[int, Any]:
    return {
        m.partition: (m.offset, m.record_count, snapshot_content(location, m, work / f"{m.partition}"))
        for m in result.manifests
    }


def test_snapshots_through_spark_kafka_source_equal_the_fallback(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    app, store = new_app_id("readers"), "kv"
    source, changelog = new_topic(admin, 3, "in"), f"{app}-{store}-changelog"
    admin.create_topics([TopicSpec(changelog, 3)])
    committer = create_consumer({"bootstrap.servers": bootstrap_servers, "group.id": app})
    try:  # the application committed its input below 500 on every partition
        committer.commit(offsets=[TopicPartition(source, p, 500) for p in range(3)], asynchronous=False)
    finally:
        committer.close()
    rng = random.Random(21)
    keys = [f"k{i:02d}".encode() for i in range(40)] + [b"\x00", b"\xff\x01", None]
    records = []
    for i in range(600):
        key = rng.choice(keys)
        value = None if rng.random() < 0.15 else f"v{i}".encode()
        records.append((key, value, i % 3))
    produce(bootstrap_servers, changelog, records, timestamp_ms=[1_700_000_000_000 + i for i in range(600)])
    _transaction(
        bootstrap_servers,
        changelog,
        [(b"k01", b"committed-tx", p, [("__ps_src", b"10")]) for p in range(3)],
        commit=True,
    )
    _transaction(
        bootstrap_servers, changelog, [(b"k02", b"aborted", p, None) for p in range(3)], commit=False
    )
    _transaction(
        bootstrap_servers,
        changelog,
        [(b"k03", None, p, [("__ps_src", b"20")]) for p in range(3)],
        commit=True,
    )
    # partition 1 ends with a record written for uncommitted input (600 >= 500): the cut
    produce(
        bootstrap_servers,
        changelog,
        [(b"k04", b"after-cut", 1), (b"k05", b"after-cut", 1)],
        headers=[("__ps_src", b"600")],
    )

    results, contents = {}, {}
    for reader in READERS:
        location = tmp_path / reader
        results[reader] = compact_changelog(
            spark,
            {"bootstrap.servers": bootstrap_servers},
            app,
            store,
            location,
            max_offsets_per_task=90,  # several ranges per partition
            key_serde=String(),
            value_serde=String(),
            source_topics=[source],
            reader=reader,  # type: ignore[arg-type]
        )
        contents[reader] = _snapshot(location, results[reader], tmp_path / f"check-{reader}")
    spark_kafka, confluent = results["spark-kafka"], results["confluent"]
    assert (spark_kafka.reader, confluent.reader) == READERS
    assert spark_kafka.ranges == confluent.ranges and len(spark_kafka.ranges) > 3
    assert spark_kafka.cuts == confluent.cuts and set(spark_kafka.cuts) == {1}
    assert contents["spark-kafka"] == contents["confluent"]
    # SST files of the same content differ in a few bytes between any two writes (RocksDB
    # stamps a session id into each): their content is compared above, their size here
    manifests = [
        {m.partition: (m.offset, m.record_count, m.size_bytes) for m in r.manifests}
        for r in (spark_kafka, confluent)
    ]
    assert manifests[0] == manifests[1]
    content = {p: dict(kv) for p, (_o, _n, kv) in contents["confluent"].items()}
    assert all(content[p][b"k01"] == b"committed-tx" and b"k03" not in content[p] for p in range(3))
    assert not any(v == b"aborted" for p in range(3) for v in content[p].values())
    assert b"after-cut" not in content[1].values()
    parquet = [
        sorted(tuple(r) for r in spark.read.parquet(r.parquet_uri).collect())
        for r in (spark_kafka, confluent)
    ]
    assert parquet[0] == parquet[1] and len(parquet[0]) == sum(
        n for _o, n, _kv in contents["confluent"].values()
    )


def test_backfills_through_spark_kafka_source_equal_the_fallback(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source, sink = new_topic(admin, 3, "orders"), new_topic(admin, 3, "per-customer")
    app = CountByCustomer(source, sink)
    orders = [(f"order-{i}", f"customer-{i % 17}:{i}") for i in range(900)]
    placed = produce(
        bootstrap_servers, source, orders, timestamp_ms=[1_700_000_000_000 + 7 * i for i in range(900)]
    )
    _transaction(
        bootstrap_servers,
        source,
        [(b"order-x", b"customer-aborted:1", p, None) for p in range(3)],
        commit=False,
    )
    _transaction(
        bootstrap_servers,
        source,
        [(b"order-y", b"customer-tx:1", p, [("h", b"1")]) for p in range(3)],
        commit=True,
    )
    first = {(source, p): min(o for pp, o in placed if pp == p) + 5 for p in range(3)}
    config = app_config(
        bootstrap_servers,
        tmp_path / "state",
        new_app_id("bf-readers"),
        default_value_serde="long",
        statestore_cache_max_bytes=0,
    )
    outputs = {}
    for reader in READERS:
        out = tmp_path / f"out-{reader}"
        result = backfill(
            spark,
            app,
            config,
            [KafkaInput(start=first, max_offsets_per_task=120, reader=reader)],  # type: ignore[arg-type]
            ParquetOutput(str(out)),
        )
        rows = sorted(tuple(r) for r in spark.read.parquet(str(out)).collect())
        outputs[reader] = (result.reader, result.records_out, result.ranges, result.end_offsets, rows)
    spark_kafka, confluent = outputs["spark-kafka"], outputs["confluent"]
    assert (spark_kafka[0], confluent[0]) == READERS
    assert spark_kafka[1:] == confluent[1:]
    rows = confluent[4]
    assert len(rows) == 900 - 15 + 3  # 5 skipped per partition; the committed transaction's 3
    assert not any(bytes(r[2]).startswith(b"customer-aborted") for r in rows)


def test_auto_falls_back_to_confluent_with_a_warning(spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Settings the Java client cannot be given the same way: ``auto`` falls back, ``spark-kafka`` refuses."""
    conf = {"bootstrap.servers": "127.0.0.1:9", "ssl.key.location": "/nowhere/key.pem"}
    with caplog.at_level(logging.WARNING):
        assert resolve_reader(spark, conf, "auto") == "confluent"
    assert "ssl.key.location" in caplog.text
    with pytest.raises(RuntimeError, match=r"ssl\.key\.location"):
        resolve_reader(spark, conf, "spark-kafka")
    assert resolve_reader(spark, {"bootstrap.servers": "127.0.0.1:9"}, "auto") == "spark-kafka"
    with pytest.raises(ValueError, match="PLATFORM_STREAMS_SPARK_KAFKA_READER"):
        resolve_reader(spark, conf, "kafka")  # type: ignore[arg-type]
