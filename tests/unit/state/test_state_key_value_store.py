"""Key-value stores on both backends, through the full stack the ``Stores`` builder makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from platform_streams.serde import Bytes, Long, String
from platform_streams.state import KeyValueStore, Stores
from platform_streams.state.key_value_store import KeyValueBytesStore

from .conftest import FakeContext


def _supplier(persistent: bool, name: str = "kv") -> Any:
    return Stores.persistent_key_value_store(name) if persistent else Stores.in_memory_key_value_store(name)


@pytest.fixture(params=[False, True], ids=["uncached", "cached"])
def kv(
    request: pytest.FixtureRequest, persistent: bool, open_store: Callable[..., Any]
) -> KeyValueStore[Any, Any]:
    builder = Stores.key_value_store_builder(_supplier(persistent), String(), Long())
    if request.param:
        builder.with_caching_enabled()
    store: KeyValueStore[Any, Any] = open_store(builder.build())
    return store


def test_put_get_delete(kv: KeyValueStore[Any, Any]) -> None:
    assert kv.get("a") is None
    kv.put("a", 1)
    kv.put("a", 2)
    assert kv.get("a") == 2
    assert kv.delete("a") == 2
    assert kv.get("a") is None
    assert kv.delete("a") is None


def test_put_none_deletes(kv: KeyValueStore[Any, Any]) -> None:
    kv.put("a", 1)
    kv.put("a", None)
    assert kv.get("a") is None
    assert list(kv.all()) == []


def test_put_if_absent_and_put_all(kv: KeyValueStore[Any, Any]) -> None:
    assert kv.put_if_absent("a", 1) is None
    assert kv.put_if_absent("a", 2) == 1
    assert kv.get("a") == 1
    kv.put_all([("b", 2), ("c", 3), ("a", None)])
    assert list(kv.all()) == [("b", 2), ("c", 3)]


def test_range_is_inclusive_and_ordered(kv: KeyValueStore[Any, Any]) -> None:
    for i, key in enumerate("abcdef"):
        kv.put(key, i)
    kv.flush()
    kv.put("g", 6)  # one entry only in the cache (when cached)
    kv.delete("c")
    assert list(kv.range("b", "e")) == [("b", 1), ("d", 3), ("e", 4)]
    assert list(kv.reverse_range("b", "e")) == [("e", 4), ("d", 3), ("b", 1)]
    assert [k for k, _ in kv.range(None, "b")] == ["a", "b"]
    assert [k for k, _ in kv.range("e", None)] == ["e", "f", "g"]
    assert [k for k, _ in kv.all()] == ["a", "b", "d", "e", "f", "g"]
    assert [k for k, _ in kv.reverse_all()] == ["g", "f", "e", "d", "b", "a"]
    assert list(kv.range("e", "b")) == []


def test_prefix_scan(kv: KeyValueStore[Any, Any]) -> None:
    for key in ["user:1", "user:2", "user;", "usex", "use", "order:1"]:
        kv.put(key, len(key))
    assert [k for k, _ in kv.prefix_scan("user:")] == ["user:1", "user:2"]
    assert [k for k, _ in kv.prefix_scan("use")] == ["use", "user:1", "user:2", "user;", "usex"]
    assert [k for k, _ in kv.prefix_scan("zzz")] == []


def test_prefix_scan_with_0xff_bytes(persistent: bool, open_store: Callable[..., Any]) -> None:
    store = open_store(Stores.key_value_store_builder(_supplier(persistent), Bytes(), Bytes()).build())
    for key in [b"\xff", b"\xff\x00", b"\xff\xff", b"\xfe\xff", b"\x00"]:
        store.put(key, b"v")
    assert [k for k, _ in store.prefix_scan(b"\xff")] == [b"\xff", b"\xff\x00", b"\xff\xff"]
    assert [k for k, _ in store.prefix_scan(b"\xfe")] == [b"\xfe\xff"]


def test_iterators_survive_writes_while_iterating(kv: KeyValueStore[Any, Any]) -> None:
    for i in range(50):
        kv.put(f"k{i:02d}", i)
    seen = []
    for key, value in kv.all():
        seen.append(key)
        kv.put(key, value + 100)
        kv.put(f"z{key}", 0)  # grows the store while scanning
    assert seen == [f"k{i:02d}" for i in range(50)]
    assert kv.get("k07") == 107


def test_approximate_num_entries(kv: KeyValueStore[Any, Any]) -> None:
    for i in range(10):
        kv.put(str(i), i)
    kv.flush()
    assert 5 <= kv.approximate_num_entries() <= 20


def test_none_key_is_rejected(kv: KeyValueStore[Any, Any]) -> None:
    with pytest.raises(ValueError):
        kv.put(None, 1)


def test_store_properties(persistent: bool, open_store: Callable[..., Any]) -> None:
    store = Stores.key_value_store_builder(_supplier(persistent, "props"), String(), Long()).build()
    assert store.name == "props"
    assert store.persistent is persistent
    assert not store.is_open
    open_store(store)
    assert store.is_open
    store.close()
    assert not store.is_open


def test_restore_batch_applies_puts_and_tombstones(persistent: bool, open_store: Callable[..., Any]) -> None:
    store: KeyValueBytesStore = open_store(_supplier(persistent).get())
    store.restore_batch([(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3"), (b"b", b"22")])
    assert list(store.all()) == [(b"b", b"22"), (b"c", b"3")]


def test_rocksdb_data_survives_reopen(context: FakeContext) -> None:
    store = Stores.key_value_store_builder(_supplier(True, "durable"), String(), Long()).build()
    store.init(context, store)
    store.put("a", 1)
    store.put("b", 2)
    store.flush()
    store.close()
    again = Stores.key_value_store_builder(_supplier(True, "durable"), String(), Long()).build()
    again.init(context, again)
    try:
        assert list(again.all()) == [("a", 1), ("b", 2)]
        assert (context.state_dir / "rocksdb" / "durable").is_dir()
    finally:
        again.close()


def test_closed_store_raises(persistent: bool, context: FakeContext) -> None:
    from platform_streams.errors import InvalidStateStoreError

    store = _supplier(persistent).get()
    with pytest.raises(InvalidStateStoreError):
        store.get(b"a")
