"""What one commit costs on the processing thread, piece by piece (the commit path).

    PYTHONPATH=. python bench/commit_cost.py              # embedded Tansu, 3 rounds
    PYTHONPATH=. python bench/commit_cost.py --rounds 1 --bootstrap host:9092

Two parts, each timed with N records/keys changed since the previous commit:

* broker calls of an at-least-once commit (``StreamWorker.commit``): ``producer.flush``
  (the project's ``linger.ms`` 100) then a synchronous offset commit; the same synchronous
  offset commit is what one exactly-once membership check costs on Tansu;
* the store side: a RocksDB write batch alone (what bench/engine_raw.py's count does per
  commit) against a write batch plus the memtable flush that ``RocksDBBackend.flush`` does
  at every commit in which a store changed (before the checkpoint is written).

Real clients and a real RocksDB; the figures are wall ms per commit (p50/p90).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import confluent_kafka
from rocksdict import Options, Rdict, WriteBatch, WriteOptions

from platform_streams.dev.brokers import EmbeddedBroker
from platform_streams.kafka import KafkaAdmin, TopicSpec

COMMITS = 30


def _p50_p90(samples: list[float]) -> str:
    return f"{statistics.median(samples):.2f}/{sorted(samples)[int(len(samples) * 0.9)]:.2f}"


@contextmanager
def _broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    with EmbeddedBroker(kill_with_parent=True) as local:
        yield local.bootstrap_servers


def broker_calls(bootstrap: str, counts: tuple[int, ...]) -> None:
    topic = f"commit-cost-{uuid.uuid4().hex[:8]}"
    with KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([TopicSpec(topic, 1)])
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 100, "enable.idempotence": True}
    )
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False}
    )
    for _ in range(20):  # connections and metadata up before timing
        producer.produce(topic, b"x")
        producer.flush(10)
    offset = 0
    for n in counts:
        flushes, commits = [], []
        for _ in range(COMMITS):
            for _ in range(n):
                producer.produce(topic, b"x" * 100)
            producer.poll(0)
            started = time.perf_counter()
            producer.flush(10)
            flushed = time.perf_counter()
            offset += 1
            consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, offset)], asynchronous=False)
            flushes.append((flushed - started) * 1000)
            commits.append((time.perf_counter() - flushed) * 1000)
        flush_ms, commit_ms = _p50_p90(flushes), _p50_p90(commits)
        print(f"  records since commit {n:>4}: flush ms {flush_ms}, sync offset commit ms {commit_ms}")
    consumer.close()


def store_flush(counts: tuple[int, ...]) -> None:
    for n in counts:
        for memtable_flush in (False, True):
            path = tempfile.mkdtemp(prefix="commit-cost-")
            options = Options(raw_mode=True)
            options.create_if_missing(True)
            db = Rdict(path, options)
            write_options = WriteOptions()
            setattr(write_options, "disable_wal", True)  # noqa: B010 - as RocksDBBackend (the stub types it as a method)
            db.set_write_options(write_options)
            samples = []
            for commit in range(COMMITS):
                batch = WriteBatch(raw_mode=True)
                for i in range(n):
                    batch.put(b"k%06d" % ((commit * n + i) % 20_000), b"%020d" % commit)
                started = time.perf_counter()
                db.write(batch)
                if memtable_flush:
                    db.flush(True)
                samples.append((time.perf_counter() - started) * 1000)
            db.close()
            shutil.rmtree(path)
            label = "write batch + memtable flush" if memtable_flush else "write batch only"
            print(f"  keys changed {n:>4}: {label:<28} ms {_p50_p90(samples)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap", default=os.environ.get("PLATFORM_STREAMS_BOOTSTRAP_SERVERS") or None)
    args = parser.parse_args()
    with _broker(args.bootstrap) as bootstrap:
        for round_no in range(args.rounds):
            print(f"round {round_no + 1}, load average {os.getloadavg()[0]:.1f}")
            broker_calls(bootstrap, (0, 1, 20, 200))
            store_flush((10, 200, 2000))


if __name__ == "__main__":
    main()
