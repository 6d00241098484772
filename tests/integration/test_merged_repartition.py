"""Merged repartition topics on the real broker (``topology_optimization="all"``).

One re-keyed stream (orders re-keyed by customer) feeds a count, a sum and a stream-table
join. Kafka Streams' ``merge.repartition.topics`` optimization (RepartitionOptimizingTest)
gives it one repartition topic, named after the first (``counts-repartition``), instead of
three; every result is still right.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.serde import Long, String
from tests.integration.support_apps import app_config, read_to_end, running_app, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = pytest.mark.broker

S, L = String(), Long()


def _app(orders: str, customers: str, counts: str, sums: str, enriched: str, loaded: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    by_customer = builder.stream(orders, Consumed(key_serde=S, value_serde=S)).select_key(
        lambda k, v: v.split(":")[0]
    )
    (
        by_customer.group_by_key(Grouped(key_serde=S, value_serde=S, name="counts"))
        .count(materialized=Materialized.as_("order-counts"))
        .to_stream()
        .to(counts, Produced(key_serde=S, value_serde=L))
    )
    (
        by_customer.group_by_key(Grouped(key_serde=S, value_serde=S, name="sums"))
        .aggregate(
            lambda: 0,
            lambda k, v, total: total + int(v.split(":")[1]),
            materialized=Materialized(store_name="order-sums", value_serde=L),
        )
        .to_stream()
        .to(sums, Produced(key_serde=S, value_serde=L))
    )
    table = builder.table(customers, Consumed(key_serde=S, value_serde=S))
    table.to_stream().to(loaded, Produced(key_serde=S, value_serde=S))  # tells the test the table is loaded
    by_customer.join(table, lambda order, name: f"{name}:{order}").to(
        enriched, Produced(key_serde=S, value_serde=S)
    )
    return builder


def test_one_rekeyed_stream_two_aggregations_and_a_join_share_one_repartition_topic(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    orders, customers = new_topic(admin, 2, "orders"), new_topic(admin, 2, "customers")
    counts, sums, enriched, loaded = (
        new_topic(admin, 2, name) for name in ("counts", "sums", "enriched", "loaded")
    )
    names = {f"c{i}": f"name-{i}" for i in range(5)}
    produce(bootstrap_servers, customers, list(names.items()))
    records = [(f"order-{i}", f"c{i % 5}:{i}") for i in range(200)]
    config = app_config(bootstrap_servers, tmp_path, topology_optimization="all")
    topology = _app(orders, customers, counts, sums, enriched, loaded).build(config)
    repartitions = sorted(t for t in topology.internal_topics if t.endswith("-repartition"))
    assert repartitions == ["counts-repartition"]

    expected_counts = Counter(v.split(":")[0] for _, v in records)
    expected_sums: dict[str, int] = defaultdict(int)
    for _, v in records:
        expected_sums[v.split(":")[0]] += int(v.split(":")[1])

    def read(topic: str) -> list:  # type: ignore[type-arg]
        try:
            return read_to_end(bootstrap_servers, topic, 2, timeout_s=20)
        except AssertionError:  # the app wrote more while we read: poll again
            return []

    def latest(topic: str) -> dict[str, int]:
        return {r.key.decode(): L.deserialize(r.value) for r in read(topic) if r.key}

    with running_app(topology, config):
        # the table is loaded before orders arrive, so every order finds its customer
        wait_until(lambda: len(read(loaded)) >= len(names), 90, "table loaded")
        produce(bootstrap_servers, orders, records)
        wait_until(lambda: latest(counts) == dict(expected_counts), 90, "every customer counted")
        wait_until(lambda: latest(sums) == dict(expected_sums), 90, "every customer summed")
        joined = wait_until(
            lambda: (rs := read(enriched)) and len(rs) >= len(records) and rs,
            90,
            "every order enriched",
        )
        topics = admin.list_topics()
    app_topics = sorted(t for t in topics if t.startswith(config.application_id) and "repartition" in t)
    assert app_topics == [f"{config.application_id}-counts-repartition"]
    assert Counter(r.value.decode().split(":")[0] for r in joined if r.value) == Counter(
        names[v.split(":")[0]] for _, v in records
    )
