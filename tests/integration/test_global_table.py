"""GlobalKTables on the broker: bootstrap to the log end, tailing, restart from the
checkpoint, and a KStream-GlobalKTable join run by two instances of one application."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Literal

import pytest

from platform_streams import State, StreamsBuilder
from platform_streams.dsl import Consumed, Materialized, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.runtime.workers.global_worker import GlobalStreamWorker, bootstrap
from platform_streams.serde import String
from platform_streams.topology import TopologyPlan, compile_topology
from tests.integration.support_apps import active_tasks, app_config, running_app, wait_until
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = pytest.mark.broker

S = String()


def _global_plan(topic: str, store_type: Literal["rocksdb", "in_memory"] = "rocksdb") -> TopologyPlan:
    builder = StreamsBuilder()
    builder.global_table(
        topic,
        Consumed(key_serde=S, value_serde=S),
        Materialized(store_name="products", store_type=store_type),
    )
    return compile_topology(builder.build())


def test_global_worker_bootstraps_to_the_end_tails_and_resumes_from_its_checkpoint(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    topic = new_topic(admin, 2, "products")
    produce(bootstrap_servers, topic, [(f"p{i}", f"v{i}") for i in range(1_000)])
    produce(bootstrap_servers, topic, [(f"p{i}", None) for i in range(0, 1_000, 10)])  # deletes
    config = app_config(bootstrap_servers, tmp_path)
    plan = _global_plan(topic)
    worker = bootstrap(config, plan)
    assert worker is not None
    try:
        store = worker.stores["products"]
        # bootstrap is synchronous: the whole topic is in the store on return
        assert worker.bootstrap_records == 1_100
        assert sum(1 for _ in store.all()) == 900
        assert store.get("p1") == "v1" and store.get("p10") is None
        produce(bootstrap_servers, topic, [("p1", "new"), ("p10", "back")])
        wait_until(
            lambda: store.get("p1") == "new" and store.get("p10") == "back", 60, "tailing applies updates"
        )
    finally:
        worker.close()
    assert worker.failure is None

    # a restart with the persistent store intact reads only what came after the checkpoint
    produce(bootstrap_servers, topic, [("p2", "later")])
    again = GlobalStreamWorker(plan, config)
    try:
        again.bootstrap()
        assert again.bootstrap_records == 1
        assert again.stores["products"].get("p2") == "later"
        assert again.stores["products"].get("p1") == "new"
    finally:
        again.close()


def test_in_memory_global_store_is_rebuilt_from_the_beginning(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    topic = new_topic(admin, 1, "products")
    produce(bootstrap_servers, topic, [(f"p{i}", "v") for i in range(50)])
    config = app_config(bootstrap_servers, tmp_path)
    plan = _global_plan(topic, "in_memory")
    for _ in range(2):
        worker = GlobalStreamWorker(plan, config)
        try:
            worker.bootstrap()
            assert worker.bootstrap_records == 50
            assert sum(1 for _ in worker.stores["products"].all()) == 50
        finally:
            worker.close()


def _join_app(orders: str, products: str, sink: str) -> StreamsBuilder:
    builder = StreamsBuilder()
    table = builder.global_table(products, Consumed(key_serde=S, value_serde=S))
    builder.stream(orders, Consumed(key_serde=S, value_serde=S)).join(
        table, lambda order_id, product_id: product_id, lambda product_id, name: f"{product_id}:{name}"
    ).to(sink, Produced(key_serde=S, value_serde=S))
    return builder


def test_global_table_join_runs_on_two_instances_each_with_the_whole_table(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    orders, sink = new_topic(admin, 4, "orders"), new_topic(admin, 4, "enriched")
    products = new_topic(admin, 2, "products")
    produce(bootstrap_servers, products, [(f"p{i}", f"name{i}") for i in range(100)])
    first_config = app_config(bootstrap_servers, tmp_path / "a")
    second_config = app_config(bootstrap_servers, tmp_path / "b", app_id=first_config.application_id)
    app = _join_app(orders, products, sink)
    with running_app(app, first_config) as first, running_app(app, second_config) as second:

        def split() -> bool:
            a, b = active_tasks(first), active_tasks(second)
            running = first.state() is State.RUNNING and second.state() is State.RUNNING
            return running and bool(a) and bool(b) and sorted(a + b) == [f"0_{p}" for p in range(4)]

        wait_until(split, 30, "both instances run tasks")
        produce(bootstrap_servers, orders, [(f"o{i}", f"p{i % 100}") for i in range(2_000)])
        records = consume_all(bootstrap_servers, sink, 2_000, timeout_s=60)
        assert Counter(r.value for r in records) == Counter(
            f"p{i % 100}:name{i % 100}".encode() for i in range(2_000)
        )
        assert all(t["processed_total"] > 0 for s in (first, second) for t in s.metadata_for_local_threads())
        # an update of the global table reaches both instances
        produce(bootstrap_servers, products, [(f"p{i}", f"renamed{i}") for i in range(100)])
        # every product (both partitions of the products topic), not just one key
        wait_until(
            lambda: all(
                _global_store(s).get(f"p{i}") == f"renamed{i}" for s in (first, second) for i in range(100)
            ),
            60,
            "both global stores see the update",
        )
        produce(bootstrap_servers, orders, [(f"o{i}", f"p{i % 100}") for i in range(2_000, 2_400)])
        # the sink has 4 partitions, so the second batch is picked by key, not by position
        later_keys = {f"o{i}".encode() for i in range(2_000, 2_400)}
        everything = consume_all(bootstrap_servers, sink, 2_400, timeout_s=60)
        later = [r for r in everything if r.key in later_keys]
    assert sorted(r.value or b"" for r in later) == sorted(
        f"p{i % 100}:renamed{i % 100}".encode() for i in range(400)
    )


def _global_store(streams: object) -> Any:
    """The client's (only) global store, once the runtime runs a GlobalStreamWorker."""
    worker = getattr(streams, "global_worker", None)
    return next(iter(worker.stores.values())) if worker is not None else {}
