"""The stateful Avro application (tests/schema_registry/avro_eos_runner.py: aggregate + table
join, Avro keys and values, exactly-once) while its input's schema changes and it is killed.

Orders are fed in the background: first with schema v1, then with v2 (a field with a default
added, registered mid-stream as a backward-compatible version). The first instance processes
across the change and is killed with SIGKILL mid-stream; the next starts with an EMPTY state
directory, so its stores come back from their changelogs, which hold records from both sides
of the change. Then, as in test_eos_crash.py (the crash suite's checks, after Kafka Streams'
EosIntegrationTest): read_committed, each customer's ``orders`` goes ``1..n`` with no value
twice (exactly once) and the final stats equal the input (the restored store went on exactly
where the live one stopped).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import KafkaAdmin
from platform_streams.serde import Avro
from tests.integration.eos_support import (
    Runner,
    RunnerApp,
    broker_aborts_dead_transactions,
    new_app_id,
    read_output,
)
from tests.integration.support_apps import wait_until
from tests.schema_registry.test_registry_app import CUSTOMER, CUSTOMER_KEY, ORDER_V1, ORDER_V2
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka, pytest.mark.kafka_side]

PARTITIONS = 2
CUSTOMERS = 8
V1_ORDERS = 1_000
V2_ORDERS = 2_000
CHUNK = 100


class AvroRunner(Runner):
    runner = Path(__file__).with_name("avro_eos_runner.py")


class OrderFeeder(threading.Thread):
    """Orders in chunks: ``V1_ORDERS`` with schema v1, then ``V2_ORDERS`` with v2 (channel "app")."""

    def __init__(self, bootstrap: str, registry_url: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.args = (bootstrap, topic)
        self.v1 = Avro(registry_url, json.dumps(ORDER_V1), topic=topic)
        self.v2 = Avro(registry_url, json.dumps(ORDER_V2), topic=topic)
        self.expected: dict[str, Counter[str]] = defaultdict(Counter)
        self.produced = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        bootstrap, topic = self.args
        try:
            while self.produced < V1_ORDERS + V2_ORDERS:
                batch = []
                for i in range(self.produced, self.produced + CHUNK):
                    customer, amount = f"c{i % CUSTOMERS}", i % 7
                    if i < V1_ORDERS:
                        value = self.v1.serialize({"customer": customer, "amount": amount})
                    else:
                        value = self.v2.serialize({"customer": customer, "amount": amount, "channel": "app"})
                    batch.append((f"o{i}", value))
                    self.expected[customer].update(orders=1, amount=amount, app_orders=int(i >= V1_ORDERS))
                produce(bootstrap, topic, batch)
                self.produced += CHUNK
                time.sleep(0.25)
        except BaseException as exc:
            self.error = exc


def _updates(app: RunnerApp, reader: Avro) -> dict[str, list[dict[str, Any]]]:
    """Customer -> the stats the app wrote for it, in output order (read_committed)."""
    updates: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in read_output(app.bootstrap, app.sink, PARTITIONS, committed_only=True):
        updates[reader.deserialize(record.key)["customer"]].append(reader.deserialize(record.value))
    return updates


def test_avro_app_survives_sigkill_and_a_schema_change_mid_stream_under_exactly_once(
    bootstrap_servers: str,
    broker_kind: str,
    admin: KafkaAdmin,
    tmp_path: Path,
    registry_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if broker_kind == "tansu":
        pytest.skip("Tansu commits a killed producer's open transaction: checked on Apache Kafka")
    app = RunnerApp.create(bootstrap_servers, admin, new_app_id("avro-eos"), PARTITIONS)
    customers = new_topic(admin, PARTITIONS, "customers")
    key = Avro(registry_url, json.dumps(CUSTOMER_KEY), is_key=True, topic=customers)
    customer = Avro(registry_url, json.dumps(CUSTOMER), topic=customers)
    tiers = {f"c{i}": ("gold", "tin")[i % 2] for i in range(CUSTOMERS)}
    produce(
        bootstrap_servers,
        customers,
        [(key.serialize({"customer": c}), customer.serialize({"tier": t})) for c, t in tiers.items()],
    )
    monkeypatch.setenv("REGISTRY_URL", registry_url)
    monkeypatch.setenv("CUSTOMERS_TOPIC", customers)
    args = app.runner_args(guarantee="exactly_once_v2", instance_id="member-a", delay_us=300)
    feeder = OrderFeeder(bootstrap_servers, registry_url, app.source)
    reader = Avro(registry_url)
    started: list[AvroRunner] = []
    try:
        started.append(AvroRunner(tmp_path / "run-1.log", state_dir=tmp_path / "state-1", **args))
        started[0].expect("RUNNING", 60)
        feeder.start()
        # killed once it committed input from after the change, while input is left
        wait_until(lambda: app.committed_total() > V1_ORDERS + CHUNK, 120, "v2 orders were processed")
        started[0].kill()
        assert app.committed_total() < V1_ORDERS + V2_ORDERS, "the kill should land mid-stream"
        assert not any(e.startswith("FAILED") for e in started[0].events), started[0].events
        started.append(AvroRunner(tmp_path / "run-2.log", state_dir=tmp_path / "state-2", **args))
        started[1].expect("RUNNING", 60)
        feeder.join(120)
        assert feeder.error is None and not feeder.is_alive(), feeder.error
        # one output record per order: the output tells when the second sub-topology is done
        # (its committed offsets stop one short of the end, before the last transaction marker)
        wait_until(
            lambda: sum(map(len, _updates(app, reader).values())) >= V1_ORDERS + V2_ORDERS,
            120,
            "an output record for every order",
            interval_s=2.0,
        )
        restored = started[1].last("RESTORED")
        assert started[1].terminate() == 0
    finally:
        for runner in started:
            runner.close()
    # the empty state directory was filled from the changelogs, not rebuilt from the input
    assert restored and sum(restored.values()) > 0, restored
    exactly_once = broker_aborts_dead_transactions(bootstrap_servers, admin)
    updates = _updates(app, reader)
    assert set(updates) == set(tiers)
    for name, values in updates.items():
        assert {v["tier"] for v in values} == {tiers[name]}
        assert values[-1] == {"tier": tiers[name], **feeder.expected[name]}, name
        if exactly_once:  # Apache Kafka aborts what the killed producer left open
            assert [v["orders"] for v in values] == list(range(1, len(values) + 1)), name
