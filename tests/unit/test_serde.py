"""Serdes: Java-compatible byte layouts, null passthrough, errors, and name resolution."""

from __future__ import annotations

import math
import struct
import uuid
from typing import Any

import pydantic
import pytest

from platform_streams.errors import DeserializationError, SerializationError
from platform_streams.serde import (
    UUID,
    Boolean,
    Bytes,
    Double,
    Float,
    Integer,
    Json,
    Long,
    Pydantic,
    Serde,
    Short,
    String,
    Void,
    serde_from_name,
)


class Order(pydantic.BaseModel):
    id: int
    item: str
    price: float = 0.0


class UpperString(Serde):
    """Custom serde used to test import-path resolution."""

    name = "upper"

    def serialize(self, obj: Any) -> bytes | None:
        return None if obj is None else obj.upper().encode()

    def deserialize(self, data: bytes | None) -> Any:
        return None if data is None else data.decode()


UPPER_INSTANCE = UpperString()
NOT_A_SERDE = object()

ALL_SERDES: list[Serde] = [
    Bytes(),
    String(),
    Short(),
    Integer(),
    Long(),
    Float(),
    Double(),
    Boolean(),
    UUID(),
    Void(),
    Json(),
    Json(sort_keys=True),
    Pydantic(Order),
]

ROUND_TRIPS: list[tuple[Serde, Any]] = [
    (Bytes(), b""),
    (Bytes(), b"\x00\xffabc"),
    (String(), ""),
    (String(), "héllo wörld ✓ 🚀"),
    (Short(), 0),
    (Short(), -(2**15)),
    (Short(), 2**15 - 1),
    (Integer(), -(2**31)),
    (Integer(), 2**31 - 1),
    (Integer(), 42),
    (Long(), -(2**63)),
    (Long(), 2**63 - 1),
    (Long(), 1_700_000_000_000),
    (Float(), 1.5),
    (Float(), -0.25),
    (Float(), math.inf),
    (Double(), 1.5),
    (Double(), -1e300),
    (Double(), 5e-324),
    (Double(), -math.inf),
    (Boolean(), True),
    (Boolean(), False),
    (UUID(), uuid.UUID("123e4567-e89b-12d3-a456-426614174000")),
    (Json(), {"a": 1, "b": [1, 2.5, "x", None, True], "c": {"d": {}}}),
    (Json(), [1, 2, 3]),
    (Json(), "just a string"),
    (Json(), 0),
    (Json(sort_keys=True), {"z": 1, "a": 2}),
    (Pydantic(Order), Order(id=1, item="book", price=9.5)),
]


@pytest.mark.parametrize(("serde", "value"), ROUND_TRIPS, ids=repr)
def test_round_trip(serde: Serde, value: Any) -> None:
    data = serde.serialize(value)
    assert type(data) is bytes
    assert serde.deserialize(data) == value


@pytest.mark.parametrize("serde", ALL_SERDES, ids=repr)
def test_none_passthrough(serde: Serde) -> None:
    assert serde.serialize(None) is None
    assert serde.deserialize(None) is None


# --------------------------------------------------------------------------- Java byte layouts


@pytest.mark.parametrize(
    ("serde", "value", "expected"),
    [
        (Long(), 1, b"\x00" * 7 + b"\x01"),
        (Long(), -1, b"\xff" * 8),
        (Long(), 256, b"\x00" * 6 + b"\x01\x00"),
        (Integer(), -1, b"\xff\xff\xff\xff"),
        (Integer(), 1, b"\x00\x00\x00\x01"),
        (Integer(), 0x01020304, b"\x01\x02\x03\x04"),
        (Short(), 1, b"\x00\x01"),
        (Short(), -2, b"\xff\xfe"),
        (Double(), 1.5, struct.pack(">d", 1.5)),
        (Double(), 1.5, b"\x3f\xf8" + b"\x00" * 6),
        (Float(), 1.5, b"\x3f\xc0\x00\x00"),
        (Boolean(), True, b"\x01"),
        (Boolean(), False, b"\x00"),
        (String(), "é", b"\xc3\xa9"),
        (
            UUID(),
            uuid.UUID("123E4567-E89B-12D3-A456-426614174000"),
            b"123e4567-e89b-12d3-a456-426614174000",
        ),
        (Json(), {"a": 1}, b'{"a":1}'),
        (Json(sort_keys=True), {"b": 1, "a": 2}, b'{"a":2,"b":1}'),
        (Pydantic(Order), Order(id=1, item="x"), b'{"id":1,"item":"x","price":0.0}'),
    ],
)
def test_byte_layout(serde: Serde, value: Any, expected: bytes) -> None:
    assert serde.serialize(value) == expected


