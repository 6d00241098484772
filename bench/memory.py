"""Peak RSS against data size and configuration: bounded by the record cache and RocksDB.

    python bench/memory.py                                    # 500k, 1M, 2M keys; cache 10 and 100 MB
    python bench/memory.py --records 250000,500000 --cache-mb 0,10 --engines platform_streams
    # 32 RocksDB stores (8 tasks x 4 counts), with and without a 256 MiB RocksDB memory budget:
    python bench/memory.py --records 1000000 --partitions 8 --stores-per-task 4 \
        --budgets none,256MiB --cache-mb 10 --engines platform_streams

The ``count_unique`` workload of bench/run.py (every record a new key: the store, its
changelog and the output all grow with the input) runs over inputs of growing size. If
memory is bounded by configuration, platform_streams' peak RSS stays flat as the store
grows and moves with ``statestore_cache_max_bytes`` only. What bounds it:

* the record cache: ``statestore_cache_max_bytes`` per worker (entries are charged their
  measured CPython size, see platform_streams/state/cache.py);
* RocksDB: without ``rocksdb_memory_budget``, one shared 64 MB block cache per process plus
  up to 3 memtables of 8 MB per store instance (one instance per store per task); with it,
  one cache of the budget's size that the memtables are charged to
  (platform_streams/state/rocksdb_options.py); either way up to 20,000 pending writes per
  instance in Python (platform_streams/state/rocksdb_columns.py);
* librdkafka's queues (producer ``queue.buffering.max.*``, consumer prefetch) and the
  interpreter with its imports (~100 MB here).

Quix Streams is shown for contrast with its defaults (``--engines`` to leave it out): it
keeps every state update of a checkpoint in memory until the commit.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import RunResult, RunSpec  # noqa: E402
from bench.engine_ps import COUNT_STORES  # noqa: E402
from bench.run import broker, ensure_quix_python, machine, produce_input, run_child  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402
from platform_streams.kafka import KafkaAdmin, TopicSpec  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", default="500000,1000000,2000000")
    parser.add_argument("--cache-mb", default="10,100", help="platform_streams record cache sizes")
    parser.add_argument("--engines", default="platform_streams,quixstreams")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--stores-per-task", type=int, default=1, help="count stores per task")
    parser.add_argument("--budgets", default="none", help="rocksdb_memory_budget values, 'none' for unset")
    parser.add_argument("--bootstrap", default=os.environ.get("PLATFORM_STREAMS_BOOTSTRAP_SERVERS") or None)
    args = parser.parse_args(argv)
    workload = WORKLOADS["count_unique"]
    engines = [e for e in args.engines.split(",") if e]
    python = {"platform_streams": sys.executable}
    if "quixstreams" in engines:
        python["quixstreams"] = ensure_quix_python()
    rows: list[tuple[int, str, str, str, RunResult]] = []
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    with broker(args.bootstrap) as bootstrap, KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        for records in (int(r) for r in args.records.split(",")):
            source = produce_input(bootstrap, admin, workload.input, records, args.partitions)
            runs: list[tuple[str, str, str, dict[str, int | str]]] = []
            if "platform_streams" in engines:
                for mb in args.cache_mb.split(","):
                    for budget in args.budgets.split(","):
                        overrides: dict[str, int | str] = {
                            "statestore_cache_max_bytes": int(mb) * 1024 * 1024,
                            COUNT_STORES: args.stores_per_task,
                        }
                        if budget != "none":
                            overrides["rocksdb_memory_budget"] = budget
                        runs.append(("platform_streams", f"{mb} MB", budget, overrides))
            if "quixstreams" in engines:
                runs.append(("quixstreams", "-", "-", {}))
            for engine, cache, budget, overrides in runs:
                app_id = f"bench-memory-{engine}-{uuid.uuid4().hex[:8]}"
                admin.create_topics([TopicSpec(f"{app_id}-out", args.partitions)])
                with tempfile.TemporaryDirectory(prefix="ps-bench-memory-") as state_dir:
                    spec = RunSpec(
                        workload.name,
                        engine,
                        bootstrap,
                        source.topic,
                        f"{app_id}-out",
                        records,
                        state_dir,
                        app_id,
                        input_ends={str(p): end for p, end in source.ends.items()},
                        config=overrides,
                    )
                    result = run_child(spec, python[engine])
                rows.append((records, engine, cache, budget, result))
                print(
                    f"  {records:,} keys, {engine}, cache {cache}, RocksDB budget {budget}: peak RSS "
                    f"{result.peak_rss_mb:.0f} MB, {result.records_per_s:,.0f} records/s; "
                    f"load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    stores = f"{args.partitions} tasks x {args.stores_per_task} stores"
    print("\n| keys | stores | engine | record cache | RocksDB budget | peak RSS MB | records/s |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for records, engine, cache, budget, result in rows:
        print(
            f"| {records:,} | {stores} | {engine} | {cache} | {budget} | {result.peak_rss_mb:.0f} "
            f"| {result.records_per_s:,.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
