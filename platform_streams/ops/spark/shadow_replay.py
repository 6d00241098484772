"""Shadow replay: run a candidate topology over a range of the real input and diff its output.

A change to a topology is tested on real history before it goes live: the candidate runs
through the Spark backfill (:func:`~platform_streams.ops.spark.backfill.backfill`) over a
chosen range of the deployed application's input topics, its output goes to a **shadow
location** (Parquet), and :mod:`.shadow_diff` compares it with a baseline. Nothing is written
to Kafka: no topic is created, no group committed, the production cluster is only read.

The input range is fixed once, as offsets per partition, before anything runs (a time
window or ``latest`` would otherwise move between the two runs while producers go on); the
result lists those offsets.

Two baselines answer "what did the live application produce for this input":

``replay`` (the default)
    the *deployed* topology over the same offsets, in the same Spark job, from the same
    empty state. For a deterministic topology this is exactly what the deployed app makes of
    that input, so any difference is the candidate's change and nothing else. Limits: it
    trusts that the deployed code is the running code (the Dagster job passes the code
    location's, whose fingerprint the app asset deploys); wall-clock punctuation and
    non-deterministic operators (random, the current time) differ between any two runs.
``live``
    the records the running application wrote to its output topics whose timestamps fall in
    the input's time window: ``[start, end)`` when the range is given as times, else from
    the first to the last input record's timestamp (``earliest``: no lower bound). Output
    record timestamps are the input's for stateless operators and the largest input
    timestamp of an aggregate's update, so these are the outputs of that input. Limits: the
    live app had state before the window, the replay starts empty, so a stateful topology
    agrees only over a range that starts where the app's history does (``earliest``, or
    after a reset); record caching (``statestore.cache.max.bytes`` > 0) makes the live app
    emit fewer updates, at flush times no replay repeats; punctuation and suppression emit
    at other timestamps; an at-least-once app may have written duplicates after a crash.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pyspark import RDD
from pyspark.sql import SparkSession

from platform_streams.config import StreamsConfig
from platform_streams.kafka import KafkaAdmin
from platform_streams.ops.spark.backfill import KafkaInput, ParquetOutput, backfill
from platform_streams.ops.spark.kafka_ranges import (
    OffsetRange,
    Position,
    RawRecord,
    admin_conf,
    plan_offset_ranges,
)
from platform_streams.ops.spark.kafka_source import KafkaReader, read_ranges, resolve_reader
from platform_streams.ops.spark.shadow_diff import OutRecord, ShadowDiff, diff_outputs
from platform_streams.ops.spark.task_runner import AppRef, load_topology
from platform_streams.topology.compiler import compile_topology

__all__ = ["Baseline", "ShadowReplayResult", "shadow_replay"]

log = logging.getLogger(__name__)

Baseline = Literal["replay", "live"]

#: beyond every log end (the backfill clamps it to the log end)
_PAST_THE_END = 2**62


@dataclass
class ShadowReplayResult:
    """The outcome of :func:`shadow_replay`; ``passed`` is what the asset check reports."""

    baseline: Baseline
    diff: ShadowDiff
    #: "topic-partition" -> [start, end) offsets read from that input partition
    input_offsets: dict[str, list[int]] = field(default_factory=dict)
    input_records: int = 0
    candidate_output: str = ""
    #: the Parquet of the replayed deployed topology, or the live output topics read
    baseline_output: str = ""
    #: live baseline: the output timestamps compared, [from, until) ms (None: unbounded)
    live_window: list[int | None] | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """The outputs are identical over a range that held input (an empty range tests nothing)."""
        return self.input_records > 0 and self.diff.identical

    def verdict(self) -> str:
        if self.input_records == 0:
            return "FAIL: the input range holds no records, nothing was compared"
        if self.diff.identical:
            return "PASS: the candidate's output equals the baseline's"
        d = self.diff
        return (
            f"FAIL: {d.differing_key_count} of {d.keys_compared} keys differ "
            f"({d.differing_record_count} distinct records)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "verdict": self.verdict(),
            "baseline": self.baseline,
            "input_records": self.input_records,
            "input_offsets": self.input_offsets,
            "candidate_output": self.candidate_output,
            "baseline_output": self.baseline_output,
            "live_window": self.live_window,
            "seconds": round(self.seconds, 3),
            **self.diff.to_dict(),
        }

    def summary(self) -> str:
        d = self.diff
        lines = [
            f"shadow replay against the {self.baseline} baseline: {self.verdict()}",
            f"input: {self.input_records} records, offsets {self.input_offsets}",
            f"output records: candidate {d.candidate_records}, baseline {d.baseline_records}",
        ]
        if d.differing_keys:
            lines.append(f"first differing keys (of {d.differing_key_count}), records candidate/baseline:")
            lines += [f"  {k.topic} {k.key}: {k.candidate}/{k.baseline}" for k in d.differing_keys]
        if d.first_differences:
            lines.append("first differing records:")
            lines += [
                f"  {r.topic} key={r.key} value={r.value} ts={r.timestamp}: {r.side} "
                f"({r.candidate}/{r.baseline})"
                for r in d.first_differences
            ]
        return "\n".join(lines)


def _fixed_range(
    consumer_conf: Mapping[str, Any], topics: Sequence[str], start: Position, end: Position
) -> tuple[list[OffsetRange], dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """The input range as offsets per partition, read once: both runs read exactly these."""
    ranges = plan_offset_ranges(consumer_conf, topics, start=start, end=end, max_offsets_per_range=2**62)
    with KafkaAdmin(admin_conf(consumer_conf)) as admin:
        counts = admin.partition_counts(topics)
    # a partition with nothing in range starts and ends past its log end: empty on both runs
    everywhere = {(t, p): _PAST_THE_END for t in topics for p in range(counts.get(t) or 0)}
    starts, ends = dict(everywhere), dict(everywhere)
    for r in ranges:
        starts[(r.topic, r.partition)] = r.start
        ends[(r.topic, r.partition)] = r.end
    return ranges, starts, ends


def _parquet_records(spark: SparkSession, path: str) -> RDD[OutRecord]:
    if not Path(path).exists():  # a topology without output topics writes nothing
        return spark.sparkContext.emptyRDD()
    frame = spark.read.parquet(path).select("topic", "key", "value", "timestamp")
    return frame.rdd.map(_out_record)


def _out_record(row: Any) -> OutRecord:
    topic, key, value, ts = row
    return (
        str(topic),
        bytes(key) if key is not None else None,
        bytes(value) if value is not None else None,
        int(ts),
    )


def _in_window(low: int | None, high: int | None, row: RawRecord) -> bool:
    ts = row[5]
    return (low is None or ts >= low) and (high is None or ts < high)


def _live_record(row: RawRecord) -> OutRecord:
    topic, _p, _offset, key, value, ts, _headers = row
    return topic, key, value, int(ts)


def _timestamp(row: RawRecord) -> int:
    return int(row[5])


def _live_window(
    spark: SparkSession,
    conf: Mapping[str, Any],
    ranges: Sequence[OffsetRange],
    start: Position,
    end: Position,
    reader: str,
) -> tuple[int | None, int | None]:
    """[from, until) of the output timestamps that belong to the input range (module docstring)."""
    low: int | None = start if isinstance(start, int) else None
    high: int | None = end if isinstance(end, int) else None
    if (low is None and start != "earliest") or high is None:
        stamps = read_ranges(spark, conf, ranges, reader=reader).map(_timestamp)  # type: ignore[arg-type]
        if low is None and start != "earliest":
            low = int(stamps.min())
        if high is None:
            high = int(stamps.max()) + 1
    return low, high


def _live_records(
    spark: SparkSession,
    conf: Mapping[str, Any],
    topics: Iterable[str],
    window: tuple[int | None, int | None],
    reader: str,
) -> RDD[OutRecord]:
    """The live output topics' records in ``window``: read from the first record at or after
    its start to the log end (a later offset may still carry an earlier timestamp)."""
    low, high = window
    ranges = plan_offset_ranges(
        conf, sorted(topics), start="earliest" if low is None else low, end="latest"
    )
    if not ranges:
        return spark.sparkContext.emptyRDD()
    read = read_ranges(spark, conf, ranges, reader=reader)  # type: ignore[arg-type]
    return read.filter(lambda row: _in_window(low, high, row)).map(_live_record)


def shadow_replay(
    spark: SparkSession,
    deployed: AppRef,
    candidate: AppRef,
    config: StreamsConfig,
    location: str | Path,
    *,
    start: Position = "earliest",
    end: Position = "latest",
    baseline: Baseline = "replay",
    show: int = 20,
    reader: KafkaReader | None = None,
) -> ShadowReplayResult:
    """Run ``candidate`` over ``[start, end)`` of the input and diff it with the baseline.

    ``deployed`` and ``candidate`` are what :func:`backfill` takes as ``app``; ``config`` is
    the deployed application's (the candidate runs with it too: same application id, so
    the same internal topic names). The candidate's output goes to ``location``/candidate,
    a replayed baseline's to ``location``/baseline (Parquet, overwritten).
    """
    if baseline not in ("replay", "live"):
        raise ValueError(f"baseline: must be 'replay' or 'live', not {baseline!r}")
    started = time.monotonic()
    deployed_plan = compile_topology(load_topology(deployed))
    candidate_plan = compile_topology(load_topology(candidate))
    conf = config.restore_consumer_configs()
    topics = sorted({*deployed_plan.external_source_topics(), *candidate_plan.external_source_topics()})
    ranges, starts, ends = _fixed_range(conf, topics, start, end)
    root = Path(location)
    result = ShadowReplayResult(
        baseline=baseline,
        diff=ShadowDiff(),
        input_offsets={f"{r.topic}-{r.partition}": [r.start, r.end] for r in ranges},
        input_records=sum(r.size for r in ranges),
        candidate_output=str(root / "candidate"),
    )
    fixed = KafkaInput(start=starts, end=ends, reader=reader)
    sc = spark.sparkContext
    backfill(spark, candidate, config, [fixed], ParquetOutput(result.candidate_output))
    if baseline == "replay":
        result.baseline_output = str(root / "baseline")
        backfill(spark, deployed, config, [fixed], ParquetOutput(result.baseline_output))
        base = _parquet_records(spark, result.baseline_output)
    else:
        used = resolve_reader(spark, conf, reader)
        window = _live_window(spark, conf, ranges, start, end, used) if ranges else (None, None)
        result.live_window = list(window)
        sinks = deployed_plan.external_sink_topics()
        result.baseline_output = "kafka:" + ",".join(sinks)
        base = _live_records(spark, conf, sinks, window, used)
    sc.setJobDescription(f"shadow replay of {config.application_id}: diff")
    try:
        result.diff = diff_outputs(_parquet_records(spark, result.candidate_output), base, show=show)
    finally:
        sc.setJobDescription(None)  # type: ignore[arg-type]
    result.seconds = time.monotonic() - started
    log.info("%s", result.summary())
    return result
