"""End-to-end latency at fixed input rates: produce -> output readable, per engine and guarantee.

    python bench/latency.py                                   # embedded broker, every cell
    python bench/latency.py --seconds 12 --rates 10,50,90 --engines raw_confluent,platform_streams
    python bench/latency.py --workloads filter_map_json,count_eos_100ms
    python bench/latency.py --rate-base raw                   # every engine at % of the raw loop's max

First each engine's maximum rate on each workload is measured on this broker, now
(``--rate-base engine``, the default): the engine child processes ``--max-sizes`` inputs
(two sizes) and its maximum is the steady-state rate between them, ``(B - A) / (wall(B) -
wall(A))``, which leaves out every engine's start-up (the JVM's JIT above all, which would
make a short run's rate a fraction of Java Kafka Streams' real maximum). With ``--rate-base
raw`` (the earlier setting) the raw loop's ``filter_map_json`` rate over ``--max-records``
is every engine's base. Then, per (workload, engine), one
engine child (the same ``bench/engine_*.py`` app bench/run.py measures; ``kafka_streams`` is
Java Kafka Streams in a JVM under it, stopped with it) runs on a fresh
input topic while a producer process writes orders at ``--rates`` percent of that maximum,
``--seconds`` per rate, one rate after the other with a pause between them that lets the
previous rate's outputs drain. Every record's timestamp (and its ``ts`` field) is its send
time; the engines carry the input timestamp to their output (Kafka Streams' semantics: a
count's output has the timestamp of the record that updated it). A reader in this process
consumes the output topic (``read_committed``: under exactly-once an output is readable only
once its transaction commits) and takes ``receive time - record timestamp`` of every output
record: p50/p99/p999 per rate. The producer's ``linger.ms`` is 5 ms and the reader polls
continuously; both are in every engine's numbers alike.

A count's output leaves a record cache (platform_streams), the dirty map of the raw loop,
or -- Quix Streams -- is produced for every update; at-least-once with 5 s commits makes a
cached count wait for the commit, so its latency is about the commit interval by design.

Workloads: ``filter_map_json`` and ``count`` (at-least-once, 5 s commits: bench/run.py's
setting for every engine and Quix's default; platform_streams' own default is Kafka
Streams' 30 s), ``*_alos_100ms`` and ``*_eos_100ms`` (see bench/latency_child.py).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from array import array
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402
import orjson  # noqa: E402

from bench.common import RunSpec  # noqa: E402
from bench.latency_child import EXTRA_WORKLOADS  # noqa: E402
from bench.run import broker, ensure_quix_python, machine, produce_input  # noqa: E402
from bench.workloads import ORDERS, WORKLOADS  # noqa: E402
from platform_streams.kafka import KafkaAdmin, TopicSpec  # noqa: E402

ALL_WORKLOADS = {**WORKLOADS, **EXTRA_WORKLOADS}
DEFAULT_WORKLOADS = (
    "filter_map_json",
    "filter_map_json_alos_100ms",
    "filter_map_json_eos_100ms",
    "count",
    "count_alos_100ms",
    "count_eos_100ms",
)
#: an input partition's end the engines never reach: the harness stops them
_NEVER = 1 << 60


@dataclass
class Phase:
    """One rate's produce window, as the producer process reports it."""

    percent: int
    target_per_s: float
    start_ms: int
    end_ms: int
    sent: int

    @property
    def achieved_per_s(self) -> float:
        return self.sent / max((self.end_ms - self.start_ms) / 1000, 1e-9)


def _producer_conf(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "acks": "all",
        "queue.buffering.max.messages": 1_000_000,
        "partitioner": "murmur2_random",
        "allow.auto.create.topics": False,
    }


