"""A stateful application (count + table join) with Avro keys and values on a real broker and
a real Schema Registry: subjects of the source, repartition, changelog and sink topics, exact
output, restore across a schema change, and the dead-letter topic for bytes it cannot read."""

from __future__ import annotations

import json
import struct
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Grouped, Materialized, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.ops.reset import ResetOptions, reset_application
from platform_streams.processor.exception_handlers import HEADER_MESSAGE
from platform_streams.serde import Avro, Long, RegistrySettings, String
from tests.integration.support_apps import app_config, running_app
from tests.support.kafka import consume_all, new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.kafka_side]


def _record(name: str, *fields: tuple[str, str]) -> dict[str, Any]:
    """An Avro record schema in the namespace ps.app."""
    return {
        "type": "record",
        "name": name,
        "namespace": "ps.app",
        "fields": [{"name": f, "type": t} for f, t in fields],
    }


CUSTOMER_KEY = _record("CustomerKey", ("customer", "string"))
ORDER_V1 = _record("Order", ("customer", "string"), ("amount", "long"))
ORDER_V2 = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "channel", "type": "string", "default": "web"}],
}
CUSTOMER = _record("Customer", ("tier", "string"))
RESULT = _record("TierCount", ("tier", "string"), ("orders", "long"))


def _subjects(registry_url: str) -> set[str]:
    with urllib.request.urlopen(f"{registry_url}/subjects", timeout=10) as response:
        return set(json.loads(response.read()))


def _app(registry_url: str, orders: str, customers: str, out: str) -> StreamsBuilder:
    key = Avro(registry_url, json.dumps(CUSTOMER_KEY), is_key=True)
    order = Avro(registry_url, json.dumps(ORDER_V2))  # the reader: v1 records get the default
    builder = StreamsBuilder()
    table = builder.table(
        customers, Consumed(key_serde=key, value_serde=Avro(registry_url, json.dumps(CUSTOMER)))
    )
    counts = (
        builder.stream(orders, Consumed(key_serde=String(), value_serde=order))
        .group_by(
            lambda _k, v: {"customer": v["customer"]},
            Grouped(key_serde=key, value_serde=order, name="by-customer"),
        )
        .count(
            Materialized(store_name="order-counts", key_serde=key, value_serde=Long()).with_caching_disabled()
        )
    )
    counts.join(table, lambda n, c: {"tier": c["tier"], "orders": n}).to_stream().to(
        out, Produced(key_serde=key, value_serde=Avro(registry_url, json.dumps(RESULT)))
    )
    return builder


def test_count_and_join_with_avro_keys_and_values(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, registry_url: str
) -> None:
    orders, customers = new_topic(admin, 2, "orders"), new_topic(admin, 2, "customers")
    out, dlq = new_topic(admin, 1, "tiers"), new_topic(admin, 1, "dlq")
    key_ser = Avro(registry_url, json.dumps(CUSTOMER_KEY), is_key=True, topic=customers)
    cust_ser = Avro(registry_url, json.dumps(CUSTOMER), topic=customers)
    produce(
        bootstrap_servers,
        customers,
        [
            (key_ser.serialize({"customer": c}), cust_ser.serialize({"tier": t}))
            for c, t in [("a", "gold"), ("b", "tin")]
        ],
    )
    v1 = Avro(registry_url, json.dumps(ORDER_V1), topic=orders)
    v2 = Avro(registry_url, json.dumps(ORDER_V2), topic=orders)
    first = [(f"o{i}", v1.serialize({"customer": "ab"[i % 2], "amount": i})) for i in range(6)]
    unknown_id = b"\x00" + struct.pack(">I", 876_543) + b"\x02a\x02"
    produce(bootstrap_servers, orders, [*first[:3], ("bad", unknown_id), *first[3:]])
    config = app_config(
        bootstrap_servers,
        tmp_path,
        deserialization_exception_handler="log_and_continue",
        errors_dead_letter_queue_topic_name=dlq,
    )
    app_id = config.application_id
    with running_app(_app(registry_url, orders, customers, out), config):
        assert len(consume_all(bootstrap_servers, out, 6, timeout_s=60)) == 6
    # the schema changes while the application is down; it restores its store and goes on
    produce(
        bootstrap_servers,
        orders,
        [(f"n{i}", v2.serialize({"customer": "a", "amount": i, "channel": "app"})) for i in range(2)],
    )
    with running_app(_app(registry_url, orders, customers, out), config):
        records = consume_all(bootstrap_servers, out, 8, timeout_s=60)
    reader = Avro(registry_url)
    results = [(reader.deserialize(r.key), reader.deserialize(r.value)) for r in records]
    last = {k["customer"]: v for k, v in results}
    assert last == {"a": {"tier": "gold", "orders": 5}, "b": {"tier": "tin", "orders": 3}}
    subjects = _subjects(registry_url)
    assert {f"{orders}-value", f"{out}-key", f"{out}-value"} <= subjects
    assert f"{app_id}-by-customer-repartition-key" in subjects
    assert f"{app_id}-by-customer-repartition-value" in subjects
    assert f"{app_id}-order-counts-changelog-key" in subjects
    # reset: the internal topics' subjects go (soft, then hard delete); the app's others stay
    internal = {s for s in subjects if s.startswith(f"{app_id}-")}
    reset = reset_application(
        _app(registry_url, orders, customers, out).build(config),
        config,
        ResetOptions(schema_registry=RegistrySettings(registry_url)),
    )
    assert reset.completed and set(reset.deleted_subjects) == internal
    with urllib.request.urlopen(f"{registry_url}/subjects?deleted=true", timeout=10) as response:
        after_hard_delete = set(json.loads(response.read()))
    assert not internal & after_hard_delete
    assert subjects - internal <= _subjects(registry_url)
    dead = consume_all(bootstrap_servers, dlq, 1, timeout_s=30)
    assert [d.value for d in dead] == [unknown_id]
    message = dict(dead[0].headers)[HEADER_MESSAGE] or b""
    assert b"registry error 404" in message
