"""Serializers/deserializers ("serdes") for record keys and values.

Byte layouts of the primitive serdes match Java's ``org.apache.kafka.common.serialization``
so topics are interchangeable with Java Kafka Streams applications.
"""

from platform_streams.serde.base import Serde
from platform_streams.serde.json import Json
from platform_streams.serde.primitive import (
    UUID,
    Boolean,
    Bytes,
    Double,
    Float,
    Integer,
    Long,
    Short,
    String,
    Void,
)
from platform_streams.serde.pydantic import Pydantic
from platform_streams.serde.registry import serde_from_name

# The Schema Registry serdes live in the Kafka layer (they are confluent_kafka's registry
# serializers) and load on first use, so importing the serdes needs neither that extra nor
# the Kafka client.
_REGISTRY_SERDES = ("Avro", "JsonSchema", "Protobuf", "RegistrySettings")


def __getattr__(name: str) -> object:
    if name in _REGISTRY_SERDES:
        from platform_streams.kafka import schema_registry

        return getattr(schema_registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [  # noqa: RUF022 (the registry serdes are resolved by __getattr__)
    "UUID",
    "Avro",
    "JsonSchema",
    "Protobuf",
    "RegistrySettings",
    "Boolean",
    "Bytes",
    "Double",
    "Float",
    "Integer",
    "Json",
    "Long",
    "Pydantic",
    "Serde",
    "Short",
    "String",
    "Void",
    "serde_from_name",
]
