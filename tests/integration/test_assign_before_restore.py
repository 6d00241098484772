"""A worker assigns its input partitions before it builds and restores its tasks' stores.

librdkafka then looks the input up and fetches it while the stores are opened and restored,
instead of only after: a fresh application's first records arrived ~0.2 s after its tasks
were ready (bench/RESULTS.md). A partition with a committed offset is assigned
there (the offset the restore's changelog filter used); one without at the reset policy's
logical offset, ``OFFSET_BEGINNING`` for ``earliest``, instead of ``OFFSET_INVALID`` (which
made librdkafka fetch the committed offsets once more). Kafka Streams does the same in its
own way: ``StreamThread`` assigns (and pauses) the partitions of restoring tasks while
``StoreChangelogReader`` restores them (streams/src/main/java/org/apache/kafka/streams/
processor/internals/StreamThread.java, ``TaskManager.handleAssignment``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from platform_streams.kafka import OFFSET_BEGINNING, KafkaAdmin
from platform_streams.runtime.restore.task_state import TaskStateLifecycle
from platform_streams.runtime.workers.worker_rebalance import TaskRebalancing
from platform_streams.state import restore_read_ahead
from tests.integration.support_apps import app_config, count_app, new_app_id, running_app, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

PARTITIONS = 2
RECORDS = 20


class _RecordingConsumer:
    """The worker's consumer, with its ``assign`` calls written to ``events``."""

    def __init__(self, consumer: Any, events: list[Any]) -> None:
        self._consumer = consumer
        self._events = events

    def assign(self, partitions: list[Any]) -> None:
        self._events.append(("assign", sorted((tp.topic, tp.partition, tp.offset) for tp in partitions)))
        self._consumer.assign(partitions)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    seen: list[Any] = []
    start_tasks = TaskRebalancing._start_tasks
    restore = TaskStateLifecycle.restore

    def recording_start(self: Any, consumer: Any, partitions: list[Any], *, rebalance: bool) -> None:
        start_tasks(self, _RecordingConsumer(consumer, seen), partitions, rebalance=rebalance)

    def recording_restore(self: Any, tasks: Any, committed: Any) -> None:
        seen.append(("restore", None))
        restore(self, tasks, committed)

    monkeypatch.setattr(TaskRebalancing, "_start_tasks", recording_start)
    monkeypatch.setattr(TaskStateLifecycle, "restore", recording_restore)
    yield seen


def _assigned_then_restored(events: list[Any], source: str) -> list[tuple[str, int, int]]:
    """The input positions of the last assignment, checked to come before its restore."""
    kinds = [kind for kind, _ in events]
    last_restore = len(kinds) - 1 - kinds[::-1].index("restore")
    assigns = [i for i, kind in enumerate(kinds) if kind == "assign" and i < last_restore and events[i][1]]
    assert assigns, f"no assignment before the restore: {events}"
    positions = [p for p in events[assigns[-1]][1] if p[0] == source]
    assert len(positions) == PARTITIONS, positions
    return positions


def _count_runs(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> tuple[str, Callable[[int], int]]:
    """A source topic with RECORDS records over five keys, and a ``run(records)`` that runs
    one client of a count application (always the same id and state directory) until it has
    processed ``records``, then closes it; returns the records its restore replayed."""
    source, sink = new_topic(admin, PARTITIONS, "abr-in"), new_topic(admin, PARTITIONS, "abr-out")
    produce(bootstrap_servers, source, [(f"k{i % 5}", f"v{i}") for i in range(RECORDS)])
    app_id = new_app_id("abr")

    def run(records: int) -> int:
        config = app_config(bootstrap_servers, tmp_path / "state", app_id)
        with running_app(count_app(source, sink).build(), config) as streams:
            wait_until(lambda: sum(w.processed_total for w in streams.workers) >= records, 60, "processing")
            return sum(w.state_lifecycle.total_restored for w in streams.workers)

    return source, run


def test_input_is_assigned_before_the_restore_at_committed_or_reset_offsets(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, events: list[Any]
) -> None:
    source, run = _count_runs(bootstrap_servers, admin, tmp_path)
    run(RECORDS)  # a fresh application: nothing committed
    first = _assigned_then_restored(events, source)
    assert [offset for _, _, offset in first] == [OFFSET_BEGINNING] * PARTITIONS

    events.clear()
    run(0)  # the second run finds everything committed and processes nothing
    again = _assigned_then_restored(events, source)
    assert sum(offset for _, _, offset in again) == RECORDS  # each partition at its log end


def test_a_fresh_application_opens_no_reader_for_its_empty_changelogs(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh application's changelogs are empty: one ListOffsets request finds that, and
    no partition reader is opened for them (Kafka Streams' end offset 0, ``hasRestoredToEnd``
    in StoreChangelogReader.java). Once the changelog holds the counts, a start without local
    state reads it again, from the beginning, and restores them."""
    readers: list[tuple[str, int, int]] = []

    class CountedReader(restore_read_ahead.PartitionReader):  # type: ignore[misc, name-defined]
        def __init__(self, conf: Any, topic: str, partition: int, start: int, **kwargs: Any) -> None:
            readers.append((topic, partition, start))
            super().__init__(conf, topic, partition, start, **kwargs)

    monkeypatch.setattr(restore_read_ahead, "PartitionReader", CountedReader)
    _, run = _count_runs(bootstrap_servers, admin, tmp_path)
    assert run(RECORDS) == 0
    assert readers == []
    shutil.rmtree(tmp_path / "state")  # no checkpoint: the next start restores from the beginning
    assert run(0) >= 5  # the five keys' counts, at least once each
    assert sorted(p for _, p, _ in readers) == list(range(PARTITIONS))
