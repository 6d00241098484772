"""Kafka's foreign-key join wire-format tests, translated: ``SubscriptionWrapperSerdeTest``,
``SubscriptionResponseWrapperSerdeTest`` and ``CombinedKeySchemaTest``
(streams/src/test/java/org/apache/kafka/streams/kstream/internals/foreignkeyjoin/), plus golden
bytes written by Kafka Streams 4.3.1 itself (jshell over its jar) so the topics stay compatible.

Not translated: ``shouldSerdeWithV0IfUpgradeTest`` (``upgrade.from`` below 3.4 has no equivalent:
this engine never wrote version 0); the ``NullPointerException`` cases are ``ValueError`` here.
"""

from __future__ import annotations

import pytest

from platform_streams.dsl.internals.foreign_key_wire import (
    CombinedKeySchema,
    Instruction,
    SubscriptionResponseWrapper,
    SubscriptionResponseWrapperSerde,
    SubscriptionWrapper,
    SubscriptionWrapperSerde,
    murmur3_hash128,
)
from platform_streams.errors import SerializationError
from platform_streams.serde import Integer, String

S = String()
HASH = murmur3_hash128(bytes([0xFF, 0xAA, 0x00, 0x19]))


def _roundtrip(wrapper: SubscriptionWrapper) -> SubscriptionWrapper:
    serde = SubscriptionWrapperSerde(S)
    result = serde.deserialize(serde.serialize(wrapper))
    assert result is not None
    return result


@pytest.mark.parametrize(
    ("version", "hash_", "partition", "instruction"),
    [
        pytest.param(0, HASH, None, Instruction.DELETE_KEY_AND_PROPAGATE, id="shouldSerdeV0Test"),
        pytest.param(1, HASH, 10, Instruction.DELETE_KEY_AND_PROPAGATE, id="shouldSerdeV1Test"),
        pytest.param(
            0, None, None, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, id="shouldSerdeNullHashV0Test"
        ),
        pytest.param(
            1, None, 10, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, id="shouldSerdeNullHashV1Test"
        ),
        pytest.param(
            0,
            HASH,
            None,
            Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE,
            id="shouldSerdeNullPrimaryPartitionOnV0Test",
        ),
    ],
)
def test_subscription_wrapper_serde(
    version: int, hash_: tuple[int, int] | None, partition: int | None, instruction: Instruction
) -> None:
    result = _roundtrip(SubscriptionWrapper(hash_, instruction, "originalKey", partition, version))
    assert result.instruction == instruction
    assert result.hash == hash_
    assert result.primary_key == "originalKey"
    assert result.primary_partition == partition
    assert result.version == version


@pytest.mark.parametrize("version", [0, 1])
def test_should_throw_exception_on_null_key(version: int) -> None:
    """shouldThrowExceptionOnNullKeyV0Test / V1Test"""
    with pytest.raises(ValueError, match="primaryKey cannot be null"):
        SubscriptionWrapper(HASH, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, None, 10, version)


@pytest.mark.parametrize("version", [0, 1])
def test_should_throw_exception_on_null_instruction(version: int) -> None:
    """shouldThrowExceptionOnNullInstructionV0Test / V1Test"""
    with pytest.raises(ValueError, match="instruction cannot be null"):
        SubscriptionWrapper(HASH, None, "originalKey", 10, version)  # type: ignore[arg-type]


def test_should_throw_exception_on_null_primary_partition_v1() -> None:
    """shouldThrowExceptionOnNullPrimaryPartitionV1Test"""
    wrapper = SubscriptionWrapper(
        HASH, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, "originalKey", None, 1
    )
    with pytest.raises(SerializationError):
        SubscriptionWrapperSerde(S).serialize(wrapper)


def test_should_throw_exception_on_unsupported_version() -> None:
    """shouldThrowExceptionOnUnsupportedVersionTest"""
    with pytest.raises(ValueError, match="does not support version"):
        SubscriptionWrapper(None, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, "originalKey", 10, 0x80)


RESPONSE_HASH = murmur3_hash128(bytes([0x01, 0x9A, 0xFF, 0x00]))


