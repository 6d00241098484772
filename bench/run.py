"""Benchmark workloads x engines on one or both brokers; print tables of records/s, CPU and memory.

    python bench/run.py                                  # embedded Tansu, 1,000,000 records, 3 repeats
    python bench/run.py --broker both                    # Tansu and Apache Kafka, side by side
    python bench/run.py --records 200000 --repeats 1 --workloads count,window_sum
    python bench/run.py --engines platform_streams,raw_confluent     # skip Quix Streams and Java
    python bench/run.py --broker kafka --sizes 200000,2000000        # + marginal CPU per record
    PLATFORM_STREAMS_BOOTSTRAP_SERVERS=host:9092 python bench/run.py         # an external cluster

Engines: ``raw_confluent`` (a hand-written confluent-kafka loop: the ceiling),
``quixstreams`` (Quix Streams, the peer on the same stack), ``platform_streams`` and
``kafka_streams`` (Java Kafka Streams, the peer a Kafka user would pick; needs Java 17 and
Maven); see ``bench/engine_*.py``. Workloads: :data:`bench.workloads.WORKLOADS`.

Brokers (``--broker tansu|kafka|both``): the embedded Tansu, and Apache Kafka run from its
Maven Central jars (:class:`~platform_streams.kafka.ApacheKafkaBroker`, one KRaft node).
With ``both``, both run at once and every repeat of a workload runs on each in turn, so
slow drifts of the machine's load fall on both alike; the last table puts each case's
figures on the two brokers side by side ("the hidden cost of Tansu").

The input of a workload is produced once per input shape; then every (repeat, engine) run
is a fresh child process with a fresh application id, output topic and state directory,
so its CPU time and peak RSS are its own. Engines alternate their order between repeats.
An engine times itself from partition assignment (group joins take seconds on the embedded
broker and are not what is measured) to "every input record processed, output flushed,
offsets committed". A workload with ``restore`` then starts the same application on an
empty state directory and times assignment -> state rebuilt from the changelog -> ready.
Each run's output is read back and checked against the right answer.

``--sizes A,B`` (instead of ``--records``) runs every engine at both input sizes back to back
(the size order alternates between rounds; the engine order rotates between workloads and
rounds) and adds a table of the marginal CPU per record, ``(CPU(B) - CPU(A)) / (B - A)`` of
the medians, with the ratios raw/engine and Java/engine: the steady-state cost, without any
engine's start-up (the JVM's JIT and class loading above all) and less sensitive to a busy
machine than wall time. A restore's marginal is per changelog record. The per-size tables
show each size as ``workload@records``; ``--results-json`` keeps both.

Quix Streams pins an older confluent-kafka than platform_streams needs, so its children run
in ``bench/.venv-quix`` (created here on first use with ``QUIX_VERSION``); both engines
talk to the same broker and read the same input.

A restore whose store is wrong fails the bench, except where the broker is the cause: an
engine that stops restoring at ListOffsets' end (Kafka Streams) on a broker whose
ListOffsets is not exact (Tansu; probed, ``exact_list_offsets``) gets its row marked wrong
with the reason instead of a rate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make ``bench`` and ``platform_streams`` importable
    sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402
import orjson  # noqa: E402

from bench import verify  # noqa: E402
from bench.child import MODULES  # noqa: E402
from bench.common import GROUP_TIMING, RunResult, RunSpec, Timer  # noqa: E402
from bench.tables import Results, marginal_table, side_by_side, table  # noqa: E402
from bench.workloads import (  # noqa: E402
    EVENT_TIME_START_MS,
    ORDER_AVRO,
    REGISTRY_URL,
    WORKLOADS,
    InputSpec,
    Workload,
)
from platform_streams.dev.brokers import ApacheKafkaBroker, EmbeddedBroker  # noqa: E402
from platform_streams.kafka import KafkaAdmin, TopicSpec, log_end_offsets  # noqa: E402
from platform_streams.kafka.capabilities import broker_supports  # noqa: E402
from platform_streams.serde import Avro  # noqa: E402

__all__ = ["GROUP_TIMING", "WORKLOADS", "Timer", "broker", "machine", "produce_inputs"]

#: engine -> the module that runs it in the child
ENGINES = MODULES
QUIX_VERSION = "3.28.1"
QUIX_VENV = ROOT / "bench" / ".venv-quix"
BROKERS = ("tansu", "kafka")
#: engines whose restore reads to the end seen in fetches, so they are right on every broker
#: (a wrong store from them is a bug and fails the bench)
EXACT_RESTORE_ENGINES = ("raw_confluent", "platform_streams")


# -- inputs ----------------------------------------------------------------------------------


NO_RETENTION = {"retention.ms": "-1"}


@dataclass(frozen=True)
class InputTopic:
    topic: str
    base_ts: int
    #: partition -> log end offset
    ends: dict[int, int]


@contextmanager
def broker(bootstrap: str | None, kind: str = "tansu") -> Iterator[str]:
    """``bootstrap`` if given, else a broker of ``kind`` started here and stopped on exit."""
    if bootstrap:
        yield bootstrap
        return
    local_type = ApacheKafkaBroker if kind == "kafka" else EmbeddedBroker
    with local_type(kill_with_parent=True) as local:
        yield local.bootstrap_servers


def produce_input(
    bootstrap: str,
    admin: KafkaAdmin,
    spec: InputSpec,
    records: int,
    partitions: int,
    registry_url: str | None = None,
) -> InputTopic:
    """Produce ``records`` of ``spec`` once, event time from :data:`EVENT_TIME_START_MS`
    (an Avro input through the registry at ``registry_url``)."""
    topic = f"bench-{spec.name}-in-{uuid.uuid4().hex[:8]}"
    # no time retention, explicit: Apache Kafka would delete records timestamped in 1970 at
    # its next retention check, Tansu describes no default configs, and Quix derives its
    # changelog topics' retention from the input topic's
    admin.create_topics([TopicSpec(topic, partitions, config=NO_RETENTION)])
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
    base_ts = EVENT_TIME_START_MS
    key, value, timestamp = spec.key, spec.value, spec.timestamp
    if spec.encoding == "avro":
        writer = Avro(registry_url or "", ORDER_AVRO, topic=topic)

        def avro_value(i: int, base_ts: int) -> bytes:
            return writer.serialize(orjson.loads(spec.value(i, base_ts))) or b""

        value = avro_value
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
    """One measured run in a fresh child. ``BENCH_PROFILE_DIR`` (optional) runs each
    platform_streams child under ``py-spy record`` (``BENCH_PY_SPY``, default ``py-spy`` on the
    PATH) and writes its raw stacks per run there (``BENCH_PY_SPY_ARGS``: more py-spy options,
    e.g. ``--idle``): how the profiles of bench/RESULTS.md's CPU sections were made."""
    command = [python, "-m", "bench.child", json.dumps(asdict(spec))]
    profile_dir = os.environ.get("BENCH_PROFILE_DIR")
    if profile_dir and spec.engine == "platform_streams":
        out = Path(profile_dir, f"{spec.workload}-{spec.phase}-{uuid.uuid4().hex[:6]}.txt")
        spy = os.environ.get("BENCH_PY_SPY", "py-spy")
        extra = os.environ.get("BENCH_PY_SPY_ARGS", "").split()  # e.g. --idle
        record = [spy, "record", "--format", "raw", "--threads", "-r", "250", *extra, "-o", str(out)]
        command = [*record, "--", *command]
    proc = subprocess.run(
        command,
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
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]  # py-spy prints too
    return RunResult(**json.loads(lines[-1]))


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


