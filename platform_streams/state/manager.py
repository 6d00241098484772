"""``ProcessorStateManager``: the stores of one task, their changelogs and the checkpoint.

Lifecycle, as the runtime drives it (Kafka Streams' ``ProcessorStateManager``)::

    manager = ProcessorStateManager(task_id, task_dir, eos=eos)   # reads .checkpoint
    for builder in topology_stores: builder.build().init(context, root)
        # -> store registers through context.register(...)
        # -> runtime forwards: manager.register_store(store, callback, topic, context.changelog_partition)
    ChangelogReader(consumer_conf).restore(manager)                  # replays changelogs
    ... process; on every commit:  manager.flush(); manager.checkpoint(collector_offsets)
    on suspend/clean close:        manager.flush(); manager.checkpoint(offsets, enforce=True)
    manager.close(wipe=False)      # wipe=True deletes the task directory (dirty close)

A store whose files turned out corrupt while in use (``StoreCorruptedError``) is marked
with :meth:`ProcessorStateManager.mark_corrupted`; closing the manager then deletes that
store's directory only (the task's other stores keep theirs: an unlogged one has no other
copy), and the next instance of the task restores it from the beginning of its changelog.

Trust rules for local data, decided when a store registers:

* a logged persistent store whose changelog partition has a checkpoint entry resumes
  restoring after that offset;
* one that has local data but no entry -- first run after logging was enabled, a crash
  under exactly-once (the checkpoint is deleted while processing), a corrupt checkpoint
  file -- is wiped and restored from the beginning;
* one whose backend opened empty (new, or unreadable and wiped) is restored from the
  beginning whatever the checkpoint says;
* in-memory stores are always restored from the beginning and never checkpointed;
  persistent stores without a changelog are kept as they are.

Under exactly-once the checkpoint file is deleted as soon as the first store registers
(and by :meth:`delete_checkpoint_if_eos`, which the runtime calls when it resumes a
suspended task), and written only on ``checkpoint(..., enforce=True)``: a process killed
while processing leaves no checkpoint, so uncommitted writes that reached disk are never
trusted.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from platform_streams.errors import IllegalStateError, TaskCorruptedError
from platform_streams.processor.task_id import TaskId
from platform_streams.state.backend import store_directory
from platform_streams.state.checkpoint import CHECKPOINT_FILE_NAME, CheckpointFormatError, OffsetCheckpoint
from platform_streams.state.private_files import make_private_dirs
from platform_streams.state.store_context import RestoreCallback, TimestampedRestoreCallback
from platform_streams.state.wrappers.base import innermost

__all__ = ["FROM_BEGINNING", "ChangelogPartition", "ProcessorStateManager"]

log = logging.getLogger(__name__)

#: ``start_offset`` meaning "from the first offset the log still has" (librdkafka's
#: ``OFFSET_BEGINNING``); a changelog with ``delete`` retention may not start at 0.
FROM_BEGINNING = -2


class ChangelogPartition(NamedTuple):
    """One changelog partition to replay into one store."""

    store_name: str
    topic: str
    partition: int
    #: First offset to read: checkpointed offset + 1, or :data:`FROM_BEGINNING`.
    start_offset: int


@dataclass(slots=True)
class _StoreMetadata:
    store: Any
    restore_callback: RestoreCallback
    changelog_topic: str | None
    changelog_partition: int
    #: Offset of the last changelog record reflected in the store (None: none yet).
    offset: int | None
    restored: int = 0

    @property
    def logged(self) -> bool:
        return self.changelog_topic is not None

    @property
    def topic_partition(self) -> tuple[str, int] | None:
        if self.changelog_topic is None:
            return None
        return (self.changelog_topic, self.changelog_partition)


class ProcessorStateManager:
    """Registers, restores, flushes, checkpoints and closes the stores of one task."""

    def __init__(self, task_id: TaskId, task_dir: Path, *, eos: bool) -> None:
        self.task_id = task_id
        self.task_dir = task_dir
        self.eos = eos
        make_private_dirs(task_dir)
        self._checkpoint_file = OffsetCheckpoint(task_dir / CHECKPOINT_FILE_NAME)
        self._loaded = self._read_checkpoint()
        self._stores: dict[str, _StoreMetadata] = {}
        self._closed = False
        self._restoring = False
        self._checkpoint_present = True  # unknown yet: the first spill checks the file
        #: stores whose directories are deleted at close (their files are corrupt)
        self._corrupted: set[str] = set()
        #: stores whose changelog config lets retention delete records (``cleanup.policy``
        #: with ``delete``, a user's override of a key-value store's): a restore "from the
        #: beginning" starts at their log start (set by the task from its topology)
        self.retention_changelogs: set[str] = set()

    def _read_checkpoint(self) -> dict[tuple[str, int], int]:
        try:
            return self._checkpoint_file.read()
        except (CheckpointFormatError, OSError) as exc:
            log.warning(
                "task %s: checkpoint unreadable (%s); its persistent stores will be wiped and restored",
                self.task_id,
                exc,
            )
            self._checkpoint_file.delete()
            return {}

    # ------------------------------------------------------------------ registration

    def register_store(
        self,
        store: Any,
        restore_callback: RestoreCallback,
        changelog_topic: str | None,
        changelog_partition: int,
    ) -> None:
        """Take a store that has just opened (called through ``StateStoreContext.register``)."""
        if self._closed:
            raise IllegalStateError(f"task {self.task_id}: state manager is closed")
        name = store.name
        if name in self._stores:
            raise IllegalStateError(f"task {self.task_id}: store {name!r} registered twice")
        offset = self._initial_offset(store, changelog_topic, changelog_partition)
        self._stores[name] = _StoreMetadata(
            store, restore_callback, changelog_topic, changelog_partition, offset
        )
        backend = getattr(innermost(store), "backend", None)
        if changelog_topic is not None and backend is not None and store.persistent:
            backend.on_uncommitted_write = self._on_uncommitted_write
        self.delete_checkpoint_if_eos()

    def _initial_offset(self, store: Any, topic: str | None, partition: int) -> int | None:
        if topic is None or not store.persistent:
            return None
        backend = getattr(innermost(store), "backend", None)
        if backend is not None and backend.started_empty:
            return None
        checkpointed = self._loaded.get((topic, partition))
        if checkpointed is not None:
            return checkpointed
        log.warning(
            "task %s: store %s has local data but no checkpointed offset for %s-%d; "
            "wiping it and restoring from the changelog",
            self.task_id,
            store.name,
            topic,
            partition,
        )
        wipe = getattr(store, "wipe", None)
        if wipe is None:
            raise TaskCorruptedError([str(self.task_id)], f"store {store.name} cannot be wiped")
        wipe()
        return None

    def _on_uncommitted_write(self) -> None:
        """A store is about to put writes on disk that no commit covers yet: the checkpoint
        would then claim less than the disk holds, so it goes until the next one is written.
        Restored records are committed ones (re-applying them is idempotent): no need then."""
        if self._checkpoint_present and not self._restoring:
            self._checkpoint_file.delete()
            self._checkpoint_present = False

    def delete_checkpoint_if_eos(self) -> None:
        """Under exactly-once, remove the checkpoint before the stores change again."""
        if self.eos:
            self._checkpoint_file.delete()
            self._checkpoint_present = False

    # ------------------------------------------------------------------ queries

    @property
    def store_names(self) -> list[str]:
        """Registered stores, in registration order."""
        return list(self._stores)

    def get_store(self, name: str) -> Any:
        md = self._stores.get(name)
        return md.store if md is not None else None

    def changelog_offsets_to_restore(self) -> list[ChangelogPartition]:
        """What to replay: every logged store, from after its offset (or the beginning)."""
        out = []
        for name, md in self._stores.items():
            if md.changelog_topic is None:
                continue
            start = md.offset + 1 if md.offset is not None else FROM_BEGINNING
            out.append(ChangelogPartition(name, md.changelog_topic, md.changelog_partition, start))
        return out

    def changelog_offsets(self) -> dict[tuple[str, int], int]:
        """Current offset (last record reflected) of every logged store that has one."""
        return {
            tp: md.offset
            for md in self._stores.values()
            if (tp := md.topic_partition) is not None and md.offset is not None
        }

    def restores_with_timestamps(self, store_name: str) -> bool:
        """Whether :meth:`restore` of this store needs the records' timestamps (versioned stores)."""
        md = self._stores.get(store_name)
        return md is not None and isinstance(md.restore_callback, TimestampedRestoreCallback)

    def restored_count(self, store_name: str) -> int:
        return self._stores[store_name].restored

    # ------------------------------------------------------------------ restore

    def restore(
        self,
        store_name: str,
        batch: list[tuple[bytes, bytes | None]],
        *,
        last_offset: int | None = None,
        timestamps: list[int] | None = None,
    ) -> None:
        """Apply a batch of changelog records; ``last_offset`` is the last offset the batch covers.

        ``timestamps`` (the records' timestamps, parallel to ``batch``) reach the stores whose
        callback is a :class:`TimestampedRestoreCallback` (versioned stores)."""
        md = self._stores.get(store_name)
        if md is None:
            raise IllegalStateError(f"task {self.task_id}: no store {store_name!r} to restore")
        if batch:
            self._restoring = True
            try:
                callback = md.restore_callback
                if isinstance(callback, TimestampedRestoreCallback):
                    if timestamps is None:
                        raise IllegalStateError(f"store {store_name!r} restores only with record timestamps")
                    callback.apply(batch, timestamps)
                else:
                    callback(batch)
            finally:
                self._restoring = False
            md.restored += len(batch)
        if last_offset is not None:
            md.offset = last_offset

    def has_store_at(self, store_name: str, path: Path | None) -> bool:
        """True if ``store_name`` is registered here and keeps its files at ``path``."""
        return (
            store_name in self._stores
            and path is not None
            and Path(path) == store_directory(self.task_dir, store_name)
        )

    def mark_corrupted(self, store_name: str) -> None:
        """Delete the directory of ``store_name`` when the manager closes (its files are corrupt).

        Only a logged store may be marked: its changelog is the copy it is restored from.
        """
        md = self._stores.get(store_name)
        if md is None or not md.logged:
            raise IllegalStateError(
                f"task {self.task_id}: store {store_name} has no changelog to restore it from"
            )
        self._corrupted.add(store_name)

    def is_logged(self, store_name: str) -> bool:
        """True if ``store_name`` is registered with a changelog."""
        md = self._stores.get(store_name)
        return md is not None and md.logged

    def reset_store(self, store_name: str) -> None:
        """Wipe a store and forget its offset (its changelog no longer matches the local data)."""
        md = self._stores[store_name]
        log.warning("task %s: wiping store %s to restore it from the beginning", self.task_id, store_name)
        md.store.wipe()
        md.offset = None
        md.restored = 0

    # ------------------------------------------------------------------ commit

    def flush(self) -> None:
        """Flush every store in registration order (caches first, then disk); raises the first error."""
        first: BaseException | None = None
        for md in self._stores.values():
            try:
                md.store.flush()
            except Exception as exc:
                log.error("task %s: flushing store %s failed: %s", self.task_id, md.store.name, exc)
                first = first or exc
        if first is not None:
            raise first

    def advance_offsets(self, written: Mapping[tuple[str, int], int]) -> None:
        """Move the stores' in-memory changelog offsets to ``written`` (no file written): the
        runtime's commit when it defers the flush and checkpoint (``TaskStateLifecycle.persist``)."""
        for md in self._stores.values():
            tp = md.topic_partition
            if tp is not None and tp in written:
                md.offset = written[tp]

    @property
    def checkpoint_present(self) -> bool:
        """False once a spill of uncommitted writes (or an exactly-once start) removed the file."""
        return self._checkpoint_present

    @property
    def all_persistent_logged(self) -> bool:
        """True if every persistent store has a changelog: a checkpoint then covers them all,
        and a store's disk state may lag its changelog (a restore catches it up)."""
        return all(md.topic_partition is not None for md in self._stores.values() if md.store.persistent)

    def checkpoint(self, written: Mapping[tuple[str, int], int], *, enforce: bool = False) -> None:
        """Record the changelog offsets written since the last checkpoint, then write the file.

        ``written`` maps ``(changelog topic, partition)`` to the offset of the last record
        the runtime's record collector wrote there (acknowledged). Call after
        :meth:`flush`. Under exactly-once the file is written only with ``enforce=True``
        (clean close or suspend); otherwise only the in-memory offsets move.
        """
        self.advance_offsets(written)
        if self.eos and not enforce:
            return
        offsets = {
            tp: md.offset
            for md in self._stores.values()
            if md.store.persistent and (tp := md.topic_partition) is not None and md.offset is not None
        }
        self._checkpoint_file.write(offsets)
        self._checkpoint_present = True

    # ------------------------------------------------------------------ close

    def close(self, *, wipe: bool = False) -> None:
        """Close every store; ``wipe`` then deletes the whole task directory."""
        if self._closed:
            return
        self._closed = True
        first: BaseException | None = None
        for md in self._stores.values():
            try:
                md.store.close()
            except Exception as exc:
                log.error("task %s: closing store %s failed: %s", self.task_id, md.store.name, exc)
                first = first or exc
        self._stores.clear()
        if wipe:
            log.info("task %s: deleting local state at %s", self.task_id, self.task_dir)
            shutil.rmtree(self.task_dir, ignore_errors=True)
        for name in sorted(self._corrupted):
            directory = store_directory(self.task_dir, name)
            log.info("task %s: deleting the corrupt files of store %s at %s", self.task_id, name, directory)
            shutil.rmtree(directory, ignore_errors=True)
        self._corrupted.clear()
        if first is not None and not wipe:
            raise first
