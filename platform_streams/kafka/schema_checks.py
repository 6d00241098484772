"""What the Schema Registry says about the schema an application uses on a topic.

For each registry serde on a topic: the subject it reads and writes (its subject name
strategy), the subject's latest registered schema (id, version, text), and whether the
schema the application was built with is compatible with that latest one, asked of the
registry itself (``POST /compatibility/subjects/<subject>/versions/latest``), so the
answer follows the subject's own compatibility level (BACKWARD by default on Confluent:
can a reader with the application's schema read what the latest schema writes).

Used by the Dagster topic assets (metadata and an asset check); every failure becomes a
one-line ``error``, never an exception, and no login is ever part of one.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import SerializationContext

from platform_streams.kafka.schema_registry import _STRATEGIES, RegistrySerde, _reason, registry_client

__all__ = ["SchemaCheck", "check_schema", "deployed_schema", "subject_for"]

_SCHEMA_TYPES = {"avro": "AVRO", "json_schema": "JSON", "protobuf": "PROTOBUF"}


@dataclasses.dataclass(frozen=True)
class SchemaCheck:
    """One serde's subject on one topic, as the registry has it now."""

    topic: str
    subject: str | None
    deployed_schema: str | None
    schema_id: int | None = None
    version: int | None = None
    schema_type: str | None = None
    latest_schema: str | None = None
    #: None when there is nothing to compare (no subject yet, no schema of the application's own)
    compatible: bool | None = None
    error: str | None = None


def _record_name(serde: RegistrySerde) -> str | None:
    """The full record name the record and topic-record strategies put in the subject."""
    if serde.kind == "protobuf":
        return str(serde.message_type.DESCRIPTOR.full_name)  # type: ignore[attr-defined]
    if serde.schema is None:
        return None
    try:
        parsed = json.loads(serde.schema)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    if serde.kind == "json_schema":
        title = parsed.get("title")
        return str(title) if title else None
    name, namespace = parsed.get("name"), parsed.get("namespace")
    if not name:
        return None
    return str(name) if "." in str(name) or not namespace else f"{namespace}.{name}"


def subject_for(serde: RegistrySerde, topic: str) -> str | None:
    """The subject ``serde`` uses on ``topic`` (None when its strategy needs a record name it
    cannot know before the first record)."""
    field = SerializationContext(topic, serde._field)
    subject: str | None = _STRATEGIES[serde.subject_strategy](field, _record_name(serde))
    return subject


def deployed_schema(serde: RegistrySerde) -> Schema | None:
    """The schema the application was built with (its writer and reader schema); None when the
    serde has none of its own (it decodes with the writer's schema, or uses the latest)."""
    if serde.kind == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        # confluent-kafka's own rendering of the message's .proto, as it registers it
        made = ProtobufSerializer(serde.message_type, registry_client(serde.settings), {})  # type: ignore[attr-defined]
        schema: Any = getattr(made, "_schema", None)
        return schema if isinstance(schema, Schema) else None
    if serde.schema is None:
        return None
    return Schema(serde.schema, _SCHEMA_TYPES[serde.kind], list(serde.references))


def check_schema(serde: RegistrySerde, topic: str) -> SchemaCheck:
    """The registry's latest schema of ``serde``'s subject on ``topic`` and whether the
    application's own schema is compatible with it."""
    subject = subject_for(serde, topic)
    try:
        mine = deployed_schema(serde)
    except Exception as exc:
        error = f"cannot render the application's schema: {_reason(exc)}"
        return SchemaCheck(topic, subject, None, error=error)
    text = mine.schema_str if mine is not None else None
    if subject is None:
        return SchemaCheck(topic, None, text, error="the subject needs a record name (no schema to name it)")
    # a client of its own: the shared one keeps a subject's latest version for good (as
    # confluent-kafka does by default), and this check is about what is registered now
    client = SchemaRegistryClient(serde.settings.client_conf())
    try:
        latest = client.get_latest_version(subject)
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404:
            return SchemaCheck(topic, subject, text, error=f"subject {subject} has no schema registered")
        return SchemaCheck(topic, subject, text, error=_reason(exc))
    except Exception as exc:
        return SchemaCheck(topic, subject, text, error=_reason(exc))
    found = SchemaCheck(
        topic,
        subject,
        text,
        schema_id=latest.schema_id,
        version=latest.version,
        schema_type=latest.schema.schema_type or "AVRO",
        latest_schema=latest.schema.schema_str,
    )
    if mine is None:
        return found
    try:
        compatible = bool(client.test_compatibility(subject, mine, "latest"))
    except Exception as exc:
        return dataclasses.replace(found, error=f"compatibility check failed: {_reason(exc)}")
    return dataclasses.replace(found, compatible=compatible)
