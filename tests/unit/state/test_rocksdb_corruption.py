"""Corruption RocksDB finds in use -- a data block whose checksum does not match -- is raised
as ``StoreCorruptedError`` (a ``TaskCorruptedError``) by reads, scans and the writes after a
compaction met it, and the state manager deletes a corrupt store's files at its close.

A corrupt footer or MANIFEST is found at open instead (test_state_rocksdb.py,
``test_corrupt_database_is_wiped_and_reported_empty``). The worker's side of it (the task
closed dirty and restored) is tests/integration/test_store_corruption.py.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from platform_streams import StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, Grouped, Materialized
from platform_streams.errors import IllegalStateError, StreamsError, TaskCorruptedError
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.restore.standby import StandbyTask, StandbyUpdater
from platform_streams.runtime.tasks.task_manager import TaskManager
from platform_streams.runtime.workers.worker_rebalance import TaskRebalancing
from platform_streams.serde import Bytes, Long, String
from platform_streams.state import ProcessorStateManager, Stores
from platform_streams.state.backend import StoreCorruptedError, store_directory
from platform_streams.state.rocksdb import RocksDBBackend
from platform_streams.testing.records import DriverRecord
from platform_streams.topology.compiler import compile_topology
from tests.support.tasks import build_tasks

from .conftest import FakeContext

KEYS = 20_000
TASK = TaskId(0, 1)


def _key(i: int) -> bytes:
    return f"key{i:06d}".encode()


def _written(path: Path) -> None:
    """A store of ``KEYS`` random 50-byte values flushed to one SST file of many 16 KB blocks."""
    backend = RocksDBBackend("store")
    backend.open(path)
    for i in range(KEYS):
        backend.default.put(_key(i), os.urandom(50))
    backend.flush()
    backend.close()


def _corrupt_data_block(path: Path) -> None:
    """Flip 64 bytes a quarter into the SST file: a data block (the index, filter, properties
    and footer are at its end), so the store still opens."""
    [sst] = path.glob("*.sst")
    size = sst.stat().st_size
    with sst.open("r+b") as fh:
        fh.seek(size // 4)
        data = fh.read(64)
        fh.seek(size // 4)
        fh.write(bytes(b ^ 0xFF for b in data))


@pytest.fixture
def corrupt(tmp_path: Path) -> RocksDBBackend:
    path = tmp_path / "db"
    _written(path)
    _corrupt_data_block(path)
    backend = RocksDBBackend("store")
    backend.open(path)
    assert not backend.started_empty  # a corrupt data block does not stop RocksDB opening
    return backend


def test_a_read_of_a_corrupt_block_raises_store_corrupted(
    corrupt: RocksDBBackend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    errors = []
    for i in range(KEYS):
        try:
            corrupt.default.get(_key(i))
        except StoreCorruptedError as exc:
            errors.append(exc)
    assert errors, "no read met the corrupt block"
    exc = errors[0]
    assert isinstance(exc, TaskCorruptedError)
    assert exc.store == "store" and exc.path == tmp_path / "db"
    assert "block checksum mismatch" in exc.reason
    with caplog.at_level(logging.WARNING):
        corrupt.close()  # RocksDB repeats the corruption at the close: not worth a warning
    assert not caplog.records


@pytest.mark.parametrize(
    ("lower", "upper", "reverse"),
    [(None, None, False), (_key(10), None, False), (None, None, True), (None, _key(KEYS - 10), True)],
)
def test_a_scan_stopped_by_a_corrupt_block_raises_instead_of_ending_early(
    corrupt: RocksDBBackend, lower: bytes | None, upper: bytes | None, reverse: bool
) -> None:
    seen = 0
    with pytest.raises(StoreCorruptedError, match="block checksum mismatch"):
        for _ in corrupt.default.items(lower, upper, reverse):
            seen += 1
    assert 0 < seen < KEYS  # rocksdict's items() had simply stopped here
    corrupt.close()


def test_scans_of_intact_ranges_end_normally(corrupt: RocksDBBackend, tmp_path: Path) -> None:
    # before the corrupt block: ends at the bound; the same forwards and backwards
    assert len(list(corrupt.default.items(_key(0), _key(100)))) == 100
    assert len(list(corrupt.default.items(_key(0), _key(100), reverse=True))) == 100
    corrupt.close()
    intact = RocksDBBackend("intact")
    _written(tmp_path / "intact")
    intact.open(tmp_path / "intact")
    try:  # to the very end of the column, both ways, and from a bound past the last key
        assert len(list(intact.default.items())) == KEYS
        assert len(list(intact.default.items(reverse=True))) == KEYS
        assert list(intact.default.items(b"zzz")) == []
        assert list(intact.default.items(None, b"a", reverse=True)) == []
    finally:
        intact.close()


def test_a_compaction_meeting_a_corrupt_block_fails_the_next_write(corrupt: RocksDBBackend) -> None:
    """Background compactions read every block of their input files; RocksDB then refuses
    every write with the corruption (its background error)."""
    with pytest.raises(StoreCorruptedError, match="block checksum mismatch"):
        for _ in range(40):  # each flush adds an L0 file; the fourth triggers a compaction
            for i in range(0, KEYS, 7):
                corrupt.default.put(_key(i), b"x")
            corrupt.flush()
            time.sleep(0.1)
    corrupt.close()


def _manager(task_dir: Path, *logged: bool) -> ProcessorStateManager:
    """A task with key-value stores ``kv0``, ``kv1``... (changelog or not) holding one entry each."""
    manager = ProcessorStateManager(TASK, task_dir, eos=False)
    context = FakeContext(task_dir, task_id=TASK, manager=manager)
    for n, with_log in enumerate(logged):
        supplier = Stores.persistent_key_value_store(f"kv{n}")
        builder = Stores.key_value_store_builder(supplier, String(), Long())
        if not with_log:
            builder.with_logging_disabled()
        store = builder.build()
        store.init(context, store)
        store.put("a", 1)
    manager.flush()
    return manager


def test_closing_deletes_only_the_corrupt_store_and_only_a_logged_one(tmp_path: Path) -> None:
    task_dir = tmp_path / "0_1"
    manager = _manager(task_dir, True, False)
    kv0, kv1 = store_directory(task_dir, "kv0"), store_directory(task_dir, "kv1")
    assert manager.has_store_at("kv0", kv0) and not manager.has_store_at("kv0", kv1)
    assert not manager.has_store_at("other", store_directory(task_dir, "other"))
    with pytest.raises(IllegalStateError, match="no changelog"):
        manager.mark_corrupted("kv1")  # its files are its only copy
    manager.mark_corrupted("kv0")
    manager.close()
    assert not kv0.exists()
    assert (kv1 / "CURRENT").exists()  # the unlogged store of the same task keeps its files


def _worker(tmp_path: Path, *logged: bool) -> SimpleNamespace:
    """What ``TaskManager.mark_corrupted_store`` reads of a task manager: its name and tasks."""
    manager = _manager(tmp_path / str(TASK), *logged)
    return SimpleNamespace(name="w-1", tasks={TASK: SimpleNamespace(state_manager=manager)})


def test_the_worker_marks_the_owning_tasks_logged_store(tmp_path: Path) -> None:
    worker = _worker(tmp_path, True)
    path = store_directory(tmp_path / str(TASK), "kv0")
    exc = StoreCorruptedError("kv0", path, "Corruption: block checksum mismatch")
    assert TaskManager.mark_corrupted_store(worker, exc) == TASK  # type: ignore[arg-type]
    worker.tasks[TASK].state_manager.close()
    assert not path.exists()


def test_a_corrupt_store_without_changelog_fails_clearly_and_keeps_its_files(tmp_path: Path) -> None:
    worker = _worker(tmp_path, False)
    path = store_directory(tmp_path / str(TASK), "kv0")
    exc = StoreCorruptedError("kv0", path, "Corruption: block checksum mismatch")
    with pytest.raises(StreamsError, match=r"kv0 of task 0_1 is corrupt .* no changelog to restore it from"):
        TaskManager.mark_corrupted_store(worker, exc)  # type: ignore[arg-type]
    other = StoreCorruptedError("kv0", tmp_path / "elsewhere", "Corruption: bad block")
    with pytest.raises(StreamsError, match="belongs to no active task"):
        TaskManager.mark_corrupted_store(worker, other)  # type: ignore[arg-type]
    worker.tasks[TASK].state_manager.close()
    assert (path / "CURRENT").exists()


def test_a_standby_tasks_corrupt_store_is_dropped_for_a_reread(tmp_path: Path) -> None:
    """The standby updater closes the owning standby task with the store's files deleted;
    the next iteration reopens it empty, reading the changelog from its beginning."""
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count(materialized=Materialized.as_("counts"))
    config = StreamsConfig(application_id="app", bootstrap_servers="unused:9092", state_dir=tmp_path)
    plan = compile_topology(builder.build())
    updater = StandbyUpdater(plan, config, tmp_path / "app")
    task_id = TaskId(0, 0)
    task = StandbyTask(task_id, plan, config, tmp_path / "app" / str(task_id))
    updater.tasks[task_id] = task
    path = store_directory(tmp_path / "app" / str(task_id), "counts")
    assert (path / "CURRENT").exists()
    assert not updater._drop_corrupted(StoreCorruptedError("counts", tmp_path / "elsewhere", "Corruption"))
    assert updater.tasks == {task_id: task}
    assert updater._drop_corrupted(StoreCorruptedError("counts", path, "Corruption: block checksum mismatch"))
    assert updater.tasks == {} and not path.exists()
    again = StandbyTask(task_id, plan, config, tmp_path / "app" / str(task_id))
    try:
        # from the beginning: offset 0 of a key-value store's changelog (never the log start)
        assert set(again.start_offsets.values()) == {0}
    finally:
        again.close(clean=False)


class _Worker(TaskRebalancing):
    """The recovery half of a worker over one task of logged stores ``kv0``, ``kv1``: closing
    closes the task's state manager, re-creating opens a new one and raises the next of
    ``on_rebuild`` (what a restore may meet)."""

    def __init__(self, task_dir: Path, on_rebuild: list[StoreCorruptedError]) -> None:
        self.name = "w-1"
        self.corruptions = 0
        self.task_dir = task_dir
        self.on_rebuild = on_rebuild
        self.rebuilds: list[str] = []
        self.task_manager = TaskManager.__new__(TaskManager)
        self.task_manager.name = self.name
        self.task_manager.tasks = {TASK: SimpleNamespace(state_manager=_manager(task_dir, True, True))}  # type: ignore[dict-item]

    @property
    def tasks(self) -> Any:
        return self.task_manager.tasks

    def _abort_and_close_tasks(self) -> None:
        for task in self.tasks.values():
            task.state_manager.close()
        self.tasks.clear()

    def _recreate_tasks(self, why: str) -> None:
        self.rebuilds.append(why)
        self.task_manager.tasks = {TASK: SimpleNamespace(state_manager=_manager(self.task_dir, True, True))}  # type: ignore[dict-item]
        if self.on_rebuild:
            raise self.on_rebuild.pop(0)


def _corrupted(task_dir: Path, store: str) -> StoreCorruptedError:
    return StoreCorruptedError(store, store_directory(task_dir, store), "Corruption: block checksum mismatch")


def test_a_store_found_corrupt_while_rebuilding_is_rebuilt_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    task_dir = tmp_path / str(TASK)
    worker = _Worker(task_dir, [_corrupted(task_dir, "kv1")])
    with caplog.at_level(logging.WARNING):
        worker._on_task_corrupted(_corrupted(task_dir, "kv0"))
    assert worker.corruptions == 2
    assert worker.rebuilds == ["store kv0 of task 0_1 was corrupt", "store kv1 of task 0_1 was corrupt"]
    worker_warnings = [r for r in caplog.records if r.name.endswith("worker_rebalance")]
    assert [r.getMessage().split(" is corrupt")[0] for r in worker_warnings] == [
        "w-1: store kv0 of task 0_1",
        "w-1: store kv1 of task 0_1",
    ]
    worker._abort_and_close_tasks()


def test_a_store_corrupt_again_right_after_its_rebuild_fails_the_worker(tmp_path: Path) -> None:
    task_dir = tmp_path / str(TASK)
    worker = _Worker(task_dir, [_corrupted(task_dir, "kv0")])
    with pytest.raises(StreamsError, match="corrupt again right after its rebuild"):
        worker._on_task_corrupted(_corrupted(task_dir, "kv0"))
    worker._abort_and_close_tasks()


@pytest.mark.parametrize("fusion", [True, False])
def test_an_aggregation_reading_a_corrupt_block_raises_store_corrupted(tmp_path: Path, fusion: bool) -> None:
    """The fused source reads the store of a cached aggregation in line on a cache miss
    (aggregate_fragment.py): its corruption must reach the worker as ``StoreCorruptedError``
    too, not as a processing error (which the processing exception handler would take)."""
    builder = StreamsBuilder()
    (
        builder.stream("in", Consumed(key_serde=Bytes(), value_serde=String()))
        .group_by_key(Grouped(key_serde=Bytes(), value_serde=String()))
        .count(materialized=Materialized.as_("counts"))
    )
    records = [DriverRecord("in", 0, i, _key(i), b"x", 1_000 + i) for i in range(KEYS)]
    (task,), _ = build_tasks(builder.build(), tmp_path, fusion=fusion)
    assert bool(task.graph.batches) is fusion
    task.add_records(("in", 0), records)
    assert task.process(KEYS) == KEYS
    task.flush_caches()
    task.flush_stores()
    task.state_manager.checkpoint({("tasks-counts-changelog", 0): KEYS - 1}, enforce=True)  # trusted
    task.close()
    [sst] = (tmp_path / "0" / "rocksdb" / "counts").glob("*.sst")
    size = sst.stat().st_size
    with sst.open("r+b") as fh:  # a data block: the filter, index and footer are at the end
        fh.seek(size // 5)
        data = fh.read(64)
        fh.seek(size // 5)
        fh.write(bytes(b ^ 0xFF for b in data))
    (task,), _ = build_tasks(builder.build(), tmp_path, fusion=fusion)
    again = [DriverRecord("in", 0, KEYS + i, _key(i), b"x", 90_000) for i in range(KEYS)]
    task.add_records(("in", 0), again)
    with pytest.raises(StoreCorruptedError, match="block checksum mismatch"):
        task.process(KEYS)
    task.close()
