"""``ProcessorStateManager``: checkpoints, the trust rules for local data, restore bookkeeping."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from platform_streams.errors import IllegalStateError
from platform_streams.processor.task_id import TaskId
from platform_streams.serde import Long, String
from platform_streams.state import (
    FROM_BEGINNING,
    ChangelogPartition,
    OffsetCheckpoint,
    ProcessorStateManager,
    Stores,
)

from .conftest import FakeContext

TASK = TaskId(0, 2)
TOPIC = "app-kv-changelog"
L = Long()


def _start(
    task_dir: Path, *, eos: bool = False, persistent: bool = True, logging_on: bool = True
) -> tuple[ProcessorStateManager, Any]:
    manager = ProcessorStateManager(TASK, task_dir, eos=eos)
    context = FakeContext(task_dir, task_id=TASK, manager=manager)
    supplier = (
        Stores.persistent_key_value_store("kv") if persistent else Stores.in_memory_key_value_store("kv")
    )
    builder = Stores.key_value_store_builder(supplier, String(), L)
    if not logging_on:
        builder.with_logging_disabled()
    store = builder.build()
    store.init(context, store)
    return manager, store


def test_first_run_restores_from_the_beginning(tmp_path: Path) -> None:
    manager, _ = _start(tmp_path / "0_2")
    assert manager.store_names == ["kv"]
    assert manager.changelog_offsets_to_restore() == [ChangelogPartition("kv", TOPIC, 2, FROM_BEGINNING)]
    manager.close()


def test_restore_then_checkpoint_then_resume_after_offset(tmp_path: Path) -> None:
    task_dir = tmp_path / "0_2"
    manager, store = _start(task_dir)
    manager.restore("kv", [(b"a", L.serialize(1)), (b"b", L.serialize(2))], last_offset=10)
    manager.restore("kv", [], last_offset=12)  # filtered records still move the offset
    assert store.get("a") == 1
    assert manager.restored_count("kv") == 2
    store.put("c", 3)
    manager.flush()
    manager.checkpoint({(TOPIC, 2): 20, ("other-topic", 2): 5})
    assert OffsetCheckpoint(task_dir / ".checkpoint").read() == {(TOPIC, 2): 20}
    manager.close()

    manager, store = _start(task_dir)
    assert manager.changelog_offsets_to_restore() == [ChangelogPartition("kv", TOPIC, 2, 21)]
    assert store.get("c") == 3  # local data kept: it matches the checkpoint
    manager.close()


def test_local_data_without_checkpoint_entry_is_wiped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    task_dir = tmp_path / "0_2"
    manager, store = _start(task_dir)
    store.put("a", 1)
    manager.flush()
    manager.close()  # no checkpoint written (a crash after flushing, say)
    with caplog.at_level(logging.WARNING):
        manager, store = _start(task_dir)
    assert "no checkpointed offset" in caplog.text
    assert store.get("a") is None
    assert manager.changelog_offsets_to_restore()[0].start_offset == FROM_BEGINNING
    manager.close()


def test_corrupt_checkpoint_wipes_stores(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    task_dir = tmp_path / "0_2"
    manager, store = _start(task_dir)
    store.put("a", 1)
    manager.flush()
    manager.checkpoint({(TOPIC, 2): 3})
    manager.close()
    (task_dir / ".checkpoint").write_text("0\n7\nnonsense\n")
    with caplog.at_level(logging.WARNING):
        manager, store = _start(task_dir)
    assert "checkpoint unreadable" in caplog.text
    assert store.get("a") is None
    assert manager.changelog_offsets_to_restore()[0].start_offset == FROM_BEGINNING
    manager.close()


def test_eos_checkpoint_only_on_enforce_and_deleted_while_processing(tmp_path: Path) -> None:
    task_dir = tmp_path / "0_2"
    manager, store = _start(task_dir, eos=True)
    store.put("a", 1)
    manager.flush()
    manager.checkpoint({(TOPIC, 2): 4})  # a regular commit: no file under EOS
    assert not (task_dir / ".checkpoint").exists()
    manager.checkpoint({(TOPIC, 2): 5}, enforce=True)  # clean close
    assert OffsetCheckpoint(task_dir / ".checkpoint").read() == {(TOPIC, 2): 5}
    manager.close()

    manager, store = _start(task_dir, eos=True)
    assert not (task_dir / ".checkpoint").exists()  # deleted as soon as the store registered
    assert manager.changelog_offsets_to_restore()[0].start_offset == 6
    assert store.get("a") == 1
    store.put("b", 2)
    manager.flush()
    manager.close()  # crash-like: no enforced checkpoint

    manager, store = _start(task_dir, eos=True)
    assert store.get("a") is None and store.get("b") is None  # wiped: no checkpoint under EOS
    assert manager.changelog_offsets_to_restore()[0].start_offset == FROM_BEGINNING
    manager.close()


def test_in_memory_stores_always_restore_and_are_not_checkpointed(tmp_path: Path) -> None:
    task_dir = tmp_path / "0_2"
    manager, _ = _start(task_dir, persistent=False)
    manager.restore("kv", [(b"a", L.serialize(1))], last_offset=0)
    manager.checkpoint({(TOPIC, 2): 9})
    assert OffsetCheckpoint(task_dir / ".checkpoint").read() == {}
    assert manager.changelog_offsets() == {(TOPIC, 2): 9}
    manager.close()
    manager, _ = _start(task_dir, persistent=False)
    assert manager.changelog_offsets_to_restore()[0].start_offset == FROM_BEGINNING
    manager.close()


def test_unlogged_store_is_not_restored(tmp_path: Path) -> None:
    manager, store = _start(tmp_path / "0_2", logging_on=False)
    store.put("a", 1)
    assert manager.changelog_offsets_to_restore() == []
    manager.close()


def test_corrupt_rocksdb_restores_from_beginning_despite_checkpoint(tmp_path: Path) -> None:
    task_dir = tmp_path / "0_2"
    manager, store = _start(task_dir)
    store.put("a", 1)
    manager.flush()
    manager.checkpoint({(TOPIC, 2): 3})
    manager.close()
    (task_dir / "rocksdb" / "kv" / "CURRENT").write_bytes(b"broken")
    manager, store = _start(task_dir)
    assert store.get("a") is None
    assert manager.changelog_offsets_to_restore()[0].start_offset == FROM_BEGINNING
    manager.close()


def test_flush_in_registration_order_and_duplicate_registration(tmp_path: Path) -> None:
    manager = ProcessorStateManager(TASK, tmp_path / "0_2", eos=False)
    order: list[str] = []

    class Spy:
        persistent = False

        def __init__(self, name: str) -> None:
            self.name = name

        def flush(self) -> None:
            order.append(self.name)

        def close(self) -> None:
            order.append(f"close-{self.name}")

    for name in ["b", "a", "c"]:
        manager.register_store(Spy(name), lambda batch: None, None, 2)
    with pytest.raises(IllegalStateError):
        manager.register_store(Spy("a"), lambda batch: None, None, 2)
    manager.flush()
    manager.close()
    assert order == ["b", "a", "c", "close-b", "close-a", "close-c"]
    with pytest.raises(IllegalStateError):
        manager.register_store(Spy("d"), lambda batch: None, None, 2)


def test_close_with_wipe_deletes_the_task_directory(tmp_path: Path) -> None:
    task_dir = tmp_path / "0_2"
    manager, store = _start(task_dir)
    store.put("a", 1)
    manager.close(wipe=True)
    assert not task_dir.exists()


def test_reset_store(tmp_path: Path) -> None:
    manager, store = _start(tmp_path / "0_2")
    manager.restore("kv", [(b"a", L.serialize(1))], last_offset=0)
    manager.reset_store("kv")
    assert store.get("a") is None
    assert manager.changelog_offsets() == {}
    manager.close()
