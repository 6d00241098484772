"""The state side of a task's life in a worker: restore, checkpoint, close.

Kept apart from the worker loop so the order of state operations reads in one place:
stores built -> restored from their changelogs (from the checkpoint when the local store
is intact, else from the beginning), applying only records written for committed input
(:mod:`platform_streams.runtime.restore.changelog_filter`) -> processors initialised; commit ->
stores persisted -> checkpoint; close -> checkpoint (clean) or keep the last one (dirty).

Under exactly-once the changelogs are read with read_committed. A broker that never
finishes a dead producer's transaction (seen when the member that owned it does not come
back) blocks such a reader forever; after ``_STALL_S`` without progress the restore goes on
with read_uncommitted: the source-position filter, not the isolation level, is what
keeps uncommitted writes out of the state.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError, StreamsError, StreamsTimeoutError
from platform_streams.kafka import KafkaAdmin, empty_partitions
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.restore.changelog_filter import CommittedInputFilter
from platform_streams.runtime.restore.restore_ranges import RestoreRanges
from platform_streams.state.manager import FROM_BEGINNING, ChangelogPartition, ProcessorStateManager
from platform_streams.state.restore import ChangelogReader, StateRestoreListener, read_start
from platform_streams.state.restore_read_ahead import RestoreReadAhead
from platform_streams.state.snapshot_restore import SnapshotRestore, SnapshotRestorer

if TYPE_CHECKING:
    from platform_streams.runtime.tasks.task import StreamTask

log = logging.getLogger(__name__)

#: a read_committed restore without progress for this long is blocked by an open transaction
_STALL_S = 10.0
#: how long the lookup of empty changelogs may take before each partition is read instead
_EMPTY_LOOKUP_S = 10.0

#: changelog records a task's commits may add before its stores are flushed and checkpointed
#: (Kafka Streams' ``StateManagerUtil.OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT``)
CHECKPOINT_OFFSET_DELTA = 10_000


def _offset_delta(before: Mapping[tuple[str, int], int], after: Mapping[tuple[str, int], int]) -> int:
    """Records the changelog offsets moved by (a partition new in ``after``: past any threshold)."""
    total = 0
    for tp, offset in after.items():
        old = before.get(tp)
        if old is None:
            return CHECKPOINT_OFFSET_DELTA + 1
        total += abs(offset - old)
    return total


class TaskStateLifecycle:
    """Drives restore/checkpoint/close of a worker's tasks and remembers what restore cost."""

    def __init__(
        self,
        config: StreamsConfig,
        listener: StateRestoreListener | None = None,
        restore_ranges: RestoreRanges | None = None,
    ) -> None:
        self.config = config
        self.listener = listener
        #: changelog ranges a restore applies unread, and the tasks' new instances that continue them
        self.restore_ranges = restore_ranges
        #: task -> store -> records replayed by the last restore of that task
        self.last_restore: dict[TaskId, dict[str, int]] = {}
        #: task -> changelog records skipped by the last restore (written for uncommitted input)
        self.last_skipped: dict[TaskId, int] = {}
        #: task -> changelog records its last restore applied without reading their headers
        self.last_trusted: dict[TaskId, int] = {}
        #: records replayed by all restores of this worker
        self.total_restored = 0
        #: task -> (id of the task object, changelog offsets) of its last checkpoint
        self._persisted: dict[TaskId, tuple[int, dict[tuple[str, int], int]]] = {}
        #: ingests state snapshots before the changelog tail is replayed (when configured)
        self.snapshots = (
            SnapshotRestorer(config.state_snapshot_location, config.application_id)
            if config.state_snapshot_location
            else None
        )
        #: task -> snapshots ingested by the last restore of that task
        self.last_snapshots: dict[TaskId, list[SnapshotRestore]] = {}

    def restore(self, tasks: Iterable[StreamTask], committed: Mapping[tuple[str, int], int | None]) -> None:
        """Bring every store of ``tasks`` up to date with its changelog before processing.

        ``committed`` holds the committed offsets of the tasks' input partitions (None where
        nothing was committed): changelog records written for input at or beyond them are
        skipped.
        """
        todo = []
        #: every task's partitions in restore order: each is opened while the one before is read
        plan: list[tuple[str, int, int]] = []
        #: the same, with the offset each read starts at (``read_start``)
        reads: list[tuple[str, int, int]] = []
        #: task -> the changelog ranges its restore applies unread
        trusted: dict[TaskId, dict[tuple[str, int], tuple[int, int]]] = {}
        for task in tasks:
            self._persisted.pop(task.task_id, None)
            if self.restore_ranges is not None:
                ranges = self.restore_ranges.for_restore(task.task_id, task.partitions, committed)
                trusted[task.task_id] = {tp: (r.start, r.end) for tp, r in ranges.items()}
            if self.snapshots is not None:
                self.last_snapshots[task.task_id] = []
                self._apply_snapshots(task.task_id, task.state_manager)
            parts = task.state_manager.changelog_offsets_to_restore()
            if not parts:
                self.last_restore[task.task_id] = {}
                self.last_skipped[task.task_id] = 0
                continue
            todo.append(task)
            plan.extend((p.topic, p.partition, p.start_offset) for p in parts)
            reads.extend((p.topic, p.partition, read_start(task.state_manager, p)) for p in parts)
        empty = self._empty_changelogs(plan)
        read_ahead = RestoreReadAhead([part for part in reads if part[:2] not in empty])
        try:
            for task in todo:
                self._restore_and_log(task, committed, read_ahead, trusted.get(task.task_id, {}), empty)
        finally:
            read_ahead.close()

    def _apply_snapshots(self, task_id: TaskId, manager: ProcessorStateManager) -> list[SnapshotRestore]:
        """Ingest the snapshots the task's stores need; remember and report them."""
        assert self.snapshots is not None
        used = self.snapshots.restore(manager)
        self.last_snapshots.setdefault(task_id, []).extend(used)
        if self.listener is not None:
            for done in used:
                manifest = done.manifest
                self.listener.on_snapshot_restored(
                    done.store_name,
                    (manifest.changelog_topic, manifest.partition),
                    manifest.offset,
                    manifest.record_count,
                    done.seconds,
                )
        return used

    def _reseed(self, task_id: TaskId, manager: ProcessorStateManager, part: ChangelogPartition) -> int:
        """A store wiped because its position is outside the changelog (truncated below a
        snapshot since it was checkpointed): restore it from the newest snapshot instead of
        replaying what is left of the log; the offset to replay from."""
        for done in self._apply_snapshots(task_id, manager):
            if done.store_name == part.store_name:
                return done.manifest.offset + 1
        return FROM_BEGINNING

    def _empty_changelogs(self, plan: Iterable[tuple[str, int, int]]) -> set[tuple[str, int]]:
        """The plan's partitions restored from the beginning whose changelog holds no record:
        one ListOffsets request instead of a reader each (a fresh application's every
        changelog; ~40 ms a partition of its start, bench/RESULTS.md). A broker
        that does not answer costs nothing but the try: every partition is read as before."""
        fresh = [(topic, partition) for topic, partition, start in plan if start == FROM_BEGINNING]
        if not fresh:
            return set()
        try:
            with KafkaAdmin(self.config.admin_configs()) as admin:
                return empty_partitions(admin, fresh, _EMPTY_LOOKUP_S)
        except StreamsError as exc:
            log.info("end offsets of %d changelog partitions not listed (%s): reading each", len(fresh), exc)
            return set()

    def _restore_and_log(
        self,
        task: StreamTask,
        committed: Mapping[tuple[str, int], int | None],
        read_ahead: RestoreReadAhead,
        trusted: Mapping[tuple[str, int], tuple[int, int]],
        empty: Collection[tuple[str, int]],
    ) -> None:
        started = time.monotonic()
        record_filter = CommittedInputFilter(task.partitions, committed)
        record_filter.trust(trusted)
        self._restore_task(task, record_filter, read_ahead, empty)
        counts = {name: task.state_manager.restored_count(name) for name in task.state_manager.store_names}
        counts = {name: n for name, n in counts.items() if n}
        self.last_restore[task.task_id] = counts
        self.last_skipped[task.task_id] = record_filter.skipped
        replayed = sum(counts.values())
        self.total_restored += replayed
        self.last_trusted[task.task_id] = record_filter.trusted_records
        log.info(
            "task %s restored %d changelog records (%d skipped: for uncommitted input; %d in committed"
            " ranges, unread) in %.2fs (%s)",
            task.task_id,
            replayed,
            record_filter.skipped,
            record_filter.trusted_records,
            time.monotonic() - started,
            ", ".join(f"{s}={n}" for s, n in sorted(counts.items())) or "nothing to replay",
        )

    def _restore_task(
        self,
        task: StreamTask,
        record_filter: CommittedInputFilter,
        read_ahead: RestoreReadAhead,
        empty: Collection[tuple[str, int]],
    ) -> None:
        conf = self.config.restore_consumer_configs()
        deadline = time.monotonic() + self.config.task_timeout_ms / 1000.0
        stall_s = _STALL_S if conf.get("isolation.level") == "read_committed" else 30.0
        while True:
            reader = ChangelogReader(
                conf,
                listener=self.listener,
                record_filter=record_filter,
                timeout_s=stall_s,
                read_ahead=read_ahead,
                known_empty=empty,
                reseed=None if self.snapshots is None else partial(self._reseed, task.task_id),
            )
            try:
                reader.restore(task.state_manager)  # resumes after whatever an earlier attempt applied
                return
            except (StreamsTimeoutError, BrokerError) as exc:
                if isinstance(exc, BrokerError) and not exc.retriable:
                    raise
                if time.monotonic() >= deadline:
                    raise
                if conf.get("isolation.level") == "read_committed":
                    log.warning(
                        "task %s: changelog restore makes no progress with read_committed (%s): an open "
                        "transaction the broker never finished blocks it; reading uncommitted records, "
                        "filtered by the committed input offsets",
                        task.task_id,
                        exc,
                    )
                    conf = {**conf, "isolation.level": "read_uncommitted"}
                    stall_s = 30.0
                    # aborted records become visible, and another writer's may lie inside a
                    # range: every record is judged by its header from here on
                    record_filter.trust({})
                else:
                    log.warning("task %s: restore interrupted (%s); retrying", task.task_id, exc)

    def persist(
        self, tasks: Iterable[StreamTask], written: Mapping[tuple[str, int], int], *, enforce: bool = False
    ) -> None:
        """After a commit: write the stores to disk, then record how far they reflect the changelogs.

        The order is what makes a checkpoint trustworthy after a crash: it exists only when the
        disk holds exactly the committed state it names (a store spilling uncommitted writes
        removes it, see ``ProcessorStateManager``).

        Under exactly-once, as Kafka Streams under at-least-once
        (``StateManagerUtil.checkpointNeeded``; under exactly-once it does not flush its stores
        while a task runs at all), a commit that moved a task's changelog offsets by at most
        :data:`CHECKPOINT_OFFSET_DELTA` records since its last checkpoint skips the flush and
        checkpoint (``enforce``, a clean close, never does): the writes stay in the stores'
        overlays and the checkpoint still names what the disk holds, so a crash restores the
        difference from the changelog. Why: exactly-once commits every 100 ms by default,
        and a RocksDB flush and a checkpoint file per task and commit were 0.42 s of a
        6.7 s count_eos_100ms run (0.10 s with this; bench/RESULTS.md).
        At-least-once (30 s commits by default) flushes at every commit, which keeps the
        store flush-latency series (and its dashboard panel) alive for quiet applications.
        Only tasks whose persistent stores are all logged defer (an unlogged store's disk
        is its only copy), and only while the checkpoint this lifecycle wrote for the task
        is still there (a spill removes it).
        """
        for task in tasks:
            offsets = task.changelog_offsets(written)
            manager = task.state_manager
            previous = self._persisted.get(task.task_id)
            # the offsets of the checkpoint this lifecycle wrote for this task object, if still there
            last = previous[1] if previous is not None and previous[0] == id(task) else None
            if last is not None and not manager.checkpoint_present:
                last = None
            if (
                last is not None
                and not enforce
                and manager.eos
                and manager.all_persistent_logged
                and _offset_delta(last, offsets) <= CHECKPOINT_OFFSET_DELTA
            ):
                manager.advance_offsets(offsets)
                continue
            task.flush_stores()
            # unchanged offsets mean no store wrote since the last checkpoint (so none spilled
            # and removed it): an idle commit costs no file write (100 ms commits under EOS)
            if last != offsets:
                manager.checkpoint(offsets, enforce=True)
                self._persisted[task.task_id] = (id(task), offsets)

    def close_task(self, task: StreamTask, written: Mapping[tuple[str, int], int], *, clean: bool) -> None:
        """Close a task; a clean close writes a final checkpoint (also under exactly-once)."""
        try:
            if clean:
                self.persist([task], written, enforce=True)
        finally:
            self._persisted.pop(task.task_id, None)
            task.close()
