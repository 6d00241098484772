"""Kafka's ChangeLoggingVersionedKeyValueBytesStoreTest (apache/kafka streams/src/test/java/org/
apache/kafka/streams/state/internals/ChangeLoggingVersionedKeyValueBytesStoreTest.java), translated
for the change-logging layer of a versioned store: every put and delete reaches the store below
and is logged with the *version's* timestamp as the changelog record's timestamp.

Not translated: ``shouldThrowIfInnerIsNotVersioned``, ``shouldDelegateInit`` (types and a mock
check) and the ``shouldNotLogOn{Delete,PutAll,PutIfAbsent}IfInnerStoreThrows`` cases: the
versioned layers here have no ``delete(key)``/``put_all``/``put_if_absent`` to call.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from platform_streams.state.stores import storage_backend
from platform_streams.state.versioned import ChangeLoggingVersionedBytesStore
from platform_streams.state.versioned_store import PUT_RETURN_CODE_VALID_TO_UNDEFINED, VersionedBytesStore

from .conftest import FakeContext

HISTORY_RETENTION = 1000


@pytest.fixture
def stores(context: FakeContext) -> Iterator[tuple[ChangeLoggingVersionedBytesStore, VersionedBytesStore]]:
    inner = VersionedBytesStore("bytes_store", storage_backend("bytes_store", True), HISTORY_RETENTION, 500)
    store = ChangeLoggingVersionedBytesStore(inner)
    store.init(context, store)
    yield store, inner
    store.close()


def test_should_propagate_and_log_on_put(stores, context: FakeContext) -> None:  # type: ignore[no-untyped-def]
    """shouldPropagateAndLogOnPut"""
    store, inner = stores
    assert store.put(b"k", b"foo", 10) == PUT_RETURN_CODE_VALID_TO_UNDEFINED
    assert inner.get_latest(b"k") == (b"foo", 10)
    assert context.logged == [("bytes_store", b"k", b"foo", 10)]


def test_should_propagate_and_log_on_put_null(stores, context: FakeContext) -> None:  # type: ignore[no-untyped-def]
    """shouldPropagateAndLogOnPutNull"""
    store, inner = stores
    inner.put(b"k", b"foo", 9)
    assert inner.get_latest(b"k") == (b"foo", 9)
    assert store.put(b"k", None, 10) == PUT_RETURN_CODE_VALID_TO_UNDEFINED
    assert inner.get_latest(b"k") is None
    assert context.logged == [("bytes_store", b"k", None, 10)]


def test_should_propagate_and_log_on_delete_with_timestamp(stores, context: FakeContext) -> None:  # type: ignore[no-untyped-def]
    """shouldPropagateAndLogOnDeleteWithTimestamp"""
    store, inner = stores
    inner.put(b"k", b"foo", 9)
    assert store.delete(b"k", 10) == (b"foo", 9, None)
    assert inner.get_latest(b"k") is None
    assert context.logged == [("bytes_store", b"k", None, 10)]


def test_should_delegate_get_and_get_with_timestamp(stores) -> None:  # type: ignore[no-untyped-def]
    """shouldDelegateGet / shouldDelegateGetWithTimestamp (reads go to the bytes store below)"""
    store, inner = stores
    inner.put(b"k", b"v", 8)
    assert store.inner.get_latest(b"k") == (b"v", 8)
    assert store.inner.get_as_of(b"k", 10) == (b"v", 8, None)
