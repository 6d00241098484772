"""Serdes for raw bytes, strings, numbers, booleans and UUIDs, byte-compatible with Java's.

Every layout here matches the corresponding class in
``org.apache.kafka.common.serialization`` so that a topic written by a Java Kafka
Streams application can be read by us and vice versa (e.g. ``Long`` is 8 bytes
big-endian two's complement, ``Boolean`` is a single ``0x00``/``0x01`` byte).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from platform_streams.errors import DeserializationError, SerializationError
from platform_streams.serde.base import Serde

__all__ = [
    "UUID",
    "Boolean",
    "Bytes",
    "Double",
    "Float",
    "Integer",
    "Long",
    "Short",
    "String",
    "Void",
]


class Bytes(Serde):
    """Identity serde (Java ``ByteArraySerde``/``BytesSerde``/``ByteBufferSerde``).

    ``bytearray`` and ``memoryview`` are copied into ``bytes`` because the producer and
    the stores keep a reference to the value; a mutable buffer changing underneath them
    would corrupt the record.
    """

    name = "bytes"
    __slots__ = ()

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None or type(obj) is bytes:
            return obj
        if isinstance(obj, (bytearray, memoryview)):
            return bytes(obj)
        raise SerializationError(f"Bytes serde expects bytes-like, got {type(obj).__name__}")

    def deserialize(self, data: bytes | None) -> bytes | None:
        return data


class String(Serde):
    """UTF-8 text (Java ``StringSerde`` with its default encoding).

    Decoding is strict: Java silently substitutes U+FFFD for malformed input, but a
    lossy decode would hide poison records, so we surface them to the
    deserialization exception handler instead.
    """

    name = "string"
    __slots__ = ()

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        try:
            return obj.encode()
        except AttributeError:
            raise SerializationError(f"String serde expects str, got {type(obj).__name__}") from None

    def deserialize(self, data: bytes | None) -> str | None:
        if data is None:
            return None
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise DeserializationError(f"String serde: invalid UTF-8: {exc}") from exc


class _FixedWidth(Serde):
    """Shared implementation for numbers packed with one big-endian :class:`struct.Struct`.

    Subclasses only set ``_struct``; the bound ``pack``/``unpack`` methods are cached on
    the instance so the hot path is one attribute load plus one C call. ``struct.error``
    is only caught (zero-cost ``try`` in 3.11) to give Java-like error messages.
    """

    _struct: struct.Struct
    __slots__ = ("_pack", "_size", "_unpack")

    def __init__(self) -> None:
        self._pack = self._struct.pack
        self._unpack = self._struct.unpack
        self._size = self._struct.size

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        try:
            return self._pack(obj)
        except (struct.error, TypeError, OverflowError) as exc:
            raise SerializationError(f"{type(self).__name__} serde cannot encode {obj!r}: {exc}") from exc

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return self._unpack(data)[0]
        except struct.error:
            raise DeserializationError(
                f"Size of data received by {type(self).__name__} deserializer is {len(data)}, "
                f"expected {self._size}"
            ) from None


class Short(_FixedWidth):
    """2-byte big-endian signed integer (Java ``ShortSerde``)."""

    name = "short"
    _struct = struct.Struct(">h")
    __slots__ = ()


class Integer(_FixedWidth):
    """4-byte big-endian signed integer (Java ``IntegerSerde``)."""

    name = "integer"
    _struct = struct.Struct(">i")
    __slots__ = ()


class Long(_FixedWidth):
    """8-byte big-endian signed integer (Java ``LongSerde``)."""

    name = "long"
    _struct = struct.Struct(">q")
    __slots__ = ()


class Float(_FixedWidth):
    """4-byte IEEE 754 big-endian float (Java ``FloatSerde``); decodes to a Python float."""

    name = "float"
    _struct = struct.Struct(">f")
    __slots__ = ()


class Double(_FixedWidth):
    """8-byte IEEE 754 big-endian double (Java ``DoubleSerde``)."""

    name = "double"
    _struct = struct.Struct(">d")
    __slots__ = ()


_TRUE = b"\x01"
_FALSE = b"\x00"


class Boolean(Serde):
    """One byte, ``0x01`` for true and ``0x00`` for false (Java ``BooleanSerde``).

    Any other byte or length is rejected, as Java does, rather than guessing truthiness.
    """

    name = "boolean"
    __slots__ = ()

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if obj is True:
            return _TRUE
        if obj is False:
            return _FALSE
        raise SerializationError(f"Boolean serde expects bool, got {type(obj).__name__}")

    def deserialize(self, data: bytes | None) -> bool | None:
        if data is None:
            return None
        if data == _TRUE:
            return True
        if data == _FALSE:
            return False
        if len(data) != 1:
            raise DeserializationError(
                f"Size of data received by Boolean deserializer is {len(data)}, expected 1"
            )
        raise DeserializationError(f"Unexpected byte received by Boolean deserializer: {data[0]:#04x}")


_UUID = uuid.UUID


class UUID(Serde):
    """UUID as its canonical lowercase string in UTF-8 (Java ``UUIDSerde``).

    ``str`` input is accepted but parsed, so only well-formed UUIDs reach the topic.
    """

    name = "uuid"
    __slots__ = ()

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        try:
            if type(obj) is not _UUID:
                obj = _UUID(obj)
            return str(obj).encode()
        except (ValueError, TypeError, AttributeError) as exc:
            raise SerializationError(f"UUID serde cannot encode {obj!r}: {exc}") from exc

    def deserialize(self, data: bytes | None) -> uuid.UUID | None:
        if data is None:
            return None
        try:
            return _UUID(data.decode())
        except (ValueError, UnicodeDecodeError) as exc:
            raise DeserializationError(f"UUID serde: invalid UUID bytes {data!r}") from exc


class Void(Serde):
    """Only ``None`` (Java ``VoidSerde``): for key-less topics, makes a stray key an error."""

    name = "void"
    __slots__ = ()

    def serialize(self, obj: Any) -> bytes | None:
        if obj is not None:
            raise SerializationError(f"Void serde expects None, got {type(obj).__name__}")
        return None

    def deserialize(self, data: bytes | None) -> None:
        if data is not None:
            raise DeserializationError("Void serde expects null data")
        return None
