"""One sub-topology over one partition inside a Spark task: the streaming code, fed from Spark.

A backfill must compute what the streaming application computes, so it does not
re-implement operators: each Spark task builds the very :class:`StreamTask` a worker
builds (same compiled topology, same processors, same stores and caches, in a temporary
state directory) and feeds it the partition's records in order. What the task sends goes
to a collecting :class:`RecordCollector` instead of a producer:

* records for topics (sinks, repartition topics) come out as :data:`Output` rows, with
  the partition Kafka would choose (the sink's partitioner, else murmur2 of the key);
* changelog records of the task's stores are folded into the latest value per key, and
  come out at the end as the partition's final state (for state snapshots).

Stores are flushed every ``flush_every_records`` records and at the end, as a commit
would: with caching on, that is when aggregations emit. Stream-time punctuators fire as
they do in a worker; wall-clock punctuators do not (there is no wall clock in a replay of
history): the clock a processor sees is the task's stream time.

This module imports no pyspark: it is plain Python that Spark calls.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from platform_streams.config import StreamsConfig
from platform_streams.processor.partitioner import default_partition
from platform_streams.processor.record import Headers
from platform_streams.processor.record_collector import OutgoingRecord
from platform_streams.processor.serialized_record import SerializedRecord
from platform_streams.processor.task_id import TaskId
from platform_streams.runtime.tasks.task import StreamTask
from platform_streams.serde import Serde
from platform_streams.topology.compiler import TopologyPlan, compile_topology
from platform_streams.topology.topology import Topology

__all__ = ["AppRef", "Output", "StageKey", "StageValue", "SubTopologyRunner", "TaskConfig", "load_topology"]

log = logging.getLogger(__name__)

#: A topology factory: ``"module:factory"`` (as the CLI takes) or a picklable callable.
AppRef = str | Callable[[], Any]
#: Shuffle key of a stage's input: (task partition, timestamp, source rank, sequence)
StageKey = tuple[int, int, int, Any]
#: (physical topic, key, value, timestamp, headers, offset)
StageValue = tuple[str, bytes | None, bytes | None, int, Headers, int]
#: ("record", topic, partition or -1, key, value, timestamp, headers, (task partition, n))
#: or ("state", changelog topic, partition, key, value or None, -1, None, (partition, n))
Output = tuple[str, str, int, bytes | None, bytes | None, int, Headers, tuple[int, int]]

_topologies: dict[Any, Topology] = {}


def load_topology(app: AppRef) -> Topology:
    """The application's topology, built once per process (factories give identical names)."""
    try:
        cached = _topologies.get(app)
    except TypeError:  # an unhashable factory: build every time
        cached = None
    if cached is not None:
        return cached
    if isinstance(app, str):
        from platform_streams.cli_app_loader import load_app

        topology = load_app(app).topology
    else:
        made = app()
        if isinstance(made, tuple):
            made = made[0]
        topology = made if isinstance(made, Topology) else made.build()
    try:
        _topologies[app] = topology
    except TypeError:
        pass
    return topology


class _CollectingCollector:
    """A RecordCollector that keeps what the task sends, partitioned as Kafka would."""

    def __init__(
        self, partition: int, counts: Mapping[str, int], changelogs: set[str], keep_state: bool
    ) -> None:
        self.partition = partition
        self.counts = counts
        self.changelogs = changelogs
        self.keep_state = keep_state
        self.out: list[Output] = []
        self.state: dict[str, dict[bytes, bytes | None]] = {t: {} for t in changelogs}
        self.sent = 0

    def send(self, *record: *OutgoingRecord) -> None:
        topic, key, value, timestamp, headers, partition = record
        if topic in self.changelogs:
            if self.keep_state and key is not None:
                self.state[topic][key] = value
            return
        if partition is None:
            count = self.counts.get(topic)
            partition = default_partition(key, count) if key is not None and count else -1
        self.sent += 1
        self.out.append(
            ("record", topic, partition, key, value, timestamp, headers, (self.partition, self.sent))
        )

    def partition_count(self, topic: str) -> int:
        count = self.counts.get(topic)
        if count is None:
            raise KeyError(f"backfill: partition count of {topic!r} is unknown")
        return count

    def drain(self) -> list[Output]:
        out, self.out = self.out, []
        return out

    def final_state(self) -> Iterator[Output]:
        n = 0
        for topic, latest in self.state.items():
            for key, value in latest.items():
                n += 1
                yield ("state", topic, self.partition, key, value, -1, None, (self.partition, n))


