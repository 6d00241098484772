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
from tests.integration.support_apps import (
    app_config,
    log_ends,
    new_app_id,
    read_to_end,
    running_app,
    wait_committed,
    wait_until,
)
from tests.spark.apps import CountByCustomer, CountByKey
from tests.support.kafka import consume_all, new_topic, produce

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
    config = app_config(
        bootstrap_servers,
        tmp / "state",
        new_app_id("bf"),
        statestore_cache_max_bytes=0,
        default_value_serde="long",
    )  # a Long serde in the config: it must reach the Spark tasks (serdes do not pickle)
    with running_app(app(), config):
        ends = log_ends(
            produce(bootstrap_servers, source, records, timestamp_ms=timestamps), source, PARTITIONS
        )
        wait_committed(admin, config.application_id, ends, "input committed")
        wait_until(
            lambda: len(consume_all(bootstrap_servers, sink, len(records), timeout_s=5)) >= len(records),
            30,
            "every count output",
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


def test_backfill_final_state_lets_the_streaming_app_continue_from_it(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """History is backfilled on Spark; the streaming app then starts on the backfilled state
    (seeded changelog + snapshot, no replay) and on the committed end of the history."""
    source, sink = new_topic(admin, 2, "clicks"), new_topic(admin, 2, "counts")
    app = CountByKey(source, sink)
    history = [(f"user-{i % 30}", f"h{i}") for i in range(600)]
    ends = log_ends(produce(bootstrap_servers, source, history), source, 2)
    snapshots = tmp_path / "snapshots"
    config = app_config(
        bootstrap_servers,
        tmp_path / "state",
        new_app_id("seed"),
        statestore_cache_max_bytes=0,
        state_snapshot_location=str(snapshots),
    )
    result = backfill(spark, app, config, [KafkaInput()], None, final_state=snapshots, commit_offsets=True)
    assert result.records_out == {sink: len(history)}  # counted, not written
    assert sorted(m.partition for m in result.snapshots) == [0, 1]
    assert sum(m.record_count for m in result.snapshots) == 30 and {m.source for m in result.snapshots} == {
        "backfill"
    }
    assert admin.committed_offsets(config.application_id, list(ends)) == ends

    new = [(f"user-{i % 30}", f"n{i}") for i in range(90)]
    with running_app(app(), config) as streams:
        lifecycle = streams.workers[0].state_lifecycle
        assert sum(len(r) for r in lifecycle.last_snapshots.values()) == 2
        assert lifecycle.total_restored == 0  # the snapshots cover the whole seeded changelog
        produce(bootstrap_servers, source, new)
        wait_until(
            lambda: len(consume_all(bootstrap_servers, sink, len(new), timeout_s=1)) >= len(new),
            30,
            "the new clicks are counted",
        )
    outputs = read_to_end(bootstrap_servers, sink, 2)
    got = Counter(
        (r.key.decode(), int.from_bytes(r.value, "big", signed=True)) for r in outputs if r.key and r.value
    )
    assert got == Counter((f"user-{i % 30}", 20 + 1 + i // 30) for i in range(90))  # 20 each from history
