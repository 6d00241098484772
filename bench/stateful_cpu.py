"""CPU per record of the stateful workloads' tasks (count, count_unique, window_sum), no broker.

    python bench/stateful_cpu.py                          # every workload
    python bench/stateful_cpu.py --workloads window_sum --records 100000 --repeats 5
    python bench/stateful_cpu.py --profile out.txt        # + cProfile of one run (sorted by tottime)

Why: on the shared machine the end-to-end runner's (bench/run.py) wall rates move with the
load, and its CPU figures include librdkafka's threads. This builds bench/engine_ps.py's own
DSL app for the workload, runs one task over real RocksDB stores with the worker's record
cache (``StreamsConfig`` defaults), feeds it the workload's input records through
``StreamTask.add_records``/``process`` (one partition's share: ``--records``), and commits
like the worker does every ``--commit-every`` records (flush caches, flush stores,
checkpoint). Output and changelog records go to a collector that only counts them. It prints
the best of ``--repeats`` runs' process CPU per record, and the records sent per input record.
Run it with ``PYTHONPATH`` on two checkouts to compare them.

The restore case (``count_unique_restore``) writes the count_unique changelog the task sent
into a list, then times ``restore_batch`` of the store's registration over it in
``--restore-batch``-sized batches: the store side of a restore (decode, filter, write batch).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from confluent_kafka import TIMESTAMP_CREATE_TIME, Message  # noqa: E402

from bench.common import RunSpec  # noqa: E402
from bench.engine_ps import build  # noqa: E402
from bench.workloads import EVENT_TIME_START_MS, WORKLOADS  # noqa: E402
from platform_streams import StreamsConfig  # noqa: E402
from platform_streams.processor import TaskId  # noqa: E402
from platform_streams.runtime.tasks.task import StreamTask  # noqa: E402
from platform_streams.state.cache import RecordCache  # noqa: E402
from platform_streams.topology import compile_topology  # noqa: E402

TOPIC = "in"


class _Collector:
    """Counts what a task sends; keeps the changelog records when asked (the restore case)."""

    def __init__(self, keep_changelog: bool = False) -> None:
        self.sent = 0
        self.keep = keep_changelog
        self.changelog: list[tuple[bytes, bytes | None]] = []

    def send(self, topic: str, key: Any, value: Any, *args: Any, **kwargs: Any) -> None:
        self.sent += 1
        if self.keep and topic.endswith("-changelog"):
            self.changelog.append((key, value))

    def partition_count(self, topic: str) -> int:
        return 4

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None


def _messages(workload_name: str, records: int) -> list[Message]:
    """The workload's input as real ``confluent_kafka.Message`` objects (confluent-kafka
    builds them from Python): the task reads the type it reads from a consumer. (A Python
    stand-in cost about the same: count 21,543 against 21,367 instructions a record,
    bench/RESULTS.md.)"""
    spec = WORKLOADS[workload_name].input
    return [
        Message(
            topic=TOPIC,
            partition=0,
            offset=i,
            key=spec.key(i),
            value=spec.value(i, EVENT_TIME_START_MS),
            timestamp=(TIMESTAMP_CREATE_TIME, spec.timestamp(i, EVENT_TIME_START_MS)),
        )
        for i in range(records)
    ]


def _task(workload_name: str, state_dir: Path, collector: _Collector) -> StreamTask:
    workload = WORKLOADS[workload_name]
    spec = RunSpec(workload_name, "platform_streams", "x:1", TOPIC, "out", 0, str(state_dir), "cpu")
    plan = compile_topology(build(workload, spec).build())
    config = StreamsConfig(
        application_id="cpu",
        bootstrap_servers="x:1",
        state_dir=state_dir,
        processing_guarantee="exactly_once_v2" if workload.exactly_once else "at_least_once",
    )
    task = StreamTask(
        TaskId(0, 0),
        plan,
        plan.subtopologies[0],
        config=config,
        collector=collector,  # type: ignore[arg-type]
        clock_ms=lambda: 0,
        task_dir=state_dir / "0_0",
        record_cache=RecordCache(config.statestore_cache_max_bytes),
    )
    task.initialize_stores()
    task.initialize_processors()
    return task


def run_once(workload_name: str, messages: list[Message], commit_every: int) -> tuple[float, int]:
    """Process ``messages`` in one fresh task; returns (process CPU seconds, records sent)."""
    state_dir = Path(tempfile.mkdtemp(prefix="stateful-cpu-"))
    try:
        collector = _Collector()
        task = _task(workload_name, state_dir, collector)
        started = time.process_time()
        for i in range(0, len(messages), commit_every):
            chunk = messages[i : i + commit_every]
            for j in range(0, len(chunk), 5000):
                task.add_records((TOPIC, 0), chunk[j : j + 5000])
                while task.process(5000):
                    pass
            task.flush_caches()
            task.flush_stores()
            task.state_manager.checkpoint(task.changelog_offsets({}), enforce=True)
        elapsed = time.process_time() - started
        task.close()
        return elapsed, collector.sent
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def restore_once(messages: list[Message], batch: int) -> float:
    """count_unique's changelog, restored into a fresh store: process CPU seconds."""
    state_dir = Path(tempfile.mkdtemp(prefix="stateful-cpu-"))
    try:
        collector = _Collector(keep_changelog=True)
        task = _task("count_unique", state_dir, collector)
        task.add_records((TOPIC, 0), messages)
        while task.process(5000):
            pass
        task.flush_caches()
        task.flush_stores()
        task.close(wipe=True)
        shutil.rmtree(state_dir, ignore_errors=True)
        fresh = _task_stores_only("count_unique", state_dir)
        records = collector.changelog
        started = time.process_time()
        for i in range(0, len(records), batch):
            fresh(records[i : i + batch])
        return time.process_time() - started
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def _task_stores_only(workload_name: str, state_dir: Path) -> Callable[[list[Any]], None]:
    """A fresh task's store registration: the function restore calls per changelog batch."""
    task = _task(workload_name, state_dir, _Collector())
    manager = task.state_manager
    (name,) = manager.store_names
    return lambda batch: manager.restore(name, batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="count,count_unique,window_sum,count_unique_restore")
    parser.add_argument("--records", type=int, default=100_000, help="records fed to the one task")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--commit-every", type=int, default=50_000, help="records between commits")
    parser.add_argument("--restore-batch", type=int, default=5000)
    parser.add_argument("--profile", help="write a cProfile of one more run of each workload here")
    args = parser.parse_args()
    for name in args.workloads.split(","):
        if name == "count_unique_restore":
            messages = _messages("count_unique", args.records)
            best = min(restore_once(messages, args.restore_batch) for _ in range(args.repeats))
            per_record = best / args.records * 1e6
            print(f"{name}: {per_record:.2f} us CPU per changelog record (best of {args.repeats})")
            continue
        messages = _messages(name, args.records)
        runs = [run_once(name, messages, args.commit_every) for _ in range(args.repeats)]
        best = min(cpu for cpu, _ in runs)
        sent = runs[0][1]
        print(
            f"{name}: {best / args.records * 1e6:.2f} us CPU per record (best of {args.repeats}; "
            f"{sent / args.records:.3f} records sent per input record)"
        )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            run_once(name, messages, args.commit_every)
            profiler.disable()
            with open(f"{args.profile}.{name}", "w") as out:
                pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()
