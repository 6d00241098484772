"""The raw confluent-kafka engine: each workload as the loop one would write by hand.

It is the ceiling platform_streams is measured against: ``consume(5000) -> orjson.loads ->
work -> orjson.dumps -> produce -> commit`` with the *same* librdkafka settings
(``StreamsConfig.consumer_configs()/producer_configs()``), the same record semantics
(timestamps and headers carried over) and the same guarantees. Stateful loops keep what
changed since the last commit in a dict and, at each commit, produce its output and
changelog records and write it to RocksDB in one write batch -- what platform_streams'
record cache and store layers do, minus every layer. Under exactly-once the records and
the input offsets go into one transaction per commit interval.

Deliberately missing (a real application would need them): changelog offset checkpoints,
exception handlers, punctuation, rebalance handling beyond the initial assignment.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import orjson
from confluent_kafka.admin import AdminClient, NewTopic
from rocksdict import Options, Rdict, WriteBatch

from bench.common import RunSpec, Timer
from bench.engine_ps import streams_config
from bench.workloads import CENTS_AVRO, REGISTRY_URL, WINDOW_MS, Workload, window_result

_BATCH = 5000


def _changelog(spec: RunSpec) -> str:
    return f"{spec.app_id}-raw-changelog"


def _open_db(spec: RunSpec) -> Rdict:
    path = Path(spec.state_dir) / spec.app_id / "raw-store"
    path.mkdir(parents=True, exist_ok=True)
    return Rdict(str(path), Options(raw_mode=True))


@dataclass
class Store:
    """A stateful loop's RocksDB and its ``flush(batch)``: produce the changelog and output
    records of what changed since the last commit, and put the changes in the write batch."""

    db: Rdict
    flush: Callable[[WriteBatch], None]


class RawLoop:
    """consume -> process -> (commit: flush state, produce, commit offsets) until the input is read."""

    def __init__(self, workload: Workload, spec: RunSpec, timer: Timer) -> None:
        self.spec = spec
        self.timer = timer
        config = streams_config(workload, spec)
        self.eos = workload.exactly_once
        self.consumer = confluent_kafka.Consumer(config.consumer_configs(0))
        conf = config.producer_configs(0, f"{spec.app_id}-raw" if self.eos else None)
        conf["delivery.report.only.error"] = True  # nothing here needs success reports
        if self.eos:
            conf["transaction.timeout.ms"] = 10_000
        self.producer = confluent_kafka.Producer(conf)
        if self.eos:
            self.producer.init_transactions(30)
        self.commit_every = config.commit_interval_ms / 1000
        self.consumer.subscribe([spec.input_topic], on_assign=lambda c, partitions: timer.start())

    def produce(self, topic: str, value: bytes | None, key: bytes | None, **kwargs: Any) -> None:
        while True:
            try:
                self.producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:
                self.producer.poll(0.05)

    def run(self, process: Callable[[list[Any]], int], store: Store | None = None) -> None:
        """``process(batch)`` returns records processed; ``store``, for a stateful loop, is
        flushed at every commit and closed at the end."""
        consumer, poll = self.consumer, self.producer.poll
        consume, poll_one = consumer.consume, consumer.poll
        try:
            if self.eos:
                self.producer.begin_transaction()
            next_commit = time.monotonic() + self.commit_every
            consumed = 0
            while consumed < self.spec.records:
                # what is ready now; when nothing is, wait for the first record only (as the worker)
                batch = consume(_BATCH, 0)
                if not batch:
                    first = poll_one(0.1)
                    batch = [] if first is None else [first]
                consumed += process(batch)
                poll(0)
                if time.monotonic() >= next_commit:
                    self.commit(store, again=True)
                    next_commit = time.monotonic() + self.commit_every
            self.commit(store, again=False)
            consumer.close()
            self.timer.stop()
        finally:
            if store is not None:
                store.db.close()

    def commit(self, store: Store | None, *, again: bool) -> None:
        """Produce the store's changes, commit (offsets, or the transaction), then write the
        changes to RocksDB."""
        batch = WriteBatch(raw_mode=True)
        if store is not None:
            store.flush(batch)
        consumer = self.consumer
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        if self.eos:
            if positions:
                self.producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            self.producer.commit_transaction(30)
        else:
            self.producer.flush()
            if positions:
                consumer.commit(offsets=positions, asynchronous=False)
        if store is not None:
            store.db.write(batch)
        if self.eos and again:
            self.producer.begin_transaction()


def _avro_codec(spec: RunSpec) -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]]:
    """(decode, encode) with confluent-kafka's Avro serializers: the ones platform_streams'
    ``serde.Avro`` wraps, with its settings (topic subject, auto-register, writer schema)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": spec.config[REGISTRY_URL]})
    reader, writer = AvroDeserializer(client), AvroSerializer(client, CENTS_AVRO)
    source = SerializationContext(spec.input_topic, MessageField.VALUE)
    sink = SerializationContext(spec.output_topic, MessageField.VALUE)
    return (lambda data: reader(data, source)), (lambda obj: writer(obj, sink))