def produce_phases(
    bootstrap: str,
    topic: str,
    rates: list[tuple[int, float]],
    seconds: float,
    pause_s: float,
    ready: Any,
    phases: Any,
) -> None:
    """Warm up (a few records a second until ``ready`` is set: the engine is assigned and
    writing), then produce each ``(percent, records/s)`` for ``seconds``, paced every ms."""
    producer = confluent_kafka.Producer(_producer_conf(bootstrap))
    key = ORDERS.key
    i = 0

    def send() -> None:
        nonlocal i
        now = int(time.time() * 1000)
        value = orjson.dumps(
            {"id": i, "user": f"user-{i % 1000:04d}", "amount": 50.0 + i % 50, "currency": "EUR", "ts": now}
        )
        while True:
            try:
                producer.produce(topic, value, key(i), timestamp=now)
                break
            except BufferError:
                producer.poll(0.01)
        i += 1

    while not ready.is_set():
        send()
        producer.poll(0.05)
    producer.flush(30)
    time.sleep(1.0)
    for percent, rate in rates:
        start = time.time()
        sent = 0
        deadline = start + seconds
        while True:
            now = time.time()
            if now >= deadline:
                break
            due = int((now - start) * rate)
            while sent < due:
                send()
                sent += 1
            producer.poll(0)
            if sent >= due:
                time.sleep(0.001)
        end = time.time()
        producer.flush(60)
        phases.put(asdict(Phase(percent, rate, int(start * 1000), int(end * 1000), sent)))
        time.sleep(pause_s)
    producer.flush(60)
    phases.put(None)


