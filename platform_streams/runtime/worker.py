"""``StreamWorker``: one consumer, one producer, the tasks assigned to them, and the loop.

Kafka Streams calls this a StreamThread. Under the GIL a worker is a thread whose
work is mostly C (librdkafka) plus the tasks' Python; parallelism across cores
comes from running several processes with the same ``application_id``.

The loop: consume a batch -> route records to their task's partition queue
(pausing partitions whose queue is full) -> let each task process -> resume
drained partitions -> run wall-clock punctuators -> commit every
``commit_interval_ms``. A commit flushes stores (caches may forward), waits for
every produced record to be acknowledged, then commits the consumed offsets:
at-least-once. Rebalance callbacks run inside ``consume``: revocation commits
and closes tasks; assignment creates, restores and initialises them.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.errors import StreamsError, TaskMigratedError
from platform_streams.kafka import (
    KafkaError,
    KafkaException,
    TopicPartition,
    create_consumer,
    create_producer,
)
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.collector import KafkaRecordCollector
from platform_streams.runtime.task import StreamTask
from platform_streams.runtime.task_state import TaskStateLifecycle
from platform_streams.state.cache import RecordCache
from platform_streams.topology.compiler import TopologyPlan

log = logging.getLogger(__name__)

#: records taken from librdkafka per poll
_BATCH = 5000


class WorkerState(enum.Enum):
    """Kafka Streams' StreamThread states, as the client aggregates them."""

    CREATED = "CREATED"
    STARTING = "STARTING"
    PARTITIONS_REVOKED = "PARTITIONS_REVOKED"
    PARTITIONS_ASSIGNED = "PARTITIONS_ASSIGNED"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    DEAD = "DEAD"


