"""Benchmark workloads x engines on one broker and print a table of records/s, CPU and memory.

    python bench/run.py                                  # embedded broker, 1,000,000 records, 3 repeats
    python bench/run.py --records 200000 --repeats 1 --workloads count,window_sum
    python bench/run.py --engines platform_streams,raw_confluent     # skip Quix Streams
    PLATFORM_STREAMS_BOOTSTRAP_SERVERS=host:9092 python bench/run.py         # an external cluster

Engines: ``raw_confluent`` (a hand-written confluent-kafka loop: the ceiling),
``quixstreams`` (Quix Streams, the peer on the same stack) and ``platform_streams``; see
``bench/engine_*.py``. Workloads: :data:`bench.workloads.WORKLOADS`.

The input of a workload is produced once per input shape; then every (repeat, engine) run
is a fresh child process with a fresh application id, output topic and state directory,
so its CPU time and peak RSS are its own. Engines alternate their order between repeats.
An engine times itself from partition assignment (group joins take seconds on the embedded
broker and are not what is measured) to "every input record processed, output flushed,
offsets committed". A workload with ``restore`` then starts the same application on an
empty state directory and times assignment -> state rebuilt from the changelog -> ready.
Each run's output is read back and checked against the right answer.

Quix Streams pins an older confluent-kafka than platform_streams needs, so its children run
in ``bench/.venv-quix`` (created here on first use with ``QUIX_VERSION``); both engines
talk to the same broker and read the same input.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make ``bench`` and ``platform_streams`` importable
    sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402

from bench import verify  # noqa: E402
from bench.child import MODULES  # noqa: E402
from bench.common import GROUP_TIMING, RunResult, RunSpec, Timer  # noqa: E402
from bench.workloads import WORKLOADS, InputSpec, Workload  # noqa: E402
from platform_streams.kafka import EmbeddedBroker, KafkaAdmin, TopicSpec, log_end_offsets  # noqa: E402

__all__ = ["GROUP_TIMING", "WORKLOADS", "Timer", "broker", "machine", "produce_inputs"]

#: engine -> the module that runs it in the child
ENGINES = MODULES
QUIX_VERSION = "3.28.1"
QUIX_VENV = ROOT / "bench" / ".venv-quix"


# -- inputs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputTopic:
    topic: str
    base_ts: int
    #: partition -> log end offset
    ends: dict[int, int]


@contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    with EmbeddedBroker(kill_with_parent=True) as embedded:
        yield embedded.bootstrap_servers


def produce_input(
    bootstrap: str, admin: KafkaAdmin, spec: InputSpec, records: int, partitions: int
) -> InputTopic:
    """Produce ``records`` of ``spec`` once; timestamps end about now (real brokers keep them)."""
    topic = f"bench-{spec.name}-in-{uuid.uuid4().hex[:8]}"
    # Kafka's default retention, explicit: Tansu describes no default configs, and Quix
    # derives its changelog topics' retention from the input topic's
    admin.create_topics([TopicSpec(topic, partitions, config={"retention.ms": str(7 * 24 * 3600 * 1000)})])
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
    base_ts = int(time.time() * 1000) - records
    key, value, timestamp = spec.key, spec.value, spec.timestamp
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value(i, base_ts), key(i), timestamp=timestamp(i, base_ts))
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("input records were not all delivered")
    ends = log_end_offsets({"bootstrap.servers": bootstrap}, [(topic, p) for p in range(partitions)])
    return InputTopic(topic, base_ts, {p: end for (_, p), end in ends.items()})


def produce_inputs(
    bootstrap: str, admin: KafkaAdmin, workload: Workload, records: int, partitions: int
) -> str:
    """The input topic of ``workload`` (kept for bench/metrics_overhead.py)."""
    return produce_input(bootstrap, admin, workload.input, records, partitions).topic


# -- runs ------------------------------------------------------------------------------------


def ensure_quix_python() -> str:
    """The interpreter of ``bench/.venv-quix``, created with Quix Streams on first use."""
    python = QUIX_VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {QUIX_VENV} with quixstreams=={QUIX_VERSION} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(QUIX_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"quixstreams=={QUIX_VERSION}"], check=True
        )
    return str(python)


def run_child(spec: RunSpec, python: str) -> RunResult:
    proc = subprocess.run(
        [python, "-m", "bench.child", json.dumps(asdict(spec))],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{spec.engine} {spec.phase} run failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return RunResult(**json.loads(proc.stdout.strip().splitlines()[-1]))


def changelog_records(bootstrap: str, admin: KafkaAdmin, app_id: str) -> int:
    """Records in the application's changelog topics (each engine names them its own way)."""
    topics = admin.list_topics()
    wanted = [(t, p) for t, n in topics.items() if app_id in t and "changelog" in t for p in range(n)]
    return sum(log_end_offsets({"bootstrap.servers": bootstrap}, wanted).values())


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


# -- the table -------------------------------------------------------------------------------


def _median(runs: list[RunResult]) -> float:
    return statistics.median(r.records_per_s for r in runs)


