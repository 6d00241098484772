"""Spark compaction of a store whose keys and values are Avro (Schema Registry serdes), and
the restore from its snapshot against a full changelog replay.

The application (one sub-topology: Avro customer keys, Avro orders, per-customer Avro stats)
runs over orders of two schema versions (v2 adds a field with a default). Spark compacts its
store's changelog: the executors decode the Parquet copy's columns through the application's
own serde objects, shipped pickled, each making its own registry client. Then one client
with an empty state directory restores from the snapshots and another replays the changelog:
both stores must equal the stats of the input. Last, a Spark backfill of the same topology
writes byte for byte what the live run wrote.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from platform_streams import KafkaStreams, StreamsBuilder
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.ops.spark.backfill import KafkaInput, ParquetOutput, backfill
from platform_streams.ops.spark.compaction import compact_application
from platform_streams.query import RangeQuery, StateQueryRequest
from platform_streams.serde import Avro
from tests.integration.support_apps import (
    app_config,
    log_ends,
    new_app_id,
    read_to_end,
    running_app,
    wait_committed,
)
from tests.schema_registry.avro_eos_runner import STATS, _add
from tests.schema_registry.test_registry_app import CUSTOMER_KEY, ORDER_V1, ORDER_V2
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.kafka_side]

PARTITIONS = 2
STORE = "stats"


def _app(registry_url: str, orders: str, out: str) -> StreamsBuilder:
    key = Avro(registry_url, json.dumps(CUSTOMER_KEY), is_key=True)
    order = Avro(registry_url, json.dumps(ORDER_V2))
    stats = Avro(registry_url, json.dumps(STATS))
    builder = StreamsBuilder()
    (
        builder.stream(orders, Consumed(key_serde=key, value_serde=order))
        .group_by_key(Grouped(key_serde=key, value_serde=order))
        .aggregate(
            lambda: {"orders": 0, "amount": 0, "app_orders": 0},
            _add,
            Materialized(store_name=STORE, key_serde=key, value_serde=stats).with_caching_disabled(),
        )
        .to_stream()
        .to(out, Produced(key_serde=key, value_serde=stats))
    )
    return builder


def _store(streams: KafkaStreams) -> dict[str, dict[str, Any]]:
    """customer -> stats, every partition of the store (through interactive queries)."""
    result = streams.query(StateQueryRequest.in_store(STORE).with_query(RangeQuery.with_no_bounds()))
    rows: dict[str, dict[str, Any]] = {}
    for answer in result.partition_results.values():
        assert answer.is_success(), answer
        for key, value in answer.result:
            rows[key["customer"]] = getattr(value, "value", value)
    return rows


def test_snapshot_of_an_avro_store_restores_equal_to_a_changelog_replay(
    spark: Any, bootstrap_servers: str, admin: KafkaAdmin, registry_url: str, tmp_path: Path
) -> None:
    orders, out = new_topic(admin, PARTITIONS, "orders"), new_topic(admin, PARTITIONS, "stats")
    key = Avro(registry_url, json.dumps(CUSTOMER_KEY), is_key=True, topic=orders)
    v1 = Avro(registry_url, json.dumps(ORDER_V1), topic=orders)
    v2 = Avro(registry_url, json.dumps(ORDER_V2), topic=orders)
    records, expected = [], defaultdict(Counter)
    for i in range(600):
        customer, amount = f"c{i % 12}", i % 5
        order = {"customer": customer, "amount": amount}
        value = v1.serialize(order) if i < 300 else v2.serialize({**order, "channel": "app"})
        records.append((key.serialize({"customer": customer}), value))
        expected[customer].update(orders=1, amount=amount, app_orders=int(i >= 300))
    wanted = {c: dict(n) for c, n in expected.items()}
    app_id = new_app_id("avro-snap")
    config = app_config(bootstrap_servers, tmp_path / "live", app_id, statestore_cache_max_bytes=0)
    with running_app(_app(registry_url, orders, out), config):
        ends = log_ends(produce(bootstrap_servers, orders, records), orders, PARTITIONS)
        wait_committed(admin, app_id, ends, "every order is committed", timeout_s=90)

    snapshots = tmp_path / "snapshots"
    topology = _app(registry_url, orders, out).build(config)
    results = compact_application(spark, topology, config, str(snapshots))
    manifests = results[STORE].manifests
    assert sorted(m.partition for m in manifests) == list(range(PARTITIONS))
    assert sum(m.record_count for m in manifests) == len(wanted)
    # the analysts' copy: decoded on the executors by the pickled Avro serdes
    rows = spark.read.parquet(results[STORE].parquet_uri).collect()
    decoded = {json.loads(r["key_decoded"])["customer"]: json.loads(r["value_decoded"])[0] for r in rows}
    assert decoded == wanted

    from_snapshot = app_config(
        bootstrap_servers,
        tmp_path / "from-snapshot",
        app_id,
        statestore_cache_max_bytes=0,
        state_snapshot_location=str(snapshots),
    )
    with running_app(_app(registry_url, orders, out), from_snapshot) as streams:
        lifecycle = streams.workers[0].state_lifecycle
        used = sorted(r.manifest.partition for rs in lifecycle.last_snapshots.values() for r in rs)
        assert used == list(range(PARTITIONS))
        restored = _store(streams)
    replay = app_config(bootstrap_servers, tmp_path / "replay", app_id, statestore_cache_max_bytes=0)
    with running_app(_app(registry_url, orders, out), replay) as streams:
        replayed = _store(streams)
    assert restored == replayed == wanted

    # a backfill of the same topology, built on the executors with their own registry
    # clients, writes the very bytes the live run wrote (same subjects, same schema ids)
    backfilled = tmp_path / "backfill"
    backfill_config = app_config(bootstrap_servers, tmp_path / "bf", new_app_id("avro-bf"))
    factory = partial(_app, registry_url, orders, out)
    backfill(spark, factory, backfill_config, [KafkaInput()], ParquetOutput(str(backfilled)))
    written = Counter((r["key"], r["value"]) for r in spark.read.parquet(str(backfilled)).collect())
    live = Counter((r.key, r.value) for r in read_to_end(bootstrap_servers, out, PARTITIONS))
    assert written == live and sum(live.values()) == len(records)