def test_double_accepts_int_and_float_precision() -> None:
    assert Double().serialize(2) == struct.pack(">d", 2.0)
    # Float is 32-bit: values round to single precision, as in Java.
    assert Float().deserialize(Float().serialize(0.1)) == struct.unpack(">f", struct.pack(">f", 0.1))[0]


def test_double_nan_round_trip() -> None:
    assert math.isnan(Double().deserialize(Double().serialize(math.nan)))


def test_bytes_accepts_buffers_and_copies() -> None:
    buf = bytearray(b"abc")
    out = Bytes().serialize(buf)
    buf[0] = ord("z")
    assert out == b"abc"
    assert type(out) is bytes
    assert Bytes().serialize(memoryview(b"xyz")) == b"xyz"
    raw = b"same"
    assert Bytes().serialize(raw) is raw


def test_uuid_accepts_string() -> None:
    s = "123e4567-e89b-12d3-a456-426614174000"
    assert UUID().serialize(s) == s.encode()


def test_pydantic_subclass_keeps_its_fields() -> None:
    class SpecialOrder(Order):
        note: str = "n"

    data = Pydantic(Order).serialize(SpecialOrder(id=2, item="y"))
    assert data is not None and b'"note":"n"' in data


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("serde", "size"),
    [
        (Short(), 1),
        (Short(), 4),
        (Integer(), 0),
        (Integer(), 3),
        (Integer(), 8),
        (Long(), 4),
        (Long(), 9),
        (Float(), 8),
        (Double(), 4),
        (Boolean(), 0),
        (Boolean(), 2),
    ],
)
def test_wrong_size_raises(serde: Serde, size: int) -> None:
    with pytest.raises(DeserializationError, match="Size of data received"):
        serde.deserialize(b"\x00" * size)


def test_deserialization_error_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError):
        Long().deserialize(b"\x00")


def test_boolean_rejects_unexpected_byte() -> None:
    with pytest.raises(DeserializationError, match="Unexpected byte"):
        Boolean().deserialize(b"\x02")


@pytest.mark.parametrize(
    ("serde", "value"),
    [
        (Integer(), 2**31),
        (Short(), 2**15),
        (Long(), 2**63),
        (Long(), 1.5),
        (Long(), "1"),
        (Double(), "x"),
        (Float(), 1e300),
        (Boolean(), 1),
        (Boolean(), "true"),
        (String(), 5),
        (String(), b"bytes"),
        (Bytes(), "str"),
        (Bytes(), 5),
        (UUID(), "not-a-uuid"),
        (UUID(), 5),
        (Void(), 0),
        (Json(), {1, 2}),
        (Json(), object()),
        (Pydantic(Order), {"id": 1, "item": "x"}),
    ],
)
def test_serialize_bad_input_raises(serde: Serde, value: Any) -> None:
    with pytest.raises(SerializationError):
        serde.serialize(value)


@pytest.mark.parametrize(
    ("serde", "data"),
    [
        (String(), b"\xff\xfe"),
        (UUID(), b"nope"),
        (UUID(), b"\xff"),
        (Void(), b""),
        (Json(), b"{not json"),
        (Json(), b""),
        (Pydantic(Order), b"{not json"),
        (Pydantic(Order), b'{"id": "not-an-int", "item": "x"}'),
        (Pydantic(Order), b'{"id": 1}'),
    ],
)
def test_deserialize_bad_input_raises(serde: Serde, data: bytes) -> None:
    with pytest.raises(DeserializationError):
        serde.deserialize(data)


def test_json_default_hook() -> None:
    class Point:
        def __init__(self, x: int) -> None:
            self.x = x

    serde = Json(default=lambda o: {"x": o.x})
    assert serde.serialize(Point(3)) == b'{"x":3}'


def test_pydantic_requires_model_class() -> None:
    with pytest.raises(TypeError):
        Pydantic(dict)  # type: ignore[type-var]


# --------------------------------------------------------------------------- identity


def test_repr_name_and_equality() -> None:
    assert repr(String()) == "String()"
    assert repr(Json(sort_keys=True)) == "Json(sort_keys=True)"
    assert repr(Pydantic(Order)) == "Pydantic(Order)"
    assert String().name == "string"
    assert Long().name == "long"
    assert Pydantic(Order).name.endswith(":Order")
    assert String() == String()
    assert String() != Long()
    assert Json() != Json(sort_keys=True)
    assert Pydantic(Order) == Pydantic(Order)
    assert len({String(), String(), Long()}) == 2


