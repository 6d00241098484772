"""serde.Avro / serde.Protobuf / serde.JsonSchema against a real Schema Registry (Apicurio's
Confluent-compatible API): subjects, strategies, auto-register, latest version, references,
evolution, classes, and the errors a consumer sees for bytes it cannot decode."""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaReference

from platform_streams import serde
from platform_streams.errors import DeserializationError, SerializationError, StreamsConfigError

pytestmark = pytest.mark.kafka_side

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "ps.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "tier", "type": "string", "default": "basic"}]}


def _topic() -> str:
    return f"sr-{uuid.uuid4().hex[:10]}"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _register(
    registry_url: str,
    subject: str,
    schema: dict[str, Any] | str,
    schema_type: str = "AVRO",
    references: list[dict[str, Any]] | None = None,
) -> int:
    body: dict[str, Any] = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    if references:
        body["references"] = references
    request = urllib.request.Request(
        f"{registry_url}/subjects/{subject}/versions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return int(json.loads(response.read())["id"])


def _schema_id(data: bytes) -> int:
    assert data[0] == 0, "Confluent wire format: magic byte 0"
    return int(struct.unpack(">I", data[1:5])[0])


def test_avro_round_trip_registers_under_the_topic_subject(registry_url: str) -> None:
    topic = _topic()
    value = serde.Avro(registry_url, json.dumps(USER_V1), topic=topic)
    data = value.serialize({"id": 7, "name": "ada"})
    assert data is not None
    assert _get(f"{registry_url}/subjects/{topic}-value/versions") == [1]
    assert _schema_id(data) == _get(f"{registry_url}/subjects/{topic}-value/versions/1")["id"]
    # a reader without a schema of its own decodes with the writer's schema from the registry
    assert serde.Avro(registry_url).deserialize(data) == {"id": 7, "name": "ada"}
    assert value.serialize(None) is None and value.deserialize(None) is None


def test_key_serde_and_subject_strategies(registry_url: str) -> None:
    topic = _topic()
    ns_schema = {**USER_V1, "name": f"User{uuid.uuid4().hex[:6]}"}
    record_name = f"ps.test.{ns_schema['name']}"
    serde.Avro(registry_url, json.dumps(ns_schema), is_key=True, topic=topic).serialize(
        {"id": 1, "name": "k"}
    )
    serde.Avro(registry_url, json.dumps(ns_schema), topic=topic, subject_strategy="record").serialize(
        {"id": 1, "name": "r"}
    )
    serde.Avro(registry_url, json.dumps(ns_schema), topic=topic, subject_strategy="topic_record").serialize(
        {"id": 1, "name": "tr"}
    )
    subjects = set(_get(f"{registry_url}/subjects"))
    assert {f"{topic}-key", record_name, f"{topic}-{record_name}"} <= subjects
    assert f"{topic}-value" not in subjects
    with pytest.raises(StreamsConfigError):
        serde.Avro(registry_url, subject_strategy="by_color")  # type: ignore[arg-type]


def test_without_auto_register_an_unknown_schema_is_a_clear_error(registry_url: str) -> None:
    topic = _topic()
    strict = serde.Avro(registry_url, json.dumps(USER_V1), topic=topic, auto_register=False)
    with pytest.raises(SerializationError, match=rf"topic '{topic}'.*registry error"):
        strict.serialize({"id": 1, "name": "x"})
    assert f"{topic}-value" not in _get(f"{registry_url}/subjects")
    schema_id = _register(registry_url, f"{topic}-value", USER_V1)
    assert _schema_id(strict.for_topic(topic).serialize({"id": 1, "name": "x"}) or b"") == schema_id


def test_use_latest_version_writes_with_the_registered_latest(registry_url: str) -> None:
    topic = _topic()
    _register(registry_url, f"{topic}-value", USER_V1)
    latest = _register(registry_url, f"{topic}-value", USER_V2)
    writer = serde.Avro(registry_url, topic=topic, auto_register=False, use_latest_version=True)
    data = writer.serialize({"id": 3, "name": "c", "tier": "gold"})
    assert data is not None and _schema_id(data) == latest
    assert serde.Avro(registry_url).deserialize(data) == {"id": 3, "name": "c", "tier": "gold"}


def test_evolution_old_records_read_with_the_new_schema_get_the_default(registry_url: str) -> None:
    topic = _topic()
    old = serde.Avro(registry_url, json.dumps(USER_V1), topic=topic).serialize({"id": 1, "name": "a"})
    new = serde.Avro(registry_url, json.dumps(USER_V2), topic=topic).serialize(
        {"id": 2, "name": "b", "tier": "x"}
    )
    reader = serde.Avro(registry_url, json.dumps(USER_V2))
    assert reader.deserialize(old) == {"id": 1, "name": "a", "tier": "basic"}
    assert reader.deserialize(new) == {"id": 2, "name": "b", "tier": "x"}
    assert _get(f"{registry_url}/subjects/{topic}-value/versions") == [1, 2]


@dataclass
class User:
    id: int
    name: str


def test_decoded_value_as_a_class(registry_url: str) -> None:
    topic = _topic()
    users = serde.Avro(registry_url, json.dumps(USER_V1), topic=topic, value_class=User)
    data = users.serialize(User(5, "eve"))
    assert users.deserialize(data) == User(5, "eve")
    assert serde.Avro(registry_url).deserialize(data) == {"id": 5, "name": "eve"}


def test_schema_references(registry_url: str) -> None:
    topic = _topic()
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "ps.ref",
        "fields": [{"name": "city", "type": "string"}],
    }
    ref_subject = f"{topic}-ps.ref.Address"
    _register(registry_url, ref_subject, address)
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "ps.ref",
        "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "ps.ref.Address"}],
    }
    refs = [SchemaReference("ps.ref.Address", ref_subject, 1)]
    people = serde.Avro(registry_url, json.dumps(person), topic=topic, references=refs)
    data = people.serialize({"name": "bo", "home": {"city": "Oslo"}})
    version = _get(f"{registry_url}/subjects/{topic}-value/versions/1")
    assert version["references"][0]["subject"] == ref_subject
    assert serde.Avro(registry_url).deserialize(data) == {"name": "bo", "home": {"city": "Oslo"}}


