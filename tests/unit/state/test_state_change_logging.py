"""Change-logging: what every write sends to ``context.log_change``, and replaying it back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from platform_streams.serde import Long, String
from platform_streams.state import SessionWindow, Stores, Windowed
from platform_streams.state.keys import session_key, window_key
from platform_streams.state.timestamped import ValueAndTimestamp

from .conftest import FakeContext

L = Long()


def test_kv_writes_are_logged_with_stream_time(open_store: Callable[..., Any], context: FakeContext) -> None:
    store = open_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), String(), L).build()
    )
    context.stream_time = 1234
    store.put("a", 1)
    store.put_if_absent("a", 2)  # present: nothing written, nothing logged
    store.put_if_absent("b", 2)
    store.delete("a")
    store.put_all([("c", 3)])
    assert context.logged == [
        ("kv", b"a", L.serialize(1), 1234),
        ("kv", b"b", L.serialize(2), 1234),
        ("kv", b"a", None, 1234),
        ("kv", b"c", L.serialize(3), 1234),
    ]
    assert [topic for _, _, topic in context.registered] == ["app-kv-changelog"]


def test_kv_changes_carry_the_timestamp_of_the_record_being_processed(
    open_store: Callable[..., Any], context: FakeContext
) -> None:
    """ChangeLoggingKeyValueBytesStore logs ``internalContext.recordContext().timestamp()``
    (streams/src/main/java/org/apache/kafka/streams/state/internals/ChangeLoggingKeyValueBytesStore.java):
    an out-of-order record's change carries its own timestamp, not the (later) stream time;
    outside a record (a punctuation, a flush) the stream time."""
    store = open_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), String(), L).build()
    )
    context.stream_time = 1234
    context.current, context.record_time = object(), 1200  # the task's record being processed
    store.put("a", 1)
    store.delete("b")
    context.current = None
    store.put("c", 3)
    assert [(key, ts) for _, key, _, ts in context.logged] == [(b"a", 1200), (b"b", 1200), (b"c", 1234)]


def test_timestamped_kv_changes_carry_the_value_timestamp(
    open_store: Callable[..., Any], context: FakeContext
) -> None:
    """ChangeLoggingTimestampedKeyValueBytesStoreTest.shouldLogChangesOnPutAll and
    shouldLogKeyNullOnDelete (streams/src/test/java/org/apache/kafka/streams/state/internals/):
    a change's record timestamp is the value's timestamp, a delete's the record's. The value
    bytes differ on purpose: they stay ``timestamp + value`` here (docs/oracle.md, "Changelog
    records"), where Kafka logs the plain value."""
    builder = Stores.timestamped_key_value_store_builder(Stores.in_memory_key_value_store("kv"), String(), L)
    store = open_store(builder.build())
    context.stream_time = 0
    context.current, context.record_time = object(), 0
    store.put_all([("hi", ValueAndTimestamp(1, 97)), ("hello", ValueAndTimestamp(2, 98))])
    store.delete("hi")
    assert [(key, ts) for _, key, _, ts in context.logged] == [(b"hi", 97), (b"hello", 98), (b"hi", 0)]


def test_wall_clock_before_any_record(open_store: Callable[..., Any], context: FakeContext) -> None:
    store = open_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), String(), L).build()
    )
    context.stream_time = -1
    store.put("a", 1)
    assert context.logged[0][3] == 1_000


def test_logging_disabled(open_store: Callable[..., Any], context: FakeContext) -> None:
    builder = Stores.key_value_store_builder(Stores.persistent_key_value_store("quiet"), String(), L)
    store = open_store(builder.with_logging_disabled().build())
    store.put("a", 1)
    store.flush()
    assert context.logged == []
    assert [topic for _, _, topic in context.registered] == [None]


def test_window_log_keys_carry_start_and_seqnum(open_store: Callable[..., Any], context: FakeContext) -> None:
    plain = Stores.window_store_builder(Stores.in_memory_window_store("w", 10_000, 1000), String(), L).build()
    dups = Stores.window_store_builder(
        Stores.in_memory_window_store("d", 10_000, 1000, retain_duplicates=True), String(), L
    ).build()
    open_store(plain).put("k", 1, 5000)
    open_store(dups)
    dups.put("k", 1, 5000)
    dups.put("k", None, 5000)  # ignored with duplicates: not logged either
    dups.put("k", 2, 5000)
    assert [(name, key) for name, key, _, _ in context.logged] == [
        ("w", window_key(b"k", 5000, 0)),
        ("d", window_key(b"k", 5000, 1)),
        ("d", window_key(b"k", 5000, 2)),
    ]


def test_session_log_keys(open_store: Callable[..., Any], context: FakeContext) -> None:
    store = open_store(
        Stores.session_store_builder(Stores.in_memory_session_store("s", 10_000), String(), L).build()
    )
    store.put(Windowed("k", SessionWindow(10, 20)), 1)
    store.remove(Windowed("k", SessionWindow(10, 20)))
    assert context.logged == [
        ("s", session_key(b"k", 10, 20), L.serialize(1), 0),
        ("s", session_key(b"k", 10, 20), None, 0),
    ]


def _replay(context: FakeContext, target: FakeContext) -> None:
    """Feed what ``context`` logged into the restore callbacks ``target`` received."""
    callbacks = {store.name: callback for store, callback, _ in target.registered}
    for name, key, value, _ in context.logged:
        callbacks[name]([(key, value)])


def test_changelog_replays_into_an_identical_store(persistent: bool, tmp_path: Path) -> None:
    def build(ctx: FakeContext) -> tuple[Any, Any, Any]:
        kv_sup = Stores.persistent_key_value_store if persistent else Stores.in_memory_key_value_store
        w_sup = Stores.persistent_window_store if persistent else Stores.in_memory_window_store
        s_sup = Stores.persistent_session_store if persistent else Stores.in_memory_session_store
        kv = Stores.key_value_store_builder(kv_sup("kv"), String(), L).with_caching_enabled().build()
        ws = Stores.window_store_builder(
            w_sup("w", 60_000, 1000, retain_duplicates=True), String(), L
        ).build()
        ss = Stores.session_store_builder(s_sup("s", 60_000), String(), L).with_caching_enabled().build()
        for store in (kv, ws, ss):
            store.init(ctx, store)
        return kv, ws, ss

    source_ctx = FakeContext(tmp_path / "source")
    kv, ws, ss = build(source_ctx)
    for i in range(20):
        kv.put(f"k{i % 7}", i)
        ws.put(f"k{i % 3}", i, (i % 4) * 1000)
        ss.put(Windowed(f"k{i % 5}", SessionWindow(i * 10, i * 10 + 5)), i)
    kv.delete("k3")
    ss.remove(Windowed("k1", SessionWindow(10, 15)))
    for store in (kv, ws, ss):
        store.flush()

    target_ctx = FakeContext(tmp_path / "target")
    kv2, ws2, ss2 = build(target_ctx)
    _replay(source_ctx, target_ctx)
    try:
        assert list(kv2.all()) == list(kv.all())
        assert list(ws2.all()) == list(ws.all())
        assert [list(ss2.fetch(f"k{i}")) for i in range(5)] == [list(ss.fetch(f"k{i}")) for i in range(5)]
    finally:
        for store in (kv, ws, ss, kv2, ws2, ss2):
            store.close()
