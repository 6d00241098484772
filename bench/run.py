"""Benchmark workloads x engines on one broker and print a table of records/s.

    python bench/run.py                          # embedded broker, 500k records, 3 repeats
    python bench/run.py --records 1000000 --engines platform_streams,raw_confluent
    PLATFORM_STREAMS_BOOTSTRAP=host:9092 python bench/run.py   # an external cluster

The input of a workload is produced once; then every (repeat, engine) run is a fresh child
process with a fresh output topic and consumer group, so its CPU time and peak RSS are its
own. An engine times itself from partition assignment (group joins take seconds on the
embedded broker and are not what is measured) to "every input record processed, output
flushed, offsets committed". The raw engine is the floor to compare against: a hand-written
confluent-kafka loop doing the same work with the same client settings.

To add an engine (Quix Streams, ...): write ``run_<name>(workload, spec, timer)`` and add it
to ``ENGINES``. To add a workload: add a :class:`Workload` to ``WORKLOADS``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make ``platform_streams`` importable from the checkout
    sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402 - the raw baseline uses the client directly
import orjson  # noqa: E402

from platform_streams import KafkaStreams, State, StreamsBuilder, StreamsConfig  # noqa: E402
from platform_streams.dsl import Consumed, Produced  # noqa: E402
from platform_streams.kafka import EmbeddedBroker, KafkaAdmin, TopicSpec, log_end_offsets  # noqa: E402
from platform_streams.serde import Bytes, Json  # noqa: E402

#: Group timings for every engine: short, so joins on the embedded broker take ~3 s, not ~23 s.
GROUP_TIMING: dict[str, Any] = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "max_poll_interval_ms": 10000,
}


# -- workloads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Input records plus the per-record work, as plain functions every engine calls."""

    name: str
    description: str
    key: Callable[[int], bytes]
    value: Callable[[int], bytes]
    predicate: Callable[[Any, Any], bool]  # (key, decoded value) -> keep?
    mapper: Callable[[Any], Any]  # decoded value -> new value

    def expected_outputs(self, records: int) -> int:
        return sum(1 for i in range(records) if self.predicate(self.key(i), orjson.loads(self.value(i))))


_CURRENCIES = ("EUR", "USD", "GBP", "JPY")


def _order_value(i: int) -> bytes:
    """~100 bytes of JSON: {"id":12,"user":"user-0012","sku":"sku-00012","amount":4.44,...}."""
    return orjson.dumps(
        {
            "id": i,
            "user": f"user-{i % 1000:04d}",
            "sku": f"sku-{i % 50_000:05d}",
            "amount": (i * 37 % 10_000) / 100,
            "currency": _CURRENCIES[i % 4],
            "ts": 1_700_000_000_000 + i,
        }
    )


def _big_order(key: Any, value: dict[str, Any]) -> bool:
    return value["amount"] >= 25.0  # keeps ~75%


def _to_cents(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": value["id"],
        "user": value["user"],
        "cents": int(value["amount"] * 100),
        "ccy": value["currency"],
    }


WORKLOADS: dict[str, Workload] = {
    "filter_map_json": Workload(
        name="filter_map_json",
        description="JSON orders: filter(amount >= 25) -> map_values(to cents) -> JSON out (~75% kept)",
        key=lambda i: f"user-{i % 1000:04d}".encode(),
        value=_order_value,
        predicate=_big_order,
        mapper=_to_cents,
    ),
}


# -- engines (run in the child process) ------------------------------------------------------


@dataclass(frozen=True)
class RunSpec:
    workload: str
    engine: str
    bootstrap: str
    input_topic: str
    output_topic: str
    records: int
    state_dir: str


@dataclass
class RunResult:
    workload: str
    engine: str
    records: int
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    outputs: int = 0

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s


class Timer:
    """Wall and process CPU time (all threads: Python and librdkafka) between start and stop."""

    def __init__(self) -> None:
        self._t0: float | None = None
        self._cpu0 = 0.0
        self.wall_s = 0.0
        self.cpu_s = 0.0

    @staticmethod
    def _cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def start(self) -> None:
        if self._t0 is None:  # the first assignment starts the clock
            self._t0, self._cpu0 = time.perf_counter(), self._cpu()

    def stop(self) -> None:
        assert self._t0 is not None, "the engine never got its partitions"
        self.wall_s, self.cpu_s = time.perf_counter() - self._t0, self._cpu() - self._cpu0


