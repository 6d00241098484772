"""The platform_streams engine: each workload as a DSL app with default settings.

Every app uses ``StreamsConfig`` defaults (RocksDB stores, 10 MB record cache, changelogs)
except the workload's guarantee and commit interval (the same in every engine) and the
test group timings. The clock starts when the worker gets its partitions (the assignment
callback) and stops when ``close`` returns: every input record processed, caches flushed,
output acknowledged (or the transaction committed) and the input offsets committed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.common import GROUP_TIMING, RunSpec, Timer
from bench.workloads import CENTS_AVRO, REGISTRY_URL, WINDOW_MS, Workload, add_amount, window_result
from platform_streams import KafkaStreams, State, StreamsBuilder, StreamsConfig
from platform_streams.dsl import Consumed, EmitStrategy, Materialized, Produced, TimeWindows
from platform_streams.runtime.workers.worker import StreamWorker
from platform_streams.serde import Avro, Bytes, Double, Json


def streams_config(workload: Workload, spec: RunSpec, **overrides: Any) -> StreamsConfig:
    """The run's settings: the workload's guarantee and commit interval, the group timings,
    then ``overrides``. The raw loop takes its librdkafka settings from it too."""
    return StreamsConfig(
        application_id=spec.app_id,
        bootstrap_servers=spec.bootstrap,
        state_dir=Path(spec.state_dir),
        processing_guarantee="exactly_once_v2" if workload.exactly_once else "at_least_once",
        commit_interval_ms=workload.commit_interval_ms,
        **{**GROUP_TIMING, **overrides},
    )


def _zero() -> float:
    return 0.0


def _window_out(windowed: Any, total: float) -> tuple[bytes, dict[str, Any]]:
    return windowed.key, window_result(windowed.window.start_ms, total)


#: bench/memory.py's key in ``RunSpec.config`` (not a StreamsConfig field): count stores per task
COUNT_STORES = "bench_count_stores"


def build(workload: Workload, spec: RunSpec, count_stores: int = 1) -> StreamsBuilder:
    """The workload's app; a count with ``count_stores`` > 1 counts into that many stores per
    task (only the first one's updates go to the output: the harness checks those)."""
    builder = StreamsBuilder()
    registry = spec.config.get(REGISTRY_URL)
    if workload.input.encoding == "avro":
        consumed = Consumed(key_serde=Bytes(), value_serde=Avro(registry))
        produced = Produced(key_serde=Bytes(), value_serde=Avro(registry, CENTS_AVRO))
    else:
        consumed = Consumed(key_serde=Bytes(), value_serde=Json())
        produced = Produced(key_serde=Bytes(), value_serde=Json())
    stream = builder.stream(spec.input_topic, consumed)
    if workload.kind == "stateless":
        stream.filter(workload.predicate).map_values(workload.mapper).to(spec.output_topic, produced)
    elif workload.kind == "count":
        stream.group_by_key().count(materialized=Materialized.as_("counts")).to_stream().to(
            spec.output_topic, produced
        )
        for extra in range(1, count_stores):
            stream.group_by_key().count(materialized=Materialized.as_(f"counts-{extra}"))
    elif workload.kind == "window_sum":
        (
            stream.group_by_key()
            .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS))
            .emit_strategy(EmitStrategy.on_window_close())
            .aggregate(_zero, add_amount, materialized=Materialized(value_serde=Double()))
            .to_stream()
            .map(_window_out)
            .to(spec.output_topic, produced)
        )
    else:
        raise ValueError(f"unknown workload kind {workload.kind!r}")
    return builder


def _time_assignments(timer: Timer, *, stop_when_assigned: bool) -> None:
    """Start ``timer`` when a worker starts the tasks of an assignment; with
    ``stop_when_assigned`` stop it when they are created and restored (the worker is RUNNING).
    ``_start_tasks`` is where both placements meet: the group's own assignment
    (``task_assignor="range"``) and the state-aware assignor's (the default)."""
    original = StreamWorker._start_tasks

    def timed(self: StreamWorker, consumer: Any, partitions: list[Any], *, rebalance: bool) -> None:
        timer.start()
        original(self, consumer, partitions, rebalance=rebalance)
        if partitions and stop_when_assigned:
            timer.stop()

    StreamWorker._start_tasks = timed  # type: ignore[method-assign]


def run(workload: Workload, spec: RunSpec, timer: Timer) -> dict[str, Any]:
    restore = spec.phase == "restore"
    _time_assignments(timer, stop_when_assigned=restore)
    config = dict(spec.config)
    count_stores = int(config.pop(COUNT_STORES, 1))
    config.pop(REGISTRY_URL, None)  # build() reads it from the spec
    streams = KafkaStreams(build(workload, spec, count_stores), streams_config(workload, spec, **config))
    streams.start()
    streams.wait_for_state(State.RUNNING, timeout_s=120)
    if restore:
        restored = sum(w.state_lifecycle.total_restored for w in streams.workers)
        entries = sum(
            sum(1 for _ in task.context.stores["counts"].all())
            for w in streams.workers
            for task in w.tasks.values()
        )
        streams.close(timeout_s=120)
        return {"records": restored, "restored_entries": entries}
    while sum(w.processed_total for w in streams.workers) < spec.records:
        if streams.state() not in (State.RUNNING, State.REBALANCING):
            raise RuntimeError(f"platform_streams stopped: {streams.state()}")
        time.sleep(0.01)  # the harness's own polling: ~1% of a core
    streams.close(timeout_s=120)  # final commit: flush caches and producer, commit offsets, leave
    timer.stop()
    return {}