def run_stateless(workload: Workload, spec: RunSpec, loop: RawLoop) -> None:
    loads: Callable[[bytes], Any] = orjson.loads
    dumps: Callable[[Any], bytes] = orjson.dumps
    produce = loop.producer.produce
    if workload.input.encoding == "avro":
        loads, dumps = _avro_codec(spec)
    keep, mapper, out, poll = workload.predicate, workload.mapper, spec.output_topic, loop.producer.poll

    def process(batch: list[Any]) -> int:
        n = 0
        for msg in batch:
            if msg.error() is not None:
                continue
            n += 1
            key, value = msg.key(), loads(msg.value())
            if keep(key, value):
                encoded = dumps(mapper(value))
                try:
                    produce(out, encoded, key, timestamp=msg.timestamp()[1], headers=msg.headers())
                except BufferError:
                    poll(0.05)
                    loop.produce(out, encoded, key, timestamp=msg.timestamp()[1], headers=msg.headers())
        return n

    loop.run(process)


def run_count(workload: Workload, spec: RunSpec, loop: RawLoop) -> None:
    db = _open_db(spec)
    get, loads, changelog, out = db.get, orjson.loads, _changelog(spec), spec.output_topic
    #: key -> (count, partition, timestamp) changed since the last commit
    dirty: dict[bytes, tuple[int, int, int]] = {}

    def process(batch: list[Any]) -> int:
        n = 0
        for msg in batch:
            if msg.error() is not None:
                continue
            n += 1
            key = msg.key()
            loads(msg.value())  # the same decoding work as the engines' Json serde
            entry = dirty.get(key)
            if entry is None:
                stored = get(key)
                count = 1 if stored is None else int.from_bytes(stored, "big") + 1
            else:
                count = entry[0] + 1
            dirty[key] = (count, msg.partition(), msg.timestamp()[1])
        return n

    def flush_state(batch: WriteBatch) -> None:
        produce = loop.produce
        for key, (count, partition, ts) in dirty.items():
            stored = count.to_bytes(8, "big")
            produce(changelog, stored, key, partition=partition, timestamp=ts)
            produce(out, str(count).encode(), key, timestamp=ts)
            batch.put(key, stored)
        dirty.clear()

    loop.run(process, Store(db, flush_state))


