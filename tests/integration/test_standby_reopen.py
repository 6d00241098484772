"""A standby task reopened on a changelog partition it had held paused catches up again.

Under exactly-once a standby task applies a changelog
record only once the owner has committed the input it was written for (the ``__ps_src``
header), and :class:`~platform_streams.runtime.restore.standby.StandbyUpdater` pauses the partition
while it holds records beyond the committed offsets. librdkafka keeps that pause through
``incremental_unassign`` and ``incremental_assign``, so a standby task closed while its
partition was paused (the task was claimed by a worker, or placement moved it) and opened
again later on the same partition never read that partition again: the standby stayed
behind forever. Opening a task now resumes its partitions.

The test drives a :class:`StandbyUpdater` directly, with a one-store application and
changelog records carrying the headers an active task writes (one input partition: the
input offset as a decimal number).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from platform_streams import Topology
from platform_streams.kafka import KafkaAdmin, TopicSpec, log_end_offsets
from platform_streams.processor import Processor, Record
from platform_streams.processor.source_position import SOURCE_HEADER
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.restore.standby import StandbyUpdater
from platform_streams.runtime.tasks.task import store_changelogs
from platform_streams.serde import String
from platform_streams.state import Stores
from platform_streams.topology.compiler import compile_topology
from tests.integration.support_apps import app_config, new_app_id, wait_until
from tests.support.kafka import new_topic, produce

pytestmark = [pytest.mark.broker, pytest.mark.apache_kafka]

STORE = "latest"
TASK = TaskId(0, 0)


class KeepLatest(Processor):
    """Keep the latest value per key (the store the standby mirrors)."""

    def process(self, record: Record) -> None:
        self.context.get_state_store(STORE).put(record.key, record.value)


def _topology(source: str) -> Topology:
    topology = Topology()
    topology.add_source("src", source, key_serde=String(), value_serde=String())
    topology.add_processor("keep", KeepLatest, "src")
    builder = Stores.key_value_store_builder(Stores.persistent_key_value_store(STORE), String(), String())
    topology.add_state_store(builder, "keep")
    return topology


def _write_changelog(bootstrap: str, changelog: str, first_input_offset: int, count: int) -> None:
    """What an active task writes while it processes input offsets ``first..first+count-1``:
    one update of key ``k`` per input record, each headed with the offset it was written for."""
    for offset in range(first_input_offset, first_input_offset + count):
        produce(
            bootstrap,
            changelog,
            [(b"k", f"v{offset}".encode(), 0)],
            headers=[(SOURCE_HEADER, str(offset).encode())],
        )


def _held(updater: StandbyUpdater) -> bool:
    with updater.reading():
        task = updater.tasks.get(TASK)
        return task is not None and bool(task.held)


def _position(updater: StandbyUpdater, changelog: str) -> int | None:
    return updater.positions().get(TASK, {}).get((changelog, 0))


def _value(updater: StandbyUpdater) -> Any:
    with updater.reading():
        task = updater.tasks.get(TASK)
        store = task.store(STORE) if task is not None else None
        return store.get("k") if store is not None else None


def test_a_standby_reopened_on_a_partition_it_held_paused_catches_up(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    source = new_topic(admin, 1, "standby-reopen-in")
    app_id = new_app_id("standby-reopen")
    config = app_config(
        bootstrap_servers, tmp_path, app_id, processing_guarantee="exactly_once_v2", num_standby_replicas=1
    )
    plan = compile_topology(_topology(source))
    changelog = store_changelogs(plan, plan.subtopologies[0], app_id)[STORE]
    admin.create_topics([TopicSpec(changelog, 1)])

    # the owner has committed input offsets 0..1; it wrote for 0..4 (2..4 not committed yet)
    admin.alter_committed_offsets(app_id, {(source, 0): 2})
    _write_changelog(bootstrap_servers, changelog, 0, 5)

    updater = StandbyUpdater(plan, config, tmp_path / app_id)
    updater.start()
    try:
        updater.set_desired([TASK])
        wait_until(lambda: _position(updater, changelog) == 1, 30, "the committed prefix is applied")
        wait_until(lambda: _held(updater), 30, "the uncommitted records are held (partition paused)")
        assert _value(updater) == "v1"

        # the task goes away while its partition is paused (a worker claims it) and comes back
        updater.claim([TASK])
        assert updater.standby_ids() == set()
        updater.unclaim([TASK])
        wait_until(lambda: TASK in updater.standby_ids(), 30, "the standby task is opened again")

        # the owner commits everything and goes on writing
        admin.alter_committed_offsets(app_id, {(source, 0): 10})
        _write_changelog(bootstrap_servers, changelog, 5, 5)
        end = log_end_offsets({"bootstrap.servers": bootstrap_servers}, [(changelog, 0)])[(changelog, 0)]
        assert end == 10
        wait_until(
            lambda: _position(updater, changelog) == end - 1,
            30,
            "the reopened standby read its changelog to the end",
        )
        assert _value(updater) == "v9"
        assert not _held(updater)
    finally:
        updater.close()


def _keys(updater: StandbyUpdater) -> dict[str, str] | None:
    with updater.reading():
        task = updater.tasks.get(TASK)
        store = task.store(STORE) if task is not None else None
        return dict(store.all()) if store is not None else None


def test_a_standby_below_a_truncated_changelog_start_is_reseeded_not_skipped_ahead(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path
) -> None:
    """A standby whose position lies below the changelog's start (records deleted below a
    snapshot while its client ran without the truncation setting) is Kafka Streams' corrupted
    standby: wiped and re-seeded from the snapshot, never moved silently to the log start
    (``auto.offset.reset=earliest`` left it without the keys written in between)."""
    if not admin.supports("delete_records"):
        pytest.skip("the broker has no DeleteRecords: its changelogs cannot be truncated")
    from platform_streams.ops.spark.snapshots import SnapshotWriter, commit_snapshots
    from platform_streams.state.snapshots import open_snapshot_store

    source = new_topic(admin, 1, "standby-trunc-in")
    app_id = new_app_id("standby-trunc")
    location = tmp_path / "snapshots"
    config = app_config(bootstrap_servers, tmp_path, app_id, state_snapshot_location=str(location))
    plan = compile_topology(_topology(source))
    changelog = store_changelogs(plan, plan.subtopologies[0], app_id)[STORE]
    policy = {"cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "-1"}
    admin.create_topics([TopicSpec(changelog, 1, config=policy)])
    admin.alter_committed_offsets(app_id, {(source, 0): 100})
    written = [(f"k{i}", f"v{i}") for i in range(10)]
    produce(bootstrap_servers, changelog, [(k, v, 0) for k, v in written[:5]])

    updater = StandbyUpdater(plan, config, tmp_path / app_id)
    updater.start()
    try:  # the standby holds offsets 0-4, then its client stops (a clean checkpoint at 4)
        updater.set_desired([TASK])
        wait_until(lambda: _position(updater, changelog) == 4, 30, "the standby read offsets 0-4")
    finally:
        updater.close()

    # meanwhile: offsets 5-9 are written, a snapshot covers 0-7, the log is truncated below 8
    produce(bootstrap_servers, changelog, [(k, v, 0) for k, v in written[5:]])
    target = open_snapshot_store(str(location))
    rows = sorted(((0, k.encode()), (i, v.encode())) for i, (k, v) in enumerate(written[:8]))
    commit_snapshots(target, SnapshotWriter(target, app_id, STORE, changelog)(iter(rows)))
    admin.delete_records({(changelog, 0): 8})

    updater = StandbyUpdater(plan, config, tmp_path / app_id)
    updater.start()
    try:
        updater.set_desired([TASK])
        wait_until(lambda: _position(updater, changelog) == 9, 30, "the standby reached the log end")
        assert _keys(updater) == dict(written)
    finally:
        updater.close()


def test_a_standby_opening_from_a_snapshot_does_not_hold_the_updater_still(
    bootstrap_servers: str, admin: KafkaAdmin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Downloading and ingesting a snapshot (seconds for a big store) happens without the
    updater's lock: queries of the other standbys (``reading()``), ``positions()`` and a
    worker's ``claim`` are not held up for that long; a task claimed while it opens is handed
    over (closed) as soon as it is open."""
    import threading

    from platform_streams.runtime.restore import standby as standby_module
    source = new_topic(admin, 1, "standby-open-in")
    app_id = new_app_id("standby-open")
    config = app_config(bootstrap_servers, tmp_path, app_id, state_snapshot_location=str(tmp_path / "snaps"),
                        state_snapshot_truncate_changelogs=True)  # fmt: skip
    plan = compile_topology(_topology(source))
    admin.create_topics([TopicSpec(store_changelogs(plan, plan.subtopologies[0], app_id)[STORE], 1)])
    downloading, release = threading.Event(), threading.Event()

    class SlowRestorer(standby_module.SnapshotRestorer):
        def restore(self, manager: Any) -> Any:  # a big snapshot being downloaded
            downloading.set()
            release.wait(30)
            return super().restore(manager)

    monkeypatch.setattr(standby_module, "SnapshotRestorer", SlowRestorer)
    updater = StandbyUpdater(plan, config, tmp_path / app_id)
    updater.start()
    try:
        updater.set_desired([TASK])
        assert downloading.wait(30)
        answered = threading.Event()
        threading.Thread(target=lambda: (updater.positions(), answered.set()), daemon=True).start()
        assert answered.wait(5), "positions() waited for the snapshot download"
        claimed = threading.Event()
        threading.Thread(target=lambda: (updater.claim([TASK]), claimed.set()), daemon=True).start()
        assert not claimed.wait(0.5)  # the claim waits for the task being opened ...
        release.set()
        assert claimed.wait(30)  # ... and gets it closed once open
        assert updater.standby_ids() == set()
    finally:
        release.set()
        updater.close()
