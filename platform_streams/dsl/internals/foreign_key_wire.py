"""Wire formats of the foreign-key join (KIP-213), byte-compatible with Kafka Streams.

The two internal topics and the subscription store of an FK join carry Kafka Streams'
own layouts, so a Java instance and a Python one could share them (and a Java consumer
can read them):

* :class:`SubscriptionWrapperSerde` (``-subscription-registration-topic`` values, subscription
  store values): ``{hash-null bit | 7-bit version}{instruction}{16-byte hash?}{primary key}
  {4-byte primary partition (v1)}``;
* :class:`SubscriptionResponseWrapperSerde` (``-subscription-response-topic`` values):
  ``{hash-null bit | 7-bit version}{16-byte hash?}{foreign value?}``;
* :class:`CombinedKeySchema` (subscription store keys): ``{4-byte fk length}{fk}{pk}``, so a
  prefix scan on the foreign key finds every primary key subscribed to it;
* :func:`murmur3_hash128`: Kafka's ``Murmur3.hash128`` (MurmurHash3 x64 128-bit, seed 104729) of
  the serialized primary value, the token that lets the response side drop stale answers.

The inner serdes may be None (the application's default serdes apply, as Java's
``WrappingNullableSerde.setIfUnset``): the FK-join processors call ``set_if_unset`` in their
``init``, before any record is processed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from platform_streams.errors import DeserializationError, SerializationError
from platform_streams.serde.base import Serde

__all__ = [
    "CombinedKeySchema",
    "Instruction",
    "SubscriptionResponseWrapper",
    "SubscriptionResponseWrapperSerde",
    "SubscriptionWrapper",
    "SubscriptionWrapperSerde",
    "WrappingSerde",
    "murmur3_hash128",
]

_MASK = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
_SEED = 104729
_TWO_LONGS = struct.Struct(">qq")
_INT = struct.Struct(">i")
_BLOCK = struct.Struct("<QQ")

Hash = tuple[int, int]


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK
    return h ^ (h >> 33)


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def murmur3_hash128(data: bytes) -> Hash:
    """Kafka Streams' ``Murmur3.hash128(data)``: two signed longs, as Java's ``long[]``."""
    length = len(data)
    h1 = h2 = _SEED
    nblocks = length >> 4
    for i in range(nblocks):
        k1, k2 = _BLOCK.unpack_from(data, i << 4)
        k1 = (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
        h1 = (((_rotl(h1 ^ k1, 27) + h2) & _MASK) * 5 + 0x52DCE729) & _MASK
        k2 = (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
        h2 = (((_rotl(h2 ^ k2, 31) + h1) & _MASK) * 5 + 0x38495AB5) & _MASK
    tail = data[nblocks << 4 :]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    return _signed(h1), _signed(h2)


class Instruction(IntEnum):
    """What the foreign side does with a subscription (Kafka's ``SubscriptionWrapper.Instruction``)."""

    #: the foreign key changed: forget the old subscription, send nothing
    DELETE_KEY_NO_PROPAGATE = 0
    #: the primary row was deleted: forget the subscription and send (k, null)
    DELETE_KEY_AND_PROPAGATE = 1
    #: send (k, foreign value), or (k, null) when there is none
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2
    #: first subscription of an inner join: send (k, foreign value) only if there is one
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3


CURRENT_VERSION = 1
RESPONSE_VERSION = 0


@dataclass(frozen=True)
class SubscriptionWrapper:
    """A primary row's subscription to a foreign key (Kafka's ``SubscriptionWrapper``)."""

    hash: Hash | None
    instruction: Instruction
    primary_key: Any
    primary_partition: int | None
    version: int = CURRENT_VERSION

    def __post_init__(self) -> None:
        if self.instruction is None:
            raise ValueError("instruction cannot be null. Required by downstream processor.")
        if self.primary_key is None:
            raise ValueError("primaryKey cannot be null. Required by downstream processor.")
        if not 0 <= self.version <= CURRENT_VERSION:
            raise ValueError(f"SubscriptionWrapper does not support version {self.version}")


@dataclass(frozen=True)
class SubscriptionResponseWrapper:
    """The foreign side's answer (Kafka's ``SubscriptionResponseWrapper``); ``primary_partition``
    routes it back to the subscribing partition and is not serialized."""

    original_value_hash: Hash | None
    foreign_value: Any
    primary_partition: int | None = None
    version: int = RESPONSE_VERSION

    def __post_init__(self) -> None:
        if not 0 <= self.version <= RESPONSE_VERSION:
            raise ValueError(f"SubscriptionWrapper does not support version {self.version}")


def _version_byte(version: int, hash_: Hash | None) -> bytes:
    """``{1-bit is-hash-null}{7-bit version}``, then the 16-byte hash when there is one."""
    if hash_ is None:
        return bytes((version | 0x80,))
    return bytes((version,)) + _TWO_LONGS.pack(*hash_)


def _read_hash(data: bytes, first: int, pos: int) -> tuple[Hash | None, int]:
    """The optional hash at ``pos`` (present unless ``first`` has the is-hash-null bit), and the
    position after it."""
    if first & 0x80:
        return None, pos
    return _TWO_LONGS.unpack_from(data, pos), pos + _TWO_LONGS.size


class WrappingSerde(Serde):
    """A serde around an inner serde that may be resolved late (the config's default)."""

    __slots__ = ("inner", "role")

    def __init__(self, inner: Serde | None, role: str) -> None:
        self.inner = inner
        self.role = role

    def _params(self) -> tuple[Any, ...]:
        return (self.inner, self.role)

    def set_if_unset(self, default_key: Serde, default_value: Serde) -> None:
        """Java's ``WrappingNullableSerde.setIfUnset``: the default serde when none was given."""
        if self.inner is None:
            self.inner = default_key if self.role == "key" else default_value

    def _inner(self) -> Serde:
        if self.inner is None:
            raise SerializationError(f"{type(self).__name__}: inner serde not resolved (set_if_unset)")
        return self.inner


class SubscriptionWrapperSerde(WrappingSerde):
    """Kafka's ``SubscriptionWrapperSerde`` (writes version 1, reads 0 and 1)."""

    name = "fk-subscription-wrapper"
    __slots__ = ()

    def __init__(self, primary_key_serde: Serde | None) -> None:
        super().__init__(primary_key_serde, "key")

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if not 0 <= obj.version <= CURRENT_VERSION:
            raise SerializationError(f"unsupported SubscriptionWrapper version {obj.version}")
        pk = self._inner().serialize(obj.primary_key)
        if pk is None:
            raise SerializationError("a subscription's primary key must not serialize to null")
        head = _version_byte(obj.version, obj.hash)
        parts = [head[:1], bytes((int(obj.instruction),)), head[1:], pk]
        if obj.version > 0:
            if obj.primary_partition is None:
                raise SerializationError("a version 1 subscription needs its primary partition")
            parts.append(_INT.pack(obj.primary_partition))
        return b"".join(parts)

    def deserialize(self, data: bytes | None) -> SubscriptionWrapper | None:
        if data is None:
            return None
        if len(data) < 2:
            raise DeserializationError(f"subscription wrapper too short ({len(data)} bytes)")
        version = data[0] & 0x7F
        try:
            instruction = Instruction(data[1])
        except ValueError:
            raise DeserializationError(f"Unknown instruction byte value = {data[1]}") from None
        hash_, pos = _read_hash(data, data[0], 2)
        end = len(data) - _INT.size if version > 0 else len(data)
        primary_key = self._inner().deserialize(data[pos:end])
        partition = _INT.unpack_from(data, end)[0] if version > 0 else None
        return SubscriptionWrapper(hash_, instruction, primary_key, partition, version)


class SubscriptionResponseWrapperSerde(WrappingSerde):
    """Kafka's ``SubscriptionResponseWrapperSerde`` (version 0)."""

    name = "fk-subscription-response-wrapper"
    __slots__ = ()

    def __init__(self, foreign_value_serde: Serde | None) -> None:
        super().__init__(foreign_value_serde, "value")

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        if obj.version < 0:
            raise SerializationError("SubscriptionResponseWrapper version cannot be negative")
        value = None if obj.foreign_value is None else self._inner().serialize(obj.foreign_value)
        return _version_byte(obj.version, obj.original_value_hash) + (value or b"")

    def deserialize(self, data: bytes | None) -> SubscriptionResponseWrapper | None:
        if data is None:
            return None
        if not data:
            raise DeserializationError("subscription response wrapper is empty")
        version = data[0] & 0x7F
        hash_, pos = _read_hash(data, data[0], 1)
        value = self._inner().deserialize(data[pos:]) if len(data) > pos else None
        return SubscriptionResponseWrapper(hash_, value, None, version)


class CombinedKeySchema:
    """Kafka's ``CombinedKeySchema``: subscription store keys ``{len(fk)}{fk}{pk}``, prefix-scannable
    by foreign key. Serdes None are resolved in :meth:`init` from the config's default key serde."""

    def __init__(self, foreign_key_serde: Serde | None, primary_key_serde: Serde | None) -> None:
        self.foreign_key_serde = foreign_key_serde
        self.primary_key_serde = primary_key_serde

    def init(self, default_key: Serde) -> None:
        self.foreign_key_serde = self.foreign_key_serde or default_key
        self.primary_key_serde = self.primary_key_serde or default_key

    def to_bytes(self, foreign_key: Any, primary_key: Any) -> bytes:
        assert self.primary_key_serde is not None
        pk = self.primary_key_serde.serialize(primary_key)
        if pk is None:
            raise SerializationError("a combined key needs a primary key")
        return self.prefix_bytes(foreign_key) + pk

    def prefix_bytes(self, foreign_key: Any) -> bytes:
        assert self.foreign_key_serde is not None
        fk = self.foreign_key_serde.serialize(foreign_key)
        if fk is None:
            raise SerializationError("a combined key needs a foreign key")
        return _INT.pack(len(fk)) + fk

    def from_bytes(self, data: bytes) -> tuple[Any, Any]:
        """``(foreign_key, primary_key)``."""
        assert self.foreign_key_serde is not None and self.primary_key_serde is not None
        (length,) = _INT.unpack_from(data, 0)
        cut = _INT.size + length
        return (
            self.foreign_key_serde.deserialize(data[_INT.size : cut]),
            self.primary_key_serde.deserialize(data[cut:]),
        )
