"""``StreamTask``: one sub-topology over one partition number.

Owns the task's processors (a :class:`TaskGraph`), its stores, its input buffers
and its consumed positions. The worker (or the TopologyTestDriver) feeds it raw
records and calls ``process``, ``punctuate`` and the commit steps; the task itself
never talks to Kafka, so the same code runs in production and in tests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from time import perf_counter
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import DeserializationError, ProcessorError, SerializationError, StreamsError
from platform_streams.processor.api import PunctuationType
from platform_streams.processor.async_processing import in_flight_work
from platform_streams.processor.context import TaskContext
from platform_streams.processor.exception_handlers import HandlerResponse, RecordExceptionHandler
from platform_streams.processor.fusion import failed_sink, node_of_traceback
from platform_streams.processor.graph import TaskGraph
from platform_streams.processor.partitioner import PlacementChecks
from platform_streams.processor.punctuation import PunctuationSchedule
from platform_streams.processor.record_collector import RecordCollector
from platform_streams.processor.source_hooks import BatchHooks
from platform_streams.processor.source_position import SourcePositionHeader
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.tasks.partition_group import PartitionGroup, TopicPartitionKey
from platform_streams.state.manager import ProcessorStateManager
from platform_streams.state.restore import deletes_by_retention
from platform_streams.topology.compiler import SubTopologyPlan, TopologyPlan

log = logging.getLogger(__name__)


def store_changelogs(plan: TopologyPlan, sub: SubTopologyPlan, application_id: str) -> dict[str, str]:
    """Store name -> physical changelog topic, for the stores of ``sub`` that log changes.

    Active tasks write these topics, standby tasks tail them, the worker tracks their
    written offsets: one derivation keeps the three agreeing on which topics they are.
    """
    return {
        store: plan.physical_topic(topic, application_id)
        for store in sub.stores
        if (topic := plan.changelog_topic(store)) is not None
    }


def retention_changelogs(plan: TopologyPlan, sub: SubTopologyPlan) -> set[str]:
    """The stores of ``sub`` whose changelog config lets retention delete records: a restore
    of a key-value store "from the beginning" starts at their log start, not at offset 0
    (:func:`~platform_streams.state.restore.read_start`)."""
    stores = plan.topology.stores
    return {store for store in sub.stores if store in stores and deletes_by_retention(stores[store])}


#: the setting that skips records that cannot be deserialized, as the error names it
SKIP_UNDECODABLE = "deserialization_exception_handler=log_and_continue"


def skip_or_raise_deserialization(
    handler: RecordExceptionHandler, raw: Any, exc: BaseException, what: str
) -> None:
    """Apply the deserialization exception handler: return to skip ``raw``, or raise.

    Shared by stream tasks and the global store updater, so a record that cannot be read
    fails (or is skipped and dead-lettered) the same way wherever it comes from.
    """
    if handler.handle(raw, exc) is HandlerResponse.FAIL:
        error = DeserializationError(
            f"cannot deserialize {what}: {type(exc).__name__}: {exc}",
            topic=raw.topic(),
            partition=raw.partition(),
            offset=raw.offset(),
        )
        # after the record's position: the one line a stopped application leaves says how
        # to go on past such a record (the StreamsConfig field, as config files spell it)
        error.args = (f"{error}; {SKIP_UNDECODABLE} skips such records",)
        raise error from exc


class StreamTask:
    """Processes the records of one (sub-topology, partition) in stream-time order."""

    def __init__(
        self,
        task_id: TaskId,
        plan: TopologyPlan,
        sub: SubTopologyPlan,
        *,
        config: StreamsConfig,
        collector: RecordCollector,
        clock_ms: Callable[[], int],
        task_dir: Path,
        record_cache: Any = None,
        key_placement: PlacementChecks | None = None,
    ) -> None:
        self.task_id = task_id
        self.plan = plan
        self.sub = sub
        self.collector = collector
        self.clock_ms = clock_ms
        self.config = config
        changelogs = store_changelogs(plan, sub, config.application_id)
        self.context = TaskContext(
            config=config,
            task_id=task_id,
            collector=collector,
            clock_ms=clock_ms,
            task_dir=task_dir,
            changelog_topics=changelogs,
            registrar=None,
        )
        #: the task's stores: registration, checkpoints, restore bookkeeping, close/wipe
        self.state_manager = ProcessorStateManager(task_id, task_dir, eos=config.exactly_once)
        self.state_manager.retention_changelogs = retention_changelogs(plan, sub)
        self.context.registrar = self.state_manager
        if record_cache is not None:
            self.context.record_cache = record_cache
        dlq = config.errors_dead_letter_queue_topic_name
        self.deserialization_handler = RecordExceptionHandler(
            "deserialization", config.deserialization_exception_handler, dlq, collector, self.context
        )
        self.processing_handler = RecordExceptionHandler(
            "processing", config.processing_exception_handler, dlq, collector, self.context
        )
        #: serialization/send failures of sink records (Kafka Streams' production handler)
        self.production_handler = RecordExceptionHandler(
            "production", config.production_exception_handler, dlq, collector, self.context
        )
        #: metrics hooks, set by the metrics recorder (None: nothing measured). ``on_punctuate``
        #: gets the ``perf_counter()`` reading taken before a punctuator that then returned;
        #: ``on_record_lateness`` stream time minus a record's timestamp (ms, 0 if on time),
        #: and is only ever called when the recording level is DEBUG (the fused source code
        #: of INFO tasks does not measure lateness at all).
        self.on_punctuate: Callable[[float], None] | None = None
        self.on_record_lateness: Callable[[int], None] | None = None
        debug = config.metrics_recording_level in ("DEBUG", "TRACE")
        topics = [plan.physical_topic(t, config.application_id) for t in sub.sources_by_topic]
        self.graph = TaskGraph(
            plan,
            sub,
            self.context,
            on_deserialization_error=self._on_deserialization_error,
            on_invalid_timestamp=self._on_invalid_timestamp,
            on_record_lateness=self._record_lateness if debug else None,
            placement_checks=key_placement.checks_for(topics, task_id.partition) if key_placement else None,
            batch_hooks=BatchHooks(self._handle_failure, self._punctuate_after, self._batch_done),
            on_node_failure=self._node_failed,
        )
        self.partitions: list[TopicPartitionKey] = [
            (topic, task_id.partition) for topic in self.graph.sources
        ]
        self.queues = PartitionGroup(self.partitions, config.max_task_idle_ms)
        #: (topic, partition) -> offset of the last record processed
        self.consumed: dict[TopicPartitionKey, int] = {}
        #: offsets to commit although nothing was processed: the group lost them (a repair
        #: deleted it) and the task started from the repair's saved copy instead
        self.recommit: dict[TopicPartitionKey, int] = {}
        # changelog writes carry the input position they were made for (see source_position)
        self.context.source_position = SourcePositionHeader(self.partitions, self.consumed)
        #: (topic, partition) -> offset last committed (next offset to read)
        self.committed: dict[TopicPartitionKey, int] = {}
        self._changelog_partitions = {(topic, task_id.partition) for topic in changelogs.values()}
        self.records_processed = 0
        #: records the exception handlers skipped (CONTINUE); see :attr:`records_skipped`
        self.records_skipped_by_handlers = 0

    # -- lifecycle ------------------------------------------------------------------------

    def initialize_stores(self) -> None:
        """Build and init this task's stores; they register with the registrar for restore."""
        for name in self.sub.stores:
            builder = self.plan.topology.stores[name]
            store = builder.build()
            store.init(self.context, store)

    def initialize_processors(self) -> None:
        """Init processors (after stores are restored), so ``init`` may read state."""
        self.graph.init()

    def close(self, *, wipe: bool = False) -> None:
        """Close processors, then stores; ``wipe`` deletes the task's local state directory.

        State flushing and checkpointing are the caller's job (they belong to a commit).
        """
        try:
            self.graph.close()
        finally:
            self.state_manager.close(wipe=wipe)

    def store(self, name: str) -> Any | None:
        """The open store ``name`` (a processor's connected store first, else the state
        manager's), None if this task has none (a query's view, see runtime/api.py)."""
        store = self.context.stores.get(name)
        return store if store is not None else self.state_manager.get_store(name)

    @property
    def records_skipped(self) -> int:
        """Records dropped: skipped by an exception handler, or dropped by the task (invalid
        timestamp) or a processor (null key or value, late record: ``context.dropped_records``),
        Kafka Streams' ``dropped-records`` sensor, which every one of these records."""
        return self.records_skipped_by_handlers + self.context.dropped_records

    @property
    def records_dead_lettered(self) -> int:
        """Records the exception handlers sent to the dead-letter topic."""
        handlers = (self.deserialization_handler, self.processing_handler, self.production_handler)
        return sum(handler.dead_lettered for handler in handlers)

    @property
    def records_dead_letters_truncated(self) -> int:
        """Of those, the dead letters cut to fit the size limit (processor/dead_letters.py)."""
        handlers = (self.deserialization_handler, self.processing_handler, self.production_handler)
        return sum(handler.dead_letters_truncated for handler in handlers)

    @property
    def changelog_partitions(self) -> frozenset[tuple[str, int]]:
        """The changelog partitions of this task's stores."""
        return frozenset(self._changelog_partitions)

    def changelog_offsets(self, written: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The changelog offsets this task's stores reflect, of ``written`` (the collector's
        last written offset per changelog partition)."""
        mine = {tp: off for tp, off in written.items() if tp in self._changelog_partitions}
        # A store whose changelog is its own source topic (topology_optimization) is never
        # written to by us: it reflects the source up to the last record processed.
        for tp in self._changelog_partitions.intersection(self.consumed):
            mine[tp] = self.consumed[tp]
        return mine

    # -- processing -----------------------------------------------------------------------

    def add_records(self, tp: TopicPartitionKey, records: list[Any]) -> int:
        return self.queues.add(tp, records)

    def process(self, max_records: int) -> int:
        """Process up to ``max_records`` buffered records; returns how many were processed."""
        work = in_flight_work(self.context)
        if work is not None:  # async processors: complete what finished; take what they have room for
            work.bind(self._handle_failure, self._node_failed)
            max_records = work.room(max_records)
            if not max_records:
                return 0
        sources = self.graph.sources
        ctx = self.context
        consumed = self.consumed
        single = self.queues.single_queue
        done = 0
        if single is not None:
            if not single:
                return 0
            batch = self.graph.batches.get(self.partitions[0][0])
            if batch is not None:  # the loop below, fused with the source (fused_source.py)
                return batch(single, min(len(single), max_records))
            process_one = sources[self.partitions[0][0]]
            popleft = single.popleft
            last = None
            try:
                for _ in range(min(len(single), max_records)):
                    msg = popleft()
                    ctx.current = msg
                    try:
                        process_one(msg)
                    except Exception as exc:
                        self._handle_failure(msg, exc)
                    last = msg
                    done += 1
                    if ctx.has_stream_punctuation:
                        self._punctuate_after(msg)
            finally:
                self._batch_done(last, done)
            return done
        now = self.clock_ms()
        while done < max_records and self.queues.processable(now):
            msg = self.queues.next_record()
            if msg is None:
                break
            ctx.current = msg
            try:
                sources[msg.topic()](msg)
            except Exception as exc:
                self._handle_failure(msg, exc)
            consumed[(msg.topic(), msg.partition())] = msg.offset()
            done += 1
            if ctx.has_stream_punctuation:
                self.punctuate_stream_time()
        if ctx.current is not None:
            ctx.last_record = ctx.current
        ctx.current = None
        self.records_processed += done
        return done

    def _punctuate_after(self, msg: Any) -> None:
        """A fused batch's record is done and the task has stream-time punctuators."""
        self.consumed[self.partitions[0]] = msg.offset()  # punctuators' writes name it
        self.punctuate_stream_time()

    def _batch_done(self, last: Any, done: int) -> None:
        """A fused batch ended (returning or raising): what the loop of :meth:`process` does
        in its ``finally``."""
        ctx = self.context
        if last is not None:
            self.consumed[self.partitions[0]] = last.offset()
            ctx.last_record = last
        ctx.current = None
        self.records_processed += done

    def _node_failed(self, exc: Exception, node: str) -> bool:
        """Node ``node``'s own work raised ``exc`` (``NodeFailure``, Kafka Streams'
        ``ProcessorNode.process``): the processing exception handler decides for that node
        alone -- return False to skip the record there (its siblings still get it), or raise
        naming the node. True (re-raise unchanged) for what no node handles: a node's error
        already decided on (a ``StreamsError``, as Kafka's FailedProcessingException, and
        internal errors such as a migration), a sink's failure (the production handler's, at
        :meth:`_handle_failure`), and errors raised when no input record is being processed
        (a punctuator's or a commit's cache flush: they fail as before)."""
        msg = self.context.current
        if msg is None or isinstance(exc, StreamsError) or failed_sink(exc) is not None:
            return True
        self._skip_or_fail(self.processing_handler, msg, exc, node)
        return False

    def _handle_failure(self, msg: Any, exc: Exception) -> None:
        """An error left the record's processing (a sink's, or one outside every node):
        apply the production or processing exception handler, return to skip the record,
        or raise."""
        # a sink that could not serialize or send its record: the production handler decides
        sink = failed_sink(exc)
        in_sink = sink is not None
        if isinstance(exc, StreamsError) and not (in_sink and isinstance(exc, SerializationError)):
            raise exc
        node = sink or node_of_traceback(exc.__traceback__)
        handler = self.production_handler if in_sink else self.processing_handler
        self._skip_or_fail(handler, msg, exc, node)

    def _skip_or_fail(
        self, handler: RecordExceptionHandler, msg: Any, exc: Exception, node: str | None
    ) -> None:
        """``handler``'s decision on ``msg``: return to skip it (counted), or raise naming ``node``."""
        if handler.handle(msg, exc) is HandlerResponse.CONTINUE:
            self.records_skipped_by_handlers += 1
            return
        raise ProcessorError(
            f"{type(exc).__name__}: {exc}",
            node=node,
            task_id=str(self.task_id),
            topic=msg.topic(),
            partition=msg.partition(),
            offset=msg.offset(),
        ) from exc

    def _on_deserialization_error(self, msg: Any, exc: BaseException) -> None:
        skip_or_raise_deserialization(self.deserialization_handler, msg, exc, "record")
        self.records_skipped_by_handlers += 1

    def _on_invalid_timestamp(self, msg: Any, timestamp: int) -> None:
        """Kafka Streams' LogAndSkipOnInvalidTimestamp: a negative timestamp cannot be ordered."""
        self.context.dropped_records += 1
        log.warning(
            "skipping record with invalid timestamp %d at topic %s partition %d offset %d",
            timestamp,
            msg.topic(),
            msg.partition(),
            msg.offset(),
        )

    # -- punctuation ----------------------------------------------------------------------

    def punctuate_stream_time(self) -> int:
        return self.context.punctuations.fire_due(
            PunctuationType.STREAM_TIME, self.context.stream_time, self._run_punctuator
        )

    def punctuate_wall_clock(self, now_ms: int | None = None) -> int:
        now = self.clock_ms() if now_ms is None else now_ms
        return self.context.punctuations.fire_due(PunctuationType.WALL_CLOCK_TIME, now, self._run_punctuator)

    def refresh_punctuation_flags(self) -> None:
        """Recompute whether stream-time punctuators exist (after cancellations); ``schedule``
        sets the flag itself, so a schedule made inside ``process`` takes effect at once."""
        self.context.has_stream_punctuation = any(
            s.punctuation_type is PunctuationType.STREAM_TIME for s in self.context.punctuations.schedules
        )

    def _record_lateness(self, lateness_ms: int) -> None:
        hook = self.on_record_lateness
        if hook is not None:
            hook(lateness_ms)

    def _run_punctuator(self, schedule: PunctuationSchedule, now_ms: int) -> None:
        previous, self.context.current = self.context.current, None
        started = perf_counter()  # punctuations are rare: timing each one costs nothing measurable
        try:
            schedule.callback(now_ms)
        except StreamsError:
            raise
        except Exception as exc:
            raise ProcessorError(
                f"punctuator failed: {type(exc).__name__}: {exc}",
                node=schedule.node_name,
                task_id=str(self.task_id),
            ) from exc
        finally:
            self.context.current = previous
        hook = self.on_punctuate
        if hook is not None:
            hook(started)

    # -- commit ---------------------------------------------------------------------------

    def offsets_to_commit(self) -> dict[TopicPartitionKey, int]:
        """Next offsets to read for partitions that progressed since the last commit, and the
        ones to commit again (:attr:`recommit`)."""
        out = {tp: offset + 1 for tp, offset in self.consumed.items() if self.committed.get(tp) != offset + 1}
        for tp, offset in self.recommit.items():
            out.setdefault(tp, offset)
        return out

    def mark_committed(self, offsets: dict[TopicPartitionKey, int]) -> None:
        self.committed.update(offsets)
        for tp in offsets:
            self.recommit.pop(tp, None)

    def flush_caches(self) -> None:
        """Push dirty cache entries downstream (upstream stores first), keeping disk as it is.

        The first step of a commit: what caches forward must be produced, and the input
        offsets committed, before the stores write their data to disk (see the worker). Async
        processors complete what they have in flight first: the offsets committed cover it."""
        self.complete_in_flight()
        stores = self.context.stores
        for name in self._store_flush_order():
            flush_cache = getattr(stores.get(name), "flush_cache", None)
            if flush_cache is not None:
                flush_cache()

    def complete_in_flight(self) -> int:
        """Wait for the async processors' calls in flight and complete them (forward their
        results on this thread); returns how many completed (0: the task has none)."""
        work = in_flight_work(self.context)
        if work is None:
            return 0
        work.bind(self._handle_failure, self._node_failed)
        return work.complete_all()

    def _store_flush_order(self) -> list[str]:
        stores = self.context.stores
        order = [n for node in self.sub.nodes for n in getattr(node, "stores", ())]
        return list(dict.fromkeys([*order, *stores]))

    def flush_stores(self) -> None:
        """Flush caches and stores, upstream first: a cache flush forwards records that may
        update stores further down, which must then be flushed in the same commit."""
        stores = self.context.stores
        for name in self._store_flush_order():
            store = stores.get(name)
            if store is not None:
                store.flush()

    @property
    def commit_requested(self) -> bool:
        return self.context.commit_requested


def start_task(
    task_id: TaskId,
    plan: TopologyPlan,
    state_root: Path,
    global_stores: Mapping[str, Any],
    config: StreamsConfig,
    collector: RecordCollector,
    clock_ms: Callable[[], int],
    record_cache: Any = None,
    key_placement: PlacementChecks | None = None,
) -> StreamTask:
    """The task ``task_id`` of ``plan`` with its stores initialised, its processors not yet.

    The workers and the test driver build their tasks the same way (state under
    ``state_root/<task id>``, the client's global stores readable by every task); they then
    restore (the workers) and initialise the processors once all their tasks exist.
    """
    task = StreamTask(
        task_id,
        plan,
        plan.subtopologies[task_id.subtopology],
        config=config,
        collector=collector,
        clock_ms=clock_ms,
        task_dir=state_root / str(task_id),
        record_cache=record_cache,
        key_placement=key_placement,
    )
    task.context.global_stores = global_stores
    task.initialize_stores()
    return task
