"""KRaft cluster ids for ``kafka-storage format`` (platform_streams/dev/brokers/apache.py).

Translated from Kafka's ``Uuid.randomUuid()`` contract
(clients/src/main/java/org/apache/kafka/common/Uuid.java, and its UuidTest): a random id is
never the reserved 0 or 1, and its string never starts with a dash, which the storage
tool's argument parser would take for an option (CI failed once on such an id).
"""

from __future__ import annotations

import uuid

import pytest

from platform_streams.dev.brokers import apache as apache_broker


def test_an_id_that_would_start_with_a_dash_or_is_reserved_is_drawn_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    draws = iter(
        [
            uuid.UUID(bytes=bytes([0xF8]) + bytes(15)),  # "-AAAA...": an option to argparse
            uuid.UUID(int=0),  # Kafka's ZERO_UUID
            uuid.UUID(int=1),  # Kafka's ONE_UUID (the metadata topic's id)
            uuid.UUID(bytes=bytes([0x04]) + bytes(15)),
        ]
    )
    monkeypatch.setattr(apache_broker.uuid, "uuid4", lambda: next(draws))
    assert apache_broker._random_cluster_id() == "BAAAAAAAAAAAAAAAAAAAAA"


def test_random_ids_are_22_url_safe_characters_never_starting_with_a_dash() -> None:
    ids = {apache_broker._random_cluster_id() for _ in range(2_000)}
    assert len(ids) == 2_000
    assert all(len(i) == 22 and not i.startswith("-") and "=" not in i for i in ids)