class TaskConfig:
    """A :class:`StreamsConfig` shipped to Spark tasks: its explicitly set fields, with
    serdes as :class:`~platform_streams.ops.spark.snapshots.TaskSerde` (serdes do not pickle)."""

    def __init__(self, config: StreamsConfig) -> None:
        self.config = config

    def __reduce__(self) -> tuple[Any, ...]:
        from platform_streams.ops.spark.snapshots import TaskSerde

        data = {
            k: TaskSerde(v) if isinstance(v, Serde) else v
            for k, v in self.config.model_dump(exclude_unset=True).items()
        }
        return (_rebuild_config, (data,))


def _rebuild_config(data: dict[str, Any]) -> TaskConfig:
    from platform_streams.ops.spark.snapshots import TaskSerde

    values = {k: v.serde if isinstance(v, TaskSerde) else v for k, v in data.items()}
    return TaskConfig(StreamsConfig.model_validate(values))


class SubTopologyRunner:
    """Spark ``mapPartitionsWithIndex`` function running sub-topology ``subtopology``."""

    def __init__(
        self,
        app: AppRef,
        config: StreamsConfig,
        subtopology: int,
        partition_counts: Mapping[str, int],
        *,
        flush_every_records: int = 10_000,
        keep_state: bool = False,
    ) -> None:
        self.app = app
        self._config = TaskConfig(config)
        self.subtopology = subtopology
        self.partition_counts = dict(partition_counts)
        self.flush_every_records = flush_every_records
        self.keep_state = keep_state

    def __call__(self, partition: int, items: Iterable[tuple[StageKey, StageValue]]) -> Iterator[Output]:
        iterator = iter(items)
        first = next(iterator, None)
        if first is None:
            return
        from platform_streams.ops.spark.snapshots import task_logger

        logger = task_logger(__name__)
        tmp = Path(tempfile.mkdtemp(prefix="ps-backfill-"))
        started = time.monotonic()
        processed = 0
        task: StreamTask | None = None
        try:
            task, collector = self._task(partition, tmp)
            flush_every = self.flush_every_records
            queues = {tp[0]: tp for tp in task.partitions}
            for _key, (topic, key, value, timestamp, headers, offset) in _chain(first, iterator):
                record = SerializedRecord(topic, partition, offset, key, value, timestamp, headers)
                task.add_records(queues[topic], [record])
                task.process(1)
                processed += 1
                if processed % flush_every == 0:
                    task.flush_stores()
                if collector.out:
                    yield from collector.drain()
            task.flush_stores()
            yield from collector.drain()
            if self.keep_state:
                yield from collector.final_state()
        finally:
            if task is not None:
                task.close()
            shutil.rmtree(tmp, ignore_errors=True)
        logger.info(
            "backfill task %d_%d: %d records in, %d records out in %.2fs",
            self.subtopology,
            partition,
            processed,
            collector.sent,
            time.monotonic() - started,
        )

    def _task(self, partition: int, tmp: Path) -> tuple[StreamTask, _CollectingCollector]:
        topology = load_topology(self.app)
        plan: TopologyPlan = compile_topology(topology)
        sub = plan.subtopologies[self.subtopology]
        app_id = self._config.config.application_id
        config = self._config.config.model_copy(update={"state_dir": tmp, "max_task_idle_ms": 0})
        changelogs = {
            plan.physical_topic(topic, app_id)
            for store in sub.stores
            if (topic := plan.changelog_topic(store)) is not None and plan.is_internal(topic)
        }
        collector = _CollectingCollector(partition, self.partition_counts, changelogs, self.keep_state)
        task_id = TaskId(sub.id, partition)
        made: list[StreamTask] = []
        task = StreamTask(
            task_id,
            plan,
            sub,
            config=config,
            collector=collector,
            clock_ms=lambda: max(made[0].context.stream_time, 0) if made else 0,
            task_dir=tmp / app_id / str(task_id),
        )
        made.append(task)
        task.initialize_stores()
        task.initialize_processors()
        task.refresh_punctuation_flags()
        return task, collector


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
