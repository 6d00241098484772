"""Kafka's VersionedKeyQueryTest and MultiVersionedKeyQueryTest (apache/kafka streams/src/test/java/
org/apache/kafka/streams/query/), plus how a versioned store answers IQv2 queries (execute_query).

Java's NullPointerException is a ValueError here, with Kafka's message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_streams.query import KeyQuery, MultiVersionedKeyQuery, VersionedKeyQuery
from platform_streams.query.execution import execute_query, store_kind
from platform_streams.query.results import FailureReason
from platform_streams.serde import Integer, String
from platform_streams.state import Stores, VersionedRecord
from tests.unit.state.conftest import FakeContext


def test_versioned_key_query_should_throw_npe_with_null_key() -> None:
    """VersionedKeyQueryTest.shouldThrowNPEWithNullKey"""
    with pytest.raises(ValueError, match=r"^key cannot be null\.$"):
        VersionedKeyQuery.with_key(None)


def test_versioned_key_query_should_throw_npe_with_null_as_of_timestamp() -> None:
    """VersionedKeyQueryTest.shouldThrowNPEWithNullAsOftimestamp"""
    with pytest.raises(ValueError, match=r"^asOf timestamp cannot be null\.$"):
        VersionedKeyQuery.with_key(1).as_of(None)  # type: ignore[arg-type]


def test_multi_versioned_key_query_should_throw_npe_with_null_key() -> None:
    """MultiVersionedKeyQueryTest.shouldThrowNPEWithNullKey"""
    with pytest.raises(ValueError, match=r"^key cannot be null\.$"):
        MultiVersionedKeyQuery.with_key(None)


def test_versioned_store_answers_versioned_queries_only(tmp_path: Path) -> None:
    store = Stores.versioned_key_value_store_builder(
        Stores.persistent_versioned_key_value_store("v", 1_000), Integer(), String()
    ).build()
    store.init(FakeContext(tmp_path / "0_0"), store)
    try:
        assert store_kind(store) == "versioned"
        store.put(1, "a", 10)
        store.put(1, "b", 20)
        assert execute_query(store, VersionedKeyQuery.with_key(1).as_of(15)).result == VersionedRecord(
            "a", 10, 20
        )
        assert execute_query(store, VersionedKeyQuery.with_key(1)).result == VersionedRecord("b", 20, None)
        multi = execute_query(store, MultiVersionedKeyQuery.with_key(1).with_ascending_timestamps()).result
        assert multi == [VersionedRecord("a", 10, 20), VersionedRecord("b", 20, None)]
        # Kafka's versioned stores do not answer KeyQuery
        assert execute_query(store, KeyQuery.with_key(1)).failure_reason is FailureReason.UNKNOWN_QUERY_TYPE
    finally:
        store.close()