def _config(spec: RunSpec) -> StreamsConfig:
    return StreamsConfig(
        application_id=f"bench-{spec.engine}-{uuid.uuid4().hex[:8]}",
        bootstrap_servers=spec.bootstrap,
        state_dir=Path(spec.state_dir),
        **GROUP_TIMING,
    )


def run_platform_streams(workload: Workload, spec: RunSpec, timer: Timer) -> None:
    builder = StreamsBuilder()
    builder.stream(spec.input_topic, Consumed(key_serde=Bytes(), value_serde=Json())).filter(
        workload.predicate
    ).map_values(workload.mapper).to(spec.output_topic, Produced(key_serde=Bytes(), value_serde=Json()))
    streams = KafkaStreams(builder, _config(spec))
    streams.start()
    streams.wait_for_state(State.RUNNING, timeout_s=120)
    timer.start()
    while sum(w.processed_total for w in streams.workers) < spec.records:
        if streams.state() is not State.RUNNING and streams.state() is not State.REBALANCING:
            raise RuntimeError(f"platform_streams stopped: {streams.state()}")
        time.sleep(0.01)  # the harness's own polling: ~1% of a core
    streams.close(timeout_s=120)  # final commit: flush the producer, commit offsets, leave
    timer.stop()


def run_raw_confluent(workload: Workload, spec: RunSpec, timer: Timer) -> None:
    """consume -> orjson decode -> filter -> map -> encode -> produce -> commit, by hand.

    Same librdkafka settings as platform_streams (its consumer/producer configs), and the same
    record semantics (timestamps and headers carried over, offsets committed at the end or
    every commit interval after flushing the producer).
    """
    config = _config(spec)
    consumer = confluent_kafka.Consumer(config.consumer_configs(0))
    producer = confluent_kafka.Producer(config.producer_configs(0))
    consumer.subscribe([spec.input_topic], on_assign=lambda c, partitions: timer.start())
    loads, dumps, produce, poll = orjson.loads, orjson.dumps, producer.produce, producer.poll
    keep, mapper, out = workload.predicate, workload.mapper, spec.output_topic
    commit_every = config.commit_interval_ms / 1000
    next_commit = time.monotonic() + commit_every
    consumed = 0
    consume, poll_one = consumer.consume, consumer.poll
    while consumed < spec.records:
        # what is ready now; when nothing is, wait for the first record only: consume(n, t)
        # would wait the whole timeout for n records (the worker polls the same way)
        batch = consume(5000, 0)
        if not batch:
            first = poll_one(0.1)
            batch = [] if first is None else [first]
        for msg in batch:
            if msg.error() is not None:
                continue
            key, value = msg.key(), loads(msg.value() or b"null")
            if keep(key, value):
                encoded = dumps(mapper(value))
                while True:
                    try:
                        produce(out, encoded, key, timestamp=msg.timestamp()[1], headers=msg.headers())
                        break
                    except BufferError:
                        poll(0.05)
            consumed += 1
        poll(0)
        if time.monotonic() >= next_commit:
            producer.flush()
            consumer.commit(offsets=consumer.position(consumer.assignment()), asynchronous=False)
            next_commit = time.monotonic() + commit_every
    producer.flush()
    consumer.commit(offsets=consumer.position(consumer.assignment()), asynchronous=False)
    consumer.close()
    timer.stop()


ENGINES: dict[str, Callable[[Workload, RunSpec, Timer], None]] = {
    "platform_streams": run_platform_streams,
    "raw_confluent": run_raw_confluent,
}


