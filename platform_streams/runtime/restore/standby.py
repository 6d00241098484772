"""Standby tasks: stores of another client's tasks, kept warm by tailing their changelogs.

One :class:`StandbyUpdater` thread per client (process) keeps the standby tasks that
:mod:`platform_streams.runtime.membership.placement` gives it. A :class:`StandbyTask` builds the
task's stores in the same task directory an active task would use and applies changelog
records as they are written -- but only records written for *committed* input (the
``__ps_src`` header, :mod:`platform_streams.runtime.restore.changelog_filter`): it stops at the
first record the active owner has not committed yet (pausing that partition) and goes on
once the owner's committed offsets pass it. So its state is always a committed state,
whatever the owner's guarantee, and a takeover after the owner crashed never needs to undo
anything.

Handing a task over: before a worker creates an active task it :meth:`StandbyUpdater.claim`s
it; the standby (if any) is flushed, checkpointed and closed on the spot, and the active
task opens the same RocksDB directory, reads that checkpoint and restores only the tail
written after it. While claimed, a task is never opened as a standby; a worker closing an
active task :meth:`~StandbyUpdater.unclaim`s it, and it may become a standby again (its
clean-close checkpoint makes that cheap).

In-memory stores gain nothing: their data does not survive the handover to a new store
instance, so the active task restores them in full.

A standby store whose files turn out corrupt (``StoreCorruptedError``: a compaction met a
bad block, and RocksDB then refuses its writes) is closed with its files deleted; the next
iteration opens the task again and reads that changelog from the beginning.

The consumer never skips records: ``auto.offset.reset=error``, and a key-value store's own
changelog read "from the beginning" starts at offset 0 (as a restore does,
:func:`~platform_streams.state.restore.read_start`). A position outside the log (records
deleted below it by ``snapshot truncate``, or the log recreated) is Kafka Streams' corrupted
standby: the store is wiped and the task opened again, re-seeded from the newest snapshot
when snapshots are configured -- never moved silently to the log start, which would leave
the store with a hole that an active task taking it over would inherit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.kafka import OFFSET_BEGINNING, KafkaError, TopicPartition, create_consumer
from platform_streams.processor.context import TaskContext
from platform_streams.processor.record_collector import RefusingCollector
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.restore.changelog_filter import CommittedInputFilter, fetch_committed
from platform_streams.runtime.tasks.task import retention_changelogs, store_changelogs
from platform_streams.state.backend import StoreCorruptedError
from platform_streams.state.changelog_format import versioned_values
from platform_streams.state.manager import FROM_BEGINNING, ProcessorStateManager
from platform_streams.state.restore import read_start
from platform_streams.state.snapshot_restore import SnapshotRestorer
from platform_streams.topology.compiler import TopologyPlan

__all__ = ["StandbyTask", "StandbyUpdater", "stateful_tasks"]

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]

_REFRESH_HELD_S = 0.25
_REFRESH_IDLE_S = 2.0
_CHECKPOINT_S = 5.0
#: a task whose changelog position was outside the log is opened again after this long
_REOPEN_AFTER_S = 2.0


def stateful_tasks(
    plan: TopologyPlan, application_id: str, partition_counts: Mapping[str, int]
) -> list[TaskId]:
    """Every task of a sub-topology with at least one changelogged store."""
    out: list[TaskId] = []
    for sub in plan.subtopologies:
        if not any(plan.changelog_topic(store) is not None for store in sub.stores):
            continue
        counts = [partition_counts.get(plan.physical_topic(t, application_id), 0) for t in sub.source_topics]
        out += [TaskId(sub.id, p) for p in range(max(counts, default=0))]
    return out


class StandbyTask:
    """The stores of one task, applied from their changelogs up to the committed input."""

    def __init__(
        self,
        task_id: TaskId,
        plan: TopologyPlan,
        config: StreamsConfig,
        task_dir: Path,
        *,
        reseed: bool = False,
    ) -> None:
        self.task_id = task_id
        sub = plan.subtopologies[task_id.subtopology]
        app = config.application_id
        self.context = TaskContext(
            config=config,
            task_id=task_id,
            collector=RefusingCollector("a standby task cannot send records"),
            clock_ms=lambda: int(time.time() * 1000),
            task_dir=task_dir,
            changelog_topics=store_changelogs(plan, sub, app),
        )
        self.state_manager = ProcessorStateManager(task_id, task_dir, eos=config.exactly_once)
        self.state_manager.retention_changelogs = retention_changelogs(plan, sub)
        self.context.registrar = self.state_manager
        for name in sub.stores:
            store = plan.topology.stores[name].build()
            store.init(self.context, store)
        #: the task's input partitions (their committed offsets gate what is applied)
        self.partitions = [(plan.physical_topic(t, app), task_id.partition) for t in sub.source_topics]
        self.filter = CommittedInputFilter(self.partitions, {})
        if config.state_snapshot_location and (config.state_snapshot_truncate_changelogs or reseed):
            # The changelog may no longer start at 0: a new standby, or one behind the newest
            # snapshot (or wiped because its position was below the log start: ``reseed``),
            # starts from that snapshot; without one it reads from offset 0 and, if that is
            # gone, is wiped again (it never rebuilds its stores from what is left of the log).
            SnapshotRestorer(config.state_snapshot_location, app, min_gain=1).restore(self.state_manager)
        starts = self.state_manager.changelog_offsets_to_restore()
        self.store_of: dict[TopicPartitionKey, str] = {(p.topic, p.partition): p.store_name for p in starts}
        #: where the consumer starts each changelog partition
        self.start_offsets = {
            (p.topic, p.partition): OFFSET_BEGINNING if start == FROM_BEGINNING else start
            for p in starts
            for start in [read_start(self.state_manager, p)]
        }
        #: records read but not applied yet (written for input not committed yet), per partition
        self.held: dict[TopicPartitionKey, deque[Any]] = {}
        self.applied = 0
        self._dirty = False

    def apply(self, tp: TopicPartitionKey, messages: list[Any]) -> bool:
        """Apply records in order up to the first one not committed; True if that one is held."""
        held = self.held.get(tp)
        if held is not None:
            held.extend(messages)
            return True
        batch: list[tuple[bytes, bytes | None]] = []
        timestamps: list[int] = []
        kept: list[Any] = []
        last: int | None = None
        for index, msg in enumerate(messages):
            if not self.filter.is_committed(msg):
                self.held[tp] = deque(messages[index:])
                break
            last = msg.offset()
            key = msg.key()
            if key is not None:
                batch.append((key, msg.value()))
                timestamps.append(msg.timestamp()[1])
                kept.append(msg)
        if last is not None:
            if self.state_manager.restores_with_timestamps(self.store_of[tp]):
                # a versioned store: plain values (state/changelog_format.py)
                values = [value for _, value in batch]
                versioned_values(kept, values)
                batch = [(key, value) for (key, _), value in zip(batch, values, strict=True)]
            self.state_manager.restore(self.store_of[tp], batch, last_offset=last, timestamps=timestamps)
            self.applied += len(batch)
            self._dirty = True
        return tp in self.held

    def release_held(self) -> list[TopicPartitionKey]:
        """Apply held records the committed offsets now cover; returns partitions no longer held."""
        freed = []
        for tp, held in list(self.held.items()):
            del self.held[tp]
            if not self.apply(tp, list(held)):
                freed.append(tp)
        return freed

    def checkpoint(self) -> None:
        """Persist the stores, then record the changelog offsets they reflect."""
        if not self._dirty:
            return
        self.state_manager.flush()
        self.state_manager.checkpoint({}, enforce=True)
        self._dirty = False

    def store(self, name: str) -> Any | None:
        """The open store ``name`` (a processor's connected store first, else the state
        manager's), None if this task has none (a query's view, see runtime/api.py)."""
        store = self.context.stores.get(name)
        return store if store is not None else self.state_manager.get_store(name)

    def close(self, *, clean: bool = True) -> None:
        try:
            if clean:
                self._dirty = True
                self.checkpoint()
        finally:
            self.state_manager.close()


class StandbyUpdater:
    """Keeps this client's standby tasks (a background thread with its own consumer)."""

    def __init__(self, plan: TopologyPlan, config: StreamsConfig, state_root: Path) -> None:
        self.plan = plan
        self.config = config
        self.state_root = state_root
        self.tasks: dict[TaskId, StandbyTask] = {}
        self._desired: set[TaskId] = set()
        self._claimed: set[TaskId] = set()
        self._lock = threading.RLock()
        #: tasks being opened outside the lock (a snapshot download); a claim waits for them
        self._opening: set[TaskId] = set()
        self._opened = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._consumer: Any = None
        self._thread: threading.Thread | None = None
        self._paused: set[TopicPartitionKey] = set()
        self._next_refresh = 0.0
        self._next_checkpoint = time.monotonic() + _CHECKPOINT_S
        #: tasks wiped because a changelog position was outside the log: re-seeded when reopened
        self._reseed: set[TaskId] = set()
        #: task -> when it may be opened again (monotonic seconds)
        self._reopen_after: dict[TaskId, float] = {}
        #: records applied by all standby tasks of this client
        self.applied_total = 0

    # -- control from the client and its workers ------------------------------------------

    def start(self) -> None:
        conf = {**self.config.restore_consumer_configs(), "group.id": self.config.application_id}
        conf["client.id"] = f"{self.config.effective_client_id}-standby-consumer"
        # never jump to the log start over a hole: an out-of-range position is reported
        # (``_out_of_range``) and the store re-seeded
        conf["auto.offset.reset"] = "error"
        self._consumer = create_consumer(conf)
        self._thread = threading.Thread(
            target=self._run, name=f"{self.config.effective_client_id}-standby", daemon=True
        )
        self._thread.start()

    def set_desired(self, tasks: Iterable[TaskId]) -> None:
        """The standby tasks placement gives this client (applied by the thread)."""
        with self._lock:
            self._desired = set(tasks)

    def claim(self, task_ids: Iterable[TaskId]) -> None:
        """A worker is about to run these tasks: hand their stores over (blocks briefly)."""
        with self._lock:
            ids = set(task_ids)
            self._claimed |= ids
            # a task being opened (outside the lock) is closed by the opener once open
            while ids & self._opening:
                self._opened.wait(1.0)
            for task_id in ids:
                self._close_task(task_id, clean=True)

    def unclaim(self, task_ids: Iterable[TaskId]) -> None:
        """A worker closed these active tasks; they may become standbys again."""
        with self._lock:
            self._claimed -= set(task_ids)

    def standby_ids(self) -> set[TaskId]:
        with self._lock:
            return set(self.tasks)

    def positions(self) -> dict[TaskId, dict[tuple[str, int], int]]:
        """Per standby task, the changelog offsets its stores reflect (for monitoring and tests)."""
        with self._lock:
            return {task_id: task.state_manager.changelog_offsets() for task_id, task in self.tasks.items()}

    def reading(self) -> AbstractContextManager[Any]:
        """Hold the updater still while reading its stores (interactive queries): the stores
        and ``tasks`` only change with this lock held."""
        return self._lock

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        with self._lock:
            for task_id in list(self.tasks):
                self._close_task(task_id, clean=True)
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None

    # -- the thread -----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._lock:
                    to_open = self._sync_tasks()
                self._open_tasks(to_open)
                with self._lock:
                    if self.tasks:
                        self._poll()
                        self._maintain()
                if not self.tasks:
                    self._stop.wait(0.2)
            except Exception as exc:
                if isinstance(exc, StoreCorruptedError) and self._drop_corrupted(exc):
                    continue
                log.exception("standby updater: iteration failed; closing standby tasks and retrying")
                with self._lock:
                    for task_id in list(self.tasks):
                        self._close_task(task_id, clean=False)
                self._stop.wait(1.0)

    def _sync_tasks(self) -> list[tuple[TaskId, bool]]:
        """Close the tasks no longer wanted; the ones to open (and whether to re-seed each),
        marked as opening."""
        wanted = self._desired - self._claimed
        for task_id in [t for t in self.tasks if t not in wanted]:
            self._close_task(task_id, clean=True)
        now = time.monotonic()
        to_open = []
        for task_id in sorted(wanted - set(self.tasks)):
            if self._reopen_after.get(task_id, 0.0) > now:
                continue
            to_open.append((task_id, task_id in self._reseed))
            self._opening.add(task_id)
        return to_open

    def _open_tasks(self, to_open: list[tuple[TaskId, bool]]) -> None:
        """Open standby tasks without holding the lock: building one may download and ingest
        a snapshot (seconds for a big store), during which queries, ``positions()`` and claims
        must not wait. One claimed meanwhile is closed again as soon as it is open (the claim
        waits for that, so the worker never opens a store the standby still has open)."""
        try:
            for task_id, reseed in to_open:
                if self._stop.is_set():
                    break
                task_dir = self.state_root / str(task_id)
                task = StandbyTask(task_id, self.plan, self.config, task_dir, reseed=reseed)
                with self._lock:
                    self._opening.discard(task_id)
                    self._opened.notify_all()
                    if task_id in self._claimed or task_id not in self._desired:
                        task.close(clean=True)
                        continue
                    self._reseed.discard(task_id)
                    self._reopen_after.pop(task_id, None)
                    self._register(task)
        finally:
            with self._lock:
                self._opening.difference_update(task_id for task_id, _ in to_open)
                self._opened.notify_all()

    def _register(self, task: StandbyTask) -> None:
        """Start reading the changelogs of an opened task (under the lock)."""
        task_id = task.task_id
        self.tasks[task_id] = task
        starts = [TopicPartition(t, p, o) for (t, p), o in task.start_offsets.items()]
        if starts:
            self._consumer.incremental_assign(starts)
            # librdkafka keeps a pause through unassign and assign: a partition this task
            # held paused when it last closed would otherwise never be read again
            self._consumer.resume([TopicPartition(t.topic, t.partition) for t in starts])
        self._next_refresh = 0.0
        log.info("standby task %s opened (changelogs from %s)", task_id, task.start_offsets)

    def _drop_corrupted(self, exc: StoreCorruptedError) -> bool:
        """Close the standby task owning the corrupt store dirty, the store's files deleted
        (the next sync reopens it empty, from the changelog's beginning); False if no
        standby task here owns it."""
        with self._lock:
            for task_id, task in list(self.tasks.items()):
                manager = task.state_manager
                if manager.has_store_at(exc.store, exc.path) and manager.is_logged(exc.store):
                    log.warning(
                        "standby task %s: store %s is corrupt (%s); deleting its files and reading its "
                        "changelog again from the beginning",
                        task_id,
                        exc.store,
                        exc.reason,
                    )
                    manager.mark_corrupted(exc.store)
                    self._close_task(task_id, clean=False)
                    return True
        return False

    def _close_task(self, task_id: TaskId, *, clean: bool) -> None:
        task = self.tasks.pop(task_id, None)
        if task is None:
            return
        tps = list(task.store_of)
        if tps and self._consumer is not None:
            try:
                self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in tps])
            except Exception as exc:
                log.debug("unassigning standby partitions of %s: %s", task_id, exc)
        self._paused.difference_update(tps)
        try:
            task.close(clean=clean)
        except Exception:
            log.exception("closing standby task %s failed", task_id)
        log.info("standby task %s closed (%d records applied)", task_id, task.applied)

    def _task_of(self, tp: TopicPartitionKey) -> StandbyTask | None:
        for task in self.tasks.values():
            if tp in task.store_of:
                return task
        return None

    def _out_of_range(self, tp: TopicPartitionKey, reason: Any) -> None:
        """The position of ``tp`` is outside its log: wipe the store, open the task again later
        (re-seeded from a snapshot when there is one)."""
        task = self._task_of(tp)
        if task is None:
            return
        store = task.store_of[tp]
        log.warning(
            "standby task %s: its position in changelog %s-%d is outside the log (%s: records were "
            "deleted below it, or the log was recreated); wiping store %s and opening the task again%s",
            task.task_id,
            tp[0],
            tp[1],
            reason,
            store,
            " from the newest snapshot" if self.config.state_snapshot_location else "",
        )
        task.state_manager.reset_store(store)
        self._close_task(task.task_id, clean=True)  # the checkpoint no longer names the wiped store
        self._reseed.add(task.task_id)
        self._reopen_after[task.task_id] = time.monotonic() + _REOPEN_AFTER_S

    def _poll(self) -> None:
        by_tp: dict[TopicPartitionKey, list[Any]] = {}
        outside: dict[TopicPartitionKey, Any] = {}
        for msg in self._consumer.consume(1000, 0.1):
            err = msg.error()
            if err is not None:
                if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    outside[(msg.topic(), msg.partition())] = err
                elif err.code() != KafkaError._PARTITION_EOF:
                    log.debug("standby consumer: %s", err)
                continue
            by_tp.setdefault((msg.topic(), msg.partition()), []).append(msg)
        for tp, messages in by_tp.items():
            task = self._task_of(tp)
            if task is None:
                continue
            before = task.applied
            if task.apply(tp, messages) and tp not in self._paused:
                self._consumer.pause([TopicPartition(*tp)])
                self._paused.add(tp)
                self._next_refresh = min(self._next_refresh, time.monotonic() + _REFRESH_HELD_S)
            self.applied_total += task.applied - before
        for tp, err in outside.items():
            self._out_of_range(tp, err)

    def _maintain(self) -> None:
        now = time.monotonic()
        if now >= self._next_refresh:
            partitions = {tp for task in self.tasks.values() for tp in task.partitions}
            committed = fetch_committed(self._consumer, partitions, self.config.task_timeout_ms / 1000.0)
            for task in self.tasks.values():
                task.filter.update(committed)
                before = task.applied
                freed = task.release_held()
                self.applied_total += task.applied - before
                resume = [tp for tp in freed if tp in self._paused]
                if resume:
                    self._consumer.resume([TopicPartition(*tp) for tp in resume])
                    self._paused.difference_update(resume)
            held = any(task.held for task in self.tasks.values())
            self._next_refresh = now + (_REFRESH_HELD_S if held else _REFRESH_IDLE_S)
        if now >= self._next_checkpoint:
            for task in self.tasks.values():
                task.checkpoint()
            self._next_checkpoint = now + _CHECKPOINT_S