def run_window_sum(workload: Workload, spec: RunSpec, loop: RawLoop) -> None:
    db = _open_db(spec)
    loads, dumps, changelog, out = orjson.loads, orjson.dumps, _changelog(spec), spec.output_topic
    sums: dict[tuple[bytes, int], float] = {}  # open windows
    dirty: dict[tuple[bytes, int], int] = {}  # (key, start) -> partition, changed since the commit
    closed: list[tuple[bytes, int]] = []  # emitted since the commit: delete from the store
    opened: dict[int, dict[int, list[bytes]]] = {}  # partition -> window start -> keys
    stream_time: dict[int, int] = {}

    def close_windows(partition: int, now: int) -> None:
        starts = opened[partition]
        for start in sorted(s for s in starts if s + WINDOW_MS <= now):
            for key in starts.pop(start):
                total = sums.pop((key, start))
                loop.produce(out, dumps(window_result(start, total)), key, timestamp=start + WINDOW_MS - 1)
                closed.append((key, start))

    def process(batch: list[Any]) -> int:
        n = 0
        for msg in batch:
            if msg.error() is not None:
                continue
            n += 1
            key, value, ts, partition = msg.key(), loads(msg.value()), msg.timestamp()[1], msg.partition()
            now = stream_time.get(partition, -1)
            start = ts - ts % WINDOW_MS
            if start + WINDOW_MS <= now:
                continue  # late: its window is closed
            window = (key, start)
            total = sums.get(window)
            if total is None:
                sums[window] = 0.0 + value["amount"]
                opened.setdefault(partition, {}).setdefault(start, []).append(key)
            else:
                sums[window] = total + value["amount"]
            dirty[window] = partition
            if ts > now:
                stream_time[partition] = ts
                if ts - ts % WINDOW_MS > now - now % WINDOW_MS:
                    close_windows(partition, ts)
        return n

    def flush_state(batch: WriteBatch) -> None:
        produce = loop.produce
        for window, partition in dirty.items():
            total = sums.get(window)
            if total is None:
                continue  # closed meanwhile
            key, start = window
            stored = start.to_bytes(8, "big") + orjson.dumps(total)
            produce(changelog, stored, key, partition=partition, timestamp=start)
            batch.put(key + start.to_bytes(8, "big"), stored)
        for key, start in closed:
            batch.delete(key + start.to_bytes(8, "big"))
        dirty.clear()
        closed.clear()

    loop.run(process, Store(db, flush_state))


def restore(workload: Workload, spec: RunSpec, timer: Timer) -> dict[str, Any]:
    """Read the changelog from the beginning into a fresh RocksDB, one write batch per poll."""
    shutil.rmtree(Path(spec.state_dir) / spec.app_id, ignore_errors=True)
    config = streams_config(workload, spec)
    topic = _changelog(spec)
    conf = config.restore_consumer_configs(0)
    conf["group.id"] = f"{spec.app_id}-restore"  # required by the client; assign() never joins it
    consumer = confluent_kafka.Consumer(conf)
    partitions = len(spec.input_ends)
    timer.start()
    db = _open_db(spec)
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    at_end: set[int] = set()
    restored = 0
    while len(at_end) < partitions:
        batch = WriteBatch(raw_mode=True)
        for msg in consumer.consume(_BATCH, 0.1):
            err = msg.error()
            if err is not None:
                if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            value = msg.value()
            if value is None:
                batch.delete(msg.key())
            else:
                batch.put(msg.key(), value)
            restored += 1
        db.write(batch)
    db.flush()
    timer.stop()
    consumer.close()
    entries = sum(1 for _ in db.keys())  # noqa: SIM118 - a raw-mode Rdict iterates only through keys()
    db.close()
    return {"records": restored, "restored_entries": entries}


def run(workload: Workload, spec: RunSpec, timer: Timer) -> dict[str, Any]:
    if spec.phase == "restore":
        return restore(workload, spec, timer)
    if workload.kind != "stateless":
        admin = AdminClient({"bootstrap.servers": spec.bootstrap})
        future = admin.create_topics([NewTopic(_changelog(spec), len(spec.input_ends), 1)])[_changelog(spec)]
        future.result(30)
    loop = RawLoop(workload, spec, timer)
    {"stateless": run_stateless, "count": run_count, "window_sum": run_window_sum}[workload.kind](
        workload, spec, loop
    )
    return {}
