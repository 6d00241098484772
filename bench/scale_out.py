"""Scale-out benchmark: the same application in 1, 2 and 4 worker processes (and Java Kafka
Streams with 1, 2 and 4 stream threads).

    python bench/scale_out.py                                  # embedded broker, 2M records
    python bench/scale_out.py --processes 1,2,4 --engines platform_streams,kafka_streams
    python bench/scale_out.py --records 1000000 --workloads filter_map_json,count_eos_100ms
    PLATFORM_STREAMS_BOOTSTRAP_SERVERS=host:9092 python bench/scale_out.py

For each workload (``bench/workloads.py``, built by ``bench/engine_ps.py``) the input is
produced once to 4 partitions; each run starts ``run_workers(factory, config, N)`` (the
Python API behind ``platform-streams run --workers N``) in a fresh child process with a
fresh application id, output topic and state directories. Throughput is measured from the
group's committed offsets, sampled every 100 ms between 10 % of the input (or, if later,
the moment every worker publishes its share of the tasks on the control topic) and 90 %:
the rate is the least-squares slope of those samples. Committed offsets move in steps, one
per worker commit (every second under at-least-once here), so a rate taken from the two
end points alone is off by up to a commit interval over a window of a few seconds; the fit
averages the steps out. Group joins,
rebalances and the first and last commit intervals are outside the window, so the figure
is the steady state of N processes sharing the partitions. The ratios are the median of
each N over the median of N=1.

``kafka_streams`` runs the same workloads (not the CPU-bound one, which has no Java twin) as
one Java Kafka Streams instance (tools/kafka-streams-oracle/.../Bench.java, as bench/run.py
runs it) with ``num.stream.threads`` = N, measured the same way from its group's committed
offsets; its window opens at 10 % of the input (it publishes no task shares: its N threads
join as one instance, at once). Its commit interval is capped at 1 s like the workers'.

On a 2-core machine the embedded broker shares the cores with the workers: the ratio is
bounded by what the broker leaves to them, and it is reported as measured; 4 workers (or
threads) on 2 cores show contention, not scaling.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import GROUP_TIMING, RunSpec  # noqa: E402
from bench.engine_ps import build  # noqa: E402
from bench.workloads import WORKLOADS, Workload  # noqa: E402
from platform_streams import StreamsBuilder, StreamsConfig  # noqa: E402
from platform_streams.dev.brokers import EmbeddedBroker  # noqa: E402
from platform_streams.dsl import Consumed, Produced  # noqa: E402
from platform_streams.kafka import OFFSET_BEGINNING, KafkaAdmin, TopicPartition, TopicSpec, create_consumer  # noqa: E402
from platform_streams.process_supervisor import run_workers  # noqa: E402
from platform_streams.runtime.membership.control_channel import control_topic_name  # noqa: E402
from platform_streams.serde import Bytes, Json  # noqa: E402

_ENV = "SCALE_OUT_BENCH_SPEC"


#: A workload of this module's own: per-record Python work (~20 us) of the kind that makes
#: an application CPU-bound in the workers rather than in the broker (scoring, enrichment).
CPU_BOUND = Workload(
    "score_json_cpu_bound",
    "stateless",
    WORKLOADS["filter_map_json"].input,
    "map_values(score: ~20 us of Python per record) -> JSON out",
)


def _score(value: dict[str, Any]) -> dict[str, Any]:
    total = 0
    for i in range(250):
        total += (i * value["id"]) % 7
    return {"id": value["id"], "user": value["user"], "score": total}


def _workload(name: str) -> Workload:
    return CPU_BOUND if name == CPU_BOUND.name else WORKLOADS[name]


def topology() -> object:
    """The factory the worker processes call: the workload of ``$SCALE_OUT_BENCH_SPEC``."""
    workload, bootstrap, source, sink, app_id, state_dir = os.environ[_ENV].split("|")
    if workload == CPU_BOUND.name:
        builder = StreamsBuilder()
        builder.stream(source, Consumed(key_serde=Bytes(), value_serde=Json())).map_values(_score).to(
            sink, Produced(key_serde=Bytes(), value_serde=Json())
        )
        return builder
    spec = RunSpec(workload, "platform_streams", bootstrap, source, sink, 0, state_dir, app_id)
    return build(WORKLOADS[workload], spec)


def _child(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s [%(process)d] %(name)s %(message)s"
    )
    workload, bootstrap, _source, _sink, app_id, state_dir = os.environ[_ENV].split("|")
    w = _workload(workload)
    config = StreamsConfig(
        application_id=app_id,
        bootstrap_servers=bootstrap,
        state_dir=Path(state_dir),
        processing_guarantee="exactly_once_v2" if w.exactly_once else "at_least_once",
        commit_interval_ms=min(w.commit_interval_ms, 1_000),
        **GROUP_TIMING,
    )
    return run_workers(topology, config, args.child, close_timeout_s=60)


@contextmanager
def _broker() -> Iterator[tuple[str, int | None]]:
    external = os.environ.get("PLATFORM_STREAMS_BOOTSTRAP_SERVERS")
    if external:
        yield external, None
        return
    with EmbeddedBroker(kill_with_parent=True) as broker:
        yield broker.bootstrap_servers, broker.pid


def _cpu_s(pid: int | None = None) -> float:
    """CPU seconds (user + system) of one process, or of the whole machine (busy time)."""
    tick = os.sysconf("SC_CLK_TCK")
    if pid is None:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
        return (user + nice + system + irq + softirq) / tick
    parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / tick


def _committed(admin: KafkaAdmin, app_id: str, ends: dict[tuple[str, int], int]) -> int:
    return sum(o or 0 for o in admin.committed_offsets(app_id, list(ends)).values())


class _Members:
    """Tails the application's control topic: which worker runs which tasks right now."""

    def __init__(self, bootstrap: str, app_id: str) -> None:
        self._consumer = create_consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                "fetch.wait.max.ms": 10,
            }
        )
        self._topic = control_topic_name(app_id)
        self._assigned = False
        self.active: dict[str, list[str]] = {}

    def stable(self, processes: int, tasks: int = 4) -> bool:
        """True when ``processes`` workers publish ``tasks / processes`` tasks each."""
        if not self._assigned:
            if self._topic not in self._consumer.list_topics(timeout=5).topics:
                return False
            self._consumer.assign([TopicPartition(self._topic, 0, OFFSET_BEGINNING)])
            self._assigned = True
        for msg in self._consumer.consume(1000, 0.01):
            if msg.error() is None and (msg.key() or b"").startswith(b"member/"):
                key = msg.key().decode()
                if msg.value() is None:
                    self.active.pop(key, None)
                else:
                    self.active[key] = json.loads(msg.value())["active"]
        shares = [len(ts) for ts in self.active.values()]
        return len(shares) == processes and all(n == tasks // processes for n in shares)

    def close(self) -> None:
        self._consumer.close()


def _slope(samples: list[tuple[float, int]]) -> float:
    """Records/s: the least-squares slope of (time, committed records) samples."""
    t0 = samples[0][0]
    xs = [t - t0 for t, _ in samples]
    ys = [float(n) for _, n in samples]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    if var <= 0:
        return float("nan")
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var


@dataclass(frozen=True)
class Run:
    records_per_s: float
    #: cores busy during the window (the whole machine), and the broker's share of them
    machine_cores: float
    broker_cores: float


def _java_command(
    bootstrap: str,
    workload: str,
    topics: tuple[str, str],
    app_id: str,
    state_dir: Path,
    ends: dict[int, int],
    threads: int,
) -> list[str]:
    """The Java Kafka Streams app of ``workload`` in one instance with ``threads`` stream threads."""
    from bench.engine_java import ensure_built

    w = WORKLOADS[workload]
    total = sum(ends.values())
    request = {
        **asdict(RunSpec(workload, "kafka_streams", bootstrap, *topics, total, str(state_dir), app_id)),
        "input_ends": {str(p): end for p, end in ends.items()},
        "config": {"num_stream_threads": threads},
        "kind": w.kind,
        "guarantee": "exactly_once_v2" if w.exactly_once else "at_least_once",
        "commit_interval_ms": min(w.commit_interval_ms, 1_000),
        "group_timing": GROUP_TIMING,
    }
    return ["java", "-cp", ensure_built(), "io.platformstreams.oracle.Bench", json.dumps(request)]


def _run(
    bootstrap: str,
    admin: KafkaAdmin,
    workload: str,
    source: str,
    ends: dict[tuple[str, int], int],
    processes: int,
    workdir: Path,
    broker_pid: int | None,
    engine: str = "platform_streams",
) -> Run:
    """One run with ``processes`` workers (Java: stream threads): steady-state records/s and
    where the CPU went."""
    total = sum(ends.values())
    app_id = f"scale-{workload}-{uuid.uuid4().hex[:8]}"
    sink = f"bench-scale-out-{uuid.uuid4().hex[:8]}"
    admin.create_topics([TopicSpec(sink, 4)])
    env = {**os.environ, _ENV: "|".join([workload, bootstrap, source, sink, app_id, str(workdir / app_id)])}
    log = (workdir / f"{app_id}.log").open("w")
    java = engine == "kafka_streams"
    if java:
        by_partition = {p: end for (_, p), end in ends.items()}
        topics = (source, sink)
        state = workdir / app_id
        command = _java_command(bootstrap, workload, topics, app_id, state, by_partition, processes)
    else:
        command = [sys.executable, str(Path(__file__)), "--child", str(processes)]
    child = subprocess.Popen(command, env=env, stdout=log, stderr=log, cwd=ROOT)
    members = _Members(bootstrap, app_id)
    try:
        # the window opens at 10 % of the input, or later once every worker runs its share
        # (a worker that joined late would put a rebalance inside the window)
        low, high = int(total * 0.1), int(total * 0.9)
        t_low: float | None = None
        at_low = 0
        samples: list[tuple[float, int]] = []
        deadline = time.monotonic() + 600
        while True:
            if child.poll() is not None:
                raise RuntimeError(f"workers exited with {child.returncode}; see {log.name}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"run did not finish; see {log.name}")
            # the control topic is read only until the window opens (it costs broker time)
            stable = java or t_low is not None or members.stable(processes)
            done = _committed(admin, app_id, ends)
            now = time.monotonic()
            if t_low is None and done >= low and stable:
                t_low, at_low = now, done
                cpu_low, broker_low = _cpu_s(), _cpu_s(broker_pid) if broker_pid else 0.0
            if t_low is not None:
                samples.append((now, done))
                if done >= high:
                    if done - at_low < total * 0.3:
                        raise RuntimeError(f"the group settled too late to measure (at {at_low} of {total})")
                    seconds = max(1e-6, now - t_low)
                    broker_cpu = (_cpu_s(broker_pid) - broker_low) / seconds if broker_pid else float("nan")
                    return Run(_slope(samples), (_cpu_s() - cpu_low) / seconds, broker_cpu)
            time.sleep(0.1)
    finally:
        members.close()
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(90)
        except subprocess.TimeoutExpired:
            child.kill()
        log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--workloads", default="filter_map_json,count,count_eos_100ms,score_json_cpu_bound")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--processes", default="1,2,4", help="worker processes (Java: stream threads)")
    parser.add_argument("--engines", default="platform_streams", help="platform_streams,kafka_streams")
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)
    from bench.run import produce_input

    counts = [int(n) for n in args.processes.split(",")]
    engines = [e for e in args.engines.split(",") if e]
    workdir = Path(tempfile.mkdtemp(prefix="bench-scale-out-"))
    print(f"cpus: {os.cpu_count()}, records: {args.records}, logs: {workdir}", flush=True)
    rows = []
    with _broker() as (bootstrap, broker_pid), KafkaAdmin({"bootstrap.servers": bootstrap}) as admin:
        for workload in args.workloads.split(","):
            produced = produce_input(bootstrap, admin, _workload(workload).input, args.records, 4)
            ends = {(produced.topic, p): end for p, end in produced.ends.items()}
            for engine in engines:
                if engine == "kafka_streams" and workload not in WORKLOADS:
                    continue  # the CPU-bound workload has no Java twin
                runs: dict[int, list[Run]] = {n: [] for n in counts}
                for repeat in range(args.repeats):
                    for processes in counts if repeat % 2 == 0 else counts[::-1]:
                        run = _run(
                            bootstrap,
                            admin,
                            workload,
                            produced.topic,
                            ends,
                            processes,
                            workdir,
                            broker_pid,
                            engine,
                        )
                        runs[processes].append(run)
                        print(
                            f"{workload} {engine} {processes=} run {repeat + 1}: "
                            f"{run.records_per_s:,.0f} records/s, "
                            f"{run.machine_cores:.2f} cores busy (broker {run.broker_cores:.2f}), "
                            f"load {os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
                rows.append((workload, engine, runs))
    print(f"\ncpus: {os.cpu_count()}; load average at the end {os.getloadavg()[0]:.1f}")
    unit = "processes (Java: stream threads)"
    print(
        "\n| workload | engine | "
        + " | ".join(f"{n} {unit if n == counts[0] else ''} (records/s)".replace("  ", " ") for n in counts)
        + " | "
        + " | ".join(f"{n} vs {counts[0]}" for n in counts[1:])
        + " | cores busy (broker) | runs |"
    )
    print("|---|---|" + "---:|" * (2 * len(counts) - 1) + "---|---|")
    for workload, engine, runs in rows:
        medians = {n: statistics.median(r.records_per_s for r in runs[n]) for n in counts}
        ratios = " | ".join(f"{medians[n] / medians[counts[0]]:.2f}x" for n in counts[1:])
        cores = " / ".join(
            f"{statistics.median(r.machine_cores for r in runs[n]):.2f} "
            f"({statistics.median(r.broker_cores for r in runs[n]):.2f})"
            for n in counts
        )
        detail = " / ".join(", ".join(f"{r.records_per_s:,.0f}" for r in runs[n]) for n in counts)
        print(
            f"| {workload} | {engine} | "
            + " | ".join(f"{medians[n]:,.0f}" for n in counts)
            + f" | {ratios} | {cores} | {detail} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
