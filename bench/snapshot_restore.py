"""Restore of a 1,000,000-key store: snapshot + changelog tail versus a full changelog replay.

    python bench/snapshot_restore.py                            # embedded broker, 1M keys x 5 updates
    python bench/snapshot_restore.py --keys 200000 --updates 3  # smaller
    PLATFORM_STREAMS_BOOTSTRAP_SERVERS=host:9092 python bench/snapshot_restore.py
    python bench/snapshot_restore.py --cluster                  # Spark standalone cluster + s3://

With ``--cluster`` the snapshots go to ``s3://`` on a versitygw server and the compaction
runs on a Spark standalone cluster (a master and two one-core workers, each its own JVM),
both started by the launchers the test suite uses (``platform_streams/dev/servers/s3.py``,
``platform_streams/dev/servers/spark_cluster.py``). The restoring task then has a state directory of its
own and shares no path with the job: its snapshot comes from the object store.

What runs, in one process on one broker:

1. a store's changelog gets ``keys x updates`` records (every key updated ``updates``
   times, values shaped like a DSL count: ``ValueAndTimestamp`` of a long, 16 bytes);
2. the Spark compaction job (``local[*]``) snapshots it;
3. ``--tail`` more updates land after the snapshot;
4. the same task (a DSL ``count()`` store, on RocksDB) is restored twice with no local
   state, through the worker's own code (``TaskStateLifecycle.restore``): once from the
   whole changelog, once from the snapshot plus the tail. Both stores are then compared
   key by key (they must be identical), and the times are printed as a Markdown row.

The broker is Tansu (no log compaction) unless a bootstrap is given: exactly the case
where a full replay reads every update ever made.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shutil
import struct
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from platform_streams.config import StreamsConfig  # noqa: E402
from platform_streams.dev.brokers import EmbeddedBroker  # noqa: E402
from platform_streams.dsl import Consumed, Grouped, Materialized, StreamsBuilder  # noqa: E402
from platform_streams.kafka import KafkaAdmin, TopicSpec, create_producer  # noqa: E402
from platform_streams.processor.task_id import TaskId  # noqa: E402
from platform_streams.runtime.restore.task_state import TaskStateLifecycle  # noqa: E402
from platform_streams.runtime.tasks.task import StreamTask  # noqa: E402
from platform_streams.serde import String  # noqa: E402
from platform_streams.state.wrappers.base import innermost  # noqa: E402
from platform_streams.topology.compiler import compile_topology  # noqa: E402

STORE = "counts"
_VALUE = struct.Struct(">qq")  # ValueAndTimestamp(count): timestamp (8) + long (8)


class _NoCollector:
    """Restoring sends nothing; a task still needs a collector."""

    def send(self, *args: Any) -> None:
        raise AssertionError("nothing is sent while restoring")

    def partition_count(self, topic: str) -> int:
        return 1


def _topology() -> Any:
    builder = StreamsBuilder()
    (
        builder.stream("bench-input", Consumed(key_serde=String(), value_serde=String()))
        .group_by_key(Grouped(key_serde=String(), value_serde=String()))
        .count(materialized=Materialized.as_(STORE))
    )
    return builder.build()


def _produce(bootstrap: str, topic: str, records: Any, total: int) -> float:
    producer = create_producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "lz4"}
    )
    started = time.monotonic()
    for i, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value, key, 0)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 100_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records not delivered")
    seconds = time.monotonic() - started
    print(f"  produced {total:,} records in {seconds:.1f}s", flush=True)
    return seconds


def _restore(config: StreamsConfig) -> tuple[float, int, Any, StreamTask]:
    plan = compile_topology(_topology())
    sub = plan.subtopologies[0]
    task_id = TaskId(sub.id, 0)
    task = StreamTask(
        task_id,
        plan,
        sub,
        config=config,
        collector=_NoCollector(),
        clock_ms=lambda: 0,
        task_dir=Path(config.state_dir) / config.application_id / str(task_id),
    )
    task.initialize_stores()
    lifecycle = TaskStateLifecycle(config)
    started = time.monotonic()
    lifecycle.restore([task], {})  # hand-made changelog: no source-position headers to judge
    task.state_manager.flush()
    seconds = time.monotonic() - started
    return seconds, lifecycle.total_restored, lifecycle.last_snapshots.get(task_id), task


def _start_cluster(stack: ExitStack, work: Path, app_id: str) -> tuple[str, str, dict[str, str]]:
    """versitygw and a standalone cluster (the test suite's launchers); master, location, conf."""
    from platform_streams.dev.servers.s3 import start_s3_server
    from platform_streams.dev.servers.spark_cluster import start_spark_cluster

    server = start_s3_server(work / "s3", work / "versitygw.log")
    stack.callback(server.stop)
    server.create_bucket("snapshots")
    os.environ.update(server.env())  # the usual AWS settings, for this process and its executors
    started = time.monotonic()
    cluster = start_spark_cluster(work / "spark", worker_env=server.env(), worker_memory="1g")
    stack.callback(cluster.stop)
    up_s = time.monotonic() - started
    print(f"  Spark standalone cluster {cluster.master_url} up in {up_s:.0f}s", flush=True)
    conf = {
        "spark.executor.memory": "768m",
        "spark.executor.cores": "1",
        "spark.default.parallelism": "2",
        "spark.sql.shuffle.partitions": "2",
    }
    return cluster.master_url, f"s3://snapshots/{app_id}", conf


def changelog_bench(stack: ExitStack, name: str, partitions: int) -> tuple[str, Path, str, str]:
    """A broker (``PLATFORM_STREAMS_BOOTSTRAP_SERVERS`` or an embedded one), a scratch
    directory, a fresh application id and its store's changelog topic, all undone by ``stack``;
    returns ``(bootstrap, work dir, application id, changelog)``."""
    bootstrap = os.environ.get("PLATFORM_STREAMS_BOOTSTRAP_SERVERS", "").strip()
    if not bootstrap:
        bootstrap = stack.enter_context(EmbeddedBroker(kill_with_parent=True)).bootstrap_servers
    work = Path(tempfile.mkdtemp(prefix=f"ps-bench-{name}-"))
    stack.callback(shutil.rmtree, work, True)
    app_id = f"bench-{name}-{uuid.uuid4().hex[:8]}"
    changelog = f"{app_id}-{STORE}-changelog"
    with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([TopicSpec(changelog, partitions)])
    return bootstrap, work, app_id, changelog


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument(
        "--updates", type=int, default=5, help="changelog records per key before the snapshot"
    )
    parser.add_argument("--tail", type=int, default=100_000, help="updates after the snapshot")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="compact on a Spark standalone cluster into s3:// (versitygw), started here",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with ExitStack() as stack:
        bootstrap, work, app_id, changelog = changelog_bench(stack, "snap", 1)
        keys = [f"user-{i:07d}".encode() for i in range(args.keys)]
        total = args.keys * args.updates
        print(
            f"changelog {changelog}: {args.keys:,} keys x {args.updates} updates + {args.tail:,} tail",
            flush=True,
        )
        _produce(
            bootstrap,
            changelog,
            ((k, _VALUE.pack(1_700_000_000_000 + r, r + 1)) for r in range(args.updates) for k in keys),
            total,
        )

        from platform_streams.ops.spark import compact_changelog, spark_session

        master, location, conf = args.master, str(work / "snapshots"), None
        if args.cluster:
            master, location, conf = _start_cluster(stack, work, app_id)
        spark = spark_session(master, "bench-snapshot-restore", conf, ui=False)
        spark.sparkContext.setLogLevel("ERROR")
        started = time.monotonic()
        result = compact_changelog(
            spark, {"bootstrap.servers": bootstrap}, app_id, STORE, location, parquet=False
        )
        compaction_s = time.monotonic() - started
        spark.stop()
        [manifest] = result.manifests
        print(f"  {result.summary()}", flush=True)
        tail = (
            (keys[(i * 7919) % args.keys], _VALUE.pack(1_800_000_000_000 + i, 10**6 + i))
            for i in range(args.tail)
        )
        _produce(bootstrap, changelog, tail, args.tail)

        base: dict[str, Any] = {
            "application_id": app_id,
            "bootstrap_servers": bootstrap,
            "default_key_serde": "string",
            "default_value_serde": "string",
        }
        full_s, full_n, _none, full_task = _restore(StreamsConfig(**base, state_dir=work / "full"))
        print(f"  full replay: {full_n:,} records in {full_s:.2f}s", flush=True)
        snap_config = StreamsConfig(
            **base, state_dir=work / "snap", state_snapshot_location=location
        )
        snap_s, snap_n, used, snap_task = _restore(snap_config)
        assert used, "the snapshot was not used"
        print(
            f"  snapshot + tail: ingest {used[0].seconds:.2f}s, {snap_n:,} tail records, {snap_s:.2f}s total"
        )

        a = innermost(full_task.context.stores[STORE]).backend.default.items()
        b = innermost(snap_task.context.stores[STORE]).backend.default.items()
        compared = 0
        for left, right in zip(a, b, strict=True):
            if left != right:
                raise AssertionError(f"stores differ at {left[0]!r} vs {right[0]!r}")
            compared += 1
        assert compared == args.keys, (compared, args.keys)
        full_task.close()
        snap_task.close()
        print(f"  stores identical ({compared:,} keys)")
        ratio = full_s / snap_s
        print()
        header = "| keys | changelog records | tail | compaction (Spark) s | full replay s | snapshot+tail s"
        print(header + " | speed-up |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        print(
            f"| {args.keys:,} | {total + args.tail:,} | {args.tail:,} | {compaction_s:.1f} | {full_s:.2f} "
            f"| {snap_s:.2f} | {ratio:.1f}x |"
        )
        where = f"{master}, {location}" if args.cluster else master
        print(
            f"\n{platform.python_version()}, {os.cpu_count()} CPUs, manifest offset {manifest.offset}, "
            f"{where}, load average {os.getloadavg()[0]:.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
