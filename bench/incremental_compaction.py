"""Incremental against full changelog compaction, when 1% of the keys changed since the last snapshot.

    python bench/incremental_compaction.py                          # embedded broker, 500,000 keys
    python bench/incremental_compaction.py --keys 1000000 --rounds 3
    PLATFORM_STREAMS_BOOTSTRAP_SERVERS=host:9092 python bench/incremental_compaction.py

What runs, in one process on one broker, with Spark ``local[*]``:

1. a store's changelog (``--partitions`` partitions) gets every key once (``--updates``
   times: the history a full compaction reads; 1 is the least, as after broker compaction);
2. a full compaction publishes the first snapshots (it also warms Spark up: not timed
   against anything);
3. per round: ``--changed`` percent of the keys change (nine in ten updated, one in ten
   deleted), then an incremental compaction builds on the newest snapshots and a full
   compaction of the same changelog goes to another location; both are timed, and their
   snapshots are compared entry by entry (they must be identical).

The ratio printed is incremental / full seconds per round, and their medians.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import statistics
import struct
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.snapshot_restore import STORE, changelog_bench  # noqa: E402
from platform_streams.kafka import create_producer  # noqa: E402
from platform_streams.processor.partitioner import default_partition  # noqa: E402
from platform_streams.state.rocksdb import RocksDBBackend  # noqa: E402
from platform_streams.state.snapshots import SnapshotCatalog, SnapshotManifest, open_snapshot_store  # noqa: E402

_VALUE = struct.Struct(">qq")  # ValueAndTimestamp(count): timestamp (8) + long (8)


def _produce(bootstrap: str, topic: str, records: Any, partitions: int) -> int:
    producer = create_producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "lz4"}
    )
    count = 0
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value, key, default_partition(key, partitions))
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 100_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records not delivered")
    return count


def _digest(location: Path, manifest: SnapshotManifest, work: Path) -> tuple[int, str]:
    """(entries, sha256 of every key and value in order) of a snapshot, read back by RocksDB."""
    if manifest.record_count == 0:
        return 0, ""
    sst = SnapshotCatalog(open_snapshot_store(location)).fetch_sst(manifest, work / "check.sst")
    backend = RocksDBBackend("check")
    backend.open(work / "check-db")
    digest, count = hashlib.sha256(), 0
    try:
        backend.ingest_sst(sst, move=True)
        for key, value in backend.default.items():
            digest.update(len(key).to_bytes(4, "big") + key + value)
            count += 1
    finally:
        backend.close()
        shutil.rmtree(work, ignore_errors=True)
    return count, digest.hexdigest()


def _newest(location: Path, app_id: str, partition: int) -> SnapshotManifest:
    return SnapshotCatalog(open_snapshot_store(location)).manifests(app_id, STORE, partition)[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=500_000)
    parser.add_argument("--updates", type=int, default=1, help="changelog records per key before the rounds")
    parser.add_argument("--changed", type=float, default=1.0, help="percent of the keys changed per round")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with ExitStack() as stack:
        bootstrap, work, app_id, changelog = changelog_bench(stack, "incr", args.partitions)
        keys = [f"user-{i:07d}".encode() for i in range(args.keys)]
        started = time.monotonic()
        history = _produce(
            bootstrap,
            changelog,
            ((k, _VALUE.pack(1_700_000_000_000 + r, r + 1)) for r in range(args.updates) for k in keys),
            args.partitions,
        )
        print(
            f"changelog {changelog}: {args.keys:,} keys, {history:,} records in {args.partitions} partitions "
            f"({time.monotonic() - started:.0f}s)",
            flush=True,
        )

        from platform_streams.ops.spark import compact_changelog, spark_session

        spark = spark_session(args.master, "bench-incremental-compaction", None, ui=False)
        spark.sparkContext.setLogLevel("ERROR")
        stack.callback(spark.stop)
        conf = {"bootstrap.servers": bootstrap}
        location = work / "snapshots"
        first = compact_changelog(spark, conf, app_id, STORE, location, parquet=False)
        print(f"  first (full) snapshot: {first.summary()}", flush=True)

        changed = max(1, int(args.keys * args.changed / 100))
        ratios = []
        for round_ in range(1, args.rounds + 1):
            picked = keys[round_ * 7919 % args.keys :][:changed]
            picked += keys[: changed - len(picked)]
            delta = (
                (k, None if i % 10 == 0 else _VALUE.pack(1_800_000_000_000 + round_, round_ * 10**6 + i))
                for i, k in enumerate(picked)
            )
            history += _produce(bootstrap, changelog, delta, args.partitions)
            t0 = time.monotonic()
            inc = compact_changelog(spark, conf, app_id, STORE, location, parquet=False, incremental=True)
            inc_s = time.monotonic() - t0
            t0 = time.monotonic()
            full = compact_changelog(spark, conf, app_id, STORE, work / f"full-{round_}", parquet=False)
            full_s = time.monotonic() - t0
            for whole in full.manifests:
                mine = _newest(location, app_id, whole.partition)
                same = (mine.offset, *_digest(location, mine, work / "a")) == (
                    whole.offset,
                    *_digest(work / f"full-{round_}", whole, work / "b"),
                )
                if not same or mine.base_snapshot_id is None:
                    print(f"MISMATCH in partition {whole.partition}: {mine} vs {whole}", flush=True)
                    return 1
            shutil.rmtree(work / f"full-{round_}", ignore_errors=True)
            ratios.append(inc_s / full_s)
            print(
                f"  round {round_}: {changed:,} keys changed; incremental {inc.offsets_read:,} offsets in "
                f"{inc_s:.1f}s, full {full.offsets_read:,} offsets in {full_s:.1f}s: "
                f"ratio {inc_s / full_s:.3f} "
                f"(snapshots identical, {sum(m.record_count for m in full.manifests):,} live keys)",
                flush=True,
            )
        print(
            f"| {args.keys:,} | {history:,} | {changed:,} ({args.changed}%) | {args.rounds} | "
            f"{statistics.median(ratios):.3f} | {os.getloadavg()[0]:.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
