"""CPU per record of one task's source function, fused or plain, without a broker.

    python bench/fused_source_cpu.py            # fused (the default)
    python bench/fused_source_cpu.py --plain    # StreamsConfig(fusion=False)
    python bench/fused_source_cpu.py --count    # the count workload's task (see below)

Why: the end-to-end runner (bench/run.py) needs a quiet machine to compare code
generation changes, since its CPU figures include librdkafka's threads and poll waits.
This feeds 1,000 in-memory records x ``--rounds`` to the ``filter_map_json`` workload's
task (JSON in, filter, map_values, JSON out to a no-op collector) and prints the best
round's process CPU per record, which isolates what the generated code costs.
Run it with ``PYTHONPATH`` on two checkouts to compare them (the library comes from
``PYTHONPATH`` first; this checkout's is the fallback).

``--count`` feeds the ``count`` workload's task instead (10,000 keys, RocksDB store with its
record cache and changelog, JSON out), its cache flushed and stores flushed every
``--commit-every`` records as a commit would. Its CPU figure still moves with the machine's
load; for a load-proof comparison run it under ``valgrind --tool=callgrind`` with two
``--rounds`` values and divide the difference of the instruction counts by the difference
of the records fed (see bench/RESULTS.md, "Count CPU regression ...").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

import orjson  # noqa: E402

from platform_streams import StreamsBuilder, StreamsConfig  # noqa: E402
from platform_streams.dsl import Consumed, Materialized, Produced  # noqa: E402
from platform_streams.processor import TaskId  # noqa: E402
from platform_streams.runtime.tasks.task import StreamTask  # noqa: E402
from platform_streams.serde import Bytes, Json  # noqa: E402
from platform_streams.state.cache import RecordCache  # noqa: E402
from platform_streams.topology import compile_topology  # noqa: E402


class _NoopCollector:
    def send(self, *args: Any) -> None:
        pass

    def partition_count(self, topic: str) -> int:
        return 4


class _Message:
    """The four methods a source function calls on a confluent_kafka.Message."""

    __slots__ = ("_key", "_value")

    def __init__(self, key: bytes, value: bytes) -> None:
        self._key, self._value = key, value

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (0, 5)

    def headers(self) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plain", action="store_true", help="fusion=False (plain closures)")
    parser.add_argument("--count", action="store_true", help="the count workload's task")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--commit-every", type=int, default=20_000, help="records per flush (--count)")
    args = parser.parse_args()
    builder = StreamsBuilder()
    stream = builder.stream("in", Consumed(key_serde=Bytes(), value_serde=Json()))
    produced = Produced(key_serde=Bytes(), value_serde=Json())
    if args.count:
        stream.group_by_key().count(materialized=Materialized.as_("counts")).to_stream().to("out", produced)
    else:
        stream.filter(lambda k, v: v["amount"] >= 25).map_values(
            lambda v: {**v, "cents": v["amount"] * 100}
        ).to("out", produced)
    plan = compile_topology(builder.build())
    tmp = Path(tempfile.mkdtemp())
    plain = {"fusion": False} if args.plain else {}  # (no key: runs on checkouts without the setting)
    config = StreamsConfig(application_id="cpu", bootstrap_servers="x:1", state_dir=tmp, **plain)
    cache = RecordCache(config.statestore_cache_max_bytes)  # the worker's, shared by its tasks
    task = StreamTask(
        TaskId(0, 0), plan, plan.subtopologies[0], config=config, collector=_NoopCollector(),
        clock_ms=lambda: 0, task_dir=tmp / "0", record_cache=cache,
    )  # fmt: skip
    task.initialize_stores()
    task.initialize_processors()
    source = task.graph.sources["in"]
    keys = 10_000 if args.count else 1000  # the count workload's 10,000 keys
    messages = [_Message(b"k%d" % i, orjson.dumps({"id": i, "amount": i % 100})) for i in range(keys)]
    flush_every = max(1, args.commit_every // len(messages)) if args.count else 0
    best = float("inf")
    for _ in range(7):
        started = time.process_time()
        for fed in range(1, args.rounds + 1):
            for msg in messages:
                source(msg)
            if flush_every and (fed % flush_every == 0 or fed == args.rounds):
                task.flush_caches()  # a commit: the cache forwards, then the stores flush
                task.flush_stores()
        best = min(best, time.process_time() - started)
    per_record_us = best / (args.rounds * len(messages)) * 1e6
    label = "count" if args.count else "stateless"
    print(f"{label}, {'plain' if args.plain else 'fused'}: {per_record_us:.3f} us CPU per record")


if __name__ == "__main__":
    main()