@pytest.mark.parametrize("serde", [s for s in ALL_SERDES if not isinstance(s, (Pydantic, Json))], ids=repr)
def test_name_resolves_back(serde: Serde) -> None:
    assert serde_from_name(serde.name) == serde


# --------------------------------------------------------------------------- serde_from_name


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        ("string", String),
        ("String", String),
        ("STRING", String),
        ("  json ", Json),
        ("long", Long),
        ("Long", Long),
        ("int", Integer),
        ("integer", Integer),
        ("short", Short),
        ("float", Float),
        ("double", Double),
        ("boolean", Boolean),
        ("bool", Boolean),
        ("bytes", Bytes),
        ("bytearray", Bytes),
        ("uuid", UUID),
        ("void", Void),
    ],
)
def test_serde_from_short_name(spec: str, cls: type[Serde]) -> None:
    assert type(serde_from_name(spec)) is cls


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        ("org.apache.kafka.common.serialization.Serdes$StringSerde", String),
        ("org.apache.kafka.common.serialization.Serdes$LongSerde", Long),
        ("org.apache.kafka.common.serialization.Serdes$ByteArraySerde", Bytes),
        ("org.apache.kafka.common.serialization.Serdes$BytesSerde", Bytes),
        ("org.apache.kafka.common.serialization.Serdes$ByteBufferSerde", Bytes),
        ("org.apache.kafka.common.serialization.Serdes$IntegerSerde", Integer),
        ("org.apache.kafka.common.serialization.Serdes$ShortSerde", Short),
        ("org.apache.kafka.common.serialization.Serdes$FloatSerde", Float),
        ("org.apache.kafka.common.serialization.Serdes$DoubleSerde", Double),
        ("org.apache.kafka.common.serialization.Serdes$BooleanSerde", Boolean),
        ("org.apache.kafka.common.serialization.Serdes$UUIDSerde", UUID),
        ("org.apache.kafka.common.serialization.Serdes$VoidSerde", Void),
        ("org.apache.kafka.common.serialization.Serdes.StringSerde", String),
        ("Serdes$LongSerde", Long),
    ],
)
def test_serde_from_java_class_name(spec: str, cls: type[Serde]) -> None:
    assert type(serde_from_name(spec)) is cls


def test_serde_from_import_path() -> None:
    serde = serde_from_name(f"{__name__}:UpperString")
    assert type(serde) is UpperString
    assert serde.serialize("abc") == b"ABC"
    assert serde_from_name("platform_streams.serde:Json") == Json()
    assert serde_from_name(f"{__name__}:UPPER_INSTANCE") is UPPER_INSTANCE


def test_serde_from_instance_and_class() -> None:
    inst = Json(sort_keys=True)
    assert serde_from_name(inst) is inst
    assert type(serde_from_name(Long)) is Long


@pytest.mark.parametrize(
    "spec",
    [
        "nope",
        "",
        "org.apache.kafka.common.serialization.Serdes$NopeSerde",
        "com.example.MySerde",
        "no_such_module_xyz:Thing",
        "platform_streams.serde:NoSuchThing",
        f"{__name__}:NOT_A_SERDE",
    ],
)
def test_serde_from_unknown_name_raises(spec: str) -> None:
    with pytest.raises(ValueError, match="serde"):
        serde_from_name(spec)


def test_unknown_name_error_lists_short_names() -> None:
    with pytest.raises(ValueError) as info:
        serde_from_name("protobuf")
    message = str(info.value)
    assert "'protobuf'" in message
    for short in ("string", "long", "json", "bytes"):
        assert short in message


def test_serde_from_name_rejects_non_string() -> None:
    with pytest.raises(ValueError):
        serde_from_name(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- key placement


@pytest.mark.parametrize(
    ("serde", "key", "partitions", "expected"),
    [
        # Recorded from librdkafka's Java-compatible ``murmur2`` partitioner on a live broker:
        # the serde's bytes and our partitioner must put a key where a Java producer would.
        (String(), "", 3, 0),
        (String(), "", 12, 9),
        (String(), "a", 12, 4),
        (String(), "key", 3, 1),
        (String(), "user-42", 12, 4),
        (String(), "orders:2024", 12, 0),
        (String(), "é", 12, 3),
        (Integer(), 0, 12, 4),
        (Integer(), -1, 3, 2),
        (Integer(), 42, 12, 0),
        (Long(), 0, 12, 11),
        (Long(), 1, 3, 0),
        (Long(), 123456789, 12, 8),
    ],
)
def test_serialized_keys_land_in_the_java_partition(
    serde: Serde, key: Any, partitions: int, expected: int
) -> None:
    from platform_streams.processor.partitioner import default_partition

    data = serde.serialize(key)
    assert data is not None
    assert default_partition(data, partitions) == expected
