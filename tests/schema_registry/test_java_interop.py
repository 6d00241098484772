"""Interop with Java services: records a Java producer writes with Apicurio's Avro serializer in
its Confluent-compatible mode (tools/registry-interop) are read by a platform_streams
application, and what the application writes is read by the Java deserializer; re-encoding on
either side gives the bytes that were read, byte for byte (same schema id, same payload)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.kafka import KafkaAdmin
from platform_streams.serde import Avro, String
from tests.integration.support_apps import app_config, running_app
from tests.support.kafka import consume_all, new_topic
from tests.support.registry_interop import run_java

pytestmark = [pytest.mark.broker, pytest.mark.kafka_side]

# the schema of Interop.java's Order; the application writes the same record type back
ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "ps.interop",
        "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "long"}],
    }
)
N = 6


def test_java_avro_records_in_and_out(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, registry_url: str
) -> None:
    source, sink = new_topic(admin, 1, "java-orders"), new_topic(admin, 1, "py-orders")
    run_java("produce", bootstrap_servers, registry_url, source, N)

    written = consume_all(bootstrap_servers, source, N)
    reader = Avro(registry_url)
    # Python's serializer, with the subject's latest schema (the one Java registered), re-encodes
    # each Java record to the very bytes Java wrote
    rewriter = Avro(registry_url, topic=source, auto_register=False, use_latest_version=True)
    for record in written:
        assert record.value is not None and record.value[:1] == b"\x00"  # Confluent's magic byte
        assert rewriter.serialize(reader.deserialize(record.value)) == record.value

    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed(key_serde=String(), value_serde=Avro(registry_url)))
        .filter(lambda _k, v: v["amount"] % 2 == 0)
        .map_values(lambda v: {"id": v["id"].upper(), "amount": v["amount"] * 10})
        .to(sink, Produced(key_serde=String(), value_serde=Avro(registry_url, ORDER)))
    )
    with running_app(builder, app_config(bootstrap_servers, tmp_path)):
        consume_all(bootstrap_servers, sink, N // 2)

    read_back = run_java("consume", bootstrap_servers, registry_url, sink, N // 2)
    assert [r["value"] for r in read_back] == [{"id": f"O{i}", "amount": 10 * i} for i in range(0, N, 2)]
    # Java's serializer re-encodes what it decoded to the bytes the application wrote
    assert all(r["equal"] and r["bytes"] == r["reencoded"] for r in read_back), read_back