def _peak_rss_mb() -> float:
    """This process's peak RSS: VmHWM (getrusage's ru_maxrss survives exec, so a child
    would report its parent's peak)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child_main(spec_json: str) -> None:
    """One measured run; prints a RunResult as JSON on the last line."""
    spec = RunSpec(**json.loads(spec_json))
    timer = Timer()
    ENGINES[spec.engine](WORKLOADS[spec.workload], spec, timer)
    peak_rss_mb = _peak_rss_mb()
    result = RunResult(spec.workload, spec.engine, spec.records, timer.wall_s, timer.cpu_s, peak_rss_mb)
    print(json.dumps(asdict(result)), flush=True)


# -- the harness (parent process) ------------------------------------------------------------


@contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    with EmbeddedBroker(kill_with_parent=True) as embedded:
        yield embedded.bootstrap_servers


def produce_inputs(
    bootstrap: str, admin: KafkaAdmin, workload: Workload, records: int, partitions: int
) -> str:
    topic = f"bench-{workload.name}-in-{uuid.uuid4().hex[:8]}"
    admin.create_topics([TopicSpec(topic, partitions)])
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 1_000_000,
            "partitioner": "murmur2_random",
            "allow.auto.create.topics": False,
        }
    )
    key, value = workload.key, workload.value
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value(i), key(i))
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("input records were not all delivered")
    return topic


def run_child(spec: RunSpec) -> RunResult:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(asdict(spec))],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{spec.engine} run failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return RunResult(**json.loads(proc.stdout.strip().splitlines()[-1]))


def count_outputs(bootstrap: str, topic: str, partitions: int) -> int:
    ends = log_end_offsets({"bootstrap.servers": bootstrap}, [(topic, p) for p in range(partitions)])
    return sum(ends.values())


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = cpu
    return (
        f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
        f"confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]}"
    )


def table(results: dict[tuple[str, str], list[RunResult]], baseline: str) -> str:
    lines = [
        "| workload | engine | records/s (median) | runs (records/s) | wall s | CPU s | CPU us/record "
        "| peak RSS MB | vs raw |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for (workload, engine), runs in results.items():
        median = statistics.median(r.records_per_s for r in runs)
        mid = min(runs, key=lambda r: abs(r.records_per_s - median))
        base = results.get((workload, baseline))
        ratio = median / statistics.median(r.records_per_s for r in base) if base else float("nan")
        each = ", ".join(f"{r.records_per_s:,.0f}" for r in runs)
        per_record_us = mid.cpu_s / mid.records * 1e6
        lines.append(
            f"| {workload} | {engine} | {median:,.0f} | {each} | {mid.wall_s:.2f} | {mid.cpu_s:.2f} "
            f"| {per_record_us:.1f} | {mid.peak_rss_mb:.0f} | {ratio:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--bootstrap", default=os.environ.get("PLATFORM_STREAMS_BOOTSTRAP") or None)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(args.child)
        return 0
    engines = [e for e in args.engines.split(",") if e]
    unknown = sorted(set(engines) - set(ENGINES)) + sorted(set(args.workloads.split(",")) - set(WORKLOADS))
    if unknown:
        parser.error(
            f"unknown engine/workload {unknown}; engines: {sorted(ENGINES)}, workloads: {sorted(WORKLOADS)}"
        )
    results: dict[tuple[str, str], list[RunResult]] = {}
    print(f"machine: {machine()}", flush=True)
    with (
        broker(args.bootstrap) as bootstrap,
        KafkaAdmin({"bootstrap.servers": bootstrap}) as admin,
        tempfile.TemporaryDirectory(prefix="ps-bench-") as state_dir,
    ):
        for name in args.workloads.split(","):
            workload = WORKLOADS[name]
            started = time.perf_counter()
            source = produce_inputs(bootstrap, admin, workload, args.records, args.partitions)
            expected = workload.expected_outputs(args.records)
            print(
                f"{name}: {args.records:,} inputs produced in {time.perf_counter() - started:.1f}s "
                f"({workload.description}); {expected:,} outputs expected",
                flush=True,
            )
            for repeat in range(args.repeats):
                order = engines if repeat % 2 == 0 else engines[::-1]  # alternate to spread drift
                for engine in order:
                    sink = f"bench-{name}-{engine}-out-{uuid.uuid4().hex[:8]}"
                    admin.create_topics([TopicSpec(sink, args.partitions)])
                    spec = RunSpec(name, engine, bootstrap, source, sink, args.records, state_dir)
                    result = run_child(spec)
                    result.outputs = count_outputs(bootstrap, sink, args.partitions)
                    if result.outputs < expected:
                        raise RuntimeError(f"{engine} wrote {result.outputs} of {expected} records")
                    results.setdefault((name, engine), []).append(result)
                    print(
                        f"  run {repeat + 1} {engine}: {result.records_per_s:,.0f} records/s, "
                        f"{result.wall_s:.2f}s wall, {result.cpu_s:.2f}s CPU, {result.peak_rss_mb:.0f} MB, "
                        f"{result.outputs:,} outputs",
                        flush=True,
                    )
    print()
    print(table(results, baseline="raw_confluent"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
