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

__all__ = [
    "UUID",
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
