"""Backfill on Spark with the application's own topology equals what the streaming app produced."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import KafkaAdmin
from platform_streams.ops.spark.backfill import (
    KafkaInput,
    KafkaOutput,
    ParquetInput,
    ParquetOutput,
    backfill,
    stage_order,
)
from platform_streams.topology.compiler import compile_topology
from tests.integration.support_apps import app_config, log_ends, new_app_id, read_to_end, running_app, wait_until
from tests.spark.apps import CountByCustomer
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 4
Outputs = dict[str, Counter[int]]


def _per_key(pairs: Any) -> Outputs:
    out: dict[str, Counter[int]] = defaultdict(Counter)
    for key, value in pairs:
        out[bytes(key).decode()][int.from_bytes(bytes(value), "big", signed=True)] += 1
    return dict(out)


@pytest.fixture(scope="module")
def streamed(bootstrap_servers: str, admin: KafkaAdmin, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The streaming run: orders re-keyed by customer (repartition topic), counted per customer."""
    tmp = tmp_path_factory.mktemp("backfill")
    source, sink = new_topic(admin, PARTITIONS, "orders"), new_topic(admin, PARTITIONS, "per-customer")
    app = CountByCustomer(source, sink)
    records = [(f"order-{i}", f"customer-{i % 23}:{i}") for i in range(1_500)]
    timestamps = [1_700_000_000_000 + i for i in range(len(records))]
    config = app_config(bootstrap_servers, tmp / "state", new_app_id("bf"), statestore_cache_max_bytes=0)
    with running_app(app(), config):
        ends = log_ends(produce(bootstrap_servers, source, records, timestamp_ms=timestamps), source, PARTITIONS)
        wait_until(lambda: admin.committed_offsets(config.application_id, list(ends)) == ends, 30, "input committed")
        wait_until(
            lambda: len(read_to_end(bootstrap_servers, sink, PARTITIONS)) >= len(records), 30, "every count output"
        )
    outputs = read_to_end(bootstrap_servers, sink, PARTITIONS)
    return app, config, records, timestamps, _per_key((r.key, r.value) for r in outputs), tmp


def test_stages_follow_the_repartition_topic() -> None:
    plan = compile_topology(CountByCustomer("in", "out")())
    assert [s.id for s in stage_order(plan)] == [0, 1]
    assert len(plan.subtopologies) == 2


def test_backfill_from_kafka_equals_the_streaming_output(spark: Any, streamed: Any) -> None:
    app, config, records, _ts, expected, tmp = streamed
    assert sum(sum(c.values()) for c in expected.values()) == len(records)
    out = tmp / "kafka-backfill"
    result = backfill(spark, app, config, [KafkaInput()], ParquetOutput(str(out)))
    assert result.stages == [0, 1]
    assert result.records_out == {app.sink: len(records)}
    assert sum(result.end_offsets.values()) == len(records)
    rows = spark.read.parquet(str(out)).collect()
    assert _per_key((r["key"], r["value"]) for r in rows) == expected
    # partitions are Kafka's: murmur2 of the key over the sink's partition count
    from platform_streams.processor.partitioner import default_partition

    assert all(r["partition"] == default_partition(bytes(r["key"]), PARTITIONS) for r in rows)


def test_backfill_from_parquet_to_kafka_equals_the_streaming_output(
    spark: Any, streamed: Any, bootstrap_servers: str, admin: KafkaAdmin
) -> None:
    app, config, records, timestamps, expected, tmp = streamed
    history = tmp / "history"
    spark.createDataFrame(
        [(k.encode(), v.encode(), ts) for (k, v), ts in zip(records, timestamps, strict=True)],
        "key BINARY, value BINARY, timestamp BIGINT",
    ).write.parquet(str(history))
    target = new_topic(admin, PARTITIONS, "backfilled")
    result = backfill(
        spark,
        type(app)(app.source, target),
        config,
        [ParquetInput(str(history), app.source, PARTITIONS)],
        KafkaOutput(),
    )
    assert result.records_out == {target: len(records)}
    written = read_to_end(bootstrap_servers, target, PARTITIONS)
    assert _per_key((r.key, r.value) for r in written) == expected
