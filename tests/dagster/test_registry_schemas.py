"""Topic assets of an application with Schema Registry serdes, against the real registry
(Apicurio's Confluent-compatible API): the subject and the deployed schema as the assets'
metadata, and the ``<app>_schema_compatible`` asset check, which passes while the topic's
latest schema is compatible with the one the application was built with (a field with a
default added) and fails once a producer registered one it cannot read."""

from __future__ import annotations

import json
import uuid
from typing import Any

import dagster as dg
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from dagster_defs import build_stream_app_defs
from dagster_defs.spec import ResolvedStreamApp, StreamAppSpec
from platform_streams import StreamsBuilder
from platform_streams.dsl import Consumed, Produced
from platform_streams.serde import Avro, String

pytestmark = [pytest.mark.dagster, pytest.mark.kafka_side]


def _order(*extra: dict[str, Any], amount: str = "long") -> str:
    fields = [{"name": "customer", "type": "string"}, {"name": "amount", "type": amount}, *extra]
    return json.dumps({"type": "record", "name": "Order", "namespace": "ps.dg", "fields": fields})


V1 = _order()
V2 = _order({"name": "channel", "type": "string", "default": "web"})
V3 = _order(amount="string")  # a type change: v1 readers cannot read it


def _app(registry_url: str, orders: str, out: str) -> ResolvedStreamApp:
    builder = StreamsBuilder()
    builder.stream(orders, Consumed(key_serde=String(), value_serde=Avro(registry_url, V1))).map_values(
        lambda order: order["amount"]
    ).to(out, Produced(key_serde=String(), value_serde=String()))
    spec = StreamAppSpec(name="avro_orders", topology="unused:factory")
    return ResolvedStreamApp(spec, builder.build(), None, {}, {"application_id": f"dg-{orders}"})


def _run_check(defs: dg.Definitions, key: dg.AssetCheckKey) -> dg.AssetCheckEvaluation:
    topics = [a for a in defs.assets or [] if isinstance(a, dg.AssetSpec)]
    checks = [c for c in defs.asset_checks or [] if key in c.check_keys]  # type: ignore[union-attr]
    result = dg.materialize(
        [*topics, *checks],  # type: ignore[list-item]
        selection=dg.AssetSelection.checks(key),
        raise_on_error=False,
    )
    [evaluation] = result.get_asset_check_evaluations()
    return evaluation


def test_topic_assets_show_subjects_and_flag_an_incompatible_latest_schema(registry_url: str) -> None:
    orders, out = f"orders-{uuid.uuid4().hex[:8]}", f"amounts-{uuid.uuid4().hex[:8]}"
    subject = f"{orders}-value"
    client = SchemaRegistryClient({"url": registry_url})
    v1_id = client.register_schema(subject, Schema(V1, "AVRO"))
    client.set_compatibility(subject, "BACKWARD")
    defs = build_stream_app_defs(_app(registry_url, orders, out))
    specs = {a.key: a for a in defs.assets or [] if isinstance(a, dg.AssetSpec)}
    topic_key = dg.AssetKey(["kafka", orders.replace("-", "_")])
    metadata = specs[topic_key].metadata
    assert metadata["value_subject"] == subject and metadata["value_schema_format"] == "avro"
    assert metadata["value_deployed_schema"].value == json.loads(V1)
    assert "key_subject" not in metadata  # the key is a plain string
    assert not any("subject" in k for k in specs[dg.AssetKey(["kafka", out.replace("-", "_")])].metadata)
    check = dg.AssetCheckKey(topic_key, "avro_orders_schema_compatible")
    app_key = dg.AssetKey(["avro_orders"])
    on_topics = [s.key for c in defs.asset_checks or [] for s in c.check_specs if s.asset_key != app_key]
    assert on_topics == [check]

    first = _run_check(defs, check)
    assert first.passed, first.description
    assert (first.metadata["value_schema_id"].value, first.metadata["value_version"].value) == (v1_id, 1)

    # a producer adds a field with a default: still readable by the deployed application
    v2_id = client.register_schema(subject, Schema(V2, "AVRO"))
    evolved = _run_check(defs, check)
    assert evolved.passed, evolved.description
    assert (evolved.metadata["value_schema_id"].value, evolved.metadata["value_version"].value) == (v2_id, 2)
    assert evolved.metadata["value_schema"].value == json.loads(V2)
    assert evolved.metadata["value_compatible"].value is True

    # one registered with the subject's check off changes a field's type: the check flags it
    client.set_compatibility(subject, "NONE")
    v3_id = client.register_schema(subject, Schema(V3, "AVRO"))
    client.set_compatibility(subject, "BACKWARD")
    broken = _run_check(defs, check)
    assert not broken.passed and broken.severity is dg.AssetCheckSeverity.ERROR
    assert f"{subject} version 3 (schema id {v3_id})" in (broken.description or "")
    assert broken.metadata["value_compatible"].value is False
    assert broken.metadata["value_deployed_schema"].value == json.loads(V1)
