"""The emit-final bookkeeping (``dsl/internals/window_close.py``): what is written, and a restart.

Kafka Streams' ``AbstractKStreamTimeWindowAggregateProcessor`` keeps ``lastEmitWindowCloseTime``
(in its commit metadata) and finds the windows to emit in the window store; ours keeps the
pending windows in memory, persists the close time emitted up to in a changelogged store
and rebuilds the pending windows from the window store on restart. The store here is a
dict (pure logic); the broker-backed restart is
``tests/topology/test_suppress.py::test_final_results_survive_losing_local_state``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from platform_streams.dsl.internals.window_close import CLOSE_TIME_KEY, PendingWindows


class _Store:
    """A key-value store of bytes that records every write (as its changelog would)."""

    def __init__(self, data: dict[bytes, bytes] | None = None) -> None:
        self.data = dict(data or {})
        self.writes: list[tuple[bytes, bytes | None]] = []

    def put(self, key: bytes, value: bytes | None) -> None:
        self.writes.append((key, value))
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(sorted(self.data.items()))


def _close_time(store: _Store) -> int:
    return int(struct.unpack(">q", store.data[CLOSE_TIME_KEY])[0])


def test_only_the_close_time_is_written_and_a_restart_emits_each_window_once() -> None:
    store = _Store()
    pending = PendingWindows.for_store(store, lambda: [])  # type: ignore[arg-type]
    for key in (b"a", b"b"):
        pending.add(10, 0, key)
        pending.add(20, 10, key)
    assert store.writes == []  # creating windows writes nothing
    assert pending.pop_closed(9) == []
    assert pending.pop_closed(12) == [(10, 0, b"a"), (10, 0, b"b")]
    assert store.writes == [(CLOSE_TIME_KEY, struct.pack(">q", 12))]

    # restart: the window store still holds all four windows; [0,10) were emitted (due 10 <= 12)
    stored = [(10, 0, b"a"), (10, 0, b"b"), (20, 10, b"a"), (20, 10, b"b")]
    restored = PendingWindows.for_store(_Store(store.data), lambda: stored)  # type: ignore[arg-type]
    assert restored.emitted == 12
    assert restored.pop_closed(25) == [(20, 10, b"a"), (20, 10, b"b")]
    assert restored.pop_closed(100) == []


def test_a_window_created_behind_the_emitted_close_time_is_logged_until_emitted() -> None:
    """Cogroup: processors share the store with their own stream times (window_close docs)."""
    store = _Store()
    pending = PendingWindows.for_store(store, lambda: [])  # type: ignore[arg-type]
    pending.add(10, 0, b"a")
    assert pending.pop_closed(15) == [(10, 0, b"a")]
    pending.add(14, 4, b"b")  # another input's processor, behind at close time 4, creates it
    entry = struct.pack(">qq", 14, 4) + b"b"
    assert store.data[entry] == b""

    # a restart before it is emitted keeps it (the window store's scan alone would skip it)
    restored = PendingWindows.for_store(_Store(store.data), lambda: [(14, 4, b"b")])  # type: ignore[arg-type]
    assert restored.pop_closed(15) == [(14, 4, b"b")]
    assert restored.pop_closed(100) == []

    assert pending.pop_closed(15) == [(14, 4, b"b")]
    assert entry not in store.data and _close_time(store) == 15


def test_removed_windows_are_not_emitted() -> None:
    """A session merged into another is forgotten (SessionWindowAggregateProcessor)."""
    store = _Store()
    pending = PendingWindows.for_store(store, lambda: [])  # type: ignore[arg-type]
    pending.add(6, 0, b"a")
    pending.add(11, 0, b"a")
    pending.remove(6, 0, b"a")
    assert pending.pop_closed(20) == [(11, 0, b"a")]


def test_the_processors_of_a_task_share_one_instance_per_store() -> None:
    store = _Store()
    first = PendingWindows.for_store(store, lambda: [])  # type: ignore[arg-type]
    assert PendingWindows.for_store(store, lambda: [(1, 0, b"x")]) is first  # type: ignore[arg-type]
    assert PendingWindows.for_store(_Store(), lambda: []) is not first  # type: ignore[arg-type]


def test_every_window_created_behind_the_close_time_is_logged_also_in_one_burst() -> None:
    """Two windows of one due time created behind the emitted close time: both logged (the
    second joins a bucket that already exists), both restored, both emitted once."""
    store = _Store()
    pending = PendingWindows.for_store(store, lambda: [])  # type: ignore[arg-type]
    pending.add(10, 0, b"a")
    assert pending.pop_closed(15) == [(10, 0, b"a")]
    pending.add(14, 4, b"c")
    pending.add(14, 4, b"b")
    pending.add(14, 4, b"c")  # again: nothing new
    assert sorted(store.data) == sorted(
        [CLOSE_TIME_KEY, struct.pack(">qq", 14, 4) + b"b", struct.pack(">qq", 14, 4) + b"c"]
    )
    restored = PendingWindows.for_store(_Store(store.data), lambda: [])  # type: ignore[arg-type]
    assert restored.pop_closed(15) == [(14, 4, b"b"), (14, 4, b"c")]
    assert pending.pop_closed(15) == [(14, 4, b"b"), (14, 4, b"c")]
    assert sorted(store.data) == [CLOSE_TIME_KEY]


def test_a_burst_is_emitted_in_due_start_key_order_whatever_the_order_created() -> None:
    """The order Kafka's time-ordered store would scan: due time, window start, key bytes."""
    store = _Store()
    pending = PendingWindows.for_store(store, lambda: [])  # type: ignore[arg-type]
    for key in (b"k9", b"k10", b"a", b"k1"):
        pending.add(20, 10, key)
        pending.add(10, 0, key)
    pending.add(20, 5, b"z")  # another start with the same due (hopping windows' grace ...)
    assert pending.pop_closed(30) == [
        (10, 0, b"a"),
        (10, 0, b"k1"),
        (10, 0, b"k10"),
        (10, 0, b"k9"),
        (20, 5, b"z"),
        (20, 10, b"a"),
        (20, 10, b"k1"),
        (20, 10, b"k10"),
        (20, 10, b"k9"),
    ]
