"""``ChangelogReader``: replays changelog partitions into the stores of a task.

Each changelog partition the state manager lists is read from its start offset to the end
of the log with a :class:`platform_streams.kafka.PartitionReader`, which finds the end
from fetch responses (partition EOF / fetch high watermark), never from ListOffsets: on
some brokers ListOffsets(latest) is wrong and a restore that trusted it would stop early. The
loop counts records and tracks the last offset seen; it never assumes offsets are dense
(transaction markers take offsets on Kafka, aborted records vanish on others).

Records are applied in batches through the state manager (which calls each store's
restore callback and advances the store's offset). A checkpointed offset beyond the end
of the log (the changelog was recreated, or the memory-only broker restarted) means the
local state belongs to another log: the store is wiped and restored from the beginning, or,
with ``reseed`` (changelogs truncated below their snapshots), from the newest snapshot.

"From the beginning" of a key-value store's own changelog is absolute offset 0, not the
log's start: such a changelog is compact-only, so its start moves only when records are
deleted (``platform-streams snapshot truncate``), and replaying what is left would build a
store missing every key last written below the cut. Reading from 0 makes the broker answer
OFFSET_OUT_OF_RANGE on a truncated log; the store is then re-seeded from a snapshot or the
restore fails with ``CHANGELOG_TRUNCATED``. A window/session changelog (compact,delete)
loses old records to its retention, which the store has expired anyway: it is read from
its start.

``record_filter`` is the hook for skipping changelog records (e.g. by the ``__ps_src``
source-offset header the runtime will add, to drop records of a transaction that a
crashed producer left open); a skipped record still advances the offset.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Collection, Mapping
from operator import methodcaller
from typing import Any, cast

from platform_streams.errors import BrokerError
from platform_streams.state.changelog_format import versioned_values
from platform_streams.state.key_value_store import KeyValueBytesStore
from platform_streams.state.manager import FROM_BEGINNING, ChangelogPartition, ProcessorStateManager
from platform_streams.state.restore_read_ahead import RestoreReadAhead
from platform_streams.state.wrappers.base import innermost

__all__ = ["ChangelogReader", "RecordFilter", "StateRestoreListener", "deletes_by_retention", "read_start"]

log = logging.getLogger(__name__)

#: Returns True to apply a changelog record (a ``confluent_kafka.Message``), False to skip it.
RecordFilter = Callable[[Any], bool]
#: a record's key and value, as C callables for map() (no Python frame per record)
_key_of, _value_of = methodcaller("key"), methodcaller("value")
#: While a changelog partition is replayed the cyclic garbage collector is paused and only
#: its youngest generation is collected, once per this many applied batches. Every consumed
#: record is a GC-tracked ``Message`` that lives for one batch, so the automatic collector
#: ran a young collection every 700 of them and kept promoting the batch in hand: a quarter
#: of a restore's main-thread CPU (py-spy, bench/RESULTS.md). The collections here still free
#: young reference cycles of the other threads of the process; older cycles wait for the end
#: of the partition, when the collector is switched back on.
YOUNG_GC_EVERY_BATCHES = 50


def _batch_filter(
    keep: RecordFilter | None, topic: str, partition: int
) -> Callable[[list[Any]], list[Any]] | None:
    """``keep`` over a consumed batch of one changelog partition (None: apply everything).

    A filter with ``batch_for_partition`` (``CommittedInputFilter``) judges a batch itself;
    any other is asked record by record.
    """
    if keep is None:
        return None
    batch_for_partition = getattr(keep, "batch_for_partition", None)
    if batch_for_partition is not None:
        select: Callable[[list[Any]], list[Any]] = batch_for_partition(topic, partition)
        return select
    return lambda messages: [msg for msg in messages if keep(msg)]


class StateRestoreListener:
    """Restore progress callbacks (Kafka Streams' ``StateRestoreListener``); no-ops by default.

    ``tp`` is ``(topic, partition)``. ``end_offset_estimate`` is None: the end is only known
    once reading reaches it (it is never taken from ListOffsets).
    """

    def on_restore_start(
        self, store_name: str, tp: tuple[str, int], start_offset: int, end_offset_estimate: int | None
    ) -> None:
        """Called before the first record of a changelog partition is read."""

    def on_batch_restored(
        self, store_name: str, tp: tuple[str, int], batch_end_offset: int, num_restored: int
    ) -> None:
        """Called after each batch is applied (``num_restored`` records in this batch)."""

    def on_restore_end(self, store_name: str, tp: tuple[str, int], total_restored: int) -> None:
        """Called when the end of the log was reached."""

    def on_snapshot_restored(
        self, store_name: str, tp: tuple[str, int], snapshot_offset: int, num_records: int, seconds: float
    ) -> None:
        """A state snapshot was ingested into the store (not in Kafka Streams' interface).

        Called before the changelog tail after ``snapshot_offset`` is read (``on_restore_start``
        then starts at ``snapshot_offset + 1``); ``num_records`` keys came from the snapshot,
        downloaded, checked and ingested in ``seconds``.
        """

    def on_log_end(self, store_name: str, tp: tuple[str, int], log_start: int, log_end: int) -> None:
        """The changelog partition's start and end offsets as fetch responses report them.

        Not in Kafka Streams' interface (its ``onRestoreStart`` gets an end offset from
        ListOffsets, which some brokers answer wrongly): called after ``on_restore_start``, before
        the first batch is applied, and again whenever the end moved. What is left to
        restore is ``log_end`` minus the next offset to apply (metrics' remaining records).
        """


class ChangelogReader:
    """Reads changelog partitions to their end and applies them in batches.

    ``consumer_conf`` is a librdkafka config from the runtime: ``bootstrap.servers``, no
    group, ``isolation.level=read_committed`` under exactly-once. Reading is sequential,
    one partition after another; with ``read_ahead`` (the runtime's, across a rebalance's
    tasks) each partition's reader is opened while the one before it is read. A partition
    in ``known_empty`` restored from the beginning opens no reader: Kafka Streams' "end
    offset 0", which ListOffsets answers exactly on every broker (a fresh application's
    changelogs; a reader's opening is 50-100 ms of its start).
    """

    def __init__(
        self,
        consumer_conf: Mapping[str, Any],
        *,
        batch_size: int = 1000,
        timeout_s: float = 30.0,
        listener: StateRestoreListener | None = None,
        record_filter: RecordFilter | None = None,
        progress_every_records: int = 100_000,
        progress_every_s: float = 10.0,
        read_ahead: RestoreReadAhead | None = None,
        known_empty: Collection[tuple[str, int]] = (),
        reseed: Callable[[ProcessorStateManager, ChangelogPartition], int] | None = None,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size}")
        # A start outside the log must raise (the store is then wiped and restored from the
        # beginning, as Kafka Streams' TaskCorruptedException does), never silently restart at
        # the log's start on top of the stale store: the runtime's restore settings name
        # ``auto.offset.reset=earliest``, and Apache Kafka answers OFFSET_OUT_OF_RANGE.
        self._conf = {**consumer_conf, "auto.offset.reset": "error"}
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self._listener = listener or StateRestoreListener()
        self._record_filter = record_filter
        self._progress_records = progress_every_records
        self._progress_s = progress_every_s
        #: without one, a read-ahead with no plan: it opens each reader when it is taken
        self._read_ahead = read_ahead if read_ahead is not None else RestoreReadAhead([])
        #: changelog partitions the runtime found empty (``kafka.empty_partitions``): one
        #: restored from the beginning is done without a reader (its opening is the cost)
        self._known_empty = known_empty
        #: restores a wiped store from a snapshot; returns the offset to replay from
        #: (FROM_BEGINNING: no snapshot), for changelogs truncated below their snapshots
        self._reseed = reseed

    def restore(self, manager: ProcessorStateManager) -> dict[str, int]:
        """Replay every changelog the manager lists; returns records applied per store."""
        applied: dict[str, int] = {}
        for part in manager.changelog_offsets_to_restore():
            applied[part.store_name] = applied.get(part.store_name, 0) + self._restore_partition(
                manager, part
            )
        return applied

    def _restore_partition(self, manager: ProcessorStateManager, part: ChangelogPartition) -> int:
        first = read_start(manager, part)
        try:
            return self._replay(manager, part)
        except BrokerError as exc:
            if exc.code != "OFFSET_OUT_OF_RANGE" or first == FROM_BEGINNING:
                raise
            log.warning(
                "restore of store %s: offset %d is outside changelog %s-%d (%s); "
                "the local state does not match the log",
                part.store_name,
                first,
                part.topic,
                part.partition,
                exc,
            )
            manager.reset_store(part.store_name)
            start = self._reseed(manager, part) if self._reseed is not None else FROM_BEGINNING
            if start == FROM_BEGINNING and part.start_offset == FROM_BEGINNING:
                # offset 0 of a key-value changelog is gone and no snapshot covers it
                raise _truncated(part, 0, "and no usable snapshot re-seeds the store") from exc
            again_from = part._replace(start_offset=start)
            try:
                return self._replay(manager, again_from)
            except BrokerError as again:
                if again.code != "OFFSET_OUT_OF_RANGE":
                    raise
                # Below the log start even from the newest usable snapshot (or from offset 0
                # without one): replaying what is left would build a store missing the
                # deleted records. Refuse instead.
                what = "and no usable snapshot re-seeds the store"
                if start != FROM_BEGINNING:
                    what = "that its newest usable snapshot continues from"
                raise _truncated(part, read_start(manager, again_from), what) from again

    def _replay(self, manager: ProcessorStateManager, part: ChangelogPartition) -> int:
        store, topic, partition, start = part
        tp = (topic, partition)
        listener = self._listener
        keep = self._record_filter
        batch_size = self._batch_size
        if start == FROM_BEGINNING and tp in self._known_empty:
            # Kafka Streams' end offset 0: "nothing to be restored", the listener still told
            listener.on_restore_start(store, tp, start, 0)
            listener.on_log_end(store, tp, 0, 0)
            listener.on_restore_end(store, tp, 0)
            log.info("store %s: changelog %s-%d is empty, nothing to restore", store, topic, partition)
            return 0
        listener.on_restore_start(store, tp, start, None)
        log.info("restoring store %s from %s-%d starting at %s", store, topic, partition, _where(start))

        def log_end_seen(log_start: int, log_end: int) -> None:
            listener.on_log_end(store, tp, log_start, log_end)

        started = last_report = time.monotonic()
        total = skipped = 0
        reported_at = 0
        batch: list[tuple[bytes, bytes | None]] = []
        # record timestamps: a versioned store's version times (only read for those)
        timestamps: list[int] | None = [] if manager.restores_with_timestamps(store) else None
        last_offset: int | None = None
        select = _batch_filter(keep, topic, partition)
        reader = self._read_ahead.take(
            self._conf, topic, partition, read_start(manager, part), timeout_s=self._timeout_s
        )
        reads = reader.batches(batch_size=batch_size, on_log_end=log_end_seen)
        # only the restore that switched it off switches it on again (another thread's restore,
        # or an application that runs without it, keeps its setting)
        gc_paused = gc.isenabled()
        if gc_paused:
            gc.disable()
        applies = 0
        try:
            # read per consumed batch (the filter, keys and values taken by comprehensions, not
            # a statement loop per record); applied in batches of exactly ``batch_size`` kept
            # records (Kafka Streams' restore batches: the restore listener and the
            # remaining-records count step by them), each with its last offset (skipped
            # records included) as the store's position
            for messages in reads:
                kept = messages if select is None else select(messages)
                skipped += len(messages) - len(kept)
                read_keys = list(map(_key_of, kept))
                if None in read_keys:  # rare: a record without key is skipped, with a warning
                    kept = self._with_keys(kept, store, topic, partition)
                    skipped += len(read_keys) - len(kept)
                    read_keys = list(map(_key_of, kept))
                keys = cast("list[bytes]", read_keys)
                values = list(map(_value_of, kept))
                if timestamps is not None:  # a versioned store: plain values
                    versioned_values(kept, values)
                done = 0
                while done < len(kept):
                    upto = min(len(kept), done + batch_size - len(batch))
                    batch.extend(zip(keys[done:upto], values[done:upto], strict=True))
                    if timestamps is not None:
                        timestamps.extend(msg.timestamp()[1] for msg in kept[done:upto])
                    done = upto
                    if len(batch) < batch_size:
                        break
                    last_offset = kept[upto - 1].offset()
                    total += self._apply(manager, store, tp, batch, last_offset, timestamps)
                    batch = []
                    applies += 1
                    if gc_paused and applies % YOUNG_GC_EVERY_BATCHES == 0:
                        gc.collect(0)
                    timestamps = None if timestamps is None else []
                    now = time.monotonic()
                    if total - reported_at >= self._progress_records or now - last_report >= self._progress_s:
                        log.info(
                            "restoring store %s from %s-%d: %d records so far (offset %s)",
                            store,
                            topic,
                            partition,
                            total,
                            last_offset,
                        )
                        reported_at, last_report = total, now
                last_offset = messages[-1].offset()
        finally:
            if gc_paused:
                gc.enable()
            reader.close()
        if batch or last_offset is not None:
            total += self._apply(manager, store, tp, batch, last_offset, timestamps)
        listener.on_restore_end(store, tp, total)
        log.info(
            "restored store %s from %s-%d: %d records (%d skipped) in %.2fs, last offset %s",
            store,
            topic,
            partition,
            total,
            skipped,
            time.monotonic() - started,
            last_offset,
        )
        return total

    @staticmethod
    def _with_keys(messages: list[Any], store: str, topic: str, partition: int) -> list[Any]:
        """``messages`` without the records that have no key (a changelog record needs one)."""
        out = []
        for msg in messages:
            if msg.key() is None:
                log.warning(
                    "store %s: skipping changelog record without key at %s-%d@%s",
                    store,
                    topic,
                    partition,
                    msg.offset(),
                )
            else:
                out.append(msg)
        return out

    def _apply(
        self,
        manager: ProcessorStateManager,
        store: str,
        tp: tuple[str, int],
        batch: list[tuple[bytes, bytes | None]],
        last_offset: int | None,
        timestamps: list[int] | None,
    ) -> int:
        manager.restore(store, batch, last_offset=last_offset, timestamps=timestamps)
        if batch and last_offset is not None:
            self._listener.on_batch_restored(store, tp, last_offset, len(batch))
        return len(batch)


def _where(offset: int) -> str:
    return "the beginning" if offset == FROM_BEGINNING else f"offset {offset}"


def read_start(manager: ProcessorStateManager, part: ChangelogPartition) -> int:
    """The offset a read of ``part`` starts at: its start offset, with "from the beginning" of
    a key-value store's own changelog taken as absolute offset 0 (see the module doc)."""
    if part.start_offset != FROM_BEGINNING or not part.topic.endswith(f"-{part.store_name}-changelog"):
        return part.start_offset
    store = manager.get_store(part.store_name)
    if store is None or not isinstance(innermost(store), KeyValueBytesStore):
        return FROM_BEGINNING
    return FROM_BEGINNING if part.store_name in manager.retention_changelogs else 0


def deletes_by_retention(builder: Any) -> bool:
    """Whether the changelog config of a store ``builder`` lets retention delete records
    (``cleanup.policy`` with ``delete``: window/session stores, or a user's override of a
    key-value store's compact-only default): its log start moves by itself."""
    policy = builder.changelog_topic_config().get("cleanup.policy", "compact")
    return "delete" in {p.strip() for p in str(policy).split(",")}


def _truncated(part: ChangelogPartition, offset: int, why: str) -> BrokerError:
    return BrokerError(
        f"restore of store {part.store_name}: changelog {part.topic}-{part.partition} no longer holds "
        f"offset {offset} (records were deleted below its start) {why}; the store cannot be restored "
        "exactly (restore a snapshot covering the deleted records, or reset the application)",
        code="CHANGELOG_TRUNCATED",
    )