def test_unknown_schema_id_and_garbage_are_deserialization_errors(registry_url: str) -> None:
    reader = serde.Avro(registry_url)
    unknown = b"\x00" + struct.pack(">I", 987_654) + b"\x02\x04ab"
    with pytest.raises(DeserializationError, match="registry error 404"):
        reader.deserialize(unknown)
    with pytest.raises(DeserializationError, match="cannot decode 5 bytes"):
        reader.deserialize(b"{oops")


def test_credentials_are_never_echoed(registry_url: str) -> None:
    secret = "pa55-" + uuid.uuid4().hex
    settings = serde.RegistrySettings("http://127.0.0.1:9", f"svc:{secret}")
    value = serde.Avro(settings, json.dumps(USER_V1), topic="t")
    with pytest.raises(SerializationError) as failure:
        value.serialize({"id": 1, "name": "x"})
    for text in (str(failure.value), repr(value), repr(settings), value.name):
        assert secret not in text
    with pytest.raises(StreamsConfigError) as bad_url:
        serde.RegistrySettings(f"http://svc:{secret}@127.0.0.1:9")
    assert secret not in str(bad_url.value)


def test_json_schema_round_trip_and_validation(registry_url: str) -> None:
    topic = _topic()
    schema = {
        "type": "object",
        "title": "Order",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id"],
    }
    orders = serde.JsonSchema(registry_url, json.dumps(schema), topic=topic)
    data = orders.serialize({"id": 1, "item": "tea"})
    assert (
        data is not None
        and _schema_id(data) == _get(f"{registry_url}/subjects/{topic}-value/versions/1")["id"]
    )
    assert serde.JsonSchema(registry_url, json.dumps(schema)).deserialize(data) == {"id": 1, "item": "tea"}
    with pytest.raises(SerializationError):
        orders.serialize({"item": "no id"})


def _protobuf_class() -> type:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    name = f"ps_test_{uuid.uuid4().hex[:8]}"
    file_proto = descriptor_pb2.FileDescriptorProto(name=f"{name}.proto", package=name, syntax="proto3")
    message = file_proto.message_type.add(name="Reading")
    message.field.add(
        name="sensor",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    message.field.add(
        name="value",
        number=2,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool = descriptor_pool.Default()
    pool.Add(file_proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{name}.Reading"))


def test_protobuf_round_trip(registry_url: str) -> None:
    topic = _topic()
    reading = _protobuf_class()
    values = serde.Protobuf(registry_url, reading, topic=topic)
    data = values.serialize(reading(sensor="s1", value=2.5))
    assert (
        data is not None
        and _schema_id(data) == _get(f"{registry_url}/subjects/{topic}-value/versions/1")["id"]
    )
    assert values.deserialize(data) == reading(sensor="s1", value=2.5)
    as_dicts = serde.Protobuf(registry_url, reading, topic=topic, as_dict=True)
    assert as_dicts.deserialize(as_dicts.serialize({"sensor": "s2", "value": 1.0})) == {
        "sensor": "s2",
        "value": 1.0,
    }


def test_subjects_of_topics_are_only_those_a_serde_of_the_topic_registers() -> None:
    from platform_streams.kafka.schema_registry import subjects_of_topics

    topic = "app-counts-changelog"
    subjects = [
        f"{topic}-key",
        f"{topic}-value",
        f"{topic}-ps.app.Order",  # topic-record strategy
        "ps.app.Order",  # record strategy: may be shared with other topics
        f"{topic}-extra-value",  # the subject of another topic, app-counts-changelog-extra
        "other-app-counts-changelog-value",
        f"{topic}value",
    ]
    assert subjects_of_topics(subjects, [topic]) == subjects[:3]
