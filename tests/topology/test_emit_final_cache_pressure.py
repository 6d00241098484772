"""An emit-final time-window aggregation under cache pressure writes each window once.

Issue 17 (session thirteen): an emit-final aggregation marks the windows it emitted as final
in the record cache (``NamedCache.mark_final``), and an overflowing cache evicts those
first. Kafka Streams' LRU-only eviction of a dirty eldest entry flushes every dirty entry,
the open windows too, so each open window reached the changelog again later: with many keys
and a cache holding a few windows' worth of entries, most windows were written twice. The
results are the same either way; only the changelog's intermediate writes differ, which
Kafka's cache leaves to its timing. Below the budget nothing changes (tests/kafka's
KStreamWindowAggregateTest translations, testJoin in particular).

One task over real RocksDB, with a small shared record cache and no commit while the
records are processed, as a worker between two commits.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from platform_streams import StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, EmitStrategy, Materialized, Produced, TimeWindows
from platform_streams.processor import TaskId
from platform_streams.runtime.tasks.task import start_task
from platform_streams.serde import Long, String
from platform_streams.state.cache import ENTRY_OVERHEAD_BYTES, RecordCache
from platform_streams.state.timestamped_window_store import DslWindowStore
from platform_streams.testing.records import DriverRecord
from platform_streams.topology import compile_topology

S, L = String(), Long()
KEYS = 20
WINDOW_MS = 100
RECORDS = 1000  # ten windows of 100 records, 5 per key


class Collector:
    """Keeps what the task sends: (topic, key bytes, value bytes)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any, Any]] = []

    def send(self, topic: str, key: Any, value: Any, *args: Any) -> None:
        self.sent.append((topic, key, value))

    def partition_count(self, topic: str) -> int:
        return 1


def _final_counts(builder: StreamsBuilder, topic: str) -> Any:
    """An emit-final count per key and 100 ms window of ``topic`` (the store ``counts``)."""
    return (
        builder.stream(topic, Consumed(key_serde=S, value_serde=S))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(materialized=Materialized.as_("counts"))
    )


def _run(tmp_path: Path) -> tuple[Collector, RecordCache]:
    builder = StreamsBuilder()
    (
        _final_counts(builder, "in")
        .to_stream()
        .map(lambda windowed, count: (f"{windowed.key}@{windowed.window.start_ms}", count))
        .to("out", Produced(key_serde=S, value_serde=L))
    )
    plan = compile_topology(builder.build())
    config = StreamsConfig(application_id="pressure", bootstrap_servers="x:1", state_dir=tmp_path)
    collector = Collector()
    # room for the 20 open windows and about ten closed ones
    cache = RecordCache(max_bytes=30 * (ENTRY_OVERHEAD_BYTES + 40))
    task = start_task(TaskId(0, 0), plan, tmp_path, {}, config, collector, lambda: 0, cache)  # type: ignore[arg-type]
    task.initialize_processors()
    records = [DriverRecord("in", 0, i, S.serialize(f"k{i % KEYS:02d}"), b"v", i) for i in range(RECORDS)]
    task.add_records(("in", 0), records)
    while task.process(100):
        pass
    task.close()
    return collector, cache


def _changelog_writes(collector: Collector) -> Counter[bytes]:
    return Counter(key for topic, key, _ in collector.sent if topic == "pressure-counts-changelog")


def test_each_closed_window_reaches_the_changelog_once(tmp_path: Path) -> None:
    collector, cache = _run(tmp_path)
    outputs = {S.deserialize(k): L.deserialize(v) for topic, k, v in collector.sent if topic == "out"}
    # the nine windows stream time closed, every key's count right
    assert outputs == {f"k{k:02d}@{w * WINDOW_MS}": 5 for k in range(KEYS) for w in range(9)}
    assert cache.evictions > 0  # the cache was under pressure
    writes = _changelog_writes(collector)
    # every window reached the changelog once: the closed ones when they left the cache,
    # the open ones (the tenth window) at the close's flush
    assert len(writes) == KEYS * 10 and set(writes.values()) == {1}


def test_without_the_marks_lru_eviction_writes_open_windows_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The contrast: Kafka's eviction alone (the marks switched off) gives the same outputs
    and writes windows more than once, which is what the marks save."""
    monkeypatch.setattr(DslWindowStore, "closed_window_marker", lambda self: None)
    collector, _ = _run(tmp_path)
    outputs = {S.deserialize(k): L.deserialize(v) for topic, k, v in collector.sent if topic == "out"}
    assert outputs == {f"k{k:02d}@{w * WINDOW_MS}": 5 for k in range(KEYS) for w in range(9)}
    writes = _changelog_writes(collector)
    assert max(writes.values()) > 1


def test_a_cogroup_does_not_mark_its_windows(tmp_path: Path) -> None:
    """A windowed cogroup's processors share one store, and one may still update a window
    another closed (its stream time lags): none of them marks windows final."""
    builder = StreamsBuilder()
    grouped = [
        builder.stream(topic, Consumed(key_serde=S, value_serde=S)).group_by_key() for topic in ("a", "b")
    ]
    (
        grouped[0]
        .cogroup(lambda key, value, agg: agg + 1)
        .cogroup(grouped[1], lambda key, value, agg: agg + 10)
        .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS))
        .emit_strategy(EmitStrategy.on_window_close())
        .aggregate(lambda: 0, materialized=Materialized.as_("sums").with_value_serde(L))
    )
    single = StreamsBuilder()
    _final_counts(single, "a")
    config = StreamsConfig(application_id="marks", bootstrap_servers="x:1", state_dir=tmp_path)
    marks = {}
    for name, topology in (("cogroup", builder.build()), ("single", single.build())):
        plan = compile_topology(topology)
        task = start_task(
            TaskId(0, 0), plan, tmp_path / name, {}, config, Collector(), lambda: 0, RecordCache()
        )  # type: ignore[arg-type]
        task.initialize_processors()
        aggregates = [p for n, p in task.graph.processors.items() if "AGGREGATE" in n]
        marks[name] = [getattr(p, "_mark_final", None) is not None for p in aggregates]
        task.close()
    assert marks == {"cogroup": [False, False], "single": [True]}