def _percentile(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    return float(values[min(len(values) - 1, int(q * len(values)))])


@dataclass
class Cell:
    workload: str
    engine: str
    phase: Phase
    outputs: int
    p50: float
    p99: float
    p999: float
    load: float


def measure(
    bootstrap: str,
    admin: KafkaAdmin,
    engine: str,
    python: str,
    workload_name: str,
    rates: list[tuple[int, float]],
    args: argparse.Namespace,
) -> list[Cell]:
    """One engine child on a fresh input; the producer walks through ``rates``."""
    workload = ALL_WORKLOADS[workload_name]
    app_id = f"bench-latency-{workload_name}-{engine}-{uuid.uuid4().hex[:8]}"
    source, sink = f"{app_id}-in", f"{app_id}-out"
    admin.create_topics(
        [
            TopicSpec(source, args.partitions, config={"retention.ms": str(7 * 24 * 3600 * 1000)}),
            TopicSpec(sink, args.partitions),
        ]
    )
    state_dir = tempfile.mkdtemp(prefix="ps-bench-latency-")
    spec = RunSpec(
        workload_name,
        engine,
        bootstrap,
        source,
        sink,
        _NEVER,
        state_dir,
        app_id,
        input_ends={str(p): _NEVER for p in range(args.partitions)},
    )
    child = subprocess.Popen(
        [python, "-m", "bench.latency_child", orjson.dumps(asdict(spec)).decode()],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the kafka_streams JVM is stopped with it
    )
    ctx = multiprocessing.get_context("spawn")
    ready, phases_q = ctx.Event(), ctx.Queue()
    pause_s = workload.commit_interval_ms / 1000 + 3.0
    producer = ctx.Process(
        target=produce_phases, args=(bootstrap, source, rates, args.seconds, pause_s, ready, phases_q)
    )
    producer.start()
    reader = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{app_id}-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
            "fetch.queue.backoff.ms": 1,
        }
    )
    reader.assign(
        [
            confluent_kafka.TopicPartition(sink, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(args.partitions)
        ]
    )
    stamps, latencies = array("q"), array("q")
    phases: list[Phase] = []
    produced_all = False
    last_output = time.monotonic()
    started = time.monotonic()
    loads: list[float] = []
    try:
        while True:
            batch = reader.consume(10_000, 0.05)
            now_ms = int(time.time() * 1000)
            for msg in batch:
                if msg.error() is None:
                    ts = msg.timestamp()[1]
                    stamps.append(ts)
                    latencies.append(now_ms - ts)
            if batch:
                last_output = time.monotonic()
                if not ready.is_set():
                    ready.set()
            if child.poll() is not None:
                raise RuntimeError(f"{engine} on {workload_name} exited: {child.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            if not ready.is_set() and time.monotonic() - started > 300:  # a JVM on a busy machine
                raise RuntimeError(f"{engine} on {workload_name}: no output after 300 s")
            while not phases_q.empty():
                item = phases_q.get()
                if item is None:
                    produced_all = True
                else:
                    phases.append(Phase(**item))
                    loads.append(os.getloadavg()[0])
            if produced_all and time.monotonic() - last_output > 3.0:
                break
    finally:
        reader.close()
        _stop_group(child, signal.SIGTERM)
        try:
            child.wait(20)
        except subprocess.TimeoutExpired:
            _stop_group(child, signal.SIGKILL)
            child.wait()
        producer.join(30)
        if producer.is_alive():
            producer.kill()
        shutil.rmtree(state_dir, ignore_errors=True)
        internal = [t for t in admin.list_topics() if app_id in t]
        admin.delete_topics(internal)  # the bench's own topics: input, output, changelogs
    cells = []
    for phase, load in zip(phases, loads, strict=True):
        mine = sorted(
            lat for ts, lat in zip(stamps, latencies, strict=True) if phase.start_ms <= ts <= phase.end_ms
        )
        cells.append(
            Cell(
                workload_name,
                engine,
                phase,
                len(mine),
                _percentile(mine, 0.50),
                _percentile(mine, 0.99),
                _percentile(mine, 0.999),
                load,
            )
        )
    return cells


def _stop_group(child: subprocess.Popen[str], sig: signal.Signals) -> None:
    """Signal the child's process group (the child and, for kafka_streams, its JVM)."""
    try:
        os.killpg(child.pid, sig)
    except ProcessLookupError:
        pass


def _timed_run(spec: RunSpec, python: str) -> float:
    """Wall seconds of one measured run of ``spec`` (the latency child: it knows the
    latency-only workloads), from assignment to every input record processed."""
    proc = subprocess.run(
        [python, "-m", "bench.latency_child", orjson.dumps(asdict(spec)).decode()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{spec.engine} maximum run failed: {proc.stderr[-3000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return float(orjson.loads(lines[-1])["wall_s"])


def _max_run(
    bootstrap: str, admin: KafkaAdmin, workload_name: str, engine: str, python: str, source: Any, records: int
) -> float:
    """Wall seconds of ``engine`` over ``records`` inputs of ``source`` in a fresh application
    (its topics deleted after)."""
    app_id = f"bench-latency-max-{engine}-{uuid.uuid4().hex[:8]}"
    admin.create_topics([TopicSpec(f"{app_id}-out", len(source.ends))])
    with tempfile.TemporaryDirectory(prefix="ps-bench-latency-") as state_dir:
        spec = RunSpec(
            workload_name,
            engine,
            bootstrap,
            source.topic,
            f"{app_id}-out",
            records,
            state_dir,
            app_id,
            input_ends={str(p): end for p, end in source.ends.items()},
        )
        wall = _timed_run(spec, python)
    admin.delete_topics([t for t in admin.list_topics() if app_id in t])
    return wall


def engine_maximum(
    bootstrap: str,
    admin: KafkaAdmin,
    engine: str,
    python: str,
    workload_name: str,
    sizes: list[int],
    inputs: dict[tuple[str, int], Any],
    partitions: int,
) -> float:
    """``engine``'s steady-state records/s on ``workload_name``: the records between the
    smallest and the largest of ``sizes`` over the wall time between their runs."""
    walls = []
    workload = ALL_WORKLOADS[workload_name]
    for records in (sizes[0], sizes[-1]):
        source = inputs.get((workload.input.name, records))
        if source is None:
            source = inputs[(workload.input.name, records)] = produce_input(
                bootstrap, admin, workload.input, records, partitions
            )
        walls.append(_max_run(bootstrap, admin, workload_name, engine, python, source, records))
    spent = walls[1] - walls[0]
    if spent <= 0:
        raise RuntimeError(f"{engine} on {workload_name}: no steady-state rate (walls {walls})")
    return (sizes[-1] - sizes[0]) / spent


def raw_maximum(bootstrap: str, admin: KafkaAdmin, records: int, partitions: int) -> float:
    """The raw loop's records/s on ``filter_map_json`` over ``records`` inputs, now."""
    source = produce_input(bootstrap, admin, ORDERS, records, partitions)
    wall = _max_run(bootstrap, admin, "filter_map_json", "raw_confluent", sys.executable, source, records)
    admin.delete_topics([source.topic])
    return records / wall


def table(cells: list[Cell], rate_base: str = "raw") -> str:
    raw = {(c.workload, c.phase.percent): c for c in cells if c.engine == "raw_confluent"}
    lines = [
        f"| workload | rate (% of {'raw' if rate_base == 'raw' else 'own'} max) | engine | target/s | sent/s "
        "| outputs | p50 ms | p99 ms "
        "| p999 ms | p99 vs raw | goal p99 <= 2x raw | load |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for c in cells:
        base = raw.get((c.workload, c.phase.percent))
        if base is None or c.engine == "raw_confluent" or base.p99 != base.p99:
            ratio, goal = "-", "-"
        else:
            r = c.p99 / max(base.p99, 1.0)
            ratio, goal = f"{r:.2f}", ("met" if r <= 2.0 else "NOT met")
        lines.append(
            f"| {c.workload} | {c.phase.percent}% | {c.engine} | {c.phase.target_per_s:,.0f} "
            f"| {c.phase.achieved_per_s:,.0f} | {c.outputs:,} | {c.p50:,.0f} | {c.p99:,.0f} | {c.p999:,.0f} "
            f"| {ratio} | {goal} | {c.load:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=12.0, help="produce time per rate")
    parser.add_argument("--rates", default="10,50,90", help="percent of the raw loop's maximum")
    parser.add_argument("--max-records", type=int, default=300_000, help="input of the maximum's run")
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    parser.add_argument("--engines", default="raw_confluent,platform_streams,kafka_streams")
    parser.add_argument(
        "--rate-base",
        choices=["engine", "raw"],
        default="engine",
        help="rates as % of each engine's own maximum on the workload, or of the raw loop's",
    )
    parser.add_argument(
        "--max-sizes", default="100000,400000", help="the two input sizes of an engine's maximum"
    )
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap", default=os.environ.get("PLATFORM_STREAMS_BOOTSTRAP_SERVERS") or None)
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    names = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(names) - set(ALL_WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {sorted(ALL_WORKLOADS)}")
    pythons = {e: sys.executable for e in engines}
    if "quixstreams" in engines:
        pythons["quixstreams"] = ensure_quix_python()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    cells: list[Cell] = []
    percents = [int(p) for p in args.rates.split(",")]
    sizes = sorted(int(n) for n in args.max_sizes.split(","))
    inputs: dict[tuple[str, int], Any] = {}
    with broker(args.bootstrap) as bootstrap, KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        if args.rate_base == "raw":
            maximum = raw_maximum(bootstrap, admin, args.max_records, args.partitions)
            raw_rates = [(p, maximum * p / 100) for p in percents]
            print(
                f"raw loop maximum (filter_map_json, {args.max_records:,} records): {maximum:,.0f} records/s",
                flush=True,
            )
        for name in names:
            for engine in engines:
                try:
                    if args.rate_base == "raw":
                        rates = raw_rates
                    else:
                        own = engine_maximum(
                            bootstrap, admin, engine, pythons[engine], name, sizes, inputs, args.partitions
                        )
                        rates = [(p, own * p / 100) for p in percents]
                        print(f"  {name} {engine}: maximum {own:,.0f} records/s (steady state)", flush=True)
                    done = measure(bootstrap, admin, engine, pythons[engine], name, rates, args)
                except RuntimeError as exc:
                    print(f"  {name} {engine}: FAILED {exc}", flush=True)
                    continue
                cells += done
                for c in done:
                    print(
                        f"  {name} {engine} {c.phase.percent}%: sent {c.phase.achieved_per_s:,.0f}/s, "
                        f"{c.outputs:,} outputs, p50 {c.p50:,.0f} ms, p99 {c.p99:,.0f} ms, "
                        f"p999 {c.p999:,.0f} ms, load {c.load:.1f}",
                        flush=True,
                    )
    print()
    print(table(cells, args.rate_base))
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