class StreamWorker(threading.Thread):
    """Runs the poll -> process -> punctuate -> commit loop for its assigned tasks."""

    def __init__(
        self,
        index: int,
        plan: TopologyPlan,
        config: StreamsConfig,
        *,
        partition_counts: dict[str, int],
        on_state_change: Callable[[StreamWorker, WorkerState], None],
        on_failure: Callable[[StreamWorker, BaseException], None],
        wait_until_ready: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name=f"{config.effective_client_id}-StreamThread-{index + 1}", daemon=True)
        self.index = index
        self.plan = plan
        self.config = config
        self.partition_counts = partition_counts
        self._on_state_change = on_state_change
        self._on_failure = on_failure
        self._wait_until_ready = wait_until_ready
        self.state = WorkerState.CREATED
        self.tasks: dict[TaskId, StreamTask] = {}
        self._queues: dict[tuple[str, int], deque[Any]] = {}
        self._task_of: dict[tuple[str, int], StreamTask] = {}
        self._paused: set[tuple[str, int]] = set()
        self._stop_event = threading.Event()
        self.failure: BaseException | None = None
        app = config.application_id
        self.source_topics = sorted(
            {plan.physical_topic(t, app) for s in plan.subtopologies for t in s.source_topics}
        )
        self._changelogs = {
            plan.physical_topic(topic, app)
            for sub in plan.subtopologies
            for store in sub.stores
            if (topic := plan.changelog_topic(store)) is not None
        }
        self._state_root = Path(config.state_dir) / app
        self._commit_interval_s = config.commit_interval_ms / 1000.0
        self._poll_s = config.poll_ms / 1000.0
        self._max_buffered = config.buffered_records_per_partition
        self.consumer: Any = None
        self.collector: KafkaRecordCollector | None = None
        self.state_lifecycle = TaskStateLifecycle(config)
        self.record_cache = RecordCache(config.statestore_cache_max_bytes)
        #: the client's global stores (GlobalKTable), readable by every task
        self.global_stores: dict[str, Any] = {}
        self.committed_total = 0
        self.processed_total = 0

    # -- thread ---------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Ask the loop to stop; it commits and leaves the group."""
        self._stop_event.set()

    def run(self) -> None:
        clean = False
        try:
            self._set_state(WorkerState.STARTING)
            if self._wait_until_ready is not None:
                self._wait_until_ready()
            self._start_clients()
            while not self._stop_event.is_set():
                self.run_once()
            clean = True
        except BaseException as exc:  # the client decides what a dead worker means
            self.failure = exc
            log.error("worker %s failed: %s", self.name, exc, exc_info=exc)
        finally:
            self._set_state(WorkerState.PENDING_SHUTDOWN)
            self._close(clean)
            self._set_state(WorkerState.DEAD)
            if self.failure is not None:
                self._on_failure(self, self.failure)

    def _start_clients(self) -> None:
        producer_conf = self.config.producer_configs(self.index)
        if not self._changelogs:
            # Success reports only feed changelog offset tracking: without changelogs, report
            # errors only and spare a Python callback per record (~8% of a stateless app's CPU).
            producer_conf.setdefault("delivery.report.only.error", True)
        self.collector = KafkaRecordCollector(
            lambda callback: create_producer({**producer_conf, "on_delivery": callback}),
            partition_count=lambda topic: self.partition_counts[topic],
            tracked_topics=self._changelogs,
        )
        self.consumer = create_consumer(self.config.consumer_configs(self.index))
        self.consumer.subscribe(
            self.source_topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        self._next_commit = time.monotonic() + self._commit_interval_s

    # -- the loop -------------------------------------------------------------------------

    def run_once(self) -> int:
        """One iteration: poll, process, punctuate, maybe commit. Returns records processed."""
        messages = self._poll_batch()
        touched = self._route(messages) if messages else None
        processed = 0
        for task in list(self.tasks.values()):
            processed += task.process(10_000)
        if touched:
            self._pause_backlogged(touched)
        if self._paused:
            self._resume_drained()
        now_wall = int(time.time() * 1000)
        for task in list(self.tasks.values()):
            task.punctuate_wall_clock(now_wall)
        assert self.collector is not None
        self.collector.poll()
        self.processed_total += processed
        if time.monotonic() >= self._next_commit or any(t.commit_requested for t in self.tasks.values()):
            self.commit()
        return processed

    def _poll_batch(self) -> list[Any]:
        """What librdkafka has ready; when idle, wait up to ``poll_ms`` for the first record.

        ``consume(n, timeout)`` waits for the whole timeout unless ``n`` records are ready,
        which would add up to ``poll_ms`` of latency per loop under moderate load; a
        single ``poll`` returns as soon as one record arrives.
        """
        consumer = self.consumer
        messages: list[Any] = consumer.consume(_BATCH, 0)
        if messages or any(self._queues.values()):
            return messages
        first = consumer.poll(self._poll_s)
        if first is None:
            return []
        return [first, *consumer.consume(_BATCH - 1, 0)]

    def _route(self, messages: list[Any]) -> set[tuple[str, int]]:
        """Append records to their partition queues; returns the partitions that got records."""
        queues = self._queues
        touched: set[tuple[str, int]] = set()
        for msg in messages:
            err = msg.error()
            if err is not None:
                self._on_consume_error(err)
                continue
            tp = (msg.topic(), msg.partition())
            queue = queues.get(tp)
            if queue is None:
                log.warning("dropping record of unassigned partition %s-%d", *tp)
                continue
            queue.append(msg)
            touched.add(tp)
        return touched

    def _pause_backlogged(self, touched: set[tuple[str, int]]) -> None:
        """Pause partitions whose queue is still over the limit *after* processing.

        Checked after the tasks ran, not on arrival: a batch larger than the limit that is
        processed in the same iteration is no backlog, and pausing in librdkafka drops the
        partition's prefetched records (refetched after resume), which cost more than half
        the throughput when every batch paused and resumed its partition.
        """
        queues = self._queues
        for tp in touched:
            queue = queues.get(tp)
            if queue is not None and len(queue) > self._max_buffered and tp not in self._paused:
                self.consumer.pause([TopicPartition(tp[0], tp[1])])
                self._paused.add(tp)

    def _resume_drained(self) -> None:
        low = self._max_buffered // 2
        ready = [tp for tp in self._paused if len(self._queues.get(tp, ())) <= low]
        if ready:
            self.consumer.resume([TopicPartition(t, p) for t, p in ready])
            self._paused.difference_update(ready)

    def _on_consume_error(self, err: Any) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.fatal():
            raise KafkaException(err)
        log.warning("consumer error (will retry): %s", err)

    # -- commit ---------------------------------------------------------------------------

    def commit(self) -> None:
        """Flush stores and producer, then commit consumed offsets (at-least-once)."""
        assert self.collector is not None
        for task in self.tasks.values():
            task.flush_stores()
        self.collector.flush()
        offsets: dict[tuple[str, int], int] = {}
        for task in self.tasks.values():
            offsets.update(task.offsets_to_commit())
        if offsets:
            try:
                self.consumer.commit(
                    offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
                )
            except KafkaException as exc:
                # Lost the partitions to a rebalance: the next owner reprocesses from the last
                # committed offset (at-least-once); the revocation callback closes the tasks.
                raise TaskMigratedError(f"offset commit failed: {exc}") from exc
            for task in self.tasks.values():
                task.mark_committed({tp: o for tp, o in offsets.items() if tp in task.consumed})
                task.context.commit_requested = False
            self.committed_total += 1
        self.state_lifecycle.checkpoint(self.tasks.values(), self.collector.offsets)
        self._next_commit = time.monotonic() + self._commit_interval_s

    # -- rebalance callbacks --------------------------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self._set_state(WorkerState.PARTITIONS_ASSIGNED)
        assigned = {(tp.topic, tp.partition) for tp in partitions}
        log.info("%s assigned %d partitions", self.name, len(assigned))
        app = self.config.application_id
        for sub in self.plan.subtopologies:
            topics = [self.plan.physical_topic(t, app) for t in sub.source_topics]
            numbers = {p for (t, p) in assigned if t in topics}
            for number in sorted(numbers):
                missing = [t for t in topics if (t, number) not in assigned]
                if missing:
                    raise StreamsError(
                        f"sub-topology {sub.id}: partition {number} of {missing} is not assigned with the "
                        f"rest of task {sub.id}_{number}; co-partitioned topics need the range assignor "
                        "and equal partition counts"
                    )
                self._create_task(TaskId(sub.id, number))
        self.state_lifecycle.restore(self.tasks.values())
        for task in self.tasks.values():
            task.initialize_processors()
            task.refresh_punctuation_flags()
        self._set_state(WorkerState.RUNNING)

    def _create_task(self, task_id: TaskId) -> None:
        assert self.collector is not None
        sub = self.plan.subtopologies[task_id.subtopology]
        task_dir = self._state_root / str(task_id)
        task = StreamTask(
            task_id,
            self.plan,
            sub,
            config=self.config,
            collector=self.collector,
            clock_ms=lambda: int(time.time() * 1000),
            task_dir=task_dir,
            record_cache=self.record_cache,
        )
        task.context.global_stores = self.global_stores
        task.initialize_stores()
        self.tasks[task_id] = task
        for tp in task.partitions:
            self._queues[tp] = task.queues.queues[tp]
            self._task_of[tp] = task

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self._set_state(WorkerState.PARTITIONS_REVOKED)
        if self.tasks:
            try:
                self.commit()
            except StreamsError as exc:
                log.warning("commit on revocation failed (records will be reprocessed): %s", exc)
            self._close_tasks(clean=True)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self._set_state(WorkerState.PARTITIONS_REVOKED)
        self._close_tasks(clean=False)

    def _close_tasks(self, *, clean: bool) -> None:
        written = self.collector.offsets if self.collector is not None else {}
        for task in self.tasks.values():
            try:
                self.state_lifecycle.close_task(task, written, clean=clean)
            except Exception:
                log.exception("closing task %s failed", task.task_id)
        self.tasks.clear()
        self._queues.clear()
        self._task_of.clear()
        self._paused.clear()

    def _close(self, clean: bool) -> None:
        try:
            if clean and self.tasks and self.collector is not None:
                self.commit()
        except Exception as exc:
            log.warning("final commit failed: %s", exc)
            clean = False
        try:
            self._close_tasks(clean=clean)
        finally:
            if self.consumer is not None:
                self.consumer.close()
            if self.collector is not None:
                self.collector.producer.flush(10)

    def _set_state(self, state: WorkerState) -> None:
        if self.state is not state:
            self.state = state
            self._on_state_change(self, state)