# -- main ------------------------------------------------------------------------------------


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


class LoadSampler:
    """The 1-minute load average every ``interval_s`` while the bench runs (a daemon thread),
    so the report can say how busy the machine was, not just at the start and end."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True)

    def _run(self, interval_s: float) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(interval_s):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> str:
        ordered = sorted(self.samples)
        if not ordered:
            return "no samples"
        median = ordered[len(ordered) // 2]
        return f"min {ordered[0]:.1f}, median {median:.1f}, max {ordered[-1]:.1f} ({len(ordered)} samples)"


@dataclass
class Target:
    """One broker under test, its admin client and the inputs produced on it."""

    name: str
    bootstrap: str
    admin: KafkaAdmin
    #: ListOffsets(latest) is the log end (Apache Kafka; not Tansu): probed
    exact_list_offsets: bool
    inputs: dict[tuple[str, int], InputTopic] = field(default_factory=dict)

    def input_for(
        self, workload: Workload, args: argparse.Namespace, records: int | None = None
    ) -> InputTopic:
        records = records or args.records
        source = self.inputs.get((workload.input.name, records))
        if source is None:
            started = time.perf_counter()
            registry = getattr(args, "registry_url", None)  # other scripts' args have none
            source = self.inputs[(workload.input.name, records)] = produce_input(
                self.bootstrap, self.admin, workload.input, records, args.partitions, registry
            )
            print(
                f"[{self.name}] {workload.input.name}: {records:,} inputs produced in "
                f"{time.perf_counter() - started:.1f}s",
                flush=True,
            )
        return source


def new_run(
    workload: str,
    engine: str,
    bootstrap: str,
    admin: KafkaAdmin,
    source: InputTopic,
    args: argparse.Namespace,
    records: int | None = None,
) -> RunSpec:
    """A fresh application id, output topic and state directory for one run over ``source``."""
    app_id = f"bench-{workload}-{engine}-{uuid.uuid4().hex[:8]}"
    sink = f"{app_id}-out"
    admin.create_topics([TopicSpec(sink, args.partitions, config=NO_RETENTION)])
    state_dir = tempfile.mkdtemp(prefix="ps-bench-", dir=getattr(args, "state_root", None))
    ends = {str(p): end for p, end in source.ends.items()}
    records = records or args.records
    return RunSpec(
        workload, engine, bootstrap, source.topic, sink, records, state_dir, app_id, input_ends=ends
    )


def run_once(
    workload: Workload,
    engine: str,
    target: Target,
    args: argparse.Namespace,
    python: str,
    results: Results,
    records: int | None = None,
) -> None:
    """One processing run of ``engine`` on ``target`` (and its restore), checked and recorded;
    ``records`` (default ``--records``) is the input size, which labels the results when the
    bench runs several (``workload@records``)."""
    records = records or args.records
    label = f"{workload.name}@{records}" if getattr(args, "size_list", None) else workload.name
    source = target.input_for(workload, args, records)
    answer = verify.Answer(workload, records, source.base_ts)
    bootstrap, admin = target.bootstrap, target.admin
    spec = new_run(workload.name, engine, bootstrap, admin, source, args, records)
    if workload.input.encoding == "avro":
        spec = replace(spec, config={**spec.config, REGISTRY_URL: args.registry_url})
    app_id, sink, state_dir = spec.app_id, spec.output_topic, spec.state_dir
    load = _load()
    try:
        result = run_child(spec, python)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    result.note = load
    result.outputs = answer.check(bootstrap, sink, args.partitions, engine)
    results.setdefault((target.name, label, engine), []).append(result)
    print(
        f"  [{target.name}] {engine} {records:,}: {result.records_per_s:,.0f} records/s, "
        f"{result.wall_s:.2f}s wall, {result.cpu_s:.2f}s CPU, {result.peak_rss_mb:.0f} MB, "
        f"{result.outputs:,} outputs (checked), load {load}",
        flush=True,
    )
    if not workload.restore:
        return
    restore_dir = tempfile.mkdtemp(prefix="ps-bench-restore-", dir=args.state_root)
    load = _load()
    try:
        restored = run_child(replace(spec, phase="restore", state_dir=restore_dir), python)
    finally:
        shutil.rmtree(restore_dir, ignore_errors=True)
    restored.records = changelog_records(bootstrap, admin, app_id)
    restored.note = load
    problem = answer.restored_problem(restored.restored_entries)
    if problem and (engine in EXACT_RESTORE_ENGINES or target.exact_list_offsets):
        raise AssertionError(f"{engine} on {target.name} {problem}")
    if problem:
        restored.wrong = f"wrong on {target.name}: {problem} (stops at ListOffsets' end, inexact here)"
    restore_label = f"{workload.name}/restore{label[len(workload.name):]}"
    results.setdefault((target.name, restore_label, engine), []).append(restored)
    print(
        f"  [{target.name}] {engine} restore: {restored.records:,} changelog records in "
        f"{restored.wall_s:.2f}s ({restored.records_per_s:,.0f}/s), {restored.cpu_s:.2f}s CPU, "
        f"{restored.restored_entries:,} entries{' -- ' + restored.wrong if problem else ''}, "
        f"{restored.peak_rss_mb:.0f} MB, load {load}",
        flush=True,
    )


def run_round(
    repeat: int,
    names: list[str],
    engines: list[str],
    targets: list[Target],
    args: argparse.Namespace,
    pythons: dict[str, str],
    results: Results,
) -> None:
    """Round ``repeat``: every workload on every broker and engine, in an order that changes
    between rounds to spread drift of the machine's load: brokers alternate, engines rotate
    by one place per workload and per round, and with ``--sizes`` each engine runs every
    size back to back (ascending in even rounds, descending in odd ones). Rounds are
    outermost so that a bench stopped early still has whole rounds (``--results-json``
    keeps every finished run)."""
    sizes = getattr(args, "size_list", None) or [args.records]
    for index, name in enumerate(names):
        workload = WORKLOADS[name]
        print(f"{name} (round {repeat + 1}): {workload.description}", flush=True)
        mine = [e for e in engines if workload.engines is None or e in workload.engines]
        shift = (repeat + index) % len(mine) if mine else 0
        order = mine[shift:] + mine[:shift]
        for target in targets if repeat % 2 == 0 else targets[::-1]:
            for engine in order:
                for records in sizes if repeat % 2 == 0 else sizes[::-1]:
                    run_once(workload, engine, target, args, pythons[engine], results, records)
                    if args.results_json:
                        save_results(results, args.results_json)


def save_results(results: Results, path: str) -> None:
    rows = [
        {"broker": b, "workload": w, "engine": e, "runs": [asdict(r) for r in runs]}
        for (b, w, e), runs in results.items()
    ]
    Path(path).write_text(json.dumps(rows, indent=1))


def load_results(path: str) -> Results:
    rows = json.loads(Path(path).read_text())
    return {(r["broker"], r["workload"], r["engine"]): [RunResult(**run) for run in r["runs"]] for r in rows}


def print_tables(results: Results, brokers: list[str]) -> None:
    for name in brokers:
        print(f"\n{name}:\n")
        print(table(results, name))
        if any("@" in w for (b, w, _) in results if b == name):
            print(f"\n{name}, marginal CPU per record (per changelog record for a restore):\n")
            print(marginal_table(results, name))
    if len(brokers) > 1:
        print("\nside by side:\n")
        print(side_by_side(results, brokers))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--sizes",
        default=None,
        help="input sizes, e.g. 200000,2000000: every engine runs each, back to back, and a table "
        "of the marginal CPU per record between the smallest and the largest is added",
    )
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--broker", choices=[*BROKERS, "both"], default="tansu")
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("PLATFORM_STREAMS_BOOTSTRAP_SERVERS") or None,
        help="an external cluster instead of a local broker (one broker only)",
    )
    parser.add_argument("--state-root", default=None, help="where run state directories go (default: tmp)")
    parser.add_argument("--results-json", default=None, help="write every finished run here as it ends")
    parser.add_argument("--tables-from", default=None, help="only print the tables of a --results-json file")
    args = parser.parse_args(argv)
    if args.tables_from:
        saved = load_results(args.tables_from)
        print_tables(saved, list(dict.fromkeys(b for b, _, _ in saved)))
        return 0
    engines = [e for e in args.engines.split(",") if e]
    names = [w for w in args.workloads.split(",") if w]
    args.size_list = sorted({int(n) for n in args.sizes.split(",") if n}) if args.sizes else None
    if args.size_list is not None and len(args.size_list) < 2:
        parser.error("--sizes needs two or more sizes (the marginal cost is a difference)")
    unknown = sorted(set(engines) - set(ENGINES)) + sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown {unknown}; engines: {sorted(ENGINES)}, workloads: {sorted(WORKLOADS)}")
    kinds = list(BROKERS) if args.broker == "both" else [args.broker]
    if args.bootstrap and len(kinds) > 1:
        parser.error("--bootstrap names one cluster: use it with --broker tansu or kafka")
    pythons = {e: sys.executable for e in engines}
    if "quixstreams" in engines:
        pythons["quixstreams"] = ensure_quix_python()
    results: Results = {}
    print(f"machine: {machine()}; load average {_load()}", flush=True)
    with ExitStack() as stack:
        load = stack.enter_context(LoadSampler())
        args.registry_url = None
        if any(WORKLOADS[n].input.encoding == "avro" for n in names):
            # the tests' registry (Apicurio, tools/schema-registry), built and started the same way
            from platform_streams.dev.servers.schema_registry import running_registry

            log = Path(tempfile.mkdtemp(prefix="ps-bench-registry-")) / "registry.log"
            args.registry_url = stack.enter_context(running_registry(log))
        targets = []
        for kind in kinds:
            bootstrap = stack.enter_context(broker(args.bootstrap, kind))
            admin = stack.enter_context(KafkaAdmin({"bootstrap.servers": bootstrap}))
            exact = broker_supports(admin, "exact_list_offsets")
            name = kind if not args.bootstrap else "given"
            targets.append(Target(name, bootstrap, admin, exact))
            print(f"broker {name} at {bootstrap} (exact ListOffsets: {exact})", flush=True)
        for repeat in range(args.repeats):
            run_round(repeat, names, engines, targets, args, pythons, results)
    print_tables(results, [t.name for t in targets])
    print(f"\nload average at the end: {_load()}; during the bench: {load.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
