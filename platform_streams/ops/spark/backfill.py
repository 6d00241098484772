"""Backfill on Spark: run an application's own topology over historical input.

The streaming runtime runs one task per (sub-topology, partition); a backfill runs the
same tasks (:class:`~platform_streams.ops.spark.task_runner.SubTopologyRunner`), one Spark
task each, stage by stage::

    input    Kafka offset/time ranges read in tasks (records keep their Kafka partition), or
             a Parquet dataset of (key, value, timestamp) rows, placed as the live topic's
             producers place them (murmur2, or CRC32 for librdkafka's default; see
             :mod:`.key_placement`, which also reports topics that are not murmur2-placed)
    stage i  sub-topology i: shuffle its input by task partition, sorted by timestamp (then
             source and offset), run the task; what it sends to a repartition topic is the
             input of the next stage -- the repartition topic becomes a Spark shuffle
    output   records of the application's output topics, to Parquet or to Kafka
    state    optionally each store partition's final state, as snapshots a streaming
             application restores from (see :func:`backfill`)

Stages follow the data flow between sub-topologies (a topic written by one and read by
another); a cycle cannot be replayed stage by stage and is refused. Each stage's output is
persisted, so every sub-topology runs once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pyspark import RDD, StorageLevel
from pyspark.sql import SparkSession

from platform_streams.config import StreamsConfig
from platform_streams.errors import BrokerError, TopologyError
from platform_streams.kafka import KafkaAdmin
from platform_streams.kafka.authorized import missing_operations, not_allowed
from platform_streams.ops.spark.final_state import commit_input_offsets, seed_and_snapshot
from platform_streams.ops.spark.kafka_ranges import (
    OffsetRange,
    Position,
    RawRecord,
    admin_conf,
    plan_offset_ranges,
)
from platform_streams.ops.spark.kafka_source import KafkaReader, read_ranges, resolve_reader
from platform_streams.ops.spark.key_placement import Partitioner, PlacementProbe, place_key, report_misplaced
from platform_streams.ops.spark.task_runner import AppRef, Output, SubTopologyRunner, load_topology
from platform_streams.query.placement import store_source_topics
from platform_streams.state.snapshots import SnapshotManifest, SnapshotStore, open_snapshot_store
from platform_streams.topology.compiler import SubTopologyPlan, TopologyPlan, compile_topology

__all__ = [
    "BackfillResult",
    "KafkaInput",
    "KafkaOutput",
    "ParquetInput",
    "ParquetOutput",
    "backfill",
    "stage_order",
]

log = logging.getLogger(__name__)

_OUTPUT_SCHEMA = "topic STRING, partition INT, key BINARY, value BINARY, timestamp BIGINT"


@dataclass(frozen=True)
class KafkaInput:
    """Source topics read from Kafka between two positions (offsets, times, earliest/latest).

    ``topics`` None means every external source topic of the topology. Positions are
    ``"earliest"``/``"latest"``, a timestamp in ms, or ``{(topic, partition): offset}``.
    ``reader`` chooses Spark's Kafka source or confluent-kafka (:mod:`.kafka_source`;
    None: ``$PLATFORM_STREAMS_SPARK_KAFKA_READER`` or auto); both read the same records.
    """

    topics: tuple[str, ...] | None = None
    start: Position = "earliest"
    end: Position = "latest"
    isolation_level: str = "read_committed"
    max_offsets_per_task: int = 2_000_000
    reader: KafkaReader | None = None


@dataclass(frozen=True)
class ParquetInput:
    """Historical records of source topic ``topic`` as a Parquet dataset (key, value, timestamp).

    ``num_partitions`` is the topic's partition count: records go where the topic's
    producers put them, ``partitioner`` ``"murmur2"`` (Java's, librdkafka ``murmur2_random``)
    or ``"consistent"`` (librdkafka's default ``consistent_random``: CRC32), so that the
    backfilled state of a key is in the task its live records reach. Rows with a null key
    are spread round-robin.
    """

    path: str
    topic: str
    num_partitions: int
    key_column: str = "key"
    value_column: str = "value"
    timestamp_column: str = "timestamp"
    partitioner: Partitioner = "murmur2"


@dataclass(frozen=True)
class ParquetOutput:
    """Output records as Parquet: columns topic, partition, key, value, timestamp."""

    path: str
    mode: str = "overwrite"


@dataclass(frozen=True)
class KafkaOutput:
    """Output records produced to their topics (which must exist), in the partition Kafka
    would choose. ``producer_conf`` defaults to the application's producer settings."""

    producer_conf: Mapping[str, Any] | None = None


@dataclass
class BackfillResult:
    """What a backfill read and wrote."""

    stages: list[int] = field(default_factory=list)
    ranges: list[OffsetRange] = field(default_factory=list)
    records_out: dict[str, int] = field(default_factory=dict)
    output: str | None = None
    #: snapshots of the final state (when asked for), covering the seeded changelogs
    snapshots: list[SnapshotManifest] = field(default_factory=list)
    #: source topics feeding stores whose keys are not murmur2-placed -> what showed it
    misplaced_topics: dict[str, str] = field(default_factory=dict)
    #: the Kafka reader of the Kafka inputs ("spark-kafka" or "confluent"), "" without any
    reader: str = ""
    seconds: float = 0.0

    @property
    def end_offsets(self) -> dict[tuple[str, int], int]:
        """Next offset to read per input partition: where a streaming app continues."""
        ends: dict[tuple[str, int], int] = {}
        for r in self.ranges:
            ends[(r.topic, r.partition)] = max(ends.get((r.topic, r.partition), 0), r.end)
        return ends

    def summary(self) -> str:
        out = ", ".join(f"{t}={n}" for t, n in sorted(self.records_out.items())) or "nothing"
        return f"backfill ran sub-topologies {self.stages} in {self.seconds:.1f}s; wrote {out}"


def stage_order(plan: TopologyPlan) -> list[SubTopologyPlan]:
    """Sub-topologies in data-flow order (writers of a topic before its readers)."""
    subs = plan.subtopologies
    upstream = {
        s.id: {w.id for w in subs if w.id != s.id and set(w.sink_topics) & set(s.source_topics)} for s in subs
    }
    for sub in subs:
        if set(sub.sink_topics) & set(sub.source_topics):
            raise TopologyError(f"sub-topology {sub.id} reads a topic it writes: it cannot be backfilled")
    ordered: list[SubTopologyPlan] = []
    done: set[int] = set()
    while len(ordered) < len(subs):
        ready = [s for s in subs if s.id not in done and upstream[s.id] <= done]
        if not ready:
            raise TopologyError("the sub-topologies form a cycle through their topics: cannot backfill")
        for sub in ready:
            ordered.append(sub)
            done.add(sub.id)
    return ordered


def _kafka_stage_records(
    physical: Mapping[str, str], ranks: Mapping[str, int], records: Iterable[RawRecord]
) -> Iterator[tuple[Any, Any]]:
    for topic, partition, offset, key, value, ts, headers in records:
        logical = physical[topic]
        yield (partition, ts, ranks[logical], offset), (topic, key, value, ts, headers, offset)


def _parquet_stage_record(
    topic: str, rank: int, partitions: int, partitioner: Partitioner, item: tuple[tuple[Any, Any, Any], int]
) -> tuple[Any, Any]:
    (key, value, ts), index = item
    key = bytes(key) if key is not None else None
    value = bytes(value) if value is not None else None
    ts = int(ts) if ts is not None else 0
    partition = place_key(key, partitions, partitioner) if key is not None else index % partitions
    return (partition, ts, rank, index), (topic, key, value, ts, None, index)


def _next_stage_record(rank: int, row: Output) -> tuple[Any, Any]:
    _kind, topic, partition, key, value, ts, headers, seq = row
    return (partition, ts, rank, seq), (topic, key, value, ts, headers, -1)


def _watched_stage_records(
    logical: Mapping[str, str], ranks: Mapping[str, int], probe: PlacementProbe, records: Iterable[RawRecord]
) -> Iterator[tuple[Any, Any]]:
    return _kafka_stage_records(logical, ranks, probe.watch(records))


def _is_record_of(topic: str, row: Output) -> bool:
    return row[0] == "record" and row[1] == topic


def _add(a: int, b: int) -> int:
    return a + b


def _task_partition(key: tuple[Any, ...]) -> int:
    return int(key[0])


def backfill(
    spark: SparkSession,
    app: AppRef,
    config: StreamsConfig,
    inputs: Sequence[KafkaInput | ParquetInput],
    output: ParquetOutput | KafkaOutput | None = None,
    *,
    sink_partitions: Mapping[str, int] | None = None,
    final_state: SnapshotStore | str | Path | None = None,
    commit_offsets: bool = False,
    flush_every_records: int = 10_000,
) -> BackfillResult:
    """Run the topology of ``app`` over ``inputs`` on Spark and write what it outputs.

    ``app`` is ``"module:factory"`` or a picklable factory returning a Topology or a
    StreamsBuilder; executors build it themselves. ``config`` supplies the application id,
    default serdes, exception handlers and caching; with Kafka input or output, also the
    connection. Every external source topic must be covered by an input. Output records
    get the partition Kafka would give them: ``sink_partitions`` names the output topics'
    partition counts, else they are looked up when Kafka is used (else -1: unknown).

    ``final_state`` (a snapshot location) hands the end state to the streaming application:
    each key-value store's changelog is seeded with it and snapshots of it are published
    (:mod:`.final_state`); ``commit_offsets`` then commits the application's group at the
    Kafka offsets the backfill read up to, so the application continues from there.
    """
    started = time.monotonic()
    plan = compile_topology(load_topology(app))
    app_id = config.application_id
    _check_authorized(plan, config, inputs, output)
    sc = spark.sparkContext
    result = BackfillResult()
    sources: dict[str, list[RDD[Any]]] = {}
    counts: dict[str, int] = {}
    ranks = {t: i for i, t in enumerate(sorted({t for s in plan.subtopologies for t in s.source_topics}))}
    consumer_conf = config.restore_consumer_configs()
    keyed = {t for topics in store_source_topics(plan, app_id).values() for t in topics}
    probes: list[PlacementProbe] = []
    for spec in inputs:
        if isinstance(spec, ParquetInput):
            counts[spec.topic] = spec.num_partitions
            physical = plan.physical_topic(spec.topic, app_id)
            if spec.partitioner != "murmur2" and physical in keyed:
                result.misplaced_topics[physical] = f"Parquet input placed by {spec.partitioner}"
            frame = spark.read.parquet(spec.path).select(
                spec.key_column, spec.value_column, spec.timestamp_column
            )
            rank, n, phys = (
                ranks.get(spec.topic, 0),
                spec.num_partitions,
                plan.physical_topic(spec.topic, app_id),
            )
            place = partial(_parquet_stage_record, phys, rank, n, spec.partitioner)
            rdd = frame.rdd.map(tuple).zipWithIndex().map(place)
            sources.setdefault(spec.topic, []).append(rdd)
        else:
            topics = list(spec.topics or plan.external_source_topics())
            with KafkaAdmin(admin_conf(consumer_conf)) as admin:
                counts.update({t: int(n or 0) for t, n in admin.partition_counts(topics).items()})
            result.reader = resolve_reader(spark, consumer_conf, spec.reader)
            probe = PlacementProbe(sc, {t: counts[t] for t in topics if t in keyed and counts.get(t)})
            probes.append(probe)
            for topic in topics:
                ranges = plan_offset_ranges(
                    consumer_conf,
                    [topic],
                    start=spec.start,
                    end=spec.end,
                    max_offsets_per_range=spec.max_offsets_per_task,
                )
                result.ranges.extend(ranges)
                if not ranges:
                    continue
                logical = {plan.physical_topic(topic, app_id): topic}
                read = read_ranges(
                    spark,
                    consumer_conf,
                    ranges,
                    isolation_level=spec.isolation_level,
                    reader=result.reader,
                )
                rdd = read.mapPartitions(partial(_watched_stage_records, logical, ranks, probe))
                sources.setdefault(topic, []).append(rdd)
    counts.update(plan.resolve_partitions(counts))
    counts.update(_sink_partitions(plan, config, counts, inputs, output, sink_partitions))
    physical_counts = {plan.physical_topic(t, app_id): n for t, n in counts.items()}
    readers = {t for s in plan.subtopologies for t in s.source_topics}
    outputs: list[RDD[Any]] = []
    persisted: list[RDD[Any]] = []
    try:
        for sub in stage_order(plan):
            inputs_of = [rdd for t in sub.source_topics for rdd in sources.get(t, [])]
            if not inputs_of:
                log.warning("sub-topology %d has no input in this backfill: skipped", sub.id)
                continue
            tasks = max(counts[t] for t in sub.source_topics)
            runner = SubTopologyRunner(
                app,
                config,
                sub.id,
                physical_counts,
                flush_every_records=flush_every_records,
                keep_state=final_state is not None,
            )
            sc.setJobDescription(f"backfill {app_id}: sub-topology {sub.id} ({tasks} tasks)")
            stage = (
                sc.union(inputs_of)
                .repartitionAndSortWithinPartitions(tasks, partitionFunc=_task_partition)
                .mapPartitionsWithIndex(runner)
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            persisted.append(stage)
            result.stages.append(sub.id)
            for topic in sub.sink_topics:
                phys = plan.physical_topic(topic, app_id)
                records = stage.filter(partial(_is_record_of, phys))
                if topic in readers:
                    sources.setdefault(topic, []).append(
                        records.map(partial(_next_stage_record, ranks[topic]))
                    )
                if not plan.is_internal(topic):
                    outputs.append(records)
        result.records_out = _write_output(spark, config, outputs, output, result)
        for probe in probes:  # the stages ran: the tasks' counts are in
            for topic, seen in probe.misplaced().items():
                result.misplaced_topics[topic] = f"{seen} records outside their murmur2 partition"
        report_misplaced(result.misplaced_topics, config, publish=final_state is not None or commit_offsets)
        if final_state is not None and persisted:
            sc.setJobDescription(f"backfill {app_id}: seed changelogs, write state snapshots")
            result.snapshots = _final_state(plan, config, counts, sc.union(persisted), final_state)
        if commit_offsets:
            commit_input_offsets(config, result.end_offsets)
    finally:
        for rdd in persisted:
            rdd.unpersist()
        sc.setJobDescription(None)  # type: ignore[arg-type]
    result.seconds = time.monotonic() - started
    log.info("%s", result.summary())
    return result


def _check_authorized(
    plan: TopologyPlan,
    config: StreamsConfig,
    inputs: Sequence[KafkaInput | ParquetInput],
    output: ParquetOutput | KafkaOutput | None,
) -> None:
    """Refuse in one line, before any Spark job, when the principal may not read an input
    or write an output topic: found later, the refusal would surface as a Python worker's
    stack trace after the producers' delivery timeout."""
    topics: dict[str, set[str]] = {}
    for spec in inputs:
        if isinstance(spec, KafkaInput):
            for topic in spec.topics or plan.external_source_topics():
                topics.setdefault(plan.physical_topic(topic, config.application_id), set()).add("READ")
    if isinstance(output, KafkaOutput):
        for topic in plan.external_sink_topics():
            topics.setdefault(topic, set()).add("WRITE")
    if not topics:
        return
    with KafkaAdmin(admin_conf(config.restore_consumer_configs())) as admin:
        missing = missing_operations(admin, {t: sorted(ops) for t, ops in topics.items()}, {})
    if missing:
        raise BrokerError(not_allowed(missing, "spark"), code="TOPIC_AUTHORIZATION_FAILED")


def _sink_partitions(
    plan: TopologyPlan,
    config: StreamsConfig,
    known: Mapping[str, int],
    inputs: Sequence[KafkaInput | ParquetInput],
    output: ParquetOutput | KafkaOutput | None,
    given: Mapping[str, int] | None,
) -> dict[str, int]:
    """Partition counts of the output topics: given, else from Kafka when Kafka is in use."""
    wanted = [t for t in plan.external_sink_topics() if t not in known]
    found = {t: n for t, n in (given or {}).items() if t in wanted}
    missing = [t for t in wanted if t not in found]
    uses_kafka = isinstance(output, KafkaOutput) or any(isinstance(i, KafkaInput) for i in inputs)
    if missing and uses_kafka:
        with KafkaAdmin(admin_conf(config.restore_consumer_configs())) as admin:
            found.update({t: int(n) for t, n in admin.partition_counts(missing).items() if n})
    return found


def _final_state(
    plan: TopologyPlan,
    config: StreamsConfig,
    counts: Mapping[str, int],
    stages: RDD[Any],
    location: SnapshotStore | str | Path,
) -> list[SnapshotManifest]:
    from platform_streams.ops.spark.compaction import snapshot_stores
    from platform_streams.ops.topics import create_internal_topics

    create_internal_topics(plan.topology, config)  # idempotent: the changelogs must exist
    app_id = config.application_id
    stores = {
        name: (plan.physical_topic(f"{name}-changelog", app_id), counts[f"{name}-changelog"])
        for name in snapshot_stores(plan.topology, config)
    }
    target = location if isinstance(location, SnapshotStore) else open_snapshot_store(location)
    return seed_and_snapshot(stages, config, stores, target)


def _write_output(
    spark: SparkSession,
    config: StreamsConfig,
    outputs: list[RDD[Any]],
    output: ParquetOutput | KafkaOutput | None,
    result: BackfillResult,
) -> dict[str, int]:
    if not outputs:
        return {}
    sc = spark.sparkContext
    rows = sc.union(outputs)
    if output is None:
        counted = rows.map(lambda row: (row[1], 1)).reduceByKey(lambda a, b: a + b).collect()
        return dict(counted)
    if isinstance(output, ParquetOutput):
        sc.setJobDescription(f"backfill {config.application_id}: write Parquet output")
        frame = spark.createDataFrame(rows.map(lambda r: (r[1], r[2], r[3], r[4], r[5])), _OUTPUT_SCHEMA)
        frame.write.mode(output.mode).parquet(output.path)
        result.output = output.path
        written = spark.read.parquet(output.path).groupBy("topic").count().collect()
        return {row["topic"]: int(row["count"]) for row in written}
    conf = dict(output.producer_conf or config.producer_configs())
    conf.pop("transactional.id", None)
    sc.setJobDescription(f"backfill {config.application_id}: produce output to Kafka")
    counted = rows.mapPartitions(partial(_produce, conf)).reduceByKey(_add).collect()
    result.output = "kafka"
    return dict(counted)


def _produce(conf: Mapping[str, Any], rows: Iterable[Output]) -> Iterator[tuple[str, int]]:
    """Produce output rows from a Spark task; yields (topic, count) once all are acknowledged."""
    from platform_streams.kafka import create_producer

    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and len(errors) < 10:
            errors.append(str(err))

    producer = create_producer({**conf, "on_delivery": on_delivery})
    counts: dict[str, int] = {}
    for _kind, topic, partition, key, value, ts, headers, _seq in rows:
        kwargs: dict[str, Any] = {"key": key, "value": value, "timestamp": ts}
        if headers:
            kwargs["headers"] = headers
        if partition >= 0:
            kwargs["partition"] = partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        counts[topic] = counts.get(topic, 0) + 1
    remaining = producer.flush(60)
    if remaining or errors:
        raise RuntimeError(f"backfill output: {remaining} undelivered, errors: {errors}")
    return iter(counts.items())