def table(results: dict[tuple[str, str], list[RunResult]]) -> str:
    lines = [
        "| workload | engine | records/s (median) | runs (records/s) | wall s | CPU s | CPU us/record "
        "| peak RSS MB | outputs | load | vs raw | vs quix |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (workload, engine), runs in results.items():
        median = _median(runs)
        mid = min(runs, key=lambda r: abs(r.records_per_s - median))
        ratios = []
        for base in ("raw_confluent", "quixstreams"):
            other = results.get((workload, base))
            ratios.append(f"{median / _median(other):.2f}" if other else "-")
        each = ", ".join(f"{r.records_per_s:,.0f}" for r in runs)
        per_record_us = mid.cpu_s / mid.records * 1e6 if mid.records else 0.0
        outputs = f"{mid.restored_entries:,} entries" if workload.endswith("/restore") else f"{mid.outputs:,}"
        lines.append(
            f"| {workload} | {engine} | {median:,.0f} | {each} | {mid.wall_s:.2f} | {mid.cpu_s:.2f} "
            f"| {per_record_us:.1f} | {mid.peak_rss_mb:.0f} | {outputs} | {mid.note} "
            f"| {ratios[0]} | {ratios[1]} |"
        )
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------------


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def run_workload(
    workload: Workload,
    source: InputTopic,
    engines: list[str],
    args: argparse.Namespace,
    bootstrap: str,
    admin: KafkaAdmin,
    pythons: dict[str, str],
    results: dict[tuple[str, str], list[RunResult]],
) -> None:
    answer = verify.Answer(workload, args.records, source.base_ts)
    mine = [e for e in engines if workload.engines is None or e in workload.engines]
    for repeat in range(args.repeats):
        for engine in mine if repeat % 2 == 0 else mine[::-1]:  # alternate to spread drift
            app_id = f"bench-{workload.name}-{engine}-{uuid.uuid4().hex[:8]}"
            sink = f"{app_id}-out"
            admin.create_topics([TopicSpec(sink, args.partitions)])
            state_dir = tempfile.mkdtemp(prefix="ps-bench-", dir=args.state_root)
            spec = RunSpec(
                workload.name,
                engine,
                bootstrap,
                source.topic,
                sink,
                args.records,
                state_dir,
                app_id,
                input_ends={str(p): end for p, end in source.ends.items()},
            )
            load = _load()
            try:
                result = run_child(spec, pythons[engine])
            finally:
                shutil.rmtree(state_dir, ignore_errors=True)
            result.note = load
            result.outputs = answer.check(bootstrap, sink, args.partitions, engine)
            results.setdefault((workload.name, engine), []).append(result)
            print(
                f"  run {repeat + 1} {engine}: {result.records_per_s:,.0f} records/s, "
                f"{result.wall_s:.2f}s wall, {result.cpu_s:.2f}s CPU, {result.peak_rss_mb:.0f} MB, "
                f"{result.outputs:,} outputs (checked), load {load}",
                flush=True,
            )
            if workload.restore:
                restore_dir = tempfile.mkdtemp(prefix="ps-bench-restore-", dir=args.state_root)
                load = _load()
                try:
                    restored = run_child(
                        replace(spec, phase="restore", state_dir=restore_dir), pythons[engine]
                    )
                finally:
                    shutil.rmtree(restore_dir, ignore_errors=True)
                restored.records = changelog_records(bootstrap, admin, app_id)
                restored.note = load
                answer.check_restored(restored.restored_entries, engine)
                results.setdefault((f"{workload.name}/restore", engine), []).append(restored)
                print(
                    f"  run {repeat + 1} {engine} restore: {restored.records:,} changelog records in "
                    f"{restored.wall_s:.2f}s ({restored.records_per_s:,.0f}/s), {restored.cpu_s:.2f}s CPU, "
                    f"{restored.restored_entries:,} entries, {restored.peak_rss_mb:.0f} MB, load {load}",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--bootstrap", default=os.environ.get("PLATFORM_STREAMS_BOOTSTRAP_SERVERS") or None)
    parser.add_argument("--state-root", default=None, help="where run state directories go (default: tmp)")
    args = parser.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    names = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(engines) - set(ENGINES)) + sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown {unknown}; engines: {sorted(ENGINES)}, workloads: {sorted(WORKLOADS)}")
    pythons = {e: sys.executable for e in engines}
    if "quixstreams" in engines:
        pythons["quixstreams"] = ensure_quix_python()
    results: dict[tuple[str, str], list[RunResult]] = {}
    print(f"machine: {machine()}; load average {_load()}", flush=True)
    with broker(args.bootstrap) as bootstrap, KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        inputs: dict[str, InputTopic] = {}
        for name in names:
            workload = WORKLOADS[name]
            source = inputs.get(workload.input.name)
            if source is None:
                started = time.perf_counter()
                source = inputs[workload.input.name] = produce_input(
                    bootstrap, admin, workload.input, args.records, args.partitions
                )
                print(
                    f"{workload.input.name}: {args.records:,} inputs produced in "
                    f"{time.perf_counter() - started:.1f}s",
                    flush=True,
                )
            print(f"{name}: {workload.description}", flush=True)
            run_workload(workload, source, engines, args, bootstrap, admin, pythons, results)
    print()
    print(table(results))
    print(f"\nload average at the end: {_load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
