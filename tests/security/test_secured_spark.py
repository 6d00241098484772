"""The Spark jobs on the secured cluster: snapshot compaction and a Kafka-to-Kafka backfill,
as a principal holding only the documented ``spark`` ACL set, through both Kafka readers
(Spark's own Kafka source, the JVM client configured with ``kafka.*`` options translated
from the librdkafka settings; and the confluent-kafka fallback in the Spark tasks) on both
client listeners (SASL_SSL with SCRAM-SHA-512, the CA as a PEM truststore; and mutual TLS,
the client certificate and key as a PEM keystore).

One local Spark session (``getOrCreate``), left running: in make test's Kafka-side process
the Spark suite (tests/spark) runs later and takes the same session over (and stops it),
which spares a second JVM start; alone, the session ends with the process.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from platform_streams.config import StreamsConfig
from platform_streams.dev.brokers.secured import SecuredKafkaBroker
from platform_streams.kafka import KafkaAdmin, TopicPartition, create_consumer, create_producer
from platform_streams.ops.acls import acl_sets
from tests.security.conftest import Principal, make_topics
from tests.spark.apps import CountByKey
from tests.spark.support import snapshot_content
from tests.support.kafka import consume_all

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.kafka_side, pytest.mark.spark, pytest.mark.timeout(600)]

KEYS = [f"user-{i % 7}" for i in range(60)]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from platform_streams.ops.spark.kafka_source import kafka_source_available
    from platform_streams.ops.spark.session import spark_session
    from tests.support.spark_connector import CONNECTOR_PROBLEM, fetch_connector_once

    fetch_connector_once()
    conf = {"spark.default.parallelism": "2"}
    session = spark_session("local[2]", "platform-streams-tests", conf, ui=False)
    session.sparkContext.setLogLevel("ERROR")
    if not kafka_source_available(session):
        why = "; ".join(CONNECTOR_PROBLEM) or "the kafka data source did not load"
        if os.environ.get("CI"):
            pytest.fail(f"Spark's Kafka connector is missing in CI: {why}")
        pytest.skip(f"Spark's Kafka connector is missing: {why}")
    yield session


@pytest.mark.parametrize(
    ("listener", "reader"),
    [("sasl_ssl", "spark-kafka"), ("sasl_ssl", "confluent"), ("mtls", "spark-kafka"), ("mtls", "confluent")],
)
def test_compaction_and_backfill_run_with_the_spark_set_only(
    spark: Any,
    secured_broker: SecuredKafkaBroker,
    new_user,  # type: ignore[no-untyped-def]
    super_admin: KafkaAdmin,
    tmp_path: Path,
    listener: str,
    reader: str,
) -> None:
    from platform_streams.ops.spark.backfill import KafkaInput, KafkaOutput, backfill
    from platform_streams.ops.spark.compaction import compact_changelog

    if listener == "sasl_ssl":
        user: Principal = new_user("spark")
    else:  # the principal is the certificate's CN
        name = f"spark-{uuid.uuid4().hex[:8]}"
        user = Principal(name, "", secured_broker.mtls_config(secured_broker.issue_certificate(name)))
    source, sink, store = f"in-{user.name}", f"out-{user.name}", "counts"
    changelog = f"{user.name}-{store}-changelog"
    make_topics(super_admin, (source, 2), (sink, 2), (changelog, 2))
    producer = create_producer(secured_broker.client_config())
    for i, key in enumerate(KEYS):
        producer.produce(source, key=key.encode(), value=b"click")  # by key: the counts are per key
        producer.produce(changelog, key=key.encode(), value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    group = create_consumer({**secured_broker.client_config(), "group.id": user.name, "log_level": 0})
    group.commit(offsets=[TopicPartition(source, p, len(KEYS)) for p in (0, 1)], asynchronous=False)
    group.close()
    config = spark_config(user)
    app = CountByKey(source, sink, store)
    secured_broker.grant(list(acl_sets(app(), config)["spark"].acls))

    compacted = compact_changelog(
        spark, config.restore_consumer_configs(), user.name, store, tmp_path / "snapshots",
        source_topics=[source], reader=reader, parquet=False,  # type: ignore[arg-type]
    )  # fmt: skip
    assert compacted.reader == reader
    latest = {p: {k.encode(): b"%d" % i for i, k in enumerate(KEYS) if i % 2 == p} for p in (0, 1)}
    for manifest in compacted.manifests:
        content = snapshot_content(tmp_path / "snapshots", manifest, tmp_path / f"check{manifest.partition}")
        assert content == sorted(latest[manifest.partition].items())

    filled = backfill(spark, app, config, [KafkaInput(reader=reader)], KafkaOutput())  # type: ignore[arg-type]
    assert filled.reader == reader and filled.records_out == {sink: len(KEYS)}
    admin = secured_broker.client_config()
    written = consume_all(admin["bootstrap.servers"], sink, len(KEYS), timeout_s=30, conf=admin)
    got = Counter((r.key.decode(), int.from_bytes(r.value, "big", signed=True)) for r in written)
    counts = Counter(KEYS)
    assert got == Counter({(k, n): 1 for k in counts for n in range(1, counts[k] + 1)})


def spark_config(user: Principal) -> StreamsConfig:
    """The jobs' settings: ``user``'s name as the application id, its connection settings."""
    client = {k: v for k, v in user.config.items() if k != "bootstrap.servers"}
    return StreamsConfig(
        application_id=user.name, bootstrap_servers=user.config["bootstrap.servers"], client_config=client,
        statestore_cache_max_bytes=0,
    )  # fmt: skip
