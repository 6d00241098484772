"""A cached store's changelog records carry the time of the record that last wrote the entry.

Kafka's caching stores (``CachingKeyValueStore`` / ``CachingWindowStore`` /
``CachingSessionStore.putAndMaybeForward``) keep each dirty entry's record context
(``LRUCacheEntry``) and set it on the context before writing the entry to the change-logging
store at flush, so a change is stamped with that record's timestamp
(``ChangeLoggingKeyValueBytesStore.put``: ``recordContext().timestamp()``), or, for a
timestamped store, with the value's own timestamp (``ChangeLoggingTimestampedKeyValueBytesStore``
/ ``ChangeLoggingTimestampedWindowBytesStore``) -- never with the stream time at the flush.

Each topology gets the records ``a@100, b@500, a@200`` and one cache flush (a commit's first
step): ``a`` was last written at 200 while stream time is 500. One task, real caches, no
broker; the collector keeps what goes to the changelog topics. A timestamped key-value
store's records also carry the header that lets a versioned store restore from them
(state/changelog_format.py); no other store's do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from platform_streams import StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Materialized, SessionWindows, TimeWindows
from platform_streams.processor import Processor, Record, TaskId
from platform_streams.runtime.tasks.task import start_task
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.state.cache import RecordCache
from platform_streams.state.changelog_format import TIMESTAMPED_VALUE_MARK
from platform_streams.state.store_context import QuietSend
from platform_streams.testing.records import DriverRecord
from platform_streams.topology import compile_topology

S = String()
RECORDS = [(b"a", 100), (b"b", 500), (b"a", 200)]


class _Changelogs:
    """Keeps the changelog records the task sends: topic -> [(key bytes, timestamp)]. A
    flush sends all its records but the last without a report (``quiet_sender``), as the
    Kafka collector does once a changelog partition may: both ways are checked."""

    def __init__(self) -> None:
        self.logged: dict[str, list[tuple[bytes, int]]] = {}
        #: topic -> whether its records carry the timestamped-value marker
        self.marked: dict[str, set[bool]] = {}

    def send(self, topic: str, key: Any, value: Any, timestamp: int, headers: Any, *args: Any) -> None:
        if topic.endswith("-changelog") and value is not None:
            self.logged.setdefault(topic, []).append((key, timestamp))
            self.marked.setdefault(topic, set()).add(TIMESTAMPED_VALUE_MARK in (headers or ()))

    def quiet_sender(self, topic: str, partition: int) -> QuietSend:
        def produce(topic: str, value: Any, key: Any, partition: int, *rest: Any) -> None:
            self.send(topic, key, value, rest[2], rest[3])

        return QuietSend(produce, lambda records, complete: None)

    def partition_count(self, topic: str) -> int:
        return 1


def _changelog_times(
    builder: StreamsBuilder, tmp_path: Path, *, cached: bool = True, marked: bool = True
) -> dict[str, list[tuple[bytes, int]]]:
    """The changelog records of ``RECORDS`` (after a cache flush when ``cached``); each
    record carries the timestamped-value marker when ``marked`` (a timestamped key-value
    store's: state/changelog_format.py), none otherwise."""
    plan = compile_topology(builder.build())
    config = StreamsConfig(application_id="stamps", bootstrap_servers="x:1", state_dir=tmp_path)
    changelogs = _Changelogs()
    task = start_task(TaskId(0, 0), plan, tmp_path, {}, config, changelogs, lambda: 0, RecordCache())  # type: ignore[arg-type]
    task.initialize_processors()
    try:
        records = [DriverRecord("in", 0, i, key, b"v", ts, []) for i, (key, ts) in enumerate(RECORDS)]
        task.add_records(("in", 0), records)
        task.process(len(records))
        if cached:
            assert changelogs.logged == {}  # all in the cache until the commit
            task.flush_caches()
        assert all(marks == {marked} for marks in changelogs.marked.values())
        return changelogs.logged
    finally:
        task.close()


def _stream(builder: StreamsBuilder) -> Any:
    return builder.stream("in", Consumed(key_serde=S, value_serde=S))


def test_a_cached_count_logs_each_key_at_its_last_records_time(tmp_path: Path) -> None:
    """The DSL's timestamped key-value store (its one-loop flush, ``direct_flush_path``)."""
    builder = StreamsBuilder()
    _stream(builder).group_by_key().count(Materialized.as_("counts"))
    logged = _changelog_times(builder, tmp_path)
    assert sorted(logged["stamps-counts-changelog"]) == [(b"a", 200), (b"b", 500)]


def test_a_cached_windowed_count_logs_each_window_at_its_last_records_time(tmp_path: Path) -> None:
    """The DSL's timestamped window store (``CachingWindowStore``'s one-loop flush)."""
    builder = StreamsBuilder()
    _stream(builder).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(1000)).count(
        Materialized.as_("windows")
    )
    logged = _changelog_times(builder, tmp_path, marked=False)
    assert sorted(ts for _, ts in logged["stamps-windows-changelog"]) == [200, 500]


def test_a_cached_session_count_logs_each_session_at_its_last_records_time(tmp_path: Path) -> None:
    """A session store (no timestamp in its values): the record context kept with the entry."""
    builder = StreamsBuilder()
    _stream(builder).group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(1000)).count(
        Materialized.as_("sessions")
    )
    logged = _changelog_times(builder, tmp_path, marked=False)
    assert sorted(ts for _, ts in logged["stamps-sessions-changelog"]) == [200, 500]


class _Put(Processor):
    def init(self, context: Any) -> None:
        self.store = context.get_state_store("kv")

    def process(self, record: Record) -> None:
        self.store.put(record.key, record.value)


def test_a_cached_plain_store_logs_each_key_at_its_last_records_time(tmp_path: Path) -> None:
    """A processor's plain key-value store with caching (the layered flush, no listener)."""
    builder = StreamsBuilder()
    store = Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), S, S)
    builder.add_state_store(store.with_caching_enabled())
    _stream(builder).process(_Put, "kv")
    logged = _changelog_times(builder, tmp_path, marked=False)
    assert sorted(logged["stamps-kv-changelog"]) == [(b"a", 200), (b"b", 500)]


def test_an_uncached_windowed_count_logs_each_change_at_its_records_time(tmp_path: Path) -> None:
    """Without a cache each change is logged as it is made, stamped with its value's timestamp
    (``ChangeLoggingTimestampedWindowBytesStore``), not the stream time: the out-of-order
    ``a@200`` after ``b@500`` at 200."""
    builder = StreamsBuilder()
    windows = TimeWindows.of_size_with_no_grace(1000)
    _stream(builder).group_by_key().windowed_by(windows).count(
        Materialized.as_("plain").with_caching_disabled()
    )
    logged = _changelog_times(builder, tmp_path, cached=False, marked=False)
    assert [ts for _, ts in logged["stamps-plain-changelog"]] == [100, 500, 200]