@pytest.mark.parametrize(
    ("hash_", "foreign_value"),
    [
        pytest.param(RESPONSE_HASH, "foreignValue", id="ShouldSerdeWithNonNullsTest"),
        pytest.param(RESPONSE_HASH, None, id="shouldSerdeWithNullForeignValueTest"),
        pytest.param(None, "foreignValue", id="shouldSerdeWithNullHashTest"),
        pytest.param(None, None, id="shouldSerdeWithNullsTest"),
    ],
)
def test_subscription_response_wrapper_serde(
    hash_: tuple[int, int] | None, foreign_value: str | None
) -> None:
    serde = SubscriptionResponseWrapperSerde(S)
    result = serde.deserialize(serde.serialize(SubscriptionResponseWrapper(hash_, foreign_value, 1)))
    assert result is not None
    assert result.original_value_hash == hash_
    assert result.foreign_value == foreign_value
    assert result.primary_partition is None  # not serialized


def test_should_throw_exception_with_bad_version() -> None:
    """shouldThrowExceptionWithBadVersionTest"""
    with pytest.raises(ValueError):
        SubscriptionResponseWrapper(None, "foreignValue", 1, -1)


# -- CombinedKeySchemaTest


def _schema() -> CombinedKeySchema:
    return CombinedKeySchema(S, Integer())


def test_nonnull_primary_key_serde() -> None:
    """nonNullPrimaryKeySerdeTest"""
    schema = _schema()
    assert schema.from_bytes(schema.to_bytes("foreignKey", -999)) == ("foreignKey", -999)


def test_null_primary_key_serde() -> None:
    """nullPrimaryKeySerdeTest"""
    with pytest.raises(SerializationError):
        _schema().to_bytes("foreignKey", None)


def test_null_foreign_key_serde() -> None:
    """nullForeignKeySerdeTest"""
    with pytest.raises(SerializationError):
        _schema().to_bytes(None, 10)


def test_prefix_key_serde() -> None:
    """prefixKeySerdeTest"""
    data = b"someForeignKey"
    assert _schema().prefix_bytes("someForeignKey") == len(data).to_bytes(4, "big") + data


def test_null_prefix_key_serde() -> None:
    """nullPrefixKeySerdeTest"""
    with pytest.raises(SerializationError):
        _schema().prefix_bytes(None)


# -- golden bytes from Kafka Streams 4.3.1 (jshell over kafka-streams-4.3.1.jar)


def test_murmur3_matches_kafka() -> None:
    """Murmur3.hash128 of a few inputs, as Java printed them (tail lengths 0, 1, 5, 16 and 21)."""
    golden = {
        b"": (-7122613646888064702, -8341524471658347240),
        b"a": (3702349557448790408, -1601067453332442517),
        b"hello": (3512725192710940516, 6227047293690958278),
        b"0123456789abcdef": (1904622552327088487, -2893518741649893711),
        b"0123456789abcdefXYZ\xff\xfe": (2959253548647204254, -3325100486081920344),
    }
    for data, expected in golden.items():
        assert murmur3_hash128(data) == expected


def test_wrappers_are_byte_compatible_with_kafka() -> None:
    value_hash = murmur3_hash128(b"value-1")
    wrapper = SubscriptionWrapper(value_hash, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, "pk-1", 3)
    assert SubscriptionWrapperSerde(S).serialize(wrapper) == bytes.fromhex(
        "01028dbcd6bea0d4226c0ddf1b0b917521a7706b2d3100000003"
    )
    deleted = SubscriptionWrapper(None, Instruction.DELETE_KEY_AND_PROPAGATE, "pk-1", 0)
    assert SubscriptionWrapperSerde(S).serialize(deleted) == bytes.fromhex("8101706b2d3100000000")
    response = SubscriptionResponseWrapper(value_hash, "foreign", 3)
    assert SubscriptionResponseWrapperSerde(S).serialize(response) == bytes.fromhex(
        "008dbcd6bea0d4226c0ddf1b0b917521a7666f726569676e"
    )
    assert (
        SubscriptionResponseWrapperSerde(S).serialize(SubscriptionResponseWrapper(None, None, 3)) == b"\x80"
    )
